"""Status changes find their rows by stable row id: the ids the store knows are the table's own, and a
wrong one never changes another memory."""

from datetime import timedelta

import pytest

from storage.row_ids import RowCount, RowIds
from storage.store import MemoryStore
from tests.storage.test_store import DIM, NOW, SCOPE, new


@pytest.fixture
def store(tmp_path) -> MemoryStore:
    opened = MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM)
    yield opened
    opened.close()


def table_row_ids(store: MemoryStore) -> dict[str, int]:
    rows = store._memories.search().select(["id"]).with_row_id(True).limit(10_000).to_arrow().to_pylist()
    return {row["id"]: row["_rowid"] for row in rows}


def test_appended_rows_are_numbered_in_order_from_the_first_id():
    row_ids = RowIds(capacity=10)
    row_ids.appended(["a", "b", "c"], first=7)
    assert row_ids.known(["c", "a", "unknown"]) == {"c": 9, "a": 7}
    row_ids.forget(["a", "never-known"])
    assert row_ids.known(["a", "b"]) == {"b": 8}
    assert len(row_ids) == 2


def test_the_least_recently_used_row_ids_go_past_the_capacity():
    row_ids = RowIds(capacity=2)
    row_ids.appended(["a", "b"], first=0)
    assert row_ids.known(["a"]) == {"a": 0}  # used: b is now the oldest
    row_ids.learn({"c": 5})
    assert row_ids.known(["a", "b", "c"]) == {"a": 0, "c": 5}
    assert len(RowIds(capacity=0).known(["a"])) == 0


def test_the_row_ids_a_store_learns_from_its_appends_are_the_tables_own(store):
    store.insert_memory(new("m1", "one"))
    store.insert_many([new("m2", "two"), new("m3", "three"), new("m2", "two again")])
    store.supersede(SCOPE, ["m1"], "m2", NOW)  # an update keeps the row's id
    fragments = store._memories.stats()["fragment_stats"]["num_fragments"]
    store.maintain(min_fragments=2)  # so does compaction
    assert store._memories.stats()["fragment_stats"]["num_fragments"] < fragments
    store.insert_memory(new("m4", "four"))
    expected = table_row_ids(store)
    assert set(expected) == {"m1", "m2", "m3", "m4"}
    assert store._row_ids.known(expected) == expected


def test_rows_another_handle_appended_are_learned_when_the_copy_catches_up(tmp_path):
    with (
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as first,
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as second,
    ):
        first.insert_memory(new("m1", "written by the first"))
        second.insert_memory(new("m2", "written by the second"))
        first.insert_memory(new("m3", "the first again, after the second"))
        # The first's copy caught up with the second's row when it next wrote (m3).
        expected = table_row_ids(first)
        assert first._row_ids.known(expected) == expected
        first.retract(SCOPE, ["m2"], NOW)
        assert second.get_memory("m2").status == "retracted"


def test_a_wrong_row_id_changes_no_other_memory_and_the_update_still_lands(store):
    store.insert_many([new("m1", "one"), new("m2", "two"), new("m3", "three")])
    rows = table_row_ids(store)
    store._row_ids.learn({"m1": rows["m2"]})  # m1 said to be where m2 is
    assert store.supersede(SCOPE, ["m1"], "m3", NOW + timedelta(minutes=1)) == ["m1"]
    memories = store.get_memories(["m1", "m2", "m3"], SCOPE)
    assert (memories["m1"].status, memories["m1"].replaced_by) == ("superseded", "m3")
    assert (memories["m2"].status, memories["m2"].replaced_by) == ("active", None)
    # What proved wrong was forgotten; the copy's catch-up over the fallback's commit read the right one.
    assert store._row_ids.known(["m1"]) == {"m1": rows["m1"]}
    reopened = MemoryStore.open(store.uri, vector_dim=DIM)
    try:  # the table itself, not only the copy, holds the change
        assert reopened.get_memory("m1").status == "superseded"
        assert reopened.get_memory("m2").status == "active"
    finally:
        reopened.close()


def test_an_update_of_rows_with_unknown_row_ids_goes_by_id(store):
    store.insert_many([new("m1", "one"), new("m2", "two")])
    store._row_ids.forget(["m1", "m2"])
    assert store.retract(SCOPE, ["m1", "m2"], NOW) == ["m1", "m2"]
    assert {m.status for m in store.get_memories(["m1", "m2"], SCOPE).values()} == {"retracted"}


