"""Upkeep of the tables: compaction, index updates and the clean-up of old versions in maintenance rounds,
and the vector index built once the memories table is big enough."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from lancedb.index import IvfHnswSq

from storage import schema
from storage.locking import is_retryable, retrying
from storage.manifests import Manifests
from storage.tables import StoreTables, local_folder
from storage.versions import (
    KEEP_EVERY_VERSION,
    SupersededVersions,
    clean_up_clock_at_most,
    kept_before,
    newest_on_disk,
)

VECTOR_INDEX = "vector_idx"

# Tables written under the reports' lock (``reporting()``).
REPORT_TABLES = (schema.OUTCOMES, schema.FEEDBACK, schema.WEIGHT_EVENTS)
# The clean-up margin before a table's first optimize was timed (compacting 50,000 memories took 0.41 s).
FIRST_OPTIMIZE_MARGIN = timedelta(seconds=30)
# The optimizes whose times before the clean-up the margin takes the longest of.
MARGIN_ROUNDS = 8
# Compactions of a table beside the writes a round tries before the one under the write lock, when one
# raised a conflict: an update in flight as it began (a status change behind the calls that had the lock
# already, a caller's own update) preempts it, and work behind the calls waits through both attempts.
ATTEMPTS_BESIDE_WRITES = 2
# A compaction beside the writes that Lance gave up committing (each retry of its commit slower than the gap
# between two appends: 20 retries, or 30 s) is not tried beside them again: it lost to the appends
# themselves, and a second try would lose the same way while versions pile up. One that an update
# preempted (a conflict Lance does not retry) is tried once more.
GAVE_UP = ("failed to commit the transaction after", "too many concurrent writers")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableFiles:
    """The data files and version manifests a local table's folder held when listed."""

    data: frozenset[str]
    versions: frozenset[str]

    @classmethod
    def listed(cls, table: Path) -> TableFiles:
        """The versions are listed before the data files: a data file missing from this listing was
        written after every version in it was committed, so only a version missing from it can name that
        file (a version is committed after the files it names)."""
        versions = frozenset(_names(table / "_versions"))  # first
        return cls(data=frozenset(_names(table / "data")), versions=versions)


def _names(folder: Path) -> list[str]:
    try:
        return [entry.name for entry in os.scandir(folder)]
    except FileNotFoundError:
        return []


def files_left_since(table: Path, before: TableFiles, *, every_version: bool = True) -> list[str]:
    """Data files of a local table written since the listing ``before`` that no version of it names: what
    a compaction that could not commit some of its groups left behind (or a write not yet committed).
    Only the versions committed since that listing are read, the only ones that can name such a file
    (``TableFiles.listed``); without ``every_version``, only the newest of them (what most files are
    named in). A busy table keeps hundreds of versions, each manifest carrying every row's versions (690
    KB each at 10,000 memories): reading them all took 6% of the interpreter's time under steady
    writes, under the write lock. A file or version gone meanwhile is skipped."""
    recent = []
    for name in _names(table / "data"):
        if name not in before.data and (table / "data" / name).is_file():
            recent.append(name)
    if not recent:
        return []
    manifests = Manifests(table, newest=None if every_version else 1, leaving_out=before.versions)
    return sorted(name for name in recent if not manifests.name(name))


def fragment_count(table: Any) -> int:
    return int(table.stats()["fragment_stats"]["num_fragments"])


