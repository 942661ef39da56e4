"""Stage: the relevance floor (``min_fact_score``). A candidate whose relevance is below the floor never
enters the context: recall returns fewer than top_k memories, or none, rather than filler. Each one dropped
is traced with its score and the floor. The score compared is ``Candidate.floor_score``: the lower of the
relevance with BM25 read against a full match of the query (absolute) and the relevance ranking uses
(BM25 read against the best match). The instruction flag, age decay, boosts and feedback weights come after
the floor: recall's note says when they put a match that passed it below it as shown.

The default floor depends on what the relevance is made of (``relevance_floor_for``): fused scores of the
offline hashed vectors and BM25, fused scores of a sentence-transformers model and BM25, or a reranker's.
"""

from __future__ import annotations

from retrieval.models.embedders.hashed import is_hashed
from retrieval.trace import BelowThreshold, FloorApplied, StageOutput
from retrieval.types import Candidate, RecallRequest

# Measured with benchmarks/floor.py on the LoCoMo development conversations (the method is in
# docs/retrieval.md): the relevance below which 1% of the evidence turns fall, rounded down; for a model
# the next step up, which the quality benchmark ranked better and which answers twice as many queries
# about things never stored with nothing (2% of the evidence below it).
LEXICAL_FLOOR = 0.10  # hashed vectors + BM25
SEMANTIC_FLOOR = 0.15  # a sentence-transformers model + BM25
RERANKER_FLOOR = 0.02  # a cross-encoder's or Cohere's relevance (not measured here: no weights offline)


def relevance_floor_for(configured: float | None, embedder_name: str, reranked: bool) -> float:
    """The configured floor (``min_fact_score``), or the one measured for this backend."""
    if configured is not None:
        return configured
    if reranked:
        return RERANKER_FLOOR
    return LEXICAL_FLOOR if is_hashed(embedder_name) else SEMANTIC_FLOOR


class MinScoreStage:
    name = "min_score"

    def __init__(self, min_fact_score: float) -> None:
        self._threshold = min_fact_score

    @property
    def floor(self) -> float:
        return self._threshold

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        return self.apply(candidates)

    def apply(self, candidates: tuple[Candidate, ...]) -> StageOutput:
        kept = tuple(candidate for candidate in candidates if candidate.floor_score >= self._threshold)
        events = tuple(
            BelowThreshold(candidate.id, round(candidate.floor_score, 6), self._threshold)
            for candidate in candidates
            if candidate.floor_score < self._threshold
        )
        return StageOutput(kept, (FloorApplied(self._threshold, len(candidates) - len(kept)), *events))
