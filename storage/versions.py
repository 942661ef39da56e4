"""When each table's versions stopped being its newest: what maintenance may drop without breaking a read.

Every commit is a table version, and finding a table's newest version lists every version kept, so a busy
server has to drop them soon (kept a minute by age, 2,400-3,600 piled up at 40 writes a second and every append
and freshness check slowed with them). But a read works on the version that was newest when it began: drop
that version's files under it and the read fails. LanceDB drops by age ("versions committed before T"), and
a version's age says nothing about how long ago it was replaced: a table idle for an hour has a version an
hour old that is still the newest, until the next commit replaces it.

So each maintenance round notes, per table, the time it looked and the newest version it saw (and, on a
local store, the maintenance thread between rounds, every second at most: ``Upkeep.sight_versions``, and
every version check of a table's manifests, as far apart: ``SupersededVersions.sighted``, so that a round
that takes long does not leave the next one without a recent sighting). A
version numbered below the newest seen at a sighting at least ``keep`` ago was replaced at least ``keep``
ago, and only versions committed before the last sighting of an older newest one are certainly of that
sort. That time is the cut-off. LanceDB measures "older than" when it gets to the clean-up, after the
compaction of the same call, so the cut-off is moved earlier by a ``margin`` meant to be longer than that
compaction takes (``MemoryStore._optimize``: a second plus twice how long the table's last optimize took
to read the clean-up's clock, at most: ``clean_up_clock_at_most``, which dates it on a local store by the
oldest version that clean-up kept, left as it was by a round that dropped nothing; the whole call
elsewhere). A read that takes less than ``keep`` never
loses its version, in this process or another (the newest version at a given moment is the same for every
process), except to a purge, which drops every older version at once by design
(``MemoryStore.purge``). Nothing is dropped before two sightings settled a cut-off, and the first optimize
that uses one has a margin of ``FIRST_OPTIMIZE_MARGIN``.

The margin once was twice the whole last optimize, and a clean-up reads every manifest kept (each listing
every fragment the appends left since the last compaction): under steady writes the versions kept made
the optimize longer, the longer optimize a wider margin, the wider margin more versions kept, and
(in process, 2,400 memories written one at a time) a round took 3.8 s and kept 2,400 versions.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from storage.recovery import MANIFEST_SUFFIX, U64_MAX, V2_NAME_DIGITS, VERSION_HINT, VERSIONS_DIR, version_of

MAX_SIGHTINGS = 64
# How late a manifest may have been written after the time its file is dated with: file systems that date
# to the second (or two: FAT) cut the rest off; the others date to the kernel's clock tick.
COARSE_FILE_CLOCK_SECONDS = 2.0
FINE_FILE_CLOCK_SECONDS = 0.05
V2_MANIFEST_NAME_LENGTH = V2_NAME_DIGITS + len(MANIFEST_SUFFIX)


def newest_on_disk(table_dir: Path) -> int | None:
    """The newest version of the local table at ``table_dir`` (``<name>.lance``), from the file names of
    its manifests; None when it has no ``_versions`` folder or no manifest there (then ask the table).

    A commit is the manifest's file appearing under its final name (Lance writes it elsewhere, then
    links or renames it into place), so the newest name is the newest version any process committed.
    That is the version ``Table.version`` answers on a local store, without its round trip through
    LanceDB's event loop: one listing in the calling thread, a quarter of the cost alone. Beside threads running
    Python it costs the same as the round trip (``benchmarks/lancedb_round_trips.py``): the listing lets
    go of the interpreter lock for every entry it reads."""
    try:
        names = os.listdir(table_dir / VERSIONS_DIR)
    except OSError:
        return None
    # V2 names (``u64::MAX - version``, 20 digits) sort newest first: the smallest such name is the newest.
    v2 = min(
        (name for name in names if len(name) == V2_MANIFEST_NAME_LENGTH and name.endswith(MANIFEST_SUFFIX)),
        default=None,
    )
    if v2 is not None and (newest := version_of(v2)) is not None:
        return newest
    return max(
        (
            version
            for name in names
            if name.endswith(MANIFEST_SUFFIX) and (version := version_of(name)) is not None
        ),
        default=None,
    )


# A clean-up threshold no version reaches: an optimize that compacts and drops nothing (LanceDB's own
# default, a week, would drop by age a version a read may still be on).
KEEP_EVERY_VERSION = timedelta(days=36_500)


def kept_before(table_dir: Path) -> tuple[int, int] | None:
    """The oldest and the newest version the local table at ``table_dir`` keeps (one listing), or None
    when it has none."""
    try:
        names = os.listdir(table_dir / VERSIONS_DIR)
    except OSError:
        return None
    versions = [version for name in names if (version := version_of(name)) is not None]
    return (min(versions), max(versions)) if versions else None


def oldest_kept(table_dir: Path) -> tuple[int, float] | None:
    """The oldest version the local table at ``table_dir`` keeps and when its manifest was written at the
    latest (the file's modification time, seconds since the epoch, and what the file system's dating may
    have cut off); None when it has none, or it went meanwhile."""
    kept = kept_before(table_dir)
    if kept is None:
        return None
    oldest = kept[0]
    written = _written_ns(table_dir, oldest)
    if written is None:
        return None
    # A file system that dates files to the second (or coarser) may date one up to that much early.
    slack = COARSE_FILE_CLOCK_SECONDS if written % 1_000_000_000 == 0 else FINE_FILE_CLOCK_SECONDS
    return oldest, written / 1e9 + slack


def _written_ns(table_dir: Path, version: int) -> int | None:
    """When ``version``'s manifest was written (its file's date, nanoseconds since the epoch), under
    either naming; None when it is gone."""
    for v2 in (True, False):
        try:
            return os.stat(table_dir / VERSIONS_DIR / manifest_name(version, v2=v2)).st_mtime_ns
        except OSError:
            continue
    return None


def clean_up_clock_at_most(
    table_dir: Path,
    called_at: float,
    before: tuple[int, int] | None,
    older_than: timedelta,
    took: float,
) -> float | None:
    """At most how many seconds after ``called_at`` (the epoch's) an optimize's clean-up read its clock,
    for the margin of the next cut-off (``SupersededVersions``). ``before``: the oldest and the newest
    version the table kept as the call began. LanceDB drops the versions committed before its "now" less
    ``older_than`` except the newest, so a version it kept that was not the newest when the call began
    was committed after that moment, and its manifest's time plus ``older_than`` bounds the clock reading.
    Never more than the call took (``took``); the call's time when nothing bounds it better (nothing kept
    from before the call, or no version committed during the call dated within it: a file system on
    another machine's clock).

    None when the clean-up dropped nothing although it was given a cut-off: what it kept dates nothing,
    and its clock reading mattered to no version. The clean-up reads its clock after the compaction of
    the same call, but the call also reads every manifest kept, and the index update follows. Timed
    whole, the margin grew with the versions kept, the versions kept with the margin, and under steady
    writes a round slowed to seconds (2,400 memories, versions piling up by the hundred a round;
    docs/benchmarks.md). A round that dropped nothing was timed whole too: once a slow round widened the
    margin so far that the next dropped nothing, each round after it, reading every version kept, widened
    it further, and the versions kept grew by one a write to the end (10,000 writes one at a time, four
    runs of nine; 2026-12-06)."""
    kept = oldest_kept(table_dir)
    if kept is None or before is None:
        return took
    oldest_before, newest_before = before
    if kept[0] >= newest_before:
        return took
    if kept[0] <= oldest_before and older_than < KEEP_EVERY_VERSION:
        return None
    if not _dated_as_now(table_dir, called_at, newest_before, took):
        return took
    bound = kept[1] + older_than.total_seconds() - called_at
    return took if bound < 0 else min(took, bound)


def _dated_as_now(table_dir: Path, called_at: float, newest_before: int, took: float) -> bool:
    """Whether the file system dates files by this process's clock: a version committed since the call
    began (its compaction's, or another write's) dated within the call, give or take the clock's tick. A
    network or shared folder dated by another machine's clock fails it (and the call's own time is used);
    so does a call that committed nothing."""
    newest = newest_on_disk(table_dir)
    written = _written_ns(table_dir, newest) if newest is not None and newest > newest_before else None
    if written is None:
        return False
    return called_at - FINE_FILE_CLOCK_SECONDS <= written / 1e9 <= called_at + took + FINE_FILE_CLOCK_SECONDS


def manifest_name(version: int, *, v2: bool) -> str:
    """The file name of ``version``'s manifest in Lance's V2 naming (``u64::MAX - version``, 20 digits) or
    its V1 naming (the version itself)."""
    return f"{U64_MAX - version:0{V2_NAME_DIGITS}d}{MANIFEST_SUFFIX}" if v2 else f"{version}{MANIFEST_SUFFIX}"


class NewestManifest:
    """The newest version of one local table, read from its manifests at the cost of a few file checks
    instead of a listing of every version kept.

    The write lock's holder checks the version on every write, and a busy table keeps hundreds of versions
    until maintenance drops them: listing them all made each write slower as they piled up (at 700 versions a
    listing took 294 us on a quiet machine and 475 on a busy one, this read 16 and 47). Versions are committed one after
    another (each commit is the manifest of the version after the newest appearing under its final name),
    so the newest is the last of the names that follow a committed version without a gap. The probe
    starts from Lance's version hint (``latest_version_hint.json``, written right after each commit), and
    the version it reaches must have been the newest at some moment of the read, as a listing's is: a
    version leaves only once replaced (by maintenance, ``keep_versions_seconds`` after that, or by a purge,
    right away; clean-up drops by commit time, older first in effect, and memoria tags no version), so a gap after the start would be a newer version dropped under the probe, and the hint
    read at the start was the newest then (or one behind, for the instant between a commit and its hint).
    The version found last is not a start: long replaced, the versions after it may be dropped in any
    order (a review of the first version, which probed from it). Without a hint, or when the hinted
    version is gone, every version is listed (``newest_on_disk``); so is the first read, which learns
    whether the table's manifests have V2 or V1 names. Lance writes its hint as best it can: a hint left
    behind by a failed write makes the probe walk the versions after it, and only if one of those were
    dropped before an older one could a read return a version replaced more than
    ``keep_versions_seconds`` before."""

    def __init__(self, table_dir: Path) -> None:
        self._versions = table_dir / VERSIONS_DIR
        self._last: tuple[int, bool] | None = None  # (version, whether its manifest has a V2 name)
        self.listings = 0  # listings made (tests read it)

    def read(self) -> int | None:
        """The table's newest version; None when it has no manifest (then ask the table)."""
        hinted, last = self._hint(), self._last
        if hinted is not None and last is not None:
            version, v2 = hinted, last[1]  # the version found last says only how its table names them
            if self._has(version, v2):
                while self._has(version + 1, v2):
                    version += 1
                if self._has(version, v2):  # still there: it was the newest when the probe passed it
                    self._last = (version, v2)
                    return version
        return self._list()

    def _hint(self) -> int | None:
        try:
            found = json.loads(read_small_file(self._versions / VERSION_HINT)).get("version")
        except (OSError, ValueError, AttributeError):
            return None
        return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else None

    def _has(self, version: int, v2: bool) -> bool:
        return os.path.isfile(self._versions / manifest_name(version, v2=v2))

    def _list(self) -> int | None:
        self.listings += 1
        newest = newest_on_disk(self._versions.parent)
        if newest is None:
            self._last = None
            return None
        v2 = self._has(newest, True)
        self._last = (newest, v2) if v2 or self._has(newest, False) else None
        return newest


