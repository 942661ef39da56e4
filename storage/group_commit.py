"""Group commit: writes that arrive while a commit is in flight are coalesced into the next one.

A caller hands its items in and waits. The first caller to find no commit in flight leads: it takes every
item queued (up to ``max_items``), commits them at once, hands each caller its results, and leaves; a
caller still waiting then leads the next batch. If the shared commit fails, each caller's items are
committed on their own, so that only a caller whose own items fail gets an error. A write that arrives
alone is committed at once; under load, one commit serves many writes, and every caller returns only
after the commit that holds its items is done.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class _Entry(Generic[T, R]):
    items: Sequence[T]
    results: list[R] | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class GroupStats:
    commits: int = 0
    items: int = 0
    largest: int = 0
    by_size: dict[int, int] = field(default_factory=dict)


class GroupCommit(Generic[T, R]):
    def __init__(
        self,
        commit: Callable[[list[T]], list[R]],
        *,
        max_items: int = 1_000,
        retry: Callable[[list[T]], list[R]] | None = None,
    ) -> None:
        """``commit(items)`` writes ``items`` in one go and returns one result per item, in order; ``retry``
        (``commit`` by default) writes one caller's items after the commit they shared failed, which may
        have written some of them before it failed."""
        self._commit = commit
        self._retry = retry or commit
        self._max_items = max_items
        self._condition = threading.Condition()
        self._pending: list[_Entry[T, R]] = []
        self._busy = False
        self.stats = GroupStats()

    @property
    def queued(self) -> int:
        """How many callers' items wait for the next commit."""
        with self._condition:
            return len(self._pending)

    def run(self, items: Sequence[T]) -> list[R]:
        """Commit ``items`` (with whatever else is queued) and return their results."""
        entry: _Entry[T, R] = _Entry(items)
        with self._condition:
            self._pending.append(entry)
        while True:
            with self._condition:
                while self._busy and not entry.done:
                    self._condition.wait()
                if entry.done:
                    break
                self._busy = True
                batch = self._take()
            self._lead(batch)
        if entry.error is not None:
            raise entry.error
        assert entry.results is not None
        return entry.results

    def _take(self) -> list[_Entry[T, R]]:
        """The queued entries that fit in one commit, oldest first (always at least one)."""
        batch: list[_Entry[T, R]] = []
        count = 0
        while self._pending and (not batch or count + len(self._pending[0].items) <= self._max_items):
            taken = self._pending.pop(0)
            batch.append(taken)
            count += len(taken.items)
        return batch

    def _lead(self, batch: list[_Entry[T, R]]) -> None:
        flat = [item for entry in batch for item in entry.items]
        commits = 1
        try:
            results = self._commit(flat)
            start = 0
            for entry in batch:
                entry.results = results[start : start + len(entry.items)]
                start += len(entry.items)
        except Exception as exc:
            if len(batch) == 1:
                batch[0].error = exc
            else:
                # One caller's bad item must not fail the others: each caller's items are committed on
                # their own, so only the callers whose own commit fails get an error (the commit is
                # idempotent: what the failed batch wrote before failing is found, not written twice).
                for entry in batch:
                    commits += 1
                    try:
                        entry.results = self._retry(list(entry.items))
                    except Exception as own:
                        entry.error = own
        except BaseException as exc:  # interrupted: every caller of the batch gets it
            for entry in batch:
                entry.error = exc
            raise
        finally:
            with self._condition:
                for entry in batch:
                    if entry.results is None and entry.error is None:
                        entry.error = RuntimeError("the group commit was interrupted; retry the write")
                    entry.done = True
                self.stats.commits += commits
                self.stats.items += len(flat)
                self.stats.largest = max(self.stats.largest, len(flat))
                self.stats.by_size[len(batch)] = self.stats.by_size.get(len(batch), 0) + 1
                self._busy = False
                self._condition.notify_all()
