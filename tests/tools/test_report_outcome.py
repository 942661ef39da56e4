"""report_outcome through its handler, with weights computed by hand (alpha 0.2, weights in [0.25, 1.75])."""

from dataclasses import replace

import pytest
from pydantic import ValidationError

import tools.report_outcome as report_outcome_module
import writing.outcomes as outcomes_module
from storage.records import Scope
from tools.common import Caller, ToolFailure
from tools.recall import RecallInput, recall
from tools.remember import RememberInput, remember
from tools.report_outcome import ReportOutcomeInput, report_outcome
from writing.outcomes import converge

S1 = Caller("agent", "ses_1")
S2 = Caller("agent", "ses_2")


@pytest.fixture
def three(runtime):
    ids = {}
    for key, text in {
        "a": "postgres pool size is 20",
        "b": "postgres runs on port 5432",
        "c": "the cat sat on the mat",
    }.items():
        ids[key] = remember(RememberInput(content=text), runtime, S1).id
    return ids


def weights(runtime, ids):
    return {key: round(runtime.store.get_memory(memory_id).weight, 6) for key, memory_id in ids.items()}


def recall_top(runtime, caller, query="postgres pool", top_k=2):
    return [m.id for m in recall(RecallInput(query=query, top_k=top_k), runtime, caller).memories]


# A context's memories move by their position's share 1 / log2(2 + rank) of a full step:
# the first 1.0, the second 1 / log2(3) = 0.630930. A full success step is 0.2 x (1.75 - 1.0) = 0.15.
SECOND = 0.630930


def test_a_named_memory_no_recall_of_the_session_showed_counts_and_the_agent_is_told(runtime, three):
    assert recall_top(runtime, S1) == [three["a"], three["b"]]
    out = report_outcome(
        ReportOutcomeInput(outcome="success", helpful_ids=[three["a"], three["c"]]), runtime, S1
    )
    assert out.status == "applied" and weights(runtime, three)["c"] == 1.15  # named: a full step anyway
    assert out.detail.startswith(
        f"session {S1.session_id} reported: 2 helpful memories moved a full step (to the top or bottom weight "
        "for tasks as close as this session's, less for tasks further away); 1 other memory of its contexts"
    )
    assert f"Not in this session's recall results: {three['c']};" in out.detail
    assert three["a"] not in out.detail.split("Not in this session's recall results")[1]
    # A trial took "counted" for "recall learned it": a weight cannot lift a match below the floor.
    assert "one that matched these queries below the relevance floor stays out of their results" in out.detail
    # every named memory shown: nothing to say
    again = report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[three["a"]]), runtime, S1)
    assert "Not in this session's recall results" not in again.detail


def both_helpful(three, outcome="success"):
    return ReportOutcomeInput(outcome=outcome, helpful_ids=[three["a"], three["b"]])


def test_success_moves_each_memory_of_the_context_by_its_position(runtime, three):
    in_context = recall_top(runtime, S1)
    assert in_context == [three["a"], three["b"]]
    out = report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    assert out.status == "applied" and out.revision == 1
    assert {(u.id, u.role, u.share, u.weight_before, round(u.weight_after, 6)) for u in out.updated} == {
        (three["a"], "context", 1.0, 1.0, 1.15),
        (three["b"], "context", SECOND, 1.0, 1.094639),
    }
    assert weights(runtime, three) == {"a": 1.15, "b": 1.094639, "c": 1.0}  # 1 + 0.630930 x 0.15
    assert out.detail.startswith(
        f"session {S1.session_id} reported: no memory was named; 2 other memories of its contexts a share by "
        "their position"
    )


def test_a_memory_moved_down_by_earlier_reports_takes_the_share_of_the_place_it_was_shown_at(runtime, three):
    """A memory named misleading sinks for this query; a later success that names nothing credits it by
    the place the agent read it at (second), not by the first place its relevance alone would give it."""
    assert recall_top(runtime, S1) == [three["a"], three["b"]]
    report_outcome(
        ReportOutcomeInput(outcome="failure", helpful_ids=[three["b"]], misleading_ids=[three["a"]]),
        runtime,
        S1,
    )
    assert recall_top(runtime, S2) == [three["b"], three["a"]]  # a at 0.25 of its relevance, b at 1.75
    out = report_outcome(ReportOutcomeInput(outcome="success"), runtime, S2)
    assert {(u.id, u.role, u.share) for u in out.updated} == {
        (three["b"], "context", 1.0),
        (three["a"], "context", SECOND),
    }


def test_sessions_that_name_nothing_never_lift_a_memory_named_misleading_over_the_one_relied_on(
    runtime, three
):
    """Named misleading for "postgres pool" (its relevance is well above the helpful memory's), then shown
    second in eight sessions that went well and named nothing: for this query it stays where the agent's
    word put it, and the memory the agent relied on stays first."""
    from tools.explain_ranking import ExplainRankingInput, explain_ranking

    recall_top(runtime, S1)
    report_outcome(
        ReportOutcomeInput(outcome="failure", helpful_ids=[three["b"]], misleading_ids=[three["a"]]),
        runtime,
        S1,
    )
    for n in range(8):
        session = Caller("agent", f"ses_ok_{n}")
        assert recall_top(runtime, session) == [three["b"], three["a"]]
        report_outcome(ReportOutcomeInput(outcome="success"), runtime, session)
    last = recall(RecallInput(query="postgres pool", top_k=2), runtime, Caller("agent", "ses_last"))
    out = explain_ranking(ExplainRankingInput(retrieval_id=last.retrieval_id), runtime, S1)
    by_id = {c.id: c for c in out.candidates}
    assert by_id[three["a"]].scores.feedback_weight == pytest.approx(0.25)
    assert by_id[three["b"]].scores.feedback_weight == pytest.approx(1.75)
    # the spec's global weight (the logged baseline) replays every credit: a's rises again
    assert by_id[three["a"]].scores.global_weight > 1.0


