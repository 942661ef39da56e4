"""A scope copy's context vectors: each memory with its neighbours before and after it in its episode's
time order, linked as memories arrive, change and leave, and read only where the reader may read."""

from datetime import timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.records import MemoryRecord, Viewer
from storage.scope_copy import ScopeCopy
from tests.records import NOW, memory_record

DIM = 3


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def turn(memory_id: str, minute: int, episode: str | None = "e1", **overrides) -> MemoryRecord:
    return memory_record(
        memory_id,
        episode_id=episode,
        created_at=NOW + timedelta(minutes=minute),
        **{"embedder": "emb", **overrides},
    )


A, B, C = unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1)
QUERY = unit(1, 1, 0)  # cosine 0.7071 with A and B, 0 with C


def copy_of(*rows: tuple[MemoryRecord, np.ndarray]) -> ScopeCopy:
    copy = ScopeCopy(DIM)
    for record, vector in rows:
        copy.put(record, vector)
    return copy


def context(copy: ScopeCopy, *ids: str, viewer: Viewer | None = None) -> dict[str, float]:
    """The context cosines of ``ids``: asked for directly, or as ``viewer``'s search finds them."""
    if viewer is None:
        return copy.context_cosines(QUERY, ids, embedder="emb", now=NOW)
    hits = copy.nearest(QUERY, embedder="emb", limit=len(copy), now=NOW, viewer=viewer, context_share=0.5)
    return {hit[0].id: hit[3] for hit in hits if hit[0].id in ids}


def test_a_memory_in_the_middle_of_its_episode_is_read_with_both_neighbours():
    copy = copy_of((turn("a", 0), A), (turn("b", 1), B), (turn("c", 2), C))
    # b: (A + B + C) . q / |A + B + C| = (0.7071 + 0.7071 + 0) / sqrt(3) = 0.8165
    # a (first): (A + B) . q / |A + B| = 1.4142 / 1.4142 = 1.0; c (last): (B + C) . q / sqrt(2) = 0.5
    assert context(copy, "a", "b", "c") == pytest.approx({"a": 1.0, "b": 0.8165, "c": 0.5}, abs=1e-4)


def test_neighbours_follow_time_not_the_order_memories_arrived_in():
    copy = copy_of((turn("c", 2), C), (turn("a", 0), A), (turn("b", 1), B))
    assert context(copy, "a", "b", "c") == pytest.approx({"a": 1.0, "b": 0.8165, "c": 0.5}, abs=1e-4)


def test_a_memory_without_an_episode_or_neighbours_is_its_own_context():
    copy = copy_of((turn("alone", 0, episode=None), A), (turn("single", 0, episode="e2"), C))
    assert context(copy, "alone", "single") == pytest.approx({"alone": 0.7071, "single": 0.0}, abs=1e-4)


def test_a_superseded_memory_lends_nothing_and_its_neighbours_close_over_it():
    copy = copy_of((turn("a", 0), A), (turn("b", 1), B), (turn("c", 2), C))
    copy.put(turn("b", 1, status="superseded"), B)
    # a and c are neighbours now: a = (A + C) . q / sqrt(2) = 0.5, c the same
    assert context(copy, "a", "c") == pytest.approx({"a": 0.5, "c": 0.5}, abs=1e-4)
    copy.put(turn("b", 1), B)  # restored: back between them
    assert context(copy, "a", "b", "c") == pytest.approx({"a": 1.0, "b": 0.8165, "c": 0.5}, abs=1e-4)


def test_a_memory_moved_to_another_time_or_episode_is_linked_there():
    copy = copy_of((turn("a", 0), A), (turn("b", 1), B), (turn("c", 2), C))
    copy.put(turn("a", 3), A)  # now after c: b is first, a last
    # b: (B + C) . q / sqrt(2) = 0.5; c: (A + B + C) . q / sqrt(3) = 0.8165; a: (C + A) . q / sqrt(2) = 0.5
    assert context(copy, "a", "b", "c") == pytest.approx({"a": 0.5, "b": 0.5, "c": 0.8165}, abs=1e-4)
    copy.put(turn("a", 3, episode="e2"), A)
    assert context(copy, "a", "b", "c") == pytest.approx({"a": 0.7071, "b": 0.5, "c": 0.5}, abs=1e-4)


