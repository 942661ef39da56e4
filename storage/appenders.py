"""Table handles that only append, opened on a connection with no per-operation consistency check.

The store reads through handles that check for the newest version before every operation
(``read_consistency_interval=0``), so other processes' writes are seen at once. An append needs no such
check: it reads nothing, and when other commits landed since the handle's version, lance rebases it onto
them (appends, updates, deletes and compactions; not a schema change or an overwrite). The check costs
about as much as the append itself at 100k rows (it reloads the manifest), so appends go through these
handles instead.

A handle stays current through its own commits. One that has not been used for ``fresh_for`` seconds is
moved to the newest version first, so an idle process does not rebase over a long run of other
processes' commits. (Lance checks only the commits it can still list, so a rebase over versions
maintenance cleaned up meanwhile works too: a test checks it.) A failed append marks its handle stale, so
the caller's retry starts from the newest version instead of failing the same rebase again.

An append goes straight to the table's native ``add`` on LanceDB's event loop (``_direct_add``). The
public ``Table.add`` first asks the table for its schema, a second round trip, to convert rows given as
Python objects; the rows here are already an Arrow table of the table's schema, so there is nothing to
convert. Each round trip hands the interpreter lock between threads several times (the caller, LanceDB's
event loop, the Rust threads completing it), and with other threads busy each hand-over waits its turn:
with one other thread running Python, a one-row append took 50 ms through ``Table.add`` and 29 ms
directly (2 ms either way alone; ``benchmarks/lancedb_round_trips.py``). Under ``benchmarks.load`` an
append of the memories table held the write lock for 25-40 ms this way, where it costs 3-6 ms alone. A
LanceDB release without that native method (or a table object that is not LanceDB's, as in tests)
appends through ``Table.add``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

log = logging.getLogger(__name__)

DEFAULT_FRESH_FOR_SECONDS = 2.0


@dataclass
class _Handle:
    table: Any
    schema: pa.Schema  # asked once (a round trip into LanceDB); migrations run before any append
    used_at: float
    direct: Callable[[pa.Table], Any] | None  # the native append (``_direct_add``), or None: ``table.add``


def _direct_add(table: Any) -> Callable[[pa.Table], Any] | None:
    """An append of an Arrow table of ``table``'s own schema in one round trip into LanceDB: the native
    table's ``add`` run on LanceDB's event loop, as ``Table.add`` runs it after its schema check and its
    conversions of Python rows (lancedb 0.40: JSON and blob columns given as Python values; none applies
    to an Arrow table, and the tables here have no such columns). None when ``table`` is not a LanceDB
    table of that shape."""
    try:
        from lancedb.background_loop import LOOP
        from lancedb.scannable import to_scannable
        from lancedb.table import AsyncTable, LanceTable
    except ImportError:  # pragma: no cover - another LanceDB release
        return None
    if not isinstance(table, LanceTable) or not isinstance(getattr(table, "_table", None), AsyncTable):
        return None
    add = getattr(getattr(table._table, "_inner", None), "add", None)
    if add is None:  # pragma: no cover - another LanceDB release
        return None

    def append(data: pa.Table) -> Any:
        async def commit() -> Any:
            return await add(
                to_scannable(data),
                "append",
                progress=None,
                write_parallelism=None,
                allow_external_blob_outside_bases=False,
            )

        return LOOP.run(commit())

    return append


class Appenders:
    def __init__(
        self,
        db: Any,
        *,
        fresh_for: float = DEFAULT_FRESH_FOR_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._fresh_for = fresh_for
        self._clock = clock
        self._handles: dict[str, _Handle] = {}
        self._lock = threading.Lock()  # guards _handles
        self.checkouts = 0  # how often a handle was brought to the newest version (tests read it)

    def schema(self, name: str) -> pa.Schema:
        """Table ``name``'s schema, for the rows to append."""
        return self._opened(name).schema

    def add(self, name: str, data: pa.Table) -> int:
        """Append ``data`` to table ``name``; returns the version the commit made."""
        handle = self._opened(name)
        if self._clock() - handle.used_at > self._fresh_for:
            self._checkout(handle)
        try:
            result = self._append(handle, data)
        except Exception:
            handle.used_at = float("-inf")  # checked out before the next append
            raise
        handle.used_at = self._clock()
        return int(result.version)

    def _append(self, handle: _Handle, data: pa.Table) -> Any:
        if handle.direct is None:
            return handle.table.add(data)
        try:
            return handle.direct(data)
        except TypeError as exc:  # the native append is called otherwise in this release: nothing committed
            log.warning("appending through Table.add: LanceDB's native append refused the call (%s)", exc)
            handle.direct = None
            return handle.table.add(data)
        except RuntimeError as exc:  # as Table.add reports rows LanceDB cannot take
            if "Cast error" in str(exc) or "Vector column contains NaN" in str(exc):
                raise ValueError(exc) from exc
            raise

    def direct(self, name: str) -> bool:
        """Whether appends to table ``name`` go straight to LanceDB's native append (``_direct_add``)."""
        return self._opened(name).direct is not None

    def rows(self, name: str) -> int:
        """Table ``name``'s row count at the handle's version (after its own latest commit, with the
        commits it rebased over): no check for a newer version."""
        return int(self._opened(name).table.count_rows())

    def _opened(self, name: str) -> _Handle:
        with self._lock:
            handle = self._handles.get(name)
            if handle is None:  # opened at the newest version
                table = self._db.open_table(name)
                handle = self._handles[name] = _Handle(table, table.schema, self._clock(), _direct_add(table))
            return handle

    def _checkout(self, handle: _Handle) -> None:
        handle.table.checkout_latest()
        handle.used_at = self._clock()
        self.checkouts += 1
