"""Row-level export and import of whole stores (storage.portable) on real LanceDB stores."""

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from storage import portable, schema
from storage.portable import RowError
from storage.records import (
    AbLogRow,
    ContradictionRecord,
    LineageEvent,
    MemoryCredit,
    OutcomeRecord,
    RetrievalRecord,
    Scope,
    Viewer,
    WeightEvent,
    org_shelf,
)
from storage.store import MemoryStore
from tests.storage.test_store import DIM, NOW, SCOPE, new, vec

OTHER = Scope("acme", "api")
# Little-endian float32 [0.5, -2, 0, 0, 0, 0, 0, 0] and [1, 0, ...]: 3f000000, c0000000, then zeros.
HALF_MINUS_TWO = "AAAAPwAAAMAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
ONE_HOT = "AACAPwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="


def open_store(path, **options) -> MemoryStore:
    return MemoryStore.open(str(path), vector_dim=DIM, **options)


@pytest.fixture
def store(tmp_path):
    opened = open_store(tmp_path / "a")
    yield opened
    opened.close()


@pytest.fixture
def target(tmp_path):
    opened = open_store(tmp_path / "b")
    yield opened
    opened.close()


def fill(store: MemoryStore) -> None:
    """One row in every table, two scopes of memories."""
    first = new("m1", "postgres pool size is 20", tags=("db",), episode_id="ep1", kind="episode")
    store.insert_memory(replace(first, vector=(0.5, -2.0, 0, 0, 0, 0, 0, 0)))
    store.insert_memory(new("m2", "the cat sat", hot=(1,), created_at=NOW + timedelta(microseconds=7)))
    store.insert_memory(new("m3", "elsewhere", scope=OTHER))
    store.add_lineage(
        [LineageEvent("evt_1", "acme", "web", "supersede", "m2", "m1", "rules", "why", "agent", "s1", NOW)]
    )
    store.add_attestation(store.get_memory("m1", SCOPE), "other-agent", "s2", NOW)
    store.put_contradictions(
        [ContradictionRecord("acme", "web", "m2", "m1", "polarity", "on/off", 0.9, "open", None, NOW, None)]
    )
    store.put_outcome(
        OutcomeRecord(
            "s1",
            "acme",
            "web",
            "success",
            1.0,
            None,
            ("m1",),
            NOW,
            NOW,
            1,
            credits=(MemoryCredit("m1", "helpful", 1.0, 1.0, 0),),
            queries=("pool",),
            query_vectors=((0.5,) * 8,),
            query_embedder="e",
        )
    )
    store.add_weight_events([WeightEvent("m1", "acme", "web", "s1", 1.0, 1.15, 1, NOW)])
    store.record_retrieval(
        RetrievalRecord("ret_1", "acme", "web", "s1", "agent", "pool", "recall", NOW, 5, 100, ("m1",), "{}")
    )
    store.log_ab_rows([AbLogRow("ret_1", "s1", "acme", "web", "pool", "m1", 0.8, 1.0, 0.8, 1, 1, True, NOW)])


def rows_by_table(store: MemoryStore, **options) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for table, row in portable.export_rows(store, **options):
        found.setdefault(table, []).append(row)
    return found


def import_all(source: MemoryStore, target: MemoryStore) -> dict[str, portable.ImportCount]:
    return {table: portable.import_rows(target, table, rows) for table, rows in rows_by_table(source).items()}


def test_rows_are_json_ready_with_utc_microsecond_times_and_base64_little_endian_vectors(store):
    fill(store)
    memories = rows_by_table(store)[schema.MEMORIES]
    first = next(row for row in memories if row["id"] == "m1")
    assert first["vector"] == HALF_MINUS_TWO
    assert first["created_at"] == "2026-05-01T12:00:00.000000Z"
    assert first["tags"] == ["db"] and first["tags_key"] == "|db|"
    assert first["purged_at"] is None and first["weight"] == 1.0
    second = next(row for row in memories if row["id"] == "m2")
    assert second["created_at"] == "2026-05-01T12:00:00.000007Z"


@pytest.mark.slow
def test_every_table_is_exported_in_a_stable_order_and_scopes_and_vectors_can_be_left_out(store):
    fill(store)
    exported = list(portable.export_rows(store))
    assert exported == list(portable.export_rows(store))
    assert [table for table, _ in exported] == [
        schema.EPISODES,
        schema.MEMORIES,
        schema.MEMORIES,
        schema.MEMORIES,
        schema.LINEAGE,
        schema.ATTESTATIONS,
        schema.CONTRADICTIONS,
        schema.OUTCOMES,
        schema.FEEDBACK,  # the session's queries
        schema.FEEDBACK,  # and m1's credit
        schema.WEIGHT_EVENTS,
        schema.RETRIEVALS,  # the buffered logs are flushed first
        schema.AB_LOGS,
    ]
    # Scope by scope ("acme/api" before "acme/web"), then by id.
    assert [row["id"] for table, row in exported if table == schema.MEMORIES] == ["m3", "m1", "m2"]
    web_only = rows_by_table(store, scopes=[SCOPE], vectors=False)
    assert [row["id"] for row in web_only[schema.MEMORIES]] == ["m1", "m2"]
    assert all("vector" not in row for row in web_only[schema.MEMORIES])


