"""Work a write hands on after its caller has its answer: the credits a superseded memory earned, carried
to the memory that took its place (``writing.inheritance``).

Carrying credits is a report's sequence: it waits for the reports' lock, which outcome reports hold most
of the time under load, then reads, merges and writes weights (300 ms at the median in the closed loop
of ``benchmarks.load``, for the few restatements of a memory a report moved). The remember that caused it
has committed its own write by then; it is answered without waiting, and one thread carries the credits
in the order they were handed on. Until it has, the memory that stands ranks without them. Each carry is
written down before it is handed on (``storage.unfinished``): one a crash interrupts (nothing is
half-written, each carry is one report sequence) is carried by the next server to start. ``settle``
waits for what was handed on so far; ``close`` carries the rest first.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)


class HandOnQueue:
    """One thread running the jobs handed to it, in order; a failed job is logged, not raised."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: deque[Callable[[], None]] = deque()
        self._changed = threading.Condition()
        self._submitted = 0
        self._finished = 0  # run, failed or dropped
        self._closing = False  # no new thread starts; the one running drains the queue and stops
        self._running = False  # a thread takes jobs (set under the condition's lock, by it as it stops)
        self._thread: threading.Thread | None = None

    def submit(self, job: Callable[[], None]) -> None:
        with self._changed:
            if self._running or not self._closing:
                self._jobs.append(job)
                self._submitted += 1
                if not self._running:
                    self._start()
                self._changed.notify_all()
                return
        self._run_one(job)  # closed: nothing runs the queue but this caller

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until every job handed on so far has run; False if ``timeout`` passed first."""
        with self._changed:
            target = self._submitted
            return self._changed.wait_for(lambda: self._finished >= target, timeout)

    @property
    def pending(self) -> int:
        """Jobs queued or running."""
        with self._changed:
            return self._submitted - self._finished

    def wait_below(self, count: int, timeout: float | None = None) -> bool:
        """Wait until fewer than ``count`` jobs are queued or running; False if ``timeout`` passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: self._submitted - self._finished < count, timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Run what is queued (and what is handed on meanwhile), then stop; later jobs run in their
        caller's thread. Jobs still queued after ``timeout`` are dropped, and logged."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
        with self._changed:
            self._running = False  # given up on, if it is still running: later jobs run in their caller
            dropped = len(self._jobs)
            self._jobs.clear()
            self._finished += dropped
            self._changed.notify_all()
        if thread is not None and thread.is_alive():
            log.warning(
                "%s: closed after %.0f s with a hand-on running and %d dropped", self._name, timeout, dropped
            )

    def _run(self) -> None:
        try:
            while True:
                with self._changed:
                    self._changed.wait_for(lambda: bool(self._jobs) or self._closing)
                    if not self._jobs:
                        self._running = False  # closing, and nothing left
                        return
                    job = self._jobs.popleft()
                try:
                    self._run_one(job)
                finally:  # counted whatever happened, so that settle never waits for a job that is gone
                    with self._changed:
                        self._finished += 1
                        self._changed.notify_all()
        finally:
            # Stopped by something other than closing (an exception past ``Exception``): the next job
            # starts a thread again, and one starts now for the jobs already queued.
            with self._changed:
                if self._running and self._thread is threading.current_thread():
                    self._running = False
                    if self._jobs and not self._closing:
                        self._start()

    def _start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _run_one(self, job: Callable[[], None]) -> None:
        try:
            job()
        except Exception:
            log.warning("%s: a hand-on failed", self._name, exc_info=True)
