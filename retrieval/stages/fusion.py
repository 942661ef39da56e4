"""Fusing the vector and full-text legs into one candidate list (pure).

fused = w x semantic + (1 - w) x keyword, both terms in [0, 1], where semantic = (1 - c) x cosine + c x
max(cosine, context cosine), floored at 0 (``storage.records.semantic_score``): the query's cosine with
the memory's vector and with its context vector, the memory with its neighbours in its episode. A
conversation's turn or a step of a task often means little alone ("I've been playing for a month now");
its context says what it is about. The context only lifts: a memory that says it plainly among unrelated
neighbours ranks as it would alone. With a model, c = 0.5 and w = 2/3, so the memory's own meaning, its
context's and its words weigh a third each; the offline hashed vectors are word features and take no
context (c = 0: the full-text leg already reads the turn before). Where no scope copy holds a memory (a
scope LanceDB serves) its context is unknown and semantic is its cosine. Two readings of keyword:

- for ranking, keyword = bm25 / the best bm25 found (``fused_score``): the best full-text match of the
  query weighs as much against the vector leg whatever the query's words, which ranks evidence first more
  often than the absolute reading (docs/retrieval.md has the figures);
- for the relevance floor, keyword = min(1, bm25 / full) (``fused_absolute``), where ``full`` is the score
  of a memory matching every query term once (the sum of their idf, a term no memory uses counting with the
  highest idf): a memory matching one common word of the query scores low even when it is the best match
  there is, so it is filler and the floor keeps it out. Where the index keeps no term statistics (LanceDB's,
  for scopes too big to copy) there is no full match to read against and the floor reads the ranking score.

A memory found by only one leg is still scored on both: a full-text hit gets its cosine from its stored
vector when that vector came from the same embedder, and its context cosine from ``contexts``; a vector hit
gets its BM25 from ``keywords`` (the scope copy's index scores any memory; a memory it does not hold, or
that LanceDB's index serves, scores none there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from retrieval.models.embedders.hashed import is_hashed
from retrieval.types import Candidate
from storage.records import MemoryRecord, SearchHit, semantic_score

SEMANTIC_VECTOR_WEIGHT = 2.0 / 3.0
LEXICAL_VECTOR_WEIGHT = 0.3
SEMANTIC_CONTEXT_SHARE = 0.5


def vector_weight_for(configured: float | None, embedder_name: str) -> float:
    """``w``: the configured one, or by embedder. The offline hashed vectors are lexical features, a
    weaker echo of BM25, so full-text gets more weight (0.3; 0.2-0.4 measure alike on LoCoMo, 0.5 is
    clearly worse); a sentence-transformers model adds meaning BM25 lacks (2/3 with the context share
    below: on LoCoMo's tuning conversations w 0.5 ranked worse at R@5 and R@10 once the episode
    neighbourhood and the answer type lent on top of the fused score; docs/retrieval.md)."""
    if configured is not None:
        return configured
    return LEXICAL_VECTOR_WEIGHT if is_hashed(embedder_name) else SEMANTIC_VECTOR_WEIGHT


def context_share_for(configured: float | None, embedder_name: str) -> float:
    """``c``: the configured one, or by embedder: 0.5 with a model (0.3-0.5 measure alike on LoCoMo's
    tuning conversations, 0.7 ranks worse), none on hashed vectors (their context cost R@5 there)."""
    if configured is not None:
        return configured
    return 0.0 if is_hashed(embedder_name) else SEMANTIC_CONTEXT_SHARE


@dataclass
class _Merged:
    record: MemoryRecord
    vector: np.ndarray | None
    vector_score: float | None = None
    context_score: float | None = None
    fulltext_score: float | None = None
    vector_leg: bool = False
    fulltext_leg: bool = False


def fuse(
    vector_hits: Sequence[SearchHit],
    fulltext_hits: Sequence[SearchHit],
    *,
    query_vector: np.ndarray | None,
    embedder_name: str,
    vector_weight: float,
    limit: int,
    fulltext_ceiling: float | None = None,
    context_share: float = 0.0,
    contexts: Mapping[str, float] | None = None,
    keywords: Mapping[str, float] | None = None,
) -> tuple[tuple[Candidate, ...], int]:
    """Return the best ``limit`` candidates by fused score, and how many distinct memories were seen.
    ``fulltext_ceiling``: the BM25 score of a full match of the query (None or 0: unknown, and the
    candidates carry no ``fused_absolute``). ``context_share``: c in the semantic score, with each
    memory's context cosine from its vector hit or ``contexts``. ``keywords``: the BM25 of vector hits the
    full-text leg did not return, on its hits' scale."""
    merged: dict[str, _Merged] = {}
    for hit in vector_hits:
        entry = merged.setdefault(hit.record.id, _Merged(hit.record, hit.vector))
        entry.vector_score = hit.score
        entry.context_score = hit.context
        entry.vector_leg = True
    for hit in fulltext_hits:
        entry = merged.setdefault(hit.record.id, _Merged(hit.record, hit.vector))
        entry.fulltext_score = hit.score
        entry.fulltext_leg = True
    if keywords:
        for entry in merged.values():
            if entry.fulltext_score is None:
                entry.fulltext_score = keywords.get(entry.record.id)

    if query_vector is not None:
        unscored = [
            (entry, entry.vector)
            for entry in merged.values()
            if entry.vector_score is None
            and entry.vector is not None
            and entry.record.embedder == embedder_name
        ]
        if unscored:
            # One product for every full-text hit the vector leg did not return: a product lets the
            # interpreter go to another thread and waits for its turn back, and one a hit made a recall
            # under load wait up to the switch interval (5 ms) for each.
            cosines = np.stack([vector for _, vector in unscored]) @ np.asarray(query_vector)
            for (entry, _), cosine in zip(unscored, cosines.tolist(), strict=True):
                entry.vector_score = cosine

    best = max((entry.fulltext_score or 0.0 for entry in merged.values()), default=0.0)
    # Scored first and made into candidates only within ``limit``: the legs find up to twice as many
    # memories as are kept, and a candidate's making is most of what fusing one costs.
    scored: list[tuple[float, str, float | None, _Merged]] = []
    for entry in merged.values():
        if entry.context_score is None and contexts:
            entry.context_score = contexts.get(entry.record.id)
        semantic = (
            semantic_score(entry.vector_score, entry.context_score, context_share)
            if entry.vector_score is not None
            else 0.0
        )
        bm25 = entry.fulltext_score or 0.0
        keyword = bm25 / best if best > 0 else 0.0
        absolute: float | None = None
        if fulltext_ceiling:
            absolute = vector_weight * semantic + (1.0 - vector_weight) * min(1.0, bm25 / fulltext_ceiling)
        fused = vector_weight * semantic + (1.0 - vector_weight) * keyword
        scored.append((fused, entry.record.id, absolute, entry))
    scored.sort(key=lambda item: (-item[0], item[1]))
    candidates = tuple(
        Candidate.of(
            entry.record,
            found_by=tuple(
                leg for leg, hit in (("vector", entry.vector_leg), ("fulltext", entry.fulltext_leg)) if hit
            ),
            vector_score=entry.vector_score,
            context_score=entry.context_score if context_share > 0.0 else None,
            fulltext_score=entry.fulltext_score,
            fused_score=fused,
            fused_absolute=absolute,
        )
        for fused, _, absolute, entry in scored[:limit]
    )
    return candidates, len(merged)