def test_shared_memories_are_read_with_shared_neighbours_and_a_private_one_with_its_own_audience():
    private = turn("b", 1, visibility="agent", agent_id="someone")
    copy = copy_of((turn("a", 0), A), (private, B), (turn("c", 2), C))
    # Whoever reads: a and c are each other's neighbours (a = c = (A + C) . q / sqrt(2) = 0.5); the private
    # memory neither stands between them nor changes what anyone else sees ranked.
    for reader in (None, Viewer("another", "s"), Viewer("someone", "s")):
        assert context(copy, "a", "c", viewer=reader) == pytest.approx({"a": 0.5, "c": 0.5}, abs=1e-4)
    # Its owner reads it with its own audience's memories only: here none, so itself (B . q = 0.7071).
    assert context(copy, "b", viewer=Viewer("someone", "s")) == pytest.approx({"b": 0.7071}, abs=1e-4)


def test_an_expired_neighbour_lends_nothing():
    fleeting = turn("b", 1, kind="fact", expires_at=NOW - timedelta(seconds=1))
    copy = copy_of((turn("a", 0), A), (fleeting, B))
    assert context(copy, "a") == pytest.approx({"a": 0.7071}, abs=1e-4)


def test_an_episode_summary_is_in_no_chain():
    summary = turn("summary", 3, kind="episode")
    copy = copy_of((turn("a", 0), A), (turn("c", 2), C), (summary, B))
    assert context(copy, "a", "c", "summary") == pytest.approx(
        {"a": 0.5, "c": 0.5, "summary": 0.7071}, abs=1e-4
    )


def test_a_neighbour_embedded_again_lends_its_new_vector():
    copy = copy_of((turn("a", 0), A), (turn("b", 1), C))
    assert context(copy, "a") == pytest.approx({"a": 0.5}, abs=1e-4)  # (A + C) . q / sqrt(2)
    copy.put(turn("b", 1), B)
    assert context(copy, "a") == pytest.approx({"a": 1.0}, abs=1e-4)  # (A + B) . q / sqrt(2)


def test_a_memory_embedded_by_another_model_is_in_another_chain():
    foreign = memory_record("b", episode_id="e1", created_at=NOW + timedelta(minutes=1), embedder="other")
    copy = copy_of((turn("a", 0), A), (foreign, B), (turn("c", 2), C))
    assert context(copy, "a", "c") == pytest.approx({"a": 0.5, "c": 0.5}, abs=1e-4)
    assert "b" not in context(copy, "b")  # nor is it given a context by this embedder


def test_with_a_context_share_the_nearest_memories_are_ranked_by_meaning_in_context():
    # "b" says little alone (cosine 0.1) but sits between two turns on the query's topic.
    on_topic, aside, off_topic = unit(1, 1, 0), unit(0.1, 0, 0.995), unit(0.3, 0.3, 0.906)
    copy = copy_of(
        (turn("before", 0), on_topic),
        (turn("b", 1), aside),
        (turn("after", 2), on_topic),
        (turn("isolated", 0, episode="e2"), off_topic),
    )
    plain = copy.nearest(QUERY, embedder="emb", limit=4, now=NOW)
    assert [hit[0].id for hit in plain][-1] == "b"
    assert all(hit[3] is None for hit in plain)
    mixed = copy.nearest(QUERY, embedder="emb", limit=4, now=NOW, context_share=0.5)
    ranked = {hit[0].id: (hit[1], hit[3]) for hit in mixed}
    cosine_b = float(aside @ QUERY)
    together = on_topic * 2 + aside
    context_b = float(together @ QUERY / np.linalg.norm(together))
    assert ranked["b"] == pytest.approx((cosine_b, context_b), abs=1e-5)
    # b: 0.5 x 0.0707 + 0.5 x 0.9009 = 0.4858 > isolated: 0.5 x 0.4243 + 0.5 x 0.4243 = 0.4243
    assert [hit[0].id for hit in mixed].index("b") < [hit[0].id for hit in mixed].index("isolated")
    # so with room for three, the search brings b in and leaves the isolated memory out
    assert {hit[0].id for hit in copy.nearest(QUERY, embedder="emb", limit=3, now=NOW)} == {
        "before",
        "after",
        "isolated",
    }
    three = copy.nearest(QUERY, embedder="emb", limit=3, now=NOW, context_share=0.5)
    assert {hit[0].id for hit in three} == {"before", "after", "b"}


def test_filters_pick_the_hits_but_every_readable_neighbour_lends_context():
    copy = copy_of((turn("a", 0), A), (turn("b", 1, kind="artifact"), B), (turn("c", 2), C))
    hits = copy.nearest(QUERY, embedder="emb", limit=3, now=NOW, kinds=["fact"], context_share=0.5)
    assert [hit[0].id for hit in hits] == ["a", "c"]
    assert {hit[0].id: hit[3] for hit in hits} == pytest.approx({"a": 1.0, "c": 0.5}, abs=1e-4)


