"""Re-embedding (writing.reembedding): which memories get new vectors, and stopping between batches."""

from storage.stats import embedder_counts
from tests.fakes import TokenEmbedder
from tests.storage.test_portable import DIM, open_store
from tests.storage.test_store import NOW, SCOPE, new
from writing.reembedding import reembed


def test_only_memories_with_another_embedders_vectors_are_embedded_again_unless_all_are_asked(tmp_path):
    model = TokenEmbedder(dimension=DIM)
    store = open_store(tmp_path / "db")
    try:
        store.insert_memory(new("m1", "postgres pool", embedder="old"))
        store.insert_memory(new("m2", "redis cache", embedder="old"))
        store.insert_memory(new("m3", "deploy on fridays", embedder=model.name))
        done = reembed(store, model)
        assert (done.examined, done.written) == (2, 2)  # m3's text is never read
        assert embedder_counts(store) == {model.name: 3}
        assert reembed(store, model).written == 0  # nothing left to do
        assert reembed(store, model, all_memories=True).written == 3
    finally:
        store.close()


def test_a_stop_between_batches_keeps_what_was_embedded_and_the_next_run_finishes(tmp_path):
    model = TokenEmbedder(dimension=DIM)
    store = open_store(tmp_path / "db")
    try:
        for index in range(5):
            store.insert_memory(new(f"m{index}", f"memory number {index}", embedder="old"))
        asked: list[int] = []

        def stop() -> bool:  # asked before each batch: stop before the third
            asked.append(1)
            return len(asked) > 2

        done = reembed(store, model, batch_size=1, stop=stop)
        assert done.written == 2  # the two batches embedded before the stop, written on the way out
        assert embedder_counts(store) == {"old": 3, model.name: 2}
        assert reembed(store, model, batch_size=2).written == 3
        assert embedder_counts(store) == {model.name: 5}
    finally:
        store.close()


def test_a_memory_given_another_embedders_vector_is_examined_by_consolidation_again(tmp_path):
    """A team's trial: after a model switch, a restatement written before `memoria reembed` found no
    neighbours (vector search compares one embedder's vectors) and stood beside the memory it restates for
    good. A memory whose vector is remade is left to the consolidation sweep again; one remade by the same
    embedder (``all_memories``) is not."""
    model = TokenEmbedder(dimension=DIM)
    store = open_store(tmp_path / "db")
    try:
        store.insert_memory(new("m1", "The API server is written in Go and lives in cmd/api", embedder="old"))
        store.insert_memory(
            new("m2", "The API server is written in Go and is in cmd/api", embedder=model.name)
        )
        store.mark_consolidated(["m1", "m2"], NOW)
        assert store.unconsolidated(SCOPE, 10) == []
        assert reembed(store, model).written == 1
        assert [memory.id for memory in store.unconsolidated(SCOPE, 10)] == ["m1"]
        store.mark_consolidated(["m1"], NOW)
        assert reembed(store, model, all_memories=True).written == 2
        assert store.unconsolidated(SCOPE, 10) == []
    finally:
        store.close()
