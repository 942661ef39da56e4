"""Any OpenAI-compatible chat endpoint as the LLM (``MEMORIA_LLM=openai``): a local Ollama or llama.cpp
server, vLLM, OpenAI itself. Configured by base URL (the part before ``/chat/completions``, e.g.
``http://127.0.0.1:11434/v1``), model and, where the endpoint wants one, a key.

Spoken with the standard library's HTTP client: one POST per question, no SDK to install. Every failure
(refused, an HTTP error, a timeout, an answer of the wrong shape) is ``LLMUnavailable``, so the stage
that asked falls back to its deterministic path and traces why.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from retrieval.models.llm.base import LLMRequest, LLMResponse, LLMUnavailable


class OpenAIChatModel:
    def __init__(
        self, base_url: str, *, model: str, api_key: str | None = None, timeout: float = 30.0
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"MEMORIA_OPENAI_BASE_URL must be an http(s) URL such as http://127.0.0.1:11434/v1, not {base_url!r}"
            )
        if not model:
            raise ValueError("MEMORIA_OPENAI_MODEL must name the model the endpoint serves")
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._api_key = api_key
        self._timeout = timeout

    @property
    def name(self) -> str:
        return f"openai-chat:{self._model}"

    def complete(self, request: LLMRequest) -> LLMResponse:
        body = {
            "model": self._model,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.prompt},
            ],
            "max_tokens": request.max_tokens,
            "temperature": 0.0,
        }
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        post = urllib.request.Request(
            self._url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        # The timeout bounds the whole call, from the request on: the wait for the answer's headers counts.
        deadline = time.monotonic() + self._timeout
        try:
            with urllib.request.urlopen(post, timeout=self._timeout) as response:
                answer = json.loads(_read_within(response, deadline))
        except urllib.error.HTTPError as exc:
            raise LLMUnavailable(f"the chat endpoint answered HTTP {exc.code}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise LLMUnavailable(f"the chat endpoint could not be reached ({type(exc).__name__})") from exc
        except json.JSONDecodeError as exc:
            raise LLMUnavailable("the chat endpoint's answer is not JSON") from exc
        try:
            text = answer["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMUnavailable("the chat endpoint's answer has no choices[0].message.content") from exc
        usage = answer.get("usage") if isinstance(answer, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        return LLMResponse(
            text=str(text),
            model=str(answer.get("model") or self._model),
            input_tokens=_int(usage.get("prompt_tokens")),
            output_tokens=_int(usage.get("completion_tokens")),
        )


# At most this much of an answer is read (a chat answer is a few kilobytes; a trial's endpoint sent on).
MAX_ANSWER_BYTES = 4 << 20
_CHUNK = 64 << 10


def _read_within(response: Any, deadline: float) -> bytes:
    """The answer's body, read by chunks until ``deadline``: the socket's timeout bounds each read, not the
    call (a trial's endpoint sent a byte a second, and the remember waited minutes)."""
    late = LLMUnavailable("the chat endpoint's answer took longer than its timeout to arrive")
    # Each read waits only for what is left of the time (a review: a read begun just before the deadline
    # waited a whole timeout more).
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
    read = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise late
        if sock is not None:
            sock.settimeout(left)
        try:
            chunk = response.read1(_CHUNK) if hasattr(response, "read1") else response.read(_CHUNK)
        except TimeoutError:
            raise late from None
        if not chunk:
            return bytes(read)
        read += chunk
        if len(read) > MAX_ANSWER_BYTES:
            raise LLMUnavailable(f"the chat endpoint's answer is larger than {MAX_ANSWER_BYTES >> 20} MB")


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
