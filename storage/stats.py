"""Counts over one scope for the ``stats`` views (the CLI's ``memoria stats``, the MCP stats resource):
read column by column, so a scope of 100k memories costs a few narrow scans, not whole records."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from storage import filters, schema
from storage.records import Scope

if TYPE_CHECKING:
    from storage.store import MemoryStore


@dataclass(frozen=True)
class WeightSummary:
    """Feedback weights of the scope's active memories (every memory starts at 1.0)."""

    moved: int  # how many differ from 1.0
    raised: int
    lowered: int
    lowest: float | None
    highest: float | None


@dataclass(frozen=True)
class ScopeStats:
    scope: Scope
    memories: int
    by_status: dict[str, int]
    by_kind: dict[str, int]  # active memories only, as recall sees them
    by_tier: dict[str, int]  # active memories only
    by_embedder: dict[str, int]  # memories with content (not purged): what re-embedding would touch
    active_ids: tuple[str, ...]
    agents: int  # distinct authors of active memories
    episodes: int
    weights: WeightSummary
    first_written: datetime | None
    last_written: datetime | None
    retrievals: int
    outcomes: dict[str, int]  # sessions reported, by outcome
    open_contradictions: int
    lineage_events: int


def scope_stats(store: MemoryStore, scope: Scope) -> ScopeStats:
    store.flush_logs()
    tables = store.tables()
    where = filters.scope_is(scope)
    rows = _columns(
        tables[schema.MEMORIES],
        where,
        ["id", "status", "kind", "protection_tier", "embedder", "agent_id", "weight", "created_at"],
    )
    memories = list({row["id"]: row for row in rows}.values())  # a retried write may have left a twin row
    active = [row for row in memories if row["status"] == "active"]
    weights = [float(row["weight"]) for row in active]
    created = [row["created_at"] for row in memories]
    outcomes = _columns(tables[schema.OUTCOMES], where, ["outcome"])
    contradictions = _columns(
        tables[schema.CONTRADICTIONS], filters.all_of(where, filters.equals("status", "open")), ["older_id"]
    )
    return ScopeStats(
        scope=scope,
        memories=len(memories),
        by_status=_count(row["status"] for row in memories),
        by_kind=_count(row["kind"] for row in active),
        by_tier=_count(row["protection_tier"] for row in active),
        by_embedder=_count(row["embedder"] for row in memories if row["status"] != "purged"),
        active_ids=tuple(sorted(row["id"] for row in active)),
        agents=len({row["agent_id"] for row in active}),
        episodes=_rows(tables[schema.EPISODES], where),
        weights=WeightSummary(
            moved=sum(1 for weight in weights if weight != 1.0),
            raised=sum(1 for weight in weights if weight > 1.0),
            lowered=sum(1 for weight in weights if weight < 1.0),
            lowest=min(weights) if weights else None,
            highest=max(weights) if weights else None,
        ),
        first_written=_utc(min(created)) if created else None,
        last_written=_utc(max(created)) if created else None,
        retrievals=_rows(tables[schema.RETRIEVALS], where),
        outcomes=_count(row["outcome"] for row in outcomes),
        open_contradictions=len(contradictions),
        lineage_events=_rows(tables[schema.LINEAGE], where),
    )


def _columns(table: Any, condition: Any, columns: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = (
        table.search().where(condition).select(columns).limit(2**31 - 1).to_arrow().to_pylist()
    )
    return rows


def _rows(table: Any, condition: Any) -> int:
    return len(_columns(table, condition, [table.schema.names[0]]))


def _count(values: Any) -> dict[str, int]:
    return dict(Counter(values).most_common())


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
