"""Stage: episode neighbourhood. A memory whose episode neighbours match the query is lent part of
their score: ``final = weighted + neighbourhood_weight x`` the best weighted score of a direct match at
most ``neighbourhood_turns`` turns away from it in its episode (turns: the episode's active members in
time order; members stored at the same moment share a turn), scaled as the memory's own score is scaled
(its attribution and instruction factors, its decay and its feedback weight up to 1: a demoted memory is
not lifted back by its neighbours). A sibling is never lifted above the memory that brought it. Runs
after episode expansion, so siblings are lent too.

Why: in a conversation or a working session, what answers a question is often said next to what matches
it best ("what did you do last weekend?" - "we went camping at the lake"), and a memory among several
matches is more likely on topic than an isolated one that shares a word with the query. The bonus ranks
within the candidates; it never brings in a memory (expansion does) and never lifts one over the
relevance floor, which ran before. On LoCoMo's held-out conversations it lifted best-first R@5 by 0.03
on both backends (docs/retrieval.md, "The episode neighbourhood").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from retrieval.stages.expansion import ranked, sources_of, within_source
from retrieval.trace import NeighbourhoodApplied, StageOutput
from retrieval.types import Candidate, RecallRequest
from storage.records import EpisodeMemberStub, Reach


class EpisodeOrder(Protocol):
    """What the stage reads from the store (``storage.store.MemoryStore`` implements it)."""

    def episode_member_stubs(self, reach: Reach, episode_ids: Sequence[str]) -> list[EpisodeMemberStub]: ...


def turn_positions(stubs: Sequence[EpisodeMemberStub]) -> dict[str, tuple[str, int]]:
    """Each member's episode and its turn there: the rank of its time among the episode's members
    (members stored at the same moment share a turn)."""
    by_episode: dict[str, list[EpisodeMemberStub]] = {}
    for stub in stubs:
        by_episode.setdefault(stub.episode_id, []).append(stub)
    positions: dict[str, tuple[str, int]] = {}
    for episode_id, members in by_episode.items():
        moments = sorted({stub.created_at for stub in members})
        turn_of = {moment: turn for turn, moment in enumerate(moments)}
        for stub in members:
            positions[stub.id] = (episode_id, turn_of[stub.created_at])
    return positions


def own_scale(candidate: Candidate, weighting_enabled: bool = True) -> float:
    """What scales a memory's own score besides relevance, and so the bonus it is lent (its feedback
    weight only when weighting is on: an org's A/B control keeps the unweighted order)."""
    weight = min(1.0, candidate.feedback_weight) if weighting_enabled else 1.0
    return candidate.attribution_factor * candidate.instruction_factor * candidate.decay_factor * weight


def lend(
    candidates: Sequence[Candidate],
    positions: Mapping[str, tuple[str, int]],
    *,
    weight: float,
    turns: int,
    weighting_enabled: bool = True,
) -> tuple[tuple[Candidate, ...], int]:
    """Pure: each candidate with a position gets ``weight x`` the best weighted score (before any bonus)
    of another direct candidate within ``turns`` turns of it in the same episode, times ``own_scale``; a
    sibling's final score stays at most its source's. Returns the candidates in final order and how many
    were lent a bonus."""
    direct: dict[tuple[str, int], list[Candidate]] = {}
    for candidate in candidates:
        place = positions.get(candidate.id)
        if candidate.source == "direct" and place is not None:
            direct.setdefault(place, []).append(candidate)
    bonuses: dict[str, tuple[float, str | None]] = {}
    for candidate in candidates:
        place = positions.get(candidate.id)
        best: Candidate | None = None
        if place is not None:
            episode_id, turn = place
            near = [
                neighbour
                for other in range(turn - turns, turn + turns + 1)
                for neighbour in direct.get((episode_id, other), ())
                if neighbour.id != candidate.id
            ]
            best = min(near, key=lambda n: (-n.weighted_score, n.id), default=None)
        scale = own_scale(candidate, weighting_enabled)
        bonus = weight * best.weighted_score * scale if best is not None else 0.0
        bonuses[candidate.id] = (bonus, best.id if best is not None and bonus > 0.0 else None)
    finals = {c.id: c.weighted_score + bonuses[c.id][0] for c in candidates if c.source == "direct"}
    lent: list[Candidate] = []
    for candidate in candidates:
        bonus, lender = bonuses[candidate.id]
        bonus = within_source(bonus, candidate, finals, candidate.weighted_score)
        lender = lender if bonus > 0.0 else None
        if bonus != candidate.neighbourhood_bonus or lender != candidate.neighbourhood_of:
            candidate = candidate.revised(neighbourhood_bonus=bonus, neighbourhood_of=lender)
        lent.append(candidate)
    return ranked(lent), sum(1 for candidate in lent if candidate.neighbourhood_bonus > 0.0)


class NeighbourhoodStage:
    name = "neighbourhood"

    def __init__(self, source: EpisodeOrder, *, weight: float, turns: int) -> None:
        if weight < 0.0:
            raise ValueError(f"neighbourhood_weight must be 0 or more, but got {weight}")
        if turns < 0:
            raise ValueError(f"neighbourhood_turns must be 0 or more, but got {turns}")
        self._source = source
        self._weight = weight
        self._turns = turns

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        # The episodes of the direct matches that can reach the context (the first top_k; their siblings
        # are of the same episodes): where the order near the top can change.
        episode_ids = list(
            dict.fromkeys(
                c.memory.episode_id for c in sources_of(candidates, request.top_k) if c.memory.episode_id
            )
        )
        if not episode_ids or self._weight == 0.0 or self._turns == 0:
            return StageOutput(candidates, (NeighbourhoodApplied(self._weight, self._turns, 0, 0),))
        stubs = self._source.episode_member_stubs(request.reach, episode_ids)
        lent, supported = lend(
            candidates,
            turn_positions(stubs),
            weight=self._weight,
            turns=self._turns,
            weighting_enabled=request.weighting_enabled,
        )
        return StageOutput(
            lent, (NeighbourhoodApplied(self._weight, self._turns, len(episode_ids), supported),)
        )
