"""The embedder contract: every provider turns text into unit-length float32 vectors of one width."""

from __future__ import annotations

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
