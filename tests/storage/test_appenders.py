"""Appends go through handles that skip the per-operation version check, yet land on the newest version
whatever other handles (other processes) committed meanwhile, and report the version they made."""

from datetime import timedelta

import lancedb
import pyarrow as pa
import pytest

from storage.appenders import Appenders

SCHEMA = pa.schema([pa.field("id", pa.string()), pa.field("n", pa.int64())])


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def rows(*ids: str) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "n": len(i)} for i in ids], schema=SCHEMA)


class RecordingTable:
    """A real append handle that records the version it held at each append (and can fail once)."""

    def __init__(self, table) -> None:
        self.table = table
        self.held_at_append: list[int] = []
        self.fail_next = False

    def add(self, data):
        self.held_at_append.append(self.table.version)
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("Retryable commit conflict for version 9")
        return self.table.add(data)

    def checkout_latest(self) -> None:
        self.table.checkout_latest()

    @property
    def schema(self):
        return self.table.schema


class RecordingConnection:
    def __init__(self, db) -> None:
        self.db = db
        self.tables: dict[str, RecordingTable] = {}

    def open_table(self, name: str) -> RecordingTable:
        self.tables[name] = RecordingTable(self.db.open_table(name))
        return self.tables[name]


def setup(tmp_path):
    checked = lancedb.connect(str(tmp_path), read_consistency_interval=timedelta(0))
    table = checked.create_table("t", schema=SCHEMA)
    clock = FakeClock()
    connection = RecordingConnection(lancedb.connect(str(tmp_path)))
    return table, Appenders(connection, fresh_for=2.0, clock=clock), clock, connection.tables


def held_at_last_append(handles) -> int:
    return handles["t"].held_at_append[-1]


def ids(table) -> list[str]:
    return sorted(table.to_arrow().column("id").to_pylist())


def test_an_append_is_seen_by_a_checked_reader_at_the_version_it_reports(tmp_path):
    table, appenders, _, _ = setup(tmp_path)
    version = appenders.add("t", rows("a"))
    assert table.version == version
    assert ids(table) == ["a"]


def test_an_append_after_other_handles_committed_keeps_their_rows_and_reports_the_newest_version(tmp_path):
    table, appenders, clock, handles = setup(tmp_path)
    appenders.add("t", rows("a"))
    table.add(rows("b"))  # another process, while this handle still holds the older version
    table.add(rows("c"))
    clock.now += 1.0  # still fresh: lance rebases the append over the two commits
    version = appenders.add("t", rows("d"))
    assert appenders.checkouts == 0 and held_at_last_append(handles) == version - 3
    assert version == table.version
    assert ids(table) == ["a", "b", "c", "d"]


def test_a_handle_idle_past_its_freshness_moves_to_the_newest_version_first(tmp_path):
    table, appenders, clock, handles = setup(tmp_path)
    appenders.add("t", rows("a"))
    for name in ("b", "c", "d"):
        table.add(rows(name))
    clock.now += 2.5
    version = appenders.add("t", rows("e"))
    assert appenders.checkouts == 1 and held_at_last_append(handles) == version - 1
    assert version == table.version and ids(table) == ["a", "b", "c", "d", "e"]


@pytest.mark.filterwarnings("ignore:optimize.cleanup_older_than=0. removes every version")
def test_an_append_over_versions_cleaned_up_meanwhile_lands_on_the_newest(tmp_path):
    table, appenders, _, handles = setup(tmp_path)
    appenders.add("t", rows("a"))
    for name in ("b", "c"):
        table.add(rows(name))
    # Maintenance compacted and dropped every older version, the one this handle holds included.
    table.optimize(cleanup_older_than=timedelta(0))
    version = appenders.add("t", rows("d"))
    assert held_at_last_append(handles) < version - 1  # appended from a version no longer on disk
    assert version == table.version
    assert ids(table) == ["a", "b", "c", "d"]


