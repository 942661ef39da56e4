"""The journal of retrievals: each recall's record (its trace and context) and its A/B log rows, written
behind the request (``storage.write_behind``) and read with the rows still queued."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import partial

from storage import filters
from storage.locking import retrying
from storage.records import AbLogRow, RetrievalPurpose, RetrievalRecord, Scope
from storage.rows import quoted_by, retrieval_from_row, scope_of_row, trace_ids_key
from storage.scan import utc
from storage.tables import StoreTables


class RetrievalJournal(StoreTables):
    """Retrieval records and A/B log rows: queued by a recall, written in batches by the write-behind
    thread, readable at once (the queue is read beside the table)."""

    def record_retrieval(self, record: RetrievalRecord, quoted: Iterable[str] | None = None) -> None:
        """Queued and written in the background with others (``storage.write_behind``), its trace compressed
        then (``storage.rows.with_trace``). ``quoted``: the memories its trace quotes (its candidates),
        when the caller knows them; else they are read from the trace. They are kept beside the trace
        (``trace_ids``): what the append checks for purges and what a purge looks for."""
        if quoted is None:
            quoted = quoted_by(record.trace_json)
        row = {**record.__dict__, "context_ids": list(record.context_ids), "trace_ids": trace_ids_key(quoted)}
        self._logs.add(self._retrievals, [row])

    def log_ab_rows(self, rows: Sequence[AbLogRow]) -> None:
        self._logs.add(self._ab_logs, [row.__dict__ for row in rows])

    def expire_journal(self, before: datetime) -> tuple[int, int]:
        """Delete the retrieval records and A/B log rows made before ``before`` (the journal's retention,
        ``MEMORIA_JOURNAL_RETENTION_DAYS``): a recall's record is 15-20 KB on disk, and a server that keeps
        every one grows with every recall it serves. Returns how many records and rows went. Reports keep
        what they credited (their own tables), so weights do not move when the recalls behind them go.
        Under the logs lock (shared), like the write-behind appends and their compaction, so that no such
        delete is in flight while a purge scrubs traces."""
        self._logs.flush()  # a queued record that old goes too
        condition = filters.earlier_than("created_at", before)
        deleted = []
        with self._logs_lock.shared():
            for table in (self._retrievals, self._ab_logs):
                # A delete commits a version even when nothing matches: look first.
                if not self._select(table, condition, ["created_at"], limit=1):
                    deleted.append(0)
                    continue
                deleted.append(int(retrying(partial(table.delete, condition)).num_deleted_rows))
                if deleted[-1]:
                    self._deleted_from.add(table.name)  # the next maintenance round compacts it
        return deleted[0], deleted[1]

    def get_retrieval(self, retrieval_id: str, scope: Scope) -> RetrievalRecord | None:
        queued = self._logs.queued(
            self._retrievals, lambda row: row["retrieval_id"] == retrieval_id and scope_of_row(row) == scope
        )
        if queued:  # a recall of a moment ago, not written yet
            return retrieval_from_row(queued[-1])
        rows = self._select(self._retrievals, self._in_scope(scope, retrieval_id=retrieval_id), None, limit=1)
        return retrieval_from_row(rows[0]) if rows else None

    def session_retrievals(
        self, scope: Scope, session_id: str, purpose: RetrievalPurpose = "recall"
    ) -> list[RetrievalRecord]:
        """The session's retrievals. A report reads them: it writes the logs queued here first, so that
        it reads every recall of the session from the table (a row queued when another process purges
        a memory it quotes is masked as it is appended: ``LogsLock``)."""
        self._logs.flush()
        condition = self._in_scope(scope, session_id=session_id, purpose=purpose)
        rows = self._select(self._retrievals, condition, None, limit=None)
        unique = {row["retrieval_id"]: retrieval_from_row(row) for row in rows}
        return sorted(unique.values(), key=lambda record: record.created_at)

    def recent_sessions(self, scope: Scope, agent_id: str, since: datetime) -> list[tuple[str, datetime]]:
        """The sessions in which ``agent_id`` recalled since ``since``: (session id, its last recall),
        newest first."""
        return [
            (session, at) for session, _, at in self._recalled_since(scope, agent_id, since, whole_org=False)
        ]

    def sessions_in_other_projects(
        self, scope: Scope, agent_id: str, since: datetime
    ) -> list[tuple[str, str, datetime]]:
        """The sessions in which ``agent_id`` recalled since ``since`` in the org's other projects: (session id,
        project, its last recall), newest first. ``memoria outcome`` reads them to say that the recall it
        would report on is not the newest one."""
        recalled = self._recalled_since(scope, agent_id, since, whole_org=True)
        return [found for found in recalled if found[1] != scope.project_id]

    def _recalled_since(
        self, scope: Scope, agent_id: str, since: datetime, *, whole_org: bool
    ) -> list[tuple[str, str, datetime]]:
        """(session id, project, its last recall) of ``agent_id``'s recalls since ``since`` in ``scope``
        (``whole_org``: in every project of its org), newest first."""
        where = filters.equals("org_id", scope.org_id) if whole_org else filters.scope_is(scope)
        condition = filters.all_of(
            where,
            filters.equals("agent_id", agent_id),
            filters.equals("purpose", "recall"),
            filters.later_than("created_at", since),
        )
        rows = self._logged(
            self._retrievals,
            condition,
            lambda row: (
                (row["org_id"] == scope.org_id if whole_org else scope_of_row(row) == scope)
                and row["agent_id"] == agent_id
                and row["purpose"] == "recall"
                and utc(row["created_at"]) > since
            ),
            ["session_id", "project_id", "created_at"],
        )
        last: dict[tuple[str, str], datetime] = {}
        for row in rows:
            key, at = (row["session_id"], row["project_id"]), utc(row["created_at"])
            last[key] = max(at, last.get(key, at))
        return sorted(((*key, at) for key, at in last.items()), key=lambda found: found[2], reverse=True)
