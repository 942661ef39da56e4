"""The embedder contract: every provider turns text into unit-length float32 vectors of one width."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    @property
    def name(self) -> str:
        """A fingerprint stored with every vector this embedder makes, so vectors never silently mix."""
        ...

    @property
    def dimension(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One unit-length row per text, in input order."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """A unit-length vector for a search query."""
        ...


def l2_normalize(matrix: Vectors) -> Vectors:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)


class WrappedEmbedder:
    """An embedder around another one (``inner``, the model itself): the same name and width, and every
    call passed through unless a subclass changes it; any other attribute (backend, backend_note,
    warm_up) is the model's own."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Vectors:
        return self.inner.embed_query(text)


class QueryMemo(WrappedEmbedder):
    """An embedder that remembers its last few query vectors, so the stages of one recall (candidate
    search, feedback weighting) embed its query once. Documents pass straight through."""

    def __init__(self, inner: Embedder, size: int = 64) -> None:
        super().__init__(inner)
        self._size = size
        self._vectors: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def embed_query(self, text: str) -> Vectors:
        with self._lock:
            found = self._vectors.get(text)
            if found is not None:
                self._vectors.move_to_end(text)
                return found
        vector = self.inner.embed_query(text)
        vector.setflags(write=False)  # shared by every stage that asks: nobody may change it
        with self._lock:
            self._vectors[text] = vector
            while len(self._vectors) > self._size:
                self._vectors.popitem(last=False)
        return vector


class CoalescingEmbedder(WrappedEmbedder):
    """An embedder whose document batches from concurrent callers are embedded together: one model call
    for many texts (all-MiniLM-L6-v2 on onnxruntime here, batched by length: 3.6 ms a text against 4.8
    alone for short notes; LoCoMo turns, of very different lengths, cost about what they cost alone;
    ``benchmarks/model_batches.py``). Callers arriving while a batch is being embedded join the next one
    (``storage.group_commit``, the same coalescing as the store's inserts)."""

    def __init__(self, inner: Embedder, max_batch: int = 64) -> None:
        from storage.group_commit import GroupCommit

        super().__init__(inner)
        self._batches: GroupCommit[str, Vectors] = GroupCommit(self._embed, max_items=max_batch)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return self.inner.embed_documents(texts)
        return np.vstack(self._batches.run(list(texts)))

    def _embed(self, texts: list[str]) -> list[Vectors]:
        return list(self.inner.embed_documents(texts))
