"""Deterministic stand-ins for models (fakes, not mocks): same input, same output, in every process."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

from retrieval.embedders.base import Vectors, l2_normalize
from retrieval.rerankers.base import RerankFailed
from retrieval.text import word_tokens


class TokenEmbedder:
    """Sum of per-token random vectors seeded by SHA-256 of the token: shared words mean nearby vectors."""

    def __init__(self, dimension: int = 32) -> None:
        self._dimension = dimension

    @property
    def name(self) -> str:
        return f"fake-token:{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def _token_vector(self, token: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(token.encode()).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self._dimension)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        matrix = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in word_tokens(text):
                matrix[row] += self._token_vector(token)
        return l2_normalize(matrix)

    def embed_query(self, text: str) -> Vectors:
        return self.embed_documents([text])[0]


class ScriptedReranker:
    """Returns a fixed score per document text (``default`` for the rest) and records its calls."""

    def __init__(self, scores: Mapping[str, float], default: float = 0.05) -> None:
        self._scores = dict(scores)
        self._default = default
        self.calls: list[tuple[str, list[str]]] = []

    @property
    def name(self) -> str:
        return "scripted"

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        self.calls.append((query, list(documents)))
        return [self._scores.get(document, self._default) for document in documents]


class FailingReranker:
    def __init__(self, transient: bool = True) -> None:
        self._transient = transient

    @property
    def name(self) -> str:
        return "failing"

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        raise RerankFailed("the reranker service is down", transient=self._transient)
