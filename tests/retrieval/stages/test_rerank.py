import pytest

from retrieval.models.rerankers.base import sigmoid
from retrieval.stages.rerank import RerankStage
from retrieval.trace import Reranked, RerankFellBack, RerankSkipped
from retrieval.types import Candidate, RecallRequest
from storage.records import Scope
from tests.fakes import FailingReranker, ScriptedReranker
from tests.records import memory_record

REQUEST = RecallRequest(
    query="which database?", scope=Scope("o", "p"), top_k=5, char_budget=1000, candidate_limit=15
)


def candidate(content: str, fused: float) -> Candidate:
    return Candidate(memory=memory_record(content), fused_score=fused)


def test_sigmoid_maps_logits_into_zero_one_without_overflow():
    assert sigmoid(0.0) == 0.5
    assert sigmoid(2.0) == pytest.approx(0.880797, abs=1e-6)
    assert sigmoid(-2.0) == pytest.approx(0.119203, abs=1e-6)
    assert sigmoid(1000.0) == 1.0 and sigmoid(-1000.0) == 0.0


def test_relevance_becomes_the_reranker_score_and_order_follows_it():
    reranker = ScriptedReranker({"we use mysql": 0.9, "cats": 0.2})
    output = RerankStage(reranker)(REQUEST, (candidate("cats", 0.8), candidate("we use mysql", 0.3)))
    assert [c.id for c in output.candidates] == ["we use mysql", "cats"]
    assert [c.relevance_score for c in output.candidates] == [0.9, 0.2]
    assert [c.fused_score for c in output.candidates] == [0.3, 0.8]
    assert output.events == (Reranked("scripted", 2),)
    assert reranker.calls == [("which database?", ["cats", "we use mysql"])]


def test_without_a_reranker_relevance_is_the_fused_score():
    output = RerankStage(None, skipped_reason="offline")(REQUEST, (candidate("a", 0.2), candidate("b", 0.7)))
    assert [(c.id, c.relevance_score, c.rerank_score) for c in output.candidates] == [
        ("b", 0.7, None),
        ("a", 0.2, None),
    ]
    assert output.events == (RerankSkipped("offline"),)


def test_a_failing_reranker_falls_back_to_fused_scores_and_says_why():
    output = RerankStage(FailingReranker())(REQUEST, (candidate("a", 0.2), candidate("b", 0.7)))
    assert [c.id for c in output.candidates] == ["b", "a"]
    assert output.events == (RerankFellBack("failing", "the reranker service is down", True),)


def test_any_reranker_bug_falls_back_instead_of_failing_the_recall():
    class Broken:
        name = "broken"

        def rerank(self, query, documents):
            raise IndexError("list index out of range")

    output = RerankStage(Broken())(REQUEST, (candidate("a", 0.2), candidate("b", 0.7)))
    assert [c.id for c in output.candidates] == ["b", "a"]
    assert output.events == (RerankFellBack("broken", "IndexError: list index out of range", False),)
