import pytest

from retrieval.outcomes import (
    OUTCOME_SCORES,
    Closeness,
    CreditedReport,
    CreditPolicy,
    ShownContext,
    ShownMemory,
    WeightPolicy,
    assign_credit,
    closeness_for,
    contextual_weight,
    effective_score,
)
from storage.records import MemoryCredit

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


# -- credit ------------------------------------------------------------------------------------------

# Position shares 1 / log2(2 + rank): 1.0, 0.630930, 0.5, 0.430677 for ranks 0-3.
POLICY_CREDIT = CreditPolicy(relative_floor=0.25, absolute_floor=0.05, failure_share=0.5, unnamed_share=0.25)


def context(query: str, **scores: float) -> ShownContext:
    return ShownContext(query, tuple(ShownMemory(memory_id, score) for memory_id, score in scores.items()))


def test_a_success_moves_each_memory_by_its_position_in_the_context():
    credits = assign_credit(
        [context("q", a=0.8, b=0.6, c=0.5, d=0.4)], session_score=1.0, policy=POLICY_CREDIT
    )
    assert [(c.memory_id, c.role, c.share, c.score, c.query_index) for c in credits] == [
        ("a", "context", 1.0, 1.0, 0),
        ("b", "context", 0.63093, 1.0, 0),
        ("c", "context", 0.5, 1.0, 0),
        ("d", "context", 0.430677, 1.0, 0),
    ]


def test_a_memory_takes_the_share_of_the_place_it_was_shown_at_not_of_its_relevance():
    # a is the most relevant (0.8) but earlier reports weighted it down to 0.3 as shown; b (0.6) was
    # weighted up to 0.9: the agent read b first, so b takes 1.0 and a 1 / log2(3) = 0.630930.
    shown = ShownContext("q", (ShownMemory("a", 0.8, shown=0.3), ShownMemory("b", 0.6, shown=0.9)))
    credits = assign_credit([shown], session_score=1.0, policy=POLICY_CREDIT)
    assert [(c.memory_id, c.share) for c in credits] == [("b", 1.0), ("a", 0.63093)]


def test_the_floor_reads_relevance_before_feedback_even_for_a_memory_shown_high():
    # best relevance 0.8: the floor is 0.2. c (0.19) is filler however high its weight showed it; it
    # still held the second place, so b is third: 1 / log2(4) = 0.5.
    shown = ShownContext(
        "q",
        (
            ShownMemory("a", 0.8, shown=0.8),
            ShownMemory("c", 0.19, shown=0.33),
            ShownMemory("b", 0.6, shown=0.3),
        ),
    )
    credits = assign_credit([shown], session_score=1.0, policy=POLICY_CREDIT)
    assert [(c.memory_id, c.share) for c in credits] == [("a", 1.0), ("b", 0.5)]


def test_equal_shown_scores_keep_the_contexts_order():
    shown = ShownContext("q", (ShownMemory("b", 0.5, shown=0.7), ShownMemory("a", 0.6, shown=0.7)))
    credits = assign_credit([shown], session_score=1.0, policy=POLICY_CREDIT)
    assert [(c.memory_id, c.share) for c in credits] == [("b", 1.0), ("a", 0.63093)]


def test_filler_below_the_relative_or_absolute_floor_never_moves():
    # best 0.8: the relative floor is 0.25 x 0.8 = 0.2, so 0.19 is filler; 0.04 is below the absolute floor.
    credits = assign_credit([context("q", a=0.8, b=0.19, c=0.2)], session_score=1.0, policy=POLICY_CREDIT)
    assert {c.memory_id for c in credits} == {"a", "c"}
    nothing = assign_credit([context("q", a=0.04, b=0.03)], session_score=0.0, policy=POLICY_CREDIT)
    assert nothing == ()


def test_a_failure_spreads_half_the_blame():
    credits = assign_credit([context("q", a=0.8, b=0.6)], session_score=0.0, policy=POLICY_CREDIT)
    assert [(c.memory_id, c.share, c.score) for c in credits] == [("a", 0.5, 0.0), ("b", 0.315465, 0.0)]


