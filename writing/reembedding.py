"""Re-embedding: memories get vectors from the active embedder, batch by batch. `memoria reembed` runs it
on demand; the server runs it at start over memories whose vectors another embedder made (another model,
an older recipe of the same one: vector search compares only vectors of the active embedder's name).

Each batch of new vectors is written in one merge under the write lock (``storage.reembedding``), so
recall and writes go on meanwhile and see every batch at once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from retrieval.models.embedders.base import Embedder
from storage import reembedding
from storage.records import Scope
from storage.store import MemoryStore

WRITE_BATCH = 2_000  # new vectors per merge: a merge costs about the same for 64 rows as for thousands


@dataclass(frozen=True)
class Reembedded:
    examined: int  # memories read: with vectors of another embedder, or all that still have content
    written: int


def reembed(
    store: MemoryStore,
    embedder: Embedder,
    *,
    scope: Scope | None = None,
    all_memories: bool = False,
    batch_size: int = 64,
    progress: Callable[[str, int, int], None] | None = None,
    stop: Callable[[], bool] | None = None,
    only: Callable[[str], bool] | None = None,
) -> Reembedded:
    """Give the memories of ``scope`` (or all) whose vectors another embedder made (of those, only the
    embedders ``only`` accepts, when given), or every one with ``all_memories``, vectors from ``embedder``,
    ``batch_size`` texts a model call. ``stop`` is asked between batches (a server shutting down); what was
    embedded before it, or before a failure, is written. ``examined``: the memories read."""
    texts = reembedding.memory_texts(store, scope, not_by=None if all_memories else embedder.name)
    todo = [text for text in texts if all_memories or only is None or only(text.embedder)]
    written = 0
    pending: dict[str, object] = {}
    if progress:
        progress("re-embedding", 0, len(todo))
    try:
        for start in range(0, len(todo), batch_size):
            if stop is not None and stop():
                break
            batch = todo[start : start + batch_size]
            vectors = embedder.embed_documents([text.content for text in batch])
            pending.update((text.id, vector) for text, vector in zip(batch, vectors, strict=True))
            if len(pending) >= WRITE_BATCH or start + batch_size >= len(todo):
                written += reembedding.replace_vectors(store, pending, embedder.name)
                pending = {}
            if progress:
                progress("re-embedding", start + len(batch), len(todo))
    finally:
        if pending:  # stopped, or failed, between writes: keep what was embedded
            written += reembedding.replace_vectors(store, pending, embedder.name)
    return Reembedded(examined=len(texts), written=written)
