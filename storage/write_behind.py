"""Batched appends for the logs a recall writes (its retrieval record and A/B rows), off the request path.

A LanceDB append is a commit (a few ms and a new version); a recall wrote two of them. Here they are
queued and a background thread writes everything queued every ``interval`` seconds as one append per
table. A reader of those tables in this process reads the rows still queued (``queued``) beside the
table's, so a recall's retrieval_id is at once readable by explain_ranking without waiting for a write;
``flush`` writes them now (a report does, before a purge could need them in the table), and ``close``
flushes what is left. What a crash can lose is the last ``interval`` of logs, never a memory: memory
writes are not deferred.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

Writer = Callable[[Any, Sequence[Mapping[str, Any]]], object]  # (table, rows): one append


class WriteBehind:
    def __init__(self, write: Writer, *, interval: float = 0.2) -> None:
        self._write = write
        self._interval = interval
        self._pending: dict[Hashable, list[Mapping[str, Any]]] = {}
        # Rows a flush took and is writing: queued until their append committed, so that a row is always
        # in the queue or in its table (a reader looks in the queue first, then in the table).
        self._in_flight: dict[Hashable, list[Mapping[str, Any]]] = {}
        self._lock = threading.Lock()  # guards _pending and _in_flight
        self._flushing = threading.Lock()  # one flush at a time, so batches land in order
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="memoria-log-writer", daemon=True)
        self._thread.start()

    def add(self, table: Hashable, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        # ``_closed`` is set under the lock: a row is either queued before close's flush, or written here.
        with self._lock:
            if not self._closed:
                self._pending.setdefault(table, []).extend(rows)
                return
        self._write(table, rows)

    def pending(self) -> int:
        with self._lock:
            return sum(len(rows) for rows in self._pending.values())

    def queued(self, table: Hashable, keep: Callable[[Mapping[str, Any]], bool]) -> list[Mapping[str, Any]]:
        """The rows of ``table`` not yet committed that ``keep`` accepts, oldest first (rows a flush is
        writing included). Read this before the table: a row leaves the queue only once it is in the table."""
        with self._lock:
            rows = [*self._in_flight.get(table, ()), *self._pending.get(table, ())]
        return [row for row in rows if keep(row)]

    def flush(self) -> None:
        """Write everything queued now (the caller waits); rows whose write fails stay queued and the
        error is raised."""
        with self._flushing:
            with self._lock:
                batches, self._pending = self._pending, {}
                self._in_flight = dict(batches)
            error: Exception | None = None
            for table, rows in batches.items():
                written = False
                try:
                    self._write(table, rows)
                    written = True
                except Exception as exc:
                    error = exc
                with self._lock:
                    del self._in_flight[table]
                    if not written:  # back in the queue, ahead of what was queued since
                        self._pending[table] = rows + self._pending.get(table, [])
            if error is not None:
                raise error

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._wake.set()
        self._thread.join(timeout=10)
        self.flush()

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self._interval)
            if self._closed:
                return
            try:
                self.flush()
            except Exception:
                log.warning("writing retrieval logs failed; will retry", exc_info=True)
