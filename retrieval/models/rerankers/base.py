"""The reranker contract: one relevance score in [0, 1] per document, in input order."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable


class RerankFailed(RuntimeError):
    """A rerank call failed. ``transient`` errors (timeouts, 5xx) are retried next time; others are
    configuration problems (bad key, unknown model) that the message tells the operator to fix."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


@runtime_checkable
class Reranker(Protocol):
    @property
    def name(self) -> str: ...

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """Scores in [0, 1], one per document, in input order."""
        ...


def sigmoid(logit: float) -> float:
    """Map a cross-encoder logit to (0, 1) without overflowing for large magnitudes."""
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    exp = math.exp(logit)
    return exp / (1.0 + exp)
