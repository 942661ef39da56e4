"""Re-embedding (storage.reembedding) on real LanceDB stores."""

import numpy as np
import pytest

from storage import reembedding
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
