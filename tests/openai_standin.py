"""A local HTTP stand-in for an OpenAI-compatible chat endpoint (what Ollama, llama.cpp, vLLM and OpenAI
serve at ``/v1/chat/completions``): real HTTP, the real client, no network. ``answer`` maps a request's
system prompt to the text to reply."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.standin_http import JsonHandler, serving


@dataclass
class ChatStandIn:
    url: str  # the base URL, up to /v1
    api_key: str | None
    answer: Callable[[str, str], str] = lambda system, prompt: "{}"
    requests: list[dict[str, Any]] = field(default_factory=list)
    fail_with: int | None = None
    garbled: bool = False


@contextmanager
def chat_standin(api_key: str | None = None) -> Iterator[ChatStandIn]:
    state = ChatStandIn(url="", api_key=api_key)

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(
                {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
            )
            if self.path != "/v1/chat/completions":
                return self._reply(404, {"error": {"message": f"no route {self.path}"}})
            if state.api_key is not None and self.headers.get("Authorization") != f"Bearer {state.api_key}":
                return self._reply(401, {"error": {"message": "invalid api key"}})
            if state.fail_with is not None:
                return self._reply(state.fail_with, {"error": {"message": "stand-in failure"}})
            if state.garbled:
                return self._reply(200, {"object": "chat.completion", "choices": []})
            messages = {message["role"]: message["content"] for message in body["messages"]}
            text = state.answer(messages.get("system", ""), messages.get("user", ""))
            return self._reply(
                200,
                {
                    "id": "chatcmpl-standin",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40},
                },
            )

    with serving(Handler) as base:
        state.url = base + "/v1"
        yield state
