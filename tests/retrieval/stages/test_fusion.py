import numpy as np
import pytest

from retrieval.stages.fusion import (
    LEXICAL_VECTOR_WEIGHT,
    SEMANTIC_CONTEXT_SHARE,
    SEMANTIC_VECTOR_WEIGHT,
    context_share_for,
    fuse,
    vector_weight_for,
)
from storage.records import MemoryRecord, SearchHit
from tests.records import memory_record


def record(memory_id: str, embedder: str = "emb") -> MemoryRecord:
    return memory_record(memory_id, embedder=embedder)


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_fused_score_is_weighted_cosine_plus_max_normalised_bm25():
    query = unit(1, 0)
    vector_hits = [SearchHit(record("a"), 0.8, unit(0.8, 0.6)), SearchHit(record("b"), 0.6, unit(0.6, 0.8))]
    fulltext_hits = [SearchHit(record("b"), 4.0, unit(0.6, 0.8)), SearchHit(record("c"), 2.0, unit(0, 1))]
    fused, seen = fuse(
        vector_hits, fulltext_hits, query_vector=query, embedder_name="emb", vector_weight=0.5, limit=10
    )
    scores = {c.id: c.fused_score for c in fused}
    # a: 0.5 x 0.8 + 0.5 x 0 = 0.40; b: 0.5 x 0.6 + 0.5 x 4/4 = 0.80; c: cosine 0 from its stored vector, 0.5 x 2/4 = 0.25
    assert scores == pytest.approx({"a": 0.40, "b": 0.80, "c": 0.25})
    assert [c.id for c in fused] == ["b", "a", "c"]
    assert seen == 3


def test_a_vector_only_hit_is_fused_on_its_own_bm25_on_both_scales_and_a_fulltext_hit_keeps_its_own():
    query = unit(1, 0)
    vector_hits = [SearchHit(record("a"), 0.8, unit(0.8, 0.6)), SearchHit(record("b"), 0.6, unit(0.6, 0.8))]
    fulltext_hits = [SearchHit(record("b"), 4.0, unit(0.6, 0.8))]
    # The store scored a (left out of the full-text leg) at 1.0; a score given for b does not replace its hit's.
    fused, _ = fuse(
        vector_hits,
        fulltext_hits,
        query_vector=query,
        embedder_name="emb",
        vector_weight=0.5,
        limit=10,
        fulltext_ceiling=8.0,
        keywords={"a": 1.0, "b": 0.5},
    )
    found = {c.id: c for c in fused}
    assert (found["a"].fulltext_score, found["a"].found_by) == (1.0, ("vector",))
    assert found["b"].fulltext_score == 4.0
    # a: 0.5 x 0.8 + 0.5 x 1/4 = 0.525 ranking, 0.5 x 0.8 + 0.5 x 1/8 = 0.4625 against the full match;
    # b: 0.5 x 0.6 + 0.5 x 4/4 = 0.80, and 0.5 x 0.6 + 0.5 x 4/8 = 0.55.
    assert found["a"].fused_score == pytest.approx(0.525)
    assert found["a"].fused_absolute == pytest.approx(0.4625)
    assert (found["b"].fused_score, found["b"].fused_absolute) == pytest.approx((0.80, 0.55))


def test_fulltext_only_hit_gets_cosine_from_its_stored_vector():
    query = unit(1, 0)
    fused, _ = fuse(
        [],
        [SearchHit(record("c"), 3.0, unit(0.6, 0.8))],
        query_vector=query,
        embedder_name="emb",
        vector_weight=0.5,
        limit=5,
    )
    assert fused[0].vector_score == pytest.approx(0.6)
    assert fused[0].found_by == ("fulltext",)
    assert fused[0].fused_score == pytest.approx(0.5 * 0.6 + 0.5 * 1.0)


def test_vectors_from_another_embedder_are_never_compared():
    fused, _ = fuse(
        [],
        [SearchHit(record("c", embedder="other"), 3.0, unit(1, 0))],
        query_vector=unit(1, 0),
        embedder_name="emb",
        vector_weight=0.5,
        limit=5,
    )
    assert fused[0].vector_score is None
    assert fused[0].fused_score == pytest.approx(0.5)


def test_negative_cosine_counts_as_zero_and_limit_applies():
    hits = [SearchHit(record(f"m{i}"), -0.3 + i * 0.1, None) for i in range(5)]
    fused, seen = fuse(hits, [], query_vector=None, embedder_name="emb", vector_weight=1.0, limit=2)
    assert seen == 5
    assert [c.id for c in fused] == ["m4", "m3"]
    assert fused[0].fused_score == pytest.approx(0.1)
    assert fused[1].fused_score == pytest.approx(0.0)


def test_the_fusion_weight_follows_the_embedder_unless_configured():
    assert vector_weight_for(None, "hashed-v1:384") == LEXICAL_VECTOR_WEIGHT == 0.3
    assert (
        vector_weight_for(None, "st:all-MiniLM-L6-v2:384") == SEMANTIC_VECTOR_WEIGHT == pytest.approx(2 / 3)
    )
    assert vector_weight_for(0.8, "hashed-v1:384") == 0.8


