import itertools
from dataclasses import replace

import pytest

from retrieval.feedback_index import FeedbackIndex
from retrieval.outcomes import Closeness, WeightPolicy
from retrieval.stages.feedback import FeedbackStage, apply_feedback_ranking
from retrieval.types import Candidate, RecallRequest
from storage.records import MemoryCredit, MemoryRecord, Scope
from tests.fakes import TableEmbedder
from tests.records import memory_record
from tests.retrieval.test_feedback_index import Reports, outcome


def memory(memory_id: str, weight: float = 1.0) -> MemoryRecord:
    return memory_record(memory_id, weight=weight)


def candidate(memory_id: str, relevance: float, weight: float = 1.0) -> Candidate:
    return Candidate(memory=memory(memory_id, weight), relevance_score=relevance)


def test_weighted_score_is_relevance_times_feedback_weight():
    ranked = apply_feedback_ranking((candidate("a", 0.8, 1.15),), weighting_enabled=True)
    assert ranked[0].weighted_score == pytest.approx(0.92)
    assert ranked[0].feedback_weight == 1.15


def test_weight_reorders_and_ranks_record_the_delta():
    # a: 0.80 x 0.85 = 0.680; b: 0.75 x 1.15 = 0.8625 -> b overtakes a
    ranked = apply_feedback_ranking(
        (candidate("a", 0.80, 0.85), candidate("b", 0.75, 1.15)), weighting_enabled=True
    )
    assert [c.id for c in ranked] == ["b", "a"]
    by_id = {c.id: c for c in ranked}
    assert (by_id["a"].unweighted_rank, by_id["a"].weighted_rank) == (0, 1)
    assert (by_id["b"].unweighted_rank, by_id["b"].weighted_rank) == (1, 0)
    assert by_id["b"].weighted_score == pytest.approx(0.8625)
    assert by_id["a"].weighted_score == pytest.approx(0.68)


def test_disabled_weighting_keeps_relevance_order_but_records_weights():
    ranked = apply_feedback_ranking(
        (candidate("a", 0.80, 0.85), candidate("b", 0.75, 1.15)), weighting_enabled=False
    )
    assert [c.id for c in ranked] == ["a", "b"]
    assert [c.weighted_score for c in ranked] == [0.80, 0.75]
    assert [c.feedback_weight for c in ranked] == [0.85, 1.15]
    assert all(c.unweighted_rank == c.weighted_rank for c in ranked)


def test_ranking_never_mutates_its_input():
    original = (candidate("a", 0.5, 0.5), candidate("b", 0.4, 1.5))
    snapshot = tuple(replace(c) for c in original)
    apply_feedback_ranking(original, weighting_enabled=True)
    assert original == snapshot


def test_stage_reports_how_many_candidates_moved():
    request = RecallRequest(query="q", scope=Scope("o", "p"), top_k=5, char_budget=1000, candidate_limit=15)
    output = FeedbackStage()(
        request, (candidate("a", 0.80, 0.85), candidate("b", 0.75, 1.15), candidate("c", 0.1))
    )
    assert output.events[0].reordered == 2
    assert output.events[0].weighting_enabled is True


def test_a_recall_whose_candidates_no_report_credits_does_not_embed_its_query_for_feedback():
    # Candidate search embeds the query it searches with (without the names of authors it names); the
    # feedback stage embeds the query as said only to compare it with reporting sessions' queries.
    embedder = TableEmbedder({"q": (1.0, 0.0), "deploy": (1.0, 0.0)})
    reports = Reports([outcome("s1", [MemoryCredit("a", "helpful", 1.0, 1.0, 0)], embedder=embedder)])
    stage = FeedbackStage(
        FeedbackIndex(reports, embedder, closeness=Closeness(0.3, 0.6), policy=WeightPolicy()), embedder
    )
    request = RecallRequest(query="q", scope=Scope("o", "p"), top_k=5, char_budget=1000, candidate_limit=15)
    embedder.calls.clear()
    stage(request, (candidate("b", 0.8), candidate("c", 0.5)))
    assert embedder.calls == []
    output = stage(request, (candidate("a", 0.8), candidate("b", 0.5)))
    assert embedder.calls == ["q"]  # a's report is compared with this query: cosine 1, a full step
    assert output.candidates[0].feedback_weight == pytest.approx(1.75)


def test_the_steps_shown_are_the_largest_in_the_order_they_were_replayed():
    from retrieval.outcomes import FeedbackStep
    from retrieval.stages.feedback import largest_in_order

    # Weights 1.0 -> 1.15 -> 1.16 -> 0.90 -> 0.91: moves 0.15, 0.01, 0.26, 0.01.
    path = [1.0, 1.15, 1.16, 0.90, 0.91]
    steps = tuple(
        FeedbackStep(f"s{i}", "context", 1.0, 1.0, 1.0, before, after)
        for i, (before, after) in enumerate(itertools.pairwise(path))
    )
    # The two largest (s2 0.26, s0 0.15), in replay order: s0's "after" leads towards s2's "before".
    assert [step.session_id for step in largest_in_order(steps, 2)] == ["s0", "s2"]
    assert largest_in_order(steps, 10) == steps
