"""Counts over one scope for the ``stats`` views (the CLI's ``memoria stats``, the MCP stats resource):
read column by column, so a scope of 100k memories costs a few narrow scans, not whole records."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from storage import filters, schema
from storage.records import CONTENT_STATUSES, Scope, Viewer, org_shelf
from storage.scan import scan, scan_rows, utc

if TYPE_CHECKING:
    from storage.store import MemoryStore

# The status stats give an active memory past its expiry (ephemeral tier) until maintenance retracts it.
EXPIRED = "expired"


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


def scope_stats(store: MemoryStore, scope: Scope, viewer: Viewer | None = None) -> ScopeStats:
    """What ``scope`` holds; with a ``viewer``, only the memories it may read (shared ones and its own
    private ones) are counted, with the open contradictions between them, the lineage events about them
    and the episodes they are in."""
    store.flush_logs()
    tables = store.tables()
    where = filters.scope_is(scope)
    readable = filters.all_of(where, filters.visible_to(viewer)) if viewer is not None else where
    rows = scan_rows(
        tables[schema.MEMORIES],
        readable,
        [
            "id",
            "status",
            "kind",
            "protection_tier",
            "embedder",
            "agent_id",
            "weight",
            "created_at",
            "expires_at",
            "episode_id",
        ],
    )
    memories = list({row["id"]: row for row in rows}.values())  # a retried write may have left a twin row
    now = datetime.now(UTC)
    for row in memories:
        # An ephemeral memory past its expiry is out of recall and listings already; the next maintenance
        # round retracts it. Counted as "expired" until then, not as active.
        if row["status"] == "active" and row["expires_at"] is not None and utc(row["expires_at"]) <= now:
            row["status"] = EXPIRED
    active = [row for row in memories if row["status"] == "active"]
    weights = [float(row["weight"]) for row in active]
    created = [row["created_at"] for row in memories]
    outcomes = scan_rows(tables[schema.OUTCOMES], where, ["outcome"])
    contradictions = scan_rows(
        tables[schema.CONTRADICTIONS],
        filters.all_of(where, filters.equals("status", "open")),
        ["older_id", "newer_id"],
    )
    seen = {row["id"] for row in memories}
    if viewer is not None:  # only pairs of memories the viewer may read
        # (the org shelf's too, which every project reads: a pair with a project's memory is kept here)
        named = {memory_id for row in contradictions for memory_id in (row["older_id"], row["newer_id"])}
        if named - seen and not scope.is_org_shelf:
            shelf = filters.all_of(
                filters.scope_is(org_shelf(scope.org_id)), filters.one_of("id", sorted(named - seen))
            )
            seen |= {row["id"] for row in scan_rows(tables[schema.MEMORIES], shelf, ["id"])}
        contradictions = [row for row in contradictions if {row["older_id"], row["newer_id"]} <= seen]
    return ScopeStats(
        scope=scope,
        memories=len(memories),
        by_status=_count(row["status"] for row in memories),
        by_kind=_count(row["kind"] for row in active),
        by_tier=_count(row["protection_tier"] for row in active),
        by_embedder=_count(
            row["embedder"]
            for row in memories
            if row["status"] in CONTENT_STATUSES or row["status"] == EXPIRED
        ),
        active_ids=tuple(sorted(row["id"] for row in active)),
        agents=len({row["agent_id"] for row in active}),
        episodes=_rows(tables[schema.EPISODES], where)
        if viewer is None
        else len({row["episode_id"] for row in memories if row["episode_id"]}),
        weights=WeightSummary(
            moved=sum(1 for weight in weights if weight != 1.0),
            raised=sum(1 for weight in weights if weight > 1.0),
            lowered=sum(1 for weight in weights if weight < 1.0),
            lowest=min(weights) if weights else None,
            highest=max(weights) if weights else None,
        ),
        first_written=utc(min(created)) if created else None,
        last_written=utc(max(created)) if created else None,
        retrievals=_rows(tables[schema.RETRIEVALS], where),
        outcomes=_count(row["outcome"] for row in outcomes),
        open_contradictions=len(contradictions),
        lineage_events=_rows(tables[schema.LINEAGE], where)
        if viewer is None
        else sum(
            1 for row in scan_rows(tables[schema.LINEAGE], where, ["memory_id"]) if row["memory_id"] in seen
        ),
    )


def embedder_counts(store: MemoryStore) -> dict[str, int]:
    """Memories with content in the whole store, by the embedder that made their vectors (one scan of
    two columns, counted in Arrow: a million memories never become Python rows): what `memoria reembed`
    would touch. A memory read twice is counted once."""
    data = scan(
        store.tables()[schema.MEMORIES], filters.one_of("status", CONTENT_STATUSES), ["id", "embedder"]
    )
    pairs = data.group_by(["id", "embedder"], use_threads=False).aggregate([])
    if pairs.num_rows != pc.count_distinct(pairs["id"]).as_py():  # a memory with two embedders: the last read
        return _count({row["id"]: row["embedder"] for row in data.to_pylist()}.values())
    counts = pc.value_counts(pairs["embedder"]).to_pylist()
    return dict(sorted(((c["values"], c["counts"]) for c in counts), key=lambda item: -item[1]))


def stale_embedders(store: MemoryStore, active: str) -> dict[str, int]:
    """``embedder_counts`` of every embedder but ``active``: the memories vector search cannot compare."""
    return {name: count for name, count in embedder_counts(store).items() if name != active}


def _rows(table: Any, condition: Any) -> int:
    return len(scan_rows(table, condition, [table.schema.names[0]]))


def _count(values: Any) -> dict[str, int]:
    return dict(Counter(values).most_common())


def org_wide_active(store: MemoryStore, scope: Scope, viewer: Viewer | None = None) -> int:
    """The active memories remembered for the whole org of ``scope`` (its shelf; those ``viewer`` may read,
    with one): every project of the org reads them beside its own, so its listing shows them."""
    if scope.is_org_shelf:
        return 0
    where = filters.all_of(filters.scope_is(org_shelf(scope.org_id)), filters.equals("status", "active"))
    if viewer is not None:
        where = filters.all_of(where, filters.visible_to(viewer))
    now = datetime.now(UTC)
    rows = scan_rows(store.tables()[schema.MEMORIES], where, ["id", "expires_at"])
    return len({row["id"] for row in rows if row["expires_at"] is None or utc(row["expires_at"]) > now})
