import json
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from storage import migrations, schema
from storage.forgetting import WITHHELD
from storage.migrations import StoreVersionError
from storage.records import (
    AbLogRow,
    LineageEvent,
    NewMemory,
    OutcomeRecord,
    RetrievalRecord,
    Scope,
    SessionFeedback,
)
from storage.store import MemoryStore, StoreError
from tests.ab_logs import ab_log_rows
from tests.forensics import files_holding
from tests.records import memory_record

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
SCOPE = Scope("acme", "web")
DIM = 8


def vec(*hot: int) -> tuple[float, ...]:
    values = np.zeros(DIM, dtype=np.float32)
    for index in hot:
        values[index] = 1.0
    return tuple((values / np.linalg.norm(values)).tolist())


def new(memory_id: str, content: str, *, scope: Scope = SCOPE, hot=(0,), **fields) -> NewMemory:
    fields = {
        "agent_id": "agent",
        "session_id": "s1",
        "created_at": NOW,
        "updated_at": NOW,
        "embedder": "emb",
        **fields,
    }
    record = memory_record(
        memory_id, org_id=scope.org_id, project_id=scope.project_id, content=content, **fields
    )
    return NewMemory(record, vec(*hot), content + ("\n" + " ".join(record.tags) if record.tags else ""))


@pytest.fixture
def store(tmp_path) -> MemoryStore:
    opened = MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM)
    yield opened
    opened.close()


def test_a_new_store_is_created_at_the_current_schema_version(store):
    assert store.schema_version == schema.SCHEMA_VERSION
    assert store.vector_dim == DIM
    assert store.count_memories() == 0


def test_reopening_keeps_the_stores_vector_width(tmp_path):
    MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM).close()
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=384) as reopened:
        assert reopened.vector_dim == DIM


def test_a_store_from_a_newer_release_is_refused_with_advice(tmp_path):
    import lancedb

    MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM).close()
    migrations.write_meta(lancedb.connect(str(tmp_path / "db")), {"schema_version": "99"})
    with pytest.raises(StoreVersionError, match="upgrade memoria-mcp"):
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM)


def test_insert_then_read_back_verbatim_with_provenance(store):
    content = "  We switched from Postgres to MySQL.\n\tReason: licensing  "
    stored, created = store.insert_memory(new("m1", content, tags=("db", "infra"), episode_id="ep1"))
    assert created
    got = store.get_memory("m1", SCOPE)
    assert got == stored
    assert got.content == content
    assert (got.agent_id, got.session_id, got.episode_id, got.tags) == ("agent", "s1", "ep1", ("db", "infra"))
    assert got.created_at == NOW


def test_inserting_an_existing_id_returns_the_stored_row_untouched(store):
    store.insert_memory(new("m1", "first"))
    again, created = store.insert_memory(new("m1", "second write of the same id"))
    assert not created and again.content == "first"
    assert store.count_memories() == 1


def test_bulk_insert_reports_each_row_in_order(store):
    store.insert_memory(new("old", "already here"))
    results = store.insert_many([new("a", "a"), new("old", "x"), new("b", "b"), new("a", "a again")])
    assert [(record.id, created) for record, created in results] == [
        ("a", True),
        ("old", False),
        ("b", True),
        ("a", False),
    ]
    assert store.count_memories() == 3


def test_a_bulk_insert_across_scopes_copies_each_scope_and_still_sees_other_writers_ids(tmp_path):
    # Which ids exist is answered by the scopes' copies (a table lookup scans every row not indexed
    # yet); a copy catches up with what another process wrote before it answers.
    other_scope = Scope("acme", "api")
    with (
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as ours,
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as theirs,
    ):
        ours.insert_many([new("a", "a"), new("b", "b", scope=other_scope)])
        assert ours.cache.holds(SCOPE) and ours.cache.holds(other_scope)
        theirs.insert_memory(new("c", "written by another process", scope=other_scope))
        results = ours.insert_many(
            [new("c", "c again", scope=other_scope), new("d", "d"), new("a", "a again")]
        )
        assert [(record.id, record.content, created) for record, created in results] == [
            ("c", "written by another process", False),
            ("d", "d", True),
            ("a", "a", False),
        ]
        assert ours.count_memories() == theirs.count_memories() == 4


@pytest.mark.slow
def test_replicas_on_an_object_store_inserting_one_new_id_at_once_store_it_once(s3_bucket):
    # No lock keeps replicas apart on an object store: each inserts with merge_insert on the id. The id
    # is LanceDB's declared primary key (migration 8), so the later of two racing commits conflicts and is
    # replayed against the row the first one wrote: one row; the replica that lost hands that row back and
    # says it was there, and still creates its batch's other, new memory. (Whether a round's two merges
    # overlap is up to timing; without the declared key this test failed on its first run.)
    bucket, options = s3_bucket
    uri = f"{bucket}/store"
    rounds = 4
    with (
        MemoryStore.open(uri, vector_dim=DIM, storage_options=options) as first,
        MemoryStore.open(uri, vector_dim=DIM, storage_options=options) as second,
    ):
        errors: list[Exception] = []
        for number in range(rounds):
            barrier = threading.Barrier(2)
            results: dict[str, list] = {}

            def insert(
                session: str, replica: MemoryStore, batch: list, barrier=barrier, results=results
            ) -> None:
                try:
                    barrier.wait()
                    results[session] = replica.insert_many(batch)
                except Exception as exc:  # reported below: the test fails on it
                    errors.append(exc)

            batches = {
                session: [
                    new(f"m{number}", "One fact, stated on two replicas", session_id=session),
                    new(f"{session}-{number}", f"{session} alone, round {number}", session_id=session),
                ]
                for session in ("s-first", "s-second")
            }
            threads = [
                threading.Thread(target=insert, args=(session, replica, batches[session]))
                for session, replica in (("s-first", first), ("s-second", second))
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
            assert errors == []
            shared = {session: found[0] for session, found in results.items()}
            assert sorted(created for _, created in shared.values()) == [False, True]
            (winner,) = [session for session, (_, created) in shared.items() if created]
            assert {record.session_id for record, _ in shared.values()} == {winner}
            assert all(
                found[1][1] and found[1][0].session_id == session for session, found in results.items()
            )
        ids = first._memories.to_arrow().column("id").to_pylist()
        assert len(ids) == len(set(ids)) == 3 * rounds


def test_a_vector_of_the_wrong_width_is_refused(store):
    bad = replace(new("m1", "x"), vector=(1.0, 0.0))
    with pytest.raises(StoreError, match="2 dimensions but this store holds 8-d vectors"):
        store.insert_memory(bad)


def test_vector_search_ranks_by_cosine_within_scope_status_and_embedder(store):
    store.insert_many(
        [
            new("near", "near", hot=(0,)),
            new("mid", "mid", hot=(0, 1)),
            new("far", "far", hot=(2,)),
            new("other-scope", "x", hot=(0,), scope=Scope("acme", "api")),
            new("retired", "x", hot=(0,), status="superseded"),
            new("other-embedder", "x", hot=(0,), embedder="other"),
        ]
    )
    hits = store.vector_search(SCOPE, np.array(vec(0)), embedder="emb", limit=10)
    assert [hit.record.id for hit in hits] == ["near", "mid", "far"]
    assert [hit.score for hit in hits] == pytest.approx([1.0, 2**-0.5, 0.0], abs=1e-5)


def test_new_tags_are_searched_at_once_in_this_process_and_in_another(store, tmp_path):
    """A memory's tags change by an UPDATE found by its row id (a merge joined the whole table on id): the
    copy that wrote them searches its new text at once, and a process that reads the table sees it too."""
    store.insert_many([new("m1", "The deploy runs on Fridays"), new("m2", "cats on mats")])
    assert store.fulltext_search(SCOPE, "kubernetes", limit=10) == []  # the scope copy is built
    store.set_tags(
        "m1", ["kubernetes"], "The deploy runs on Fridays\nkubernetes", NOW, tier=("protected", None)
    )
    assert [h.record.id for h in store.fulltext_search(SCOPE, "kubernetes", limit=10)] == ["m1"]
    assert (store.get_memory("m1").tags, store.get_memory("m1").protection_tier) == (
        ("kubernetes",),
        "protected",
    )
    other = MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM)
    try:
        assert [h.record.id for h in other.fulltext_search(SCOPE, "kubernetes", limit=10)] == ["m1"]
    finally:
        other.close()
    store.set_tags("m2", [], "cats on mats", NOW, tier=("ephemeral", NOW + timedelta(days=1)))  # no tag left
    assert (store.get_memory("m2").tags, store.get_memory("m2").expires_at) == ((), NOW + timedelta(days=1))


