"""Whole-scope reads of a small table, kept until the table changes: a recall's contradiction marks come
from here instead of a LanceDB query each (episode headers come from the scope copies).

A snapshot is valid for the table version read before it was taken (the rows read are at least that new),
so a version check per use is all it costs; any commit, by any process, makes the next use read the
scope again. A scope with more than ``max_rows`` rows is not kept (every use would re-read too much
after each write): its reads go to the table, and it is remembered as too big (tables only grow).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from storage.records import Scope

T = TypeVar("T")


class ScopeSnapshots(Generic[T]):
    def __init__(
        self,
        version: Callable[[], int],
        read: Callable[[Scope, int], tuple[T, int]],
        *,
        max_rows: int,
        max_scopes: int = 256,
    ) -> None:
        """``read(scope, limit)`` returns the scope's snapshot and how many rows it read (reading at most
        ``limit``; more than ``max_rows`` means too big)."""
        self._version = version
        self._read = read
        self._max_rows = max_rows
        self._max_scopes = max_scopes
        self._entries: OrderedDict[Scope, tuple[int, T]] = OrderedDict()
        self._too_big: set[Scope] = set()
        self._lock = threading.Lock()
        self.reads = 0  # snapshots taken (tests read this)

    def get(self, scope: Scope) -> T | None:
        """The scope's current snapshot, or None when the scope is too big to keep one."""
        if self._max_rows <= 0 or scope in self._too_big:
            return None
        version = self._version()
        with self._lock:
            entry = self._entries.get(scope)
            if entry is not None and entry[0] == version:
                self._entries.move_to_end(scope)
                return entry[1]
        snapshot, rows = self._read(scope, self._max_rows + 1)
        self.reads += 1
        with self._lock:
            if rows > self._max_rows:
                self._too_big.add(scope)
                self._entries.pop(scope, None)
                return None
            self._entries[scope] = (version, snapshot)
            self._entries.move_to_end(scope)
            while len(self._entries) > self._max_scopes:
                self._entries.popitem(last=False)
        return snapshot
