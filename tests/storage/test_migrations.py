"""Opening a store written by an earlier schema version upgrades it in place, keeping every row."""

import json
import threading
from datetime import UTC, datetime, timedelta

import lancedb
import numpy as np
import pyarrow as pa
import pytest

from storage import migrations, schema
from storage.records import Scope, View, Viewer
from storage.store import MemoryStore
from tests.ab_logs import ab_log_rows

NOW = datetime(2026, 2, 1, tzinfo=UTC)


def make_v1_store(path) -> None:
    db = lancedb.connect(str(path))
    migrations.m001_create_tables(db, migrations.MigrationContext(vector_dim=8))
    migrations.write_meta(db, {"schema_version": "1", "vector_dim": "8"})
    row = {
        "id": "mem_old",
        "org_id": "o",
        "project_id": "p",
        "agent_id": "a",
        "session_id": "s",
        "episode_id": "ep",
        "kind": "fact",
        "content": "written before simhash existed",
        "content_hash": "h",
        "tags": [],
        "tags_key": "||",
        "protection_tier": "standard",
        "status": "active",
        "replaced_by": None,
        "weight": 1.0,
        "created_at": NOW,
        "updated_at": NOW,
        "embedder": "e",
        "search_text": "written before simhash existed",
        "vector": [1.0] + [0.0] * 7,
    }
    db.open_table(schema.LEGACY_MEMORIES).add(pa.Table.from_pylist([row], schema=schema.memories_schema(8)))


def test_migrations_are_numbered_in_order():
    assert [m.number for m in migrations.MIGRATIONS] == list(range(1, schema.SCHEMA_VERSION + 1))


def test_a_version_1_store_is_upgraded_and_keeps_its_rows(tmp_path, caplog):
    make_v1_store(tmp_path / "db")
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as store:
        assert store.schema_version == schema.SCHEMA_VERSION
        # Said, and known to the caller (a trial: a store an older server was serving was upgraded silently).
        assert store.upgraded_from == 1
        assert f"upgrading the store from schema version 1 to {schema.SCHEMA_VERSION}" in caplog.text
        old = store.get_memory("mem_old")
        assert old.content == "written before simhash existed" and old.simhash is None
        rows = store.aggregation_rows(Scope("o", "p"), 10)
        assert [(r.id, r.simhash) for r in rows] == [("mem_old", None)]
        assert [m.id for m in store.episode_member_stubs(Scope("o", "p"), ["ep"])] == ["mem_old"]
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as again:  # re-opening applies nothing twice
        assert again.schema_version == schema.SCHEMA_VERSION and again.count_memories() == 1
        assert again.upgraded_from is None


def test_memories_stored_before_visibility_existed_are_read_by_their_whole_project(tmp_path):
    make_v1_store(tmp_path / "db")
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as store:
        assert store.get_memory("mem_old").visibility == "project"
        stranger = View(Scope("o", "p"), Viewer("someone-else", "ses_other"))
        hits = store.vector_search(
            stranger, np.asarray([1.0] + [0.0] * 7, dtype=np.float32), embedder="e", limit=5
        )
        assert [hit.record.id for hit in hits] == ["mem_old"]


def test_the_upgrade_moves_memories_to_a_table_with_stable_row_ids(tmp_path):
    make_v1_store(tmp_path / "db")
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as store:
        db = lancedb.connect(str(tmp_path / "db"))
        assert migrations.open_or_none(db, schema.LEGACY_MEMORIES) is None
        store.get_memory("mem_old", Scope("o", "p"))  # a scope copy at this version
        with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as other:
            other.retract(Scope("o", "p"), ["mem_old"], NOW)
        # Only possible with stable row ids: the copy reads the one changed row by its row version.
        assert store.get_memory("mem_old", Scope("o", "p")).status == "retracted"
        assert store.cache.deltas == 1


def test_a_copy_interrupted_by_a_crash_is_started_again(tmp_path):
    make_v1_store(tmp_path / "db")
    db = lancedb.connect(str(tmp_path / "db"))
    for migration in migrations.MIGRATIONS[1:3]:
        migration.apply(db, migrations.MigrationContext(vector_dim=8))
    migrations.write_meta(db, {"schema_version": "3"})
    half = db.create_table(schema.MEMORIES, schema=db.open_table(schema.LEGACY_MEMORIES).schema)
    assert half.count_rows() == 0  # the crash came before any row was copied
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as store:
        assert store.count_memories() == 1 and store.get_memory("mem_old").content


