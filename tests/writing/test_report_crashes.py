"""An outcome report is four commits: the weights of the memories it moves, their weight events, the
session's credits, and last its report row. A process killed between them leaves the report written down
(``storage.unfinished.ReportInFlight``), and the next start completes it from its credits or takes it back
(``writing.outcomes.finish_report``): never a report half applied (a review: killed after its credits, recall
ranked by a report that did not exist; killed after its weights, they moved with nothing behind them)."""

import pytest

from storage.records import Scope, View
from tests.helpers import killed_after, make_runtime

SCOPE = Scope("default", "default")

# A process that recalls two memories, reports on them (a revision 1 report first, with ``again``), and is
# killed (kill -9) as the report reaches ``cut``: "events" (the weights are written), "credits" (the weight
# events too), "row" (the credits too: only the report's row is missing).
REPORTING = """
import sys, time
from tests.helpers import make_runtime, settings_for
from tools.common import Caller
from tools.recall import RecallInput, recall
from tools.remember import RememberInput, remember
from tools.report_outcome import ReportOutcomeInput, report_outcome

runtime = make_runtime(settings_for(sys.argv[1]))
cut, again = sys.argv[2], sys.argv[3] == "again"
caller = Caller("agent", "ses_1")
a = remember(RememberInput(content="postgres pool size is 20"), runtime, caller).id
b = remember(RememberInput(content="postgres runs on port 5432"), runtime, caller).id
recall(RecallInput(query="postgres pool", top_k=2), runtime, caller)
if again:
    report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[b]), runtime, caller)
print(a, b, flush=True)

def killed(*args, **kwargs):
    print("killed", flush=True)
    time.sleep(3600)

store = runtime.store
if cut == "events":
    store.add_weight_events = killed
elif cut == "credits":
    store._put_credits = killed
elif cut == "done":  # every commit is in; only the entry's end is missing
    import writing.outcomes
    writing.outcomes.converge = killed
else:
    store.put_report_row = killed
report_outcome(
    ReportOutcomeInput(outcome="failure", misleading_ids=[a], helpful_ids=[b], note="pool exhausted"),
    runtime,
    caller,
)
time.sleep(3600)
"""


def killed_reporting(settings, cut: str, again: bool = False) -> tuple[str, str]:
    with killed_after(REPORTING, str(settings.db_uri), cut, "again" if again else "once") as process:
        ids = process.stdout.readline().split()
        reached = process.stdout.readline().strip()
        assert len(ids) == 2 and reached == "killed", process.stderr.read()
    return ids[0], ids[1]


def weights(runtime, *ids: str) -> list[float]:
    memories = runtime.store.get_memories(list(ids), View(SCOPE))
    return [round(memories[memory_id].weight, 6) for memory_id in ids]


def revisions(runtime, *ids: str) -> list[list[int]]:
    return [[event.revision for event in runtime.store.weight_events(SCOPE, memory_id)] for memory_id in ids]


# A failure with ``a`` misleading and ``b`` helpful moves each by a full step of 0.2 of its distance to the
# bound: a to 1 - 0.2 x (1 - 0.25) = 0.85, b to 1 + 0.2 x (1.75 - 1) = 1.15.
REPORTED = [0.85, 1.15]


@pytest.mark.slow
@pytest.mark.parametrize("cut", ["events", "credits"])
def test_a_report_killed_before_its_credits_committed_is_taken_back_by_the_next_start(settings, cut):
    a, b = killed_reporting(settings, cut)
    runtime = make_runtime(settings)
    try:
        assert weights(runtime, a, b) == REPORTED  # half done: moved, with no report behind them
        runtime.writer.recover_unfinished()
        assert weights(runtime, a, b) == [1.0, 1.0]
        assert revisions(runtime, a, b) == [[], []]  # its weight events went with it
        assert runtime.store.get_outcome(SCOPE, "ses_1") is None
        assert runtime.store.credits_for(SCOPE, [a, b]) == {a: [], b: []}
    finally:
        runtime.close()


