"""Store health and the report's scope-wide reads, on real LanceDB stores."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from storage import inspection, schema
from storage.records import AbLogRow, RetrievalRecord, Scope, WeightEvent
from storage.store import MemoryStore
from tests.storage.test_store import new

SCOPE = Scope("acme", "web")
OTHER = Scope("acme", "api")
T0 = datetime(2026, 5, 1, 12, tzinfo=UTC)
DIM = 8


@pytest.fixture
def store(tmp_path) -> MemoryStore:
    opened = MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM)
    yield opened
    opened.close()


def memories_table(store: MemoryStore) -> inspection.TableHealth:
    return {table.name: table for table in inspection.store_health(store).tables}[schema.MEMORIES]


def test_every_table_is_listed_with_the_store_facts(store):
    health = inspection.store_health(store)
    assert {table.name for table in health.tables} == set(store.tables())
    assert (health.uri, health.schema_version, health.vector_dim) == (store.uri, schema.SCHEMA_VERSION, DIM)
    assert all(table.rows == 0 and table.fragments == 0 for table in health.tables)


def test_each_append_adds_a_small_fragment_and_a_version_until_maintenance_compacts(store):
    before = memories_table(store)
    for number in range(3):
        store.insert_many([new(f"m{number}", f"content {number}")])
    after = memories_table(store)
    assert (after.rows, after.fragments, after.small_fragments) == (3, 3, 3)
    assert after.version == before.version + 3  # one commit per append
    assert after.data_bytes > before.data_bytes

    store.maintain(min_fragments=2)
    compacted = memories_table(store)
    assert (compacted.rows, compacted.fragments) == (3, 1)


def test_indexes_are_listed_with_the_rows_they_cover_and_the_rows_appended_since(store):
    store.insert_many([new("m0", "zero"), new("m1", "one")])
    indexes = {index.name: index for index in memories_table(store).indexes}
    assert indexes["id_idx"].columns == ("id",) and indexes["id_idx"].index_type == "BTree"
    assert indexes["search_text_idx"].index_type == "FTS"
    # Built on the empty table by the migrations: both rows came after.
    assert {(i.indexed_rows, i.unindexed_rows) for i in indexes.values()} == {(0, 2)}
    store.maintain(min_fragments=1)
    indexes = {index.name: index for index in memories_table(store).indexes}
    assert {(i.indexed_rows, i.unindexed_rows) for i in indexes.values()} == {(2, 0)}


def test_bytes_on_disk_count_every_file_of_a_local_store(store, tmp_path):
    store.insert_many([new("m0", "zero")])
    health = inspection.store_health(store)
    assert health.disk_bytes == sum(
        path.stat().st_size for path in (tmp_path / "db").rglob("*") if path.is_file()
    )
    table_folder = tmp_path / "db" / f"{schema.MEMORIES}.lance"
    assert memories_table(store).disk_bytes == sum(
        p.stat().st_size for p in table_folder.rglob("*") if p.is_file()
    )
    assert all(
        table.disk_bytes is not None and table.disk_bytes >= table.data_bytes for table in health.tables
    )


@pytest.mark.slow
def test_a_store_that_is_not_a_local_folder_has_no_disk_size():
    with MemoryStore.open("memory://inspection", vector_dim=DIM) as remote:
        health = inspection.store_health(remote)
    assert health.disk_bytes is None and all(table.disk_bytes is None for table in health.tables)


def ab_rows(retrieval_id: str, at: datetime, ranks: list[tuple[str, int, int]], scope: Scope = SCOPE):
    return [
        AbLogRow(
            retrieval_id=retrieval_id,
            session_id="s",
            org_id=scope.org_id,
            project_id=scope.project_id,
            query_text="q",
            observation_id=memory_id,
            relevance_score=0.5,
            feedback_weight=1.0,
            weighted_score=0.5,
            unweighted_rank=unweighted,
            weighted_rank=weighted,
            weighting_enabled=True,
            created_at=at,
        )
        for memory_id, unweighted, weighted in ranks
    ]


def test_recent_ab_rows_are_those_of_the_newest_retrievals_of_the_scope(store):
    store.log_ab_rows(ab_rows("r_old", T0, [("a", 0, 0)]))
    store.log_ab_rows(ab_rows("r_mid", T0 + timedelta(minutes=1), [("a", 0, 1), ("b", 1, 0)]))
    store.log_ab_rows(ab_rows("r_new", T0 + timedelta(minutes=2), [("c", 0, 0)]))
    store.log_ab_rows(ab_rows("r_other", T0 + timedelta(minutes=3), [("z", 0, 0)], scope=OTHER))
    rows = inspection.recent_ab_rows(store, SCOPE, 2)
    # The two newest of this scope, oldest first, each retrieval's rows by weighted rank.
    assert [(r.retrieval_id, r.observation_id, r.weighted_rank) for r in rows] == [
        ("r_mid", "b", 0),
        ("r_mid", "a", 1),
        ("r_new", "c", 0),
    ]
    assert rows[0].created_at == T0 + timedelta(minutes=1)
    assert len(inspection.recent_ab_rows(store, SCOPE, 100)) == 4
    assert inspection.recent_ab_rows(store, Scope("nobody", "none"), 5) == []


def test_top_ks_come_from_the_recorded_retrievals(store):
    record = RetrievalRecord(
        retrieval_id="r1",
        org_id=SCOPE.org_id,
        project_id=SCOPE.project_id,
        session_id="s",
        agent_id="a",
        query="q",
        purpose="recall",
        created_at=T0,
        top_k=7,
        char_budget=1000,
        context_ids=("a",),
        trace_json="{}",
    )
    store.record_retrieval(record)
    store.record_retrieval(replace(record, retrieval_id="r2", top_k=3, org_id="elsewhere"))
    assert inspection.retrieval_top_ks(store, SCOPE, ["r1", "r2", "missing"]) == {"r1": 7}


def test_scope_weight_events_are_the_scopes_oldest_first(store):
    def event(memory_id: str, minutes: int, after: float, scope: Scope = SCOPE) -> WeightEvent:
        return WeightEvent(
            memory_id, scope.org_id, scope.project_id, "s", 1.0, after, 1, T0 + timedelta(minutes=minutes)
        )

    store.add_weight_events([event("b", 5, 1.15), event("a", 1, 0.85)])
    store.add_weight_events([event("z", 0, 1.15, scope=OTHER)])
    events = inspection.scope_weight_events(store, SCOPE)
    assert [(e.memory_id, e.weight_after, e.at) for e in events] == [
        ("a", 0.85, T0 + timedelta(minutes=1)),
        ("b", 1.15, T0 + timedelta(minutes=5)),
    ]
