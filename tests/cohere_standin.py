"""A local HTTP stand-in for Cohere's v2 rerank endpoint: real HTTP, real client, no network."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from retrieval.text import word_tokens
from tests.standin_http import JsonHandler, serving


@dataclass
class CohereStandIn:
    url: str
    api_key: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    fail_with: int | None = None
    bad_index: bool = False
    chat_reply: str = '{"sufficient": true, "confidence": 0.9, "sub_queries": []}'
    delay: float = 0.0  # seconds before each answer


def overlap_score(query: str, document: str) -> float:
    """Share of the query's words found in the document: easy to compute by hand in tests."""
    query_words = set(word_tokens(query))
    return len(query_words & set(word_tokens(document))) / len(query_words) if query_words else 0.0


@contextmanager
def cohere_standin(api_key: str = "test-key") -> Iterator[CohereStandIn]:
    state = CohereStandIn(url="", api_key=api_key)

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(state.delay)
            state.requests.append(
                {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
            )
            if self.headers.get("Authorization") != f"Bearer {state.api_key}":
                return self._reply(401, {"message": "invalid api token"})
            if state.fail_with is not None:
                return self._reply(state.fail_with, {"message": "stand-in failure"})
            if self.path == "/v2/chat":
                return self._reply(
                    200,
                    {
                        "id": "chat-standin",
                        "finish_reason": "COMPLETE",
                        "message": {
                            "role": "assistant",
                            "content": [{"type": "text", "text": state.chat_reply}],
                        },
                        "usage": {
                            "billed_units": {"input_tokens": 42, "output_tokens": 7},
                            "tokens": {"input_tokens": 50, "output_tokens": 7},
                        },
                    },
                )
            if self.path != "/v2/rerank":
                return self._reply(404, {"message": f"no route {self.path}"})

            scored = [
                {"index": index, "relevance_score": overlap_score(body["query"], document)}
                for index, document in enumerate(body["documents"])
            ]
            scored.sort(key=lambda item: -item["relevance_score"])
            if state.bad_index:
                scored[0]["index"] = len(body["documents"]) + 5
            top_n = body.get("top_n") or len(scored)
            self._reply(
                200,
                {"id": "standin", "results": scored[:top_n], "meta": {"billed_units": {"search_units": 1}}},
            )

    with serving(Handler) as base:
        state.url = base
        yield state