def test_the_meta_is_written_in_one_commit_so_a_crash_never_leaves_it_without_its_schema_version(tmp_path):
    # A kill between a delete of the old rows and the add of the new ones left a store with no
    # schema_version: its next start ran every migration from the first on the upgraded tables.
    db = lancedb.connect(str(tmp_path / "db"))
    migrations.write_meta(db, {"schema_version": "1", "vector_dim": "8", "created_at": "then"})
    meta = db.open_table(schema.META)
    before = meta.version
    migrations.write_meta(db, {"schema_version": "2", "vector_dim": "8"})
    meta.checkout_latest()
    assert meta.version == before + 1  # one commit: the meta is as it was, or as written
    assert migrations.read_meta(db) == {"schema_version": "2", "vector_dim": "8", "created_at": "then"}
    assert meta.count_rows() == 3


def drop_schema_version(path) -> None:
    """The meta as a kill in the old two-step write could leave it: without its schema version."""
    db = lancedb.connect(str(path))
    db.open_table(schema.META).delete("key IN ('schema_version', 'vector_dim')")


def test_a_store_whose_meta_lost_its_schema_version_is_read_from_its_tables_and_keeps_its_memories(tmp_path):
    make_v1_store(tmp_path / "db")
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8):
        pass  # upgraded to the current version
    drop_schema_version(tmp_path / "db")
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as store:
        assert store.schema_version == schema.SCHEMA_VERSION
        assert store.count_memories() == 1 and store.get_memory("mem_old").content
    meta = migrations.read_meta(lancedb.connect(str(tmp_path / "db")))
    assert (meta["schema_version"], meta["vector_dim"]) == (str(schema.SCHEMA_VERSION), "8")


def test_a_store_that_lost_its_schema_version_before_the_stable_row_id_copy_goes_on_from_its_tables(tmp_path):
    make_v1_store(tmp_path / "db")
    db = lancedb.connect(str(tmp_path / "db"))
    for migration in migrations.MIGRATIONS[1:3]:
        migration.apply(db, migrations.MigrationContext(vector_dim=8))
    assert migrations.version_from_tables(db) == (3, 8)
    drop_schema_version(tmp_path / "db")
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as store:
        assert store.schema_version == schema.SCHEMA_VERSION and store.count_memories() == 1


def test_a_new_store_shows_no_version_in_its_tables(tmp_path):
    assert migrations.version_from_tables(lancedb.connect(str(tmp_path / "db"))) is None


def test_the_stable_row_id_copy_never_drops_a_memories_table_larger_than_the_one_it_copies(tmp_path):
    make_v1_store(tmp_path / "db")
    db = lancedb.connect(str(tmp_path / "db"))
    for migration in migrations.MIGRATIONS[1:3]:
        migration.apply(db, migrations.MigrationContext(vector_dim=8))
    legacy = db.open_table(schema.LEGACY_MEMORIES)
    rows = legacy.to_arrow()
    larger = db.create_table(schema.MEMORIES, schema=legacy.schema)
    larger.add(pa.concat_tables([rows, rows]))
    with pytest.raises(RuntimeError, match="holds more memories than"):
        migrations.m004_stable_row_ids(db, migrations.MigrationContext(vector_dim=8))
    assert db.open_table(schema.MEMORIES).count_rows() == 2  # left as it was


@pytest.mark.slow
def test_replicas_opening_a_new_object_store_at_once_migrate_it_once(s3_bucket):
    # No lock file keeps replicas on an object store apart; the migration lease does: a table whose
    # first manifest is a conditional put, so only one replica creates it.
    bucket, options = s3_bucket
    metas, errors = [], []

    def open_replica() -> None:
        try:
            db = lancedb.connect(f"{bucket}/store", storage_options=options)
            metas.append(migrations.apply_pending(db, 8, other_processes_excluded=False))
        except Exception as exc:  # pragma: no cover - what the test is looking for
            errors.append(exc)

    replicas = [threading.Thread(target=open_replica) for _ in range(4)]
    for replica in replicas:
        replica.start()
    for replica in replicas:
        replica.join(timeout=120)
    assert errors == []
    assert [meta["schema_version"] for meta in metas] == [str(schema.SCHEMA_VERSION)] * 4
    tables = lancedb.connect(f"{bucket}/store", storage_options=options).list_tables().tables
    assert migrations.MIGRATION_LEASE not in tables
    assert schema.LEGACY_MEMORIES not in tables


@pytest.mark.slow
def test_a_lease_left_by_a_replica_that_died_mid_migration_is_taken_over(tmp_path):
    db = lancedb.connect(str(tmp_path / "db"))
    abandoned = datetime.now(UTC) - migrations.LEASE_EXPIRES_AFTER - timedelta(seconds=1)
    db.create_table(migrations.MIGRATION_LEASE, data=[{"holder": "dead", "taken_at": abandoned}])
    meta = migrations.apply_pending(db, 8, other_processes_excluded=False)
    assert meta["schema_version"] == str(schema.SCHEMA_VERSION)
    assert migrations.MIGRATION_LEASE not in db.list_tables().tables


