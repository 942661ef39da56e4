"""Contradictions recorded by a batch: gathered and written as the block ends, in one commit, read by the
gathering thread as if written already; a block that raises writes none."""

from dataclasses import replace

import pytest

from storage import schema
from storage.records import ContradictionRecord
from storage.store import MemoryStore
from tests.storage.test_store import DIM, NOW, SCOPE, new


def pair(older: str, newer: str, detail: str = "on vs off") -> ContradictionRecord:
    return ContradictionRecord.detected(
        SCOPE, older, newer, kind="value", detail=detail, similarity=0.9, at=NOW
    )


def pairs_in(store: MemoryStore, status: str | None = "open") -> list[tuple[str, str, str]]:
    return [(r.older_id, r.newer_id, r.detail) for r in store.contradictions(SCOPE, status=status)]


def commits(store: MemoryStore) -> int:
    return int(store.tables()[schema.CONTRADICTIONS].version)


@pytest.fixture
def stores(tmp_path):
    """Two handles on one store: this process's, and another process's view of it."""
    with (
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as mine,
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as theirs,
    ):
        mine.insert_many([new(f"m{i}", f"port {i}") for i in range(5)])
        yield mine, theirs


def test_pairs_gathered_in_a_block_are_written_together_as_it_ends(stores):
    mine, theirs = stores
    before = commits(mine)
    with mine.gathering_contradictions():
        assert mine.put_contradictions([pair("m0", "m1"), pair("m0", "m2")]) == [
            pair("m0", "m1"),
            pair("m0", "m2"),
        ]
        assert mine.put_contradictions([pair("m1", "m2")]) == [pair("m1", "m2")]
        assert pairs_in(theirs) == []  # not yet: nothing is written until the block ends
        assert commits(mine) == before
    assert commits(mine) == before + 1  # three pairs, one commit
    assert sorted(pairs_in(theirs)) == [
        ("m0", "m1", "on vs off"),
        ("m0", "m2", "on vs off"),
        ("m1", "m2", "on vs off"),
    ]


def test_the_gathering_thread_reads_its_own_pairs_before_the_block_ends(stores):
    mine, theirs = stores
    with mine.gathering_contradictions():
        mine.put_contradictions([pair("m0", "m1")])
        assert mine.newer_contradictions(SCOPE, ["m0"]) == {"m0": ["m1"]}
        assert pairs_in(theirs) == [("m0", "m1", "on vs off")]  # the read wrote them first
        mine.put_contradictions([pair("m2", "m3")])
        assert mine.open_contradiction_pairs(SCOPE) == [("m0", "m1"), ("m2", "m3")]


def test_a_write_sequence_the_gathering_thread_begins_writes_its_pairs_first(stores):
    mine, theirs = stores
    with mine.gathering_contradictions():
        mine.put_contradictions([pair("m0", "m1")])
        with mine.exclusive():  # a status change, say: it must not come before the pair it follows
            assert pairs_in(theirs) == [("m0", "m1", "on vs off")]


def test_a_pair_gathered_twice_is_written_once_with_its_first_detection(stores):
    mine, _ = stores
    with mine.gathering_contradictions():
        assert mine.put_contradictions([pair("m0", "m1", "first")]) == [pair("m0", "m1", "first")]
        assert mine.put_contradictions([pair("m0", "m1", "second")]) == []
    assert pairs_in(mine) == [("m0", "m1", "first")]
    with mine.gathering_contradictions():
        mine.put_contradictions([pair("m0", "m1", "third")])  # open already: its row stays
    assert pairs_in(mine) == [("m0", "m1", "first")]


def test_a_block_that_raises_writes_none_of_its_pairs(stores):
    mine, theirs = stores
    with pytest.raises(RuntimeError), mine.gathering_contradictions():
        mine.put_contradictions([pair("m0", "m1")])
        raise RuntimeError("consolidation failed: it is owed, and finds the pair again")
    assert pairs_in(theirs) == []
    mine.put_contradictions([pair("m2", "m3")])  # the thread gathers no longer: written at once
    assert pairs_in(theirs) == [("m2", "m3", "on vs off")]


def test_nested_blocks_write_as_the_outermost_ends(stores):
    mine, theirs = stores
    with mine.gathering_contradictions():
        with mine.gathering_contradictions():
            mine.put_contradictions([pair("m0", "m1")])
        assert pairs_in(theirs) == []
    assert pairs_in(theirs) == [("m0", "m1", "on vs off")]


def test_a_pair_whose_memory_another_process_retracted_meanwhile_is_not_written(stores):
    mine, theirs = stores
    with mine.gathering_contradictions():
        mine.put_contradictions([pair("m0", "m1"), pair("m2", "m3")])
        theirs.retract(SCOPE, ["m1"], NOW)
    assert pairs_in(theirs, status=None) == [("m2", "m3", "on vs off")]


def test_a_resolved_pair_gathered_again_opens_again_beside_new_ones(stores):
    mine, theirs = stores
    mine.put_contradictions([pair("m0", "m1")])
    mine.resolve_contradictions(SCOPE, ["m1"], "retracted", NOW)
    with mine.gathering_contradictions():
        mine.put_contradictions([replace(pair("m0", "m1"), detail="again"), pair("m2", "m3")])
    assert sorted(pairs_in(theirs)) == [("m0", "m1", "again"), ("m2", "m3", "on vs off")]
    assert len(theirs.contradictions(SCOPE, status=None)) == 2  # the resolved row opened, not a second one


class FailingOnce:
    """The store's write of the pairs, failing the first time (a disk error, say)."""

    def __init__(self, store: MemoryStore) -> None:
        self.write, self.failed = store._write_contradictions, False

    def __call__(self, records):
        if not self.failed:
            self.failed = True
            raise OSError("simulated I/O error")
        return self.write(records)


def test_gathered_pairs_whose_write_failed_are_kept_for_the_blocks_end(stores, monkeypatch):
    mine, theirs = stores
    monkeypatch.setattr(mine, "_write_contradictions", FailingOnce(mine))
    with mine.gathering_contradictions():
        mine.put_contradictions([pair("m0", "m1")])
        # a write sequence whose caller logs its failure and goes on (a tag hand-on, say)
        with pytest.raises(OSError), mine.exclusive():
            pass
    assert pairs_in(theirs) == [("m0", "m1", "on vs off")]


def test_a_block_whose_write_failed_leaves_its_thread_gathering_nothing(stores, monkeypatch):
    mine, theirs = stores
    monkeypatch.setattr(mine, "_write_contradictions", FailingOnce(mine))
    with pytest.raises(OSError), mine.gathering_contradictions():
        mine.put_contradictions([pair("m0", "m1")])
    mine.put_contradictions([pair("m2", "m3")])  # written at once, as outside any block
    assert pairs_in(theirs) == [("m2", "m3", "on vs off")]
