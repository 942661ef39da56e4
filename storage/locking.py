"""One writer at a time per store, across threads and across processes.

LanceDB commits are atomic, but read-check-write sequences (deduplicate, then insert; read a weight,
then update it) are not: two server processes on one folder would race. A local store therefore
takes an exclusive advisory lock on a file inside the store folder around every write sequence.
Object stores have no shared file to lock. There each commit is atomic (a conditional write of the
next manifest, retried on conflict by ``retrying``), and the writes that read before they write are
made safe without a lock: a new memory is inserted only if its id is absent, in one commit
(``MemoryStore.insert_many``), and feedback weights are recomputed until the outcome reports they
were computed from are still all the reports there are (``tools.report_outcome``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TypeVar

from storage.shared_lock import SharedLock

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

try:  # pragma: no cover - Windows
    import msvcrt
except ImportError:
    msvcrt = None  # type: ignore[assignment]

log = logging.getLogger(__name__)
T = TypeVar("T")

LOCK_FILE_NAME = ".memoria-write.lock"
REPORTS_LOCK_FILE_NAME = ".memoria-reports.lock"  # outcome reports' own lock (MemoryStore.reporting)
LOGS_LOCK_FILE_NAME = ".memoria-logs.lock"  # the logs written behind against a purge's scrub (LogsLock)
COMPACTION_LOCK_FILE_NAME = ".memoria-compaction.lock"  # a compaction beside the writes against a purge
# How long work done behind the calls waits for this process's callers waiting for the lock to go first.
BACKGROUND_YIELD_SECONDS = 0.1
# How long it waits for this process's compaction beside the writes to commit (``CompactionsBeside``).
COMPACTION_YIELD_SECONDS = 5.0


class WriteLock:
    """Re-entrant within a thread; exclusive across threads and (for local stores) processes.

    Work done behind the calls (``background``: the supersedes committed after a remember answered,
    credits carried, maintenance) lets the threads of this process that wait for the lock on a caller's
    behalf go first, for up to ``BACKGROUND_YIELD_SECONDS``: under the closed loop of ``benchmarks.load``
    the lock is held about two thirds of the time, and a remember's insert that queued behind a
    restatement's status change waited for work no caller was waiting for. Best effort: a caller that
    arrives while background work is already waiting for the lock may still come second."""

    def __init__(self, lock_path: Path | None) -> None:
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._lock_path = lock_path
        self._handle: IO[bytes] | None = None
        self._owner: int | None = None  # the thread holding it
        self._turns = threading.Condition()
        self._callers_waiting = 0

    @contextmanager
    def hold(self, *, background: bool = False) -> Iterator[None]:
        waiting = False
        if self._owner != threading.get_ident():  # not a re-entry
            if background:
                with self._turns:
                    self._turns.wait_for(lambda: self._callers_waiting == 0, BACKGROUND_YIELD_SECONDS)
            else:
                waiting = True
                with self._turns:
                    self._callers_waiting += 1
        try:
            with self._thread_lock:
                outermost = self._depth == 0
                if outermost:
                    self._acquire_file()
                    self._owner = threading.get_ident()
                if waiting:
                    waiting = False
                    self._done_waiting()
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                    if outermost:
                        self._owner = None
                        self._release_file()
        finally:
            if waiting:  # gave up (an error taking the file lock)
                self._done_waiting()

    def _done_waiting(self) -> None:
        with self._turns:
            self._callers_waiting -= 1
            if self._callers_waiting == 0:
                self._turns.notify_all()

    @property
    def path(self) -> Path | None:
        """The lock file (None: this process's threads only)."""
        return self._lock_path

    @property
    def spans_processes(self) -> bool:
        """Whether holding the lock also excludes other processes (a local store's lock file)."""
        return self._lock_path is not None

    def close(self) -> None:
        with self._thread_lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    def _acquire_file(self) -> None:
        if self._lock_path is None:
            return
        if self._handle is None:
            self._handle = open(self._lock_path, "a+b")  # noqa: SIM115 - held for the store's lifetime
        lock_file(self._handle, exclusive=True)

    def _release_file(self) -> None:
        if self._handle is not None:
            unlock_file(self._handle)


class CompactionsBeside:
    """This process's compactions of the memories table running beside the writes (without the write
    lock), which work done behind the calls waits for before it takes the write lock.

    A compaction rewrites the memories table's fragments, and an update of a row it rewrites (a status
    change, a weight) preempts its commit: it is lost, and runs again under the write lock, where every
    remember waits for it (0.2-1.0 s at 10,000 memories). Under the closed loop of ``benchmarks.load``
    without reports, the supersedes committed behind the remembers landed during most compactions: six
    such rounds under the write lock in 45 s, and remember p95 0.63-0.81 s. Appends do not preempt a
    compaction, and a supersede committed behind its call is read as done by this process already, so
    that work waits here first (``StoreTables.after_compactions_beside``: ``COMPACTION_YIELD_SECONDS`` at
    most each time, and not once a call waits for those supersedes: ``PendingSupersedes.awaiting``). Best
    effort: an update that had the write lock as a compaction began, a caller's own update (a report's
    weights, a retract), another process's, or one from a thread not marked as behind the calls (the
    aggregation sweep's workers) still preempts it."""

    def __init__(self) -> None:
        self._running = 0
        self._changed = threading.Condition()

    @contextmanager
    def running(self) -> Iterator[None]:
        with self._changed:
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    def wait_out(self, timeout: float = COMPACTION_YIELD_SECONDS) -> bool:
        """Wait until none runs; False if ``timeout`` passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: self._running == 0, timeout)


def lock_file(handle: IO[bytes], *, exclusive: bool) -> None:
    """Take an advisory lock on an open file, waiting for it: shared or exclusive (Windows has exclusive
    locks only)."""
    if fcntl is not None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    elif msvcrt is not None:  # pragma: no cover - Windows
        handle.seek(0)
        while True:
            try:
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                break
            except OSError:
                time.sleep(0.01)


def unlock_file(handle: IO[bytes]) -> None:
    if fcntl is not None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    elif msvcrt is not None:  # pragma: no cover - Windows
        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)


class LogsLock:
    """Between the retrieval records written behind and a purge's scrub of the recorded traces.

    A record queued by a recall quotes its candidates; if another process purged one of them after the
    recall, the record must not reach the table with the quote. Its append holds this lock shared and
    first reads which of its candidates are purged now; a purge commits the purged status, then holds
    the lock exclusively while it scrubs the table. An append either committed before the scrub (which
    then scrubs it) or read the purged status after it committed (and scrubbed itself). Appends go on
    beside each other and a scrub waits for all of them, within a process (a shared lock) and across the
    processes of a local store (a file lock, shared or exclusive). Within a process a mutex once
    serialised the appends too: under ``benchmarks.load`` a restatement's lineage event waited there
    behind the journal's write-behind batches and the logs tables' compaction (py-spy: 7% of remember's
    time). On Linux a shared file lock is granted even while another process waits for the exclusive
    one, so a scrub waits for a gap between this process's appends (they are short, and the remembers
    that make lineage events wait for the purging process's write lock meanwhile). Object stores have no
    file to lock: there a record appended by one replica after another's purge can keep its quote."""

    def __init__(self, lock_path: Path | None) -> None:
        self._lock_path = lock_path
        self._here = SharedLock()  # this process's holders: appends together, a scrub alone

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._held(exclusive=False):
            yield

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._held(exclusive=True):
            yield

    @contextmanager
    def _held(self, *, exclusive: bool) -> Iterator[None]:
        # Windows locks a file exclusively only, per handle, retrying each second: there this process's
        # holders take turns in memory instead of at the file.
        alone = exclusive or (fcntl is None and self._lock_path is not None)
        with self._here.write() if alone else self._here.read():
            if self._lock_path is None:
                yield
                return
            # A handle of its own each time: locks on one open file would not exclude each other.
            with open(self._lock_path, "a+b") as handle:
                lock_file(handle, exclusive=exclusive)
                try:
                    yield
                finally:
                    unlock_file(handle)


_RETRYABLE_MARKERS = ("conflict", "too many concurrent writers", "retryable", "commit")


def is_retryable(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, (RuntimeError, OSError)) and any(marker in text for marker in _RETRYABLE_MARKERS)


def retrying(
    operation: Callable[[], T],
    *,
    attempts: int = 8,
    base_delay: float = 0.02,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run a write, retrying commit conflicts with jittered exponential backoff; other errors propagate."""
    for attempt in range(1, attempts + 1):
        try:
            return operation()
        except Exception as exc:
            if attempt == attempts or not is_retryable(exc):
                raise
            delay = base_delay * (2 ** (attempt - 1)) * (0.5 + random.random())
            log.debug("write conflict (attempt %d/%d), retrying in %.3fs: %s", attempt, attempts, delay, exc)
            sleep(delay)
    raise AssertionError("unreachable")