class RacedConnection:
    """A real connection whose first lease create loses a three-way race: lance 13 answers the third
    concurrent overwrite with a retryable commit conflict rather than "already exists"."""

    def __init__(self, db) -> None:
        self.db = db
        self.conflicts_left = 1

    def create_table(self, name, *args, **kwargs):
        if name == migrations.MIGRATION_LEASE and self.conflicts_left:
            self.conflicts_left -= 1
            raise RuntimeError(
                "lance error: Retryable commit conflict for version 2: This Overwrite transaction was "
                "preempted by concurrent transaction Overwrite at version 2. Please retry."
            )
        return self.db.create_table(name, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.db, name)


@pytest.mark.slow
def test_a_lease_create_that_loses_to_a_concurrent_overwrite_waits_and_takes_the_lease_after(tmp_path):
    db = RacedConnection(lancedb.connect(str(tmp_path / "db")))
    meta = migrations.apply_pending(db, 8, other_processes_excluded=False)
    assert db.conflicts_left == 0
    assert meta["schema_version"] == str(schema.SCHEMA_VERSION)
    assert migrations.MIGRATION_LEASE not in db.list_tables().tables


def test_a_lease_create_that_fails_for_another_reason_is_not_mistaken_for_a_lost_race():
    assert migrations.lost_the_race(RuntimeError("Table 'migration_lease' already exists"))
    assert not migrations.lost_the_race(OSError("permission denied: s3://memoria/store"))


def test_reports_made_before_per_memory_credit_read_back_as_full_steps_for_no_query(tmp_path):
    make_v1_store(tmp_path / "db")
    db = lancedb.connect(str(tmp_path / "db"))
    old_report = {
        "session_id": "ses_old",
        "org_id": "o",
        "project_id": "p",
        "outcome": "success",
        "score": 1.0,
        "note": None,
        "memory_ids": ["mem_old"],
        "first_reported_at": NOW,
        "reported_at": NOW,
        "revision": 1,
    }
    db.open_table(schema.OUTCOMES).add(pa.Table.from_pylist([old_report], schema=schema.outcomes_schema()))
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as store:
        [report] = store.outcomes_in_scope(Scope("o", "p"))
        assert (report.credits, report.queries, report.query_embedder) == ((), (), None)
        [credit] = report.memory_credits()
        assert (credit.memory_id, credit.role, credit.share, credit.score, credit.query_index) == (
            "mem_old",
            "context",
            1.0,
            1.0,
            None,
        )
        assert "context_weight" in store.tables()[schema.AB_LOGS].schema.names


def test_legacy_reports_become_one_credit_per_memory_of_each_sessions_newest_revision():
    rows = migrations.legacy_credit_rows(
        [
            {
                "org_id": "o",
                "project_id": "p",
                "session_id": "s",
                "revision": 1,
                "first_reported_at": NOW,
                "score": 0.0,
                "memory_ids": ["a"],
            },
            {
                "org_id": "o",
                "project_id": "p",
                "session_id": "s",
                "revision": 2,
                "first_reported_at": NOW,
                "score": 1.0,
                "memory_ids": ["a", "b", "a"],
            },
        ]
    )
    assert [(r["memory_id"], r["kind"], r["revision"], r.get("share"), r.get("score")) for r in rows] == [
        ("", "session", 2, None, None),
        ("a", "credit", 2, 1.0, 1.0),
        ("b", "credit", 2, 1.0, 1.0),
    ]


def test_ab_rows_logged_before_schema_6_keep_their_score_as_the_boosted_one_and_ranks_become_optional(
    tmp_path,
):
    make_v1_store(tmp_path / "db")
    db = lancedb.connect(str(tmp_path / "db"))
    old_row = {
        "retrieval_id": "ret_old",
        "session_id": "ses_old",
        "org_id": "o",
        "project_id": "p",
        "query_text": "postgres pool",
        "observation_id": "mem_old",
        "relevance_score": 0.72,  # then: relevance plus the corroboration boost
        "feedback_weight": 1.1,
        "weighted_score": 0.792,
        "unweighted_rank": 0,
        "weighted_rank": 0,
        "weighting_enabled": True,
        "created_at": NOW,
    }
    db.open_table(schema.AB_LOGS).add(pa.Table.from_pylist([old_row], schema=schema.ab_logs_schema()))
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as store:
        table = store.tables()[schema.AB_LOGS]
        assert table.schema.field("unweighted_rank").nullable and table.schema.field("weighted_rank").nullable
        [row] = ab_log_rows(store, Scope("o", "p"), "ret_old")
        assert (row.relevance_score, row.boosted_score) == (0.72, 0.72)
        assert (row.relevance_kind, row.source, row.rerank_score) == (None, None, None)
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as again:  # applied once
        assert again.schema_version == schema.SCHEMA_VERSION