def test_named_memories_move_fully_and_the_rest_by_a_quarter_share():
    credits = assign_credit(
        [context("q", a=0.8, b=0.6, c=0.5)],
        session_score=1.0,
        helpful=["b"],
        misleading=["a"],
        policy=POLICY_CREDIT,
    )
    assert [(c.memory_id, c.role, c.share, c.score) for c in credits] == [
        ("b", "helpful", 1.0, 1.0),
        ("a", "misleading", 1.0, 0.0),
        ("c", "context", 0.125, 1.0),  # third place 0.5, a quarter of it
    ]


def test_a_memory_shown_in_several_contexts_takes_its_best_position_and_that_query():
    credits = assign_credit(
        [context("first", a=0.9, b=0.5), context("second", b=0.7)], session_score=1.0, policy=POLICY_CREDIT
    )
    assert [(c.memory_id, c.share, c.query_index) for c in credits] == [("a", 1.0, 0), ("b", 1.0, 1)]


def test_a_named_memory_never_shown_has_no_query():
    credits = assign_credit([context("q", a=0.8)], session_score=1.0, helpful=["z"], policy=POLICY_CREDIT)
    assert credits[0] == MemoryCredit("z", "helpful", 1.0, 1.0, None)


def test_a_named_memory_shown_under_several_queries_counts_for_all_of_them():
    """Named helpful after two recalls that both showed it: no one query of the session is its own (the
    weight for a query is then as close as the closest of the two, see the feedback index's tests)."""
    credits = assign_credit(
        [context("first", b=0.7, a=0.9), context("second", a=0.9, b=0.5)],
        session_score=1.0,
        helpful=["b"],
        misleading=["a"],
        policy=POLICY_CREDIT,
    )
    assert [(c.memory_id, c.role, c.query_index) for c in credits] == [
        ("b", "helpful", None),
        ("a", "misleading", None),
    ]


def test_closeness_is_linear_between_start_and_full():
    closeness = Closeness(0.3, 0.6)
    assert [closeness(c) for c in (0.1, 0.3, 0.45, 0.6, 0.9)] == pytest.approx([0.0, 0.0, 0.5, 1.0, 1.0])
    assert closeness_for(None, "hashed-v1:384") == Closeness(0.30, 0.60)
    assert closeness_for(None, "st:all-MiniLM-L6-v2") == Closeness(0.65, 0.90)
    assert closeness_for((0.2, 0.4), "anything") == Closeness(0.2, 0.4)
    with pytest.raises(ValueError):
        Closeness(0.6, 0.3)


def report(
    share: float, score: float, closeness: float, session: str = "s", role: str = "context"
) -> CreditedReport:
    return CreditedReport(session, MemoryCredit("m", role, share, score), closeness)  # type: ignore[arg-type]


def test_the_contextual_weight_scales_each_step_by_closeness():
    # A full success at closeness 1: 1.15. At closeness 0.5: 1 + 0.5 x 0.2 x 0.75 = 1.075. At 0: untouched.
    assert contextual_weight([report(1.0, 1.0, 1.0)], POLICY)[0] == pytest.approx(1.15)
    assert contextual_weight([report(1.0, 1.0, 0.5)], POLICY)[0] == pytest.approx(1.075)
    weight, steps = contextual_weight([report(1.0, 1.0, 0.0)], POLICY)
    assert (weight, steps) == (1.0, ())


def test_the_contextual_weight_replays_reports_in_order_and_lists_each_step():
    # a context success (share 1, closeness 1): 1.15; then a failure (share 0.5, closeness 0.5):
    # 1.15 + 0.25 x 0.2 x (0.25 - 1.15) = 1.105
    weight, steps = contextual_weight([report(1.0, 1.0, 1.0, "s1"), report(0.5, 0.0, 0.5, "s2")], POLICY)
    assert weight == pytest.approx(1.105)
    assert [(s.session_id, s.role, s.share, s.closeness) for s in steps] == [
        ("s1", "context", 1.0, 1.0),
        ("s2", "context", 0.5, 0.5),
    ]
    assert steps[1].weight_before == pytest.approx(1.15) and steps[1].moved == pytest.approx(-0.045)