def test_named_memories_move_fully_and_the_others_by_a_quarter_of_their_share(runtime, three):
    recall_top(runtime, S1)
    out = report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[three["b"]]), runtime, S1)
    assert {(u.id, u.role, u.share) for u in out.updated} == {
        (three["b"], "helpful", 1.0),
        (three["a"], "context", 0.25),  # first in its context (share 1.0), unnamed beside a named one
    }
    assert weights(runtime, three) == {"a": 1.0375, "b": 1.15, "c": 1.0}  # a: 1 + 0.25 x 0.15


@pytest.mark.slow
def test_misleading_memories_sink_fully_whatever_the_outcome(runtime, three):
    recall_top(runtime, S1)
    out = report_outcome(ReportOutcomeInput(outcome="partial", misleading_ids=[three["a"]]), runtime, S1)
    assert {(u.id, u.role) for u in out.updated} == {(three["a"], "misleading"), (three["b"], "context")}
    # a: 1.0 + 0.2 x (0.25 - 1.0) = 0.85; b: a partial's target is 1.0, so it stays.
    assert weights(runtime, three) == {"a": 0.85, "b": 1.0, "c": 1.0}


def test_a_failure_spreads_half_the_blame_over_the_unnamed_memories(runtime, three):
    recall_top(runtime, S1)
    report_outcome(ReportOutcomeInput(outcome="failure"), runtime, S1)
    # a: 1 - 0.5 x 0.15 = 0.925; b: 1 - 0.5 x 0.630930 x 0.15 = 0.952680
    assert weights(runtime, three) == {"a": 0.925, "b": 0.95268, "c": 1.0}


def test_a_memory_named_without_being_shown_moves_too(runtime, three):
    recall_top(runtime, S1, top_k=1)  # only a is shown
    out = report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[three["c"]]), runtime, S1)
    assert {(u.id, u.role) for u in out.updated} == {(three["c"], "helpful"), (three["a"], "context")}
    assert weights(runtime, three)["c"] == 1.15


def test_unknown_ids_are_refused_and_nothing_moves(runtime, three):
    recall_top(runtime, S1)
    with pytest.raises(ToolFailure) as refused:
        report_outcome(
            ReportOutcomeInput(
                outcome="success", helpful_ids=[three["a"], "mem_nope"], misleading_ids=["mem_gone"]
            ),
            runtime,
            S1,
        )
    assert "mem_nope, mem_gone" in str(refused.value) and "nothing was reported" in str(refused.value)
    assert weights(runtime, three) == {"a": 1.0, "b": 1.0, "c": 1.0}
    assert runtime.store.get_outcome(Scope("default", "default"), "ses_1") is None


def test_another_tenants_memories_count_as_unknown(runtime, three):
    theirs = remember(RememberInput(content="acme secret plan", project_id="acme"), runtime, S1).id
    recall_top(runtime, S1)
    with pytest.raises(ToolFailure) as refused:
        report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[theirs]), runtime, S1)
    assert f"no memory {theirs} in org 'default' / project 'default'" in str(refused.value)
    assert runtime.store.get_memory(theirs).weight == 1.0


def test_a_memory_both_helpful_and_misleading_is_refused(three):
    with pytest.raises(ValidationError) as refused:
        ReportOutcomeInput(
            outcome="success", helpful_ids=[three["a"]], misleading_ids=[three["a"], three["b"]]
        )
    assert f"helpful_ids and misleading_ids both name {three['a']}:" in str(refused.value)


def test_the_same_report_twice_applies_once(runtime, three):
    recall_top(runtime, S1)
    report_outcome(both_helpful(three), runtime, S1)
    again = report_outcome(both_helpful(three), runtime, S1)
    assert again.status == "unchanged" and "nothing moved again" in again.detail
    assert all(u.weight_before == u.weight_after for u in again.updated)
    assert weights(runtime, three) == {"a": 1.15, "b": 1.15, "c": 1.0}


def test_the_same_report_twice_is_unchanged_whatever_the_order_of_its_ids(runtime, three):
    recall_top(runtime, S1)
    recall_top(runtime, S1, query="postgres port")  # a second context: both a and b lead one
    named = ReportOutcomeInput(outcome="success", helpful_ids=[three["b"], three["a"]])
    first = report_outcome(named, runtime, S1)
    again = report_outcome(
        ReportOutcomeInput(outcome="success", helpful_ids=[three["a"], three["b"]]), runtime, S1
    )
    assert (first.status, again.status, again.revision) == ("applied", "unchanged", 1)
    plain = report_outcome(ReportOutcomeInput(outcome="success", session_id="ses_1"), runtime, S2)
    assert plain.status == "replaced"
    assert report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1).status == "unchanged"