@pytest.mark.slow
def test_an_import_writes_every_row_as_it_was_and_a_second_import_writes_nothing(store, target):
    fill(store)
    first = import_all(store, target)
    assert {table: (count.written, count.skipped) for table, count in first.items()} == {
        schema.EPISODES: (1, 0),
        schema.MEMORIES: (3, 0),
        schema.LINEAGE: (1, 0),
        schema.ATTESTATIONS: (1, 0),
        schema.CONTRADICTIONS: (1, 0),
        schema.OUTCOMES: (1, 0),
        schema.FEEDBACK: (2, 0),
        schema.WEIGHT_EVENTS: (1, 0),
        schema.RETRIEVALS: (1, 0),
        schema.AB_LOGS: (1, 0),
    }
    assert list(portable.export_rows(target)) == list(portable.export_rows(store))
    again = import_all(store, target)
    assert all(count.written == 0 and count.skipped > 0 for count in again.values())
    assert target.count_memories() == 3


@pytest.mark.slow
def test_rows_repeated_in_one_import_are_written_once(store, target):
    fill(store)
    memories = rows_by_table(store)[schema.MEMORIES]
    count = portable.import_rows(target, schema.MEMORIES, [*memories, memories[0]])
    assert (count.written, count.skipped) == (3, 1)


@pytest.mark.slow
def test_an_episode_id_used_in_two_scopes_is_two_episodes(store, target):
    store.insert_memory(new("m1", "one", episode_id="ep"))
    store.insert_memory(new("m2", "two", episode_id="ep", scope=OTHER))
    counts = import_all(store, target)
    assert counts[schema.EPISODES].written == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"weight": "heavy"}, "weight must be a number"),
        ({"content": None}, "content needs a value"),
        ({"colour": "red"}, "columns the table does not: colour"),
        ({"vector": "AACAPw=="}, "has 1 dimensions but this store holds 8-d"),
        ({"vector": "not base64!"}, "not valid base64"),
        ({"created_at": "yesterday"}, "created_at must be an ISO-8601 time"),
        ({"tags": "db"}, "tags must be a list of strings"),
    ],
)
def test_a_row_that_does_not_fit_its_table_is_refused_and_nothing_of_the_batch_is_written(
    store, target, change, message
):
    fill(store)
    good, bad = rows_by_table(store)[schema.MEMORIES][:2]
    with pytest.raises(RowError, match=message):
        portable.import_rows(target, schema.MEMORIES, [good, {**bad, **change}])
    assert target.count_memories() == 0


@pytest.mark.slow
def test_checking_a_row_accepts_a_missing_vector_that_an_import_must_be_given(store, target):
    fill(store)
    row = rows_by_table(store, vectors=False)[schema.MEMORIES][0]
    portable.validate_row(target, schema.MEMORIES, row)
    assert not portable.has_vector(target, row)
    with pytest.raises(RowError, match="vector needs a 8-dimensional vector"):
        portable.import_rows(target, schema.MEMORIES, [row])
    given = portable.with_vector(row, vec(0), "new-model")
    assert given["vector"] == ONE_HOT and given["embedder"] == "new-model"
    assert portable.import_rows(target, schema.MEMORIES, [given]).written == 1


@pytest.mark.slow
def test_imported_memories_reach_the_scope_copy_this_process_already_holds(store, target):
    fill(store)
    assert target.get_memory("m1", SCOPE) is None  # builds the (empty) copy of the scope
    assert target.cache.holds(SCOPE)
    import_all(store, target)
    assert target.get_memory("m2", SCOPE).content == "the cat sat"
    hits = target.vector_search(SCOPE, np.asarray(vec(1), dtype=np.float32), embedder="emb", limit=1)
    assert [hit.record.id for hit in hits] == ["m2"]


