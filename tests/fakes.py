"""Deterministic stand-ins for models and the store (fakes, not mocks): same input, same output."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np

from retrieval.models.embedders.base import Vectors, l2_normalize
from retrieval.models.llm.base import LLMRequest, LLMResponse, LLMUnavailable
from retrieval.models.rerankers.base import RerankFailed
from retrieval.text import word_tokens
from storage.records import EpisodeMemberStub, MemoryRecord, SearchHit


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


class ScriptedLLM:
    """Answers by purpose ("gate", "sufficiency", "rerank") from a script, and records the questions."""

    def __init__(self, answers: dict[str, list[str]], model: str = "scripted-llm") -> None:
        self._answers = {purpose: list(texts) for purpose, texts in answers.items()}
        self._model = model
        self.asked: list[LLMRequest] = []

    @property
    def name(self) -> str:
        return self._model

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.asked.append(request)
        queue = self._answers.get(request.purpose)
        if not queue:
            raise LLMUnavailable(f"no scripted answer for {request.purpose}")
        text = queue.pop(0) if len(queue) > 1 else queue[0]
        return LLMResponse(text=text, model=self._model, input_tokens=10, output_tokens=5)


class FakeSource:
    """An in-memory candidate source: cosine over stored vectors, word overlap as the 'BM25'. It keeps no
    episode neighbours, so it knows no memory's context (as for a scope LanceDB serves)."""

    def __init__(self, embedder: TokenEmbedder, memories: list[MemoryRecord]) -> None:
        self.embedder = embedder
        self.memories = memories
        self.vectors = {m.id: embedder.embed_query(m.content) for m in memories}
        self.calls: list[tuple] = []

    def vector_search(
        self,
        scope,
        vector,
        *,
        embedder,
        limit,
        kinds=None,
        tags=None,
        window=None,
        all_tags=False,
        context_share=0.0,
        stored=False,
    ):
        self.calls.append(("vector", scope, embedder, limit))
        hits = [
            SearchHit(m, float(np.dot(vector, self.vectors[m.id])), self.vectors[m.id])
            for m in self.memories
            if m.embedder == embedder
            and (window is None or window.holds(m.created_at))
            and (m.status == "active" or (stored and m.status != "purged"))
        ]
        return sorted(hits, key=lambda h: -h.score)[:limit]

    def context_scores(self, scope, vector, memory_ids, *, embedder):
        return {}

    def fulltext_search(
        self, scope, text, *, limit, kinds=None, tags=None, window=None, all_tags=False, stored=False
    ):
        self.calls.append(("fulltext", scope, limit))
        words = set(text.lower().split())
        hits = [
            SearchHit(m, float(len(words & set(m.content.lower().split()))), self.vectors[m.id])
            for m in self.memories
            if (window is None or window.holds(m.created_at))
            and (m.status == "active" or (stored and m.status != "purged"))
        ]
        return sorted((h for h in hits if h.score > 0), key=lambda h: -h.score)[:limit]

    def fulltext_scores(self, scope, text, memory_ids):
        words, wanted = set(text.lower().split()), set(memory_ids)
        return {
            m.id: float(len(words & set(m.content.lower().split()))) for m in self.memories if m.id in wanted
        }

    def fulltext_engine(self, scope):
        return "word-overlap"

    def fulltext_ceiling(self, scope, text):
        return None  # word overlap keeps no statistics: scores are relative to the best

    def episode_member_stubs(self, scope, episode_ids):
        wanted = set(episode_ids)
        return [
            EpisodeMemberStub(m.id, m.episode_id, m.created_at, m.weight)
            for m in self.memories
            if m.episode_id in wanted and m.status == "active"
        ]

    def get_memories(self, memory_ids, scope):
        wanted = set(memory_ids)
        return {m.id: m for m in self.memories if m.id in wanted}

    def get_episodes(self, scope, episode_ids):
        return {}

    def newer_contradictions(self, scope, memory_ids):
        return {}


class RecordingEmbedder(TokenEmbedder):
    """A ``TokenEmbedder`` that keeps every text it was asked to embed (documents and queries)."""

    def __init__(self, dimension: int = 32) -> None:
        super().__init__(dimension)
        self.seen: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.seen.extend(texts)
        return super().embed_documents(texts)


class TableEmbedder:
    """Vectors looked up by text (unit length), so cosines between texts are known exactly; ``calls``
    counts the texts embedded."""

    def __init__(self, vectors: Mapping[str, Sequence[float]], name: str = "fake-table") -> None:
        self._vectors = {text: np.asarray(vector, dtype=np.float32) for text, vector in vectors.items()}
        self._dimension = len(next(iter(self._vectors.values())))
        self._name = name
        self.calls: list[str] = []

    @property
    def name(self) -> str:
        return f"{self._name}:{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.calls.extend(texts)
        return l2_normalize(np.vstack([self._vectors[text] for text in texts]))

    def embed_query(self, text: str) -> Vectors:
        return self.embed_documents([text])[0]