@pytest.mark.slow
def test_a_report_whose_row_was_never_saved_is_redone_whole_on_retry(runtime, three, monkeypatch):
    """A crash between the credits' commit and the report's own row: the retry finds no matching report,
    redoes it, and every memory the half-done report moved gets its weight recomputed."""
    recall_top(runtime, S1)
    report_outcome(both_helpful(three), runtime, S1)
    crashed = ReportOutcomeInput(outcome="success", helpful_ids=[three["a"], three["c"]])
    real_put = runtime.store.put_outcome

    def credits_only(record, previous=None, cleared=(), *, first=False):
        runtime.store._put_credits(record, previous, cleared, first=first)
        raise OSError("killed before the report's row")

    monkeypatch.setattr(runtime.store, "put_outcome", credits_only)
    with pytest.raises(OSError):
        report_outcome(crashed, runtime, S1)
    monkeypatch.setattr(runtime.store, "put_outcome", real_put)
    retried = report_outcome(crashed, runtime, S1)
    assert (retried.status, retried.revision) == ("replaced", 2)
    # b is now an unnamed memory of the context: a quarter of its share, 1 + 0.25 x 0.630930 x 0.15;
    # c is counted once.
    assert weights(runtime, three) == {"a": 1.15, "b": 1.02366, "c": 1.15}
    # And the correction back moves c again: its credit from the half-done report is not left behind.
    report_outcome(both_helpful(three), runtime, S1)
    assert weights(runtime, three) == {"a": 1.15, "b": 1.15, "c": 1.0}


@pytest.mark.slow
def test_a_retry_that_credits_less_than_the_half_done_report_leaves_nothing_of_it(
    runtime, three, monkeypatch
):
    """The first attempt credits a and c and dies before its row; the retry names only a. c's credit row
    from the dead attempt must not count anywhere: not in c's weight, not in the report read back, and the
    same report again is "unchanged"."""
    recall_top(runtime, S1)
    real_put = runtime.store.put_outcome

    def credits_only(record, previous=None, cleared=(), *, first=False):
        runtime.store._put_credits(record, previous, cleared, first=first)
        raise OSError("killed before the report's row")

    monkeypatch.setattr(runtime.store, "put_outcome", credits_only)
    with pytest.raises(OSError):
        report_outcome(
            ReportOutcomeInput(outcome="success", helpful_ids=[three["a"], three["c"]]), runtime, S1
        )
    monkeypatch.setattr(runtime.store, "put_outcome", real_put)
    only_a = ReportOutcomeInput(outcome="success", helpful_ids=[three["a"]])
    retried = report_outcome(only_a, runtime, S1)
    assert retried.status == "applied"
    saved = runtime.store.get_outcome(Scope("default", "default"), retried.session_id)
    assert three["c"] not in {credit.memory_id for credit in saved.memory_credits() if credit.share > 0}
    assert weights(runtime, three)["c"] == 1.0  # named only by the attempt that died; never in S1's context
    assert report_outcome(only_a, runtime, S1).status == "unchanged"


def test_a_corrected_report_replaces_the_earlier_one(runtime, three):
    recall_top(runtime, S1)
    report_outcome(both_helpful(three), runtime, S1)
    corrected = report_outcome(
        ReportOutcomeInput(outcome="failure", misleading_ids=[three["a"], three["b"]]), runtime, S1
    )
    assert corrected.status == "replaced" and corrected.revision == 2
    assert "reported before (revision 1)" in corrected.detail and "replaced it" in corrected.detail
    # As if only the failure had been reported: 0.8 x 1.0 + 0.2 x 0.25 = 0.85
    assert weights(runtime, three) == {"a": 0.85, "b": 0.85, "c": 1.0}


@pytest.mark.slow
def test_weights_replay_sessions_in_the_order_they_first_reported(runtime, three):
    a = three["a"]
    recall_top(runtime, S1)
    report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[a, three["b"]]), runtime, S1)  # 0.85
    recall_top(runtime, S2, top_k=1)  # a only
    report_outcome(
        ReportOutcomeInput(outcome="success", helpful_ids=[a]), runtime, S2
    )  # a: 0.8 x 0.85 + 0.35
    assert weights(runtime, three)["a"] == 1.03
    report_outcome(both_helpful(three), runtime, S1)  # s1 corrected in place: a: 1.15 -> 1.27
    assert weights(runtime, three) == {"a": 1.27, "b": 1.15, "c": 1.0}


def test_a_report_reads_before_the_write_lock_and_once_when_nothing_lands_meanwhile(
    runtime, three, monkeypatch
):
    reads = []
    original = report_outcome_module.read_for_report

    def counted(*args, **kwargs):
        reads.append(runtime.store.report_versions())
        return original(*args, **kwargs)

    monkeypatch.setattr(report_outcome_module, "read_for_report", counted)
    recall_top(runtime, S1)
    report_outcome(both_helpful(three), runtime, S1)
    assert len(reads) == 1


def test_a_report_landing_between_the_reads_and_the_write_lock_is_read_again_and_replayed(
    runtime, three, monkeypatch
):
    a, b = three["a"], three["b"]
    recall_top(runtime, S1)
    recall_top(runtime, S2, top_k=1)  # a only
    original = report_outcome_module.read_for_report
    landed = []

    def then_another_report_lands(store, scope, session_id, memory_ids):
        found = original(store, scope, session_id, memory_ids)
        if session_id == S1.session_id and not landed:
            landed.append(report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[a]), runtime, S2))
        return found

    monkeypatch.setattr(report_outcome_module, "read_for_report", then_another_report_lands)
    monkeypatch.setattr(
        outcomes_module, "read_for_report", then_another_report_lands
    )  # its catch-up reads again
    report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[a, b]), runtime, S1)
    assert landed[0].status == "applied"
    # S2 reported first: a 1.0 -> 0.8 x 1.0 + 0.35 = 1.15; then S1's failure: 0.8 x 1.15 + 0.05 = 0.97.
    # Read before S2 landed and not again, S1's report would have written a = 0.85, losing S2's step.
    assert weights(runtime, three) == {"a": 0.97, "b": 0.85, "c": 1.0}


