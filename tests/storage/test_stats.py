"""Scope stats: counts over narrow columns of one scope, each memory once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storage.stats import scope_stats
from storage.store import MemoryStore
from tests.storage.test_inspection import DIM, OTHER, SCOPE, T0
from tests.storage.test_store import expiring, new


@pytest.fixture
def store(tmp_path) -> Iterator[MemoryStore]:
    opened = MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM)
    yield opened
    opened.close()


def test_stats_count_one_scope_by_status_and_the_active_ones_by_kind_and_tier(store):
    store.insert_many(
        [
            new("a", "alpha"),
            new("b", "beta", kind="episode"),
            new("c", "gamma", protection_tier="immutable", embedder="other"),
            new("d", "delta"),
            new("x", "elsewhere", scope=OTHER),
        ]
    )
    store.retract(SCOPE, ["d"], T0)
    census = scope_stats(store, SCOPE)
    assert census.memories == 4
    assert census.by_status == {"active": 3, "retracted": 1}
    assert census.by_kind == {"fact": 2, "episode": 1}  # active ones
    assert census.by_tier == {"standard": 2, "immutable": 1}
    assert census.by_embedder == {"emb": 3, "other": 1}
    assert census.active_ids == ("a", "b", "c")
    assert census.agents == 1 and census.weights.moved == 0 and census.episodes == 0


def test_an_ephemeral_memory_past_its_expiry_counts_as_expired_not_active_until_maintenance(store):
    store.insert_many([new("a", "alpha"), *expiring()])
    census = scope_stats(store, SCOPE)
    assert census.by_status == {"active": 2, "expired": 1}
    assert census.active_ids == ("a", "soon")
    assert census.by_tier == {"standard": 1, "ephemeral": 1}
    assert census.by_embedder == {"emb": 3}  # its content and vector are still there to re-embed
