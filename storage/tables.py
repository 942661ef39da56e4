"""The tables of one store and what every role of the store shares: the write lock and the reports' lock,
the scope copies, the written-behind logs, and the reads and appends every role builds on."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
from lancedb.expr import Expr

from storage import filters, schema
from storage.appenders import Appenders
from storage.generations import REPORTS, WRITES, Generations, VersionWatch
from storage.locking import COMPACTION_YIELD_SECONDS, CompactionsBeside, LogsLock, WriteLock, retrying
from storage.pending import PendingSupersedes
from storage.records import PURGED_PREVIEW, Reach, Scope, org_shelf, scopes_of
from storage.row_ids import RowCount, RowIds
from storage.rows import arrow_rows, ids_of_key, record_values, stored_retrieval, vector_of_row
from storage.scan import scan_rows
from storage.scope_cache import ScopeCache
from storage.scope_copy import by_id
from storage.write_behind import WriteBehind

_T = TypeVar("_T")
# How often work waiting for a compaction beside the writes looks whether a call now waits for it.
AWAITED_CHECK_SECONDS = 0.02

log = logging.getLogger(__name__)


class StoreError(RuntimeError):
    """The store could not be opened or written; the message says what to check."""


def local_folder(uri: str) -> Path | None:
    """The folder of a store on this machine's file system (None: an object store)."""
    if uri.startswith("file://"):
        return Path(uri[len("file://") :]).expanduser()
    if "://" in uri:
        return None
    return Path(uri).expanduser()