def test_lancedbs_full_text_index_is_asked_the_query_as_the_store_rewrites_it(tmp_path):
    """LanceDB's own index (a scope beyond the copies) stems without the analyzer's readings of a word's
    other forms: the store asks it the query with those forms added, as the server's store does."""
    from retrieval.text import with_other_forms

    texts = [new("m1", "Decision: billing moves to Postgres"), new("m2", "cats on mats")]
    with MemoryStore.open(str(tmp_path / "plain"), vector_dim=DIM, cache_scope_rows=0) as plain:
        plain.insert_many(texts)
        assert plain.fulltext_search(SCOPE, "decide", limit=10) == []
    with MemoryStore.open(
        str(tmp_path / "forms"), vector_dim=DIM, cache_scope_rows=0, lancedb_query=with_other_forms
    ) as forms:
        forms.insert_many(texts)
        assert forms.fulltext_engine(SCOPE) == "lancedb-bm25"
        assert [hit.record.id for hit in forms.fulltext_search(SCOPE, "decide", limit=10)] == ["m1"]


def test_fulltext_search_matches_word_forms_and_filters_by_kind_and_tag(store):
    store.insert_many(
        [
            new("m1", "The databases were migrated", tags=("db",)),
            new("m2", "database migration finished", kind="episode"),
            new("m3", "cats on mats"),
        ]
    )
    assert {h.record.id for h in store.fulltext_search(SCOPE, "database", limit=10)} == {"m1", "m2"}
    assert [h.record.id for h in store.fulltext_search(SCOPE, "database", limit=10, kinds=["episode"])] == [
        "m2"
    ]
    assert [h.record.id for h in store.fulltext_search(SCOPE, "database", limit=10, tags=["db"])] == ["m1"]
    assert store.fulltext_search(SCOPE, "   ", limit=10) == []


def test_rows_added_after_indexing_stay_searchable_through_maintenance(store):
    for index in range(20):
        store.insert_memory(new(f"m{index}", f"note number {index} about kubernetes"))
    fragments_before = store._memories.stats()["fragment_stats"]["num_fragments"]
    report = store.maintain(min_fragments=4)
    assert fragments_before >= 20
    assert schema.MEMORIES in report
    assert store._memories.stats()["fragment_stats"]["num_fragments"] < 4
    assert len(store.fulltext_search(SCOPE, "kubernetes", limit=50)) == 20
    assert len(store.vector_search(SCOPE, np.array(vec(0)), embedder="emb", limit=50)) == 20


@pytest.mark.parametrize(
    "hostile", ["acme' OR '1'='1", "acme\\' OR 1=1 --", "web%", 'a"b', "'; DROP TABLE memories; --"]
)
def test_quote_injection_in_a_scope_finds_nothing_and_breaks_nothing(store, hostile):
    store.insert_memory(new("m1", "secret of acme"))
    assert store.fulltext_search(Scope(hostile, "web"), "secret", limit=10) == []
    assert store.vector_search(Scope("acme", hostile), np.array(vec(0)), embedder="emb", limit=10) == []
    assert store.get_memory("m1", Scope(hostile, hostile)) is None
    assert store.count_memories() == 1


def test_weights_are_written_only_for_the_named_memories(store):
    store.insert_many([new("a", "a"), new("b", "b")])
    store.set_weights({"a": 1.15}, NOW + timedelta(minutes=1))
    assert store.get_memory("a").weight == 1.15
    assert store.get_memory("a").updated_at == NOW + timedelta(minutes=1)
    assert store.get_memory("b").weight == 1.0


def test_a_memory_superseded_already_is_never_made_a_survivor_so_two_never_supersede_each_other(store):
    # Two restatements consolidated at once may each pick the other to keep: the first decision stands.
    store.insert_memory(new("m1", "the staging cluster runs kubernetes"))
    store.insert_memory(new("m2", "the staging cluster runs kubernetes 1.29"))
    assert store.supersede(SCOPE, ["m1"], "m2", NOW) == ["m1"]
    assert store.supersede(SCOPE, ["m2"], "m1", NOW) == []
    m1, m2 = store.get_memory("m1", SCOPE), store.get_memory("m2", SCOPE)
    assert (m1.status, m1.replaced_by, m2.status) == ("superseded", "m2", "active")


