"""Supersedes decided and not committed yet: a restatement's status change, committed behind its remember.

A remember that restates a memory waited for two writes before it answered: the old memory's status
change (a LanceDB update, which rewrites the row, under the write lock) and its lineage event. Under the
closed loop of ``benchmarks.load`` those were the tail of remember's latency: 117-131 ms at the median
for the restatements (docs/benchmarks.md). Now the write service decides the supersede as before, holds
it here, answers, and commits it right after on a thread of its own (``writing.service``).

Until the commit lands, this process reads a held memory as it will be: ``get_memory``/``get_memories``
return it superseded by the memory that restated it, searches and listings of active memories leave it out
(one of the superseded lists it so), and a read of the lineage of either memory waits for the commit (its
event is written with it). The writes that decide
on a memory's status (``storage.memories``) read the rows as committed. Other processes read the row as
it is until the commit lands, as they did between a restatement's insert and its status change before
(while this process compacts the memories beside the writes, up to ``COMPACTION_YIELD_SECONDS`` longer:
``storage.locking.CompactionsBeside``).
A crash before the commit leaves the remember's consolidation owed (``storage.unfinished``): the next
start consolidates it again and supersedes the same memory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace

from storage.records import MemoryRecord

DEFAULT_SETTLE_SECONDS = 30.0


def overlaid(record: MemoryRecord, held: Mapping[str, str]) -> MemoryRecord:
    """``record`` as it will be once the supersede ``held`` holds for it (``PendingSupersedes.held``, taken
    before ``record`` was read) is committed."""
    survivor_id = held.get(record.id)
    if survivor_id is None or record.status != "active":
        return record
    return replace(record, status="superseded", replaced_by=survivor_id)


class PendingSupersedes:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._replaced_by: dict[str, str] = {}  # held memory -> the memory that restated it
        self._awaited = 0  # calls waiting on the commits (``awaiting``): these then wait for no compaction

    def hold(self, loser_ids: Sequence[str], survivor_id: str) -> list[str]:
        """Hold these memories as superseded by ``survivor_id`` until ``release``; returns those held.
        None when the survivor is itself held (two restatements that each picked the other to keep: the
        first one decided stands), nor a memory held already."""
        with self._changed:
            if survivor_id in self._replaced_by:
                return []
            # A memory a held supersede keeps may be held in turn (A, then B restating it, then C restating
            # B): the commits run in the order held, so each survivor is still active when its turn comes.
            taken = [
                memory_id
                for memory_id in dict.fromkeys(loser_ids)
                if memory_id != survivor_id and memory_id not in self._replaced_by
            ]
            for memory_id in taken:
                self._replaced_by[memory_id] = survivor_id
            return taken

    def release(self, loser_ids: Sequence[str], survivor_id: str) -> None:
        """The supersede is committed (or given up): the rows say what they say again."""
        with self._changed:
            for memory_id in loser_ids:
                if self._replaced_by.get(memory_id) == survivor_id:
                    del self._replaced_by[memory_id]
            self._changed.notify_all()

    def held(self) -> dict[str, str]:
        """The supersedes held now: held memory -> the memory that restated it. A read looks at this before
        it reads the rows and again after (``storage.memories``, ``_as_held``): looked at after the read
        only, a commit landing in between is in neither (the row read before the commit, the hold released
        after it: a restatement's old memory read as active again); before only, a write after the release
        (an explicit update back to the old memory) would be overlaid with a supersede it undid. A search
        leaves out what was held before it read."""
        if not self._replaced_by:  # the usual case: every read asks, so no lock for an empty answer
            return {}
        with self._changed:
            return dict(self._replaced_by)

    def __bool__(self) -> bool:
        return bool(self._replaced_by)

    def settle(
        self, memory_ids: Iterable[str] | None = None, timeout: float = DEFAULT_SETTLE_SECONDS
    ) -> bool:
        """Wait until the supersedes held now that involve these memories (as held or as survivor; None:
        every one held now, as a read of a scope's latest changes needs) are committed. Those held later
        are not waited for, so a steady stream of restatements never keeps a reader waiting. False if
        ``timeout`` passed first."""
        with self._changed:
            if memory_ids is None:
                waiting = set(self._replaced_by)
            else:
                ids = set(memory_ids)
                waiting = {held for held, by in self._replaced_by.items() if held in ids or by in ids}
            with self.awaiting():
                return self._changed.wait_for(lambda: waiting.isdisjoint(self._replaced_by), timeout)

    @contextmanager
    def awaiting(self) -> Iterator[None]:
        """Mark a call as waiting on the commits of supersedes (``settle``, a remember waiting for the
        queue of commits to shorten): meanwhile they no longer wait for a compaction
        (``StoreTables.after_compactions_beside``)."""
        with self._changed:
            self._awaited += 1
        try:
            yield
        finally:
            with self._changed:
                self._awaited -= 1

    @property
    def awaited(self) -> bool:
        """Whether a call waits on the commits of supersedes (``awaiting``)."""
        return self._awaited > 0


def replaced_through(
    replaced: Mapping[str, set[str]], held: Mapping[str, str], memory_id: str, most: int
) -> list[str]:
    """The memories ``memory_id`` replaced, directly or through those (8080 -> 9090 -> 7070, a correction
    restated many times), nearest first and at most ``most``: by the rows (``replaced``: a memory -> those
    whose ``replaced_by`` it is) and by the supersedes held before their commits land (``held``, as
    ``PendingSupersedes.held`` gives it: a restatement's, committed behind the call)."""
    back: dict[str, set[str]] = {}
    for loser, survivor in held.items():
        back.setdefault(survivor, set()).add(loser)
    seen, edge = {memory_id}, [memory_id]
    found: list[str] = []
    while edge and len(found) < most:
        edge = [
            other
            for one in edge
            for other in sorted(replaced.get(one, set()) | back.get(one, set()))
            if other not in seen
        ]
        seen.update(edge)
        found += edge
    return found[:most]
