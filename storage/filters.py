"""Typed LanceDB filter expressions. Every value reaches LanceDB as a literal node built by
``lancedb.expr.lit``, never as text pasted into SQL, so a quote in an id or tag cannot change a query."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import reduce

from lancedb.expr import Expr, col, lit

from storage.records import SHARED_VISIBILITIES, Audience, Scope, Viewer


def scope_is(scope: Scope) -> Expr:
    return (col("org_id") == lit(scope.org_id)) & (col("project_id") == lit(scope.project_id))


def visible_to(viewer: Viewer) -> Expr:
    """Rows ``viewer`` may read (``storage.records.may_read``): shared ones, and its own private ones."""
    shared = col("visibility").isin([lit(v) for v in SHARED_VISIBILITIES])
    return any_of(shared, *(of_audience(audience) for audience in viewer.own_audiences))


def of_audience(audience: Audience) -> Expr:
    """Rows of exactly this audience (``storage.records.Audience``)."""
    same = col("visibility") == lit(audience.visibility)
    if not audience.private:
        return same
    same = same & (col("agent_id") == lit(audience.agent_id))
    return (
        same & (col("session_id") == lit(audience.session_id)) if audience.visibility == "session" else same
    )


def equals(column: str, value: str | int | datetime) -> Expr:
    return col(column) == lit(value)


def differs(column: str, value: str) -> Expr:
    return col(column) != lit(value)


def contains(column: str, text: str) -> Expr:
    return col(column).contains(lit(text))


def quotes(memory_id: str) -> Expr:
    """Retrieval records whose trace quotes the memory: listed beside the trace (``trace_ids``, schema
    10 on), or written in the trace (records from before)."""
    return col("trace_ids").contains(lit(f"\n{memory_id}\n")) | col("trace_json").contains(lit(memory_id))


def none_of(column: str, values: Iterable[str]) -> Expr:
    return ~one_of(column, values)


def one_of(column: str, values: Iterable[str]) -> Expr:

    return col(column).isin([lit(value) for value in values])


def any_tag(tags: Iterable[str]) -> Expr:
    """Rows carrying at least one of ``tags``, in any case (tags never contain ``|``; see ``tags_key``):
    a tag is a word a person types again, "IT-Ops" or "it-ops" (a new user's trial found nothing with the
    other case, and was told to drop the tag)."""
    return reduce(lambda left, right: left | right, (_tagged(tag) for tag in tags))


def every_tag(tags: Iterable[str]) -> Expr:
    """Rows carrying all of ``tags``, in any case."""
    return reduce(lambda left, right: left & right, (_tagged(tag) for tag in tags))


def _tagged(tag: str) -> Expr:
    return col("tags_key").lower().contains(lit(f"|{tag.lower()}|"))


def later_than(column: str, moment: datetime) -> Expr:
    return col(column) > lit(moment)


def at_or_after(column: str, moment: datetime) -> Expr:
    return col(column) >= lit(moment)


def at_or_before(column: str, moment: datetime) -> Expr:
    return col(column) <= lit(moment)


def earlier_than(column: str, moment: datetime) -> Expr:
    return col(column) < lit(moment)


def all_of(*parts: Expr | None) -> Expr:
    present = [part for part in parts if part is not None]
    if not present:
        raise ValueError("all_of needs at least one expression")
    return reduce(lambda left, right: left & right, present)


def any_of(*parts: Expr) -> Expr:
    if not parts:
        raise ValueError("any_of needs at least one expression")
    return reduce(lambda left, right: left | right, parts)


def in_fragments(fragments: Iterable[int]) -> Expr:
    """Rows stored in these fragments (a row's address is its fragment id, shifted 32 bits, and offset)."""
    return any_of(
        *((col("_rowaddr") >= lit(f << 32)) & (col("_rowaddr") < lit((f + 1) << 32)) for f in fragments)
    )


def row_ids(values: Iterable[int]) -> Expr:
    """Rows with these stable row ids (LanceDB finds them without scanning)."""
    return col("_rowid").isin([lit(int(value)) for value in values])


def newer_than_version(version: int) -> Expr:
    """Rows written or changed by a commit after ``version`` (tables with stable row ids)."""
    return col("_row_last_updated_at_version") > lit(int(version))


def updated_in_version(version: int) -> Expr:
    """Rows written or changed by the commit that made ``version`` (tables with stable row ids)."""
    return col("_row_last_updated_at_version") == lit(int(version))


def tags_key(tags: Iterable[str]) -> str:
    return "|" + "|".join(tags) + "|"