class StoreTables:
    """The state every role of the store shares, and the reads, appends and lock sequences they build on.
    ``storage.store.MemoryStore`` sets these attributes when it opens the store."""

    _db: Any
    _uri: str
    _schema_version: int
    _vector_dim: int
    # The write lock (``exclusive()``) and the reports' lock (``reporting()``), with each one's nesting
    # depth per thread.
    _lock: WriteLock
    _pending: PendingSupersedes  # supersedes decided, committed behind the call (``storage.pending``)
    _writing: threading.local
    _behind: threading.local  # whether this thread works behind the calls (``behind_the_calls``)
    _reports_lock: WriteLock
    _reporting: threading.local
    # Retrieval records appended behind hold it shared, a purge's scrub of the records exclusively.
    _logs_lock: LogsLock
    # A compaction that runs without the write lock holds it, and so does a purge, from start to end:
    # no compaction is in flight while a purge erases text and clears the files writes left.
    _compaction_lock: WriteLock
    _compactions_beside: CompactionsBeside  # this process's, which work behind the calls lets commit first
    # The tables (LanceDB tables), opened once.
    _memories: Any
    _episodes: Any
    _retrievals: Any
    _ab_logs: Any
    _outcomes: Any
    _feedback: Any
    _meta: Any
    _weight_events: Any
    _attestations: Any
    _lineage: Any
    _contradictions: Any
    _appenders: Appenders
    _logs: WriteBehind  # the logs written behind: retrieval records, A/B rows, deferred lineage
    _appends_since_maintenance: int  # each one a table version and a fragment to compact
    _deleted_from: set[str]  # tables rows were deleted from since their last compaction (the journal's)
    _row_ids: RowIds  # memory id -> stable row id, for updates that find their rows without a scan
    _row_count: RowCount  # the memories table's row count through this process's commits (appends' row ids)
    _cache: ScopeCache
    # The locks' write generations (a local store; None on an object store), and the versions readers
    # take from them: the memories table's, the contradictions' and attestations' (``exclusive()``), the
    # credit table's (``reporting()``).
    _generations: Generations | None
    _exact: threading.local  # ``_exact_versions()`` nesting depth, per thread
    _memories_version: VersionWatch
    _feedback_version: VersionWatch

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def vector_dim(self) -> int:
        return self._vector_dim

    @property
    def schema_version(self) -> int:
        return self._schema_version

    def flush_logs(self) -> None:
        """Write the buffered log rows (retrieval A/B logs) now, for readers of whole tables."""
        self._logs.flush()

    def tables(self) -> dict[str, Any]:
        """Every table of the store by name (LanceDB tables), for the whole-store modules of ``storage``
        (export and import, health): the rest of the project uses the typed methods."""
        return {
            schema.MEMORIES: self._memories,
            schema.EPISODES: self._episodes,
            schema.RETRIEVALS: self._retrievals,
            schema.AB_LOGS: self._ab_logs,
            schema.OUTCOMES: self._outcomes,
            schema.FEEDBACK: self._feedback,
            schema.WEIGHT_EVENTS: self._weight_events,
            schema.ATTESTATIONS: self._attestations,
            schema.LINEAGE: self._lineage,
            schema.CONTRADICTIONS: self._contradictions,
        }

    @property
    def excludes_other_processes(self) -> bool:
        """Whether ``exclusive()`` keeps other processes out too (a local store), not only other threads."""
        return self._lock.spans_processes

    @contextmanager
    def reporting(self) -> Iterator[None]:
        """Hold the reports' lock across a report's read-check-write sequence on the report tables (reports,
        credits, weight events; re-entrant, across processes for a local store). Reports queue behind each
        other here, not remembers behind reports: under 50 clients (``benchmarks.load``) a report held the
        write lock 0.35 s, most of it for these tables, and remembers waited seconds behind it (p95 6.4 s;
        1.5 s with this lock). One lock for every project, measured against 4 and 16 (projects hashed onto
        them): reports in parallel competed for the cores and for the write lock (their weight writes),
        and remember p95 was 3.6-3.8 s, recall p95 1.4 s instead of 1.0 s. The weights a report writes
        to the memories table take the write lock (``exclusive()``) inside this one, always in that order:
        taking this lock while holding the write lock is refused, as it could deadlock. Reads of the
        credit table inside it check its version, and reads of the memories table do when a write
        sequence ended since their last check, so a report computes on the credits and weights of every
        write acknowledged before it."""
        if getattr(self._writing, "depth", 0) > 0 and getattr(self._reporting, "depth", 0) == 0:
            raise RuntimeError("the reports' lock is taken before the write lock, never inside it")
        with self._sequence(self._reports_lock, self._reporting, REPORTS):
            yield

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the store's write lock across a read-check-write sequence (re-entrant); reads inside it
        check the table's version even within ``one_version()``, so the sequence decides on the newest
        rows. Work behind the calls (``behind_the_calls``) first waits for this process's compaction of the
        memories beside the writes (``after_compactions_beside``), then lets callers take the lock first."""
        # Work behind the calls that holds the reports' lock does not yield: reports would wait for it.
        background = getattr(self._behind, "on", False) and not getattr(self._reporting, "depth", 0)
        if background:
            self.after_compactions_beside()
        self._before_write_sequence()
        with self._sequence(self._lock, self._writing, WRITES, background=background):
            yield

    def _before_write_sequence(self) -> None:
        """What this thread must write before any write sequence it begins (``storage.lineage``: the
        contradictions it gathers)."""

    @contextmanager
    def behind_the_calls(self) -> Iterator[None]:
        """Work in the block is done behind the calls (no caller waits for it): its write sequences let
        this process's callers waiting for the write lock go first (``storage.locking.WriteLock``)."""
        before = getattr(self._behind, "on", False)
        self._behind.on = True
        try:
            yield
        finally:
            self._behind.on = before

    def awaiting_supersedes(self) -> AbstractContextManager[None]:
        """Mark the calling thread as waiting on the commits of held supersedes (a remember waiting for
        their queue to shorten): meanwhile they do not wait for a compaction (``after_compactions_beside``)."""
        return self._pending.awaiting()

    def after_compactions_beside(self) -> None:
        """Wait (``COMPACTION_YIELD_SECONDS`` at most) for this process's compaction of the memories
        beside the writes to commit, unless this thread holds the write lock: work behind the calls, whose
        updates would preempt it (``storage.locking.CompactionsBeside``). Not once a call waits for the
        supersedes held (``PendingSupersedes.awaiting``: a retract, a forget or an update of one of those
        memories, a read of lineage, a remember waiting for the queue of commits): then the call would wait
        for the compaction too."""
        if getattr(self._writing, "depth", 0):
            return
        deadline = time.monotonic() + COMPACTION_YIELD_SECONDS
        while not self._pending.awaited:
            left = deadline - time.monotonic()
            if left <= 0 or self._compactions_beside.wait_out(min(AWAITED_CHECK_SECONDS, left)):
                return

    @contextmanager
    def _sequence(
        self, lock: WriteLock, nesting: threading.local, generation: int, *, background: bool = False
    ) -> Iterator[None]:
        """Hold ``lock`` (re-entrant), counting this thread's nesting in ``nesting.depth``; the outermost
        sequence makes the next reads check the table's version (nested ones read within its check), and
        counts the lock's ``generation`` as it begins and ends (``storage.generations``)."""
        with lock.hold(background=background):
            depth = getattr(nesting, "depth", 0)
            counted: AbstractContextManager[None] = nullcontext()
            if depth == 0:
                self._cache.recheck()
                if self._generations is not None:
                    counted = self._generations.sequence(generation)
            nesting.depth = depth + 1
            try:
                with counted:
                    yield
            finally:
                nesting.depth = depth

    def _reads_writes_exactly(self) -> bool:
        """Whether this thread takes the versions of the write lock's tables from the tables themselves: it
        holds the write lock (its sequence must see its own commits), or it reads inside
        ``_exact_versions()``."""
        return getattr(self._writing, "depth", 0) > 0 or getattr(self._exact, "depth", 0) > 0

    @contextmanager
    def _exact_versions(self) -> Iterator[None]:
        """Reads in the block take the memories table's version from the table, not by write generation: a
        read that must see a commit another process made inside a write sequence still under way. A purge
        commits the purged status, scrubs the recorded traces and only then ends its sequence; an append
        of retrieval records that reads the statuses after the scrub must see that status
        (``LogsLock``)."""
        depth = getattr(self._exact, "depth", 0)
        self._exact.depth = depth + 1
        self._cache.recheck()
        try:
            yield
        finally:
            self._exact.depth = depth

    def _holds_reports_lock(self) -> bool:
        return getattr(self._reporting, "depth", 0) > 0

    # ------------------------------------------------------------------ reads and writes every role uses

    def _by_id(
        self, reach: Reach, ids: Iterable[str], read: Callable[[Scope, list[str]], dict[str, _T]]
    ) -> dict[str, _T]:
        """``read`` of ``ids`` in each scope of ``reach`` in turn, for the ids not found yet (an id names
        one memory, or one episode, of one scope)."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, _T] = {}
        for scope in self._scopes(reach):
            missing = [i for i in wanted if i not in found]
            if not missing:
                break
            found |= read(scope, missing)
        return found

    def _scopes(self, reach: Reach) -> tuple[Scope, ...]:
        """The scopes a read of ``reach`` looks in: its home scope, and the org's shelf unless its up-to-date
        copy holds nothing (most orgs have no org-wide memory: their recalls then read one scope)."""
        scopes = scopes_of(reach)
        return scopes[:1] + tuple(scope for scope in scopes[1:] if not self._holds_nothing(scope))

    def _holds_nothing(self, scope: Scope) -> bool:
        with self._cache.reading(scope) as copy:
            return copy is not None and len(copy) == 0

    def _update_rows(
        self, memory_ids: Sequence[str], values: Mapping[str, Any], *, texts: Mapping[str, str] | None = None
    ) -> None:
        """Set the same column values on these memories, in UPDATEs of up to 1,000 rows. An UPDATE whose
        rows' stable row ids are all known finds them by row id (no scan of the fragments the id index does
        not cover yet: ``storage.row_ids``); another finds them by id, through the id index (a merge joins
        the whole table on id: 5x slower at 100k memories). The filter is a typed expression; LanceDB
        encodes the values as SQL literals itself (quotes escaped, times as UTC). ``texts``: the search
        texts the values set, by memory id, for the scope copies' full-text index."""
        ids = list(dict.fromkeys(memory_ids))
        with self.exclusive():
            for start in range(0, len(ids), 1_000):
                self._update_chunk(ids[start : start + 1_000], values, texts)

    def _update_chunk(
        self, ids: list[str], values: Mapping[str, Any], texts: Mapping[str, str] | None = None
    ) -> None:
        changes = record_values(values)
        updated = dict.fromkeys(ids, changes)  # what the copies apply once a commit changed every row
        texts = {memory_id: texts[memory_id] for memory_id in ids if memory_id in texts} if texts else None
        known = self._row_ids.known(ids)
        if len(known) == len(ids):
            # Also filtered on id: a wrong row id changes no row, and the update then counts fewer rows.
            where = filters.all_of(filters.row_ids(known.values()), filters.one_of("id", ids))
            result = retrying(partial(self._memories.update, where=where, values=dict(values)))
            if result.rows_updated == len(ids):
                self._row_count.changed(result.version, result.rows_updated)
                self._cache.advance(result.version - 1, result.version, updated=updated, texts=texts)
                return
            # Which rows it changed is unknown: the copies are not advanced past it (the next read catches up
            # from the table, this commit and the next), and every memory of the chunk is updated again by id.
            log.warning(
                "%d of %d memories were not where their row ids said; updating them by id",
                len(ids) - result.rows_updated,
                len(ids),
            )
            self._row_ids.forget(ids)
            self._row_count.forget()  # the row ids came from it, or from rows read: either may be wrong
        result = retrying(
            partial(self._memories.update, where=filters.one_of("id", ids), values=dict(values))
        )
        self._row_count.changed(result.version, result.rows_updated)
        self._cache.advance(result.version - 1, result.version, updated=updated, texts=texts)

    def _merge_update(self, update: pa.Table) -> None:
        # Columns typed as the table declares them: the id, its primary key, must come in non-nullable.
        declared = self._schema(self._memories)
        update = update.cast(pa.schema([declared.field(name) for name in update.schema.names]))
        rows = update.to_pylist()
        changes = {row["id"]: record_values(row) for row in rows}
        vectors = {row["id"]: vector_of_row(row) for row in rows if "vector" in row}
        texts = {row["id"]: row["search_text"] for row in rows if "search_text" in row}
        with self.exclusive():
            merged = retrying(
                lambda: self._memories.merge_insert("id").when_matched_update_all().execute(update)
            )
            after = merged.version
            self._row_count.changed(after, 0 if merged.num_inserted_rows else merged.num_updated_rows)
            self._cache.advance(after - 1, after, updated=changes, vectors=vectors, texts=texts)

    def _append(self, table: Any, rows: Sequence[Mapping[str, Any]]) -> int:
        """Append under the write lock; returns the table version the commit made (0: nothing to add)."""
        with self.exclusive():
            return self._append_log(table, rows)

    def _append_log(self, table: Any, rows: Sequence[Mapping[str, Any]]) -> int:
        """An append that needs no write lock (each commit is atomic): the write-behind thread uses it,
        and must not wait for the lock, since a request holding the lock may be waiting for that
        thread's flush to finish; so do lineage events (``add_lineage``). Retrieval records are appended
        under the logs lock, with the quotes of memories purged since their recall masked (``LogsLock``);
        A/B rows and lineage under it too."""
        if not rows:
            return 0
        if table is self._retrievals:
            with self._logs_lock.shared():
                masked_rows = self._without_purged_quotes(rows)
                return self._append_rows(table, [stored_retrieval(row) for row in masked_rows])
        if table is self._ab_logs or table is self._lineage:
            # Under the logs lock (written behind, or lineage at once), so that no such write is in flight
            # while a purge clears the files interrupted writes left (``storage.forgetting``).
            with self._logs_lock.shared():
                return self._append_rows(table, rows)
        return self._append_rows(table, rows)

    def _without_purged_quotes(self, rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """Retrieval records with the preview of every candidate purged by now masked, as a purge masks
        the records already in the table. A record's quotes are kept beside its trace (``trace_ids``); a
        trace is parsed only to mask it (parsing every one took 5% of the interpreter's time under
        ``benchmarks.load``)."""
        quoted: dict[Scope, set[str]] = {}  # the recall's scope -> the memory ids its records quote
        quotes_of = [ids_of_key(row["trace_ids"]) for row in rows]
        for row, ids in zip(rows, quotes_of, strict=True):
            quoted.setdefault(Scope(row["org_id"], row["project_id"]), set()).update(ids)
        purged: set[str] = set()
        for scope, wanted in quoted.items():
            # An org-visible memory is kept on the org's shelf and recalled from any project of the org:
            # what the project does not hold is looked for there.
            for where in (scope, org_shelf(scope.org_id)):
                if not wanted:
                    break
                found = self._statuses(where, wanted)
                purged.update(i for i, status in found.items() if status == "purged")
                wanted = wanted - set(found)
        if not purged:
            return list(rows)
        return [
            {**row, "trace_json": json.dumps(masked(json.loads(row["trace_json"]), purged))}
            if not purged.isdisjoint(ids)
            else row
            for row, ids in zip(rows, quotes_of, strict=True)
        ]

    def _statuses(self, scope: Scope, memory_ids: set[str]) -> dict[str, str]:
        """The status of each of these memories ``scope`` holds: from the scope's copy when there is
        one (brought up to the table's newest version, read from the table: a purge still under way in
        another process has committed its status), else from the table."""
        with self._exact_versions(), self._cache.reading(scope, build=False) as copy:
            if copy is not None:
                return {i: record.status for i, record in by_id(copy, memory_ids).items()}
        condition = filters.all_of(filters.scope_is(scope), filters.one_of("id", sorted(memory_ids)))
        return {
            row["id"]: row["status"]
            for row in self._select(self._memories, condition, ["id", "status"], limit=None)
        }

    def _append_rows(self, table: Any, rows: Sequence[Mapping[str, Any]]) -> int:
        data = arrow_rows(rows, self._appenders.schema(table.name))
        version = retrying(lambda: self._appenders.add(table.name, data))
        self._appends_since_maintenance += 1  # a lost increment under a race only delays a round
        return version

    def memory_rows(self) -> int:
        """Rows of the memories table, every status (table metadata, no scan)."""
        return int(self._memories.count_rows())

    @property
    def appends_since_maintenance(self) -> int:
        """Appends committed since the last maintenance round began: each left a fragment and a version,
        and appends get slower as fragments pile up, so the server runs a round early when many did."""
        return self._appends_since_maintenance

    def _logged(
        self,
        table: Any,
        condition: Expr,
        keep: Callable[[Mapping[str, Any]], bool],
        columns: list[str] | None = None,
    ) -> list[Mapping[str, Any]]:
        """The rows of a table written behind (``storage.write_behind``) that ``condition`` selects, with
        those still queued that ``keep`` (the same test, in Python) accepts, without waiting for a flush.
        The queue is read first: a row leaves it only once it is in the table, so none is missed (one in
        both comes twice; callers key rows by their id)."""
        queued = self._logs.queued(table, keep)
        return [*self._select(table, condition, columns, limit=None), *queued]

    def _schema(self, table: Any) -> pa.Schema:
        """``table``'s schema, as read once (asking LanceDB for it is a round trip through its event loop
        each time, several per report under load; schemas change only when the store is opened)."""
        return self._appenders.schema(table.name)

    @staticmethod
    def _in_scope(scope: Scope, **equal: str) -> Expr:
        return filters.all_of(
            filters.scope_is(scope), *(filters.equals(column, value) for column, value in equal.items())
        )

    @staticmethod
    def _select(
        table: Any, condition: Expr, columns: list[str] | None, limit: int | None
    ) -> list[dict[str, Any]]:
        return scan_rows(table, condition, columns, limit)

    # ------------------------------------------------------------------ the scope copies

    @property
    def cache(self) -> ScopeCache:
        return self._cache

    def one_version(self) -> AbstractContextManager[None]:
        """Reads inside the block see one version of the memories (one freshness check per request)."""
        return self._cache.one_version()


def masked(trace: dict[str, Any], memory_ids: set[str]) -> dict[str, Any]:
    """``trace`` with the preview of each of ``memory_ids`` among its candidates masked (changed in place).
    A trace that held one of them also has what a language model wrote in it withheld: its reasons for
    leaving candidates out (one reason for all it left out, which may quote any of them: a review found a
    purged memory's words there) and the sub-queries it asked for, which may quote what it was shown."""
    candidates = trace.get("candidates", ())
    held = [candidate for candidate in candidates if candidate.get("id") in memory_ids]
    for candidate in held:
        candidate["preview"] = PURGED_PREVIEW
    if not held:
        return trace
    for candidate in candidates:
        reason = candidate.get("exclusion_reason")
        if isinstance(reason, str) and reason.startswith(MODEL_REASONS) and ": " in reason:
            candidate["exclusion_reason"] = reason.split(": ", 1)[0] + MODEL_WORDS_WITHHELD
    for stage in trace.get("stages", ()):
        for event in stage.get("events", ()):
            if event.get("event") == "SufficiencyJudged":
                event["sub_queries"] = [WITHHELD_FROM_MODEL for _ in event.get("sub_queries", ())]
            elif event.get("event") == "SubQueryRan":
                event["query"] = WITHHELD_FROM_MODEL
            elif event.get("event") in MODEL_ERRORS and ":" in str(event.get("reason") or ""):
                # Why a model's answer was not used quotes that answer ("... not a JSON object: '...'", a
                # review): what comes before the quote says why.
                event["reason"] = str(event["reason"]).split(":", 1)[0] + MODEL_WORDS_WITHHELD
    return trace


# A language model's reasons for leaving candidates out (``retrieval.stages.llm_passes``), which quote it.
MODEL_REASONS = ("left out by the language model's", "trimmed by the language model's")
MODEL_ERRORS = (
    "LLMPassRan",
    "RerankFellBack",
    "IterationSkipped",
)  # events whose reason may quote a model's answer
WITHHELD_FROM_MODEL = "what the language model said is withheld: a memory of this recall was purged"
MODEL_WORDS_WITHHELD = f" ({WITHHELD_FROM_MODEL})"
