"""What consolidation and corroboration record between memories: lineage events, contradictions between
an older and a newer memory, and the attestations of agents that stated a memory again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from lancedb.expr import Expr

from storage import filters
from storage.locking import retrying
from storage.records import (
    ORG_SHELF_PROJECT,
    SHARED_VISIBILITIES,
    AggregationRow,
    ContradictionRecord,
    LineageEvent,
    MemoryRecord,
    Reach,
    Scope,
    View,
)
from storage.rows import arrow_rows, contradiction_from_row, from_int64, scope_of_row
from storage.scan import scan, utc
from storage.snapshots import ScopeSnapshots
from storage.tables import StoreTables

log = logging.getLogger(__name__)


class Lineage(StoreTables):
    """Lineage events, contradictions and attestations, and the reads the aggregation job makes."""

    # Open contradictions and attestations of small scopes, read whole and kept until the table changes.
    _contradiction_snapshots: ScopeSnapshots[dict[str, list[str]]]
    _attestation_snapshots: ScopeSnapshots[dict[str, frozenset[str]]]
    # Per thread: the pairs ``gathering_contradictions`` holds until its block ends (None: not gathering).
    _gathered: threading.local

    def add_lineage(self, events: Sequence[LineageEvent], *, deferred: bool = False) -> None:
        """Append lineage events, committed before this returns; ``deferred``: queued and written with the
        next batch of logs (within 0.2 s), for events that record a decision which changed nothing
        (keep_both): a crash can lose the last of those, never a change's own event. Reads of lineage see
        them at once. Neither takes the write lock: an append is one commit that no other write conflicts
        with, no write reads lineage to decide (the sweep's keep_both pairs only save it work), and a
        purge's scrub is kept apart by the logs lock (``_append_log``). Under the write lock, each
        supersede's event held up every remember."""
        rows = [event.__dict__ for event in events]
        if deferred:
            self._logs.add(self._lineage, rows)
        else:
            self._append_log(self._lineage, rows)

    def lineage(self, reach: Reach, memory_ids: Sequence[str], *, settled: bool = True) -> list[LineageEvent]:
        """Every event (in ``reach``'s scopes) that acted on, or was caused by, one of ``memory_ids``,
        oldest first; with ``settled``, after the supersedes of theirs still being committed (which write
        their events with them, ``storage.pending``)."""
        if not memory_ids:
            return []
        ids = list(dict.fromkeys(memory_ids))
        if settled:
            self._settle_lineage(ids)
        scopes = self._scopes(reach)
        wanted = set(ids)
        condition = filters.all_of(
            filters.any_of(*(filters.scope_is(scope) for scope in scopes)),
            filters.one_of("memory_id", ids) | filters.one_of("related_id", ids),
        )
        rows = self._logged(  # with the events queued for the next batch of logs (keep_both decisions)
            self._lineage,
            condition,
            lambda row: (
                scope_of_row(row) in scopes and (row["memory_id"] in wanted or row["related_id"] in wanted)
            ),
        )
        events = {row["event_id"]: LineageEvent(**{**row, "at": utc(row["at"])}) for row in rows}
        return sorted(events.values(), key=lambda event: (event.at, event.event_id))

    def recent_lineage(self, scope: Scope, actions: Sequence[str], limit: int | None) -> list[LineageEvent]:
        """The newest ``limit`` events of these kinds in the scope (None: all), newest first."""
        self._settle_lineage(None)  # the newest changes include the supersedes still being committed
        condition = filters.all_of(filters.scope_is(scope), filters.one_of("action", list(actions)))
        rows = self._logged(
            self._lineage, condition, lambda row: scope_of_row(row) == scope and row["action"] in actions
        )
        events = {row["event_id"]: LineageEvent(**{**row, "at": utc(row["at"])}) for row in rows}
        return sorted(events.values(), key=lambda event: (event.at, event.event_id), reverse=True)[:limit]

    def lineage_by(self, action: str, resolver: str) -> list[LineageEvent]:
        """Every event of one kind that one resolver recorded, in every scope, oldest first (the repairs of
        what an earlier release's rule decided: ``writing.repairs``)."""
        self._settle_lineage(None)
        condition = filters.all_of(filters.equals("action", action), filters.equals("resolver", resolver))
        rows = self._logged(
            self._lineage, condition, lambda row: row["action"] == action and row["resolver"] == resolver
        )
        events = {row["event_id"]: LineageEvent(**{**row, "at": utc(row["at"])}) for row in rows}
        return sorted(events.values(), key=lambda event: (event.at, event.event_id))

    def _settle_lineage(self, memory_ids: list[str] | None) -> None:
        """Wait for the supersedes still being committed (of these memories; None: of any) that write their
        lineage events with them (``storage.pending``); not inside a write sequence, which they wait for."""
        if self._pending and not getattr(self._writing, "depth", 0) and not self._pending.settle(memory_ids):
            log.warning("read lineage before the supersedes still being committed had landed")

    def add_lineage_once(self, events: Sequence[LineageEvent]) -> None:
        """Add the events whose ids are not there yet (a purge finished again adds each once)."""
        table = arrow_rows([event.__dict__ for event in events], self._schema(self._lineage))
        with self.exclusive():
            retrying(
                lambda: self._lineage.merge_insert("event_id").when_not_matched_insert_all().execute(table)
            )

    # ------------------------------------------------------------------ contradictions

    def put_contradictions(self, records: Sequence[ContradictionRecord]) -> list[ContradictionRecord]:
        """Insert new pairs; a pair still open keeps its first detection. A pair resolved earlier opens
        again, detected anew: it was closed when one of its memories left the active set, and that memory
        is back (stated again after a retraction, revived). Returns the pairs written; inside
        ``gathering_contradictions``, the pairs gathered (written, or found recorded already, as it ends)."""
        if not records:
            return []
        gathered = getattr(self._gathered, "pairs", None)
        if gathered is not None:  # the first detection of each pair is kept
            return [record for record in records if gathered.setdefault(_pair_key(record), record) is record]
        return self._write_contradictions(records)

    @contextmanager
    def gathering_contradictions(self) -> Iterator[None]:
        """Gather the pairs this thread records in the block and write them as it ends: one read and one
        commit for a batch's consolidation, instead of a read and a merge per pair (each merge also left a
        one-row fragment: 100 contradiction-heavy memories of a ``remember_many`` took 15-38 s, every pair
        costing more than the last). This thread's reads of the pairs, and any write sequence it begins,
        write the gathered pairs first, so it reads and writes as if each had been written when recorded;
        other threads see them when the block ends, as they see the batch's results. A block that raises
        writes none of them: the consolidation that found them is owed and runs again (``writing.service``).
        Re-entrant: the outermost block writes."""
        if getattr(self._gathered, "pairs", None) is not None:
            yield
            return
        self._gathered.pairs = {}
        try:
            yield
            self.write_gathered_contradictions()
        finally:  # written, or dropped with the block's error or the write's own
            self._gathered.pairs = None

    def write_gathered_contradictions(self) -> None:
        """Write the pairs this thread gathered so far (``gathering_contradictions``), if any: before work
        is handed to another thread that reads them (a supersede committed behind the call carries the
        superseded memory's open pairs to its survivor). A write that fails keeps them gathered, for the
        block's end to write or to drop with its error (a caller that catches the failure of the write
        sequence they preceded must not lose them)."""
        gathered = getattr(self._gathered, "pairs", None)
        if gathered:
            self._gathered.pairs = {}  # taken first: the write's own sequence finds nothing to write
            try:
                self._write_contradictions(list(gathered.values()))
            except BaseException:
                self._gathered.pairs = gathered | self._gathered.pairs
                raise

    def _before_write_sequence(self) -> None:
        self.write_gathered_contradictions()

    def _write_contradictions(self, records: Sequence[ContradictionRecord]) -> list[ContradictionRecord]:
        with self.exclusive():
            # Read under the lock, where no status changes: a pair found from rows read earlier (a pass, a
            # write's neighbours) whose side left the active set meanwhile would open for good (a review).
            records, reopened = self._still_to_record(records)
            if not records:
                return []
            rows = [record.__dict__ for record in records]
            # Only new pairs, and the write lock keeps out other processes (a local store): an append (a
            # merge reads every key of the table). On an object store concurrent merges conflict instead.
            if not reopened and self._lock.path is not None:
                self._append_rows(self._contradictions, rows)
                return records
            table = arrow_rows(rows, self._schema(self._contradictions))
            retrying(
                lambda: (
                    self._contradictions.merge_insert(["org_id", "project_id", "older_id", "newer_id"])
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .execute(table)
                )
            )
        return records

    def _still_to_record(
        self, records: Sequence[ContradictionRecord]
    ) -> tuple[list[ContradictionRecord], bool]:
        """The pairs whose memories are both active and that are not open already (which keeps its row,
        its first detection), each once, read with one query per scope; and whether any of them has a row
        already (resolved: it opens again)."""
        by_scope: dict[Scope, dict[tuple[str, str, str, str], ContradictionRecord]] = {}
        for record in records:
            by_scope.setdefault(record.scope, {}).setdefault(_pair_key(record), record)
        kept: list[ContradictionRecord] = []
        reopened = False
        for scope, pairs in by_scope.items():
            ids = {memory_id for record in pairs.values() for memory_id in (record.older_id, record.newer_id)}
            inactive = self._inactive_of(View(scope), sorted(ids))
            condition = filters.all_of(
                filters.scope_is(scope),
                filters.one_of("older_id", sorted({r.older_id for r in pairs.values()})),
            )
            rows = self._select(self._contradictions, condition, ["older_id", "newer_id", "status"], None)
            statuses = {(row["older_id"], row["newer_id"]): row["status"] for row in rows}
            for record in pairs.values():
                status = statuses.get((record.older_id, record.newer_id))
                if record.older_id in inactive or record.newer_id in inactive or status == "open":
                    continue
                kept.append(record)
                reopened = reopened or status is not None
        return kept, reopened

    def _inactive_of(self, reach: Reach, memory_ids: Sequence[str]) -> set[str]:
        """Those of ``memory_ids`` stored in ``reach`` that are no longer active, as the rows say now
        (``storage.memories.Memories`` reads them)."""
        raise NotImplementedError

    def contradictions(
        self, scope: Scope, *, status: str | None = "open", memory_ids: Sequence[str] | None = None
    ) -> list[ContradictionRecord]:
        """The scope's pairs (of ``status``, None: any), or those naming ``memory_ids``: for memories of the
        org's shelf, those kept in any project of the org too (a shelf memory's pairs with a project's
        memories are kept in that project: ``writing.consolidation``)."""
        self.write_gathered_contradictions()
        shelf_ids = scope.is_org_shelf and memory_ids is not None
        condition = filters.equals("org_id", scope.org_id) if shelf_ids else filters.scope_is(scope)
        if status is not None:
            condition = filters.all_of(condition, filters.equals("status", status))
        if memory_ids is not None:
            if not memory_ids:
                return []
            ids = list(memory_ids)
            condition = filters.all_of(
                condition, filters.one_of("older_id", ids) | filters.one_of("newer_id", ids)
            )
        rows = self._select(self._contradictions, condition, None, limit=None)
        records = [contradiction_from_row(row) for row in rows]
        return sorted(records, key=lambda r: (r.detected_at, r.older_id, r.newer_id))

    def newer_contradictions(self, reach: Reach, memory_ids: Sequence[str]) -> dict[str, list[str]]:
        """Older memory id -> the newer memories that contradict it, for open contradictions only. A newer
        memory whose supersede is decided and still being committed (``storage.pending``) is left out:
        recall no longer shows it, and the memory that restates it takes the pair as it lands."""
        self.write_gathered_contradictions()
        held = self._pending.held()  # before the read
        # Each scope's pairs, merged: a shelf memory's are its shelf's and those of the reader's project,
        # where a project memory disputes it (``writing.consolidation``).
        found: dict[str, list[str]] = {}
        wanted = list(dict.fromkeys(memory_ids))
        for scope in self._scopes(reach):
            for older, newers in self._newer_contradictions_in(scope, wanted).items():
                found.setdefault(older, []).extend(n for n in newers if n not in found[older])
        if not held:
            return found
        return {
            older: kept for older, newers in found.items() if (kept := [i for i in newers if i not in held])
        }

    def _newer_contradictions_in(self, scope: Scope, memory_ids: list[str]) -> dict[str, list[str]]:
        if not memory_ids:
            return {}
        snapshot = self._contradiction_snapshots.get(scope)
        if snapshot is not None:
            return {i: list(snapshot[i]) for i in dict.fromkeys(memory_ids) if i in snapshot}
        return self._newer_contradictions(scope, memory_ids)

    def open_contradiction_pairs(self, scope: Scope) -> list[tuple[str, str]]:
        """The (older, newer) ids of the scope's open contradictions: the aggregation pass keeps the two
        memories of each pair out of one near-duplicate cluster (a claim and its reversal share their words)."""
        self.write_gathered_contradictions()
        snapshot = self._contradiction_snapshots.get(scope)
        if snapshot is None:
            snapshot = _newer_by_older(self._open_contradiction_rows(filters.scope_is(scope), None))
        return [(older, newer) for older, newers in snapshot.items() for newer in newers]

    def _read_open_contradictions(self, scope: Scope, limit: int) -> tuple[dict[str, list[str]], int]:
        rows = self._open_contradiction_rows(filters.scope_is(scope), limit)
        return _newer_by_older(rows), len(rows)

    def _newer_contradictions(self, scope: Scope, memory_ids: Sequence[str]) -> dict[str, list[str]]:
        condition = filters.all_of(filters.scope_is(scope), filters.one_of("older_id", list(memory_ids)))
        return _newer_by_older(self._open_contradiction_rows(condition, None))

    def _open_contradiction_rows(self, condition: Expr, limit: int | None) -> list[dict[str, Any]]:
        condition = filters.all_of(condition, filters.equals("status", "open"))
        return self._select(self._contradictions, condition, ["older_id", "newer_id", "detected_at"], limit)

    def resolve_contradictions(
        self, scope: Scope, memory_ids: Sequence[str], resolution: str, at: datetime
    ) -> int:
        """Close the open contradictions involving memories that left the active set."""
        self.write_gathered_contradictions()
        # (a shelf memory's pairs with the org's projects' memories are kept in those projects: read them all)
        snapshot = None if scope.is_org_shelf else self._contradiction_snapshots.get(scope)
        if snapshot is not None and not _involves(snapshot, memory_ids):
            return 0  # the usual case (a restatement superseded): no read of the table (5.7 ms)
        open_pairs = self.contradictions(scope, memory_ids=memory_ids)
        if not open_pairs:
            return 0
        update = arrow_rows(
            [
                {**pair.__dict__, "status": "resolved", "resolution": resolution, "resolved_at": at}
                for pair in open_pairs
            ],
            self._schema(self._contradictions),
        )
        with self.exclusive():
            retrying(
                lambda: (
                    self._contradictions.merge_insert(["org_id", "project_id", "older_id", "newer_id"])
                    .when_matched_update_all()
                    .execute(update)
                )
            )
        return len(open_pairs)

    # ------------------------------------------------------------------ corroboration

    def scopes(self) -> list[Scope]:
        """Every scope that holds an active memory."""
        rows = scan(self._memories, filters.equals("status", "active"), ["org_id", "project_id"])
        pairs = set(
            zip(rows.column("org_id").to_pylist(), rows.column("project_id").to_pylist(), strict=True)
        )
        return [Scope(org_id, project_id) for org_id, project_id in sorted(pairs)]

    def projects_of(self, org_id: str) -> list[Scope]:
        """The projects of ``org_id`` that hold an active memory (not its shelf), by name."""
        where = filters.all_of(filters.equals("org_id", org_id), filters.equals("status", "active"))
        names = set(scan(self._memories, where, ["project_id"]).column("project_id").to_pylist())
        return [Scope(org_id, name) for name in sorted(names) if name != ORG_SHELF_PROJECT]

    def aggregation_rows(self, scope: Scope, limit: int) -> list[AggregationRow]:
        """The scope's newest ``limit`` active shared memories, as the aggregation job reads them (a memory
        only its agent or session may read neither corroborates nor contradicts what others read)."""
        held = self._pending.held()  # before the read (``storage.pending``)
        with self._cache.reading(scope) as copy:
            if copy is not None:
                active = [
                    record
                    for record in copy.records.values()
                    if record.status == "active" and record.shared and record.id not in held
                ]
                active.sort(key=lambda record: (record.created_at, record.id), reverse=True)
                return [
                    AggregationRow(
                        id=record.id,
                        agent_id=record.agent_id,
                        weight=record.weight,
                        created_at=record.created_at,
                        simhash=record.simhash,
                        content=record.content,
                    )
                    for record in active[:limit]
                ]
        condition = filters.all_of(
            filters.scope_is(scope),
            filters.equals("status", "active"),
            filters.one_of("visibility", SHARED_VISIBILITIES),
        )
        columns = ["id", "agent_id", "weight", "created_at", "simhash", "content"]
        rows = self._select(self._memories, condition, columns, limit=None)
        rows.sort(key=lambda row: (row["created_at"], row["id"]), reverse=True)
        unique: dict[str, AggregationRow] = {}
        for row in rows:
            if len(unique) >= limit:
                break
            if row["id"] in held:  # superseded once its commit lands (``storage.pending``)
                continue
            unique.setdefault(
                row["id"],
                AggregationRow(
                    id=row["id"],
                    agent_id=row["agent_id"],
                    weight=float(row["weight"]),
                    created_at=utc(row["created_at"]),
                    simhash=from_int64(row["simhash"]),
                    content=row["content"],
                ),
            )
        return list(unique.values())

    def attesters(self, scope: Scope, memory_ids: Sequence[str] | None = None) -> dict[str, set[str]]:
        """memory id -> agents (other than its author) that stated it again (of ``memory_ids``, or all). A
        scope's attestations are read whole and kept until the table changes (a supersede carries the
        absorbed memories' attesters over: one read of the table each, 4.5 ms, before)."""
        snapshot = self._attestation_snapshots.get(scope)
        if snapshot is not None:
            wanted = snapshot if memory_ids is None else {i: snapshot[i] for i in memory_ids if i in snapshot}
            return {memory_id: set(agents) for memory_id, agents in wanted.items()}
        return self._read_attesters(scope, memory_ids)

    def _scope_attesters(self, scope: Scope, limit: int) -> tuple[dict[str, frozenset[str]], int]:
        rows = self._select(
            self._attestations, filters.scope_is(scope), ["memory_id", "agent_id"], limit=limit
        )
        return {m: frozenset(agents) for m, agents in _agents_by_memory(rows).items()}, len(rows)

    def _read_attesters(self, scope: Scope, memory_ids: Sequence[str] | None) -> dict[str, set[str]]:
        condition = filters.scope_is(scope)
        if memory_ids is not None:
            if not memory_ids:
                return {}
            condition = filters.all_of(condition, filters.one_of("memory_id", list(memory_ids)))
        return _agents_by_memory(
            self._select(self._attestations, condition, ["memory_id", "agent_id"], limit=None)
        )

    def add_attestation(self, memory: MemoryRecord, agent_id: str, session_id: str, at: datetime) -> bool:
        """Record that ``agent_id`` stated ``memory`` again; False when it is the author or already recorded."""
        if agent_id == memory.agent_id:
            return False
        with self.exclusive():
            condition = self._in_scope(memory.scope, memory_id=memory.id, agent_id=agent_id)
            if self._select(self._attestations, condition, ["memory_id"], limit=1):
                return False
            row = {
                "memory_id": memory.id,
                "org_id": memory.org_id,
                "project_id": memory.project_id,
                "agent_id": agent_id,
                "session_id": session_id,
                "at": at,
            }
            self._append(self._attestations, [row])
        return True


def _newer_by_older(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Older memory id -> the memories contradicting it, oldest detection first."""
    found: dict[str, list[str]] = {}
    for row in sorted(rows, key=lambda r: (r["detected_at"], r["older_id"], r["newer_id"])):
        found.setdefault(row["older_id"], []).append(row["newer_id"])
    return found


def _agents_by_memory(rows: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Attestation rows grouped: memory id -> the agents that stated it again."""
    found: dict[str, set[str]] = {}
    for row in rows:
        found.setdefault(row["memory_id"], set()).add(row["agent_id"])
    return found


def _pair_key(record: ContradictionRecord) -> tuple[str, str, str, str]:
    return (record.org_id, record.project_id, record.older_id, record.newer_id)


def _involves(open_pairs: Mapping[str, Sequence[str]], memory_ids: Sequence[str]) -> bool:
    """Whether any of ``memory_ids`` is in one of the open contradictions ``open_pairs`` (older id ->
    the newer ids contradicting it: a scope's snapshot)."""
    ids = set(memory_ids)
    return any(older in ids or not ids.isdisjoint(newer) for older, newer in open_pairs.items())
