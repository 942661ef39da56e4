"""Opening a store written by an earlier schema version upgrades it in place, keeping every row."""

from datetime import UTC, datetime

import lancedb
import pyarrow as pa

from storage import migrations, schema
from storage.records import Scope
from storage.store import MemoryStore

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
    db.open_table(schema.MEMORIES).add(pa.Table.from_pylist([row], schema=schema.memories_schema(8)))


def test_migrations_are_numbered_in_order():
    assert [m.number for m in migrations.MIGRATIONS] == list(range(1, schema.SCHEMA_VERSION + 1))


def test_a_version_1_store_is_upgraded_and_keeps_its_rows(tmp_path):
    make_v1_store(tmp_path / "db")
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as store:
        assert store.schema_version == schema.SCHEMA_VERSION
        old = store.get_memory("mem_old")
        assert old.content == "written before simhash existed" and old.simhash is None
        rows = store.aggregation_rows(Scope("o", "p"), 10)
        assert [(r.id, r.simhash) for r in rows] == [("mem_old", None)]
        assert [m.id for m in store.episode_member_stubs(Scope("o", "p"), ["ep"])] == ["mem_old"]
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=8) as again:  # re-opening applies nothing twice
        assert again.schema_version == schema.SCHEMA_VERSION and again.count_memories() == 1
