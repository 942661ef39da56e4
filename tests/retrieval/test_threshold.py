from retrieval.threshold import MinScoreStage
from retrieval.trace import BelowThreshold
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
    assert output.events == (BelowThreshold("drop", 0.19, 0.2),)
