"""The plain BM25 floor every quality report carries: Okapi BM25 (k1 1.2, b 0.75) over lowercase
``[a-z0-9]+`` tokens, each turn indexed as "speaker: text", the corpus being the turns of the question's
own conversation. No stemming, no stop words: the reference baseline, not the server's search."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25:
    def __init__(self, documents: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self._k1, self._b = k1, b
        self._terms = [Counter(tokens(document)) for document in documents]
        self._lengths = [sum(terms.values()) for terms in self._terms]
        self._average = sum(self._lengths) / len(self._lengths) if self._lengths else 0.0
        frequency: Counter[str] = Counter()
        for terms in self._terms:
            frequency.update(terms.keys())
        count = len(self._terms)
        # Lucene's idf, never negative: log(1 + (N - df + 0.5) / (df + 0.5)).
        self._idf = {term: math.log(1.0 + (count - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}

    def scores(self, query: str) -> list[float]:
        wanted = [term for term in tokens(query) if term in self._idf]  # a repeated word counts again
        results = []
        for terms, length in zip(self._terms, self._lengths, strict=True):
            norm = (
                self._k1 * (1.0 - self._b + self._b * length / self._average) if self._average else self._k1
            )
            score = 0.0
            for term in wanted:
                tf = terms.get(term, 0)
                if tf:
                    score += self._idf[term] * tf * (self._k1 + 1.0) / (tf + norm)
            results.append(score)
        return results

    def rank(self, query: str, limit: int) -> list[int]:
        """Indexes of the best ``limit`` documents, best first (ties: earlier document first); documents
        that share no term with the query are left out."""
        scored = [(score, index) for index, score in enumerate(self.scores(query)) if score > 0.0]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [index for _, index in scored[:limit]]