def test_what_a_memory_replaced_is_read_from_its_scopes_copy_through_the_memories_between(tmp_path):
    def replaced(store, *ids):
        return {
            key: [m.id for m in value] for key, value in store.replaced_memories(SCOPE, list(ids)).items()
        }

    with MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as store:
        for memory_id, content in [
            ("m1", "port 8080"),
            ("m2", "port 9090"),
            ("m3", "port 7070"),
            ("m4", "tls on"),
        ]:
            store.insert_memory(new(memory_id, content))
        store.supersede(SCOPE, ["m1"], "m2", NOW)
        store.supersede(SCOPE, ["m2"], "m3", NOW)
        assert replaced(store, "m2", "m3", "m4") == {"m2": ["m1"], "m3": ["m2", "m1"]}
        assert replaced(store, "m3") == {"m3": ["m2", "m1"]}
        store.reactivate(SCOPE, "m2", NOW)  # active again: m3 replaces it no longer
        assert replaced(store, "m2", "m3") == {"m2": ["m1"]}
        # A restatement's supersede held before its commit lands (committed behind the call) counts already.
        store.insert_memory(new("m5", "port 7070."))
        assert store.hold_superseded(["m3"], "m5") == ["m3"]
        assert replaced(store, "m5") == {"m5": ["m3"]}
        store.release_superseded(["m3"], "m5")
        assert replaced(store, "m5") == {}
    # Without a copy the answer is empty: no index covers replaced_by, and every write asks.
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM, cache_scope_rows=0) as store:
        assert replaced(store, "m2") == {}


def test_retrievals_are_found_per_session_and_scope(store):
    def retrieval(rid, session, purpose="recall", scope=SCOPE):
        return RetrievalRecord(
            rid, scope.org_id, scope.project_id, session, "agent", "q", purpose, NOW, 5, 1000, ("m1",), "{}"
        )

    store.record_retrieval(retrieval("r1", "s1"))
    store.record_retrieval(retrieval("r2", "s1", purpose="explain"))
    store.record_retrieval(retrieval("r3", "s2"))
    store.record_retrieval(retrieval("r4", "s1", scope=Scope("other", "web")))
    # explain_ranking's read comes from the write-behind queue: no flush is waited for.
    assert store.get_retrieval("r4", SCOPE) is None
    assert store.get_retrieval("r1", SCOPE).context_ids == ("m1",)
    assert sorted(store.recent_sessions(SCOPE, "agent", NOW - timedelta(seconds=1))) == [
        ("s1", NOW),
        ("s2", NOW),
    ]
    assert store.recent_sessions(SCOPE, "agent", NOW) == []  # only recalls after the time given
    assert store._logs.pending() == 4
    # A report's read writes them first (so a purge finds them in the table), then reads the table.
    assert [r.retrieval_id for r in store.session_retrievals(SCOPE, "s1")] == ["r1"]
    assert store._logs.pending() == 0
    assert store.get_retrieval("r1", SCOPE).context_ids == ("m1",)
    assert sorted(store.recent_sessions(SCOPE, "agent", NOW - timedelta(seconds=1))) == [
        ("s1", NOW),
        ("s2", NOW),
    ]


def test_a_deferred_lineage_event_is_read_back_before_it_is_written(store):
    event = LineageEvent(
        "ev1", "acme", "web", "keep_both", "m1", "m2", "rule", "both can be true", "agent", "s1", NOW
    )
    store.add_lineage([event], deferred=True)
    assert store._logs.pending() == 1
    assert store.lineage(SCOPE, ["m2"]) == [event]
    assert store.recent_lineage(SCOPE, ["keep_both"], limit=5) == [event]
    assert store.lineage(Scope("other", "web"), ["m2"]) == []
    assert store._logs.pending() == 1  # the reads did not write it
    store.flush_logs()
    assert store.lineage(SCOPE, ["m1"]) == [event]  # once, from the table
    assert store.recent_lineage(SCOPE, ["keep_both"], limit=5) == [event]


def test_the_log_writer_finishes_while_a_request_holds_the_write_lock(store):
    # A request holding the lock (report_outcome) flushes the logs; if the background flush it waits
    # for needed that lock in turn, both would wait forever.
    record = RetrievalRecord("r1", "acme", "web", "s1", "agent", "q", "recall", NOW, 5, 1000, ("m1",), "{}")
    with store.exclusive():
        store.record_retrieval(record)
        background_flush = threading.Thread(target=store._logs.flush, daemon=True)
        background_flush.start()
        background_flush.join(timeout=30)
        assert not background_flush.is_alive()
        assert [r.retrieval_id for r in store.session_retrievals(SCOPE, "s1")] == ["r1"]


def test_an_outcome_is_replaced_in_place_and_keeps_its_replay_position(store):
    def outcome(session, score, first, revision):
        return OutcomeRecord(
            session,
            "acme",
            "web",
            "success",
            score,
            None,
            ("m1",),
            first,
            NOW + timedelta(hours=revision),
            revision,
        )

    store.put_outcome(outcome("late", 1.0, NOW + timedelta(minutes=5), 1))
    store.put_outcome(outcome("early", 0.0, NOW, 1))
    store.put_outcome(outcome("early", 0.5, NOW, 2))
    ordered = store.outcomes_in_scope(SCOPE)
    assert [(o.session_id, o.score, o.revision) for o in ordered] == [("early", 0.5, 2), ("late", 1.0, 1)]
    assert store.get_outcome(SCOPE, "early").score == 0.5


def test_a_first_report_is_appended_and_its_correction_replaces_it_in_place(store):
    from storage.records import MemoryCredit

    credit = MemoryCredit("m1", "helpful", 1.0, 1.0)
    first = OutcomeRecord("s1", "acme", "web", "success", 1.0, None, ("m1",), NOW, NOW, 1, credits=(credit,))
    assert store.session_feedback(SCOPE, "s1").revision is None
    store.put_outcome(first, first=True)
    assert store.session_feedback(SCOPE, "s1") == SessionFeedback(("m1",), 1)
    corrected = replace(
        first, score=0.0, outcome="failure", revision=2, credits=(replace(credit, score=0.0),)
    )
    store.put_outcome(corrected, store.get_outcome(SCOPE, "s1"))
    # One row per session in the report table, one per (session, memory) in the credit table.
    tables = store.tables()
    assert tables[schema.OUTCOMES].count_rows() == 1
    assert tables[schema.FEEDBACK].count_rows() == 2  # the session's queries row and m1's credit
    assert store.get_outcome(SCOPE, "s1").revision == 2
    assert [c.credit.score for c in store.credits_for(SCOPE, ["m1"])["m1"]] == [0.0]


