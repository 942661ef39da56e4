"""A lock that many readers hold at once, or one writer alone: the scope cache's lock, and within a process
the logs lock's (``storage.locking.LogsLock``: appends together, a purge's scrub alone).

Reads of the scope copies (a matrix product, a BM25 lookup, records by id) do not change them, so a
recall need not wait for another recall's reads; only applying a write to a copy, catching up with the
table or building a copy needs the copies to itself. Under 50 clients (``benchmarks.load``) a lock that
let one reader in at a time made recalls spend 45% of their time waiting for it, each reader holding it
while it waited for its turn at the interpreter.

A writer that is waiting holds new readers back, so a steady stream of reads never starves the write of
a remember. Both sides are re-entrant in a thread: a reader may read again (even with a writer waiting:
it would otherwise wait for itself), and a writer may write or read again. A reader may not become a
writer: two readers doing that at once would each wait for the other, so ``write()`` from a thread that
reads raises instead.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class SharedLock:
    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._readers = 0  # threads inside read()
        self._writer: int | None = None  # the thread inside write()
        self._waiting_writers = 0
        self._held = threading.local()  # this thread's nesting: .reads, .writes

    def reads_here(self) -> bool:
        """Whether this thread is inside ``read()`` (or ``write()``)."""
        return getattr(self._held, "reads", 0) > 0 or getattr(self._held, "writes", 0) > 0

    @contextmanager
    def read(self) -> Iterator[None]:
        held = self._held
        if self.reads_here():
            held.reads = getattr(held, "reads", 0) + 1
            try:
                yield
            finally:
                held.reads -= 1
            return
        with self._condition:
            while self._writer is not None or self._waiting_writers:
                self._condition.wait()
            self._readers += 1
        held.reads = 1
        try:
            yield
        finally:
            held.reads = 0
            with self._condition:
                self._readers -= 1
                if self._readers == 0:
                    self._condition.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        held = self._held
        if getattr(held, "writes", 0) > 0:
            held.writes += 1
            try:
                yield
            finally:
                held.writes -= 1
            return
        if getattr(held, "reads", 0) > 0:
            raise RuntimeError("a thread that holds this lock shared cannot take it exclusively inside")
        me = threading.get_ident()
        with self._condition:
            self._waiting_writers += 1
            try:
                while self._writer is not None or self._readers:
                    self._condition.wait()
            finally:
                self._waiting_writers -= 1
            self._writer = me
        held.writes = 1
        try:
            yield
        finally:
            held.writes = 0
            with self._condition:
                self._writer = None
                self._condition.notify_all()