def test_the_header_round_trips_and_a_newer_format_is_refused(store):
    header = portable.export_header(store, {schema.MEMORIES: 3}, NOW)
    line = header.to_json()
    assert line == {
        "memoria_export": 1,
        "schema_version": schema.SCHEMA_VERSION,
        "vector_dim": DIM,
        "exported_at": "2026-05-01T12:00:00.000000Z",
        "counts": {schema.MEMORIES: 3},
    }
    assert portable.parse_header(line) == header
    with pytest.raises(RowError, match="format 2; this memoria reads format 1: upgrade"):
        portable.parse_header({**line, "memoria_export": 2})
    with pytest.raises(RowError, match="not a memoria export header"):
        portable.parse_header({"role": "user", "content": "hi"})
    with pytest.raises(RowError, match="counts must map"):
        portable.parse_header({**line, "counts": [3]})
    without = {key: value for key, value in line.items() if key != "exported_at"}
    with pytest.raises(RowError, match="exported_at is missing: it must be an ISO-8601 time, such as"):
        portable.parse_header(without)


def test_an_export_for_an_agent_leaves_out_what_it_may_not_read_and_every_row_naming_it(store):
    store.insert_memory(new("shared", "deploys go out on Tuesdays"))
    store.insert_memory(new("mine", "my own note", agent_id="alice", visibility="agent"))
    store.insert_memory(new("theirs", "bob's own note", agent_id="bob", visibility="agent", hot=(1,)))
    store.insert_memory(new("org", "acme-wide rule", scope=org_shelf("acme"), visibility="org", hot=(2,)))
    store.add_lineage(
        [
            LineageEvent(
                "evt_1", "acme", "web", "supersede", "theirs", "shared", "rules", "why", "bob", "s9", NOW
            )
        ]
    )
    for session, memory_id in (("s-bob", "theirs"), ("s-alice", "shared")):
        store.put_outcome(
            OutcomeRecord(
                session,
                "acme",
                "web",
                "success",
                1.0,
                None,
                (memory_id,),
                NOW,
                NOW,
                1,
                credits=(MemoryCredit(memory_id, "helpful", 1.0, 1.0, 0),),
            )
        )
        store.add_weight_events([WeightEvent(memory_id, "acme", "web", session, 1.0, 1.15, 1, NOW)])
        store.record_retrieval(
            RetrievalRecord(
                f"ret_{session}", "acme", "web", session, "x", "q", "recall", NOW, 5, 100, (memory_id,), "{}"
            )
        )
    everything = rows_by_table(store, scopes=[SCOPE])
    assert {row["id"] for row in everything[schema.MEMORIES]} == {"shared", "mine", "theirs"}

    found = rows_by_table(store, scopes=[SCOPE], viewer=Viewer("alice", "s1"))
    assert {row["id"] for row in found[schema.MEMORIES]} == {"shared", "mine", "org"}  # the org's shelf too
    assert schema.LINEAGE not in found  # it names bob's private memory
    assert {row["session_id"] for row in found[schema.OUTCOMES]} == {"s-alice"}
    assert {row["session_id"] for row in found[schema.FEEDBACK]} == {"s-alice"}
    assert {row["session_id"] for row in found[schema.WEIGHT_EVENTS]} == {"s-alice"}
    assert {row["retrieval_id"] for row in found[schema.RETRIEVALS]} == {"ret_s-alice"}


TRACE = '{"candidates": [{"id": "m1", "preview": "pool is 64"}]}'


def test_a_retrieval_record_is_exported_with_its_trace_as_json_text_and_imported_compressed(store, target):
    store.record_retrieval(
        RetrievalRecord("ret_t", "acme", "web", "s1", "agent", "pool", "recall", NOW, 5, 100, (), TRACE)
    )
    [row] = rows_by_table(store)[schema.RETRIEVALS]
    assert row["trace_json"] == TRACE
    assert "trace_zlib" not in row and "trace_ids" not in row  # what only the store writes stays home
    assert portable.import_rows(target, schema.RETRIEVALS, [row]).written == 1
    assert target.get_retrieval("ret_t", SCOPE).trace_json == TRACE
    [stored] = target.tables()[schema.RETRIEVALS].to_arrow().to_pylist()
    assert (stored["trace_json"], stored["trace_ids"]) == ("", "\nm1\n")  # kept as the store keeps its own


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"trace_zlib": "eJw="}, "columns the table does not: trace_zlib"),
        ({"trace_json": "not json"}, "trace_json must be a recall's trace"),
    ],
)
def test_a_retrieval_row_that_is_not_an_exported_one_is_refused(store, target, change, message):
    store.record_retrieval(
        RetrievalRecord("ret_t", "acme", "web", "s1", "agent", "pool", "recall", NOW, 5, 100, (), TRACE)
    )
    [row] = rows_by_table(store)[schema.RETRIEVALS]
    with pytest.raises(RowError, match=message):
        portable.import_rows(target, schema.RETRIEVALS, [{**row, **change}])
    assert target.tables()[schema.RETRIEVALS].count_rows() == 0
