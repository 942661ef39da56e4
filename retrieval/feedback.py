"""Stage: feedback weighting, as in the feedback seed: weightedScore = relevanceScore x feedbackWeight,
where the relevance score already carries the corroboration boost (the seed's order: store score, plus
the boost, times the weight).

With the org's ``feedback_weighting_disabled`` flag the order stays unweighted, but weights are still
recorded (and logged to the A/B table). Ranks are 0-based: ``unweighted_rank`` orders by the boosted
relevance alone, ``weighted_rank`` by the weighted score; their difference is the Feedback Impact rank delta.
"""

from __future__ import annotations

from dataclasses import replace

from retrieval.trace import FeedbackApplied, StageOutput
from retrieval.types import Candidate, RecallRequest


def apply_feedback_ranking(
    candidates: tuple[Candidate, ...], *, weighting_enabled: bool
) -> tuple[Candidate, ...]:
    """Weight, rank twice, and return the candidates in weighted order (input untouched)."""
    weighted = [
        replace(
            candidate,
            feedback_weight=candidate.memory.weight,
            weighted_score=candidate.boosted_score * candidate.memory.weight
            if weighting_enabled
            else candidate.boosted_score,
        )
        for candidate in candidates
    ]
    unweighted_order = sorted(weighted, key=lambda candidate: (-candidate.boosted_score, candidate.id))
    unweighted_rank = {candidate.id: rank for rank, candidate in enumerate(unweighted_order)}
    weighted_order = sorted(
        weighted, key=lambda candidate: (-candidate.weighted_score, -candidate.boosted_score, candidate.id)
    )
    return tuple(
        replace(candidate, unweighted_rank=unweighted_rank[candidate.id], weighted_rank=rank)
        for rank, candidate in enumerate(weighted_order)
    )


class FeedbackStage:
    name = "feedback"

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        ranked = apply_feedback_ranking(candidates, weighting_enabled=request.weighting_enabled)
        moved = sum(1 for candidate in ranked if candidate.unweighted_rank != candidate.weighted_rank)
        return StageOutput(ranked, (FeedbackApplied(request.weighting_enabled, moved),))
