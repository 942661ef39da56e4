"""Re-embedding: the memories' texts as stored, and new vectors written over their old ones (a merge
under the write lock that the scope copies see at once)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from storage import filters, schema
from storage.locking import retrying
from storage.portable import RowError
from storage.records import CONTENT_STATUSES, Scope
from storage.scan import scan
from storage.store import MemoryStore

_CHUNK = 1_000  # values per `one_of` lookup


@dataclass(frozen=True)
class StoredText:
    """A memory's text and the embedder its vector came from (what re-embedding reads)."""

    id: str
    scope: Scope
    content: str
    embedder: str


def memory_texts(
    store: MemoryStore, scope: Scope | None = None, not_by: str | None = None
) -> list[StoredText]:
    """Every memory that still has its content (any status but purged), of ``scope`` or all, by id; with
    ``not_by``, only those whose vector another embedder made (the texts of the rest are never read)."""
    condition = filters.one_of("status", CONTENT_STATUSES)
    if scope is not None:
        condition = filters.all_of(condition, filters.scope_is(scope))
    if not_by is not None:
        condition = filters.all_of(condition, filters.differs("embedder", not_by))
    data = scan(
        store.tables()[schema.MEMORIES],
        condition,
        ["id", "org_id", "project_id", "content", "embedder"],
    )
    found: dict[str, StoredText] = {}
    for row in data.to_pylist():
        found.setdefault(
            row["id"],
            StoredText(
                row["id"],
                Scope(row["org_id"], row["project_id"]),
                row["content"],
                row["embedder"],
            ),
        )
    return [found[memory_id] for memory_id in sorted(found)]


def replace_vectors(store: MemoryStore, vectors: Mapping[str, Any], embedder: str) -> int:
    """Give these memories new vectors made by ``embedder``, in one merge under the write lock; returns
    how many were written. A memory purged since its text was read is left alone (its vector stays
    blank: the new one was made from the erased text)."""
    if not vectors:
        return 0
    memories = store.tables()[schema.MEMORIES]
    width = store.vector_dim
    for memory_id, vector in vectors.items():
        if len(vector) != width:
            raise RowError(f"the vector for {memory_id} has {len(vector)} dimensions, not {width}")
    with store.exclusive():
        live: set[str] = set()
        ids = list(vectors)
        for start in range(0, len(ids), _CHUNK):
            condition = filters.all_of(
                filters.one_of("id", ids[start : start + _CHUNK]),
                filters.one_of("status", CONTENT_STATUSES),
            )
            live.update(scan(memories, condition, ["id"]).column("id").to_pylist())
        kept = [memory_id for memory_id in ids if memory_id in live]
        if not kept:
            return 0
        block = np.stack([np.asarray(vectors[memory_id], dtype=np.float32) for memory_id in kept])
        columns = pa.schema([memories.schema.field(name) for name in ("id", "embedder", "vector")])
        update = pa.Table.from_pylist(
            [
                {"id": memory_id, "embedder": embedder, "vector": block[index]}
                for index, memory_id in enumerate(kept)
            ],
            schema=columns,
        )
        after = retrying(
            lambda: memories.merge_insert("id").when_matched_update_all().execute(update)
        ).version
        store.cache.advance(
            after - 1,
            after,
            updated={memory_id: {"embedder": embedder} for memory_id in kept},
            vectors={memory_id: block[index] for index, memory_id in enumerate(kept)},
        )
    return len(kept)
