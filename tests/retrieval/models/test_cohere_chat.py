import pytest

from retrieval.models.llm.base import LLMRequest, LLMUnavailable
from retrieval.models.llm.cohere_chat import CohereChatModel
from tests.cohere_standin import cohere_standin

QUESTION = LLMRequest(purpose="sufficiency", system="You judge.", prompt="Query: x", max_tokens=50)


@pytest.mark.slow
def test_cohere_chat_answers_with_text_and_billed_tokens():
    with cohere_standin() as standin:
        standin.chat_reply = '{"sufficient": false}'
        response = CohereChatModel("test-key", model="command-a-03-2025", base_url=standin.url).complete(
            QUESTION
        )
    assert response.text == '{"sufficient": false}'
    assert (response.model, response.input_tokens, response.output_tokens) == ("command-a-03-2025", 42, 7)
    body = standin.requests[0]["body"]
    assert standin.requests[0]["path"] == "/v2/chat"
    assert body["messages"] == [
        {"role": "system", "content": "You judge."},
        {"role": "user", "content": "Query: x"},
    ]
    assert body["max_tokens"] == 50


@pytest.mark.slow
def test_cohere_chat_failures_become_llm_unavailable_without_the_key():
    with (
        cohere_standin(api_key="right") as standin,
        pytest.raises(LLMUnavailable, match="Cohere chat failed with 401") as failure,
    ):
        CohereChatModel("wrong-key", model="m", base_url=standin.url).complete(QUESTION)

    assert "wrong-key" not in str(failure.value)
