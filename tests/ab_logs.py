"""A retrieval's A/B log rows read straight from the table, for tests of what a recall logged (the
product reads only the ranked rows of the newest retrievals: ``storage.inspection.recent_ab_rows``)."""

from __future__ import annotations

from storage import filters, schema
from storage.records import AbLogRow, Scope
from storage.scan import scan_rows
from storage.store import MemoryStore


def ab_log_rows(store: MemoryStore, scope: Scope, retrieval_id: str) -> list[AbLogRow]:
    """Direct matches by weighted rank, then the episode siblings (no rank)."""
    store.flush_logs()
    condition = filters.all_of(filters.scope_is(scope), filters.equals("retrieval_id", retrieval_id))
    rows = scan_rows(store.tables()[schema.AB_LOGS], condition, None)
    return sorted(
        (AbLogRow(**row) for row in rows),
        key=lambda row: (row.weighted_rank is None, row.weighted_rank or 0, row.observation_id),
    )