def test_carried_credits_leave_a_session_that_named_the_heir_its_own_credit_and_replace_a_context_share(
    store,
):
    # A memory that takes another's place (an explicit update, a restatement) serves what the old one did.
    # A session that named the heir keeps what it said of it; one that named the old memory and saw the heir
    # only in a context said what that memory did for it under its earlier id (a new user's trial: the reply
    # said the credit went on, and the heir kept its context share).
    from storage.records import MemoryCredit

    old = MemoryCredit("old", "helpful", 1.0, 1.0, 0)
    shown = MemoryCredit("heir", "context", 0.25, 1.0, 0)
    named = MemoryCredit("heir", "misleading", 1.0, 0.0, 0)
    saw_heir = OutcomeRecord(
        "s1", "acme", "web", "success", 1.0, None, ("old", "heir"), NOW, NOW, 1, credits=(old, shown)
    )
    alone = OutcomeRecord(
        "s2", "acme", "web", "failure", 0.0, None, ("old",), NOW, NOW, 1, credits=(replace(old, score=0.0),)
    )
    named_heir = OutcomeRecord(
        "s3", "acme", "web", "partial", 0.5, None, ("old", "heir"), NOW, NOW, 1, credits=(old, named)
    )
    for record in (saw_heir, alone, named_heir):
        store.put_outcome(record, first=True)
    assert store.carry_credits(SCOPE, "old", "heir") == 2  # s1's and s2's; s3 named the heir itself
    carried = {c.session_id: c.credit for c in store.credits_for(SCOPE, ["heir"])["heir"]}
    assert carried == {
        "s1": replace(old, memory_id="heir"),
        "s2": replace(old, memory_id="heir", score=0.0),
        "s3": named,
    }
    assert store.carry_credits(SCOPE, "old", "heir") == 0  # nothing twice


def test_a_report_whose_rows_were_inserted_twice_credits_each_memory_once(store):
    # Two replicas on an object store saving one session's report at the same moment can both insert its
    # rows (LanceDB declares no key of several columns); two appends of a first report make the same rows.
    from storage.records import MemoryCredit

    credit = MemoryCredit("m1", "helpful", 1.0, 1.0)
    report = OutcomeRecord("s1", "acme", "web", "success", 1.0, None, ("m1",), NOW, NOW, 1, credits=(credit,))
    store.put_outcome(report, first=True)
    store.put_outcome(report, first=True)
    assert store.tables()[schema.FEEDBACK].count_rows() == 4  # twice the queries row and m1's credit
    assert [(c.session_id, c.credit) for c in store.credits_for(SCOPE, ["m1"])["m1"]] == [("s1", credit)]
    assert store.get_outcome(SCOPE, "s1").credits == (credit,)
    # The catch-up reads (a report's, the feedback index's) count it once too.
    changed, ours = store.credits_changed_since(0, SCOPE, ["m1"], "s1")
    assert [c.credit for c in changed] == [credit] and ours
    credits, _ = store.feedback_changed_since(0)
    assert [(scope, c.credit) for scope, c in credits] == [(SCOPE, credit)]


def test_a_second_handle_sees_the_first_handles_writes_immediately(tmp_path):
    # Two server processes keep long-lived handles; the second must see the first's commits on its next read.
    with (
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as first,
        MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM) as second,
    ):
        assert second.get_memory("m1") is None
        first.insert_memory(new("m1", "written by the first process"))
        assert second.get_memory("m1").content == "written by the first process"
        assert [h.record.id for h in second.fulltext_search(SCOPE, "first process", limit=5)] == ["m1"]


def test_simhash_round_trips_through_the_signed_column(store):
    big = (1 << 64) - 5  # above 2**63: stored as a negative int64
    store.insert_memory(new("m1", "x", simhash=big))
    assert store.get_memory("m1").simhash == big
    assert store.aggregation_rows(SCOPE, 10)[0].simhash == big


def test_aggregation_rows_are_the_newest_active_ones(store):
    store.insert_many(
        [new(f"m{i}", f"note {i}", created_at=NOW + timedelta(minutes=i), updated_at=NOW) for i in range(5)]
        + [new("gone", "retired", status="superseded", created_at=NOW + timedelta(hours=1))]
    )
    assert [row.id for row in store.aggregation_rows(SCOPE, 3)] == ["m4", "m3", "m2"]


def test_scopes_lists_every_scope_with_active_memories(store):
    store.insert_many(
        [
            new("a", "a"),
            new("b", "b", scope=Scope("globex", "api")),
            new("c", "c", scope=Scope("x", "y"), status="retracted"),
        ]
    )
    assert store.scopes() == [Scope("acme", "web"), Scope("globex", "api")]


def expiring() -> list[NewMemory]:
    """Two ephemeral memories: "soon" expires tomorrow, "past" a second ago (not retracted yet)."""
    now = datetime.now(UTC)
    return [
        new("soon", "beta", protection_tier="ephemeral", expires_at=now + timedelta(days=1)),
        new("past", "gamma", protection_tier="ephemeral", expires_at=now - timedelta(seconds=1)),
    ]


def test_a_listing_leaves_out_an_ephemeral_memory_past_its_expiry_as_recall_does(store):
    store.insert_many([new("kept", "alpha"), *expiring()])
    assert {m.id for m in store.list_memories(SCOPE, limit=10)} == {"kept", "soon"}


def test_a_listing_of_superseded_memories_shows_one_whose_supersede_is_still_being_committed(store):
    """A new user's trial: a restatement's old memory, held while its supersede was committed behind the
    call, was missing for a moment from a listing of every status."""
    store.insert_many([new("mem_old", "i prefer typescript"), new("mem_new", "I prefer TypeScript!")])
    assert store.hold_superseded(["mem_old"], "mem_new") == ["mem_old"]

    def listed(*statuses):
        return {
            m.id: (m.status, m.replaced_by) for m in store.list_memories(SCOPE, limit=10, statuses=statuses)
        }

    assert listed("active", "superseded", "retracted") == {
        "mem_old": ("superseded", "mem_new"),
        "mem_new": ("active", None),
    }
    assert listed("superseded") == {"mem_old": ("superseded", "mem_new")}
    assert listed("active") == {"mem_new": ("active", None)}  # it will be superseded: not listed as active
    store.supersede(SCOPE, ["mem_old"], "mem_new", NOW, decided=True)
    store.release_superseded(["mem_old"], "mem_new")
    assert listed("superseded") == {"mem_old": ("superseded", "mem_new")}


def test_an_attestation_is_recorded_once_per_other_agent(store):
    stored, _ = store.insert_memory(new("m1", "shared conclusion", agent_id="author"))
    assert store.add_attestation(stored, "author", "s", NOW) is False
    assert store.add_attestation(stored, "second", "s", NOW) is True
    assert store.add_attestation(stored, "second", "s2", NOW) is False
    assert store.attesters(SCOPE) == {"m1": {"second"}}
    assert store.attesters(Scope("acme", "other")) == {}


