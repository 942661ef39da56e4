"""The OpenAI-compatible chat model against a local stand-in of that API."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from retrieval.models.llm.base import LLMRequest, LLMUnavailable
from retrieval.models.llm.openai_chat import OpenAIChatModel
from tests.openai_standin import chat_standin

QUESTION = LLMRequest(purpose="gate", system="Decide.", prompt="billing invoices", max_tokens=60)


@pytest.mark.slow
def test_a_question_is_one_chat_completion_and_its_answer_and_usage_come_back():
    with chat_standin(api_key="local-key") as standin:
        standin.answer = lambda system, prompt: f'{{"echo": "{prompt}"}}'
        model = OpenAIChatModel(standin.url, model="llama3.2", api_key="local-key")
        response = model.complete(QUESTION)
    assert model.name == "openai-chat:llama3.2"
    assert (response.text, response.model) == ('{"echo": "billing invoices"}', "llama3.2")
    assert (response.input_tokens, response.output_tokens) == (31, 9)
    [sent] = standin.requests
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer local-key"
    assert sent["body"] == {
        "model": "llama3.2",
        "messages": [
            {"role": "system", "content": "Decide."},
            {"role": "user", "content": "billing invoices"},
        ],
        "max_tokens": 60,
        "temperature": 0.0,
    }


@pytest.mark.slow
def test_a_local_endpoint_needs_no_key():
    with chat_standin() as standin:
        OpenAIChatModel(standin.url + "/", model="qwen2.5").complete(QUESTION)
    assert standin.requests[0]["auth"] is None and standin.requests[0]["path"] == "/v1/chat/completions"


@pytest.mark.slow
def test_every_failure_is_llm_unavailable_with_the_reason():
    with chat_standin(api_key="right") as standin:
        with pytest.raises(LLMUnavailable, match="HTTP 401"):
            OpenAIChatModel(standin.url, model="m", api_key="wrong").complete(QUESTION)
        standin.fail_with = 503
        with pytest.raises(LLMUnavailable, match="HTTP 503"):
            OpenAIChatModel(standin.url, model="m", api_key="right").complete(QUESTION)
        standin.fail_with, standin.garbled = None, True
        with pytest.raises(LLMUnavailable, match="no choices"):
            OpenAIChatModel(standin.url, model="m", api_key="right").complete(QUESTION)
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with pytest.raises(LLMUnavailable, match="could not be reached"):
        OpenAIChatModel(f"http://127.0.0.1:{closed}/v1", model="m", timeout=2).complete(QUESTION)


def test_a_base_url_that_is_no_url_or_a_missing_model_is_refused():
    with pytest.raises(ValueError, match="http"):
        OpenAIChatModel("127.0.0.1:11434", model="m")
    with pytest.raises(ValueError, match="MEMORIA_OPENAI_MODEL"):
        OpenAIChatModel("http://127.0.0.1:11434/v1", model="")


ANSWER = b'{"choices": [{"message": {"content": "ok"}}]}'


@contextmanager
def slow_endpoint(parts: list[bytes], *, first_after: float = 0.0, between: float = 0.0) -> Iterator[str]:
    """A chat endpoint that waits ``first_after`` seconds before its headers, then sends the answer in
    ``parts``, ``between`` seconds after each; yields its base URL."""

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(first_after)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(sum(map(len, parts))))
            self.end_headers()
            try:
                for part in parts:
                    self.wfile.write(part)
                    self.wfile.flush()
                    time.sleep(between)
            except OSError:
                pass  # the client gave up

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_an_answer_that_trickles_in_is_bounded_by_the_timeout_as_a_whole():
    """A trial's endpoint sent its answer a byte a second: each read was within the socket's timeout, and
    the remember waited minutes."""
    with slow_endpoint([bytes([byte]) for byte in ANSWER], between=0.1) as url:
        started = time.monotonic()
        with pytest.raises(LLMUnavailable, match="took longer than its timeout"):
            OpenAIChatModel(url, model="m", timeout=1).complete(QUESTION)
        assert time.monotonic() - started < 4  # the whole answer takes 4.6 s to trickle in


@pytest.mark.slow
def test_the_wait_for_the_answers_headers_counts_towards_the_timeout():
    """The deadline started once the headers had come: an endpoint slow to answer and then slow to send
    got up to twice its timeout."""
    # (headers after 0.9 s, within the socket's timeout of 1 s)
    with slow_endpoint([ANSWER[:15], ANSWER[15:30], ANSWER[30:]], first_after=0.9, between=0.6) as url:
        started = time.monotonic()
        with pytest.raises(LLMUnavailable, match="took longer than its timeout"):
            OpenAIChatModel(url, model="m", timeout=1).complete(QUESTION)  # the answer is whole after 2.1 s
        # A read begun before the deadline waits only for what is left of it (a review: up to a whole
        # timeout more).
        assert time.monotonic() - started < 1.3  # 1.5 s, when the read waited for its part
