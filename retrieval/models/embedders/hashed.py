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
from collections.abc import Iterator, Sequence
from functools import lru_cache

import numpy as np

from retrieval.models.embedders.base import Vectors, l2_normalize
from retrieval.text import content_terms

UNIGRAM_WEIGHT = 1.0
BIGRAM_WEIGHT = 0.5
TRIGRAM_WEIGHT = 0.2


BUCKET_CACHE_SIZE = 262_144  # features whose bucket an embedder remembers (a vocabulary's worth)


def _bucket(feature: str, dimension: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return digest % dimension, (1.0 if digest >> 63 else -1.0)


@lru_cache(maxsize=65_536)
def _trigrams(term: str) -> tuple[str, ...]:
    padded = f"#{term}#"
    return tuple("c:" + padded[start : start + 3] for start in range(len(padded) - 2))


def word_features(terms: Sequence[str]) -> Iterator[tuple[str, float]]:
    """Each distinct word (log-scaled by its count, in first-occurrence order), then each adjacent pair."""
    for term, count in Counter(terms).items():
        yield "w:" + term, UNIGRAM_WEIGHT * (1.0 + math.log(count))
    for left, right in itertools.pairwise(terms):
        yield "b:" + left + " " + right, BIGRAM_WEIGHT


def hashed_features(text: str) -> dict[str, float]:
    """Weighted lexical features of ``text`` (before hashing): its word features and the character
    trigrams of each distinct word, in an order fixed by the text alone."""
    terms = content_terms(text)
    features: defaultdict[str, float] = defaultdict(float)
    for feature, weight in word_features(terms):
        features[feature] += weight
    for term in dict.fromkeys(terms):
        for trigram in _trigrams(term):
            features[trigram] += TRIGRAM_WEIGHT
    return dict(features)


def is_hashed(embedder_name: str) -> bool:
    """Whether vectors of this name are the offline backend's hashed word features, not a model's (the
    fusion weight, the relevance floor and the feedback closeness are measured per kind)."""
    return embedder_name.startswith("hashed-")


class HashedEmbedder:
    """Deterministic lexical vectors of any width; the fingerprint includes the width and feature version."""

    def __init__(self, dimension: int = 384) -> None:
        if dimension < 8:
            raise ValueError(f"dimension must be >= 8, but got {dimension}")
        self._dimension = dimension
        self._buckets: dict[str, tuple[int, float]] = {}  # feature -> (index, sign), bounded
        self._trigram_parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # term -> its trigrams, bounded

    @property
    def name(self) -> str:
        return f"hashed-v1:{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """The features of ``hashed_features`` summed into their signed buckets; a word's trigram buckets
        are looked up once per embedder, not once per occurrence."""
        return self._embed(texts, query=False)

    def embed_query(self, text: str) -> Vectors:
        """As a memory's, but from the query's words (``retrieval.text.query_word_tokens``: its clitics
        match nothing)."""
        return self._embed([text], query=True)[0]

    def _embed(self, texts: Sequence[str], *, query: bool) -> Vectors:
        counts: list[int] = []  # features per text
        columns: list[np.ndarray] = []
        values: list[np.ndarray] = []
        for text in texts:
            terms = content_terms(text, query=query)
            before = len(columns)
            buckets = [(self._bucket_of(feature), weight) for feature, weight in word_features(terms)]
            columns.append(np.asarray([column for (column, _), _ in buckets], dtype=np.intp))
            values.append(np.asarray([sign * weight for (_, sign), weight in buckets], dtype=np.float32))
            for term in dict.fromkeys(terms):
                trigram_columns, trigram_values = self._trigram_part(term)
                columns.append(trigram_columns)
                values.append(trigram_values)
            counts.append(sum(len(part) for part in columns[before:]))
        matrix = np.zeros((len(texts), self._dimension), dtype=np.float32)
        if columns:
            rows = np.repeat(np.arange(len(texts), dtype=np.intp), counts)
            # Unbuffered and in a fixed order: each cell sums its features in the same order, in float32,
            # in every process.
            np.add.at(matrix, (rows, np.concatenate(columns)), np.concatenate(values))
        return l2_normalize(matrix)

    def _bucket_of(self, feature: str) -> tuple[int, float]:
        bucket = self._buckets.get(feature)
        if bucket is None:
            if len(self._buckets) >= BUCKET_CACHE_SIZE:
                self._buckets.clear()
            bucket = self._buckets[feature] = _bucket(feature, self._dimension)
        return bucket

    def _trigram_part(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(columns, signed weights) of ``term``'s character trigrams."""
        part = self._trigram_parts.get(term)
        if part is None:
            if len(self._trigram_parts) >= BUCKET_CACHE_SIZE:
                self._trigram_parts.clear()
            buckets = [self._bucket_of(trigram) for trigram in _trigrams(term)]
            part = self._trigram_parts[term] = (
                np.asarray([column for column, _ in buckets], dtype=np.intp),
                np.asarray([sign * TRIGRAM_WEIGHT for _, sign in buckets], dtype=np.float32),
            )
        return part