def test_episode_members_and_episodes_come_back_by_id(store):
    store.insert_many(
        [
            new("a", "a", episode_id="ep1"),
            new("b", "b", episode_id="ep1"),
            new("c", "c", episode_id="ep2"),
            new("d", "d"),
        ]
    )
    stubs = store.episode_member_stubs(SCOPE, ["ep1"])
    assert {(m.id, m.episode_id, m.weight) for m in stubs} == {("a", "ep1", 1.0), ("b", "ep1", 1.0)}
    episodes = store.get_episodes(SCOPE, ["ep1", "ep2", "nope"])
    assert set(episodes) == {"ep1", "ep2"} and episodes["ep1"].agent_id == "agent"


@pytest.mark.slow
def test_maintenance_builds_the_vector_index_once_the_table_is_big_enough_and_new_rows_stay_searchable(
    tmp_path,
):
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(400, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with MemoryStore.open(
        str(tmp_path / "db"), vector_dim=DIM, cache_scope_rows=0, vector_index_min_rows=400
    ) as store:
        rows = [
            NewMemory(memory_record(f"m{i}", embedder="emb"), tuple(vectors[i].tolist()), f"note {i}")
            for i in range(399)
        ]
        store.insert_many(rows)
        store.maintain(min_fragments=1_000)
        assert not any("vector" in index.columns for index in store._memories.list_indices())

        store.insert_memory(
            NewMemory(memory_record("m399", embedder="emb"), tuple(vectors[399].tolist()), "n")
        )
        report = store.maintain(min_fragments=1_000)
        assert "IVF_HNSW_SQ" in report["memories_v4 vectors"]
        assert store.maintain(min_fragments=1_000) == {}  # built once

        late = rng.normal(size=DIM).astype(np.float32)
        store.insert_memory(NewMemory(memory_record("late", embedder="emb"), tuple(late.tolist()), "late"))
        for memory_id, vector in (("m17", vectors[17]), ("late", late)):
            hits = store.vector_search(Scope("o", "p"), vector, embedder="emb", limit=3)
            assert hits[0].record.id == memory_id
            assert hits[0].score == pytest.approx(1.0, abs=0.02)


def test_no_vector_index_is_built_while_the_scope_copies_hold_every_memory(tmp_path):
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM, vector_index_min_rows=10) as store:
        store.insert_many([new(f"m{i}", f"note {i}", hot=(i % DIM,)) for i in range(20)])
        store.maintain(min_fragments=1_000)
        assert not any("vector" in index.columns for index in store._memories.list_indices())


@pytest.mark.slow
def test_stores_of_different_widths_opened_in_turn_each_write_their_own_rows(tmp_path):
    for round_ in range(6):
        for dim in (8, 16):
            with MemoryStore.open(str(tmp_path / f"db{dim}"), vector_dim=dim) as store:
                vector = tuple([1.0] + [0.0] * (dim - 1))
                record = memory_record(f"m{round_}", org_id=SCOPE.org_id, project_id=SCOPE.project_id)
                store.insert_many([NewMemory(record, vector, "text")])
                assert store.count_memories() == round_ + 1


@pytest.mark.parametrize(
    "killed_at", ["_merge_update", "_scrub_traces", "add_lineage_once", "_drop_old_versions"]
)
@pytest.mark.slow
def test_a_purge_a_crash_interrupted_is_finished_at_the_next_opening(tmp_path, monkeypatch, killed_at):
    from storage.records import LineageEvent

    root = tmp_path / "db"
    store = MemoryStore.open(str(root), vector_dim=DIM)
    secret = "zq7SECRETxk9 the vault passphrase"
    store.insert_many(
        [new("m1", "the vault is in the basement", episode_id="ep"), new("m2", secret, episode_id="ep")]
    )
    trace = json.dumps({"candidates": [{"id": "m2", "preview": secret}]})
    store.record_retrieval(
        RetrievalRecord("r1", "acme", "web", "s1", "agent", "vault", "recall", NOW, 5, 100, ("m2",), trace)
    )
    store.flush_logs()
    event = LineageEvent(
        "evt_purge_m2", "acme", "web", "purge", "m2", None, "forget", "private", "agent", "s1", NOW
    )

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed")  # what a SIGKILL leaves: the operation stops half way

    monkeypatch.setattr(MemoryStore, killed_at, killed)
    with pytest.raises(KeyboardInterrupt):
        store.purge(SCOPE, ["m2"], NOW, quoted_chars=2_000, events=[event], resolution="purge by agent")
    monkeypatch.undo()
    store._lock.close()  # the process is gone: its lock with it

    reopened = MemoryStore.open(str(root), vector_dim=DIM)  # finishes the purge before serving
    try:
        assert reopened.get_memory("m2", SCOPE).status == "purged"
        assert secret not in reopened.get_retrieval("r1", SCOPE).trace_json
        assert [e.event_id for e in reopened.lineage(SCOPE, ["m2"])] == ["evt_purge_m2"]
        assert not any(key.startswith("pending_purge:") for key in migrations.read_meta(reopened._db))
        assert files_holding(root, b"zq7SECRETxk9") == []
        assert reopened.finish_pending_purges() == 0  # nothing left to finish
    finally:
        reopened.close()


@pytest.mark.parametrize("erased", [False, True])
def test_a_purge_killed_between_a_recalls_record_and_its_ab_rows_withholds_both_at_the_next_opening(
    tmp_path, monkeypatch, erased
):
    """A trial: killed after the recall's record was withheld but before its A/B rows were, the purge was
    "finished" at the next start and the A/B rows kept the query that asked for the purged memory in its
    words (the record withheld, it no longer said so), for `memoria export` to carry. Killed once before the
    memory's erase and once after it (its words gone with it)."""
    root = tmp_path / "db"
    store = MemoryStore.open(str(root), vector_dim=DIM)
    store.insert_many([new("m1", "Project zephyr's launch codename is QX42ZEBRA")])
    store.record_retrieval(
        RetrievalRecord(
            "r1", "acme", "web", "s1", "agent", "codename QX42ZEBRA", "recall", NOW, 5, 100, ("m1",), "{}"
        ),
        quoted=["m1"],
    )
    store.log_ab_rows(
        [AbLogRow("r1", "s1", "acme", "web", "codename QX42ZEBRA", "m1", 0.8, 1.0, 0.8, 1, 1, True, NOW)]
    )
    store.flush_logs()
    real_rewrite, real_asked_for, rewritten, asked = MemoryStore._rewrite, MemoryStore._asked_for, [], []

    def killed_at_the_ab_rows(self, table, *args, **kwargs):
        rewritten.append(table is self._memories)
        if table is self._ab_logs and (not erased or any(rewritten)):
            raise KeyboardInterrupt("killed")  # what a SIGKILL leaves: the operation stops half way
        return real_rewrite(self, table, *args, **kwargs)

    def asked_after_the_erase(self, *args, **kwargs):
        asked.append(1)  # the pass before the erase finds nothing (as a recall recorded meanwhile would)
        return real_asked_for(self, *args, **kwargs) if len(asked) > 1 else {}

    monkeypatch.setattr(MemoryStore, "_rewrite", killed_at_the_ab_rows)
    if erased:
        monkeypatch.setattr(MemoryStore, "_asked_for", asked_after_the_erase)
    with pytest.raises(KeyboardInterrupt):
        store.purge(SCOPE, ["m1"], NOW)
    monkeypatch.undo()
    store._lock.close()  # the process is gone: its lock with it

    reopened = MemoryStore.open(str(root), vector_dim=DIM)  # finishes the purge before serving
    try:
        assert reopened.get_memory("m1", SCOPE).status == "purged"
        assert reopened.get_retrieval("r1", SCOPE).query == WITHHELD
        assert [row.query_text for row in ab_log_rows(reopened, SCOPE, "r1")] == [WITHHELD]
        assert files_holding(root, b"QX42ZEBRA") == []
    finally:
        reopened.close()


