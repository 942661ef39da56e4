"""The memory store: the only code that talks to LanceDB.

Reads always see the newest committed version (``read_consistency_interval=0``), so a write made by
another server process on the same store is visible to the next recall. Write sequences run under
``WriteLock`` and ``retrying``; ids are deterministic, so a retried or concurrent duplicate write
lands on the same id and reads collapse any duplicate rows.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial, reduce
from pathlib import Path
from typing import Any, TypeVar

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.expr import Expr
from lancedb.index import FTS, IvfHnswSq

from storage import filters, migrations, recovery, schema
from storage.appenders import Appenders
from storage.group_commit import GroupCommit
from storage.lexical_index import Analyzer
from storage.locking import LOCK_FILE_NAME, REPORTS_LOCK_FILE_NAME, WriteLock, retrying
from storage.records import (
    SHARED_VISIBILITIES,
    AbLogRow,
    AggregationRow,
    Audience,
    ContradictionRecord,
    CreditedSession,
    EpisodeMemberStub,
    EpisodeRecord,
    LineageEvent,
    MemoryCredit,
    MemoryRecord,
    NewMemory,
    OutcomeRecord,
    Reach,
    ReportQueries,
    RetrievalPurpose,
    RetrievalRecord,
    Scope,
    SearchHit,
    SessionFeedback,
    StoreInfo,
    TimeWindow,
    View,
    Viewer,
    WeightEvent,
    scopes_of,
)
from storage.scan import EVERY_ROW, scan, scan_rows, utc
from storage.scope_cache import Row, ScopeCache, by_id, episode_members
from storage.snapshots import ScopeSnapshots
from storage.versions import SupersededVersions
from storage.write_behind import WriteBehind

log = logging.getLogger(__name__)
_T = TypeVar("_T")

MEMORY_COLUMNS = [
    "id",
    "org_id",
    "project_id",
    "agent_id",
    "session_id",
    "episode_id",
    "kind",
    "content",
    "content_hash",
    "tags",
    "protection_tier",
    "status",
    "replaced_by",
    "weight",
    "created_at",
    "updated_at",
    "embedder",
    "simhash",
    "expires_at",
    "version_of",
    "consolidated_at",
    "visibility",
]


# A copy answers every leg of a recall from memory: at 111k memories a scope's candidate search took 92 ms
# through LanceDB (HNSW + BM25 + filters) and a matrix product over its vectors takes about 9 ms.
DEFAULT_CACHE_SCOPE_ROWS = 250_000
DEFAULT_CACHE_TOTAL_ROWS = 400_000
# Below this many rows a filtered flat search (or a scope copy) is as fast as an ANN index, and exact.
DEFAULT_VECTOR_INDEX_MIN_ROWS = 100_000
VECTOR_INDEX = "vector_idx"
VECTOR_SEARCH_EF = 100  # HNSW candidate list: recall about 0.99 at 1M in the issue's measurements
# Scopes with up to this many open contradictions are read whole and kept until the table changes;
# bigger ones are queried per read.
SNAPSHOT_MAX_ROWS = 20_000
# LanceDB's own caches default to gigabytes and keep an entry per table version read: a server that
# writes all day filled them with versions it would never read again (benchmarks/writes.py).
DEFAULT_INDEX_CACHE_BYTES = 64 << 20
DEFAULT_METADATA_CACHE_BYTES = 64 << 20


# Tables written under the reports' lock (``reporting()``).
REPORT_TABLES = (schema.OUTCOMES, schema.FEEDBACK, schema.WEIGHT_EVENTS)
# A clean-up threshold no version reaches: an optimize that compacts and drops nothing (LanceDB's own
# default, a week, would drop by age a version a read may still be on).
KEEP_EVERY_VERSION = timedelta(days=36_500)
# The clean-up margin before a table's first optimize was timed (compacting 50,000 memories took 0.41 s).
FIRST_OPTIMIZE_MARGIN = timedelta(seconds=30)
PURGE_JOURNAL = "pending_purge:"  # meta keys of purges begun and not yet finished


@dataclass(frozen=True)
class PendingPurge:
    """A purge's journal entry: what to erase, and the lineage to record once it is erased."""

    key: str
    scope: Scope
    memory_ids: tuple[str, ...]
    at: datetime
    quoted_chars: int
    events: tuple[LineageEvent, ...]
    resolution: str

    def to_json(self) -> str:
        return json.dumps(
            {
                "org_id": self.scope.org_id,
                "project_id": self.scope.project_id,
                "memory_ids": list(self.memory_ids),
                "at": self.at.isoformat(),
                "quoted_chars": self.quoted_chars,
                "resolution": self.resolution,
                "events": [{**event.__dict__, "at": event.at.isoformat()} for event in self.events],
            }
        )

    @classmethod
    def from_json(cls, key: str, text: str) -> PendingPurge:
        value = json.loads(text)
        return cls(
            key=key,
            scope=Scope(value["org_id"], value["project_id"]),
            memory_ids=tuple(value["memory_ids"]),
            at=datetime.fromisoformat(value["at"]),
            quoted_chars=int(value["quoted_chars"]),
            events=tuple(
                LineageEvent(**{**event, "at": datetime.fromisoformat(event["at"])})
                for event in value["events"]
            ),
            resolution=value["resolution"],
        )


class StoreError(RuntimeError):
    """The store could not be opened or written; the message says what to check."""


