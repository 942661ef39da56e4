"""The offline embedder: signed feature hashing of stemmed words, word pairs and character trigrams.

It needs no model files, so the server always has a working vector leg. Hashing uses BLAKE2b, which
is stable across processes and machines (Python's ``hash()`` is salted per process and would make
stored vectors meaningless after a restart).
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from retrieval.embedders.base import Vectors, l2_normalize
from retrieval.text import content_terms

UNIGRAM_WEIGHT = 1.0
BIGRAM_WEIGHT = 0.5
TRIGRAM_WEIGHT = 0.2


@lru_cache(maxsize=262_144)
def _bucket(feature: str, dimension: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return digest % dimension, (1.0 if digest >> 63 else -1.0)


def hashed_features(text: str) -> dict[str, float]:
    """Weighted lexical features of ``text`` (before hashing)."""
    terms = content_terms(text)
    features: defaultdict[str, float] = defaultdict(float)
    for term, count in Counter(terms).items():
        features["w:" + term] += UNIGRAM_WEIGHT * (1.0 + math.log(count))
    for left, right in itertools.pairwise(terms):
        features["b:" + left + " " + right] += BIGRAM_WEIGHT
    for term in set(terms):
        padded = f"#{term}#"
        for start in range(len(padded) - 2):
            features["c:" + padded[start : start + 3]] += TRIGRAM_WEIGHT
    return dict(features)


class HashedEmbedder:
    """Deterministic lexical vectors of any width; the fingerprint includes the width and feature version."""

    def __init__(self, dimension: int = 384) -> None:
        if dimension < 8:
            raise ValueError(f"dimension must be >= 8, but got {dimension}")
        self._dimension = dimension

    @property
    def name(self) -> str:
        return f"hashed-v1:{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        matrix = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in hashed_features(text).items():
                index, sign = _bucket(feature, self._dimension)
                matrix[row, index] += sign * weight
        return l2_normalize(matrix)

    def embed_query(self, text: str) -> Vectors:
        return self.embed_documents([text])[0]