def test_a_named_memory_moves_by_the_named_alpha_for_a_close_query():
    # named_alpha 1.0: helpful at closeness 1 reaches hi, 1 + 1.0 x (1.75 - 1) = 1.75; at closeness 0.4
    # 1 + 0.4 x 0.75 = 1.3. Misleading at closeness 1 reaches lo, 0.25.
    assert contextual_weight([report(1.0, 1.0, 1.0, role="helpful")], POLICY)[0] == pytest.approx(1.75)
    assert contextual_weight([report(1.0, 1.0, 0.4, role="helpful")], POLICY)[0] == pytest.approx(1.3)
    assert contextual_weight([report(1.0, 0.0, 1.0, role="misleading")], POLICY)[0] == pytest.approx(0.25)
    # then a context success (share 0.5, closeness 0.5) after a helpful name at closeness 0.4: it would move
    # it by alpha, 1.3 + 0.25 x 0.2 x (1.75 - 1.3) = 1.3225, but its reach is 1 + 0.25 x 0.5 x 0.75 = 1.09375
    # (a context's reach is half a named memory's): held
    weight, steps = contextual_weight(
        [report(1.0, 1.0, 0.4, "s1", "helpful"), report(0.5, 1.0, 0.5, "s2")], POLICY
    )
    assert weight == pytest.approx(1.3)
    assert steps[0].moved == pytest.approx(0.3) and steps[1].moved == pytest.approx(0.0)
    # after a helpful name at closeness 0.1 (1.075), a context share 1 at closeness 1 reaches 1.375:
    # 1.075 + 0.2 x (1.75 - 1.075) = 1.21
    assert contextual_weight([report(1.0, 1.0, 0.1, "s1", "helpful"), report(1.0, 1.0, 1.0, "s2")], POLICY)[
        0
    ] == pytest.approx(1.21)


def test_sessions_that_name_nothing_take_a_memory_half_as_far_as_the_agents_word_however_often():
    """A trial: twenty successful sessions that named nothing took the memory shown first (an outdated one)
    to 1.74, the bound of a memory the agent names, and it outranked the right one of a neighbouring task."""
    twenty = [report(1.0, 1.0, 1.0, f"s{n}") for n in range(20)]
    # EMA steps of 0.2 towards 1.75: 1.15, 1.27, 1.366, then held at the reach 1 + 1 x 0.5 x 0.75 = 1.375
    weight, steps = contextual_weight(twenty, POLICY)
    assert [round(s.weight_after, 4) for s in steps[:4]] == [1.15, 1.27, 1.366, 1.375]
    assert weight == pytest.approx(1.375)
    failures = [report(1.0, 0.0, 1.0, f"f{n}") for n in range(20)]  # and down: 1 - 0.5 x 0.75 = 0.625
    assert contextual_weight(failures, POLICY)[0] == pytest.approx(0.625)
    assert contextual_weight([report(1.0, 1.0, 1.0, role="helpful")] * 2, POLICY)[0] == pytest.approx(1.75)


def test_a_report_repeated_counts_as_far_as_its_query_is_close():
    # Helpful at closeness 0.4, five times: 1 + 0.4 x 0.75 = 1.3 each time (the plain step would go on:
    # 1.3, 1.48, 1.588, ... 1 + 0.75 x (1 - 0.6^5) = 1.6917).
    weight, steps = contextual_weight([report(1.0, 1.0, 0.4, f"s{n}", "helpful") for n in range(5)], POLICY)
    assert weight == pytest.approx(1.3)
    assert [round(step.weight_after, 6) for step in steps] == [1.3] * 5
    # Misleading at closeness 0.4, five times: 1 - 0.4 x 0.75 = 0.7 and no lower.
    sunk = contextual_weight([report(1.0, 0.0, 0.4, f"s{n}", "misleading") for n in range(5)], POLICY)[0]
    assert sunk == pytest.approx(0.7)


