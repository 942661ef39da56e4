"""Filler beside the best match, read at assembly (``retrieval.stages.assembly.select``): a memory that
passed the relevance floor but matches the query far less than the best match does is left out of the
context, even when fewer than top_k are placed. On a store of one team's developer facts every fact shares
a word or a topic with most queries, and a model's cosine between any two of them is 0.2-0.4: without this
bar a recall for one answer showed it among a dozen unrelated facts.

Filler is a matter of matching the query (``matching``): the best match is read without what outcome
reports and age did to it, and a memory is held against it with what lowered it given back
(``standing``). A memory that helped rises by its weight, and may enter beside the best match by it, but
raises no bar for the others; a memory named misleading, or faded by age, ranks lower, but stays in the
context when it matches as well as before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from retrieval.types import Candidate

# The share of the best match under which a memory is filler, for fused relevance (vectors and BM25).
# Measured on LoCoMo with both backends (docs/retrieval.md, "Filler beside the best match"): a context
# holds about 40% fewer memories and characters, R@5 and R@10 do not move (best first and in context
# order), and 0.005-0.009 of the questions lose their evidence from the context with the filler. A
# reranker's scores spread otherwise (a cross-encoder's are near 0 or 1), not measured here: no share.
FUSED_SHARE_OF_BEST = 0.25
FAR_BELOW = "far below the best match: "  # begins the reason a memory was left out as filler


def matching(candidate: Candidate) -> float:
    """How well a candidate matches the query, on its final score's scale: its relevance (with its
    corroboration) lifted by what stating the kind of answer lends, plus what its neighbours lend, without
    its own feedback weight and age decay. ``(relevance + boost) x (1 + answer-type share) + neighbourhood``:
    the final score of a memory of weight 1 that never faded."""
    base = candidate.relevance_score + candidate.corroboration_boost
    weighted = candidate.weighted_score
    share = candidate.answer_type_bonus / weighted if weighted > 0.0 else 0.0
    return base * (1.0 + share) + candidate.neighbourhood_bonus


def standing(candidate: Candidate, by_id: Mapping[str, Candidate]) -> float:
    """What a candidate is held against the bar with: its final score, with whatever lowered it for
    outcomes or age given back (``matching``), and whatever lifted it kept. A sibling's score is its
    source's, discounted: read with the source's standing and its own weight below 1 given back; a
    direct match lifted to a sibling's score keeps its own standing if that is higher."""
    if candidate.source == "direct":
        return max(candidate.final_score, matching(candidate))
    lent = candidate.final_score / min(1.0, candidate.feedback_weight or 1.0)
    source = by_id.get(candidate.sibling_of or "")
    if source is not None and source.final_score > 0.0:
        lent *= max(1.0, matching(source) / source.final_score)
    own = matching(candidate) if candidate.weighted_rank is not None else 0.0  # was a direct match
    return max(lent, own)


@dataclass(frozen=True)
class FillerBar:
    """Under ``share`` x ``best`` (the best placeable match's ``matching``, memory ``best_id``) a memory's
    ``standing`` is filler; a share of 0 lets every memory above the relevance floor through."""

    share: float
    best: float = 0.0
    best_id: str = ""
    by_id: Mapping[str, Candidate] = field(default_factory=dict)

    def holds_out(self, candidate: Candidate) -> bool:
        return self.share > 0.0 and standing(candidate, self.by_id) < self.share * self.best

    def reason(self, candidate: Candidate) -> str:
        """Why ``candidate`` is filler, in explain_ranking's words."""
        score = standing(candidate, self.by_id)
        best = self.by_id.get(self.best_id)
        moved = not _same(score, candidate.final_score) or (
            best is not None and not _same(self.best, best.final_score)
        )
        read = "; read before outcome weights and age decay" if moved else ""
        return (
            f"{FAR_BELOW}matches the query at {score:.3f}, under {self.share:g} x {self.best:.3f}, the best "
            f"match's ({self.best_id}){read} (MEMORIA_MIN_SHARE_OF_BEST)"
        )


def _same(left: float, right: float) -> bool:
    return math.isclose(left, right, rel_tol=1e-9, abs_tol=1e-12)


def filler_bar(candidates: Sequence[Candidate], configured: float | None) -> FillerBar:
    """The bar of this recall. The best match is the best of the direct matches a context may place, read
    by ``matching`` (a memory that helped raises no bar for the others by its weight): facts and artifacts
    (a match an LLM pass dropped aside), or episode summaries when it holds nothing else (a summary's many
    words must not set the bar for facts). ``configured``: ``min_share_of_best``; None for the default of
    the relevance's kind (``FUSED_SHARE_OF_BEST``, or none when a reranker scored)."""
    direct = [c for c in candidates if c.source == "direct" and c.dropped is None]
    share = share_for(direct, configured)
    placeable = [c for c in direct if c.memory.kind != "episode"] or direct
    if share <= 0.0 or not placeable:
        return FillerBar(share)
    best = max(placeable, key=matching)
    score = matching(best)
    if score <= 0.0:
        return FillerBar(share)
    return FillerBar(share, score, best.id, {c.id: c for c in candidates})


def share_for(candidates: Sequence[Candidate], configured: float | None) -> float:
    """``configured``, or the default for what scored the candidates: none for a reranker's scores."""
    if configured is not None:
        return configured
    return 0.0 if any(c.rerank_score is not None for c in candidates) else FUSED_SHARE_OF_BEST


def left_out_as_filler(candidates: Sequence[Candidate]) -> int:
    """Direct matches above the relevance floor left out as filler beside the best match."""
    return sum(
        1
        for c in candidates
        if c.source == "direct" and not c.in_context and (c.exclusion_reason or "").startswith(FAR_BELOW)
    )