def test_a_failed_append_leaves_its_handle_to_be_checked_out_before_the_retry(tmp_path):
    table, appenders, _, handles = setup(tmp_path)
    appenders.add("t", rows("a"))
    table.add(rows("b"))
    handles["t"].fail_next = True
    with pytest.raises(RuntimeError, match="commit conflict"):
        appenders.add("t", rows("c"))
    version = appenders.add("t", rows("c"))  # at once, well within the freshness window
    assert appenders.checkouts == 1 and held_at_last_append(handles) == version - 1
    assert ids(table) == ["a", "b", "c"]


def direct_setup(tmp_path):
    """A real append handle (LanceDB's own table, so appends take the native path) and a checked reader."""
    checked = lancedb.connect(str(tmp_path), read_consistency_interval=timedelta(0))
    table = checked.create_table("t", schema=SCHEMA)
    clock = FakeClock()
    return table, Appenders(lancedb.connect(str(tmp_path)), fresh_for=2.0, clock=clock), clock


def test_appends_to_lancedb_tables_go_straight_to_the_native_append(tmp_path):
    _, appenders, _ = direct_setup(tmp_path)
    assert appenders.direct("t")
    _, recorded, _, _ = setup(tmp_path / "other")
    assert not recorded.direct("t")  # not LanceDB's table: through its add


def test_a_native_append_lands_every_column_as_given_at_the_version_it_reports(tmp_path):
    table, appenders, _ = direct_setup(tmp_path)
    version = appenders.add(
        "t", pa.Table.from_pylist([{"id": "a", "n": 1}, {"id": "b", "n": None}], schema=SCHEMA)
    )
    assert version == table.version
    assert sorted(table.to_arrow().to_pylist(), key=lambda row: row["id"]) == [
        {"id": "a", "n": 1},
        {"id": "b", "n": None},
    ]


def test_a_native_append_after_other_handles_committed_keeps_their_rows(tmp_path):
    table, appenders, clock = direct_setup(tmp_path)
    appenders.add("t", rows("a"))
    table.add(rows("b"))
    table.add(rows("c"))
    clock.now += 1.0  # still fresh: rebased over the two commits, not checked out
    version = appenders.add("t", rows("d"))
    assert appenders.checkouts == 0
    assert version == table.version and ids(table) == ["a", "b", "c", "d"]


def test_a_failed_native_append_adds_nothing_and_the_next_one_starts_from_the_newest_version(tmp_path):
    table, appenders, _ = direct_setup(tmp_path)
    appenders.add("t", rows("a"))
    table.add(rows("b"))
    wrong = pa.Table.from_pylist([{"id": "c", "extra": 1.5}])
    with pytest.raises(ValueError, match="extra"):
        appenders.add("t", wrong)
    assert ids(table) == ["a", "b"]
    version = appenders.add("t", rows("c"))
    assert appenders.checkouts == 1
    assert version == table.version and ids(table) == ["a", "b", "c"]


def test_a_native_append_of_a_vector_with_nan_is_refused_as_table_add_refuses_it(tmp_path):
    checked = lancedb.connect(str(tmp_path), read_consistency_interval=timedelta(0))
    schema = pa.schema([pa.field("id", pa.string()), pa.field("vector", pa.list_(pa.float32(), 2))])
    table = checked.create_table("v", schema=schema)
    appenders = Appenders(lancedb.connect(str(tmp_path)))
    assert appenders.direct("v")
    bad = pa.Table.from_pylist([{"id": "a", "vector": [float("nan"), 1.0]}], schema=schema)
    with pytest.raises(ValueError, match="NaN"):
        appenders.add("v", bad)
    with pytest.raises(ValueError, match="NaN"):
        table.add(bad)
    assert table.count_rows() == 0


def test_a_native_append_this_lancedb_calls_otherwise_falls_back_to_table_add(tmp_path, caplog):
    table, appenders, _ = direct_setup(tmp_path)
    appenders.add("t", rows("a"))

    def refused(data):
        raise TypeError("add() got an unexpected keyword argument 'progress'")

    appenders._opened("t").direct = refused
    version = appenders.add("t", rows("b"))
    assert not appenders.direct("t") and "native append refused" in caplog.text
    assert version == table.version and ids(table) == ["a", "b"]
