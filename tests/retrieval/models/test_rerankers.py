"""The real reranker providers: a tiny local cross-encoder, and Cohere's client against a local stand-in."""

import os

import numpy as np
import pytest

from retrieval.models.cohere_client import cohere_client
from retrieval.models.llm.base import LLMRequest
from retrieval.models.llm.cohere_chat import CohereChatModel
from retrieval.models.model_files import ModelUnavailable
from retrieval.models.rerankers.base import Reranker, RerankFailed, sigmoid
from retrieval.models.rerankers.cohere import CohereReranker
from retrieval.models.rerankers.cross_encoder import CrossEncoderReranker
from tests.cohere_standin import cohere_standin, overlap_score

DOCUMENTS = ["we switched from postgres to mysql", "the cat sat on the mat", "use pnpm not npm"]


def test_cross_encoder_scores_are_the_sigmoid_of_the_model_logits(tiny_models):
    reranker = CrossEncoderReranker(str(tiny_models["cross_encoder"]), allow_downloads=False)
    reranker.warm_up()
    scores = reranker.rerank("which database", DOCUMENTS)

    import torch
    from sentence_transformers import CrossEncoder

    raw = CrossEncoder(str(tiny_models["cross_encoder"])).predict(
        [("which database", d) for d in DOCUMENTS], activation_fn=torch.nn.Identity()
    )
    assert scores == pytest.approx([sigmoid(float(logit)) for logit in np.asarray(raw).reshape(-1)], abs=1e-6)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert isinstance(reranker, Reranker)
    assert reranker.rerank("q", []) == []


def test_cross_encoder_that_is_not_cached_is_unavailable_quickly():
    reranker = CrossEncoderReranker("memoria-tests/no-such-model", allow_downloads=False)
    with pytest.raises(ModelUnavailable, match="not in the local Hugging Face cache"):
        reranker.warm_up()


@pytest.mark.slow
def test_cohere_rerank_returns_scores_in_input_order():
    with cohere_standin() as standin:
        reranker = CohereReranker("test-key", base_url=standin.url, model="rerank-v3.5")
        scores = reranker.rerank("mysql postgres", DOCUMENTS)
    assert scores == [overlap_score("mysql postgres", d) for d in DOCUMENTS] == [1.0, 0.0, 0.0]
    request = standin.requests[0]
    assert request["path"] == "/v2/rerank"
    assert request["auth"] == "Bearer test-key"
    assert request["body"]["model"] == "rerank-v3.5"
    assert request["body"]["documents"] == DOCUMENTS
    assert request["body"]["top_n"] == 3


@pytest.mark.slow
def test_cohere_bad_key_is_a_configuration_error_that_names_the_fix():
    with cohere_standin(api_key="right") as standin:
        reranker = CohereReranker("wrong", base_url=standin.url)
        with pytest.raises(RerankFailed, match="check COHERE_API_KEY") as failure:
            reranker.rerank("q", DOCUMENTS)
    assert failure.value.transient is False
    assert "wrong" not in str(failure.value)  # the key never appears in a message


@pytest.mark.slow
def test_cohere_server_errors_are_transient():
    with cohere_standin() as standin:
        standin.fail_with = 503
        with pytest.raises(RerankFailed) as failure:
            CohereReranker("test-key", base_url=standin.url).rerank("q", DOCUMENTS)
    assert failure.value.transient is True


@pytest.mark.slow
def test_the_reranker_and_cohere_chat_share_one_client_and_each_call_keeps_its_own_timeout():
    with cohere_standin() as standin:
        reranker = CohereReranker("test-key", base_url=standin.url, timeout=0.3)
        chat = CohereChatModel("test-key", model="command-a-03-2025", base_url=standin.url, timeout=5.0)
        assert cohere_client("test-key", base_url=standin.url) is cohere_client(
            "test-key", base_url=standin.url
        )
        assert cohere_client("other-key", base_url=standin.url) is not cohere_client(
            "test-key", base_url=standin.url
        )
        standin.delay = 1.0  # longer than the reranker's timeout, well within chat's
        with pytest.raises(RerankFailed) as failed:
            reranker.rerank("postgres pool", ["the postgres pool size is 20"])
        assert failed.value.transient
        assert chat.complete(LLMRequest(purpose="test", system="s", prompt="p", max_tokens=5)).text


@pytest.mark.slow
def test_cohere_results_pointing_outside_the_documents_are_rejected():
    with cohere_standin() as standin:
        standin.bad_index = True
        with pytest.raises(RerankFailed, match=r"index outside 0\.\.2"):
            CohereReranker("test-key", base_url=standin.url).rerank("q", DOCUMENTS)


def test_the_cohere_key_is_never_shown_in_a_model_config():
    from retrieval.models.providers import ModelConfig

    assert "sk-secret" not in repr(ModelConfig(cohere_api_key="sk-secret"))


@pytest.mark.cohere_live
@pytest.mark.skipif(not os.environ.get("COHERE_API_KEY"), reason="COHERE_API_KEY is not set")
def test_real_cohere_rerank_ranks_the_relevant_document_first():
    reranker = CohereReranker(os.environ["COHERE_API_KEY"])
    scores = reranker.rerank("Which database do we use now?", DOCUMENTS)
    assert scores.index(max(scores)) == 0