def test_a_purge_deletes_the_files_of_writes_a_killed_process_left_in_the_tables_of_memory_text(tmp_path):
    """A trace append or a compaction killed half way leaves its rows in a temporary file no version
    refers to; a purge must not leave the purged text there (tables without memory text keep theirs)."""
    root = tmp_path / "db"
    with MemoryStore.open(str(root), vector_dim=DIM) as store:
        store.insert_many([new("m1", "the vault is in the basement"), new("m2", SECRET)])
        planted = [
            root / f"{schema.RETRIEVALS}.lance" / "data" / ".tmpGAWteZ",
            root / f"{schema.MEMORIES}.lance" / "data" / "0a1b2c3d.lance#1",
            # A data file written whole whose commit never came: no version names it.
            root / f"{schema.AB_LOGS}.lance" / "data" / "0101110001001111101101011.lance",
        ]
        kept = root / f"{schema.FEEDBACK}.lance" / "data" / ".tmpQ1w2E3"
        for path in (*planted, kept):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"rows of an interrupted write: m2 " + SECRET.encode())
        unrelated = root / f"{schema.RETRIEVALS}.lance" / "data" / ".tmpZx9Yw8"  # another write, in flight
        unrelated.write_bytes(b"a trace of m1 only")
        store.purge(SCOPE, ["m2"], NOW, quoted_chars=0, events=[], resolution="purge by agent")
        assert [path.exists() for path in planted] == [False, False, False]
        assert kept.exists()  # not a table of memory text: a report may be writing it
        assert unrelated.exists()  # no purged id in it: left alone
        assert files_holding(root, b"zq7SECRETxk9") == [str(kept)]
        assert store.get_memory("m1", SCOPE).content == "the vault is in the basement"  # the rest reads on


def quoting(memory_id: str, text: str, retrieval_id: str = "r1") -> RetrievalRecord:
    trace = json.dumps({"candidates": [{"id": memory_id, "preview": text}, {"id": "m1", "preview": "kept"}]})
    return RetrievalRecord(
        retrieval_id, "acme", "web", "s1", "agent", "vault", "recall", NOW, 5, 100, (memory_id,), trace
    )


SECRET = "zq7SECRETxk9 the vault passphrase"


@pytest.fixture
def two_processes(tmp_path):
    """Two stores on one folder, as two server processes hold it, with a memory quoting ``SECRET``."""
    root = tmp_path / "db"
    a = MemoryStore.open(str(root), vector_dim=DIM)
    b = MemoryStore.open(str(root), vector_dim=DIM)
    a.insert_many([new("m1", "the vault is in the basement"), new("m2", SECRET)])
    yield root, a, b
    b.close()
    a.close()


@pytest.mark.slow
@pytest.mark.parametrize("recalled_from_a_copy", [True, False])
@pytest.mark.parametrize("quotes_given", [True, False], ids=["quotes given by the recall", "quotes read"])
def test_a_record_another_process_queued_before_a_purge_is_written_without_the_purged_text(
    two_processes, recalled_from_a_copy, quotes_given
):
    # Process B recalled the memory and queued its record; process A purged the memory before B's
    # write-behind wrote it. B's append reads the purged status (from its scope copy, brought up to
    # date, or from the table) of the memories the record quotes (as its recall gave them, or read from
    # its trace) and masks the quote.
    root, a, b = two_processes
    if recalled_from_a_copy:
        assert b.get_memories(["m2"], SCOPE)["m2"].content == SECRET  # builds B's copy of the scope
    with b._logs._flushing:  # B's write-behind waits: the record stays queued across the purge
        b.record_retrieval(quoting("m2", SECRET), quoted=["m2", "m1"] if quotes_given else None)
        b.record_retrieval(quoting("m1", "kept", retrieval_id="r2"), quoted=["m1"] if quotes_given else None)
        assert a.purge(SCOPE, ["m2"], NOW) == ["m2"]
    b.flush_logs()
    trace = json.loads(a.get_retrieval("r1", SCOPE).trace_json)
    assert [c["preview"] for c in trace["candidates"]] == ["[purged]", "kept"]
    assert a.get_retrieval("r2", SCOPE).trace_json == quoting("m1", "kept").trace_json  # written as queued
    assert files_holding(root, b"zq7SECRETxk9") == []


def test_a_record_appended_while_another_process_is_still_inside_its_purge_is_masked(two_processes):
    """A purge commits the purged status, scrubs the recorded traces, and ends its write sequence after
    (here, later: its caller's sequence goes on). Another process that appends a record quoting the memory
    after the scrub reads the status from the table, not the version it trusted before the purge began,
    and masks the quote."""
    _, a, b = two_processes
    assert b.get_memories(["m2"], SCOPE)["m2"].content == SECRET  # B's copy, at a version B now trusts
    # The purge's sequence has not ended when B appends (the reports' lock first, as a purge takes both).
    with a.reporting(), a.exclusive():
        assert a.purge(SCOPE, ["m2"], NOW) == ["m2"]
        b.record_retrieval(quoting("m2", SECRET), quoted=["m2", "m1"])
        b.flush_logs()
    trace = json.loads(a.get_retrieval("r1", SCOPE).trace_json)
    assert [c["preview"] for c in trace["candidates"]] == ["[purged]", "kept"]