def test_a_failed_update_after_a_wrong_row_id_leaves_the_copy_as_the_table_is(store, monkeypatch):
    store.insert_many([new("m1", "one"), new("m2", "two")])
    assert store.get_memory("m1", SCOPE).status == "active"  # the scope's copy is built
    store._row_ids.learn({"m1": table_row_ids(store)["m2"]})
    table = store._memories
    real = type(table).update
    calls = []

    def failing_second(self, *args, **kwargs):
        calls.append(kwargs.get("where"))
        if len(calls) == 2:
            raise OSError("disk full")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(table), "update", failing_second)
    with pytest.raises(OSError):
        store.retract(SCOPE, ["m1"], NOW)
    monkeypatch.setattr(type(table), "update", real)
    assert len(calls) == 2  # by row id (a miss), then by id (failed)
    assert store.get_memory("m1", SCOPE).status == "active"  # what the table says, not what was asked


def test_the_row_count_follows_this_process_commits_version_after_version():
    count = RowCount()
    assert count.appended(5, 2) is None  # never counted: the caller counts the table
    count.counted(5, 12)
    assert count.appended(6, 3) == 12  # the rows start where the table ended at version 5
    count.changed(7, 1)  # an update adds no row
    assert count.appended(8, 1) == 15
    assert count.appended(10, 1) is None  # version 9 was someone else's commit: unknown again
    assert count.appended(11, 1) is None
    count.counted(11, 40)
    count.changed(13, 1)  # after a gap, an update does not bring the count back either
    assert count.appended(14, 1) is None
    count.counted(14, 41)
    count.forget()  # an update found a row id wrong: the count may be too
    assert count.appended(15, 1) is None


class CountingRows:
    """The store's append handles, counting how often an append asked the table for its row count."""

    def __init__(self, appenders) -> None:
        self._appenders = appenders
        self.counts = 0

    def rows(self, name: str) -> int:
        self.counts += 1
        return self._appenders.rows(name)

    def __getattr__(self, name: str):
        return getattr(self._appenders, name)


def test_appends_and_updates_of_this_process_alone_never_count_the_table_again(store):
    counting = store._appenders = CountingRows(store._appenders)
    store.insert_memory(new("m1", "one"))
    assert counting.counts == 1  # the first append counts
    store.insert_many([new("m2", "two"), new("m3", "three")])
    store.supersede(SCOPE, ["m1"], "m2", NOW)
    store.retract(SCOPE, ["m3"], NOW)
    store.insert_memory(new("m4", "four"))
    assert counting.counts == 1
    expected = table_row_ids(store)
    assert store._row_ids.known(expected) == expected


def test_a_commit_this_process_did_not_follow_makes_the_next_append_count_the_table(tmp_path):
    with (
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as first,
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as second,
    ):
        counting = first._appenders = CountingRows(first._appenders)
        first.insert_memory(new("m1", "written by the first"))
        second.insert_many([new("m2", "by the second"), new("m3", "the second again")])
        first.insert_memory(new("m4", "the first, after the second's two rows"))
        assert counting.counts == 2
        first.maintain(min_fragments=2)  # a compaction: a commit with no append, not followed either
        first.insert_memory(new("m5", "the first, after compaction"))
        assert counting.counts == 3
        expected = table_row_ids(first)
        assert first._row_ids.known(expected) == expected


def test_an_update_that_found_a_row_id_wrong_makes_the_next_append_count_the_table(store):
    counting = store._appenders = CountingRows(store._appenders)
    store.insert_many([new("m1", "one"), new("m2", "two"), new("m3", "three")])
    store._row_ids.learn({"m1": table_row_ids(store)["m2"]})  # m1 said to be where m2 is
    assert store.supersede(SCOPE, ["m1"], "m3", NOW) == ["m1"]
    store.insert_memory(new("m4", "four"))
    assert counting.counts == 2
    expected = table_row_ids(store)
    assert store._row_ids.known(["m4"]) == {"m4": expected["m4"]}


def test_an_update_that_changed_no_row_proves_nothing_about_the_count(store):
    counting = store._appenders = CountingRows(store._appenders)
    store.insert_memory(new("m1", "one"))
    store._update_rows(["no-such-memory"], {"consolidated_at": NOW})  # commits a version, changes no row
    store.insert_memory(new("m2", "two"))
    assert counting.counts == 2
