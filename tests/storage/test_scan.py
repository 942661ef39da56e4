"""A read of a LanceDB table is one round trip into LanceDB's event loop, and reads the same rows as
LanceDB's own query builder; a table that is not LanceDB's is read through its ``search()``."""

from datetime import timedelta

import lancedb
import pyarrow as pa
import pytest
from lancedb.background_loop import LOOP

from storage.filters import equals
from storage.scan import EVERY_ROW, scan, scan_rows

SCHEMA = pa.schema([pa.field("id", pa.string()), pa.field("group", pa.string()), pa.field("n", pa.int64())])


@pytest.fixture
def table(tmp_path):
    db = lancedb.connect(str(tmp_path), read_consistency_interval=timedelta(0))  # as the store's readers
    table = db.create_table("t", schema=SCHEMA)
    for start in (0, 15):  # two fragments, more rows than LanceDB's default limit of 10
        rows = [
            {"id": f"r{n}", "group": "even" if n % 2 == 0 else "odd", "n": n}
            for n in range(start, start + 15)
        ]
        table.add(pa.Table.from_pylist(rows, schema=SCHEMA))
    return table


class CountedLoop:
    """LanceDB's event loop, counting the calls that cross into it."""

    def __init__(self, monkeypatch) -> None:
        self.crossings = 0
        run = LOOP.run

        def counted(future):
            self.crossings += 1
            return run(future)

        monkeypatch.setattr(LOOP, "run", counted)


def test_a_read_crosses_into_lancedbs_event_loop_once_where_the_query_builder_crosses_several_times(
    table, monkeypatch
):
    loop = CountedLoop(monkeypatch)
    scan(table, equals("group", "odd"), ["id"])
    assert loop.crossings == 1
    loop.crossings = 0
    table.search().where(equals("group", "odd")).select(["id"]).limit(EVERY_ROW).to_arrow()
    assert loop.crossings >= 4  # the schema three times, the query, each batch: what scan did before


def test_a_read_finds_what_the_query_builder_finds_every_row_by_default(table):
    odd = scan(table, equals("group", "odd"), ["id", "n"])
    built = table.search().where(equals("group", "odd")).select(["id", "n"]).limit(EVERY_ROW).to_arrow()
    assert odd.schema == built.schema
    assert sorted(odd.to_pylist(), key=lambda row: row["n"]) == sorted(
        built.to_pylist(), key=lambda row: row["n"]
    )
    assert odd.num_rows == 15
    assert scan(table, None, None).num_rows == 30  # no condition, every column, past LanceDB's 10
    assert scan(table, None, ["id"], limit=4).num_rows == 4
    assert scan_rows(table, equals("id", "r7"), None) == [{"id": "r7", "group": "odd", "n": 7}]


def test_a_read_with_row_ids_carries_lancedbs_row_id_of_each_row(table):
    read = scan(table, equals("id", "r3"), ["id"], with_row_id=True)
    assert read.column_names == ["id", "_rowid"]
    built = (
        table.search().where(equals("id", "r3")).select(["id"]).with_row_id(True).limit(EVERY_ROW).to_arrow()
    )
    assert read.column("_rowid").to_pylist() == built.column("_rowid").to_pylist()


class BuiltQuery:
    """A query builder of a table that is not LanceDB's, recording what it was asked."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows
        self.asked: list[tuple] = []

    def where(self, condition):
        self.asked.append(("where", condition))
        return self

    def select(self, columns):
        self.asked.append(("select", columns))
        return self

    def with_row_id(self, wanted):
        self.asked.append(("with_row_id", wanted))
        return self

    def limit(self, limit):
        self.asked.append(("limit", limit))
        return self

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_pylist(self.rows)


class OtherTable:
    def __init__(self, query: BuiltQuery) -> None:
        self.query = query

    def search(self) -> BuiltQuery:
        return self.query


def test_a_table_that_is_not_lancedbs_is_read_through_its_own_query_builder():
    query = BuiltQuery([{"id": "a"}])
    condition = equals("id", "a")
    read = scan(OtherTable(query), condition, ["id"], with_row_id=True)
    assert read.to_pylist() == [{"id": "a"}]
    assert query.asked == [
        ("where", condition),
        ("select", ["id"]),
        ("with_row_id", True),
        ("limit", EVERY_ROW),
    ]
