"""The LLM port used by the gate, iterative retrieval, the LLM reranker and (later) consolidation.

Stages call ``complete`` synchronously from the pipeline's worker thread. An implementation may be the
client's own LLM reached by MCP sampling, or Cohere chat. When the client can only answer between
rounds (the 2026-07-28 protocol), ``complete`` raises ``ClientInputNeeded`` and the tool call returns
the question to the client; the retried call replays the recorded answers and continues.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class LLMRequest:
    purpose: str  # "gate", "sufficiency", "rerank", ...: for the trace
    system: str
    prompt: str
    max_tokens: int = 400
    model_hint: str | None = None

    @property
    def key(self) -> str:
        """Stable identity of the question, so a recorded answer is found again on a retried call."""
        material = json.dumps([self.purpose, self.system, self.prompt, self.max_tokens, self.model_hint])
        return f"{self.purpose}-" + hashlib.sha256(material.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class LLMResponse:
    text: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None


class LLMUnavailable(RuntimeError):
    """The LLM could not answer (refused, errored, timed out): the caller falls back and traces why."""


class ClientInputNeeded(Exception):
    """The answer must come from the client in another round (2026-07-28 input-required flow)."""

    def __init__(self, requests: dict[str, LLMRequest]) -> None:
        super().__init__(f"{len(requests)} LLM request(s) need the client")
        self.requests = requests


@runtime_checkable
class LanguageModel(Protocol):
    @property
    def name(self) -> str: ...

    def complete(self, request: LLMRequest) -> LLMResponse: ...


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in an LLM's answer (models like to wrap JSON in prose or code fences)."""
    match = _JSON_OBJECT.search(text)
    if match is None:
        raise LLMUnavailable(f"the LLM did not answer with a JSON object: {text[:120]!r}")
    try:
        value = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise LLMUnavailable(f"the LLM's JSON does not parse ({exc.msg}): {match.group(0)[:120]!r}") from None
    except (ValueError, RecursionError) as exc:  # an integer too long to convert, nesting too deep
        raise LLMUnavailable(
            f"the LLM's JSON cannot be read ({type(exc).__name__}): {match.group(0)[:120]!r}"
        ) from None
    if not isinstance(value, dict):
        raise LLMUnavailable("the LLM's JSON is not an object")
    return value