def test_a_report_landing_in_between_is_caught_up_from_its_own_rows_not_by_reading_everything_again(
    runtime, three, monkeypatch
):
    a = three["a"]
    recall_top(runtime, S1)
    recall_top(runtime, S2, top_k=1)  # a only
    original = report_outcome_module.read_for_report
    reads = []

    def then_another_report_lands(store, scope, session_id, memory_ids):
        reads.append(session_id)
        found = original(store, scope, session_id, memory_ids)
        if session_id == S1.session_id and reads.count(S1.session_id) == 1:
            report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[a]), runtime, S2)
        return found

    monkeypatch.setattr(report_outcome_module, "read_for_report", then_another_report_lands)
    monkeypatch.setattr(
        outcomes_module, "read_for_report", then_another_report_lands
    )  # its catch-up reads again
    report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[a, three["b"]]), runtime, S1)
    assert reads == [S1.session_id, S2.session_id]  # S1 read once: S2's credits were caught up alone
    assert weights(runtime, three) == {"a": 0.97, "b": 0.85, "c": 1.0}


@pytest.mark.slow
def test_a_report_of_the_same_session_landing_in_between_makes_the_report_read_everything_again(
    runtime, three, monkeypatch
):
    a, b = three["a"], three["b"]
    recall_top(runtime, S1)
    original = report_outcome_module.read_for_report
    reads = []

    def then_the_same_session_reports(store, scope, session_id, memory_ids):
        reads.append(session_id)
        found = original(store, scope, session_id, memory_ids)
        if len(reads) == 1:
            report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[a, b]), runtime, S1)
        return found

    monkeypatch.setattr(report_outcome_module, "read_for_report", then_the_same_session_reports)
    monkeypatch.setattr(
        outcomes_module, "read_for_report", then_the_same_session_reports
    )  # its catch-up reads again
    corrected = report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[a, b]), runtime, S1)
    # Read first, then the success landed (read once itself), then read again under the lock.
    assert len(reads) == 3
    assert (corrected.status, corrected.revision) == ("replaced", 2)
    assert weights(runtime, three) == {"a": 0.85, "b": 0.85, "c": 1.0}  # as if only the failure


def test_an_explicit_score_overrides_the_label(runtime, three):
    recall_top(runtime, S1, top_k=1)
    out = report_outcome(ReportOutcomeInput(outcome="partial", score=0.2), runtime, S1)
    assert out.score == 0.2
    # Below 0.5, a failure's half share: target 0.25 + 0.2 x 1.5 = 0.55; 1 + 0.5 x 0.2 x (0.55 - 1) = 0.955
    assert weights(runtime, three)["a"] == pytest.approx(0.955)


@pytest.mark.parametrize(
    ("outcome", "score"),
    [("failure", 0.9), ("success", 0.2), ("failure", 0.51), ("partial", 0.0), ("partial", 1.0)],
)
def test_a_label_the_score_contradicts_is_refused(outcome, score):
    with pytest.raises(ValidationError, match=rf"outcome '{outcome}' and `score` {score:g} disagree"):
        ReportOutcomeInput(outcome=outcome, score=score)


@pytest.mark.parametrize(
    ("outcome", "score"), [("failure", 0.5), ("success", 0.5), ("partial", 0.9), ("success", 0.8)]
)
def test_a_score_on_the_labels_side_of_partial_is_taken(outcome, score):
    assert ReportOutcomeInput(outcome=outcome, score=score).score == score


def test_the_callers_own_session_without_recalls_has_nothing_to_update(runtime, three):
    out = report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    assert (out.status, out.updated) == ("nothing_to_update", [])
    assert (
        "recalled nothing in org 'default' / project 'default'" in out.detail and "helpful_ids" in out.detail
    )
    assert weights(runtime, three) == {"a": 1.0, "b": 1.0, "c": 1.0}


def test_another_session_named_by_an_id_that_never_recalled_is_refused_and_moves_nothing(runtime, three):
    for named in ([], [three["a"]]):
        with pytest.raises(ToolFailure, match="no recall of session 'ses_typo' is recorded") as refused:
            report_outcome(
                ReportOutcomeInput(outcome="success", session_id="ses_typo", helpful_ids=named), runtime, S1
            )
        assert "leave it out to report this connection's own session" in str(refused.value)
    assert weights(runtime, three) == {"a": 1.0, "b": 1.0, "c": 1.0}
    assert runtime.store.get_outcome(Scope("default", "default"), "ses_typo") is None


def test_a_context_memory_retracted_since_it_was_shown_does_not_move_and_the_detail_says_so(runtime, three):
    assert recall_top(runtime, S1) == [three["a"], three["b"]]
    runtime.store.retract(Scope("default", "default"), [three["b"]], runtime.clock())
    out = report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    assert three["b"] not in {update.id for update in out.updated}
    assert weights(runtime, three)["b"] == 1.0 and weights(runtime, three)["a"] > 1.0
    assert (
        "1 memory of its contexts no longer active (retracted, purged, superseded or expired) did not move"
        in out.detail
    )