def test_a_memory_shown_low_rises_no_further_than_its_share_however_often():
    # Share 0.2 at closeness 1, success: each step 0.2 x 0.2 = 0.04 of the way to 1.75, so after n steps
    # 1.75 - 0.75 x 0.96^n: 1.03, 1.0588; the third (1.0864) stops at its reach, half a named memory's,
    # 1 + 0.2 x 0.5 x 0.75 = 1.075, where the others leave it.
    weight, steps = contextual_weight([report(0.2, 1.0, 1.0, f"s{n}") for n in range(8)], POLICY)
    assert [round(step.weight_after, 4) for step in steps] == [1.03, 1.0588, *[1.075] * 6]
    assert weight == pytest.approx(1.075)


def test_context_successes_never_lift_a_memory_the_agent_named_misleading():
    # misleading: 0.25; five context successes (share 1, closeness 1) would lift it 0.2 of the way to 1.75
    # each: held, each listed with the weight it kept. A context failure still lowers it (already at lo).
    reports = [
        report(1.0, 0.0, 1.0, "s0", "misleading"),
        *(report(1.0, 1.0, 1.0, f"s{n}") for n in range(1, 6)),
    ]
    weight, steps = contextual_weight(reports, POLICY)
    assert [round(step.weight_after, 6) for step in steps] == [0.25] * 6 and weight == 0.25
    assert [step.session_id for step in steps] == ["s0", "s1", "s2", "s3", "s4", "s5"]


def test_context_failures_never_lower_a_memory_the_agent_named_helpful_but_successes_still_lift_it():
    # helpful at closeness 0.4: 1 + 0.4 x 0.75 = 1.3. A context failure (share 1, closeness 1) is held;
    # a context success would lift it 0.2 of the way to 1.75 (1.39); its reach, half a named memory's, is 1.375.
    reports = [
        report(1.0, 1.0, 0.4, "s0", "helpful"),
        report(1.0, 0.0, 1.0, "s1"),
        report(1.0, 1.0, 1.0, "s2"),
    ]
    _, steps = contextual_weight(reports, POLICY)
    assert [round(step.weight_after, 6) for step in steps] == [1.3, 1.3, 1.375]


def test_naming_a_memory_again_is_what_turns_the_agents_judgement():
    # misleading 0.25, then named helpful by one of two named reports: 0.25 + 1/2 x (1.75 - 0.25) = 1.0; a
    # context failure after it is held (the latest name is helpful); a second misleading name, two of three:
    # 1.0 + 2/3 x (0.25 - 1.0) = 0.5.
    reports = [report(1.0, 0.0, 1.0, "s0", "misleading"), report(1.0, 1.0, 1.0, "s1", "helpful")]
    assert contextual_weight([*reports, report(1.0, 0.0, 1.0, "s2")], POLICY)[0] == pytest.approx(1.0)
    turned = [*reports, report(1.0, 0.0, 1.0, "s3", "misleading")]
    assert contextual_weight(turned, POLICY)[0] == pytest.approx(0.5)
    # before any name, context credits move it freely: 1.15, 1.27, then a failure 1.27 - 0.2 x 1.02 = 1.066
    free = [report(1.0, 1.0, 1.0, "a"), report(1.0, 1.0, 1.0, "b"), report(1.0, 0.0, 1.0, "c")]
    assert contextual_weight(free, POLICY)[0] == pytest.approx(1.066)


