"""Upkeep of the tables: compaction, index updates and the clean-up of old versions in maintenance rounds,
and the vector index built once the memories table is big enough."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from lancedb.index import IvfHnswSq

from storage import schema
from storage.locking import retrying
from storage.tables import StoreTables
from storage.versions import SupersededVersions

VECTOR_INDEX = "vector_idx"

# Tables written under the reports' lock (``reporting()``).
REPORT_TABLES = (schema.OUTCOMES, schema.FEEDBACK, schema.WEIGHT_EVENTS)
# A clean-up threshold no version reaches: an optimize that compacts and drops nothing (LanceDB's own
# default, a week, would drop by age a version a read may still be on).
KEEP_EVERY_VERSION = timedelta(days=36_500)
# The clean-up margin before a table's first optimize was timed (compacting 50,000 memories took 0.41 s).
FIRST_OPTIMIZE_MARGIN = timedelta(seconds=30)


class Upkeep(StoreTables):
    """Maintenance rounds over every table, and the vector index."""

    _vector_index_min_rows: int
    _superseded: SupersededVersions  # the maintenance rounds' sightings of each newest version
    _optimize_seconds: dict[str, float]  # each table's last optimize, for the clean-up margin

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
                # The logs are appended by the write-behind thread without the write lock, in a batch
                # every 0.2 s: a compaction commits between those like any write. It holds the logs
                # lock (shared), so that no write of these tables is in flight while a purge clears
                # the files interrupted writes left (``storage.forgetting``).
                with self._logs_lock.shared():
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
