"""Stage: age decay. A memory of a tier that fades loses relevance with age: its relevance, with its
corroboration boost, is multiplied by 0.5 ^ (age / half-life), the half-life of its tier in days
(``MEMORIA_DECAY_HALF_LIFE_DAYS`` for standard memories, ``MEMORIA_EPHEMERAL_HALF_LIFE_DAYS`` for ephemeral
ones; 0: that tier does not fade). Protected and immutable memories never fade. Age runs from the
memory's ``created_at`` (an explicit update is a new memory, so a corrected fact starts young).

It runs before feedback weighting, so the weighted score is (relevance + boost) x decay x feedback
weight, and the feedback impact view compares two ranks that both carry the decay.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from retrieval.trace import DecayApplied, StageOutput
from retrieval.types import Candidate, RecallRequest

NEVER_FADE = ("protected", "immutable")
SECONDS_PER_DAY = 86_400.0


def decay_factor(created_at: datetime, now: datetime, half_life_days: float) -> float:
    """0.5 ^ (age in days / half-life); 1.0 for a half-life of 0 or a memory dated after ``now``."""
    if half_life_days <= 0:
        return 1.0
    age_days = (_utc(now) - _utc(created_at)).total_seconds() / SECONDS_PER_DAY
    if age_days <= 0:
        return 1.0
    return float(0.5 ** (age_days / half_life_days))


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class DecayStage:
    name = "decay"

    def __init__(self, half_lives: Mapping[str, float]) -> None:
        """``half_lives``: days per protection tier; a tier missing, or at 0, does not fade (protected and
        immutable never do, whatever is given)."""
        self._half_lives = {
            tier: days for tier, days in half_lives.items() if days > 0 and tier not in NEVER_FADE
        }

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        if not self._half_lives or request.now is None:
            return StageOutput(candidates, (DecayApplied(dict(self._half_lives), 0),))
        faded = []
        for candidate in candidates:
            half_life = self._half_lives.get(candidate.memory.protection_tier, 0.0)
            factor = decay_factor(candidate.memory.created_at, request.now, half_life)
            faded.append(candidate.revised(decay_factor=factor) if factor != 1.0 else candidate)
        decayed = sum(1 for candidate in faded if candidate.decay_factor != 1.0)
        if not decayed:  # the order corroboration left stands
            return StageOutput(candidates, (DecayApplied(dict(self._half_lives), 0),))
        ordered = sorted(faded, key=lambda candidate: (-candidate.boosted_score, candidate.id))
        return StageOutput(tuple(ordered), (DecayApplied(dict(self._half_lives), decayed),))