@pytest.mark.slow
def test_a_report_killed_before_its_row_is_completed_from_its_credits_by_the_next_start(settings):
    a, b = killed_reporting(settings, "row")
    runtime = make_runtime(settings)
    try:
        assert runtime.store.get_outcome(SCOPE, "ses_1") is None  # half done: credits, and no report
        runtime.writer.recover_unfinished()
        report = runtime.store.get_outcome(SCOPE, "ses_1")
        assert (report.outcome, report.score, report.revision, report.note) == ("failure", 0.0, 1, None)
        assert {(c.memory_id, c.role) for c in report.credits} == {(a, "misleading"), (b, "helpful")}
        assert weights(runtime, a, b) == REPORTED
        assert revisions(runtime, a, b) == [[1], [1]]
        runtime.writer.recover_unfinished()  # nothing left written down: the same
        assert weights(runtime, a, b) == REPORTED
    finally:
        runtime.close()


@pytest.mark.slow
@pytest.mark.parametrize("cut", ["credits", "row"])
def test_a_replacing_report_killed_part_way_leaves_one_whole_report(settings, cut):
    """Revision 2 of a session killed before its credits: revision 1 stands, with its weights. Killed after
    them (they replaced revision 1's): revision 2 is completed, and the weights replay it alone."""
    a, b = killed_reporting(settings, cut, again=True)
    runtime = make_runtime(settings)
    try:
        runtime.writer.recover_unfinished()
        report = runtime.store.get_outcome(SCOPE, "ses_1")
        if cut == "credits":
            assert (report.outcome, report.revision) == ("success", 1)
            # The success named b helpful (a full step up, 1.15); a was the first of the context, unnamed:
            # a quarter of its share 1.0, 1 + 0.25 x 0.15 = 1.0375.
            assert weights(runtime, a, b) == [1.0375, 1.15]
            assert revisions(runtime, a, b) == [[1], [1]]
        else:
            assert (report.outcome, report.revision) == ("failure", 2)
            assert weights(runtime, a, b) == REPORTED
            assert revisions(runtime, a, b) == [[1, 2], [1, 2]]
    finally:
        runtime.close()


@pytest.mark.slow
def test_a_dead_report_the_session_reported_again_before_recovery_leaves_only_the_live_reports_events(
    settings,
):
    """A review: a live server reported the session (at the same revision) before recovering the dead
    report; its weight events stayed beside the live report's, two of revision 1, one of a report that
    never was."""
    from tools.common import Caller
    from tools.report_outcome import ReportOutcomeInput, report_outcome

    a, b = killed_reporting(settings, "credits")
    runtime = make_runtime(settings)
    try:
        live = report_outcome(
            ReportOutcomeInput(outcome="success", helpful_ids=[b]), runtime, Caller("agent", "ses_1")
        )
        assert live.revision == 1
        runtime.writer.recover_unfinished()
        assert revisions(runtime, a, b) == [[1], [1]]  # the live report's alone
        # The live success named b helpful: a full step up from the 1.0 the dead report's weights were taken
        # back to; a, unnamed at the top of the context, a quarter of its share: 1 + 0.25 x 0.15.
        assert weights(runtime, a, b) == [1.0375, 1.15]
        assert runtime.store.get_outcome(SCOPE, "ses_1").outcome == "success"
    finally:
        runtime.close()


@pytest.mark.slow
def test_a_saved_report_a_crash_left_written_down_keeps_its_events_after_the_session_is_reported_again(
    settings,
):
    """A second review: every commit of the report was in (only its entry's end was not), a live server
    reported the session again (revision 2), and recovery deleted the saved revision's events as if it had
    never been."""
    from tools.common import Caller
    from tools.report_outcome import ReportOutcomeInput, report_outcome

    a, b = killed_reporting(settings, "done")
    runtime = make_runtime(settings)
    try:
        assert runtime.store.get_outcome(SCOPE, "ses_1").revision == 1
        again = ReportOutcomeInput(outcome="success", helpful_ids=[b])
        assert report_outcome(again, runtime, Caller("agent", "ses_1")).revision == 2
        runtime.writer.recover_unfinished()
        assert revisions(runtime, a, b) == [[1, 2], [1, 2]]
        assert weights(runtime, a, b) == [1.0375, 1.15]  # revision 2 alone replays, as computed above
    finally:
        runtime.close()