def test_an_ephemeral_memory_that_expired_since_it_was_shown_does_not_move_and_the_detail_says_so(settings):
    """A trial: a report moved an expired memory (1.0 -> 1.15) and said nothing of it."""
    import time

    from tests.helpers import make_runtime

    runtime = make_runtime(settings.replace(ephemeral_ttl_seconds=1.5))
    try:
        note = remember(
            RememberInput(content="The demo server is up on port 7001 today", protection_tier="ephemeral"),
            runtime,
            S1,
        ).id
        kept = remember(RememberInput(content="The demo server runs from the demo branch"), runtime, S1).id
        shown = recall(RecallInput(query="demo server port"), runtime, S1)
        assert {m.id for m in shown.memories} == {note, kept}
        time.sleep(1.6)
        out = report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
        assert [update.id for update in out.updated] == [kept]
        assert (
            "1 memory of its contexts no longer active (retracted, purged, superseded or expired)"
            in out.detail
        )
        named = report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[note]), runtime, S1)
        assert f"Recall does not show {note} (expired at " in named.detail
        assert "an expired memory's credit counts for nothing, and it did not move" in named.detail
        assert "with a tier that lasts" in named.detail
        assert note not in {update.id for update in named.updated}  # a review: the weight moved all the same
        assert runtime.store.get_memory(note).weight == 1.0
    finally:
        runtime.close()


def test_a_report_naming_only_memories_that_expired_since_says_they_were_named(runtime):
    """A trial was told "none was named" (and to remember the memory with a tier that lasts, a standard
    memory whose given expiry had passed)."""
    import time
    from datetime import UTC, datetime, timedelta

    ends = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    closed = remember(
        RememberInput(content="Elm street is closed for the parade", expires_at=ends), runtime, S1
    )
    assert [m.id for m in recall(RecallInput(query="is Elm street closed"), runtime, S1).memories] == [
        closed.id
    ]
    time.sleep(1.2)
    out = report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[closed.id]), runtime, S1)
    assert out.status == "nothing_to_update" and out.updated == []
    assert "none of the memories named can move: nothing moved" in out.detail
    assert "none was named" not in out.detail and "Name the memories you used" not in out.detail
    assert "(remember its text again, with a later expires_at or none, if it still holds)" in out.detail
    # A session that recalled nothing, naming it, is not told that it named nothing either (a review).
    unrecalled = report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[closed.id]), runtime, S2)
    assert "recalled nothing" in unrecalled.detail and "named no memory" not in unrecalled.detail
    assert "none of the memories named can move: nothing moved" in unrecalled.detail


def test_outcomes_do_not_cross_projects(runtime, three):
    recall_top(runtime, S1)
    out = report_outcome(ReportOutcomeInput(outcome="failure", project_id="other"), runtime, S1)
    assert out.status == "nothing_to_update"
    assert weights(runtime, three) == {"a": 1.0, "b": 1.0, "c": 1.0}


def test_weight_history_is_recorded(runtime, three):
    recall_top(runtime, S1, top_k=1)
    report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    report_outcome(ReportOutcomeInput(outcome="failure"), runtime, S1)
    events = runtime.store.weight_events(Scope("default", "default"), three["a"])
    assert [(e.revision, round(e.weight_before, 6), round(e.weight_after, 6)) for e in events] == [
        (1, 1.0, 1.15),
        (2, 1.15, 0.925),
    ]


@pytest.mark.slow
def test_the_report_keeps_the_sessions_queries_and_each_credit_names_its_query(runtime, three):
    recall_top(runtime, S1, query="postgres pool", top_k=1)
    recall_top(runtime, S1, query="which port does postgres use", top_k=2)
    recall_top(runtime, S1, query="postgres pool", top_k=1)  # the same query again is kept once
    report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    report = runtime.store.get_outcome(Scope("default", "default"), "ses_1")
    assert report.queries == ("postgres pool", "which port does postgres use")
    assert report.query_embedder == runtime.models.embedder.name
    assert [len(vector) for vector in report.query_vectors] == [runtime.store.vector_dim] * 2
    assert all(credit.query_index in (0, 1) for credit in report.credits)


def test_a_report_whose_weight_write_failed_is_redone_in_full_on_retry(runtime, three, monkeypatch):
    recall_top(runtime, S1)
    real_set_weights = runtime.store.set_weights
    failures = iter([OSError("disk full")])

    def flaky(weights, at):
        error = next(failures, None)
        if error is not None:
            raise error
        real_set_weights(weights, at)

    monkeypatch.setattr(runtime.store, "set_weights", flaky)
    with pytest.raises(OSError):
        report_outcome(both_helpful(three), runtime, S1)
    retried = report_outcome(both_helpful(three), runtime, S1)
    assert retried.status == "applied"
    assert weights(runtime, three) == {"a": 1.15, "b": 1.15, "c": 1.0}


def test_a_report_another_replica_saved_meanwhile_is_replayed_into_the_weights(runtime, three):
    # Replicas on an object store share no lock: S2's report (saved by "another replica") lands after
    # S1's weights were computed without it. converge() finds it and writes weights replaying both.
    recall_top(runtime, S1)
    report_outcome(both_helpful(three), runtime, S1)
    scope = ReportOutcomeInput(outcome="success").scope(runtime.settings)
    ids = [three["a"], three["b"]]
    replayed_by_s1 = runtime.store.credits_for(scope, ids)
    mine = runtime.store.get_outcome(scope, "ses_1")
    other = replace(mine, session_id="ses_2", first_reported_at=mine.reported_at, revision=1)
    runtime.store.put_outcome(other)  # saved without touching the weights, as a racing replica's report
    assert weights(runtime, three) == {"a": 1.15, "b": 1.15, "c": 1.0}

    converge_as(runtime, ReplicaStore(runtime.store), scope, ids, replayed_by_s1)
    # Two successes: 1.15, then 0.8 x 1.15 + 0.2 x 1.75 = 1.27.
    assert weights(runtime, three) == {"a": 1.27, "b": 1.27, "c": 1.0}


