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
from storage.rows import arrow_rows
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
    blank: the new one was made from the erased text).

    The merge writes each memory's row as read under the lock, with the new vector, and only where the
    stored row is still that row (``_unchanged``): on an object store another process purges or retracts
    without this lock, and a memory it changed in between keeps its old vector (and is remade at the next
    run) instead of losing the change, or getting a vector back after a purge. The condition is on whole
    rows because LanceDB 0.40 cannot plan a conditional merge of some columns once the table holds a
    purge's partial rewrite ("Field status not found in struct")."""
    if not vectors:
        return 0
    memories = store.tables()[schema.MEMORIES]
    width = store.vector_dim
    for memory_id, vector in vectors.items():
        if len(vector) != width:
            raise RowError(f"the vector for {memory_id} has {len(vector)} dimensions, not {width}")
    with store.exclusive():
        rows: dict[str, dict[str, Any]] = {}
        ids = list(vectors)
        for start in range(0, len(ids), _CHUNK):
            condition = filters.all_of(
                filters.one_of("id", ids[start : start + _CHUNK]),
                filters.one_of("status", CONTENT_STATUSES),
            )
            for row in scan(memories, condition, None).to_pylist():
                rows.setdefault(row["id"], row)
        kept = [memory_id for memory_id in ids if memory_id in rows]
        if not kept:
            return 0
        new = {memory_id: np.asarray(vectors[memory_id], dtype=np.float32) for memory_id in kept}
        # A memory whose vector another embedder made is examined by consolidation again: while the scope's
        # vectors were of two embedders, a write's neighbours were only those of its own (a team's trial: a
        # restatement written after a model switch stood beside the memory it restates for good).
        renewed = {memory_id for memory_id in kept if rows[memory_id]["embedder"] != embedder}
        for memory_id in kept:
            rows[memory_id] |= {"embedder": embedder, "vector": new[memory_id]}
            if memory_id in renewed:
                rows[memory_id]["consolidated_at"] = None
        update = arrow_rows([rows[memory_id] for memory_id in kept], memories.schema)
        result = retrying(
            lambda: (
                memories.merge_insert("id")
                .when_matched_update_all(where=_unchanged(memories.schema))
                .execute(update)
            )
        )
        if result.num_updated_rows != len(kept):  # some changed meanwhile: which were written?
            condition = filters.all_of(filters.one_of("id", kept), filters.updated_in_version(result.version))
            written = set(scan(memories, condition, ["id"]).column("id").to_pylist())
            kept = [memory_id for memory_id in kept if memory_id in written]
        after = result.version
        store.cache.advance(
            after - 1,
            after,
            updated={
                memory_id: {
                    "embedder": embedder,
                    **({"consolidated_at": None} if memory_id in renewed else {}),
                }
                for memory_id in kept
            },
            vectors={memory_id: new[memory_id] for memory_id in kept},
        )
    return len(kept)


# Left out of the merge's condition: the key and the columns the merge sets (``consolidated_at`` for a
# vector of another embedder). Lists (tags, and the vector) are too: LanceDB's SQL does not compare them,
# and ``tags_key`` is the tags' stored form.
_SET_OR_KEY = frozenset({"id", "embedder", "vector", "consolidated_at"})


def _unchanged(columns: pa.Schema) -> str:
    """A merge condition: the stored row equals the source row in every column the merge does not set."""
    parts = []
    for field in columns:
        if field.name in _SET_OR_KEY or pa.types.is_nested(field.type):
            continue
        same = f"target.{field.name} = source.{field.name}"
        if field.nullable:
            same = f"((target.{field.name} IS NULL AND source.{field.name} IS NULL) OR {same})"
        parts.append(same)
    return " AND ".join(parts)
