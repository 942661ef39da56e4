"""Whole-table reads shared by the storage modules: LanceDB's plain scan returns 10 rows unless it is
given a limit, and timestamps come back naive or in another zone depending on the path.

A read of a LanceDB table is one round trip into LanceDB's event loop (``_one_round_trip``). Its
synchronous query builder makes several: it asks the table for its schema as the query is built, again
to decide whether the scan needs row ids, again to finish the result, and once more per batch read. Each
round trip hands the interpreter lock between threads (the caller, LanceDB's event loop, the Rust threads
completing it), and under load each hand-over waits its turn (``storage.appenders`` says the same of an
append). A filtered read of one row measured 6.75 ms the builder's way against 4.97 ms in one round
trip alone, 201 against 92 ms beside one thread running Python and 685 against 292 ms beside two
(``python -m benchmarks.lancedb_round_trips --calls 60``, 2026-12-05). A table that is not LanceDB's (a test's) is read through
its own ``search()``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from lancedb.expr import Expr

EVERY_ROW = 2**31 - 1


def scan(
    table: Any,
    condition: Expr | None,
    columns: list[str] | None,
    limit: int | None = None,
    *,
    with_row_id: bool = False,
) -> pa.Table:
    """The rows of ``table`` matching ``condition`` (every row: None), only ``columns`` (all: None), with
    LanceDB's ``_rowid`` column too if ``with_row_id``."""
    limit = limit if limit is not None else EVERY_ROW
    native = _native(table)
    if native is not None:
        return _one_round_trip(native, condition, columns, limit, with_row_id)
    query = _narrowed(table.search(), condition, columns)
    if with_row_id:
        query = query.with_row_id(True)
    result: pa.Table = query.limit(limit).to_arrow()
    return result


def scan_rows(
    table: Any, condition: Expr | None, columns: list[str] | None, limit: int | None = None
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = scan(table, condition, columns, limit).to_pylist()
    return rows


def utc(value: datetime) -> datetime:
    """Every stored time is UTC: a naive one is taken as UTC, an aware one converted."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _narrowed(query: Any, condition: Expr | None, columns: list[str] | None) -> Any:
    """A query of either LanceDB builder (synchronous or asynchronous: the same clauses) limited to the
    rows matching ``condition`` and to ``columns``."""
    if condition is not None:
        query = query.where(condition)
    if columns is not None:
        query = query.select(columns)
    return query


def _native(table: Any) -> Any | None:
    """The asynchronous table behind a LanceDB table handle (what its synchronous methods run on
    LanceDB's event loop), or None for anything else."""
    try:
        from lancedb.table import AsyncTable, LanceTable
    except ImportError:  # pragma: no cover - another LanceDB release
        return None
    native = getattr(table, "_table", None)
    return native if isinstance(table, LanceTable) and isinstance(native, AsyncTable) else None


def _one_round_trip(
    native: Any, condition: Expr | None, columns: list[str] | None, limit: int, with_row_id: bool
) -> pa.Table:
    """The query built, run and collected inside one coroutine on LanceDB's event loop: the caller's
    thread crosses into it once, whatever the schema look-ups and batches inside."""
    from lancedb.background_loop import LOOP

    async def read() -> pa.Table:
        query = _narrowed(native.query(), condition, columns)
        if with_row_id:
            query = query.with_row_id()
        result: pa.Table = await query.limit(limit).to_arrow()
        return result

    result: pa.Table = LOOP.run(read())
    return result
