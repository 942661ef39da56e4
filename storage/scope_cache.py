"""An in-process copy of the memories of the scopes a server is using: records, vectors and the masks a
vector search needs, so a recall's vector leg is one matrix product instead of a LanceDB query, and the
reads around it (records by id, episode members, stored vectors) are dictionary lookups.

Kept correct under writes from any process: before every read the cache compares the table's version
with the one it reflects (one manifest check) and, when another write happened, reads only the rows
whose ``_row_last_updated_at_version`` is newer (the memories table has stable row ids for this).
Memories are never deleted (a purge blanks a row), so updates and inserts are all there is to apply.
Those rows are read with the copies' lock free, so other recalls go on reading the copies meanwhile; the
lock is taken alone only to put them in, and this process's writes committed during the read are applied
after them (``_caught_up_beside_reads``).

Scopes larger than ``max_scope_rows`` are not copied (their searches go to LanceDB and its indexes). The
copies together hold at most ``max_total_rows``: a new copy that does not fit displaces only copies idle for
``IDLE_SECONDS``; if that is not enough it serves the read that built it and is not kept, and the scope is
not copied again for ``IDLE_SECONDS`` (so scopes in turn never evict each other on every request). When
writes make the copies outgrow the budget, the least recently used go.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from storage.lexical_index import Analyzer, LexicalIndex
from storage.records import EpisodeRecord, Scope
from storage.scope_copy import Row, ScopeCopy
from storage.shared_lock import SharedLock

IDLE_SECONDS = 300.0


class CacheReader(Protocol):
    """How the cache reads the memories table (``storage.store.MemoryStore`` provides it)."""

    def latest_version(self) -> int: ...

    def scope_size_above(self, scope: Scope, limit: int) -> bool: ...

    def scope_rows(self, scope: Scope) -> Iterable[Row]: ...

    def rows_changed_since(self, version: int, scopes: Sequence[Scope]) -> Iterable[Row]: ...

    def scope_episodes(self, scope: Scope) -> Iterable[EpisodeRecord]: ...


@dataclass(frozen=True)
class _Write:
    """This process's write of the memories table from version ``before`` to the next (``advance``)."""

    before: int
    inserted: Sequence[Row]
    updated: Mapping[str, Mapping[str, Any]]
    vectors: Mapping[str, np.ndarray | None]
    texts: Mapping[str, str]
    episodes: Sequence[EpisodeRecord]


