"""Stage: feedback weighting. weightedScore = relevanceScore x feedbackWeight, where the relevance score
already carries the corroboration boost (store score, plus the boost, times the weight).

The weight applied is the memory's weight *for this query*: the outcome reports of sessions whose
queries were close to this one, replayed with their closeness (``retrieval.feedback_index``). The
memory's global EMA weight, over every report, is kept beside it for the A/B log and explain_ranking.

With the org's ``feedback_weighting_disabled`` flag the order stays unweighted, but weights are still
recorded (and logged to the A/B table). Ranks are 0-based: ``unweighted_rank`` orders by the boosted
relevance alone, ``weighted_rank`` by the weighted score; their difference is the Feedback Impact rank delta.
"""

from __future__ import annotations

from collections.abc import Mapping

from retrieval.feedback_index import ContextWeight, FeedbackIndex
from retrieval.models.embedders.base import Embedder
from retrieval.outcomes import FeedbackStep
from retrieval.trace import FeedbackApplied, StageOutput
from retrieval.types import Candidate, RecallRequest

FEEDBACK_STEPS_SHOWN = 5  # the reports that moved a memory most, kept in the trace for explain_ranking


def apply_feedback_ranking(
    candidates: tuple[Candidate, ...],
    *,
    weighting_enabled: bool,
    weights: Mapping[str, ContextWeight] | None = None,
) -> tuple[Candidate, ...]:
    """Weight, rank twice, and return the candidates in weighted order (input untouched). Without
    ``weights`` a memory's global weight is applied."""
    # (candidate, its weight for this query, its weighted score, the report steps behind the weight), each
    # candidate revised once, with its ranks (the scores it ranks by are known before it is revised).
    scored = []
    for candidate in candidates:
        found = (weights or {}).get(candidate.id)
        weight = found.weight if found is not None else candidate.memory.weight
        boosted = candidate.boosted_score
        scored.append((candidate, found, weight, boosted * weight if weighting_enabled else boosted, boosted))
    unweighted_order = sorted(scored, key=lambda row: (-row[4], row[0].id))
    unweighted_rank = {row[0].id: rank for rank, row in enumerate(unweighted_order)}
    weighted_order = sorted(scored, key=lambda row: (-row[3], -row[4], row[0].id))
    ranked = []
    for rank, (candidate, found, weight, weighted_score, _) in enumerate(weighted_order):
        steps = found.steps if found is not None else ()
        ranked.append(
            candidate.revised(
                feedback_weight=weight,
                global_weight=candidate.memory.weight,
                feedback_steps=largest_in_order(steps, FEEDBACK_STEPS_SHOWN) if steps else (),
                feedback_reports=len(steps),
                feedback_far=found.far if found is not None else 0,
                feedback_set_apart=found.set_apart if found is not None else 0,
                weighted_score=weighted_score,
                unweighted_rank=unweighted_rank[candidate.id],
                weighted_rank=rank,
            )
        )
    return tuple(ranked)


class FeedbackStage:
    name = "feedback"

    def __init__(self, feedback: FeedbackIndex | None = None, embedder: Embedder | None = None) -> None:
        """Without a ``feedback`` index (or an ``embedder`` for the query) the global weights apply."""
        self._feedback = feedback
        self._embedder = embedder

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        weights = None
        if self._feedback is not None and candidates:
            embedder = self._embedder
            weights = self._feedback.weights(
                request.scope,
                # embedded only if some candidate's credit needs comparing with its session's queries
                None if embedder is None else lambda: embedder.embed_query(request.query),
                [c.memory for c in candidates],
                recall_id=request.retrieval_id or None,
                query_text=request.query,
            )
        ranked = apply_feedback_ranking(
            candidates, weighting_enabled=request.weighting_enabled, weights=weights
        )
        moved = sum(1 for candidate in ranked if candidate.unweighted_rank != candidate.weighted_rank)
        return StageOutput(ranked, (FeedbackApplied(request.weighting_enabled, moved),))


def largest_in_order(steps: tuple[FeedbackStep, ...], count: int) -> tuple[FeedbackStep, ...]:
    """The ``count`` steps that moved the weight most, in the order they were replayed: each one's
    "before" is where an earlier step left it (sorted by size, the arrows read as a broken timeline)."""
    kept = sorted(range(len(steps)), key=lambda index: -abs(steps[index].moved))[:count]
    return tuple(steps[index] for index in sorted(kept))
