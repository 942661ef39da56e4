"""Whole-store and whole-scope reads for people looking at a store (``memoria report``): table health and
the scope-wide reads the store's typed methods do not offer. Every read selects only the columns it needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lancedb.expr import Expr

from storage import filters, schema
from storage.records import AbLogRow, Scope, WeightEvent
from storage.scan import scan_rows, utc
from storage.store import MemoryStore


@dataclass(frozen=True)
class IndexHealth:
    name: str
    index_type: str
    columns: tuple[str, ...]
    indexed_rows: int
    unindexed_rows: int  # rows appended since the index was built (scanned without it until maintenance)


@dataclass(frozen=True)
class TableHealth:
    name: str
    rows: int
    fragments: int
    small_fragments: int  # appends that maintenance compacts once enough have piled up
    version: int
    data_bytes: int  # the current version's data files
    disk_bytes: int | None  # every file under the table's folder (older versions too); None: not local
    indexes: tuple[IndexHealth, ...]


@dataclass(frozen=True)
class StoreHealth:
    uri: str
    schema_version: int
    vector_dim: int
    tables: tuple[TableHealth, ...]
    disk_bytes: (
        int | None
    )  # the whole store folder (the meta table, leftovers of migrations too); None: not local


def store_health(store: MemoryStore) -> StoreHealth:
    """Rows, fragments, version, bytes and indexes of every table (manifest reads: no table scan)."""
    store.flush_logs()
    return StoreHealth(
        uri=store.uri,
        schema_version=store.schema_version,
        vector_dim=store.vector_dim,
        tables=tuple(_table_health(name, table) for name, table in store.tables().items()),
        disk_bytes=_folder_bytes(store.uri),
    )


def _table_health(name: str, table: Any) -> TableHealth:
    stats = table.stats()
    fragments = stats["fragment_stats"]
    return TableHealth(
        name=name,
        rows=int(stats["num_rows"]),
        fragments=int(fragments["num_fragments"]),
        small_fragments=int(fragments["num_small_fragments"]),
        version=int(table.version),
        data_bytes=int(stats["total_bytes"]),
        disk_bytes=_folder_bytes(str(table.uri)),
        indexes=tuple(
            IndexHealth(
                name=index.name,
                index_type=str(index.index_type),
                columns=tuple(index.columns),
                indexed_rows=int(index.num_indexed_rows or 0),
                unindexed_rows=int(index.num_unindexed_rows or 0),
            )
            for index in table.list_indices()
        ),
    )


def _folder_bytes(uri: str) -> int | None:
    if uri.startswith("file://"):
        uri = uri[len("file://") :]
    elif "://" in uri:
        return None  # an object store: listing every object to size it would be slow and cost requests
    folder = Path(uri).expanduser()
    if not folder.is_dir():
        return None
    total = 0
    for path in folder.rglob("*"):
        try:
            total += path.stat().st_size if path.is_file() else 0
        except FileNotFoundError:  # a running server's maintenance removed an old version meanwhile
            continue
    return total


def recent_ab_rows(store: MemoryStore, scope: Scope, retrievals: int) -> list[AbLogRow]:
    """The ranked A/B rows (direct matches; episode siblings have no rank) of the scope's newest
    ``retrievals`` recalls, oldest retrieval first, each retrieval's rows by weighted rank. Reads two
    columns of the scope's rows to pick the retrievals, then their rows."""
    if retrievals <= 0:
        return []
    store.flush_logs()
    picks = _select(store, schema.AB_LOGS, filters.scope_is(scope), ["retrieval_id", "created_at"])
    newest: dict[str, datetime] = {}
    for row in picks:
        newest[row["retrieval_id"]] = row["created_at"]
    chosen = sorted(newest, key=lambda retrieval_id: (newest[retrieval_id], retrieval_id))[-retrievals:]
    if not chosen:
        return []
    order = {retrieval_id: position for position, retrieval_id in enumerate(chosen)}
    found: dict[tuple[str, str], AbLogRow] = {}
    for start in range(0, len(chosen), 1_000):
        condition = filters.all_of(
            filters.scope_is(scope), filters.one_of("retrieval_id", chosen[start : start + 1_000])
        )
        for row in _select(store, schema.AB_LOGS, condition, None):
            record = AbLogRow(**{**row, "created_at": utc(row["created_at"])})
            if record.unweighted_rank is None or record.weighted_rank is None:
                continue
            found.setdefault((record.retrieval_id, record.observation_id), record)
    return sorted(found.values(), key=lambda row: (order[row.retrieval_id], row.weighted_rank or 0))


def retrieval_top_ks(store: MemoryStore, scope: Scope, retrieval_ids: Sequence[str]) -> dict[str, int]:
    """retrieval id -> the top_k it was asked for (ids without a recorded retrieval are left out)."""
    ids = list(dict.fromkeys(retrieval_ids))
    if not ids:
        return {}
    store.flush_logs()
    found: dict[str, int] = {}
    for start in range(0, len(ids), 1_000):
        condition = filters.all_of(
            filters.scope_is(scope), filters.one_of("retrieval_id", ids[start : start + 1_000])
        )
        for row in _select(store, schema.RETRIEVALS, condition, ["retrieval_id", "top_k"]):
            found[row["retrieval_id"]] = int(row["top_k"])
    return found


def scope_weight_events(store: MemoryStore, scope: Scope) -> list[WeightEvent]:
    """Every weight change in the scope, oldest first."""
    rows = _select(store, schema.WEIGHT_EVENTS, filters.scope_is(scope), None)
    events = {
        (row["memory_id"], row["session_id"], row["revision"], row["at"]): WeightEvent(
            **{**row, "at": utc(row["at"])}
        )
        for row in rows
    }
    return sorted(events.values(), key=lambda event: (event.at, event.revision, event.memory_id))


def _select(store: MemoryStore, table_name: str, condition: Expr, columns: list[str] | None) -> list[dict]:
    return scan_rows(store.tables()[table_name], condition, columns)