class ScopeCache:
    """Scope copies for one memories table. ``reader`` is how the cache reads the table (the store); with
    an ``analyzer`` (text -> index terms) the copies also answer full-text searches, by BM25."""

    def __init__(
        self,
        reader: CacheReader,
        *,
        dimension: int,
        max_scope_rows: int,
        max_total_rows: int,
        analyzer: Analyzer | None = None,
    ) -> None:
        self._reader = reader
        self._analyzer = analyzer
        self._dimension = dimension
        self._max_scope_rows = max_scope_rows
        self._max_total_rows = max_total_rows
        self._copies: OrderedDict[Scope, ScopeCopy] = OrderedDict()
        self._used: dict[Scope, float] = {}  # when each copy was last read
        self._refused: dict[Scope, float] = {}  # scopes whose copy did not fit, and when
        self._clock = time.monotonic
        self._too_big: set[Scope] = set()  # scopes only grow (rows are never deleted): once too big, always
        self._version: int | None = None
        # Readers share it; applying writes, catching up and building copies take it alone.
        self._lock = SharedLock()
        self._touching = threading.Lock()  # the recency bookkeeping readers update while they share it
        self._catching = threading.Lock()  # one catch-up beside the reads at a time
        # While a catch-up beside the reads reads: this process's writes it is to apply after its rows
        # (``advance`` finds the copies behind meanwhile). None when none is reading.
        self._handed: list[_Write] | None = None
        self._pin = threading.local()  # one_version(): depth, and whether the version was checked
        self.loads = 0  # scope copies built from a full read (tests and the benchmark read these)
        self.deltas = 0  # catch-ups that read only the changed rows

    @property
    def enabled(self) -> bool:
        return self._max_scope_rows > 0 and self._max_total_rows > 0

    @property
    def searches_text(self) -> bool:
        """Whether the copies answer full-text searches (they were given an analyzer)."""
        return self.enabled and self._analyzer is not None

    def _read_copy(self, scope: Scope) -> ScopeCopy:
        """A new copy of ``scope``: its rows, then its episodes (read after them, so at least as new)."""
        lexical = LexicalIndex(self._analyzer) if self._analyzer is not None else None
        copy = ScopeCopy(self._dimension, lexical=lexical)
        copy.load(self._reader.scope_rows(scope))
        copy.load_episodes(self._reader.scope_episodes(scope))
        return copy

    def holds_everything(self, rows: int) -> bool:
        """Whether a table of ``rows`` memories fits in the copies with no scope known to be too big:
        then every vector search is answered here and a LanceDB vector index would go unused."""
        with self._lock.read():
            return self.enabled and rows <= self._max_total_rows and not self._too_big

    def holds(self, scope: Scope) -> bool:
        """Whether ``scope`` has a copy now."""
        with self._lock.read():
            return scope in self._copies

    def serves(self, scope: Scope) -> bool:
        """Whether reads of ``scope`` may come from a copy (it is not known to be too big)."""
        return self.enabled and scope not in self._too_big

    @contextmanager
    def reading(self, scope: Scope, *, build: bool = True) -> Iterator[ScopeCopy | None]:
        """The up-to-date copy of ``scope`` (built if the scope is small enough and ``build``), or None;
        the copy may be read only inside the block, never changed (reads of other threads go on beside
        it; writes wait until it ends)."""
        if not self.enabled:
            yield None
            return
        version = self._observed_version()
        nested = self._lock.reads_here()  # inside another read: within its snapshot, never catching up
        served = False
        for look in ("as it is", "after a catch-up beside the reads"):
            with self._lock.read():
                current, copy = self._readable(scope, version, build=build)
                if current or nested:
                    served = True
                    yield copy
            if served:
                return
            if look == "as it is" and (copy is None or not self._caught_up_beside_reads(version)):
                break  # a copy to build, or the catch-up beside the reads did not apply: under the lock
        with self._lock.write():  # catch up with the table, or build the copy
            copy = self._copy_of(scope, build=build, version=version)
        with self._lock.read():  # a write applied meanwhile waits for this read; the copy only gets newer
            yield copy

    def _readable(self, scope: Scope, version: int | None, *, build: bool) -> tuple[bool, ScopeCopy | None]:
        """(whether this read needs nothing caught up or built, the copy of ``scope``), under the shared
        lock. A scope with no copy that this read will not build needs no catch-up either."""
        copy = self._copies.get(scope)
        if copy is None:
            refused = self._clock() - self._refused.get(scope, -np.inf) < IDLE_SECONDS
            return not build or scope in self._too_big or refused, None
        with self._touching:
            if scope in self._copies:
                self._copies.move_to_end(scope)
            self._used[scope] = self._clock()
        return version is None or (self._version is not None and version <= self._version), copy

    @contextmanager
    def updating(self, scope: Scope) -> Iterator[ScopeCopy | None]:
        """The copy of ``scope`` as it is (None: none), to change inside the block, with the copies to
        this thread alone (episodes read again are applied this way)."""
        with self._lock.write():
            yield self._copies.get(scope) if self.enabled else None

    def warm(self, scopes: Iterable[Scope]) -> int:
        """Build copies of ``scopes`` before their first read (a background thread calls this at start-up,
        so no request pays for a copy's first build), until the total budget is used; returns how many
        were built. Rows are read outside the lock, so requests go on meanwhile, and what was committed
        during the read is applied under it. Warmed copies go to the least recently used end."""
        built = 0
        for scope in scopes:
            with self._lock.read():  # (every insert asks: its scope almost always has its copy already)
                if not self.enabled or scope in self._copies or scope in self._too_big:
                    continue
                if sum(len(copy) for copy in self._copies.values()) >= self._max_total_rows:
                    break
            if self._reader.scope_size_above(scope, self._max_scope_rows):
                with self._lock.write():
                    self._too_big.add(scope)
                continue
            read_at = self._reader.latest_version()
            copy = self._read_copy(scope)
            with self._lock.write():
                if scope in self._copies:
                    continue
                self._catch_up()
                if self._version is not None and read_at < self._version:
                    for record, vector, text in self._reader.rows_changed_since(read_at, [scope]):
                        copy.put(record, vector, text)
                self._copies[scope] = copy
                self._copies.move_to_end(scope, last=False)
                self.loads += 1
                built += 1
        return built

    @contextmanager
    def one_version(self) -> Iterator[None]:
        """Reads by this thread inside the block check the table's version once: one request, one
        consistent snapshot, one manifest check (a recall reads several times)."""
        self._pin.depth = getattr(self._pin, "depth", 0) + 1
        try:
            yield
        finally:
            self._pin.depth -= 1
            if self._pin.depth == 0:
                self._pin.checked = False

    def recheck(self) -> None:
        """The next read by this thread checks the table's version, even inside ``one_version()``."""
        self._pin.checked = False

    def _copy_of(self, scope: Scope, *, build: bool = True, version: int | None = None) -> ScopeCopy | None:
        self._catch_up(version)
        now = self._clock()
        copy = self._copies.get(scope)
        if copy is not None:
            self._copies.move_to_end(scope)
            self._used[scope] = now
            return copy
        if not build or scope in self._too_big or now - self._refused.get(scope, -np.inf) < IDLE_SECONDS:
            return None
        if self._reader.scope_size_above(scope, self._max_scope_rows):
            self._too_big.add(scope)
            return None
        copy = self._read_copy(scope)
        self.loads += 1
        total = sum(len(kept) for kept in self._copies.values())
        displaced: list[Scope] = []  # idle copies, least recently used first, until the new one fits
        for idle in [s for s in self._copies if now - self._used.get(s, -np.inf) >= IDLE_SECONDS]:
            if total + len(copy) <= self._max_total_rows:
                break
            displaced.append(idle)
            total -= len(self._copies[idle])
        if total + len(copy) > self._max_total_rows and len(displaced) < len(self._copies):
            self._refused = {s: t for s, t in self._refused.items() if now - t < IDLE_SECONDS}
            self._refused[scope] = now  # serves this read only; the idle copies stay
            return copy
        for idle in displaced:
            del self._copies[idle]
            self._used.pop(idle, None)
        self._refused.pop(scope, None)
        self._copies[scope] = copy
        self._used[scope] = now
        return copy

    def advance(
        self,
        before: int,
        after: int,
        *,
        inserted: Sequence[Row] = (),
        updated: Mapping[str, Mapping[str, Any]] | None = None,
        vectors: Mapping[str, np.ndarray | None] | None = None,
        texts: Mapping[str, str] | None = None,
        episodes: Sequence[EpisodeRecord] = (),
    ) -> None:
        """This process wrote the memories table (``before`` -> ``after``): when that write was the only
        commit since the cache caught up, apply it here and skip reading it back. ``updated`` maps ids to
        the record fields a merge set, ``vectors`` and ``texts`` to the vectors and search texts it set;
        ``episodes`` are the episodes the write created just before (as written), so that its memories
        do not leave them stale for the next read to fetch from the table (after a bulk write, every
        recall did, one episode read each)."""
        write = _Write(before, inserted, updated or {}, vectors or {}, texts or {}, episodes)
        with self._lock.write():
            if self._version is None or self._version != before or after != before + 1:
                if self._handed is not None and after == before + 1:
                    self._handed.append(write)  # a catch-up beside the reads applies it after its rows
                return  # else someone else committed too: the next read catches up from the table
            self._apply_write(write)
            self._evict()

    def _apply_write(self, write: _Write) -> None:
        """Under the lock alone: this process's write (``advance``) put into the copies, which are then at
        the version it made."""
        for record, vector, text in write.inserted:
            copy = self._copies.get(record.scope)
            if copy is not None:
                copy.put(record, vector, text)
        for episode in write.episodes:  # after the puts: as written with these memories, titles included
            copy = self._copies.get(Scope(episode.org_id, episode.project_id))
            if copy is not None:
                copy.load_episodes([episode])
        for memory_id, columns in write.updated.items():
            for copy in self._copies.values():
                cached = copy.records.get(memory_id)
                if cached is not None:
                    vector = write.vectors.get(memory_id, copy.vector_of(memory_id))
                    copy.put(replace(cached, **columns), vector, write.texts.get(memory_id))
        self._version = write.before + 1

    def _observed_version(self) -> int | None:
        """The table's version for this read: None when this thread's request already checked it
        (``one_version``). Checks run outside ``_lock``; the reader shares them between threads
        (``storage.generations.VersionWatch``: one manifest read after a write sequence ends serves every
        recall in flight, and the thread holding the write lock always reads its own)."""
        pinned = getattr(self._pin, "depth", 0) > 0
        if pinned and getattr(self._pin, "checked", False):
            return None
        version = self._reader.latest_version()
        self._pin.checked = pinned
        return version

    def _caught_up_beside_reads(self, version: int | None) -> bool:
        """Bring the copies to ``version`` reading the changed rows with the copies' lock free, then taking
        it alone only to apply them; whether the copies are at ``version`` now. A catch-up's read is a
        LanceDB scan (tens of ms under load): under the lock, every recall and every write's apply waited
        for it. One catch-up at a time: the others wait here and find it done. When a write was applied
        or a copy built meanwhile (its rows are newer than what was read, or its scope was not read): nothing
        is applied (False), and the catch-up under the lock reads again. This process's writes committed
        meanwhile (``advance``, which finds the copies behind) are handed to it and applied after its rows
        when they follow on from ``version``, as ``advance`` would have once the catch-up was done."""
        if version is None:
            return False
        with self._catching:
            with self._lock.read():
                base = self._version
                scopes = set(self._copies)
            if base is not None and version <= base:
                return True  # another reader caught up meanwhile
            if base is None or not scopes:
                return False
            self._handed = []
            try:
                changed = self._reader.rows_changed_since(base, list(scopes))
                with self._lock.write():
                    handed, self._handed = self._handed, None
                    if self._version != base or not set(self._copies) <= scopes:
                        return False
                    self._apply_changed(changed)
                    self._version = version
                    for write in sorted(handed, key=lambda write: write.before):
                        if write.before == self._version:
                            self._apply_write(write)
                    self._evict()  # once, after the rows and the writes handed on
            finally:
                self._handed = None
        return True

    def _apply_changed(self, changed: Iterable[Row]) -> None:
        """Rows read from the table since the copies' version, put into the copies of their scopes."""
        for record, vector, text in changed:
            copy = self._copies.get(record.scope)
            if copy is not None:
                copy.put(record, vector, text)
        self.deltas += 1

    def _catch_up(self, version: int | None = None) -> None:
        """Bring the copies to ``version`` (the table's, checked by the caller; None: check it now
        unless this thread's request already did)."""
        if version is None:
            version = self._observed_version()
            if version is None:  # this request checked already
                if self._version is not None:
                    return
                # Never caught up (a copy warmed inside a request that had checked): the version now,
                # else a copy read before a later commit would be marked caught up with it unread.
                version = self._reader.latest_version()
        if self._version is not None and version <= self._version:
            return
        if self._version is not None and self._copies:
            self._apply_changed(self._reader.rows_changed_since(self._version, list(self._copies)))
            self._evict()
        self._version = version

    def _evict(self) -> None:
        """Drop copies that grew past the scope limit (for good: scopes only grow), then the least
        recently used ones until the rest fit the total."""
        oversized = [scope for scope, copy in self._copies.items() if len(copy) > self._max_scope_rows]
        for scope in oversized:
            del self._copies[scope]
            self._used.pop(scope, None)
            self._too_big.add(scope)
        while len(self._copies) > 1 and sum(len(c) for c in self._copies.values()) > self._max_total_rows:
            evicted, _ = self._copies.popitem(last=False)
            self._used.pop(evicted, None)
