"""Stage: min_fact_score (XTrace). Candidates whose relevance is below the threshold are dropped, each
with a trace event saying its score and the threshold."""

from __future__ import annotations

from retrieval.trace import BelowThreshold, StageOutput
from retrieval.types import Candidate, RecallRequest


class MinScoreStage:
    name = "min_score"

    def __init__(self, min_fact_score: float) -> None:
        self._threshold = min_fact_score

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        return self.apply(candidates)

    def apply(self, candidates: tuple[Candidate, ...]) -> StageOutput:
        kept = tuple(candidate for candidate in candidates if candidate.relevance_score >= self._threshold)
        events = tuple(
            BelowThreshold(candidate.id, round(candidate.relevance_score, 6), self._threshold)
            for candidate in candidates
            if candidate.relevance_score < self._threshold
        )
        return StageOutput(kept, events)