def test_a_record_that_could_not_be_written_leaves_nothing_held(tmp_path, monkeypatch):
    store = MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM)
    try:
        store._logs.close()  # a store closing writes each record at once

        def disk_full(*args, **kwargs):
            raise OSError("disk full")

        monkeypatch.setattr(MemoryStore, "_append_rows", disk_full)
        with pytest.raises(OSError):
            store.record_retrieval(quoting("m1", "kept"), quoted=["m1"])
        monkeypatch.undo()
        assert store.get_retrieval("r1", SCOPE) is None  # not written, and nothing of it queued
    finally:
        monkeypatch.undo()
        store.close()


@pytest.mark.slow
def test_a_purge_scrubs_after_an_append_that_read_the_memory_before_the_purge(two_processes):
    # Process B read the statuses (nothing purged yet) and is appending its record, unmasked; A's scrub
    # waits for that append and then masks it.
    _, a, b = two_processes
    purge = threading.Thread(target=a.purge, args=(SCOPE, ["m2"], NOW), daemon=True)
    with b._logs_lock.shared():
        row = {**quoting("m2", SECRET).__dict__, "context_ids": ["m2"]}
        purge.start()
        time.sleep(1.0)
        assert purge.is_alive()  # the scrub waits for the append in progress
        b._append_rows(b._retrievals, [row])
    purge.join(timeout=60)
    assert not purge.is_alive()
    assert a.get_memory("m2", SCOPE).status == "purged"
    assert SECRET not in a.get_retrieval("r1", SCOPE).trace_json


def test_a_purge_another_process_finished_while_we_waited_for_the_lock_is_not_redone(tmp_path, monkeypatch):
    """The journal is read once without the lock (to skip the lock when there is nothing to do) and
    again under it: a purge another process finished in between, whose memory was then remembered
    again, is left alone."""
    from storage.store import PendingPurge

    store = MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM)
    try:
        store.insert_many([new("m2", "the vault passphrase is remembered again", episode_id="ep")])
        stale = PendingPurge.from_json(
            "pending_purge:stale",
            json.dumps(
                {
                    "org_id": SCOPE.org_id,
                    "project_id": SCOPE.project_id,
                    "memory_ids": ["m2"],
                    "at": NOW.isoformat(),
                    "quoted_chars": 2_000,
                    "events": [],
                    "resolution": "purge by agent",
                }
            ),
        )
        reads = iter([[stale], []])  # seen before the lock; gone once we hold it
        monkeypatch.setattr(store, "_pending_purges", lambda: next(reads))
        finished: list[PendingPurge] = []
        monkeypatch.setattr(store, "_finish_purge", finished.append)
        assert store.finish_pending_purges() == 0
        assert finished == [] and store.get_memory("m2", SCOPE).status == "active"
    finally:
        store.close()


@pytest.mark.parametrize("deferred", [True, False], ids=["deferred", "committed at once"])
def test_a_lineage_event_is_written_without_the_write_lock_and_read_at_once(store, deferred):
    """keep_both events record a decision that changed nothing: they go with the next batch of logs. A
    change's event (a supersede's) is committed at once. Neither waits for the write lock, so a remember
    does not queue for it a second time; a read of lineage sees the event at once."""
    from storage.records import LineageEvent

    event = LineageEvent(
        "evt_kept", "acme", "web", "keep_both", "m1", "m2", "rules", "distinct", "agent", "s1", NOW
    )
    held, release = threading.Event(), threading.Event()

    def holder():
        with store.exclusive():
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        store.add_lineage([event], deferred=deferred)  # returns while another thread holds the lock
        assert not release.is_set() and thread.is_alive()  # (the holder waits up to 10 s for release)
        assert store._logs.pending() == (1 if deferred else 0)  # queued, or in the table already
        found = store.lineage(SCOPE, ["m2"])
        assert [(e.event_id, e.action, e.related_id) for e in found] == [("evt_kept", "keep_both", "m2")]
        assert [e.event_id for e in store.recent_lineage(SCOPE, ["keep_both"], 5)] == ["evt_kept"]
    finally:
        release.set()
        thread.join()


@pytest.mark.parametrize("copies", [True, False], ids=["scope copy", "lancedb"])
def test_searches_keep_only_memories_inside_the_time_window(tmp_path, copies):
    from retrieval.text import index_terms
    from storage.records import TimeWindow

    options = {"analyzer": index_terms} if copies else {"cache_scope_rows": 0}
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM, **options) as store:
        store.insert_many(
            [
                new(f"m{day}", f"the billing decision of day {day}", created_at=NOW + timedelta(days=day))
                for day in (0, 1, 2)
            ]
        )
        window = TimeWindow(NOW + timedelta(days=1), NOW + timedelta(days=2))  # day 1 only
        by_vector = store.vector_search(SCOPE, vec(0), embedder="emb", limit=10, window=window)
        by_text = store.fulltext_search(SCOPE, "billing decision", limit=10, window=window)
        assert [hit.record.id for hit in by_vector] == ["m1"]
        assert [hit.record.id for hit in by_text] == ["m1"]
        open_ended = TimeWindow(since=NOW + timedelta(days=1))
        assert {
            h.record.id
            for h in store.vector_search(SCOPE, vec(0), embedder="emb", limit=10, window=open_ended)
        } == {
            "m1",
            "m2",
        }


@pytest.mark.parametrize("copies", [True, False], ids=["scope copy", "lancedb"])
def test_searches_keep_memories_with_any_or_with_every_tag(tmp_path, copies):
    from retrieval.text import index_terms

    options = {"analyzer": index_terms} if copies else {"cache_scope_rows": 0}
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM, **options) as store:
        store.insert_many(
            [
                new("both", "deploy notes one", tags=("ops", "billing")),
                new("ops", "deploy notes two", tags=("ops",)),
                new("none", "deploy notes three"),
            ]
        )
        for every, expected in ((False, {"both", "ops"}), (True, {"both"})):
            by_vector = store.vector_search(
                SCOPE,
                vec(0),
                embedder="emb",
                limit=10,
                tags=["ops", "billing"][: 2 if every else 1],
                all_tags=every,
            )
            by_text = store.fulltext_search(
                SCOPE, "deploy notes", limit=10, tags=["ops", "billing"][: 2 if every else 1], all_tags=every
            )
            assert {hit.record.id for hit in by_vector} == expected
            assert {hit.record.id for hit in by_text} == expected
        anyof = store.vector_search(SCOPE, vec(0), embedder="emb", limit=10, tags=["billing", "ops"])
        assert {hit.record.id for hit in anyof} == {"both", "ops"}
        # A tag in any case: "IT-Ops" stored, "it-ops" asked (a new user's trial found nothing).
        store.insert_many([new("it", "deploy notes four", tags=("IT-Ops",))])
        for asked in (["it-ops"], ["IT-OPS", "billing"]):
            by_vector = store.vector_search(
                SCOPE, vec(0), embedder="emb", limit=10, tags=asked, all_tags=False
            )
            by_text = store.fulltext_search(SCOPE, "deploy notes", limit=10, tags=asked)
            expected = {"it"} | ({"both"} if "billing" in asked else set())
            assert {hit.record.id for hit in by_vector} == {hit.record.id for hit in by_text} == expected
        assert [r.id for r in store.list_memories(SCOPE, limit=10, tag="it-ops")] == ["it"]


