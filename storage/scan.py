"""Whole-table reads shared by the storage modules: LanceDB's plain scan returns 10 rows unless it is
given a limit, and timestamps come back naive or in another zone depending on the path."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from lancedb.expr import Expr

EVERY_ROW = 2**31 - 1


def scan(table: Any, condition: Expr | None, columns: list[str] | None, limit: int | None = None) -> pa.Table:
    """The rows of ``table`` matching ``condition`` (every row: None), only ``columns`` (all: None)."""
    query = table.search()
    if condition is not None:
        query = query.where(condition)
    if columns is not None:
        query = query.select(columns)
    return query.limit(limit if limit is not None else EVERY_ROW).to_arrow()


def scan_rows(
    table: Any, condition: Expr | None, columns: list[str] | None, limit: int | None = None
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = scan(table, condition, columns, limit).to_pylist()
    return rows


def utc(value: datetime) -> datetime:
    """Every stored time is UTC: a naive one is taken as UTC, an aware one converted."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