def test_context_cosines_agree_with_what_the_search_computed():
    copy = copy_of(*[(turn(f"m{i}", i), unit(1, i % 3, (i * 7) % 5)) for i in range(12)])
    hits = copy.nearest(QUERY, embedder="emb", limit=12, now=NOW, context_share=0.5)
    found = context(copy, *[hit[0].id for hit in hits])
    assert found == pytest.approx({hit[0].id: hit[3] for hit in hits}, abs=1e-5)


def brute_force_contexts(copy: ScopeCopy, query: np.ndarray) -> dict[str, float]:
    """Each linked memory's context cosine from its chain, found by sorting every chain again."""
    chains: dict[tuple, list[tuple[float, int]]] = {}
    for row, memory_id in enumerate(copy.ids):
        record = copy.records[memory_id]
        if record.episode_id and record.kind != "episode" and record.status == "active":
            key = (record.episode_id, record.visibility, record.agent_id, record.embedder)
            chains.setdefault(key, []).append((record.created_at.timestamp(), row))
    found = {}
    for members in chains.values():
        rows = [row for _, row in sorted(members)]
        for at, row in enumerate(rows):
            together = sum(copy.vectors[r] for r in rows[max(0, at - 1) : at + 2])
            found[copy.ids[row]] = float(together @ query / np.linalg.norm(together))
    return found


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 7),  # which memory
            st.integers(0, 5),  # its minute
            st.sampled_from(["e1", "e2", None]),
            st.sampled_from(["active", "superseded"]),
            st.sampled_from(["project", "agent"]),
            st.integers(0, 3),  # which vector
        ),
        min_size=1,
        max_size=30,
    )
)
def test_links_mended_write_by_write_match_links_built_at_once_and_a_fresh_sort(writes):
    vectors = [unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1), unit(1, 1, 1)]
    mended = ScopeCopy(DIM)
    last = {}
    for memory, minute, episode, status, visibility, vector in writes:
        record = turn(f"m{memory}", minute, episode, status=status, visibility=visibility, agent_id="x")
        mended.put(record, vectors[vector])
        last[record.id] = (record, vectors[vector])
    built = ScopeCopy(DIM)
    built.load((record, vector, None) for record, vector in last.values())
    expected = brute_force_contexts(built, QUERY)
    viewer = Viewer("x", "s")
    assert context(mended, *expected, viewer=viewer) == pytest.approx(expected, abs=1e-5)
    assert context(built, *expected, viewer=viewer) == pytest.approx(expected, abs=1e-5)


# A group commit's leader primes the products of the matrix with its batch's vectors (``ScopeCopy.prime``);
# each new memory's consolidation then takes its own from ``nearest``.


def hits_of(copy: ScopeCopy, query: np.ndarray) -> list[tuple[str, float]]:
    """The nearest memories and their cosines, rounded to 4 places (a product made for several vectors at
    once may differ from one made for one in the last bits)."""
    return [(hit[0].id, round(hit[1], 4)) for hit in copy.nearest(query, embedder="emb", limit=10, now=NOW)]


def test_a_primed_product_gives_the_nearest_a_fresh_one_would_and_is_taken_once():
    copy = copy_of((turn("a", 0), A), (turn("b", 1), B), (turn("c", 2), C))
    first, second = unit(1, 1, 0), unit(0, 1, 1)
    fresh = [hits_of(copy, first), hits_of(copy, second)]
    copy.prime([first, second])
    # first: cosine 0.7071 with a and b, 0 with c, ties by row
    assert hits_of(copy, first) == [("a", 0.7071), ("b", 0.7071), ("c", 0.0)]
    assert [hits_of(copy, first), hits_of(copy, second)] == fresh
    assert copy.primed_taken == 2  # the second ask for ``first`` made its own product


def test_rows_added_after_priming_are_searched_too():
    copy = copy_of((turn("a", 0), A), (turn("b", 1), B))
    first, second = unit(1, 1, 0), unit(0, 0, 1)
    copy.prime([first, second])
    copy.put(turn("c", 2), unit(0, 1, 1))  # the batch's own rows, or a later batch's
    # second: cosine 0.7071 with c (added after), 0 with a and b
    assert hits_of(copy, second) == [("c", 0.7071), ("a", 0.0), ("b", 0.0)]
    assert copy.primed_taken == 1