class MemoryStore:
    """Typed reads and writes over the LanceDB tables of one store."""

    def __init__(
        self,
        db: Any,
        uri: str,
        meta: Mapping[str, str],
        lock: WriteLock,
        *,
        cache_scope_rows: int = DEFAULT_CACHE_SCOPE_ROWS,
        cache_total_rows: int = DEFAULT_CACHE_TOTAL_ROWS,
        vector_index_min_rows: int = DEFAULT_VECTOR_INDEX_MIN_ROWS,
        appenders: Appenders,
        analyzer: Analyzer | None = None,
    ) -> None:
        self._vector_index_min_rows = vector_index_min_rows
        self._db = db
        self._uri = uri
        self._lock = lock
        # Reports' own lock (``reporting()``): a report's sequence on the report tables holds it, and the
        # write lock only for its weight write.
        self._reports_lock = WriteLock(lock.path.with_name(REPORTS_LOCK_FILE_NAME) if lock.path else None)
        self._reporting = threading.local()  # report-sequence nesting depth, per thread
        self._schema_version = int(meta["schema_version"])
        self._vector_dim = int(meta["vector_dim"])
        self._memories = db.open_table(schema.MEMORIES)
        self._episodes = db.open_table(schema.EPISODES)
        self._retrievals = db.open_table(schema.RETRIEVALS)
        self._ab_logs = db.open_table(schema.AB_LOGS)
        self._outcomes = db.open_table(schema.OUTCOMES)
        self._feedback = db.open_table(schema.FEEDBACK)
        self._meta = db.open_table(schema.META)
        self._weight_events = db.open_table(schema.WEIGHT_EVENTS)
        self._attestations = db.open_table(schema.ATTESTATIONS)
        self._lineage = db.open_table(schema.LINEAGE)
        self._contradictions = db.open_table(schema.CONTRADICTIONS)
        self._writing = threading.local()  # write-sequence nesting depth, per thread
        self._appenders = appenders
        self._logs = WriteBehind(self._append_log)
        self._appends_since_maintenance = 0  # each one a table version and a fragment to compact
        self._superseded = SupersededVersions()  # the maintenance rounds' sightings of each newest version
        self._optimize_seconds: dict[str, float] = {}  # each table's last optimize, for the clean-up margin
        self._cache = ScopeCache(
            self,
            dimension=self._vector_dim,
            max_scope_rows=cache_scope_rows,
            max_total_rows=cache_total_rows,
            analyzer=analyzer,
        )
        self._inserts: GroupCommit[NewMemory, tuple[MemoryRecord, bool]] = GroupCommit(self._insert_batch)
        self._contradiction_snapshots = ScopeSnapshots(
            lambda: int(self._contradictions.version),
            self._read_open_contradictions,
            max_rows=SNAPSHOT_MAX_ROWS,
        )

    @classmethod
    def open(
        cls,
        uri: str,
        *,
        storage_options: Mapping[str, str] | None = None,
        vector_dim: int = 384,
        cache_scope_rows: int = DEFAULT_CACHE_SCOPE_ROWS,
        cache_total_rows: int = DEFAULT_CACHE_TOTAL_ROWS,
        vector_index_min_rows: int = DEFAULT_VECTOR_INDEX_MIN_ROWS,
        analyzer: Analyzer | None = None,
        index_cache_bytes: int = DEFAULT_INDEX_CACHE_BYTES,
        metadata_cache_bytes: int = DEFAULT_METADATA_CACHE_BYTES,
    ) -> MemoryStore:
        """Open (creating and migrating if needed) the store at ``uri``: a folder or any LanceDB URI.
        Scopes of up to ``cache_scope_rows`` memories are searched from an in-process copy (0: never),
        ``cache_total_rows`` memories in all; with an ``analyzer`` (text -> index terms) the copies answer
        full-text searches too (BM25), otherwise LanceDB's full-text index does. Maintenance builds an
        ANN index over the vectors once the table holds ``vector_index_min_rows`` memories (0: never).
        LanceDB's caches of index data and of table metadata (manifests, fragment and deletion files: an
        entry per table version, so they grow with every commit) are held to ``index_cache_bytes`` and
        ``metadata_cache_bytes``.
        A local store whose newest manifest a crash of the machine left broken opens on the version
        before, with a WARNING (``storage.recovery``)."""
        local_path = _local_path(uri)
        try:
            if local_path is not None:
                local_path.mkdir(parents=True, exist_ok=True)
            target = str(local_path) if local_path is not None else uri
            options = dict(storage_options or {}) or None
            session = lancedb.Session(
                index_cache_size_bytes=index_cache_bytes, metadata_cache_size_bytes=metadata_cache_bytes
            )
            db = lancedb.connect(
                target, read_consistency_interval=timedelta(0), storage_options=options, session=session
            )
            # Appends need no check for the newest version first (see storage.appenders).
            append_db = lancedb.connect(target, storage_options=options, session=session)
        except Exception as exc:
            raise StoreError(
                f"could not open the memory store at {uri!r}: {exc}. Check MEMORIA_DB_URI "
                "(a writable folder, or a LanceDB URI with credentials in MEMORIA_STORAGE_OPTIONS)."
            ) from exc
        lock = WriteLock(local_path / LOCK_FILE_NAME if local_path is not None else None)
        try:
            with lock.hold():
                if local_path is not None:
                    _recover(local_path)
                meta = retrying(
                    lambda: migrations.apply_pending(
                        db, vector_dim, other_processes_excluded=lock.spans_processes
                    )
                )
            store = cls(
                db,
                uri,
                meta,
                lock,
                cache_scope_rows=cache_scope_rows,
                cache_total_rows=cache_total_rows,
                vector_index_min_rows=vector_index_min_rows,
                analyzer=analyzer,
                appenders=Appenders(append_db),
            )
        except BaseException:
            lock.close()
            raise
        try:
            store.finish_pending_purges()  # before anything is served
        except BaseException:
            store.close()
            raise
        return store

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

    def close(self) -> None:
        try:
            self._logs.close()
        finally:
            self._lock.close()
            self._reports_lock.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
        taking this lock while holding the write lock is refused, as it could deadlock. Reads inside it
        check the memories table's version, like ``exclusive()``'s, so a report computes on current
        weights."""
        if getattr(self._writing, "depth", 0) > 0 and getattr(self._reporting, "depth", 0) == 0:
            raise RuntimeError("the reports' lock is taken before the write lock, never inside it")
        with self._sequence(self._reports_lock, self._reporting):
            yield

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the store's write lock across a read-check-write sequence (re-entrant); reads inside it
        check the table's version even within ``one_version()``, so the sequence decides on the newest
        rows."""
        with self._sequence(self._lock, self._writing):
            yield

    @contextmanager
    def _sequence(self, lock: WriteLock, nesting: threading.local) -> Iterator[None]:
        """Hold ``lock`` (re-entrant), counting this thread's nesting in ``nesting.depth``; the outermost
        sequence makes the next reads check the table's version (nested ones read within its check)."""
        with lock.hold():
            depth = getattr(nesting, "depth", 0)
            if depth == 0:
                self._cache.recheck()
            nesting.depth = depth + 1
            try:
                yield
            finally:
                nesting.depth = depth

    # ------------------------------------------------------------------ memories

    def get_memory(self, memory_id: str, reach: Reach | None = None) -> MemoryRecord | None:
        """The memory with this id (in ``reach``, and only if its viewer may see it; None: anywhere)."""
        if reach is None:
            rows = self._select(self._memories, filters.equals("id", memory_id), MEMORY_COLUMNS, limit=2)
            return _memory_from_row(rows[0]) if rows else None
        return self.get_memories([memory_id], reach).get(memory_id)

    def get_memories(self, memory_ids: Iterable[str], reach: Reach) -> dict[str, MemoryRecord]:
        """The memories of ``reach`` with these ids (those its viewer may see)."""
        found = self._by_id(reach, memory_ids, self._memories_in)
        if isinstance(reach, View):
            found = {i: record for i, record in found.items() if reach.sees(record)}
        return found

    def hidden_from(self, memory_ids: Iterable[str], view: View) -> set[str]:
        """Those of ``memory_ids`` that are memories of ``view``'s scopes its viewer may not see (another
        agent's or session's private ones)."""
        ids = list(memory_ids)
        return set(self.get_memories(ids, replace(view, viewer=None))) - set(self.get_memories(ids, view))

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

    def _memories_in(self, scope: Scope, ids: list[str]) -> dict[str, MemoryRecord]:
        if not ids:
            return {}
        with self._cache.reading(scope) as copy:
            if copy is not None:
                return by_id(copy, ids)
        condition = filters.all_of(filters.one_of("id", ids), filters.scope_is(scope))
        rows = self._select(self._memories, condition, MEMORY_COLUMNS, limit=len(ids) * 2)
        found: dict[str, MemoryRecord] = {}
        for row in rows:
            found.setdefault(row["id"], _memory_from_row(row))
        return found

    def insert_memory(self, new: NewMemory) -> tuple[MemoryRecord, bool]:
        """Store ``new`` unless its id already exists; returns (the stored record, whether it was created)."""
        return self.insert_many([new])[0]

    def insert_many(self, news: Sequence[NewMemory]) -> list[tuple[MemoryRecord, bool]]:
        """Bulk ``insert_memory``: one append for every new id; existing ids (and repeats) come back as
        (existing record, False). Results are in input order. Inserts made by several threads at once
        are coalesced into one commit (``storage.group_commit``); each returns once its rows are in."""
        if not news:
            return []
        for new in news:
            if len(new.vector) != self._vector_dim:
                raise StoreError(
                    f"vector has {len(new.vector)} dimensions but this store holds {self._vector_dim}-d vectors"
                )
        return self._inserts.run(news)

    def _insert_batch(self, news: list[NewMemory]) -> list[tuple[MemoryRecord, bool]]:
        """One commit for the new ids of ``news`` (the coalesced inserts of every waiting caller)."""
        by_scope: dict[Scope, list[str]] = {}
        for new in news:
            by_scope.setdefault(new.record.scope, []).append(new.record.id)
        # Copies of the batch's scopes answer which ids exist: a table lookup scans every row no index
        # covers yet (a bulk import's own rows), 0.1 ms an id at 1M rows. Missing copies are read here,
        # before the write lock (no other writer waits for the read), as start-up warms them.
        self._cache.warm(by_scope)
        with self.exclusive():
            existing: dict[str, MemoryRecord] = {}
            ids = []  # those no scope copy can answer for: looked up in the table
            for scope, scope_ids in by_scope.items():
                # A scope warming left out (the copies' budget was full) may still displace idle copies
                # when it is the batch's only scope, as any read of it would. Ids are scope-qualified
                # hashes: one the up-to-date copy lacks is new.
                with self._cache.reading(scope, build=len(by_scope) == 1) as copy:
                    if copy is not None:
                        existing |= by_id(copy, scope_ids)
                    else:
                        ids += list(dict.fromkeys(scope_ids))
            for start in range(0, len(ids), 1_000):
                chunk = ids[start : start + 1_000]
                rows = self._select(
                    self._memories, filters.one_of("id", chunk), MEMORY_COLUMNS, limit=len(chunk) * 2
                )
                for row in rows:
                    existing.setdefault(row["id"], _memory_from_row(row))
            fresh: dict[str, NewMemory] = {}
            for new in news:
                if new.record.id not in existing:
                    fresh.setdefault(new.record.id, new)
            if fresh:
                # Episodes first: if the memory append then fails, a retry finds the episode and adds the memory.
                self._record_episodes([new.record for new in fresh.values()])
                rows = [_memory_to_row(new) for new in fresh.values()]
                if self._lock.spans_processes:
                    after = self._append(self._memories, rows)
                else:  # replicas on an object store: insert-if-absent in one commit, so no id twice
                    data = pa.Table.from_pylist(rows, schema=self._schema(self._memories))
                    after = retrying(
                        lambda: self._memories.merge_insert("id").when_not_matched_insert_all().execute(data)
                    ).version
                self._cache.advance(
                    after - 1,
                    after,
                    inserted=[
                        (new.record, np.asarray(new.vector, dtype=np.float32), new.search_text)
                        for new in fresh.values()
                    ],
                )
        results = []
        created_once: set[str] = set()
        for new in news:
            record_id = new.record.id
            if record_id in existing:
                results.append((existing[record_id], False))
            elif record_id in created_once:
                results.append((fresh[record_id].record, False))
            else:
                created_once.add(record_id)
                results.append((fresh[record_id].record, True))
        return results

    def restore_memory(self, new: NewMemory) -> MemoryRecord:
        """Write ``new`` over a retracted (possibly purged) row with the same id: the memory is live again
        (examined by consolidation as ``new.record.consolidated_at`` says)."""
        row = {**_memory_to_row(new), "purged_at": None}
        table = pa.Table.from_pylist([row], schema=self._schema(self._memories))
        with self.exclusive():
            current = self.get_memory(new.record.id, new.record.scope)
            if current is None or current.status not in ("retracted", "purged"):
                raise StoreError(f"{new.record.id} is not a forgotten memory and cannot be restored")
            self._merge_update(table)
        return new.record

    def vector_search(
        self,
        reach: Reach,
        vector: np.ndarray,
        *,
        embedder: str,
        limit: int,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        window: TimeWindow | None = None,
        all_tags: bool = False,
    ) -> list[SearchHit]:
        """Active memories in ``reach`` embedded by ``embedder`` (of these kinds, with any of these tags,
        or all of them with ``all_tags``, in this time window), nearest first; score = cosine similarity."""
        where = _Filter.of(reach, kinds, tags, window, all_tags)
        hits = [
            hit
            for scope in self._scopes(reach)
            for hit in self._vector_search_in(scope, vector, embedder, limit, where)
        ]
        return _best(hits, limit)

    def _vector_search_in(
        self, scope: Scope, vector: np.ndarray, embedder: str, limit: int, where: _Filter
    ) -> list[SearchHit]:
        with self._cache.reading(scope) as copy:
            if copy is not None:
                nearest = copy.nearest(
                    vector, embedder=embedder, limit=limit, now=datetime.now(UTC), **where.for_copy()
                )
                return [SearchHit(record, score, stored) for record, score, stored in nearest]
        condition = filters.all_of(self._active_in(scope, where), filters.equals("embedder", embedder))
        query = (
            self._memories.search(np.asarray(vector, dtype=np.float32), vector_column_name="vector")
            .distance_type("cosine")
            .ef(VECTOR_SEARCH_EF)  # used once maintenance has built the ANN index
            .where(condition, prefilter=True)
            .select([*MEMORY_COLUMNS, "vector", "_distance"])
            .limit(limit)
        )
        hits = [
            SearchHit(_memory_from_row(row), 1.0 - float(row["_distance"]), _vector(row))
            for row in query.to_arrow().to_pylist()
        ]
        return _live(hits)

    def fulltext_search(
        self,
        reach: Reach,
        text: str,
        *,
        limit: int,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        window: TimeWindow | None = None,
        all_tags: bool = False,
    ) -> list[SearchHit]:
        """Active memories in ``reach`` matching ``text`` (BM25 over content and tags), best first. Each
        scope of a view has a BM25 index of its own: hits are put on the scale of ``fulltext_ceiling``
        (what a full match scores in the first scope whose index knows the query's terms), so that the
        indexes' scores compare."""
        if not text.strip():
            return []
        where = _Filter.of(reach, kinds, tags, window, all_tags)
        scopes = self._scopes(reach)
        found = {scope: self._fulltext_search_in(scope, text, limit, where) for scope in scopes}
        if len(scopes) == 1:
            return found[scopes[0]]
        ceilings = {scope: self._ceiling_in(scope, text) for scope in scopes}
        scale = next((ceiling for ceiling in ceilings.values() if ceiling), None)
        hits: list[SearchHit] = []
        for scope, scope_hits in found.items():
            ceiling = ceilings[scope]
            if scale and ceiling and ceiling != scale:
                scope_hits = [replace(hit, score=hit.score * scale / ceiling) for hit in scope_hits]
            hits += scope_hits
        return _best(hits, limit)

    def _fulltext_search_in(self, scope: Scope, text: str, limit: int, where: _Filter) -> list[SearchHit]:
        if self._cache.searches_text:
            with self._cache.reading(scope) as copy:
                if copy is not None:
                    found = copy.best_matching(text, limit=limit, now=datetime.now(UTC), **where.for_copy())
                    return [SearchHit(record, score, vector) for record, score, vector in found]
        elif self._cache.serves(scope):
            # Only ids and scores from the index (queried outside the cache's lock); records and vectors
            # come from the copy (a row committed after it caught up is left for the next search).
            scored = self._fulltext_rows(scope, text, ["id"], limit, where)
            with self._cache.reading(scope) as copy:
                if copy is not None:
                    return _live(
                        [
                            SearchHit(
                                copy.records[row["id"]], float(row["_score"]), copy.vector_of(row["id"])
                            )
                            for row in scored
                            if row["id"] in copy.records and where.sees(copy.records[row["id"]])
                        ]
                    )
        rows = self._fulltext_rows(scope, text, [*MEMORY_COLUMNS, "vector"], limit, where)
        return _live([SearchHit(_memory_from_row(row), float(row["_score"]), _vector(row)) for row in rows])

    def _fulltext_rows(
        self, scope: Scope, text: str, columns: list[str], limit: int, where: _Filter
    ) -> list[dict[str, Any]]:
        """LanceDB's BM25 index: the best ``limit`` active memories of ``scope``, these columns and _score."""
        query = self._memories.search(text, query_type="fts", fts_columns="search_text")
        query = query.where(self._active_in(scope, where), prefilter=True)
        return query.select([*columns, "_score"]).limit(limit).to_arrow().to_pylist()

    def holds_memories_in(self, reach: Reach, window: TimeWindow) -> bool:
        """Whether some active memory of ``reach`` (that its viewer may see) is of ``window``'s time."""
        where = _Filter.of(reach, window=window)
        return any(self._holds_memories_in(scope, window, where) for scope in self._scopes(reach))

    def _holds_memories_in(self, scope: Scope, window: TimeWindow, where: _Filter) -> bool:
        with self._cache.reading(scope) as copy:
            if copy is not None:
                return any(
                    record.status == "active" and window.holds(record.created_at) and where.sees(record)
                    for record in copy.records.values()
                )
        return bool(scan(self._memories, self._active_in(scope, where), ["id"], limit=1).num_rows)

    def fulltext_ceiling(self, reach: Reach, text: str) -> float | None:
        """The score a memory matching all of ``text`` would get in the full-text index (the sum of its
        terms' idf), so that BM25 scores read as absolute relevance: of ``reach``'s home scope, or for a
        view whose home index knows none of the terms, of the first of its scopes that does (the scale
        ``fulltext_search`` puts a view's hits on). None when LanceDB's index answers (it does not expose
        term statistics: scores are then relative to the best)."""
        ceilings = [self._ceiling_in(scope, text) for scope in self._scopes(reach)]
        return next((ceiling for ceiling in ceilings if ceiling), ceilings[0])

    def _ceiling_in(self, scope: Scope, text: str) -> float | None:
        if not text.strip() or not (self._cache.searches_text and self._cache.holds(scope)):
            return None
        with self._cache.reading(scope) as copy:
            return copy.fulltext_ceiling(text) if copy is not None else None

    def fulltext_engine(self, reach: Reach) -> str:
        """``copy-bm25`` when the home scope's copy answers its full-text searches, else ``lancedb-bm25``."""
        scope = self._scopes(reach)[0]
        return "copy-bm25" if self._cache.searches_text and self._cache.holds(scope) else "lancedb-bm25"

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

    def list_memories(
        self,
        reach: Reach,
        *,
        limit: int,
        before: tuple[datetime, str] | None = None,
        agent_id: str | None = None,
        tag: str | None = None,
        kind: str | None = None,
        window: TimeWindow | None = None,
        episode_id: str | None = None,
    ) -> list[MemoryRecord]:
        """One page of the scope's active memories (of ``window``'s time, if given), newest first (by ``created_at``, then id, descending):
        the ``limit`` that come after ``before`` (the last one of the previous page) in that order. A memory
        written after the listing began comes before the first page, so no page repeats one."""
        where = _Filter.of(reach, [kind] if kind else None, [tag] if tag else None, window)

        def wanted(record: MemoryRecord) -> bool:
            at = utc(record.created_at)
            return (
                record.status == "active"
                and where.sees(record)
                and (agent_id is None or record.agent_id == agent_id)
                and (tag is None or tag in record.tags)
                and (kind is None or record.kind == kind)
                and (episode_id is None or record.episode_id == episode_id)
                and (window is None or window.holds(at))
                and (before is None or (at, record.id) < (before[0], before[1]))
            )

        def page(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
            found = sorted(
                (record for record in records if wanted(record)),
                key=lambda record: (utc(record.created_at), record.id),
                reverse=True,
            )
            return found[:limit]

        def scope_page(scope: Scope) -> list[MemoryRecord]:
            with self._cache.reading(scope) as copy:
                if copy is not None:
                    return page(copy.records.values())
            condition = filters.all_of(
                self._active_in(scope, where),
                filters.equals("agent_id", agent_id) if agent_id is not None else None,
                filters.equals("episode_id", episode_id) if episode_id is not None else None,
                filters.at_or_before("created_at", before[0]) if before is not None else None,
            )
            rows = self._select(self._memories, condition, MEMORY_COLUMNS, limit=None)
            return page({row["id"]: _memory_from_row(row) for row in rows}.values())

        return page(record for scope in self._scopes(reach) for record in scope_page(scope))

    def memory_vectors(self, memory_ids: Sequence[str], reach: Reach) -> dict[str, np.ndarray]:
        """The stored vectors of these memories of ``reach`` (ids of memories it lacks are left out)."""
        return self._by_id(reach, memory_ids, self._vectors_in)

    def _vectors_in(self, scope: Scope, ids: list[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        with self._cache.reading(scope) as copy:
            if copy is not None:
                vectors = {i: copy.vector_of(i) for i in ids}
                return {i: v for i, v in vectors.items() if v is not None}
        condition = filters.all_of(filters.one_of("id", ids), filters.scope_is(scope))
        rows = self._select(self._memories, condition, ["id", "vector"], limit=len(ids) * 2)
        return {
            row["id"]: np.asarray(row["vector"], dtype=np.float32)
            for row in rows
            if row["vector"] is not None
        }

    def count_memories(self) -> int:

        return int(self._memories.count_rows())

    def episode_member_stubs(self, reach: Reach, episode_ids: Sequence[str]) -> list[EpisodeMemberStub]:
        """Every active member of these episodes (that ``reach``'s viewer may see): id, episode, time and
        weight (no content or vector)."""
        if not episode_ids:
            return []
        where = _Filter.of(reach)
        return [stub for scope in self._scopes(reach) for stub in self._stubs_in(scope, episode_ids, where)]

    def _stubs_in(self, scope: Scope, episode_ids: Sequence[str], where: _Filter) -> list[EpisodeMemberStub]:
        with self._cache.reading(scope) as copy:
            if copy is not None:
                return [
                    EpisodeMemberStub(r.id, r.episode_id or "", r.created_at, r.weight)
                    for r in episode_members(copy, episode_ids)
                    if where.sees(r)
                ]
        condition = filters.all_of(
            self._active_in(scope, where), filters.one_of("episode_id", list(episode_ids))
        )
        rows = self._select(
            self._memories, condition, ["id", "episode_id", "created_at", "weight"], limit=None
        )
        unique = {
            row["id"]: EpisodeMemberStub(
                row["id"], row["episode_id"], utc(row["created_at"]), float(row["weight"])
            )
            for row in rows
        }
        return list(unique.values())

    # ------------------------------------------------------------------ consolidation and lineage

    def supersede(self, scope: Scope, loser_ids: Sequence[str], survivor_id: str, at: datetime) -> list[str]:
        """Mark the still-active ``loser_ids`` superseded by ``survivor_id``; returns the ids that changed."""
        return self._set_status(scope, loser_ids, "superseded", at, replaced_by=survivor_id)

    def reactivate(self, scope: Scope, memory_id: str, at: datetime) -> MemoryRecord | None:
        """Make a superseded memory active again (an explicit update back to its text); returns it as it is
        now, or None when it is not superseded (any more)."""
        with self.exclusive():
            current = self.get_memory(memory_id, scope)
            if current is None or current.status != "superseded":
                return None
            self._update_rows([memory_id], {"status": "active", "replaced_by": None, "updated_at": at})
            return self.get_memory(memory_id, scope)

    def retract(self, scope: Scope, memory_ids: Sequence[str], at: datetime) -> list[str]:
        """Retract the active ones of these memories; returns the ids whose status changed."""
        return self._set_status(scope, memory_ids, "retracted", at, replaced_by=None)

    def _set_status(
        self, scope: Scope, memory_ids: Sequence[str], status: str, at: datetime, *, replaced_by: str | None
    ) -> list[str]:
        with self.exclusive():
            current = self.get_memories(memory_ids, scope)
            # Only active memories leave the active set (a superseded one is not retracted over, etc.).
            changing = [i for i in memory_ids if i in current and current[i].status == "active"]
            if changing:
                self._update_rows(changing, {"status": status, "replaced_by": replaced_by, "updated_at": at})
        return changing

    def mark_consolidated(self, memory_ids: Sequence[str], at: datetime | None) -> None:
        """Stamp these memories as examined by consolidation at ``at`` (None: not examined)."""
        if memory_ids:
            self._update_rows(list(memory_ids), {"consolidated_at": at})

    def set_version_of(self, memory_id: str, previous_id: str) -> None:
        self._merge_update(pa.table({"id": [memory_id], "version_of": [previous_id]}))

    def unconsolidated(self, scope: Scope, limit: int) -> list[MemoryRecord]:
        """Active memories the consolidation sweep has not examined yet, oldest first."""
        condition = filters.all_of(filters.scope_is(scope), filters.equals("status", "active"))
        rows = self._select(self._memories, condition, ["id", "created_at", "consolidated_at"], limit=None)
        pending = sorted((row["created_at"], row["id"]) for row in rows if row["consolidated_at"] is None)
        found = self.get_memories([memory_id for _, memory_id in pending[:limit]], scope)
        return sorted(found.values(), key=lambda record: (record.created_at, record.id))

    def expired(self, now: datetime) -> list[MemoryRecord]:
        """Active memories whose ``expires_at`` has passed (ephemeral tier), in every scope."""
        condition = filters.all_of(
            filters.equals("status", "active"), filters.equals("protection_tier", "ephemeral")
        )
        rows = self._select(self._memories, condition, MEMORY_COLUMNS, limit=None)
        return [
            _memory_from_row(row)
            for row in rows
            if row["expires_at"] is not None and utc(row["expires_at"]) <= now
        ]

    def add_lineage(self, events: Sequence[LineageEvent], *, deferred: bool = False) -> None:
        """Append lineage events; ``deferred``: queued and written with the next batch of logs (within
        0.2 s, with no write lock), for events that record a decision which changed nothing (keep_both):
        a crash can lose the last of those, never a change's own event. Reads of lineage see them at once."""
        rows = [event.__dict__ for event in events]
        if deferred:
            self._logs.add(self._lineage, rows)
        else:
            self._append(self._lineage, rows)

    def lineage(self, reach: Reach, memory_ids: Sequence[str]) -> list[LineageEvent]:
        """Every event (in ``reach``'s scopes) that acted on, or was caused by, one of ``memory_ids``,
        oldest first."""
        if not memory_ids:
            return []
        ids = list(dict.fromkeys(memory_ids))
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
                _scope_of(row) in scopes and (row["memory_id"] in wanted or row["related_id"] in wanted)
            ),
        )
        events = {row["event_id"]: LineageEvent(**{**row, "at": utc(row["at"])}) for row in rows}
        return sorted(events.values(), key=lambda event: (event.at, event.event_id))

    def recent_lineage(self, scope: Scope, actions: Sequence[str], limit: int | None) -> list[LineageEvent]:
        """The newest ``limit`` events of these kinds in the scope (None: all), newest first."""
        condition = filters.all_of(filters.scope_is(scope), filters.one_of("action", list(actions)))
        rows = self._logged(
            self._lineage, condition, lambda row: _scope_of(row) == scope and row["action"] in actions
        )
        events = {row["event_id"]: LineageEvent(**{**row, "at": utc(row["at"])}) for row in rows}
        return sorted(events.values(), key=lambda event: (event.at, event.event_id), reverse=True)[:limit]

    def put_contradictions(self, records: Sequence[ContradictionRecord]) -> None:
        """Insert new pairs; a pair already known keeps its first detection (and its status)."""
        if not records:
            return
        table = pa.Table.from_pylist(
            [record.__dict__ for record in records], schema=self._schema(self._contradictions)
        )
        with self.exclusive():
            retrying(
                lambda: (
                    self._contradictions.merge_insert(["org_id", "project_id", "older_id", "newer_id"])
                    .when_not_matched_insert_all()
                    .execute(table)
                )
            )

    def contradictions(
        self, scope: Scope, *, status: str | None = "open", memory_ids: Sequence[str] | None = None
    ) -> list[ContradictionRecord]:
        condition = filters.scope_is(scope)
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
        records = [_contradiction_from_row(row) for row in rows]
        return sorted(records, key=lambda r: (r.detected_at, r.older_id, r.newer_id))

    def newer_contradictions(self, reach: Reach, memory_ids: Sequence[str]) -> dict[str, list[str]]:
        """Older memory id -> the newer memories that contradict it, for open contradictions only."""
        return self._by_id(reach, memory_ids, self._newer_contradictions_in)

    def _newer_contradictions_in(self, scope: Scope, memory_ids: list[str]) -> dict[str, list[str]]:
        if not memory_ids:
            return {}
        snapshot = self._contradiction_snapshots.get(scope)
        if snapshot is not None:
            return {i: list(snapshot[i]) for i in dict.fromkeys(memory_ids) if i in snapshot}
        return self._newer_contradictions(scope, memory_ids)

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
        open_pairs = self.contradictions(scope, memory_ids=memory_ids)
        if not open_pairs:
            return 0
        update = pa.Table.from_pylist(
            [
                {**pair.__dict__, "status": "resolved", "resolution": resolution, "resolved_at": at}
                for pair in open_pairs
            ],
            schema=self._schema(self._contradictions),
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

    def purge(
        self,
        scope: Scope,
        memory_ids: Sequence[str],
        at: datetime,
        *,
        quoted_chars: int = 0,
        events: Sequence[LineageEvent] = (),
        resolution: str = "purged",
    ) -> list[str]:
        """Erase content, tags and vector of these memories (the rows stay, status purged, for lineage), scrub
        their text from recorded traces, episode titles and the search text of the other members of their
        episodes (which quote up to ``quoted_chars`` of the memory before them), record ``events`` (its
        lineage) and close its open contradictions with ``resolution``, then drop every older version of
        the tables and rebuild the full-text index, so the text is gone from the store's files.

        One recoverable operation: a journal entry naming the memories (never their text) is written
        first and removed last; a process killed in between leaves it, and the next opening of the store
        finishes the purge before anything is served (``finish_pending_purges``). Until then a memory
        already erased reads as purged everywhere (explain_ranking masks what a trace still quotes)."""
        with self.exclusive():
            current = self.get_memories(memory_ids, scope)
            ids = [i for i in memory_ids if i in current]
            if not ids:
                return []
            journal = PendingPurge(
                key=f"{PURGE_JOURNAL}{secrets.token_hex(8)}",
                scope=scope,
                memory_ids=tuple(ids),
                at=at,
                quoted_chars=quoted_chars,
                events=tuple(events),
                resolution=resolution,
            )
            retrying(lambda: self._meta.add([{"key": journal.key, "value": journal.to_json()}]))
            self._finish_purge(journal)
        return ids

    def finish_pending_purges(self) -> int:
        """Finish every purge a killed process left half done (at start-up, before serving); how many."""
        if not self._pending_purges():  # the usual case, without waiting for the write lock
            return 0
        with self.exclusive():
            # Read again under the lock: a purge another process was finishing when we looked is done
            # now, and its memory may since have been remembered again (and must not be erased).
            pending = self._pending_purges()
            for journal in pending:
                log.warning(
                    "finishing a purge a stopped process left half done (%d memories)",
                    len(journal.memory_ids),
                )
                self._finish_purge(journal)
        return len(pending)

    def _pending_purges(self) -> list[PendingPurge]:
        rows = scan_rows(self._meta, filters.contains("key", PURGE_JOURNAL), None)
        return [
            PendingPurge.from_json(r["key"], r["value"]) for r in rows if r["key"].startswith(PURGE_JOURNAL)
        ]

    def _finish_purge(self, journal: PendingPurge) -> None:
        """Every step of a purge after its quotes, each safe to run again (a purge the journal says was
        begun is finished the same way whatever step a crash interrupted)."""
        scope, ids, at = journal.scope, list(journal.memory_ids), journal.at
        current = self.get_memories(ids, scope)
        count = len(ids)
        # The quotes of a memory in its neighbours' search text go while its text is still there to find
        # them by (a memory already erased had its quotes scrubbed before); then the memory itself; then
        # whatever read it meanwhile (traces).
        self._scrub_quotes(scope, [m for m in current.values() if m.content], journal.quoted_chars)
        # Episode titles first: a scope copy re-reads an episode when one of its memories changes, so
        # the episode must already be as it will stay when the memory's commit lands.
        for record in current.values():
            if record.kind == "episode" and record.episode_id:
                where = self._in_scope(scope, id=record.episode_id)
                retrying(partial(self._episodes.update, where=where, values={"title": None}))
        self._merge_update(
            pa.table(
                {
                    "id": pa.array(ids, pa.string()),
                    "content": pa.array([""] * count, pa.string()),
                    "content_hash": pa.array([""] * count, pa.string()),
                    "search_text": pa.array([""] * count, pa.string()),
                    "tags": pa.array([[]] * count, pa.list_(pa.string())),
                    "tags_key": pa.array(["||"] * count, pa.string()),
                    "simhash": pa.array([None] * count, pa.int64()),
                    "vector": pa.array(
                        [[0.0] * self._vector_dim] * count, pa.list_(pa.float32(), self._vector_dim)
                    ),
                    "status": pa.array(["purged"] * count, pa.string()),
                    "purged_at": pa.array([at] * count, pa.timestamp("us", tz="UTC")),
                    "updated_at": pa.array([at] * count, pa.timestamp("us", tz="UTC")),
                }
            )
        )
        self._scrub_traces(scope, ids)
        if journal.events:
            self.add_lineage_once(journal.events)
        self.resolve_contradictions(scope, ids, journal.resolution, at)
        self._drop_old_versions()  # the text is gone from old versions too before the journal goes
        retrying(partial(self._meta.delete, filters.equals("key", journal.key)))

    def add_lineage_once(self, events: Sequence[LineageEvent]) -> None:
        """Add the events whose ids are not there yet (a purge finished again adds each once)."""
        table = pa.Table.from_pylist([event.__dict__ for event in events], schema=self._schema(self._lineage))
        with self.exclusive():
            retrying(
                lambda: self._lineage.merge_insert("event_id").when_not_matched_insert_all().execute(table)
            )

    def _scrub_quotes(self, scope: Scope, purged: Sequence[MemoryRecord], quoted_chars: int) -> None:
        quoted = [r for r in purged if r.episode_id and r.content] if quoted_chars > 0 else []
        if not quoted:
            return
        episodes = list({r.episode_id for r in quoted if r.episode_id})
        condition = filters.all_of(filters.scope_is(scope), filters.one_of("episode_id", episodes))
        gone = {r.id for r in purged}
        all_quotes = [r.content[:quoted_chars] for r in quoted]
        changed: dict[str, str] = {}
        for row in self._select(self._memories, condition, ["id", "search_text"], limit=None):
            if row["id"] in gone:
                continue
            text = row["search_text"]
            for quote in all_quotes:
                text = text.replace(quote, "")
            if text != row["search_text"]:
                changed[row["id"]] = text
        if changed:
            self._merge_update(
                pa.table(
                    {
                        "id": pa.array(list(changed), pa.string()),
                        "search_text": pa.array(list(changed.values()), pa.string()),
                    }
                )
            )

    def _scrub_traces(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        self._logs.flush()
        gone = set(memory_ids)
        for memory_id in memory_ids:
            # An org-visible memory was recalled from any project of its org.
            where = filters.equals("org_id", scope.org_id) if scope.is_org_shelf else filters.scope_is(scope)
            condition = filters.all_of(where, filters.contains("trace_json", memory_id))
            for row in self._select(self._retrievals, condition, ["retrieval_id", "trace_json"], limit=None):
                trace = json.loads(row["trace_json"])
                for candidate in trace.get("candidates", []):
                    if candidate.get("id") in gone:
                        candidate["preview"] = "[purged]"
                scrubbed = pa.table(
                    {"retrieval_id": [row["retrieval_id"]], "trace_json": [json.dumps(trace)]}
                )
                retrying(
                    partial(
                        self._retrievals.merge_insert("retrieval_id").when_matched_update_all().execute,
                        scrubbed,
                    )
                )

    def _drop_old_versions(self) -> None:
        import warnings

        for table in (self._memories, self._retrievals, self._episodes):
            with warnings.catch_warnings():
                # "removes every version except the latest": exactly what a purge needs.
                warnings.simplefilter("ignore", UserWarning)
                retrying(partial(table.optimize, cleanup_older_than=timedelta(0)))
        # The inverted index still holds the purged words; build it again from the current rows.
        retrying(
            partial(self._memories.create_index, "search_text", config=FTS(with_position=False), replace=True)
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            retrying(partial(self._memories.optimize, cleanup_older_than=timedelta(0)))

    def _update_rows(self, memory_ids: Sequence[str], values: Mapping[str, Any]) -> None:
        """Set the same column values on these memories: one UPDATE that finds its rows through the id
        index (a merge joins the whole table on id: 5x slower at 100k memories). The filter is a typed
        expression; LanceDB encodes the values as SQL literals itself (quotes escaped, times as UTC)."""
        ids = list(dict.fromkeys(memory_ids))
        changes = _record_values(values)
        with self.exclusive():
            for start in range(0, len(ids), 1_000):
                chunk = ids[start : start + 1_000]
                after = retrying(
                    partial(self._memories.update, where=filters.one_of("id", chunk), values=dict(values))
                ).version
                self._cache.advance(after - 1, after, updated={memory_id: changes for memory_id in chunk})

    def _merge_update(self, update: pa.Table) -> None:
        rows = update.to_pylist()
        changes = {row["id"]: _record_values(row) for row in rows}
        vectors = {row["id"]: _vector(row) for row in rows if "vector" in row}
        texts = {row["id"]: row["search_text"] for row in rows if "search_text" in row}
        with self.exclusive():
            after = retrying(
                lambda: self._memories.merge_insert("id").when_matched_update_all().execute(update)
            ).version
            self._cache.advance(after - 1, after, updated=changes, vectors=vectors, texts=texts)

    # ------------------------------------------------------------------ corroboration

    def scopes(self) -> list[Scope]:
        """Every scope that holds an active memory."""
        table = (
            self._memories.search().where(filters.equals("status", "active")).select(["org_id", "project_id"])
        )
        rows = table.limit(EVERY_ROW).to_arrow()
        pairs = set(
            zip(rows.column("org_id").to_pylist(), rows.column("project_id").to_pylist(), strict=True)
        )
        return [Scope(org_id, project_id) for org_id, project_id in sorted(pairs)]

    def aggregation_rows(self, scope: Scope, limit: int) -> list[AggregationRow]:
        """The scope's newest ``limit`` active shared memories, as the aggregation job reads them (a memory
        only its agent or session may read neither corroborates nor contradicts what others read)."""
        with self._cache.reading(scope) as copy:
            if copy is not None:
                active = [
                    record for record in copy.records.values() if record.status == "active" and record.shared
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
            unique.setdefault(
                row["id"],
                AggregationRow(
                    id=row["id"],
                    agent_id=row["agent_id"],
                    weight=float(row["weight"]),
                    created_at=utc(row["created_at"]),
                    simhash=_from_int64(row["simhash"]),
                    content=row["content"],
                ),
            )
        return list(unique.values())

    def attesters(self, scope: Scope, memory_ids: Sequence[str] | None = None) -> dict[str, set[str]]:
        """memory id -> agents (other than its author) that stated it again (of ``memory_ids``, or all)."""
        condition = filters.scope_is(scope)
        if memory_ids is not None:
            if not memory_ids:
                return {}
            condition = filters.all_of(condition, filters.one_of("memory_id", list(memory_ids)))
        rows = self._select(self._attestations, condition, ["memory_id", "agent_id"], limit=None)
        found: dict[str, set[str]] = {}
        for row in rows:
            found.setdefault(row["memory_id"], set()).add(row["agent_id"])
        return found

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

    # ------------------------------------------------------------------ episodes

    def get_episodes(self, reach: Reach, episode_ids: Sequence[str]) -> dict[str, EpisodeRecord]:
        return self._by_id(reach, episode_ids, self._episodes_in)

    def _episodes_in(self, scope: Scope, episode_ids: list[str]) -> dict[str, EpisodeRecord]:
        if not episode_ids:
            return {}
        with self._cache.reading(scope) as copy:
            if copy is None:
                return self._read_episodes(scope, list(episode_ids))
            fresh, stale = copy.episodes_for(episode_ids)
        if stale:  # read again outside the cache's lock, applied under it
            read = self._read_episodes(scope, list(stale))
            with self._cache.updating(scope) as copy:
                if copy is not None:
                    copy.refresh_episodes(stale, read)
            fresh |= read
        return fresh

    def scope_episodes(self, scope: Scope) -> list[EpisodeRecord]:
        """Every episode of ``scope`` (the scope cache reads them with the scope's memories)."""
        return [
            _episode_from_row(row)
            for row in self._select(self._episodes, filters.scope_is(scope), None, None)
        ]

    def _read_episodes(self, scope: Scope, episode_ids: list[str]) -> dict[str, EpisodeRecord]:
        condition = filters.all_of(filters.scope_is(scope), filters.one_of("id", episode_ids))
        rows = self._select(self._episodes, condition, None, limit=len(episode_ids) * 2)
        return {row["id"]: _episode_from_row(row) for row in rows}

    def get_episode(self, episode_id: str, scope: Scope) -> EpisodeRecord | None:
        return self.get_episodes(scope, [episode_id]).get(episode_id)

    def _record_episodes(self, records: Sequence[MemoryRecord]) -> None:
        """Create the episodes these new memories belong to, and title them from an episode-kind memory that
        everyone who reads the episode may read (a private memory's first line never titles an episode
        that other readers' contexts show)."""
        firsts: dict[tuple[str, str, str], MemoryRecord] = {}
        titles: dict[tuple[str, str, str], str] = {}
        for record in records:
            if record.episode_id is None:
                continue
            key = (record.org_id, record.project_id, record.episode_id)
            firsts.setdefault(key, record)
            if record.kind == "episode" and record.shared:
                titles.setdefault(key, _episode_title(record))
        if not firsts:
            return
        existing: dict[tuple[str, str, str], str | None] = {}
        unknown: set[str] = set()  # episodes only the table can say about
        by_scope: dict[Scope, list[tuple[str, str, str]]] = {}
        for key in firsts:
            by_scope.setdefault(Scope(key[0], key[1]), []).append(key)
        for scope, keys in by_scope.items():
            with self._cache.reading(scope, build=False) as copy:
                for key in keys:
                    known = copy.episode_known(key[2]) if copy is not None else None
                    if known is None:
                        unknown.add(key[2])
                    elif known[0]:
                        existing[key] = known[1]
        episode_ids = sorted(unknown)
        for start in range(0, len(episode_ids), 1_000):
            chunk = episode_ids[start : start + 1_000]
            for row in self._select(
                self._episodes, filters.one_of("id", chunk), ["id", "org_id", "project_id", "title"], None
            ):
                existing[(row["org_id"], row["project_id"], row["id"])] = row["title"]
        # An episode begun by a private memory names no agent or session: its header is shown to readers
        # of the episode's shared memories too.
        missing = [
            {
                "id": record.episode_id,
                "org_id": record.org_id,
                "project_id": record.project_id,
                "title": titles.get(key),
                "agent_id": record.agent_id if record.shared else "",
                "session_id": record.session_id if record.shared else "",
                "started_at": record.created_at,
                "last_seen_at": record.created_at,
            }
            for key, record in firsts.items()
            if key not in existing
        ]
        self._append(self._episodes, missing)
        for key, title in titles.items():
            if key in existing and existing[key] is None:
                org_id, project_id, episode_id = key
                condition = filters.all_of(
                    filters.equals("id", episode_id), filters.scope_is(Scope(org_id, project_id))
                )
                retrying(partial(self._episodes.update, where=condition, values={"title": title}))

    # ------------------------------------------------------------------ retrievals

    def record_retrieval(self, record: RetrievalRecord) -> None:
        """Queued and written in the background with others (``storage.write_behind``)."""
        self._logs.add(self._retrievals, [{**record.__dict__, "context_ids": list(record.context_ids)}])

    def log_ab_rows(self, rows: Sequence[AbLogRow]) -> None:
        self._logs.add(self._ab_logs, [row.__dict__ for row in rows])

    def ab_log_rows(self, scope: Scope, retrieval_id: str) -> list[AbLogRow]:
        self._logs.flush()
        rows = self._select(self._ab_logs, self._in_scope(scope, retrieval_id=retrieval_id), None, limit=None)
        # Direct matches by weighted rank, then the episode siblings (no rank).
        return sorted(
            (AbLogRow(**row) for row in rows),
            key=lambda row: (row.weighted_rank is None, row.weighted_rank or 0, row.observation_id),
        )

    def get_retrieval(self, retrieval_id: str, scope: Scope) -> RetrievalRecord | None:
        queued = self._logs.queued(
            self._retrievals, lambda row: row["retrieval_id"] == retrieval_id and _scope_of(row) == scope
        )
        if queued:  # a recall of a moment ago, not written yet
            return _retrieval_from_row(queued[-1])
        rows = self._select(self._retrievals, self._in_scope(scope, retrieval_id=retrieval_id), None, limit=1)
        return _retrieval_from_row(rows[0]) if rows else None

    def session_retrievals(
        self, scope: Scope, session_id: str, purpose: RetrievalPurpose = "recall"
    ) -> list[RetrievalRecord]:
        """The session's retrievals. A report reads them: it writes the logs queued here first, so that
        what the session's recalls quoted is in the table, where a later purge by any process scrubs it
        (a row still queued in this process when another process purges would be written unscrubbed)."""
        self._logs.flush()
        condition = self._in_scope(scope, session_id=session_id, purpose=purpose)
        rows = self._select(self._retrievals, condition, None, limit=None)
        unique = {row["retrieval_id"]: _retrieval_from_row(row) for row in rows}
        return sorted(unique.values(), key=lambda record: record.created_at)

    def recent_sessions(self, scope: Scope, agent_id: str, since: datetime) -> list[tuple[str, datetime]]:
        """The sessions in which ``agent_id`` recalled since ``since``: (session id, its last recall),
        newest first."""
        condition = filters.all_of(
            self._in_scope(scope, agent_id=agent_id, purpose="recall"),
            filters.later_than("created_at", since),
        )
        rows = self._logged(
            self._retrievals,
            condition,
            lambda row: (
                _scope_of(row) == scope
                and row["agent_id"] == agent_id
                and row["purpose"] == "recall"
                and utc(row["created_at"]) > since
            ),
            ["session_id", "created_at"],
        )
        last: dict[str, datetime] = {}
        for row in rows:
            at = utc(row["created_at"])
            last[row["session_id"]] = max(at, last.get(row["session_id"], at))
        return sorted(last.items(), key=lambda item: item[1], reverse=True)

    # ------------------------------------------------------------------ outcomes

    def get_outcome(self, scope: Scope, session_id: str) -> OutcomeRecord | None:
        """The session's current report, with its credits and queries. Credits written by a report whose
        own row was never saved (a crash between the two commits) have another revision and are left
        out: such a report reads as not made, and its retry redoes it whole."""
        rows = self._select(self._outcomes, self._in_scope(scope, session_id=session_id), None, limit=None)
        if not rows:
            return None
        record = max((_outcome_from_row(row) for row in rows), key=lambda found: found.revision)
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
            record = _outcome_from_row(row)
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
        columns = set(self._schema(self._outcomes).names)
        row = {name: value for name, value in record.__dict__.items() if name in columns}
        rows = [{**row, "memory_ids": list(record.memory_ids)}]
        with self.reporting():
            if first and previous is None and self._lock.spans_processes:
                self._append_log(self._outcomes, rows)
                return
            table = pa.Table.from_pylist(rows, schema=self._schema(self._outcomes))
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
        rows += [{**common, **_credit_values(credit)} for credit in record.credits]
        dropped = {
            credit.memory_id: replace(credit, share=0.0)
            for credit in (previous.memory_credits() if previous is not None else ())
            if credit.memory_id not in credited
        }
        for memory_id in cleared:
            if memory_id not in credited and memory_id not in dropped:
                dropped[memory_id] = MemoryCredit(memory_id, "context", 0.0, record.score)
        rows += [{**common, **_credit_values(credit)} for credit in dropped.values()]
        with self.reporting():
            if first and previous is None and not dropped and self._lock.spans_processes:
                self._append_log(self._feedback, rows)
                return
            self._merge_credits(rows)

    def _merge_credits(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert or replace credit-table rows by (scope, session, memory) (caller holds ``reporting()``)."""
        columns = self._schema(self._feedback)
        table = pa.Table.from_pylist(
            [{name: row.get(name) for name in columns.names} for row in rows], schema=columns
        )
        retrying(
            lambda: (
                self._feedback.merge_insert(["org_id", "project_id", "session_id", "memory_id"])
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(table)
            )
        )
        self._appends_since_maintenance += 1  # a merge leaves a version and fragments too

    def carry_credits(self, scope: Scope, from_id: str, to_id: str) -> int:
        """Give ``to_id`` the credits ``from_id`` has in the current reports (an explicit update: the
        corrected memory serves what the old one did); returns how many. A report of one of those sessions
        made later replaces them as it replaces its own."""
        # The credits of every project of the org: an org-visible memory is credited wherever it was read.
        condition = filters.all_of(
            filters.equals("org_id", scope.org_id),
            filters.equals("kind", "credit"),
            filters.equals("memory_id", from_id),
        )
        with self.reporting():
            rows = scan(self._feedback, condition, None).to_pylist()
            rows = [{**row, "memory_id": to_id} for row in rows if (row.get("share") or 0) > 0]
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
        return (_credited_sessions(changed.take(credit_rows)) if credit_rows else []), ours

    def outcome_revision(self, scope: Scope, session_id: str) -> int | None:
        """The revision of the session's saved report (None: none saved): one column of one row."""
        rows = scan(self._outcomes, self._in_scope(scope, session_id=session_id), ["revision"])
        revisions = [r for r in rows.column("revision").to_pylist() if r is not None]
        return max(revisions) if revisions else None

    def feedback_version(self) -> int:
        """The credit table's version: any report, by any process, changes it."""
        return int(self._feedback.version)

    def report_versions(self) -> tuple[int, int]:
        """The versions of the credit table and of the report table (``put_outcome`` commits to the first,
        then the second): a report read at these versions is current while both stay the same."""
        return self.feedback_version(), int(self._outcomes.version)

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
        for credited in _credited_sessions(scan(self._feedback, condition, CREDIT_COLUMNS)):
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
            for found in _report_queries(scan(self._feedback, condition, QUERY_COLUMNS))
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
        credits = _credited_sessions(changed.take(credit_rows)) if credit_rows else []
        sessions = _report_queries(changed.take(session_rows)) if session_rows else []
        return (
            list(zip([scopes[i] for i in credit_rows], credits, strict=True)),
            list(zip([scopes[i] for i in session_rows], sessions, strict=True)),
        )

    def add_weight_events(self, events: Sequence[WeightEvent]) -> None:
        with self.reporting():
            self._append_log(self._weight_events, [event.__dict__ for event in events])

    def weight_events(self, scope: Scope, memory_id: str) -> list[WeightEvent]:
        """The weight history of a memory, from the reports of every project of the scope's org (an
        org-visible memory moves with reports wherever it was read; a project's memory only ever in its
        project's)."""
        condition = filters.all_of(
            filters.equals("org_id", scope.org_id), filters.equals("memory_id", memory_id)
        )
        rows = self._select(self._weight_events, condition, None, limit=None)
        return sorted((WeightEvent(**row) for row in rows), key=lambda event: (event.at, event.revision))

    # ------------------------------------------------------------------ the scope cache's reads

    def table_version(self) -> int:
        return int(self._memories.version)

    def scope_size_above(self, scope: Scope, limit: int) -> bool:
        rows = self._memories.search().where(filters.scope_is(scope)).select(["id"]).limit(limit + 1)
        return rows.to_arrow().num_rows > limit

    def scope_rows(self, scope: Scope) -> list[Row]:
        return self._rows_with_vectors(filters.scope_is(scope))

    def rows_changed_since(self, version: int, scopes: Sequence[Scope]) -> list[Row]:
        return self._rows_with_vectors(
            filters.all_of(
                filters.newer_than_version(version),
                reduce(lambda left, right: left | right, (filters.scope_is(scope) for scope in scopes)),
            )
        )

    def _rows_with_vectors(self, condition: Expr) -> list[Row]:
        """Records, vectors and search texts; the vectors come out of Arrow as one numpy block, not Python
        lists."""
        table = (
            self._memories.search()
            .where(condition)
            .select([*MEMORY_COLUMNS, "vector", "search_text"])
            .limit(EVERY_ROW)
            .to_arrow()
        )
        if table.num_rows == 0:
            return []
        column = table.column("vector").combine_chunks()
        flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        block = np.zeros((table.num_rows, self._vector_dim), dtype=np.float32)
        present = ~np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        block[present] = flat.reshape(-1, self._vector_dim)
        texts = table.column("search_text").to_pylist()
        records = [_memory_from_row(row) for row in table.drop_columns(["vector", "search_text"]).to_pylist()]
        return [
            (record, block[index] if present[index] else None, texts[index])
            for index, record in enumerate(records)
        ]

    @property
    def cache(self) -> ScopeCache:
        return self._cache

    def one_version(self) -> AbstractContextManager[None]:
        """Reads inside the block see one version of the memories (one freshness check per request)."""
        return self._cache.one_version()

    # ------------------------------------------------------------------ upkeep

    def maintain(
        self,
        *,
        min_fragments: int,
        keep_versions_for: timedelta = timedelta(hours=1),
        keep_replaced_for: timedelta | None = None,
    ) -> dict[str, str]:
        """Compact tables whose appends have piled up into many small fragments, fold new rows into the
        indexes and drop old versions: with ``keep_replaced_for`` (the server's rounds), versions a newer
        one replaced at least that long ago (``storage.versions``: a read never loses the version it
        started on); without it (a one-off round), versions committed more than ``keep_versions_for``
        ago. Returns what it did per table."""
        self._appends_since_maintenance = 0
        self._logs.flush()
        report: dict[str, str] = {}
        for name, table in self.tables().items():
            if keep_replaced_for is not None:
                looked_at = datetime.now(UTC)  # taken before asking for the newest version
                self._superseded.observe(name, looked_at, int(table.version))
            fragments = int(table.stats()["fragment_stats"]["num_fragments"])
            unindexed = sum(index.num_unindexed_rows or 0 for index in table.list_indices())
            if fragments < min_fragments and unindexed < 1_000:
                continue
            optimize = partial(self._optimize, name, table, keep_versions_for, keep_replaced_for)
            if name in (schema.RETRIEVALS, schema.AB_LOGS):
                # The logs are appended by the write-behind thread without the lock, in a batch every
                # 0.2 s: a compaction commits between those like any write.
                retrying(optimize)
            elif name in REPORT_TABLES:
                # Reports write these under the reports' lock (and their weights under the write lock):
                # both, in that order, keep a report's merge and the compaction from colliding.
                with self.reporting(), self.exclusive():
                    retrying(optimize)
            else:
                # Under the write lock. A compaction's commit has to be rebased over every append that
                # landed while it ran; writes arriving without a pause (a busy server, 40 a second)
                # made it fail after LanceDB's 30 s of retries ("too many concurrent writers"), again
                # and again, while the fragments piled up and every append got slower. Rounds come
                # every MEMORIA_COMPACTION_AFTER_APPENDS appends, so a round compacts a few hundred
                # fragments: a pause of about a second for the writes, not for the reads.
                with self.exclusive():
                    retrying(optimize)
            after = int(table.stats()["fragment_stats"]["num_fragments"])
            report[name] = (
                f"compacted {fragments} -> {after} fragments; folded {unindexed} row-index entries into indexes"
            )
        built = self._index_vectors()
        if built:
            report[f"{schema.MEMORIES} vectors"] = built
        return report

    def _optimize(
        self, name: str, table: Any, keep_versions_for: timedelta, keep_replaced_for: timedelta | None
    ) -> None:
        """One table's compaction, index update and clean-up, in one call. With ``keep_replaced_for`` the
        clean-up's cut-off (``storage.versions``) is worked out just before the call; LanceDB reads its
        clock after the compaction, so the cut-off carries a margin: a second plus twice this table's last
        optimize, or ``FIRST_OPTIMIZE_MARGIN`` before one was timed. (A second call for the clean-up alone
        measured two more versions a round: it updates the indexes again.) No cut-off known yet: nothing
        is dropped."""
        cleanup_older_than = keep_versions_for
        if keep_replaced_for is not None:
            last = self._optimize_seconds.get(name)
            margin = FIRST_OPTIMIZE_MARGIN if last is None else timedelta(seconds=1 + 2 * last)
            cut = self._superseded.cleanup_older_than(name, datetime.now(UTC), keep_replaced_for, margin)
            cleanup_older_than = cut if cut is not None else KEEP_EVERY_VERSION
        started = time.perf_counter()
        table.optimize(cleanup_older_than=cleanup_older_than)
        self._optimize_seconds[name] = time.perf_counter() - started

    def _index_vectors(self) -> str | None:
        """Build the ANN index over the vectors once the table is big enough (scopes too big for a copy
        are searched in LanceDB). Built without the write lock: appends go on meanwhile, and rows added
        after it stay searchable (LanceDB scans rows no index covers); later maintenance folds them in."""
        if self._vector_index_min_rows <= 0:
            return None
        if any("vector" in index.columns for index in self._memories.list_indices()):
            return None
        rows = int(self._memories.count_rows())
        if rows < self._vector_index_min_rows or self._cache.holds_everything(rows):
            return None
        started = time.perf_counter()
        retrying(
            lambda: self._memories.create_index(
                "vector", config=IvfHnswSq(distance_type="cosine"), name=VECTOR_INDEX, replace=False
            )
        )
        return f"built the vector index (IVF_HNSW_SQ, cosine) over {rows:,} rows in {time.perf_counter() - started:.1f} s"

    def info(self) -> StoreInfo:
        return StoreInfo(
            uri=self._uri,
            schema_version=self._schema_version,
            vector_dim=self._vector_dim,
            memory_count=self.count_memories(),
            tables={
                name: int(self._db.open_table(name).count_rows())
                for name in (schema.MEMORIES, schema.RETRIEVALS, schema.OUTCOMES)
            },
        )

    # ------------------------------------------------------------------ helpers

    def _scopes(self, reach: Reach) -> tuple[Scope, ...]:
        """The scopes a read of ``reach`` looks in: its home scope, and the org's shelf unless its up-to-date
        copy holds nothing (most orgs have no org-wide memory: their recalls then read one scope)."""
        scopes = scopes_of(reach)
        return scopes[:1] + tuple(scope for scope in scopes[1:] if not self._holds_nothing(scope))

    def _holds_nothing(self, scope: Scope) -> bool:
        with self._cache.reading(scope) as copy:
            return copy is not None and len(copy) == 0

    @staticmethod
    def _active_in(scope: Scope, where: _Filter) -> Expr:
        """The active memories of ``scope`` that ``where`` keeps, as a LanceDB filter."""
        kinds, tags, window = where.kinds, where.tags, where.window
        return filters.all_of(
            filters.scope_is(scope),
            filters.equals("status", "active"),
            filters.visible_to(where.viewer) if where.viewer is not None else None,
            filters.of_audience(where.audience) if where.audience is not None else None,
            filters.one_of("kind", kinds) if kinds else None,
            (filters.every_tag(tags) if where.all_tags else filters.any_tag(tags)) if tags else None,
            filters.at_or_after("created_at", window.since) if window and window.since else None,
            filters.earlier_than("created_at", window.until) if window and window.until else None,
        )

    def _append(self, table: Any, rows: Sequence[Mapping[str, Any]]) -> int:
        """Append under the write lock; returns the table version the commit made (0: nothing to add)."""
        with self.exclusive():
            return self._append_log(table, rows)

    def _append_log(self, table: Any, rows: Sequence[Mapping[str, Any]]) -> int:
        """An append that reads nothing first, so it needs no write lock (each commit is atomic): the
        write-behind thread uses it, and must not wait for the lock, since a request holding the lock
        may be waiting for that thread's flush to finish."""
        if not rows:
            return 0
        data = pa.Table.from_pylist(list(rows), schema=self._appenders.schema(table.name))
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


def _recover(local_path: Path) -> None:
    """Set aside newest manifests a crash of the machine left broken (``storage.recovery``), before any
    table is opened. The caller holds the write lock, so two servers starting together do not both move
    the same file; a running server's commit is renamed into place whole, so it never looks broken."""
    try:
        recovery.recover_store(local_path)
    except recovery.UnrecoverableTable as exc:
        raise StoreError(f"could not open the memory store at {str(local_path)!r}: {exc}") from exc


def _local_path(uri: str) -> Path | None:
    if uri.startswith("file://"):
        return Path(uri[len("file://") :]).expanduser()
    if "://" in uri:
        return None
    return Path(uri).expanduser()


def _memory_to_row(new: NewMemory) -> dict[str, Any]:
    record = new.record
    return {
        **record.__dict__,
        "tags": list(record.tags),
        "tags_key": filters.tags_key(record.tags),
        "simhash": _to_int64(record.simhash),
        "search_text": new.search_text,
        "vector": np.asarray(new.vector, dtype=np.float32),
    }


def _memory_from_row(row: Mapping[str, Any]) -> MemoryRecord:
    return MemoryRecord(**_record_values({name: row[name] for name in MEMORY_COLUMNS}))


_TIMES = frozenset({"created_at", "updated_at", "expires_at", "consolidated_at"})


def _record_values(row: Mapping[str, Any]) -> dict[str, Any]:
    """The record fields among a (whole or partial) row's columns, as records hold them: Arrow gives lists,
    maybe-naive datetimes and the signed SimHash; records hold tuples, UTC times and the unsigned one."""
    values: dict[str, Any] = {}
    for name in MEMORY_COLUMNS:
        if name not in row:
            continue
        value = row[name]
        if name == "tags":
            value = tuple(value or ())
        elif name == "weight":
            value = float(value)
        elif name == "simhash":
            value = _from_int64(value)
        elif name in _TIMES and value is not None:
            value = utc(value)
        values[name] = value
    return values


def _newer_by_older(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Older memory id -> the memories contradicting it, oldest detection first."""
    found: dict[str, list[str]] = {}
    for row in sorted(rows, key=lambda r: (r["detected_at"], r["older_id"], r["newer_id"])):
        found.setdefault(row["older_id"], []).append(row["newer_id"])
    return found


def _episode_from_row(row: Mapping[str, Any]) -> EpisodeRecord:
    return EpisodeRecord(
        **{**row, "started_at": utc(row["started_at"]), "last_seen_at": utc(row["last_seen_at"])}
    )


def _to_int64(value: int | None) -> int | None:
    """Unsigned 64-bit SimHash -> the signed int64 stored in the column."""
    return None if value is None else value - (1 << 64) if value >= 1 << 63 else value


def _from_int64(value: int | None) -> int | None:
    return None if value is None else value + (1 << 64) if value < 0 else value


def _contradiction_from_row(row: Mapping[str, Any]) -> ContradictionRecord:
    return ContradictionRecord(
        **{
            **row,
            "detected_at": utc(row["detected_at"]),
            "resolved_at": utc(row["resolved_at"]) if row["resolved_at"] is not None else None,
        }
    )


def _scope_of(row: Mapping[str, Any]) -> Scope:
    return Scope(row["org_id"], row["project_id"])


def _retrieval_from_row(row: Mapping[str, Any]) -> RetrievalRecord:
    return RetrievalRecord(
        **{**row, "created_at": utc(row["created_at"]), "context_ids": tuple(row["context_ids"] or ())}
    )


def _outcome_from_row(row: Mapping[str, Any]) -> OutcomeRecord:
    return OutcomeRecord(
        **{
            **row,
            "memory_ids": tuple(row["memory_ids"] or ()),
            "first_reported_at": utc(row["first_reported_at"]),
            "reported_at": utc(row["reported_at"]),
        }
    )


CREDIT_COLUMNS = [
    "session_id",
    "memory_id",
    "revision",
    "first_reported_at",
    "role",
    "share",
    "score",
    "query_index",
]
QUERY_COLUMNS = ["session_id", "queries", "query_vectors", "query_embedder"]


def _credit_values(credit: MemoryCredit) -> dict[str, Any]:
    return {"kind": "credit", **credit.__dict__}


def _credit_order(credit: MemoryCredit) -> tuple[int, float, str]:
    """Named memories first (helpful, misleading), then the rest by share: the order credit is assigned."""
    return ({"helpful": 0, "misleading": 1}.get(credit.role, 2), -credit.share, credit.memory_id)


def _credited_sessions(table: pa.Table) -> list[CreditedSession]:
    """Credit rows, read column by column (a report has tens of them; a replay reads thousands)."""
    columns = {name: table.column(name).to_pylist() for name in CREDIT_COLUMNS}
    return [
        CreditedSession(
            session_id=columns["session_id"][index],
            first_reported_at=utc(columns["first_reported_at"][index]),
            revision=columns["revision"][index],
            credit=MemoryCredit(
                columns["memory_id"][index],
                columns["role"][index],
                columns["share"][index],
                columns["score"][index],
                columns["query_index"][index],
            ),
        )
        for index in range(table.num_rows)
    ]


def _report_queries(table: pa.Table) -> list[ReportQueries]:
    found = []
    for row in table.select(QUERY_COLUMNS).to_pylist():
        vectors = row["query_vectors"] or []
        found.append(
            ReportQueries(
                session_id=row["session_id"],
                queries=tuple(row["queries"] or ()),
                vectors=np.asarray(vectors, dtype=np.float32) if vectors else None,
                embedder=row["query_embedder"],
            )
        )
    return found


def _vector(row: Mapping[str, Any]) -> np.ndarray | None:
    value = row.get("vector")
    return None if value is None else np.asarray(value, dtype=np.float32)


def _tag_filter(tags: Sequence[str] | None, every: bool = False) -> Callable[[MemoryRecord], bool] | None:
    if not tags:
        return None
    wanted = set(tags)
    if every:
        return lambda record: wanted.issubset(record.tags)
    return lambda record: not wanted.isdisjoint(record.tags)


def _kept(
    tags: Sequence[str] | None, window: TimeWindow | None, all_tags: bool = False
) -> Callable[[MemoryRecord], bool] | None:
    """What a scope copy's search keeps: memories with any of ``tags`` (all: ``all_tags``), in ``window``."""
    tagged = _tag_filter(tags, all_tags)
    if window is None or (window.since is None and window.until is None):
        return tagged
    if tagged is None:
        return lambda record: window.holds(record.created_at)
    return lambda record: tagged(record) and window.holds(record.created_at)


@dataclass(frozen=True)
class _Filter:
    """What a read keeps of a scope besides its activity: memories of these kinds, with any of these tags
    (all of them with ``all_tags``), of ``window``'s time, that ``viewer`` may see, of ``audience``."""

    kinds: Sequence[str] | None = None
    tags: Sequence[str] | None = None
    window: TimeWindow | None = None
    all_tags: bool = False
    view: View | None = None  # whose reading it is (None: a plain scope's read, which keeps every memory)

    @classmethod
    def of(
        cls,
        reach: Reach,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        window: TimeWindow | None = None,
        all_tags: bool = False,
    ) -> _Filter:
        return cls(kinds, tags, window, all_tags, reach if isinstance(reach, View) else None)

    @property
    def viewer(self) -> Viewer | None:
        return self.view.viewer if self.view is not None else None

    @property
    def audience(self) -> Audience | None:
        return self.view.audience if self.view is not None else None

    def sees(self, record: MemoryRecord) -> bool:
        """Whether the reader may see ``record`` (the rest of the filter is the caller's to apply)."""
        return self.view is None or self.view.sees(record)

    def for_copy(self) -> dict[str, Any]:
        """The arguments of a scope copy's search."""
        return {
            "kinds": self.kinds,
            "keep": _kept(self.tags, self.window, self.all_tags),
            "viewer": self.viewer,
            "audience": self.audience,
        }


def _best(hits: list[SearchHit], limit: int) -> list[SearchHit]:
    """The ``limit`` best of the hits of one or several scopes (a view's home scope and org shelf)."""
    return sorted(hits, key=lambda hit: -hit.score)[:limit]


def _live(hits: list[SearchHit]) -> list[SearchHit]:
    """Search results without duplicate ids and without ephemeral memories past their expiry (the
    maintenance job retracts those, but a search between its rounds must not return them)."""
    now = datetime.now(UTC)
    return [hit for hit in _dedupe(hits) if hit.record.expires_at is None or hit.record.expires_at > now]


def _dedupe(hits: list[SearchHit]) -> list[SearchHit]:
    seen: set[str] = set()
    unique = []
    for hit in hits:
        if hit.record.id not in seen:
            seen.add(hit.record.id)
            unique.append(hit)
    return unique


def _episode_title(record: MemoryRecord) -> str:
    first_line = record.content.strip().splitlines()[0] if record.content.strip() else ""
    return first_line[:120]
