import pytest

from retrieval.outcomes import OUTCOME_SCORES, WeightPolicy, effective_score

POLICY = WeightPolicy(alpha=0.2, low=0.25, high=1.75)


def test_success_moves_a_neutral_weight_to_1_15():
    # target = 0.25 + 1.0 x 1.5 = 1.75; 0.8 x 1.0 + 0.2 x 1.75 = 1.15
    assert POLICY.step(1.0, 1.0) == pytest.approx(1.15)


def test_failure_moves_a_neutral_weight_to_0_85():
    # target = 0.25; 0.8 x 1.0 + 0.2 x 0.25 = 0.85
    assert POLICY.step(1.0, 0.0) == pytest.approx(0.85)


def test_partial_keeps_a_neutral_weight_neutral():
    # target = 0.25 + 0.5 x 1.5 = 1.0
    assert POLICY.step(1.0, 0.5) == pytest.approx(1.0)


def test_two_successes_compound_as_an_ema():
    # 1.15 -> 0.8 x 1.15 + 0.35 = 1.27
    assert POLICY.replay([1.0, 1.0]) == pytest.approx(1.27)


def test_success_then_failure_is_order_dependent():
    # success then failure: 1.15 -> 0.8 x 1.15 + 0.05 = 0.97; failure then success: 0.85 -> 0.68 + 0.35 = 1.03
    assert POLICY.replay([1.0, 0.0]) == pytest.approx(0.97)
    assert POLICY.replay([0.0, 1.0]) == pytest.approx(1.03)


def test_weights_stay_within_bounds_after_many_reports():
    assert POLICY.replay([1.0] * 200) == pytest.approx(1.75)
    assert POLICY.replay([0.0] * 200) == pytest.approx(0.25)
    assert 0.25 <= POLICY.replay([1.0, 0.0] * 50) <= 1.75


def test_explicit_score_overrides_the_label():
    assert effective_score("failure", 0.9) == 0.9
    assert effective_score("success", None) == 1.0
    assert OUTCOME_SCORES == {"failure": 0.0, "partial": 0.5, "success": 1.0}
