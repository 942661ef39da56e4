"""Re-embedding (storage.reembedding) on real LanceDB stores."""

import numpy as np
import pytest

from storage import reembedding, schema
from tests.storage.test_portable import fill, open_store
from tests.storage.test_store import NOW, SCOPE, new, vec


@pytest.fixture
def store(tmp_path):
    opened = open_store(tmp_path / "a")
    yield opened
    opened.close()


def test_replaced_vectors_reach_the_copy_and_lancedb_and_a_purged_memory_keeps_its_blank_one(tmp_path):
    store = open_store(tmp_path / "a")
    try:
        store.insert_memory(new("m1", "postgres pool", hot=(0,)))
        store.insert_memory(new("m2", "a secret", hot=(0,)))
        store.purge(SCOPE, ["m2"], NOW)
        assert [text.id for text in reembedding.memory_texts(store)] == ["m1"]
        assert reembedding.replace_vectors(store, {"m1": vec(2), "m2": vec(2)}, "emb-2") == 1
        assert store.get_memory("m1", SCOPE).embedder == "emb-2"
        query = np.asarray(vec(2), dtype=np.float32)
        hits = store.vector_search(SCOPE, query, embedder="emb-2", limit=5)
        assert [(hit.record.id, round(hit.score, 6)) for hit in hits] == [("m1", 1.0)]
        assert not store.memory_vectors(["m2"], SCOPE)["m2"].any()
    finally:
        store.close()
    uncached = open_store(tmp_path / "a", cache_scope_rows=0)
    try:
        hits = uncached.vector_search(SCOPE, query, embedder="emb-2", limit=5)
        assert [(hit.record.id, round(hit.score, 6)) for hit in hits] == [("m1", 1.0)]
    finally:
        uncached.close()


def test_memory_texts_are_those_still_holding_content_of_one_scope_or_all(store):
    fill(store)
    store.retract(SCOPE, ["m2"], NOW)
    assert [(text.id, text.content) for text in reembedding.memory_texts(store, SCOPE)] == [
        ("m1", "postgres pool size is 20"),
        ("m2", "the cat sat"),
    ]
    assert [text.id for text in reembedding.memory_texts(store)] == ["m1", "m2", "m3"]


class RacingStore:
    """The store as a replica on an object store meets it: another process purges and retracts without
    its lock, here just before the re-embedding's merge commits (after its rows were read)."""

    def __init__(self, store, before_merge) -> None:
        self._store = store
        self._before_merge = before_merge

    def tables(self):
        tables = dict(self._store.tables())
        tables[schema.MEMORIES] = RacingTable(tables[schema.MEMORIES], self._before_merge)
        return tables

    def __getattr__(self, name):
        return getattr(self._store, name)


class RacingTable:
    def __init__(self, table, before_merge) -> None:
        self._table = table
        self._before_merge = before_merge

    def merge_insert(self, on):
        self._before_merge()
        return self._table.merge_insert(on)

    def __getattr__(self, name):
        return getattr(self._table, name)


def test_a_memory_changed_between_the_read_and_the_merge_keeps_its_change_and_its_old_vector(store):
    for memory_id, text in (("m1", "postgres pool"), ("m2", "a secret"), ("m3", "the cat sat")):
        store.insert_memory(new(memory_id, text, hot=(0,)))
    store.set_weights({"m1": 1.3}, NOW)

    def other_process() -> None:
        store.purge(SCOPE, ["m2"], NOW)
        store.retract(SCOPE, ["m3"], NOW)

    racing = RacingStore(store, other_process)
    # The purge "of another process" runs inside the re-embedding's write sequence, in this thread: the reports'
    # lock it takes first (its reports' notes and queries) is held before, in the order every holder takes both.
    with store.reporting():
        assert reembedding.replace_vectors(racing, {m: vec(2) for m in ("m1", "m2", "m3")}, "emb-2") == 1
    m1, m2, m3 = (store.get_memory(m, SCOPE) for m in ("m1", "m2", "m3"))
    assert (m1.embedder, m1.weight, m1.status) == ("emb-2", 1.3, "active")
    assert (m2.status, m2.content, m2.embedder) == ("purged", "", "emb")
    assert not store.memory_vectors(["m2"], SCOPE)["m2"].any()
    assert (m3.status, m3.content, m3.embedder) == ("retracted", "the cat sat", "emb")
    hits = store.vector_search(SCOPE, np.asarray(vec(2), dtype=np.float32), embedder="emb-2", limit=5)
    assert [hit.record.id for hit in hits] == ["m1"]


def test_after_a_purge_the_next_re_embedding_still_writes_the_memories_it_read(store):
    # LanceDB 0.40 cannot plan a conditional merge of some columns once a purge rewrote some (a
    # regression test: the merge writes whole rows).
    for memory_id, text in (("m1", "postgres pool"), ("m2", "a secret")):
        store.insert_memory(new(memory_id, text, hot=(0,)))
    store.purge(SCOPE, ["m2"], NOW)
    assert reembedding.replace_vectors(store, {"m1": vec(3)}, "emb-3") == 1
    assert store.get_memory("m1", SCOPE).embedder == "emb-3"


def test_remaking_every_vector_counts_only_the_rows_written_when_one_changed_meanwhile(store):
    # With every memory asked for (``memoria reembed --all``), the rows already carry the embedder's name:
    # what was written is told by the commit that changed the row, not by the name.
    for memory_id, text in (("m1", "postgres pool"), ("m2", "a secret")):
        store.insert_memory(new(memory_id, text, hot=(0,)))
    assert reembedding.replace_vectors(store, {"m1": vec(2), "m2": vec(2)}, "emb-2") == 2
    racing = RacingStore(store, lambda: store.set_weights({"m2": 1.3}, NOW))
    assert reembedding.replace_vectors(racing, {"m1": vec(3), "m2": vec(3)}, "emb-2") == 1
    stored = store.memory_vectors(["m1", "m2"], SCOPE)
    assert np.allclose(stored["m1"], vec(3)) and np.allclose(stored["m2"], vec(2))
    assert store.get_memory("m2", SCOPE).weight == 1.3
    hits = store.vector_search(SCOPE, np.asarray(vec(2), dtype=np.float32), embedder="emb-2", limit=5)
    assert (hits[0].record.id, round(hits[0].score, 6)) == ("m2", 1.0)