SMALL_FILE_BYTES = 4096  # Lance's version hint is a few bytes ({"version":203})


def read_small_file(path: Path) -> bytes:
    """``path``'s bytes in three system calls (open, read, close) where ``Path.read_bytes`` makes nine
    (its buffered reader asks for the size twice, whether it is a terminal, where it stands, and reads
    until it meets the end). Each call lets the interpreter go to another thread, and on a busy server
    waits for its turn back: the version hint is read on every version check (three a remember)."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        chunks = [os.read(descriptor, SMALL_FILE_BYTES)]
        while len(chunks[-1]) == SMALL_FILE_BYTES:  # larger than expected: read on to its end
            chunks.append(os.read(descriptor, SMALL_FILE_BYTES))
    finally:
        os.close(descriptor)
    return b"".join(chunks)


@dataclass
class SupersededVersions:
    """Per table, the sightings of its newest version, oldest first: the rounds', the maintenance
    thread's between them, and (once that thread has set ``spacing``) every version check of a local
    table's manifests (``sighted``)."""

    _seen: dict[str, list[tuple[datetime, int]]] = field(default_factory=dict)
    # How far apart the sightings between rounds are noted; None until the maintenance thread sets it.
    spacing: timedelta | None = None
    # Sightings come from the maintenance thread and from any thread that checks a version.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def observe(
        self, table: str, looked_at: datetime, newest: int, *, spacing: timedelta = timedelta(0)
    ) -> None:
        """Note that at ``looked_at`` (taken before asking) the table's newest version was ``newest``. A
        sighting of the same version as the one before replaces it (of a run of sightings of one version
        only the latest can mark a cut-off), and only the last ``MAX_SIGHTINGS`` are kept: forgetting the
        oldest can only move a cut-off earlier, never drop a version that must stay. A sighting of another
        version less than ``spacing`` after the one before is not noted (the sightings between rounds:
        spaced so that ``MAX_SIGHTINGS`` span more than the versions are kept); a cut-off read from fewer
        true sightings is only earlier. So is one that comes after a later sighting, or that saw an older
        version than the last one noted (threads that looked at once, a table handle behind the
        manifests): it is not noted."""
        with self._lock:
            seen = self._seen.setdefault(table, [])
            if seen and (looked_at < seen[-1][0] or newest < seen[-1][1]):
                return
            if seen and seen[-1][1] != newest and looked_at - seen[-1][0] < spacing:
                return
            if seen and seen[-1][1] == newest:
                seen.pop()
            seen.append((looked_at, newest))
            del seen[:-MAX_SIGHTINGS]

    def sighted(self, table: str, looked_at: datetime, newest: int) -> None:
        """A version check's sighting, spaced as the maintenance thread's (nothing before it set
        ``spacing``). A round can last longer than the versions are kept (a compaction that loses to
        the appends retries for half a minute), and with only the rounds' sightings and the thread's
        between them, the next round's cut-off fell that far back: it dropped nothing, the versions kept
        made every round slower, and the cut-off fell further back each round (10,000 writes one at a
        time, the memories table's versions growing by one a write to the end; 2026-12-06). The writes'
        own version checks keep the sightings as close together as the writes."""
        spacing = self.spacing
        if spacing is not None:
            self.observe(table, looked_at, newest, spacing=spacing)

    def cleanup_older_than(
        self, table: str, now: datetime, keep: timedelta, margin: timedelta
    ) -> timedelta | None:
        """How old a version must be for this round to drop it, or None while the rounds have not yet seen
        a version replaced at least ``keep`` ago (then nothing is dropped). ``margin`` covers the seconds
        between ``now`` and LanceDB's own clock reading. Forgets sightings it no longer needs."""
        with self._lock:
            return self._cut(table, now, keep, margin)

    def _cut(self, table: str, now: datetime, keep: timedelta, margin: timedelta) -> timedelta | None:
        seen = self._seen.get(table, [])
        settled = [index for index, (looked_at, _) in enumerate(seen) if looked_at <= now - keep]
        if not settled:
            return None
        newest_then = seen[settled[-1]][1]
        # The last sighting before that one of an older newest version: every version committed before it
        # is numbered at most that older one, so was replaced by the time of the settled sighting.
        before = [index for index in range(settled[-1]) if seen[index][1] < newest_then]
        if not before:
            return None
        cut_at = seen[before[-1]][0]
        del seen[: before[-1]]
        return (now - cut_at) + margin
