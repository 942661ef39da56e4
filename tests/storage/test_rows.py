"""How records are laid out in rows: a retrieval record's trace (compressed, with what it quotes), rows as Arrow."""

import json
import zlib
from datetime import UTC
from types import MappingProxyType

import numpy as np
import pyarrow as pa
import pytest

from storage.rows import (
    arrow_rows,
    ids_of_key,
    quoted_by,
    retrieval_from_row,
    trace_ids_key,
    trace_of_row,
    with_trace,
)
from tests.storage.test_store import NOW

TRACE = json.dumps(
    {"candidates": [{"id": "mem_b", "preview": "pool is 64"}, {"id": "mem_a", "preview": "x"}]}
)


def row(**columns):
    return {
        "retrieval_id": "ret_1",
        "org_id": "acme",
        "project_id": "web",
        "session_id": "s1",
        "agent_id": "agent",
        "query": "pool size",
        "purpose": "recall",
        "created_at": NOW,
        "top_k": 5,
        "char_budget": 1000,
        "context_ids": ["mem_b"],
        **columns,
    }


def test_a_trace_is_kept_compressed_with_the_memories_it_quotes_one_per_line():
    stored = with_trace(row(trace_json=TRACE), TRACE, quoted_by(TRACE))
    assert stored["trace_json"] == ""
    assert zlib.decompress(stored["trace_zlib"]).decode() == TRACE
    assert len(stored["trace_zlib"]) < len(TRACE)
    assert stored["trace_ids"] == "\nmem_a\nmem_b\n"  # sorted, each between line breaks
    assert ids_of_key(stored["trace_ids"]) == {"mem_a", "mem_b"}


def test_a_stored_row_reads_back_as_the_record_it_was_made_from():
    stored = with_trace(row(trace_json=TRACE), TRACE, ["mem_b", "mem_a"])
    record = retrieval_from_row(stored)
    assert record.trace_json == TRACE
    assert record.context_ids == ("mem_b",)
    assert not hasattr(record, "trace_zlib")


def test_a_row_written_before_schema_10_reads_its_trace_from_the_text_column():
    old = row(trace_json=TRACE, trace_zlib=None, trace_ids=None)
    assert trace_of_row(old) == TRACE
    assert retrieval_from_row(old).trace_json == TRACE
    assert trace_of_row(row(trace_json=TRACE)) == TRACE  # queued, not compressed yet


def test_a_trace_that_quotes_nothing_has_an_empty_key():
    assert trace_ids_key([]) == "\n"
    assert ids_of_key("\n") == set()
    assert quoted_by("{}") == []


SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("weight", pa.float64()),
        pa.field("created_at", pa.timestamp("us", tz="UTC")),
        pa.field("vector", pa.list_(pa.float32(), 3)),
    ],
    metadata={b"kept": b"yes"},
)


def test_rows_become_the_table_from_pylist_makes_missing_keys_null_and_unknown_keys_left_out():
    rows = [
        {"id": "mem_a", "tags": ["x"], "weight": 1.0, "created_at": NOW, "vector": np.ones(3, np.float32)},
        {"id": "mem_b", "vector": [0.5, 0.25, 0.0], "not_a_column": 7},
    ]
    table = arrow_rows(rows, SCHEMA)
    assert table.equals(pa.Table.from_pylist(rows, schema=SCHEMA), check_metadata=True)
    assert table.column("weight").to_pylist() == [1.0, None]
    assert table.column("vector").to_pylist()[1] == [0.5, 0.25, 0.0]
    assert table.column("created_at").to_pylist()[0] == NOW.astimezone(UTC)
    assert arrow_rows([], SCHEMA).num_rows == 0 and arrow_rows([], SCHEMA).schema == SCHEMA
    read_only = MappingProxyType({"id": "mem_c", "weight": 0.5})  # any mapping, as from_pylist takes
    assert arrow_rows([read_only], SCHEMA).equals(pa.Table.from_pylist([read_only], schema=SCHEMA))


def test_a_value_of_the_wrong_type_is_refused_as_from_pylist_refuses_it():
    with pytest.raises(pa.ArrowInvalid, match="Could not convert 'heavy'"):
        arrow_rows([{"id": "mem_a", "weight": "heavy"}], SCHEMA)
    with pytest.raises(pa.ArrowInvalid, match="Could not convert 'heavy'"):
        pa.Table.from_pylist([{"id": "mem_a", "weight": "heavy"}], schema=SCHEMA)