def test_agents_that_disagree_are_weighed_against_each_other_in_either_order():
    """A trial: four sessions named a memory helpful (1.75), a fifth misleading, and it fell to 0.25, below
    the outdated memory it had beaten; the same two opposite reports gave 0.25 or 1.75 by their order."""
    helpful = [report(1.0, 1.0, 1.0, f"h{i}", "helpful") for i in range(4)]
    # One against four takes a fifth of its step: 1.75 + 1/5 x (0.25 - 1.75) = 1.45.
    assert contextual_weight([*helpful, report(1.0, 0.0, 1.0, "m", "misleading")], POLICY)[
        0
    ] == pytest.approx(1.45)
    one_each = [report(1.0, 1.0, 1.0, "h", "helpful"), report(1.0, 0.0, 1.0, "m", "misleading")]
    assert contextual_weight(one_each, POLICY)[0] == pytest.approx(1.0)  # 1.75 + 1/2 x (0.25 - 1.75)
    assert contextual_weight(one_each[::-1], POLICY)[0] == pytest.approx(1.0)  # 0.25 + 1/2 x (1.75 - 0.25)
    # A report counts by its closeness: a misleading one at closeness 0.5 after a helpful one at 1.0 takes
    # 0.5 x 0.5 / (0.5 + 1.0) of the way: 1.75 + 1/6 x (0.25 - 1.75) = 1.5.
    far = [report(1.0, 1.0, 1.0, "h", "helpful"), report(1.0, 0.0, 0.5, "m", "misleading")]
    assert contextual_weight(far, POLICY)[0] == pytest.approx(1.5)


def test_a_named_memory_whose_closeness_no_query_measured_takes_the_spec_step():
    unmeasured = CreditedReport("s", MemoryCredit("m", "helpful", 1.0, 1.0), 1.0, by_query=False)
    assert contextual_weight([unmeasured], POLICY)[0] == pytest.approx(1.15)


def test_a_named_alpha_at_the_spec_step_moves_a_named_memory_like_any_other():
    gentle = WeightPolicy(alpha=0.2, low=0.25, high=1.75, named_alpha=0.2)
    assert contextual_weight([report(1.0, 1.0, 1.0, role="helpful")], gentle)[0] == pytest.approx(1.15)


def test_an_immutable_memory_never_drops_below_neutral():
    weight, _ = contextual_weight([report(1.0, 0.0, 1.0)], POLICY, protection_tier="immutable")
    assert weight == 1.0


def test_replay_credits_scales_each_step_by_its_share():
    # 1 + 0.5 x 0.15 = 1.075, then 1.075 + 0.2 x (0.25 - 1.075) = 0.91
    assert POLICY.replay_credits([(0.5, 1.0), (1.0, 0.0)]) == pytest.approx(0.91)


def test_a_memory_the_hook_saw_used_moves_a_whole_share_towards_success_at_a_contexts_step():
    context = ShownContext(
        "how do I roll back a deploy",
        (ShownMemory("top", 0.9), ShownMemory("used", 0.6), ShownMemory("filler", 0.1)),
    )
    credits = assign_credit([context], session_score=0.5, used=["used", "filler", "never-shown"])
    # "used" (second: share 0.63 by its place) takes a whole share towards success instead; "filler" is below
    # a quarter of the best (0.1 < 0.225) and "never-shown" was not shown: neither moves. "top" keeps its
    # place's share of the partial (towards 1.0), not a quarter of it: nobody was named.
    assert credits == (
        MemoryCredit("used", "used", 1.0, 1.0, 0),
        MemoryCredit("top", "context", 1.0, 0.5, 0),
    )
    # Not the agent's word: for a query as close, one report takes it a context's step, 1 + 0.2 x 0.75 = 1.15
    # (a named helpful memory would reach 1.75), and its reach is its whole way (repeated use goes further).
    [used] = [credit for credit in credits if credit.role == "used"]
    weight, _ = contextual_weight([CreditedReport("s1", used, 1.0)], POLICY)
    assert weight == pytest.approx(1.15)
    again, _ = contextual_weight([CreditedReport("s1", used, 1.0), CreditedReport("s2", used, 1.0)], POLICY)
    assert again == pytest.approx(1.27)