def test_a_product_primed_before_a_row_was_embedded_again_is_not_used():
    copy = copy_of((turn("a", 0), A), (turn("b", 1), B))
    first, second = unit(1, 0, 0), unit(0, 1, 0)
    copy.prime([first, second])
    copy.put(turn("a", 0), C)  # a embedded again: its cosine with ``first`` is now 0, not 1
    assert hits_of(copy, first) == [("a", 0.0), ("b", 0.0)]
    assert copy.primed_taken == 0
    copy.put(turn("b", 1, status="superseded"), B)  # the same vector, another status: still primed
    copy.prime([first, second])
    copy.put(turn("b", 1), B)
    assert hits_of(copy, second) == [("b", 1.0), ("a", 0.0)]
    assert copy.primed_taken == 1


def test_priming_one_vector_makes_nothing_and_products_never_taken_are_bounded():
    from storage.scope_copy import MAX_PRIMED

    copy = copy_of((turn("a", 0), A))
    copy.prime([B])
    hits_of(copy, B)
    assert copy.primed_taken == 0
    batch = [unit(1, i, 0) for i in range(1, MAX_PRIMED + 10)]
    copy.prime(batch)
    copy.prime(batch[:2])  # more than MAX_PRIMED would wait: the untaken ones are dropped
    hits_of(copy, batch[-1])  # (beyond MAX_PRIMED of one batch: never primed)
    hits_of(copy, batch[5])
    hits_of(copy, batch[0])
    assert copy.primed_taken == 1


# A recall says how many memories its vector search skipped for want of a vector of the active embedder
# (``without_vector_of``); a copy counts each embedder's vectors as rows change, and when one embedder's
# vectors are on every row it answers 0 without a pass over the masks.


def skipped_by_hand(rows: dict[str, tuple[MemoryRecord, np.ndarray | None]], embedder: str) -> int:
    """Active memories the search by ``embedder`` cannot compare: no vector, or another embedder's."""
    return sum(
        1
        for record, vector in rows.values()
        if record.status == "active" and (vector is None or record.embedder != embedder)
    )


def test_a_copy_whose_every_row_has_the_embedders_vector_skips_none_and_counts_those_that_lose_it():
    copy = ScopeCopy(DIM)
    copy.put(turn("a", 0), A)
    copy.put(turn("b", 1), B)
    assert copy.without_vector_of("emb", now=NOW) == 0
    copy.put(turn("b", 1, embedder="older"), B)  # b re-embedded by another model: no longer searched
    assert copy.without_vector_of("emb", now=NOW) == 1
    assert copy.without_vector_of("older", now=NOW) == 1  # a, for a search by the other model
    copy.put(turn("b", 1), B)  # back: every row has a vector of "emb" again
    assert copy.without_vector_of("emb", now=NOW) == 0
    copy.put(turn("a", 0), None)  # a waits for a vector
    assert copy.without_vector_of("emb", now=NOW) == 1
    assert copy.without_vector_of("unknown", now=NOW) == 2  # no row has that embedder's vector


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 5),  # which memory
            st.sampled_from(["emb", "older"]),
            st.booleans(),  # with a vector
            st.sampled_from(["active", "superseded"]),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_memories_skipped_by_a_search_match_a_count_by_hand_after_any_writes(writes):
    copy = ScopeCopy(DIM)
    rows: dict[str, tuple[MemoryRecord, np.ndarray | None]] = {}
    for memory, embedder, with_vector, status in writes:
        record = turn(f"m{memory}", memory, embedder=embedder, status=status)
        vector = A if with_vector else None
        copy.put(record, vector)
        rows[record.id] = (record, vector)
    for embedder in ("emb", "older", "unknown"):
        assert copy.without_vector_of(embedder, now=NOW) == skipped_by_hand(rows, embedder)


# A copy keeps the masks its searches start from until a row changes (``ScopeCopy._masks``); a kept mask
# must still follow time (a memory expires between two searches), the reader and every write.


def found_by(copy: ScopeCopy, at, viewer: Viewer | None = None) -> list[str]:
    hits = copy.nearest(A, embedder="emb", limit=10, now=at, viewer=viewer)
    words = copy.best_matching("m", limit=10, now=at, viewer=viewer) if copy.lexical is not None else []
    assert not words or sorted(hit[0].id for hit in words) == sorted(hit[0].id for hit in hits)
    return sorted(hit[0].id for hit in hits)


