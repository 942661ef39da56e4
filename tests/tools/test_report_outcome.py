"""report_outcome through its handler, with weights computed by hand (alpha 0.2, weights in [0.25, 1.75])."""

from dataclasses import replace

import pytest

from tools.common import Caller
from tools.recall import RecallInput, recall
from tools.remember import RememberInput, remember
from tools.report_outcome import ReportOutcomeInput, converge, report_outcome

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


def test_success_raises_every_memory_the_session_put_in_a_context(runtime, three):
    in_context = recall_top(runtime, S1)
    assert set(in_context) == {three["a"], three["b"]}
    out = report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    assert out.status == "applied" and out.revision == 1
    assert {(u.id, u.weight_before, round(u.weight_after, 6)) for u in out.updated} == {
        (three["a"], 1.0, 1.15),
        (three["b"], 1.0, 1.15),
    }
    assert weights(runtime, three) == {"a": 1.15, "b": 1.15, "c": 1.0}


def test_the_same_report_twice_applies_once(runtime, three):
    recall_top(runtime, S1)
    report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    again = report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    assert again.status == "unchanged"
    assert all(u.weight_before == u.weight_after for u in again.updated)
    assert weights(runtime, three) == {"a": 1.15, "b": 1.15, "c": 1.0}


def test_a_corrected_report_replaces_the_earlier_one(runtime, three):
    recall_top(runtime, S1)
    report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    corrected = report_outcome(ReportOutcomeInput(outcome="failure"), runtime, S1)
    assert corrected.status == "replaced" and corrected.revision == 2
    # As if only the failure had been reported: 0.8 x 1.0 + 0.2 x 0.25 = 0.85
    assert weights(runtime, three) == {"a": 0.85, "b": 0.85, "c": 1.0}


def test_weights_replay_sessions_in_the_order_they_first_reported(runtime, three):
    recall_top(runtime, S1)
    report_outcome(ReportOutcomeInput(outcome="failure"), runtime, S1)  # a, b: 0.85
    recall_top(runtime, S2, top_k=1)  # a only
    report_outcome(ReportOutcomeInput(outcome="success"), runtime, S2)  # a: 0.8 x 0.85 + 0.35 = 1.03
    assert weights(runtime, three)["a"] == 1.03
    report_outcome(
        ReportOutcomeInput(outcome="success"), runtime, S1
    )  # s1 corrected in place: a: 1.15 -> 1.27
    assert weights(runtime, three) == {"a": 1.27, "b": 1.15, "c": 1.0}


def test_an_explicit_score_overrides_the_label(runtime, three):
    recall_top(runtime, S1, top_k=1)
    out = report_outcome(ReportOutcomeInput(outcome="success", score=0.0), runtime, S1)
    assert out.score == 0.0
    assert weights(runtime, three)["a"] == 0.85


def test_a_session_without_recalls_has_nothing_to_update(runtime, three):
    out = report_outcome(ReportOutcomeInput(outcome="success", session_id="ses_never"), runtime, S1)
    assert (out.status, out.updated) == ("nothing_to_update", [])
    assert weights(runtime, three) == {"a": 1.0, "b": 1.0, "c": 1.0}


def test_outcomes_do_not_cross_projects(runtime, three):
    recall_top(runtime, S1)
    out = report_outcome(ReportOutcomeInput(outcome="failure", project_id="other"), runtime, S1)
    assert out.status == "nothing_to_update"
    assert weights(runtime, three) == {"a": 1.0, "b": 1.0, "c": 1.0}


def test_weight_history_is_recorded(runtime, three):
    recall_top(runtime, S1, top_k=1)
    report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    report_outcome(ReportOutcomeInput(outcome="failure"), runtime, S1)
    from storage.records import Scope

    events = runtime.store.weight_events(Scope("default", "default"), three["a"])
    assert [(e.revision, round(e.weight_before, 6), round(e.weight_after, 6)) for e in events] == [
        (1, 1.0, 1.15),
        (2, 1.15, 0.85),
    ]


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
        report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    retried = report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    assert retried.status == "applied"
    assert weights(runtime, three) == {"a": 1.15, "b": 1.15, "c": 1.0}


def test_a_report_another_replica_saved_meanwhile_is_replayed_into_the_weights(runtime, three):
    # Replicas on an object store share no lock: S2's report (saved by "another replica") lands after
    # S1's weights were computed without it. converge() finds it and writes weights replaying both.
    recall_top(runtime, S1)
    report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    scope = ReportOutcomeInput(outcome="success").scope(runtime.settings)
    replayed_by_s1 = runtime.store.outcomes_in_scope(scope)
    other = replace(
        replayed_by_s1[0], session_id="ses_2", first_reported_at=replayed_by_s1[0].reported_at, revision=1
    )
    runtime.store.put_outcome(other)  # saved without touching the weights, as a racing replica's report
    assert weights(runtime, three) == {"a": 1.15, "b": 1.15, "c": 1.0}

    converge(runtime, scope, [three["a"], three["b"]], replayed_by_s1)
    # Two successes: 1.15, then 0.8 x 1.15 + 0.2 x 1.75 = 1.27.
    assert weights(runtime, three) == {"a": 1.27, "b": 1.27, "c": 1.0}


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
    report_outcome(ReportOutcomeInput(outcome="success"), runtime, S1)
    scope = ReportOutcomeInput(outcome="success").scope(runtime.settings)
    replayed = runtime.store.outcomes_in_scope(scope)
    runtime.store.set_weights({three["a"]: 1.0, three["b"]: 1.0}, replayed[0].reported_at)  # the stale write
    converge(replace(runtime, store=ReplicaStore(runtime.store)), scope, [three["a"], three["b"]], replayed)
    assert weights(runtime, three) == {"a": 1.15, "b": 1.15, "c": 1.0}
    runtime.store.set_weights({three["a"]: 1.0, three["b"]: 1.0}, replayed[0].reported_at)
    converge(runtime, scope, [three["a"], three["b"]], replayed)  # a local store: its lock kept it out
    assert weights(runtime, three) == {"a": 1.0, "b": 1.0, "c": 1.0}
