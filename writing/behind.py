"""Work a write hands on after its caller has its answer: the credits a superseded memory earned, carried
to the memory that took its place (``WriteService.inherit``).

Carrying credits is a report's sequence: it waits for the reports' lock, which outcome reports hold most
of the time under load, then reads, merges and writes weights (300 ms at the median in the closed loop
of ``benchmarks.load``, for the few restatements of a memory a report moved). The remember that caused it
has committed its own write by then; it is answered without waiting, and one thread carries the credits
in the order they were handed on. Until it has, the memory that stands ranks without them. A crash in
that window loses the hand-on (the old memory keeps its credits, nothing is half-written: each carry is
one report sequence). ``settle`` waits for what was handed on so far; ``close`` carries the rest first.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)


class Behind:
    """One thread running the jobs handed to it, in order; a failed job is logged, not raised."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: deque[Callable[[], None]] = deque()
        self._changed = threading.Condition()
        self._submitted = 0
        self._finished = 0
        self._closed = False
        self._thread: threading.Thread | None = None  # started with the first job

    def submit(self, job: Callable[[], None]) -> None:
        with self._changed:
            if not self._closed:
                self._jobs.append(job)
                self._submitted += 1
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
                self._changed.notify_all()
                return
        _run_logged(job)  # closed: the caller runs it

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until every job handed on so far has run; False if ``timeout`` passed first."""
        with self._changed:
            target = self._submitted
            return self._changed.wait_for(lambda: self._finished >= target, timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Run what is queued, then stop; later jobs run in their caller's thread."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                log.warning("%s: %d hand-ons were still running at close", self._name, len(self._jobs))

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._jobs) or self._closed)
                if not self._jobs:
                    return  # closed, and nothing left
                job = self._jobs.popleft()
            _run_logged(job)
            with self._changed:
                self._finished += 1
                self._changed.notify_all()


def _run_logged(job: Callable[[], None]) -> None:
    try:
        job()
    except Exception:
        log.warning("could not hand on what the superseded memories earned", exc_info=True)