def versions_of(table) -> set[int]:
    return {int(entry["version"]) for entry in table.list_versions()}


@pytest.mark.slow
def test_a_round_drops_versions_replaced_long_ago_and_keeps_one_replaced_just_now(store):
    keep = timedelta(seconds=0.3)
    for index in range(6):
        store.insert_memory(new(f"m{index}", f"note {index}"))
    inserted = store.table_version()
    # Longer than the clean-up's margin at the third round (a second plus twice the first round's optimize
    # of this tiny table) and that round's own compaction, with room for a loaded machine.
    time.sleep(3.0)
    store.maintain(min_fragments=2, keep_replaced_for=keep)  # compacts; nothing replaced long enough yet
    compacted = store.table_version()
    assert compacted > inserted
    assert min(versions_of(store._memories)) < inserted  # the first round drops nothing
    time.sleep(0.5)
    store.maintain(min_fragments=2, keep_replaced_for=keep)  # idle: one fragment, nothing to do
    time.sleep(1.0)
    # The compacted version is 2 s old but the newest, until this write replaces it: a read that began
    # on it a moment ago must still find its files. An age-based clean-up would drop it.
    store.insert_memory(new("m-late", "a note after a pause"))
    store.maintain(min_fragments=2, keep_replaced_for=keep)
    kept = versions_of(store._memories)
    assert compacted in kept
    assert inserted not in kept and min(kept) > inserted  # replaced by the compaction over a second ago
    assert {m.id for m in store.list_memories(SCOPE, limit=50)} >= {"m0", "m5", "m-late"}


def test_a_write_goes_on_while_a_report_holds_the_reports_lock(store):
    holding, release, written = threading.Event(), threading.Event(), threading.Event()

    def report() -> None:
        with store.reporting():
            holding.set()
            release.wait(30)

    def write() -> None:
        store.insert_memory(new("m1", "written during a report"))
        written.set()

    reporter = threading.Thread(target=report)
    reporter.start()
    assert holding.wait(10)
    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert written.wait(10)  # the write did not queue behind the report
    finally:
        release.set()
        reporter.join()
        writer.join()
    assert store.get_memory("m1", SCOPE) is not None


def test_the_reports_lock_is_never_taken_inside_the_write_lock(store):
    with store.exclusive(), pytest.raises(RuntimeError, match="before the write lock"), store.reporting():
        pass
    # The order it is taken in, and re-entrant inside both.
    with store.reporting(), store.exclusive(), store.reporting():
        pass


def test_work_behind_the_calls_yields_the_write_lock_unless_it_holds_the_reports_lock(store, monkeypatch):
    asked: list[bool] = []
    hold = store._lock.hold

    def recorded(*, background: bool = False):
        asked.append(background)
        return hold(background=background)

    monkeypatch.setattr(store._lock, "hold", recorded)
    with store.exclusive():
        pass
    with store.behind_the_calls():
        with store.exclusive():
            pass
        with store.reporting(), store.exclusive():  # reports would wait for its yield
            pass
    assert asked == [False, True, False]


@pytest.mark.parametrize("read", ["get_memories", "get_memory by id alone"])
@pytest.mark.parametrize("then", ["nothing more", "an update back to the old text"])
def test_a_supersede_committed_while_a_read_runs_reads_as_the_rows_say_after_it(
    store, monkeypatch, read, then
):
    # The commit behind a restatement lands while a reader reads the rows: the row it read still says
    # active, and the hold is gone when it looks. Read again, the memory is superseded (a CI run saw a
    # restatement's old memory read as active here), unless a later write changed it since: an explicit
    # update back to the old text makes it the one active, and no earlier hold may say otherwise.
    store.insert_many([new("mem_old", "i prefer typescript"), new("mem_new", "I prefer TypeScript!")])
    assert store.hold_superseded(["mem_old"], "mem_new") == ["mem_old"]
    landed: list[bool] = []

    def commit_lands() -> None:  # once, and not inside itself (the commit reads the rows too)
        if not landed:
            landed.append(True)
            store.supersede(SCOPE, ["mem_old"], "mem_new", NOW, decided=True)
            store.release_superseded(["mem_old"], "mem_new")
            if then == "an update back to the old text":
                later = NOW + timedelta(seconds=1)
                store.reactivate(SCOPE, "mem_old", later)
                store.supersede(SCOPE, ["mem_new"], "mem_old", later)

    name = "_committed" if read == "get_memories" else "_select"
    original = getattr(store, name)

    def read_then_commit(*args, **kwargs):
        rows = original(*args, **kwargs)
        commit_lands()
        return rows

    monkeypatch.setattr(store, name, read_then_commit)
    found = (
        store.get_memories(["mem_old"], SCOPE)["mem_old"]
        if read == "get_memories"
        else store.get_memory("mem_old")
    )
    monkeypatch.undo()
    assert landed
    if then == "nothing more":
        assert (found.status, found.replaced_by) == ("superseded", "mem_new")
    else:
        assert (found.status, found.replaced_by) == ("active", None)
    assert store.get_memory("mem_old").status == found.status  # as committed


def test_a_store_path_that_is_a_file_or_a_folder_it_may_not_write_says_what_to_do(tmp_path, monkeypatch):
    # A new user's trial: a file gave "[Errno 17] File exists", and a read-only folder a bare Permission
    # denied on the lock file.
    afile = tmp_path / "afile"
    afile.write_text("notes")
    with pytest.raises(StoreError, match="is a file, not a folder: point MEMORIA_DB_URI at a folder"):
        MemoryStore.open(str(afile), vector_dim=8)
    folder = tmp_path / "backup"
    folder.mkdir()
    # The process may be root, which may write anywhere: the check the store makes is replaced.
    monkeypatch.setattr("storage.store.os.access", lambda path, mode: False)
    with pytest.raises(
        StoreError, match=r"is not writable by .*chmod u\+w.*copy the folder somewhere writable"
    ):
        MemoryStore.open(str(folder), vector_dim=8)
    assert list(folder.iterdir()) == []  # nothing made in it
