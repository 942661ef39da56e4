import pytest

from retrieval.stages.threshold import (
    LEXICAL_FLOOR,
    RERANKER_FLOOR,
    SEMANTIC_FLOOR,
    MinScoreStage,
    relevance_floor_for,
)
from retrieval.trace import BelowThreshold, FloorApplied
from retrieval.types import Candidate, RecallRequest
from storage.records import Scope
from tests.records import memory_record


def test_candidates_below_min_fact_score_are_dropped_and_traced():
    request = RecallRequest(query="q", scope=Scope("o", "p"), top_k=5, char_budget=1000, candidate_limit=15)
    candidates = (
        Candidate(memory=memory_record("keep"), relevance_score=0.2),
        Candidate(memory=memory_record("drop"), relevance_score=0.19),
    )
    output = MinScoreStage(0.2)(request, candidates)
    assert [c.id for c in output.candidates] == ["keep"]
    assert output.events == (FloorApplied(0.2, 1), BelowThreshold("drop", 0.19, 0.2))


def test_the_floor_reads_the_fused_part_on_the_absolute_scale():
    request = RecallRequest(query="q", scope=Scope("o", "p"), top_k=5, char_budget=1000, candidate_limit=15)
    # Ranked first by its relative score (0.6, halved by attribution to 0.3), but a full match of the
    # query would score five times what it does: on the absolute scale 0.12 x 0.5 = 0.06, below 0.1.
    weak_best = Candidate(
        memory=memory_record("weak"),
        fused_score=0.6,
        fused_absolute=0.12,
        attribution_factor=0.5,
        relevance_score=0.3,
    )
    # A reranked candidate's relevance is the reranker's: the fused reading does not enter.
    reranked = Candidate(
        memory=memory_record("reranked"),
        fused_score=0.6,
        fused_absolute=0.01,
        rerank_score=0.4,
        relevance_score=0.4,
    )
    assert weak_best.floor_score == pytest.approx(0.06)
    output = MinScoreStage(0.1)(request, (weak_best, reranked))
    assert [c.id for c in output.candidates] == ["reranked"]
    assert output.events == (FloorApplied(0.1, 1), BelowThreshold("weak", 0.06, 0.1))


def test_the_default_floor_depends_on_what_the_relevance_is_made_of():
    assert relevance_floor_for(None, "hashed-v1:384", reranked=False) == LEXICAL_FLOOR
    assert relevance_floor_for(None, "st:all-MiniLM-L6-v2:384", reranked=False) == SEMANTIC_FLOOR
    assert relevance_floor_for(None, "st:all-MiniLM-L6-v2:384", reranked=True) == RERANKER_FLOOR
    assert relevance_floor_for(0.0, "hashed-v1:384", reranked=False) == 0.0  # min_fact_score overrides
    assert relevance_floor_for(0.3, "anything", reranked=True) == pytest.approx(0.3)


def test_the_floor_keeps_out_a_memory_below_it_as_ranked_and_shown():
    request = RecallRequest(query="q", scope=Scope("o", "p"), top_k=5, char_budget=1000, candidate_limit=15)
    # A partial match far below the best one: relative to that best match it ranks (and recall shows it)
    # at 0.094; read against a full match of the query it would pass (0.094 x 0.116 / 0.094 = 0.116).
    partial = Candidate(
        memory=memory_record("partial"), fused_score=0.094, fused_absolute=0.116, relevance_score=0.094
    )
    # Above the floor both ways: its shown relevance (0.2) is the lower, and is what the floor reads.
    clear = Candidate(memory=memory_record("clear"), fused_score=0.2, fused_absolute=0.3, relevance_score=0.2)
    assert (partial.floor_score, clear.floor_score) == (pytest.approx(0.094), pytest.approx(0.2))
    output = MinScoreStage(0.1)(request, (clear, partial))
    assert [c.id for c in output.candidates] == ["clear"]
    assert output.events == (FloorApplied(0.1, 1), BelowThreshold("partial", 0.094, 0.1))
