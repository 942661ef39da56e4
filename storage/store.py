"""The memory store: the only code that talks to LanceDB. ``MemoryStore`` opens a store and composes its
roles, one module each: ``memories``, ``search``, ``lineage``, ``forgetting``, ``journal`` (retrievals
and A/B logs), ``feedback_log``, ``upkeep``, over the shared ``tables`` and the ``rows`` layout.

Reads see the newest version committed by a write sequence that ended (``read_consistency_interval=0``;
the scope copies, credits and snapshots ask for it by write generation, ``storage.generations``), so a
write made by another server process on the same store is visible to the next recall. Write sequences run under
``WriteLock`` and ``retrying``; ids are deterministic, so a retried or concurrent duplicate write
lands on the same id and reads collapse any duplicate rows.
"""

from __future__ import annotations

import getpass
import logging
import os
import threading
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import lancedb

from storage import migrations, recovery, schema
from storage.appenders import Appenders
from storage.feedback_log import FeedbackLog
from storage.forgetting import PURGE_JOURNAL, Forgetting, PendingPurge
from storage.generations import GENERATIONS_FILE_NAME, REPORTS, WRITES, Generations, VersionWatch
from storage.group_commit import GroupCommit
from storage.journal import RetrievalJournal
from storage.lexical_index import Analyzer
from storage.locking import (
    COMPACTION_LOCK_FILE_NAME,
    LOCK_FILE_NAME,
    LOGS_LOCK_FILE_NAME,
    REPORTS_LOCK_FILE_NAME,
    CompactionsBeside,
    LogsLock,
    WriteLock,
    retrying,
)
from storage.pending import PendingSupersedes
from storage.records import StoreInfo
from storage.row_ids import RowCount, RowIds
from storage.scope_cache import ScopeCache
from storage.search import MemorySearch
from storage.snapshots import ScopeSnapshots
from storage.tables import StoreError, local_folder
from storage.unfinished import UnfinishedWrites
from storage.upkeep import Upkeep
from storage.versions import NewestManifest, SupersededVersions
from storage.write_behind import WriteBehind

log = logging.getLogger(__name__)

__all__ = ["PURGE_JOURNAL", "MemoryStore", "PendingPurge", "StoreError"]

# A copy answers every leg of a recall from memory: at 111k memories a scope's candidate search took 92 ms
# through LanceDB (HNSW + BM25 + filters) and a matrix product over its vectors takes about 9 ms.
DEFAULT_CACHE_SCOPE_ROWS = 250_000
DEFAULT_CACHE_TOTAL_ROWS = 400_000
# Below this many rows a filtered flat search (or a scope copy) is as fast as an ANN index, and exact.
DEFAULT_VECTOR_INDEX_MIN_ROWS = 100_000
# Scopes with up to this many open contradictions are read whole and kept until the table changes;
# bigger ones are queried per read.
SNAPSHOT_MAX_ROWS = 20_000
# LanceDB's own caches default to gigabytes and keep an entry per table version read: a server that
# writes all day filled them with versions it would never read again (benchmarks/writes.py).
DEFAULT_INDEX_CACHE_BYTES = 64 << 20
DEFAULT_METADATA_CACHE_BYTES = 64 << 20