def converge_as(runtime, store, scope, ids, replayed) -> None:
    """What report_outcome does after saving its report, on ``store``."""
    converge(store, runtime.corroboration, runtime.weight_policy, runtime.clock, scope, ids, replayed)


class ReplicaStore:
    """The runtime's store as a replica on an object store sees it: its lock keeps no other process out."""

    def __init__(self, store) -> None:
        self._store = store
        self.excludes_other_processes = False

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_a_replica_writes_the_replayed_weights_after_saving_even_when_no_report_seems_new(runtime, three):
    # Another replica, prompted by a third report, wrote weights without S1's report after S1 computed
    # them; S1's re-read then finds exactly the reports it computed from. A replica writes anyway.
    recall_top(runtime, S1)
    report_outcome(both_helpful(three), runtime, S1)
    scope = ReportOutcomeInput(outcome="success").scope(runtime.settings)
    ids = [three["a"], three["b"]]
    replayed = runtime.store.credits_for(scope, ids)
    at = runtime.store.get_outcome(scope, "ses_1").reported_at
    runtime.store.set_weights({three["a"]: 1.0, three["b"]: 1.0}, at)  # the stale write
    converge_as(runtime, ReplicaStore(runtime.store), scope, ids, replayed)
    assert weights(runtime, three) == {"a": 1.15, "b": 1.15, "c": 1.0}
    runtime.store.set_weights({three["a"]: 1.0, three["b"]: 1.0}, at)
    converge_as(runtime, runtime.store, scope, ids, replayed)  # a local store: its lock kept it out
    assert weights(runtime, three) == {"a": 1.0, "b": 1.0, "c": 1.0}


def test_a_direct_match_is_credited_by_its_faded_score_and_a_sibling_by_its_propagated_one():
    from writing.outcomes import unweighted_score

    direct = {"source": "direct", "scores": {"relevance": 0.6, "corroboration_boost": 0.1, "decay": 0.5}}
    assert unweighted_score(direct) == pytest.approx(0.35)  # (0.6 + 0.1) x 0.5
    traced_before_decay = {"source": "direct", "scores": {"relevance": 0.6, "corroboration_boost": 0.1}}
    assert unweighted_score(traced_before_decay) == pytest.approx(0.7)
    sibling = {"source": "sibling", "scores": {"relevance": 0.0, "final": 0.2, "feedback_weight": 0.8}}
    assert unweighted_score(sibling) == pytest.approx(0.25)  # 0.2 / min(1, 0.8)
    # What its episode neighbours lent it is not its own: (0.38 - 0.18) / min(1, 0.8)
    lent = {"source": "sibling", "scores": {"final": 0.38, "neighbourhood": 0.18, "feedback_weight": 0.8}}
    assert unweighted_score(lent) == pytest.approx(0.25)
    # nor what its answer type lent it: (0.48 - 0.18 - 0.1) / min(1, 0.8)
    lent["scores"] |= {"final": 0.48, "answer_type": 0.1}
    assert unweighted_score(lent) == pytest.approx(0.25)
    lent_direct = {"source": "direct", "scores": {"relevance": 0.6, "neighbourhood": 0.18, "final": 0.78}}
    assert unweighted_score(lent_direct) == pytest.approx(0.6)


def test_a_report_of_a_session_that_recalled_nothing_says_it_counts_everywhere_by_the_spec_step(runtime):
    memory = remember(RememberInput(content="the deploy runs on fridays"), runtime, Caller("a", "ses_w")).id
    out = report_outcome(
        ReportOutcomeInput(outcome="failure", misleading_ids=[memory]),
        runtime,
        Caller("b", "ses_never_recalled"),
    )
    assert (
        "the session recalled nothing, so its report counts for every task, by one step of the global"
        in out.detail
    )
    assert [(u.weight_before, u.weight_after) for u in out.updated] == [(1.0, pytest.approx(0.85))]


def test_naming_a_memory_recall_no_longer_shows_says_so_and_hands_its_credit_to_its_replacement(
    runtime, three
):
    from tools.forget import ForgetInput, forget

    recall_top(runtime, S1)
    newer = remember(RememberInput(content="postgres pool size is 25", replaces=three["a"]), runtime, S1).id
    forget(ForgetInput(memory_id=three["b"]), runtime, S1)
    out = report_outcome(both_helpful(three), runtime, S1)
    assert out.status == "applied"  # the report stands: a retracted memory can come back (restored)
    said = (
        f". Recall does not show {three['a']} (superseded by {newer}): its credit goes on to {newer}, which "
        "stands now (as a report made before the change would have gone: a correction takes none of a failure)"
        f". Recall does not show {three['b']} (retracted): the credit counts only if they are active again"
    )
    assert out.detail.endswith(said)
    assert runtime.writer.settle(30)
    # The explicit update is a correction: it takes the success (1.0 -> 1.15, the named step), as it
    # would have had the report come before the update.
    assert runtime.store.get_memory(newer).weight == pytest.approx(1.15)
    again = report_outcome(both_helpful(three), runtime, S1)
    assert again.status == "unchanged" and again.detail.endswith(said)
    newest = remember(RememberInput(content="postgres pool size is 30", replaces=newer), runtime, S1).id
    chained = report_outcome(
        ReportOutcomeInput(outcome="success", helpful_ids=[three["a"]]), runtime, Caller("agent", "ses_3")
    )
    # Two updates on: the memory that stands now, beside the one that replaced it first.
    assert f"{three['a']} (superseded by {newer}): its credit goes on to {newest}" in chained.detail
    active = report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[newest]), runtime, S2)
    assert "Recall does not show" not in active.detail