def test_the_upgrade_declares_the_memories_and_lineage_keys_as_primary_keys(tmp_path):
    # Replicas on an object store rely on the declared key to keep an id they insert at once from being
    # stored twice (tests/storage/test_store.py races two of them).
    make_v1_store(tmp_path / "db")
    db = lancedb.connect(str(tmp_path / "db"))
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as store:
        tables = store.tables()
        assert migrations.primary_key(tables[schema.MEMORIES].schema) == "id"
        assert migrations.primary_key(tables[schema.LINEAGE].schema) == "event_id"
        assert store.get_memory("mem_old").content
    before = {name: db.open_table(name).version for name in migrations.PRIMARY_KEYS}
    migrations.m008_primary_keys(db, migrations.MigrationContext(vector_dim=8))  # declared: nothing to do
    assert {name: db.open_table(name).version for name in migrations.PRIMARY_KEYS} == before


def test_a_table_without_a_declared_key_has_no_primary_key():
    fields = [pa.field("id", pa.string(), nullable=False), pa.field("v", pa.string())]
    assert migrations.primary_key(pa.schema(fields)) is None
    marked = pa.field(
        "id", pa.string(), nullable=False, metadata={"lance-schema:unenforced-primary-key": "true"}
    )
    assert migrations.primary_key(pa.schema([fields[1], marked])) == "id"


OLD_RETRIEVALS = pa.schema(
    [field for field in schema.retrievals_schema() if field not in schema.RETRIEVALS_V10_FIELDS]
)


def traced(preview: str) -> str:
    return json.dumps(
        {"candidates": [{"id": "mem_old", "preview": preview}, {"id": "mem_x", "preview": "x"}]}
    )


def retrieval(retrieval_id: str, trace: str) -> dict:
    return {
        "retrieval_id": retrieval_id,
        "org_id": "o",
        "project_id": "p",
        "session_id": "s",
        "agent_id": "a",
        "query": "q",
        "purpose": "recall",
        "created_at": NOW,
        "top_k": 5,
        "char_budget": 100,
        "context_ids": [],  # the memory is only in the trace: a candidate that missed the context
        "trace_json": trace,
    }


def test_retrieval_records_from_before_schema_10_keep_their_trace_and_a_purge_still_finds_them(tmp_path):
    from tests.forensics import files_holding

    make_v1_store(tmp_path / "db")
    db = lancedb.connect(str(tmp_path / "db"))
    db.drop_table(schema.RETRIEVALS)  # as a release before schema 10 created it
    old_trace = traced("zq7OLDxk9 written before")
    db.create_table(schema.RETRIEVALS, schema=OLD_RETRIEVALS).add(
        pa.Table.from_pylist([retrieval("ret_old", old_trace)], schema=OLD_RETRIEVALS)
    )
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as store:
        assert store.schema_version == schema.SCHEMA_VERSION
        table = store.tables()[schema.RETRIEVALS]
        assert {"trace_zlib", "trace_ids"} <= set(table.schema.names)
        scope = Scope("o", "p")
        assert store.get_retrieval("ret_old", scope).trace_json == old_trace
        from storage.records import RetrievalRecord

        new_trace = traced("zq7NEWxk9 written after")
        store.record_retrieval(RetrievalRecord(**{**retrieval("ret_new", new_trace), "context_ids": ()}))
        store.flush_logs()
        [new_row] = table.search().where("retrieval_id = 'ret_new'").to_arrow().to_pylist()
        assert (new_row["trace_json"], new_row["trace_ids"]) == ("", "\nmem_old\nmem_x\n")
        assert store.get_retrieval("ret_new", scope).trace_json == new_trace
        assert files_holding(tmp_path / "db", b"zq7NEWxk9")  # compressed, yet found on disk

        assert store.purge(scope, ["mem_old"], NOW) == ["mem_old"]
        for retrieval_id in ("ret_old", "ret_new"):
            trace = json.loads(store.get_retrieval(retrieval_id, scope).trace_json)
            assert [c["preview"] for c in trace["candidates"]] == ["[purged]", "x"], retrieval_id
    assert files_holding(tmp_path / "db", b"zq7OLDxk9") == []
    assert files_holding(tmp_path / "db", b"zq7NEWxk9") == []