class MemoryStore(Forgetting, MemorySearch, RetrievalJournal, FeedbackLog, Upkeep):
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
        lancedb_query: Callable[[str], str] | None = None,
        generations: Generations | None = None,
    ) -> None:
        self._vector_index_min_rows = vector_index_min_rows
        self._lancedb_query = lancedb_query
        self._db = db
        self._uri = uri
        self._lock = lock
        # Reports' own lock (``reporting()``): a report's sequence on the report tables holds it, and the
        # write lock only for its weight write.
        self._reports_lock = WriteLock(lock.path.with_name(REPORTS_LOCK_FILE_NAME) if lock.path else None)
        self._reporting = threading.local()  # report-sequence nesting depth, per thread
        self._logs_lock = LogsLock(lock.path.with_name(LOGS_LOCK_FILE_NAME) if lock.path else None)
        self._compaction_lock = WriteLock(
            lock.path.with_name(COMPACTION_LOCK_FILE_NAME) if lock.path else None
        )
        self._compactions_beside = CompactionsBeside()
        self._schema_version = int(meta["schema_version"])
        # The schema version this open upgraded the store from (None: it was current, or new).
        self.upgraded_from = int(meta[migrations.UPGRADED_FROM]) if migrations.UPGRADED_FROM in meta else None
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
        self._gathered = threading.local()
        self._behind = threading.local()
        self._exact = threading.local()
        self._appenders = appenders
        self._logs = WriteBehind(self._append_log)
        self._appends_since_maintenance = 0
        self._deleted_from = set()
        self._row_ids = RowIds(capacity=cache_total_rows)  # as many as the scope copies hold
        self._row_count = RowCount()
        self._superseded = SupersededVersions()
        self._optimize_seconds = {}
        self._optimize_took = {}
        self._cache = ScopeCache(
            self,
            dimension=self._vector_dim,
            max_scope_rows=cache_scope_rows,
            max_total_rows=cache_total_rows,
            analyzer=analyzer,
        )
        self._inserts = GroupCommit(self._insert_batch, retry=partial(self._insert_batch, retry=True))
        self._pending = PendingSupersedes()
        self._generations = generations
        self._memories_version = self._watch(self._memories, WRITES)
        self._feedback_version = self._watch(self._feedback, REPORTS)
        self._contradiction_snapshots = ScopeSnapshots(
            self._watch(self._contradictions, WRITES).current,
            self._read_open_contradictions,
            max_rows=SNAPSHOT_MAX_ROWS,
        )
        self._attestation_snapshots = ScopeSnapshots(
            self._watch(self._attestations, WRITES).current, self._scope_attesters, max_rows=SNAPSHOT_MAX_ROWS
        )

    def _watch(self, table: Any, generation: int) -> VersionWatch:
        """The version of ``table`` as readers take it: read again only when a write sequence on it ended
        (its lock's ``generation``), or always by the thread holding that lock."""
        holding = self._reads_writes_exactly if generation == WRITES else self._holds_reports_lock
        return VersionWatch(self._newest_version_of(table), self._generations, generation, holding)

    def _newest_version_of(self, table: Any) -> Callable[[], int]:
        """How a watch reads ``table``'s newest version for real: on a local store, from the names of its
        manifests (``storage.versions.NewestManifest``: the same version without a round trip through
        LanceDB's event loop, and without listing every version kept); elsewhere, or when the folder shows
        no manifest, from the table."""
        folder = local_folder(self._uri)
        # Absolute once: a relative store path must not follow a later change of working directory.
        manifests = NewestManifest(folder.absolute() / f"{table.name}.lance") if folder is not None else None

        def newest() -> int:
            if manifests is not None:
                looked_at = datetime.now(UTC)  # taken before asking, as a sighting's time must be
                found = manifests.read()
                if found is not None:
                    self._superseded.sighted(table.name, looked_at, found)
                    return found
            return int(table.version)

        return newest

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
        lancedb_query: Callable[[str], str] | None = None,
        index_cache_bytes: int = DEFAULT_INDEX_CACHE_BYTES,
        metadata_cache_bytes: int = DEFAULT_METADATA_CACHE_BYTES,
    ) -> MemoryStore:
        """Open (creating and migrating if needed) the store at ``uri``: a folder or any LanceDB URI.
        Scopes of up to ``cache_scope_rows`` memories are searched from an in-process copy (0: never),
        ``cache_total_rows`` memories in all; with an ``analyzer`` (text -> index terms) the copies answer
        full-text searches too (BM25), otherwise LanceDB's full-text index does, asked ``lancedb_query``'s
        rewrite of a query when one is given (the words the analyzer reads as one). Maintenance builds an
        ANN index over the vectors once the table holds ``vector_index_min_rows`` memories (0: never).
        LanceDB's caches of index data and of table metadata (manifests, fragment and deletion files: an
        entry per table version, so they grow with every commit) are held to ``index_cache_bytes`` and
        ``metadata_cache_bytes``.
        A local store whose newest manifest a crash of the machine left broken opens on the version
        before, with a WARNING (``storage.recovery``)."""
        local_path = local_folder(uri)
        if local_path is not None:
            _check_folder(uri, local_path)
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
        generations = _generations(lock.path)
        try:
            # Recovery and migrations rewrite tables: a write sequence, so that processes already serving
            # look at the tables again after it.
            counted = generations.sequence(WRITES) if generations is not None else nullcontext()
            with lock.hold(), counted:
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
                lancedb_query=lancedb_query,
                appenders=Appenders(append_db),
                generations=generations,
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

    def close(self) -> None:
        try:
            self._logs.close()
        finally:
            self._lock.close()
            self._reports_lock.close()
            self._compaction_lock.close()

    def unfinished_writes(self) -> UnfinishedWrites:
        """Where this process writes down the write work that must outlive a crash (``storage.unfinished``:
        credits handed on, consolidations owed; nothing on an object store)."""
        return UnfinishedWrites(local_folder(self._uri))

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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


def _generations(lock_path: Path | None) -> Generations | None:
    """The write generations of a local store, beside its lock file; None on an object store, or where the
    file cannot be opened for writing (a store read from a read-only folder: every read checks the table)."""
    if lock_path is None:
        return None
    try:
        return Generations(lock_path.with_name(GENERATIONS_FILE_NAME))
    except OSError as exc:
        log.warning(
            "cannot write %s (%s): this process reads every table version from the table, and other "
            "processes on this store may see its writes up to a second late; give this user write access "
            "to the store folder's files",
            lock_path.with_name(GENERATIONS_FILE_NAME),
            exc,
        )
        return None


def _check_folder(uri: str, folder: Path) -> None:
    """A ``StoreError`` that says what to do when ``folder`` cannot hold a store: a file there, or a folder
    this user may not write (the store's lock file is made there, even to read: ``storage.locking``)."""
    if folder.is_file():
        raise StoreError(
            f"the memory store {uri!r} (MEMORIA_DB_URI) is a file, not a folder: point MEMORIA_DB_URI at a "
            "folder (it is made if missing)"
        )
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
        try:
            who = f"user {getpass.getuser()}"
        except Exception:  # no name for this uid (a container's user with no passwd entry)
            who = f"uid {os.getuid()}" if hasattr(os, "getuid") else "this user"
        raise StoreError(
            f"the memory store folder {str(folder)!r} (MEMORIA_DB_URI) is not writable by {who}, and memoria "
            "writes its lock files there even to read: give this user write access to it (chmod u+w, or "
            "chown), or copy the folder somewhere writable and point MEMORIA_DB_URI at the copy (a "
            "read-only backup: copy it, then `memoria export` from the copy)"
        )


def _recover(local_path: Path) -> None:
    """Set aside newest manifests a crash of the machine left broken (``storage.recovery``), before any
    table is opened. The caller holds the write lock, so two servers starting together do not both move
    the same file; a running server's commit is renamed into place whole, so it never looks broken."""
    try:
        recovery.recover_store(local_path)
    except recovery.UnrecoverableTable as exc:
        raise StoreError(f"could not open the memory store at {str(local_path)!r}: {exc}") from exc