class Upkeep(StoreTables):
    """Maintenance rounds over every table, and the vector index."""

    _vector_index_min_rows: int
    _superseded: SupersededVersions  # the maintenance rounds' sightings of each newest version
    # Per table, at most how long each of its last optimizes took to read the clean-up's clock: the margin's
    # base (``MARGIN_ROUNDS`` of them).
    _optimize_seconds: dict[str, list[float]]
    # Each table's last optimize, whole (``benchmarks.maintenance`` reads it).
    _optimize_took: dict[str, float]

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
        ago. A table rows were deleted from (the journal's expiry) is compacted however few its fragments:
        a compaction rewrites the files that hold them. Returns what it did per table."""
        self._appends_since_maintenance = 0
        self._logs.flush()
        report: dict[str, str] = {}
        for name, table in self.tables().items():
            if keep_replaced_for is not None:
                looked_at = datetime.now(UTC)  # taken before asking for the newest version
                self._superseded.observe(name, looked_at, int(table.version))
            fragments = fragment_count(table)
            unindexed = sum(index.num_unindexed_rows or 0 for index in table.list_indices())
            if fragments < min_fragments and unindexed < 1_000 and name not in self._deleted_from:
                continue
            optimize = partial(self._optimize, name, table, keep_versions_for, keep_replaced_for)
            if name in (schema.RETRIEVALS, schema.AB_LOGS):
                # The logs are appended by the write-behind thread without the write lock, in a batch
                # every 0.2 s: a compaction commits between those like any write. It holds the logs
                # lock (shared), so that no write of these tables is in flight while a purge clears
                # the files interrupted writes left (``storage.forgetting``).
                with self._logs_lock.shared():
                    retrying(optimize)
            elif name in REPORT_TABLES:
                # Reports write these under the reports' lock (their weights go to the memories table, under
                # the write lock), as an import does, holding both: the reports' lock alone keeps a merge
                # and the compaction from colliding. Under the write lock too, every remember waited for
                # it (12 holds in 50 s of benchmarks.load, 90 ms each).
                with self.reporting():
                    retrying(optimize)
            else:
                self._optimize_beside_writes(name, table, optimize, fragments, min_fragments)
            self._deleted_from.discard(name)
            after = fragment_count(table)
            report[name] = (
                f"compacted {fragments} -> {after} fragments; folded {unindexed} row-index entries into indexes"
            )
        built = self._index_vectors()
        if built:
            report[f"{schema.MEMORIES} vectors"] = built
        return report

    def sight_versions(self, keep_replaced_for: timedelta) -> None:
        """Between maintenance rounds, note each local table's newest version, read from its manifests'
        names (``newest_on_disk``, one listing each; an object store's tables only at the rounds, where it
        costs a request). A cut-off falls at the last sighting of an older version before the one that
        settled (``SupersededVersions``): seen only at the rounds, a version was kept up to two rounds
        longer than ``keep_replaced_for``, and a round's clean-up reads every manifest kept. Spaced by a
        sixteenth of that time, at least a second (the maintenance thread looks every second)."""
        folder = local_folder(self.uri)
        if folder is None:
            return
        spacing = max(timedelta(seconds=1), keep_replaced_for / 16)
        self._superseded.spacing = spacing  # the version checks' sightings from now on (``sighted``)
        for name in self.tables():
            looked_at = datetime.now(UTC)  # taken before asking for the newest version
            newest = newest_on_disk(folder / f"{name}.lance")
            if newest is not None:
                self._superseded.observe(name, looked_at, newest, spacing=spacing)

    def _optimize_beside_writes(
        self, name: str, table: Any, optimize: Callable[..., None], fragments: int, min_fragments: int
    ) -> None:
        """The memories' (and the other write-locked tables') optimize: first without the write lock; under
        it when that compaction lost to the writes that landed meanwhile.

        A compaction changes no memory, so nothing a write reads and then writes under the lock goes stale
        because of it, and LanceDB rebases its commit over the appends committed while it ran. Under the
        write lock every remember waited for it: 0.2-1.0 s at 10,000 memories, every few seconds on a busy
        server (``benchmarks.load --rate 25``: remember p95 0.30-1.47 s in five runs with the lock,
        0.15-0.29 s in three without it, with the reads in their lane; docs/benchmarks.md).

        An update of a row it rewrote (a status change, a weight) preempts its commit: LanceDB then logs
        "Compaction commit failed" and leaves the table as it was, or (after its own retries) raises.
        Work behind the calls (the supersedes committed after a remember answered) waits for the memories'
        compaction first (``CompactionsBeside``); a caller's update, or one that had the lock as it began,
        still preempts it. A compaction that raised a conflict is tried once more beside the writes
        (``ATTEMPTS_BESIDE_WRITES``), unless Lance gave up its commit after its own retries (``GAVE_UP``:
        10,000 writes one at a time on a busy machine, 26-33 s each, the versions piling up meanwhile, and
        the round under the lock after them took 23-26 s); when that loses too, or one only logged its loss,
        the table has as
        many fragments as before (or more: appends went on), and the
        compaction runs under the write lock, where no write lands in between (under steady writes
        a compaction beside them could otherwise lose round after round while appends slow down). That run
        also deletes the files the lost one left, for the memories table of a local store; the other
        tables' wait for LanceDB's clean-up. A purge holds the compaction lock from start to end, so it
        finds no compaction in flight.

        A compaction rewrites the fragments in groups, and LanceDB commits the groups no write touched and
        leaves the rewritten files of the others ("leaving 1 rewritten fragment(s) in place for GC"): the
        table then has fewer fragments, as after a whole compaction. So for the memories table of a local
        store the round also looks for data files written while it ran that no version names
        (``files_left_since``, under the compaction lock, so that no purge deletes files meanwhile; against
        the newest version only, one manifest read), and deletes them under the write lock, after looking
        again there against every version committed since the round listed the table's folder: a file of
        an append that was still committing is named by then, in the newest, and stays (it costs that
        short hold of the write lock, and the versions committed meanwhile, not all those kept)."""
        folder = local_folder(self.uri) if name == schema.MEMORIES and self.excludes_other_processes else None
        table_dir = folder / f"{name}.lance" if folder is not None else None
        left: list[str] = []
        outcome = "lost"  # every attempt raised a conflict
        # Not while a purge runs (``Forgetting._finish_purge``), through both attempts. Work behind the calls
        # waits while this runs, both attempts included, once the lock is held (only for the memories':
        # their status changes and weights are the updates that preempt it).
        gate = self._compactions_beside.running() if name == schema.MEMORIES else nullcontext()
        with self._compaction_lock.hold(), gate:
            # Listed before the first attempt: what the attempts write is not in it.
            local = (table_dir, TableFiles.listed(table_dir)) if table_dir is not None else None
            for attempt in range(1, ATTEMPTS_BESIDE_WRITES + 1):
                try:
                    optimize()
                    if local is not None:  # under the lock: no purge deletes files meanwhile
                        left = files_left_since(*local, every_version=False)
                except Exception as exc:
                    if not is_retryable(exc):
                        raise
                    gave_up = any(marker in str(exc).lower() for marker in GAVE_UP)
                    log.info(
                        "compacting %s beside the writes lost to them (attempt %d of %d%s): %s",
                        name,
                        attempt,
                        ATTEMPTS_BESIDE_WRITES,
                        ", to the appends: next under the write lock" if gave_up else "",
                        exc,
                    )
                    if gave_up:
                        break
                    continue
                # Appends that landed meanwhile add fragments; a compaction that committed took away more.
                done = fragments < min_fragments or fragment_count(table) < fragments
                outcome = "done" if done else "preempted"
                break
        if outcome == "done":
            if local is not None and left:  # the lost attempts' files too
                self._clear_left_files(name, *local)
            return
        if outcome == "preempted":
            log.info("compacting %s beside the writes left its fragments: another write preempted it", name)
        # In a purge's order. On a local store no write of the memories table is in flight in any process
        # now (each holds the write lock), so the files the preempted compaction left can go: LanceDB keeps
        # such files a week, and a busy server would keep a week of them.
        clear = name == schema.MEMORIES and self.excludes_other_processes
        with self.exclusive(), self._compaction_lock.hold():
            retrying(partial(optimize, delete_unverified=clear))

    def _clear_left_files(self, name: str, table_dir: Path, before: TableFiles) -> None:
        """Delete the data files a compaction beside the writes left and no version names. Looked for
        again under the write lock, where no write of the table is in flight in any process: a file of an
        append that was still committing is named by then and stays."""
        with self.exclusive(), self._compaction_lock.hold():
            left = files_left_since(table_dir, before)
            for file_name in left:
                (table_dir / "data" / file_name).unlink(missing_ok=True)
        if left:
            log.info(
                "compacting %s beside the writes left %d file(s) no version names: deleted", name, len(left)
            )

    def _optimize(
        self,
        name: str,
        table: Any,
        keep_versions_for: timedelta,
        keep_replaced_for: timedelta | None,
        *,
        delete_unverified: bool = False,
    ) -> None:
        """One table's compaction, index update and clean-up, in one call. With ``keep_replaced_for`` the
        clean-up's cut-off (``storage.versions``) is worked out just before the call; LanceDB reads its
        clock after the compaction, so the cut-off carries a margin: a second plus twice the longest of this
        table's last ``MARGIN_ROUNDS`` times before the clean-up read its clock (``clean_up_clock_at_most``: a
        round that compacted little says little of the next whole-table rewrite; one that dropped nothing
        leaves the margin as it was), or
        ``FIRST_OPTIMIZE_MARGIN`` before one was timed. (A second call for the clean-up alone
        measured two more versions a round: it updates the indexes again.) No cut-off known yet: nothing
        is dropped. ``delete_unverified``: also the files no version names, however new (only when no
        write is in flight)."""
        cleanup_older_than = keep_versions_for
        if keep_replaced_for is not None:
            timed = self._optimize_seconds.get(name)
            margin = FIRST_OPTIMIZE_MARGIN if not timed else timedelta(seconds=1 + 2 * max(timed))
            cut = self._superseded.cleanup_older_than(name, datetime.now(UTC), keep_replaced_for, margin)
            cleanup_older_than = cut if cut is not None else KEEP_EVERY_VERSION
        folder = local_folder(self.uri)
        table_dir = folder / f"{name}.lance" if folder is not None else None
        before = kept_before(table_dir) if table_dir is not None else None
        called_at, started = time.time(), time.perf_counter()
        table.optimize(cleanup_older_than=cleanup_older_than, delete_unverified=delete_unverified)
        took = time.perf_counter() - started
        before_clean_up = (
            took
            if table_dir is None
            else clean_up_clock_at_most(table_dir, called_at, before, cleanup_older_than, took)
        )
        self._optimize_took[name] = took
        timed = self._optimize_seconds.setdefault(name, [])
        if before_clean_up is None:  # it dropped nothing: the margin stays as it was, once there is one
            if timed:
                return
            before_clean_up = took
        timed.append(before_clean_up)
        del timed[:-MARGIN_ROUNDS]

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
        with self._compaction_lock.hold():  # not beside a purge, which must find no index build in flight
            retrying(
                lambda: self._memories.create_index(
                    "vector", config=IvfHnswSq(distance_type="cosine"), name=VECTOR_INDEX, replace=False
                )
            )
        return f"built the vector index (IVF_HNSW_SQ, cosine) over {rows:,} rows in {time.perf_counter() - started:.1f} s"
