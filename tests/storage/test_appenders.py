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


def setup(tmp_path):
    checked = lancedb.connect(str(tmp_path), read_consistency_interval=timedelta(0))
    table = checked.create_table("t", schema=SCHEMA)
    clock = FakeClock()
    return table, Appenders(lancedb.connect(str(tmp_path)), fresh_for=2.0, clock=clock), clock


def ids(table) -> list[str]:
    return sorted(table.to_arrow().column("id").to_pylist())


def test_an_append_is_seen_by_a_checked_reader_at_the_version_it_reports(tmp_path):
    table, appenders, _ = setup(tmp_path)
    version = appenders.add("t", rows("a"))
    assert table.version == version
    assert ids(table) == ["a"]


def test_an_append_after_other_handles_committed_keeps_their_rows_and_reports_the_newest_version(tmp_path):
    table, appenders, clock = setup(tmp_path)
    appenders.add("t", rows("a"))
    table.add(rows("b"))  # another process, while this handle still holds the older version
    table.add(rows("c"))
    clock.now += 1.0  # still fresh: lance rebases the append over the two commits
    version = appenders.add("t", rows("d"))
    assert appenders.checkouts == 0
    assert version == table.version
    assert ids(table) == ["a", "b", "c", "d"]


def test_a_handle_idle_past_its_freshness_moves_to_the_newest_version_first(tmp_path):
    table, appenders, clock = setup(tmp_path)
    appenders.add("t", rows("a"))
    for name in ("b", "c", "d"):
        table.add(rows(name))
    clock.now += 2.5
    version = appenders.add("t", rows("e"))
    assert appenders.checkouts == 1
    assert version == table.version and ids(table) == ["a", "b", "c", "d", "e"]


@pytest.mark.filterwarnings("ignore:optimize.cleanup_older_than=0. removes every version")
def test_an_append_over_versions_cleaned_up_meanwhile_lands_on_the_newest(tmp_path):
    table, appenders, _ = setup(tmp_path)
    appenders.add("t", rows("a"))
    for name in ("b", "c"):
        table.add(rows(name))
    # Maintenance compacted and dropped every older version, the one this handle holds included.
    table.optimize(cleanup_older_than=timedelta(0))
    version = appenders.add("t", rows("d"))
    assert version == table.version
    assert ids(table) == ["a", "b", "c", "d"]
