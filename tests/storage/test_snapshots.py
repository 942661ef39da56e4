"""Whole-scope snapshots of the open contradictions: one read per table change, every process's commits
seen by the next use, and scopes too big to keep read from the table. Episodes answered by the scope
copies agree with the table."""

from dataclasses import replace

import pytest

import storage.store
from storage.records import ContradictionRecord, Scope
from storage.snapshots import ScopeSnapshots
from storage.store import MemoryStore
from tests.storage.test_store import DIM, NOW, SCOPE, new

OTHER = Scope("globex", "api")


class Table:
    """A versioned fake table: rows per scope; reads are counted."""

    def __init__(self) -> None:
        self.version = 1
        self.rows: dict[Scope, list[str]] = {}

    def read(self, scope, limit):
        rows = self.rows.get(scope, [])[:limit]
        return tuple(rows), len(rows)


def test_a_snapshot_is_read_once_per_table_version():
    table = Table()
    table.rows[SCOPE] = ["a", "b"]
    snapshots = ScopeSnapshots(lambda: table.version, table.read, max_rows=10)
    assert snapshots.get(SCOPE) == ("a", "b")
    assert snapshots.get(SCOPE) == ("a", "b")
    assert snapshots.reads == 1
    table.rows[SCOPE].append("c")
    table.version = 2
    assert snapshots.get(SCOPE) == ("a", "b", "c")
    assert snapshots.reads == 2
    assert snapshots.get(OTHER) == ()


def test_a_scope_over_the_row_limit_is_not_kept():
    table = Table()
    table.rows[SCOPE] = ["a", "b", "c"]
    snapshots = ScopeSnapshots(lambda: table.version, table.read, max_rows=2)
    assert snapshots.get(SCOPE) is None
    assert snapshots.get(SCOPE) is None
    assert snapshots.reads == 1  # known too big: not read again


def test_the_least_recently_used_scope_goes_past_the_scope_limit():
    table = Table()
    snapshots = ScopeSnapshots(lambda: table.version, table.read, max_rows=5, max_scopes=1)
    snapshots.get(SCOPE)
    snapshots.get(OTHER)
    snapshots.get(SCOPE)
    assert snapshots.reads == 3


def contradiction(older: str, newer: str, status="open") -> ContradictionRecord:
    return ContradictionRecord(
        SCOPE.org_id, SCOPE.project_id, older, newer, "opposite", "on vs off", 0.9, status, None, NOW, None
    )


def test_the_store_sees_another_processs_contradictions_and_episodes(tmp_path):
    with (
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as mine,
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as theirs,
    ):
        mine.insert_many([new("a", "flag on", episode_id="e1"), new("b", "flag off")])
        assert mine.newer_contradictions(SCOPE, ["a"]) == {}
        assert set(mine.get_episodes(SCOPE, ["e1", "e2"])) == {"e1"}
        theirs.put_contradictions([contradiction("a", "b")])
        theirs.insert_memory(new("c", "in a second episode", episode_id="e2"))
        assert mine.newer_contradictions(SCOPE, ["a", "b"]) == {"a": ["b"]}
        assert set(mine.get_episodes(SCOPE, ["e1", "e2"])) == {"e1", "e2"}
        theirs.resolve_contradictions(SCOPE, ["a"], "retracted", NOW)
        assert mine.newer_contradictions(SCOPE, ["a"]) == {}
        assert mine._contradiction_snapshots.reads == 3
        assert mine.get_episodes(OTHER, ["e1"]) == {}


def test_a_store_queries_scopes_too_big_to_snapshot(tmp_path, monkeypatch):
    monkeypatch.setattr(storage.store, "SNAPSHOT_MAX_ROWS", 1)
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as store:
        store.insert_many([new("a", "one", episode_id="e1"), new("b", "two", episode_id="e2")])
        store.put_contradictions(
            [
                contradiction("a", "b"),
                contradiction("b", "a"),
                replace(contradiction("a", "c"), status="resolved"),
            ]
        )
        assert store.newer_contradictions(SCOPE, ["a", "b"]) == {"a": ["b"], "b": ["a"]}
        assert store._contradiction_snapshots.get(SCOPE) is None


@pytest.mark.parametrize("limit", [20_000, 1])
def test_snapshot_and_query_answers_agree(tmp_path, monkeypatch, limit):
    monkeypatch.setattr(storage.store, "SNAPSHOT_MAX_ROWS", limit)
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as store:
        store.insert_many([new(f"m{i}", f"memory {i}", episode_id=f"e{i % 3}") for i in range(6)])
        store.put_contradictions(
            [contradiction("m0", "m1"), contradiction("m0", "m2"), contradiction("m3", "m4")]
        )
        assert store.newer_contradictions(SCOPE, ["m0", "m3", "m5"]) == {"m0": ["m1", "m2"], "m3": ["m4"]}
        episodes = store.get_episodes(SCOPE, ["e0", "e1", "e9"])
        assert set(episodes) == {"e0", "e1"}
        assert episodes["e0"].agent_id == "agent"


@pytest.mark.parametrize("limit", [20_000, 1])
def test_closing_contradictions_reads_the_table_only_when_the_snapshot_has_one_involved(
    tmp_path, monkeypatch, limit
):
    monkeypatch.setattr(storage.store, "SNAPSHOT_MAX_ROWS", limit)
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as store:
        store.insert_many([new(f"m{i}", f"memory {i}") for i in range(4)])
        store.put_contradictions([contradiction("m0", "m1"), contradiction("m2", "m1")])
        queried = []
        read = store.contradictions
        monkeypatch.setattr(store, "contradictions", lambda *a, **k: queried.append(a) or read(*a, **k))
        assert store.resolve_contradictions(SCOPE, ["m3"], "superseded by m0", NOW) == 0
        assert len(queried) == (0 if limit > 1 else 1)  # a snapshot knows m3 is in none
        assert store.resolve_contradictions(SCOPE, ["m1"], "retracted", NOW) == 2  # the newer side too
        assert store.newer_contradictions(SCOPE, ["m0", "m2"]) == {}


@pytest.mark.parametrize("limit", [20_000, 1])
def test_attesters_come_from_the_snapshot_or_the_table_alike_and_see_another_handles_writes(
    tmp_path, monkeypatch, limit
):
    monkeypatch.setattr(storage.store, "SNAPSHOT_MAX_ROWS", limit)
    with (
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as mine,
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as theirs,
    ):
        m1, _ = mine.insert_memory(new("m1", "shared conclusion", agent_id="author"))
        m2, _ = mine.insert_memory(new("m2", "another conclusion", agent_id="author"))
        assert mine.add_attestation(m1, "second", "s", NOW) and mine.add_attestation(m1, "third", "s", NOW)
        assert mine.attesters(SCOPE, ["m1", "m2"]) == {"m1": {"second", "third"}}
        assert theirs.add_attestation(m2, "fourth", "s", NOW)
        assert mine.attesters(SCOPE, ["m2"]) == {"m2": {"fourth"}}
        assert mine.attesters(SCOPE) == {"m1": {"second", "third"}, "m2": {"fourth"}}
        assert mine.attesters(OTHER, ["m1"]) == {}
        found = mine.attesters(SCOPE, ["m1"])
        found["m1"].add("changed by the caller")  # a caller's copy, never the kept snapshot
        assert mine.attesters(SCOPE, ["m1"]) == {"m1": {"second", "third"}}
