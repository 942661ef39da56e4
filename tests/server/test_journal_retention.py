"""The journal's retention (MEMORIA_JOURNAL_RETENTION_DAYS): recalls' records and A/B rows older than it
leave the store in the maintenance rounds; the reports made from them keep their weights, and a report or
an explanation that would need them says so."""

from datetime import UTC, datetime, timedelta

import pytest

from server.upkeep import JOURNAL_EXPIRY_EVERY_SECONDS, expire_journal
from storage.records import Scope
from tests.helpers import make_runtime, settings_for
from tools.common import Caller, ToolFailure
from tools.explain_ranking import ExplainRankingInput, explain_ranking
from tools.recall import RecallInput, recall
from tools.remember import RememberInput, remember
from tools.report_outcome import ReportOutcomeInput, report_outcome

SCOPE = Scope("default", "default")
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
OLD = Caller("agent", "ses_old")
NEW = Caller("agent", "ses_new")


@pytest.fixture
def runtime(tmp_path):
    built = make_runtime(settings_for(tmp_path / "db", journal_retention_days=30))
    built.clock = lambda: NOW
    yield built
    built.close()


def recall_at(runtime, moment, caller, query="postgres pool size"):
    runtime.clock = lambda: moment
    try:
        return recall(RecallInput(query=query, top_k=2), runtime, caller)
    finally:
        runtime.clock = lambda: NOW


def ab_rows(runtime):
    runtime.store.flush_logs()
    return runtime.store._ab_logs.count_rows()


def test_recalls_older_than_the_retention_leave_the_journal_and_their_reports_keep_their_weights(runtime):
    memory = remember(RememberInput(content="the postgres pool size is 20"), runtime, OLD).id
    old = recall_at(runtime, NOW - timedelta(days=31), OLD)
    report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[memory]), runtime, OLD)
    new = recall_at(runtime, NOW - timedelta(days=29), NEW)
    weight = runtime.store.get_memory(memory).weight
    assert weight == pytest.approx(1.15)  # one full step: 1.0 + 0.2 x (1.75 - 1.0)
    rows_before = ab_rows(runtime)

    records, rows = expire_journal(runtime, now=1_000.0)

    assert (records, rows) == (1, 1) and rows_before == 2  # one row each: the memory it ranked
    assert runtime.store.get_retrieval(old.retrieval_id, SCOPE) is None
    assert runtime.store.get_retrieval(new.retrieval_id, SCOPE) is not None
    assert ab_rows(runtime) == rows_before - rows
    assert runtime.store.get_memory(memory).weight == weight


def test_a_session_whose_recalls_expired_is_not_reported_again_and_nothing_moves(runtime):
    memory = remember(RememberInput(content="the postgres pool size is 20"), runtime, OLD).id
    old = recall_at(runtime, NOW - timedelta(days=40), OLD)
    report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[memory]), runtime, OLD)
    expire_journal(runtime, now=1_000.0)

    with pytest.raises(ToolFailure, match=r"older than the journal keeps them .*nothing moved"):
        report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[memory]), runtime, OLD)
    assert runtime.store.get_memory(memory).weight == pytest.approx(1.15)
    with pytest.raises(ToolFailure, match=r"no retrieval .*MEMORIA_JOURNAL_RETENTION_DAYS"):
        explain_ranking(ExplainRankingInput(retrieval_id=old.retrieval_id), runtime, OLD)


def test_a_session_reported_without_recalls_is_still_reported_again(runtime):
    memory = remember(RememberInput(content="the postgres pool size is 20"), runtime, OLD).id
    report_outcome(ReportOutcomeInput(outcome="success", helpful_ids=[memory]), runtime, OLD)
    expire_journal(runtime, now=1_000.0)
    again = report_outcome(ReportOutcomeInput(outcome="failure", misleading_ids=[memory]), runtime, OLD)
    assert again.status == "replaced"


def test_the_journal_is_looked_at_once_every_ten_minutes_and_never_with_a_retention_of_0(runtime, tmp_path):
    remember(RememberInput(content="the postgres pool size is 20"), runtime, OLD)
    recall_at(runtime, NOW - timedelta(days=31), OLD)
    assert expire_journal(runtime, now=1_000.0) == (1, 1)
    recall_at(runtime, NOW - timedelta(days=32), NEW)
    assert expire_journal(runtime, now=1_000.0 + JOURNAL_EXPIRY_EVERY_SECONDS - 1) == (0, 0)  # too soon
    assert expire_journal(runtime, now=1_000.0 + JOURNAL_EXPIRY_EVERY_SECONDS) == (1, 1)

    kept = make_runtime(settings_for(tmp_path / "kept", journal_retention_days=0))
    try:
        kept.clock = lambda: NOW
        remember(RememberInput(content="the postgres pool size is 20"), kept, OLD)
        recall_at(kept, NOW - timedelta(days=3_650), OLD)
        assert expire_journal(kept, now=1_000.0) == (0, 0)
        assert kept.store.session_retrievals(SCOPE, OLD.session_id)
    finally:
        kept.close()


def test_looking_at_a_journal_with_nothing_to_expire_leaves_its_tables_versions_alone(runtime):
    remember(RememberInput(content="the postgres pool size is 20"), runtime, OLD)
    recall_at(runtime, NOW - timedelta(days=1), OLD)
    runtime.store.flush_logs()
    versions = (runtime.store._retrievals.version, runtime.store._ab_logs.version)
    assert expire_journal(runtime, now=1_000.0) == (0, 0)
    assert (runtime.store._retrievals.version, runtime.store._ab_logs.version) == versions


def test_a_maintenance_round_expires_the_journal(runtime):
    from server.upkeep import maintenance_round

    remember(RememberInput(content="the postgres pool size is 20"), runtime, OLD)
    old = recall_at(runtime, NOW - timedelta(days=31), OLD)
    maintenance_round(runtime)
    assert runtime.store.get_retrieval(old.retrieval_id, SCOPE) is None
