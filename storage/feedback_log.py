"""The feedback log: outcome reports, the credits they give memories, the queries they were about, and the
weights and weight events the reports produce."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import pyarrow as pa
from lancedb.expr import Expr

from storage import filters
from storage.locking import retrying
from storage.records import (
    CreditedSession,
    MemoryCredit,
    OutcomeRecord,
    ReportQueries,
    Scope,
    SessionFeedback,
    WeightEvent,
)
from storage.rows import (
    CREDIT_COLUMNS,
    QUERY_COLUMNS,
    arrow_rows,
    credit_values,
    credited_sessions,
    outcome_from_row,
    report_queries_from,
)
from storage.scan import scan
from storage.tables import StoreTables

# A credit's score at which a session went at least partly well (``retrieval.outcomes.OUTCOME_SCORES``).
PARTIAL_SCORE = 0.5


class FeedbackLog(StoreTables):
    """Outcome reports, their credits and queries, weight events, and the weights they set on memories.
    A report's sequence holds the reports' lock (``reporting()``)."""

    def set_weights(self, weights: Mapping[str, float], at: datetime) -> None:
        """Write feedback weights (a report holds ``reporting()``, in which it read them first; the write takes
        the write lock)."""
        if not weights:
            return
        update = pa.table(
            {
                "id": pa.array(list(weights), pa.string()),
                "weight": pa.array([float(w) for w in weights.values()], pa.float64()),
                "updated_at": pa.array([at] * len(weights), pa.timestamp("us", tz="UTC")),
            }
        )
        self._merge_update(update)

    def get_outcome(self, scope: Scope, session_id: str) -> OutcomeRecord | None:
        """The session's current report, with its credits and queries. Credits written by a report whose
        own row was never saved (a crash between the two commits) have another revision and are left
        out: such a report reads as not made, and its retry redoes it whole."""
        rows = self._select(self._outcomes, self._in_scope(scope, session_id=session_id), None, limit=None)
        if not rows:
            return None
        record = max((outcome_from_row(row) for row in rows), key=lambda found: found.revision)
        credits = [
            credited.credit
            for found in self.credits_for(scope, session_id=session_id).values()
            for credited in found
            if credited.revision == record.revision
        ]
        queries = self.report_queries(scope, [session_id]).get(session_id)
        vectors = queries.vectors if queries is not None and queries.vectors is not None else ()
        return replace(
            record,
            credits=tuple(sorted(credits, key=_credit_order)),
            queries=queries.queries if queries is not None else (),
            query_vectors=tuple(tuple(float(x) for x in vector) for vector in vectors),
            query_embedder=queries.embedder if queries is not None else None,
        )

    def outcomes_in_scope(self, scope: Scope) -> list[OutcomeRecord]:
        """Every session's current report (without credits), in the order sessions first reported."""
        rows = self._select(self._outcomes, filters.scope_is(scope), None, limit=None)
        latest: dict[str, OutcomeRecord] = {}
        for row in rows:
            record = outcome_from_row(row)
            kept = latest.get(record.session_id)
            if kept is None or record.revision > kept.revision:
                latest[record.session_id] = record
        return sorted(latest.values(), key=lambda record: (record.first_reported_at, record.session_id))

    def put_outcome(
        self,
        record: OutcomeRecord,
        previous: OutcomeRecord | None = None,
        cleared: Iterable[str] = (),
        *,
        first: bool = False,
    ) -> None:
        """Insert or replace the session's report (caller holds ``reporting()``): its credits and queries
        in one commit (a memory ``previous`` credited, or one of ``cleared``: memories a report that
        failed half-way credited, and this report does not is set to share 0), then the report's row,
        last, so that a retry after a failure in between finds no matching report. ``first``: the caller
        knows, as of the write lock it holds, that the session has no row in either table
        (``session_feedback``), so on a local store the rows are appended: a merge joins the whole table
        on its key, and under load the two merges took about a third of the time a report held the lock."""
        self._put_credits(record, previous, cleared, first=first)
        self.put_report_row(record, append=first and previous is None)

    def put_report_row(self, record: OutcomeRecord, *, append: bool = False) -> None:
        """Insert or replace the session's report row alone (caller holds ``reporting()``): the last commit of
        a report, or of one completed after a crash from its credits (``writing.outcomes.finish_report``).
        ``append``: the session has no row (``put_outcome``'s ``first``)."""
        columns = set(self._schema(self._outcomes).names)
        row = {name: value for name, value in record.__dict__.items() if name in columns}
        rows = [{**row, "memory_ids": list(record.memory_ids)}]
        with self.reporting():
            if append and self._lock.spans_processes:
                self._append_log(self._outcomes, rows)
                return
            table = arrow_rows(rows, self._schema(self._outcomes))
            retrying(
                lambda: (
                    self._outcomes.merge_insert(["org_id", "project_id", "session_id"])
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .execute(table)
                )
            )
            self._appends_since_maintenance += 1  # a merge leaves a version and fragments too

    def _put_credits(
        self,
        record: OutcomeRecord,
        previous: OutcomeRecord | None,
        cleared: Iterable[str] = (),
        *,
        first: bool = False,
    ) -> None:
        common = {
            "org_id": record.org_id,
            "project_id": record.project_id,
            "session_id": record.session_id,
            "revision": record.revision,
            "first_reported_at": record.first_reported_at,
        }
        rows: list[dict[str, Any]] = [
            {
                **common,
                "memory_id": "",
                "kind": "session",
                "queries": list(record.queries),
                "query_vectors": [list(vector) for vector in record.query_vectors],
                "query_embedder": record.query_embedder,
            }
        ]
        credited = {credit.memory_id for credit in record.credits}
        rows += [{**common, **credit_values(credit)} for credit in record.credits]
        dropped = {
            credit.memory_id: replace(credit, share=0.0)
            for credit in (previous.memory_credits() if previous is not None else ())
            if credit.memory_id not in credited
        }
        for memory_id in cleared:
            if memory_id not in credited and memory_id not in dropped:
                dropped[memory_id] = MemoryCredit(memory_id, "context", 0.0, record.score)
        rows += [{**common, **credit_values(credit)} for credit in dropped.values()]
        with self.reporting():
            if first and previous is None and not dropped and self._lock.spans_processes:
                self._append_log(self._feedback, rows)
                return
            self._merge_credits(rows)

    def _merge_credits(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert or replace credit-table rows by (scope, session, memory) (caller holds ``reporting()``)."""
        columns = self._schema(self._feedback)
        table = arrow_rows([{name: row.get(name) for name in columns.names} for row in rows], columns)
        retrying(
            lambda: (
                self._feedback.merge_insert(["org_id", "project_id", "session_id", "memory_id"])
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(table)
            )
        )
        self._appends_since_maintenance += 1  # a merge leaves a version and fragments too

    def carry_credits(self, scope: Scope, from_id: str, to_id: str, *, blame: bool = True) -> int:
        """Give ``to_id`` the credits ``from_id`` has in the current reports (a memory that took its place:
        it serves what the old one did); returns how many. Without ``blame``, only the credits of sessions
        that went at least partly well (a correction does not inherit the failures that made it needed). A
        session that credits ``to_id`` already keeps its own credit (the larger share is not guessed at:
        the report said what it said of that memory), unless the report only saw ``to_id`` in a context
        and named ``from_id`` (helpful, misleading or used): the agent said what the memory that stands now
        did for it, under its earlier id. A report of one of those sessions made later replaces them as it
        replaces its own."""

        # The credits of every project of the org: an org-visible memory is credited wherever it was read.
        def credits_of(memory_id: str) -> Expr:
            return filters.all_of(
                filters.equals("org_id", scope.org_id),
                filters.equals("kind", "credit"),
                filters.equals("memory_id", memory_id),
            )

        with self.reporting():
            found = scan(self._feedback, credits_of(from_id), None).to_pylist()
            rows = [
                row
                for row in found
                if (row.get("share") or 0) > 0 and (blame or (row.get("score") or 0.0) >= PARTIAL_SCORE)
            ]
            if rows:
                # A session's row of share 0 is a credit a later report of it took back: not held.
                own = scan(
                    self._feedback, credits_of(to_id), ["project_id", "session_id", "share", "role"]
                ).to_pylist()
                held = {
                    (row["project_id"], row["session_id"]): row.get("role")
                    for row in own
                    if (row.get("share") or 0) > 0
                }
                rows = [
                    {**row, "memory_id": to_id}
                    for row in rows
                    if (key := (row["project_id"], row["session_id"])) not in held
                    or (held[key] == "context" and row.get("role") != "context")
                ]
            if rows:
                self._merge_credits(rows)
        return len(rows)

    def session_feedback(self, scope: Scope, session_id: str) -> SessionFeedback:
        """The session's rows in the credit table, in one read: the memories they credit (share above 0;
        a report that failed half-way leaves such rows without its report row) and the revision of its
        latest report's credits (None: the session has no row)."""
        rows = scan(
            self._feedback,
            self._in_scope(scope, session_id=session_id),
            ["kind", "memory_id", "share", "revision"],
        )
        kinds = rows.column("kind").to_pylist()
        shares = rows.column("share").to_pylist()
        credited = [
            memory_id
            for memory_id, kind, share in zip(
                rows.column("memory_id").to_pylist(), kinds, shares, strict=True
            )
            if kind == "credit" and share is not None and share > 0
        ]
        revisions = [revision for revision in rows.column("revision").to_pylist() if revision is not None]
        return SessionFeedback(tuple(dict.fromkeys(credited)), max(revisions) if revisions else None)

    def credits_changed_since(
        self, version: int, scope: Scope, memory_ids: Sequence[str], session_id: str
    ) -> tuple[list[CreditedSession], bool]:
        """The credits of ``memory_ids`` (share 0 included: a credit withdrawn) that reports of any project
        of the scope's org wrote after ``version`` (as ``credits_for(across_org=True)`` reads them), and
        whether any row of ``session_id`` was written since in ``scope``."""
        session = filters.all_of(filters.scope_is(scope), filters.equals("session_id", session_id))
        condition = filters.all_of(
            filters.newer_than_version(version),
            (filters.equals("org_id", scope.org_id) & filters.one_of("memory_id", memory_ids)) | session
            if memory_ids
            else session,
        )
        changed = scan(self._feedback, condition, ["kind", *CREDIT_COLUMNS])
        ours = session_id in set(changed.column("session_id").to_pylist())
        credit_rows = [
            index for index, kind in enumerate(changed.column("kind").to_pylist()) if kind == "credit"
        ]
        credited = credited_sessions(changed.take(credit_rows)) if credit_rows else []
        return [found for _, found in credited], ours

    def outcome_revision(self, scope: Scope, session_id: str) -> int | None:
        """The revision of the session's saved report (None: none saved): one column of one row."""
        rows = scan(self._outcomes, self._in_scope(scope, session_id=session_id), ["revision"])
        revisions = [r for r in rows.column("revision").to_pylist() if r is not None]
        return max(revisions) if revisions else None

    def feedback_version(self) -> int:
        """The credit table's version: any report, by any process, changes it (read from the table only
        when a report's sequence ended since the last read: ``storage.generations``)."""
        return self._feedback_version.current()

    def report_versions(self) -> tuple[int, int]:
        """The versions of the credit table and of the report table (``put_outcome`` commits to the first,
        then the second): a report read at these versions is current while both stay the same."""
        return int(self._feedback.version), int(self._outcomes.version)

    def credits_for(
        self,
        scope: Scope,
        memory_ids: Sequence[str] | None = None,
        *,
        session_id: str | None = None,
        across_org: bool = False,
    ) -> dict[str, list[CreditedSession]]:
        """Each memory's credits (share above 0) in the current reports, oldest report first; every memory
        asked for has an entry. ``session_id``: only that session's. ``across_org``: the reports of every
        project of the scope's org (an org-visible memory is credited wherever it was read; a project's
        memory only ever is in its project, its id being the project's), for its global weight."""
        across = across_org and memory_ids is not None and session_id is None
        condition = filters.all_of(
            filters.equals("org_id", scope.org_id) if across else filters.scope_is(scope),
            filters.equals("kind", "credit"),
            filters.one_of("memory_id", memory_ids) if memory_ids is not None else None,
            filters.equals("session_id", session_id) if session_id is not None else None,
        )
        found: dict[str, list[CreditedSession]] = {memory_id: [] for memory_id in memory_ids or ()}
        if memory_ids is not None and not memory_ids:
            return found
        for _, credited in credited_sessions(scan(self._feedback, condition, CREDIT_COLUMNS)):
            if credited.credit.share > 0:
                found.setdefault(credited.credit.memory_id, []).append(credited)
        for credits in found.values():
            credits.sort(key=lambda credited: credited.replay_key)
        return found

    def credited_memories(self, scope: Scope) -> set[str]:
        """The memories of ``scope`` that some current report credits (share above 0): one read of one
        column, so that a recall reads the credits of these memories only."""
        condition = filters.all_of(filters.scope_is(scope), filters.equals("kind", "credit"))
        rows = scan(self._feedback, condition, ["memory_id", "share"])
        shares = rows.column("share").to_pylist()
        return {
            memory_id
            for memory_id, share in zip(rows.column("memory_id").to_pylist(), shares, strict=True)
            if share is not None and share > 0
        }

    def report_queries(self, scope: Scope, session_ids: Sequence[str]) -> dict[str, ReportQueries]:
        """The recall queries (and their embeddings) of these reported sessions."""
        if not session_ids:
            return {}
        condition = filters.all_of(
            filters.scope_is(scope),
            filters.equals("kind", "session"),
            filters.one_of("session_id", session_ids),
        )
        return {
            found.session_id: found
            for found in report_queries_from(scan(self._feedback, condition, QUERY_COLUMNS))
        }

    def feedback_changed_since(
        self, version: int
    ) -> tuple[list[tuple[Scope, CreditedSession]], list[tuple[Scope, ReportQueries]]]:
        """Credit and session rows a report wrote after ``version``, with their scopes."""
        changed = scan(self._feedback, filters.newer_than_version(version), None)
        scopes = [
            Scope(org, project)
            for org, project in zip(
                changed.column("org_id").to_pylist(), changed.column("project_id").to_pylist(), strict=True
            )
        ]
        kinds = changed.column("kind").to_pylist()
        credit_rows = [index for index, kind in enumerate(kinds) if kind == "credit"]
        session_rows = [index for index, kind in enumerate(kinds) if kind == "session"]
        credits = credited_sessions(changed.take(credit_rows)) if credit_rows else []
        sessions = report_queries_from(changed.take(session_rows)) if session_rows else []
        return credits, list(zip([scopes[i] for i in session_rows], sessions, strict=True))

    def add_weight_events(self, events: Sequence[WeightEvent]) -> None:
        with self.reporting():
            self._append_log(self._weight_events, [event.__dict__ for event in events])

    def weight_event_times(self, scope: Scope, session_id: str, revision: int) -> set[datetime]:
        """When the reports of ``session_id`` at ``revision`` wrote their weight events (one time a report)."""
        condition = filters.all_of(
            filters.scope_is(scope),
            filters.equals("session_id", session_id),
            filters.equals("revision", revision),
        )
        rows = self._select(self._weight_events, condition, ["at"], limit=None)
        return {row["at"] for row in rows}

    def drop_weight_events(self, scope: Scope, session_id: str, revision: int, at: datetime) -> None:
        """Delete the weight events a report of ``session_id`` at ``revision``, made at ``at``, wrote before it
        died unsaved: the weights they record were taken back (``writing.outcomes.finish_report``)."""
        condition = filters.all_of(
            filters.scope_is(scope),
            filters.equals("session_id", session_id),
            filters.equals("revision", revision),
            filters.equals("at", at),
        )
        with self.reporting():
            retrying(lambda: self._weight_events.delete(condition))

    def weight_events(self, scope: Scope, memory_id: str) -> list[WeightEvent]:
        """The weight history of a memory, from the reports of every project of the scope's org (an
        org-visible memory moves with reports wherever it was read; a project's memory only ever in its
        project's)."""
        condition = filters.all_of(
            filters.equals("org_id", scope.org_id), filters.equals("memory_id", memory_id)
        )
        rows = self._select(self._weight_events, condition, None, limit=None)
        return sorted((WeightEvent(**row) for row in rows), key=lambda event: (event.at, event.revision))


def _credit_order(credit: MemoryCredit) -> tuple[int, float, str]:
    """Named memories first (helpful, misleading), then the rest by share: the order credit is assigned."""
    return ({"helpful": 0, "misleading": 1}.get(credit.role, 2), -credit.share, credit.memory_id)