def test_a_memory_restated_after_the_recall_takes_the_blame_the_report_gives_what_it_restated(runtime):
    """Recall, restate what was recalled (consolidation supersedes it), then report it misleading: the
    restatement is the same claim, so the failure reaches it, and it no longer outranks a memory that
    never misled."""
    misleading = remember(RememberInput(content="Deploys run on Fridays"), runtime, S1).id
    recall_top(runtime, S1)
    restated = remember(RememberInput(content="deploys run on fridays."), runtime, S1)
    assert restated.consolidation.superseded == [misleading]
    out = report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[misleading]), runtime, S1)
    assert f"its credit goes on to {restated.id}" in out.detail
    assert runtime.writer.settle(30)
    # One misleading report, the named step down: 1.0 -> 0.85, replayed for the restatement.
    assert runtime.store.get_memory(restated.id).weight == pytest.approx(0.85)


def test_a_correction_made_after_the_recall_takes_none_of_the_blame_the_report_gives_the_old_belief(runtime):
    wrong = remember(RememberInput(content="The API listens on port 8080"), runtime, S1).id
    recall_top(runtime, S1)
    fixed = remember(RememberInput(content="The API now listens on port 9090"), runtime, S1)
    assert fixed.consolidation.revised == [wrong]
    report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[wrong]), runtime, S1)
    assert runtime.writer.settle(30)
    assert runtime.store.get_memory(wrong).weight == pytest.approx(0.85)
    assert runtime.store.get_memory(fixed.id).weight == pytest.approx(1.0)


def test_a_report_made_again_keeps_the_credit_it_handed_to_a_restatement(runtime):
    # The session's second report (a note added) replaces the first, whose carried credit it takes back
    # before handing it on again: the restatement keeps the step.
    wrong = remember(RememberInput(content="Deploys run on Fridays"), runtime, S1).id
    recall_top(runtime, S1)
    restated = remember(RememberInput(content="deploys run on fridays."), runtime, S1).id
    report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[wrong]), runtime, S1)
    assert runtime.writer.settle(30)
    again = report_outcome(
        ReportOutcomeInput(outcome="failure", misleading_ids=[wrong], note="the deploy day was wrong"),
        runtime,
        S1,
    )
    assert again.status == "replaced"
    assert runtime.writer.settle(30)
    assert runtime.store.get_memory(restated).weight == pytest.approx(0.85)


def test_a_memory_updated_back_and_then_restated_hands_on_the_blame_of_the_restatement(runtime):
    # A -> B by an explicit update, B -> A back (A active again), then A restated as A2: the step that
    # counts from A is the restatement, whatever corrected A before.
    a = remember(RememberInput(content="The cache TTL is 60 seconds"), runtime, S1).id
    b = remember(RememberInput(content="The cache TTL is 90 seconds", replaces=a), runtime, S1).id
    assert remember(RememberInput(content="The cache TTL is 60 seconds", replaces=b), runtime, S1).id == a
    recall_top(runtime, S2, query="cache TTL")
    a2 = remember(RememberInput(content="the cache TTL is 60 seconds."), runtime, S2)
    assert a2.consolidation.superseded == [a]
    report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[a]), runtime, S2)
    assert runtime.writer.settle(30)
    assert runtime.store.get_memory(a2.id).weight == pytest.approx(0.85)


def test_two_named_memories_on_one_chain_both_reach_the_memory_that_stands(runtime):
    # x -> y -> z: a report naming y before x hands x's credit on through y to z as well.
    x = remember(RememberInput(content="Builds use Node 18"), runtime, S1).id
    recall_top(runtime, S1, query="node builds")
    y = remember(RememberInput(content="builds use node 18."), runtime, S1)
    z = remember(RememberInput(content="BUILDS USE NODE 18"), runtime, S1)
    assert y.consolidation.superseded == [x] and z.consolidation.superseded == [y.id]
    report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[y.id, x]), runtime, S1)
    assert runtime.writer.settle(30)
    # Two named successes of one session on the same claim count once for z: 1.0 -> 1.15.
    assert runtime.store.get_memory(z.id).weight == pytest.approx(1.15)


def test_a_session_recalled_as_another_agent_reports_on_that_agents_private_memories(runtime):
    """A new user's trial: recall as alice (agent_id) showed her private memory, and the report of that
    session refused its id as unknown; another agent's private memory, which the session never saw,
    stays unknown."""
    own = remember(
        RememberInput(content="The deploy key rotates every month", agent_id="alice", visibility="agent"),
        runtime,
        S1,
    ).id
    other = remember(
        RememberInput(content="The deploy key is kept in vault", agent_id="bob", visibility="agent"),
        runtime,
        S1,
    ).id
    shown = recall(RecallInput(query="deploy key rotation", agent_id="alice", session_id="pa1"), runtime, S1)
    assert own in {m.id for m in shown.memories} and other not in {m.id for m in shown.memories}
    with pytest.raises(ToolFailure, match=f"no memory {other} in org"):
        report_outcome(
            ReportOutcomeInput(outcome="success", session_id="pa1", helpful_ids=[other]), runtime, S1
        )
    out = report_outcome(
        ReportOutcomeInput(outcome="success", session_id="pa1", helpful_ids=[own]), runtime, S1
    )
    assert out.status == "applied" and own in {u.id for u in out.updated}


