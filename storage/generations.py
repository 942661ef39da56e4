"""Write generations: counters in a small file of a local store that tell readers whether a write
sequence ended since they last asked a table for its version, so that a read asks LanceDB only then.

Every write sequence holds a lock that spans the store's processes (``exclusive()`` for the memories,
contradictions and attestations tables, ``reporting()`` for the report tables); its holder counts the
lock's generation up by one as it begins and by one as it ends, in a slot of its own per lock. An even
count means no sequence is under way; an odd one, that one is (or that its process died inside it: the
next holder counts two, so the count still moves). A write is acknowledged only after its sequence
ended, so a version read for real stays current, for anyone but the holder, while no sequence ended
since the generation read just before it (``VersionWatch``).

Under 50 HTTP clients (``benchmarks.load``) the version checks were half of a recall's time: every
recall asked the memories, credits and contradictions tables for their newest version, each a manifest
read through LanceDB's one background thread, queued behind the appends. A generation is a load from a
memory-mapped page.

Commits made without a sequence (a compaction beside the writes) leave every row as it was and count
nothing. Object stores have no file to share: there every read checks the table, as before. A read that
must see a commit of a sequence still under way reads the table as a holder does (the statuses a
retrieval record's append masks its quotes by, which a purge commits and scrubs before its sequence ends:
``StoreTables._exact_versions``).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

GENERATIONS_FILE_NAME = ".memoria-generations"
WRITES = 0  # ``exclusive()``: the memories, episodes, contradictions and attestations tables
REPORTS = 1  # ``reporting()``: the credit, report and weight-event tables
_SLOTS = 8
_SLOT = struct.Struct("<Q")
# A reader trusts a version it read for at most this long, even when no generation moved: a process of
# an earlier release does not count generations (the store's schema version keeps those out once a
# release that counts opened it; one that was already running stays visible within this time).
TRUST_SECONDS = 1.0


class Generations:
    """The generation counters of one local store, shared by its processes through a mapped file."""

    def __init__(self, path: Path) -> None:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)  # as the lock files: the umask decides
        try:
            if os.fstat(descriptor).st_size < _SLOTS * _SLOT.size:  # a new file (zeros), or one to widen
                os.ftruncate(descriptor, _SLOTS * _SLOT.size)
            # Never unmapped by hand: a request thread still ending its sequence while the store closes
            # must find the page; the mapping goes with the last reference.
            self._map = mmap.mmap(descriptor, _SLOTS * _SLOT.size)
        finally:
            os.close(descriptor)  # the mapping keeps the file

    def read(self, slot: int) -> int:
        return int(_SLOT.unpack_from(self._map, slot * _SLOT.size)[0])

    def begin(self, slot: int) -> None:
        """The lock of ``slot`` was just taken: a sequence begins (odd). Odd already: its last holder died
        inside its sequence, and the count moves by two so that readers who saw that odd count look again."""
        count = self.read(slot)
        self._write(slot, count + (2 if count % 2 else 1))

    def end(self, slot: int) -> None:
        """The lock of ``slot`` is about to be released: the sequence ends (even)."""
        count = self.read(slot)
        self._write(slot, count + 1 if count % 2 else count)

    @contextmanager
    def sequence(self, slot: int) -> Iterator[None]:
        """Count a sequence of ``slot``'s lock around the block; the caller holds that lock."""
        self.begin(slot)
        try:
            yield
        finally:
            self.end(slot)

    def _write(self, slot: int, count: int) -> None:
        _SLOT.pack_into(self._map, slot * _SLOT.size, count)


def still_current(read_before: int, now: int) -> bool:
    """Whether a version read for real just after reading generation ``read_before`` is still current at
    generation ``now``: no sequence ended in between. The same count, or one sequence begun (from even to
    odd) and not ended."""
    return now == read_before or (read_before % 2 == 0 and now == read_before + 1)


class _Check:
    """A read of the table under way, made after reading ``generation``; its waiters share its version."""

    def __init__(self, generation: int, began: float) -> None:
        self.generation = generation
        self.began = began
        self.version: int | None = None
        self.done = threading.Event()


class VersionWatch:
    """A table's newest version for readers: the version last read for real while it is still current by
    its lock's generation (``still_current``), else read again. Readers that find a read under way that
    began at a generation still current for them wait for it instead of reading too (after a sequence
    ends, the recalls in flight all need a new version: one manifest read serves them). ``holding()`` says
    whether the calling thread holds the lock of the generation: a holder reads for real every time, alone,
    so that its sequence sees its own commits. Without generations (an object store) every call reads."""

    def __init__(
        self,
        check: Callable[[], int],
        generations: Generations | None,
        slot: int,
        holding: Callable[[], bool],
        *,
        trust_seconds: float = TRUST_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._check = check
        self._generations = generations
        self._slot = slot
        self._holding = holding
        self._trust_seconds = trust_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._known: tuple[int, int, float] | None = None  # (generation read before, version, when)
        self._under_way: _Check | None = None
        self.checks = 0  # versions read for real (tests and benchmarks read it)

    def current(self) -> int:
        if self._generations is None or self._holding():
            self.checks += 1
            return self._check()
        generation = self._generations.read(self._slot)
        now = self._clock()
        with self._lock:
            known = self._known
            if (
                known is not None
                and still_current(known[0], generation)
                and now - known[2] < self._trust_seconds
            ):
                return known[1]
            shared = self._under_way
            if shared is None or not still_current(shared.generation, generation):
                shared, mine = _Check(generation, now), True
                self._under_way = shared
            else:
                mine = False
        if not mine:
            shared.done.wait()
            if shared.version is not None:
                return shared.version
            return self._read(_Check(generation, now))  # that read failed: this reader tries its own
        return self._read(shared)

    def _read(self, check: _Check) -> int:
        try:
            check.version = self._check()
            self.checks += 1
            with self._lock:
                # Keep the newest reading: a slower read that began earlier must not replace it.
                if self._known is None or (check.generation, check.began) >= (self._known[0], self._known[2]):
                    self._known = (check.generation, check.version, check.began)
            return check.version
        finally:
            with self._lock:
                if self._under_way is check:
                    self._under_way = None
            check.done.set()