def test_a_model_gives_half_its_weight_to_context_and_hashed_vectors_none():
    assert context_share_for(None, "st:all-MiniLM-L6-v2:384") == SEMANTIC_CONTEXT_SHARE == 0.5
    assert context_share_for(None, "hashed-v1:384") == 0.0
    assert context_share_for(0.25, "hashed-v1:384") == 0.25


def test_context_lifts_a_memory_that_says_little_alone_and_never_pulls_down_one_that_says_it_plainly():
    query = unit(1, 0)
    vector_hits = [
        SearchHit(record("plain"), 0.8, unit(0.8, 0.6), context=0.2),  # on topic, among unrelated turns
        SearchHit(record("aside"), 0.3, unit(0.3, 0.954), context=0.9),  # little alone, on topic in context
    ]
    fulltext_hits = [
        SearchHit(record("plain"), 2.0, unit(0.8, 0.6)),
        SearchHit(record("aside"), 4.0, unit(0.3, 0.954)),
    ]
    fused, _ = fuse(
        vector_hits,
        fulltext_hits,
        query_vector=query,
        embedder_name="emb",
        vector_weight=2 / 3,
        limit=5,
        context_share=0.5,
    )
    scores = {c.id: c.fused_score for c in fused}
    # w 2/3, c 0.5: a third each for the cosine, the better of cosine and context, and the words.
    # plain: 1/3 x 0.8 + 1/3 x max(0.8, 0.2) + 1/3 x 2/4 = 0.7 (as it would score alone)
    # aside: 1/3 x 0.3 + 1/3 x max(0.3, 0.9) + 1/3 x 4/4 = 0.7333
    assert scores == pytest.approx({"plain": 0.7, "aside": 2.2 / 3})
    assert [c.id for c in fused] == ["aside", "plain"]
    assert {c.id: c.context_score for c in fused} == {"plain": 0.2, "aside": 0.9}


def test_a_fulltext_only_hit_takes_its_context_from_the_contexts_given():
    fused, _ = fuse(
        [],
        [SearchHit(record("c"), 3.0, unit(0.6, 0.8))],
        query_vector=unit(1, 0),
        embedder_name="emb",
        vector_weight=0.5,
        limit=5,
        context_share=0.5,
        contexts={"c": 0.8},
    )
    # 0.5 x (0.5 x 0.6 + 0.5 x max(0.6, 0.8)) + 0.5 x 3/3 = 0.85
    assert fused[0].fused_score == pytest.approx(0.85)
    assert fused[0].context_score == pytest.approx(0.8)


def test_without_a_known_context_the_semantic_score_is_the_cosine_and_scores_stay_at_or_above_zero():
    vector_hits = [
        SearchHit(record("lancedb"), 0.6, unit(0.6, 0.8)),  # a scope LanceDB serves: no context
        SearchHit(record("below"), -0.2, unit(-0.2, 0.98), context=0.4),
        SearchHit(record("both"), -0.2, unit(-0.2, 0.98), context=-0.3),
    ]
    fused, _ = fuse(
        vector_hits,
        [],
        query_vector=unit(1, 0),
        embedder_name="emb",
        vector_weight=1.0,
        limit=5,
        context_share=0.5,
    )
    # lancedb: its cosine; below: 0.5 x max(0, -0.2) + 0.5 x max(0, 0.4) = 0.2; both: 0
    assert {c.id: c.fused_score for c in fused} == pytest.approx({"lancedb": 0.6, "below": 0.2, "both": 0.0})


def test_with_no_context_share_candidates_carry_no_context():
    fused, _ = fuse(
        [SearchHit(record("a"), 0.6, unit(0.6, 0.8), context=0.9)],
        [],
        query_vector=unit(1, 0),
        embedder_name="emb",
        vector_weight=1.0,
        limit=5,
    )
    assert fused[0].fused_score == pytest.approx(0.6)
    assert fused[0].context_score is None


def test_the_floor_reads_the_same_semantic_score_against_a_full_match():
    fused, _ = fuse(
        [SearchHit(record("a"), 0.6, unit(0.6, 0.8), context=0.8)],
        [SearchHit(record("a"), 2.0, unit(0.6, 0.8))],
        query_vector=unit(1, 0),
        embedder_name="emb",
        vector_weight=0.5,
        limit=5,
        fulltext_ceiling=8.0,
        context_share=0.5,
    )
    # semantic 0.5 x 0.6 + 0.5 x 0.8 = 0.7; ranking 0.5 x 0.7 + 0.5 x 2/2 = 0.85; floor 0.5 x 0.7 + 0.5 x 2/8 = 0.475
    assert fused[0].fused_score == pytest.approx(0.85)
    assert fused[0].fused_absolute == pytest.approx(0.475)
