"""Feedback weight arithmetic (pure): an exponential moving average of session outcomes.

An outcome score s in [0, 1] (failure 0, partial 0.5, success 1) sets a target weight
lo + s x (hi - lo); each report moves a memory's weight a fraction alpha towards it:
    weight_after = (1 - alpha) x weight_before + alpha x target
With the defaults (alpha 0.2, lo 0.25, hi 1.75) a success takes 1.0 to 1.15, a failure to 0.85, and a
partial keeps 1.0. Weights start at 1.0 and stay within [lo, hi].
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

OUTCOME_SCORES = {"failure": 0.0, "partial": 0.5, "success": 1.0}
INITIAL_WEIGHT = 1.0


@dataclass(frozen=True)
class WeightPolicy:
    alpha: float = 0.2
    low: float = 0.25
    high: float = 1.75

    def target(self, score: float) -> float:
        return self.low + score * (self.high - self.low)

    def step(self, weight: float, score: float) -> float:
        moved = (1.0 - self.alpha) * weight + self.alpha * self.target(score)
        return min(self.high, max(self.low, moved))

    def replay(self, scores: Iterable[float], start: float = INITIAL_WEIGHT) -> float:
        """The weight after applying ``scores`` in order: what a serial replay of the reports gives."""
        weight = start
        for score in scores:
            weight = self.step(weight, score)
        return weight


def effective_score(outcome: str, score: float | None) -> float:
    """An explicit score overrides the label."""
    return float(score) if score is not None else OUTCOME_SCORES[outcome]
