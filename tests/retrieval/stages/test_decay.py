from datetime import UTC, datetime, timedelta

import pytest

from retrieval.stages.decay import DecayStage, decay_factor
from retrieval.stages.feedback import apply_feedback_ranking
from retrieval.trace import DecayApplied
from retrieval.types import Candidate, RecallRequest
from storage.records import Scope
from tests.records import memory_record

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
HALF_LIVES = {"standard": 30.0, "ephemeral": 2.0}


def candidate(
    memory_id: str, relevance: float, days_old: float, tier: str = "standard", **fields
) -> Candidate:
    memory = memory_record(
        memory_id, created_at=NOW - timedelta(days=days_old), protection_tier=tier, **fields
    )
    return Candidate(memory=memory, relevance_score=relevance)


def request(now: datetime | None = NOW) -> RecallRequest:
    return RecallRequest(
        query="q", scope=Scope("o", "p"), top_k=5, char_budget=2000, candidate_limit=15, now=now
    )


def test_the_factor_halves_every_half_life():
    assert decay_factor(NOW - timedelta(days=30), NOW, 30.0) == pytest.approx(0.5)
    assert decay_factor(NOW - timedelta(days=60), NOW, 30.0) == pytest.approx(0.25)
    assert decay_factor(NOW - timedelta(days=15), NOW, 30.0) == pytest.approx(2**-0.5)  # 0.7071
    assert decay_factor(NOW - timedelta(days=400), NOW, 0.0) == 1.0  # 0: the tier does not fade
    assert decay_factor(NOW + timedelta(days=1), NOW, 30.0) == 1.0  # dated after the recall
    naive = (NOW - timedelta(days=30)).replace(tzinfo=None)  # stored naive: read as UTC
    assert decay_factor(naive, NOW, 30.0) == pytest.approx(0.5)


def test_an_old_memory_falls_below_a_younger_weaker_one():
    # old: 0.8 x 0.5^(60/30) = 0.2; young: 0.5 x 0.5^(3/30) = 0.5 x 0.93303 = 0.46652
    out = DecayStage(HALF_LIVES)(request(), (candidate("old", 0.8, 60), candidate("young", 0.5, 3)))
    assert [c.id for c in out.candidates] == ["young", "old"]
    by_id = {c.id: c for c in out.candidates}
    assert by_id["old"].decay_factor == pytest.approx(0.25)
    assert by_id["old"].boosted_score == pytest.approx(0.2)
    assert by_id["young"].boosted_score == pytest.approx(0.46652, abs=1e-5)
    assert out.events == (DecayApplied({"standard": 30.0, "ephemeral": 2.0}, 2),)


def test_each_tier_fades_by_its_own_half_life_and_protected_and_immutable_never():
    stage = DecayStage({**HALF_LIVES, "protected": 1.0, "immutable": 1.0})  # given, and still ignored
    out = stage(
        request(),
        (
            candidate("eph", 1.0, 4, "ephemeral"),  # 0.5^(4/2) = 0.25
            candidate("std", 1.0, 4),  # 0.5^(4/30) = exp(-0.69315 x 0.13333) = 0.91172
            candidate("prot", 1.0, 400, "protected"),
            candidate("imm", 1.0, 400, "immutable"),
        ),
    )
    factors = {c.id: c.decay_factor for c in out.candidates}
    assert factors["eph"] == pytest.approx(0.25)
    assert factors["std"] == pytest.approx(0.91172, abs=1e-5)
    assert factors["prot"] == factors["imm"] == 1.0
    assert out.events[0].decayed == 2


def test_the_boost_fades_with_relevance_and_feedback_weights_the_faded_score():
    faded = DecayStage(HALF_LIVES)(request(), (candidate("a", 0.6, 30, weight=1.2),)).candidates
    boosted = (faded[0].__class__(**{**faded[0].__dict__, "corroboration_boost": 0.1}),)
    ranked = apply_feedback_ranking(boosted, weighting_enabled=True)
    # (0.6 + 0.1) x 0.5 x 1.2 = 0.42
    assert ranked[0].weighted_score == pytest.approx(0.42)


def test_no_half_life_or_no_clock_leaves_the_scores_alone():
    young_first = (candidate("a", 0.9, 300), candidate("b", 0.5, 1))
    for stage, asked in ((DecayStage({}), request()), (DecayStage(HALF_LIVES), request(now=None))):
        out = stage(asked, young_first)
        assert out.candidates == young_first
        assert out.events[0].decayed == 0