def test_a_memory_that_expires_between_two_searches_leaves_the_second_and_is_back_for_an_earlier_time():
    copy = copy_of(
        (turn("lasting", 0), A),
        (turn("brief", 1, expires_at=NOW + timedelta(minutes=10)), A),
        (turn("later", 2, expires_at=NOW + timedelta(minutes=30)), A),
    )
    assert found_by(copy, NOW) == ["brief", "lasting", "later"]
    assert found_by(copy, NOW + timedelta(minutes=5)) == ["brief", "lasting", "later"]  # before any expiry
    assert found_by(copy, NOW + timedelta(minutes=10)) == ["lasting", "later"]  # expired at that instant
    assert found_by(copy, NOW + timedelta(minutes=40)) == ["lasting"]
    assert found_by(copy, NOW) == ["brief", "lasting", "later"]  # asked as of an earlier time
    assert copy.without_vector_of("emb", now=NOW + timedelta(minutes=40)) == 0


def test_each_reader_searches_with_its_own_mask_and_a_write_changes_what_every_reader_finds():
    copy = copy_of(
        (turn("shared", 0), A),
        (turn("mine", 1, visibility="agent", agent_id="x"), A),
        (turn("theirs", 2, visibility="agent", agent_id="y"), A),
    )
    x, y = Viewer("x", "s"), Viewer("y", "s")
    assert found_by(copy, NOW, x) == ["mine", "shared"]
    assert found_by(copy, NOW, y) == ["shared", "theirs"]
    assert found_by(copy, NOW, x) == ["mine", "shared"]
    copy.put(turn("shared", 0, status="superseded"), A)
    assert found_by(copy, NOW, x) == ["mine"]
    assert found_by(copy, NOW, y) == ["theirs"]
    copy.put(turn("new", 3), A)
    assert found_by(copy, NOW, y) == ["new", "theirs"]
    assert copy.nearest(A, embedder="emb", limit=10, now=NOW, viewer=y, exclude=["new"])[0][0].id == "theirs"
    assert found_by(copy, NOW, y) == ["new", "theirs"]  # the exclusion narrowed that search alone


def test_a_copy_keeps_the_masks_of_a_few_readers_only():
    from storage.scope_masks import MAX_MASKS

    copy = copy_of((turn("shared", 0), A))
    for agent in range(3 * MAX_MASKS):
        assert found_by(copy, NOW, Viewer(f"agent-{agent}", "s")) == ["shared"]
    assert len(copy._masks) <= MAX_MASKS


def test_a_mask_kept_between_two_expiries_serves_any_time_between_them_in_any_order():
    copy = copy_of(
        (turn("lasting", 0), A),
        (turn("gone", 1, expires_at=NOW - timedelta(minutes=10)), A),
        (turn("brief", 2, expires_at=NOW + timedelta(minutes=10)), A),
    )
    assert found_by(copy, NOW) == ["brief", "lasting"]
    kept = copy._masks.get(("readable", 3, None, None), (NOW - timedelta(minutes=5)).timestamp())
    assert kept is not None  # made at NOW, it holds from the last expiry before it (recalls out of order)
    assert found_by(copy, NOW - timedelta(minutes=5)) == ["brief", "lasting"]
    assert found_by(copy, NOW - timedelta(minutes=10)) == ["brief", "lasting"]  # "gone" expired then
    assert found_by(copy, NOW - timedelta(minutes=11)) == ["brief", "gone", "lasting"]
    assert found_by(copy, NOW + timedelta(minutes=9)) == ["brief", "lasting"]
    assert found_by(copy, NOW + timedelta(minutes=10)) == ["lasting"]


def test_a_vector_that_cannot_be_stored_leaves_the_embedders_count_as_it_was():
    copy = copy_of((turn("a", 0), A), (turn("b", 1), B))
    with pytest.raises(ValueError):
        copy.put(turn("a", 0), np.ones((DIM, 2), dtype=np.float32))  # the right length, not a vector
    assert copy._embedded_rows == {0: 2}  # both rows still hold their vectors of "emb" (code 0)
    assert copy.without_vector_of("emb", now=NOW) == 0


def test_memories_that_score_alike_by_their_words_come_latest_written_first():
    from storage.lexical_index import LexicalIndex

    copy = ScopeCopy(DIM, lexical=LexicalIndex(str.split))
    # written out of time order: the copy's rows are not the order memories were written in
    for memory_id, minute in [("m2", 2), ("m0", 0), ("m3", 3), ("m1", 1)]:
        copy.put(turn(memory_id, minute, episode=None), A, f"payments-api port {minute}")
    found = copy.best_matching("payments-api port", limit=2, now=NOW + timedelta(hours=1))
    assert [record.id for record, _, _ in found] == ["m3", "m2"]