def test_a_replacing_report_lists_only_the_named_memories_it_names_no_more_not_those_it_names_otherwise():
    from storage.records import MemoryCredit
    from tools.outcome_notes import unnamed_note

    earlier = [
        MemoryCredit("m1", "helpful", 1.0, 1.0),
        MemoryCredit("m2", "misleading", 1.0, 0.0),
        MemoryCredit("m3", "context", 0.63, 1.0),
    ]
    now = [MemoryCredit("m1", "misleading", 1.0, 0.0), MemoryCredit("m3", "context", 1.0, 0.0)]
    # m1 flipped to misleading: named still, a full step the other way (a review found it listed as
    # "moving by its place only"); m2 is named no more; m3 was never named.
    note = unnamed_note(earlier, now)
    assert "(misleading m2)" in note and "m1" not in note
    assert unnamed_note(earlier, [*now, MemoryCredit("m2", "helpful", 1.0, 1.0)]) == ""


def hook_report(runtime, caller, used, **fields):
    arguments = ReportOutcomeInput(outcome="partial", **fields)
    arguments._used = tuple(used)  # only the CLI's hook sets it: no tool call can
    return report_outcome(arguments, runtime, caller)


def test_a_memory_the_hook_saw_used_and_restated_since_hands_its_credit_on_as_a_named_one(runtime):
    used = remember(RememberInput(content="Roll back with make rollback ENV=prod"), runtime, S1).id
    recall_top(runtime, S1, query="roll back")
    restated = remember(RememberInput(content="roll back with make rollback ENV=prod."), runtime, S1)
    assert restated.consolidation.superseded == [used]
    out = hook_report(runtime, S1, [used])
    assert [(u.id, u.role) for u in out.updated] == [(used, "used")]
    assert runtime.writer.settle(30)
    # A whole share towards success at a context's step: 1 + 0.2 x 0.75 = 1.15, carried to what stands.
    assert runtime.store.get_memory(restated.id).weight == pytest.approx(1.15)


def test_a_later_report_of_the_session_keeps_what_the_hook_saw_used_unless_it_names_it(runtime, three):
    a, b = three["a"], three["b"]
    recall_top(runtime, S1)
    hook_report(runtime, S1, [a])
    # The agent reports the session itself (after /clear it is the same session): its word replaces the
    # hook's report, not the evidence that "a" was used.
    agents = report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[b]), runtime, S1)
    roles = {u.id: u.role for u in agents.updated}
    assert agents.status == "replaced" and (roles[a], roles[b]) == ("used", "helpful")
    named = report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[a]), runtime, S1)
    assert {u.id: u.role for u in named.updated}[a] == "misleading"  # the agent's word wins


def test_a_memory_named_for_one_task_is_not_lifted_for_a_task_set_apart_by_what_it_says(runtime):
    """A trial: "Backend tests are run via make test", named helpful for "how do I run the backend tests",
    rose above the frontend's own memory for "how do I run the frontend tests", which it matched better."""
    backend = remember(
        RememberInput(content="Backend tests are run via make test"), runtime, Caller("a", "s0")
    ).id
    frontend = remember(
        RememberInput(content="Frontend tests use Vitest: pnpm test in the web folder"),
        runtime,
        Caller("a", "s0"),
    ).id
    recall(RecallInput(query="how do I run the backend tests"), runtime, Caller("a", "s1"))
    report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[backend]), runtime, Caller("a", "s1"))
    again = recall(RecallInput(query="how do I run the backend tests"), runtime, Caller("a", "s2"))
    assert again.memories[0].id == backend  # the task reported
    other = recall(RecallInput(query="how do I run the frontend tests"), runtime, Caller("a", "s3"))
    assert other.memories[0].id == frontend


def landing_during_the_report(monkeypatch, change):
    """Run ``change`` once, as another connection's write landing after the report's checks and before
    its lock (while the report reads what it needs)."""
    real = report_outcome_module.read_for_report
    done = []

    def read_for_report(*args, **kwargs):
        if not done:
            done.append(change())
        return real(*args, **kwargs)

    monkeypatch.setattr(report_outcome_module, "read_for_report", read_for_report)


def test_a_named_memory_restated_while_the_report_is_in_flight_hands_its_credit_to_the_restatement(
    runtime, three, monkeypatch
):
    """A review: the report read the named memory active before its lock, the restatement's consolidation
    found nothing to hand on (no report had moved it yet), and the credit stayed on a memory no recall
    shows. Read again under the lock, it goes on to the restatement, as when the restatement comes after."""
    scope = Scope("default", "default")
    assert recall_top(runtime, S1) == [three["a"], three["b"]]
    restated = {}
    landing_during_the_report(
        monkeypatch,
        lambda: restated.setdefault(
            "id", remember(RememberInput(content="Postgres pool size is 20."), runtime, S2).id
        ),
    )
    report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[three["a"]]), runtime, S1)
    runtime.writer.settle(30)
    newer = restated["id"]
    assert runtime.store.get_memory(three["a"]).status == "superseded"
    assert [(c.session_id, c.credit.role) for c in runtime.store.credits_for(scope, [newer])[newer]] == [
        ("ses_1", "helpful")
    ]
    assert round(runtime.store.get_memory(newer).weight, 6) == 1.15  # one full success step: 1 + 0.15


def test_a_context_memory_retracted_while_the_report_is_in_flight_does_not_move(runtime, three, monkeypatch):
    assert recall_top(runtime, S1) == [three["a"], three["b"]]
    scope = Scope("default", "default")
    landing_during_the_report(
        monkeypatch, lambda: runtime.store.retract(scope, [three["b"]], runtime.clock())
    )
    out = report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    assert three["b"] not in {update.id for update in out.updated}
    assert weights(runtime, three)["b"] == 1.0 and weights(runtime, three)["a"] > 1.0
    assert "1 memory of its contexts no longer active" in out.detail
