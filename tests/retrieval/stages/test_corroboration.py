from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from retrieval.stages.corroboration import (
    ClusterMember,
    CorroborationStage,
    corroboration_boost,
    make_cluster,
    rank_with_corroboration,
)
from retrieval.types import Candidate, RecallRequest
from storage.records import Scope, View
from tests.records import memory_record

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def member(memory_id: str, agent: str, weight: float = 1.0, minutes: int = 0) -> ClusterMember:
    return ClusterMember(memory_id, agent, weight, T0 + timedelta(minutes=minutes), 0)


@pytest.mark.parametrize(
    "score, boost", [(0, 0.0), (1, 0.100), (2, 0.158), (4, 0.232), (8, 0.300), (50, 0.300)]
)
def test_boost_is_log2_of_one_plus_corroborating_agents_times_a_tenth(score, boost):
    assert corroboration_boost(score) == pytest.approx(boost, abs=5e-4)


def test_canonical_is_the_highest_weight_member_and_the_rest_corroborate():
    cluster = make_cluster([member("a", "x", 1.0), member("b", "y", 1.3), member("c", "z", 0.9)], {})
    assert cluster.canonical.id == "b"
    assert [m.id for m in cluster.corroborating] == ["a", "c"]
    assert cluster.corroborating_agents == ("x", "z")
    assert cluster.corroboration_score == 2


def test_ties_go_to_the_earliest_memory():
    cluster = make_cluster([member("late", "x", minutes=5), member("early", "y", minutes=0)], {})
    assert cluster.canonical.id == "early"


def test_one_agent_repeating_itself_corroborates_nothing():
    cluster = make_cluster([member("a", "x"), member("b", "x", minutes=1), member("c", "x", minutes=2)], {})
    assert cluster.corroboration_score == 0 and cluster.boost == 0.0


def test_exact_duplicates_from_other_agents_count_through_attestations():
    cluster = make_cluster([member("a", "x")], {"a": {"y", "z"}})
    assert cluster.corroboration_score == 2
    assert make_cluster([member("a", "x")], {}) is None  # a lone memory is no cluster


def test_an_attestation_by_the_canonical_author_adds_nothing():
    cluster = make_cluster([member("a", "x"), member("b", "y", minutes=1)], {"a": {"x"}, "b": {"y"}})
    assert cluster.corroboration_score == 1


def candidate(memory_id: str, relevance: float, agent: str = "x") -> Candidate:
    return Candidate(memory=memory_record(memory_id, agent_id=agent), relevance_score=relevance)


def test_boost_reorders_candidates_of_similar_relevance_and_never_mutates_its_input():
    cluster = make_cluster([member("corroborated", "x")], {"corroborated": {"y", "z"}})
    original = (candidate("single", 0.60), candidate("corroborated", 0.50))
    snapshot = tuple(replace(c) for c in original)
    ranked = rank_with_corroboration(original, {"corroborated": cluster})
    assert original == snapshot
    # 0.50 + log2(3) x 0.1 = 0.6585 > 0.60
    assert [c.id for c in ranked] == ["corroborated", "single"]
    assert ranked[0].boosted_score == pytest.approx(0.6585, abs=1e-4)
    assert ranked[0].corroborating_agents == ("y", "z")
    assert ranked[1].corroboration_boost == 0.0 and ranked[1].cluster_canonical is None


def test_a_member_shown_in_the_canonicals_place_names_every_other_agent_and_never_its_own_author():
    """A trial: bob's restatement was shown, "also stated by bob", and alice, who wrote the fact, was
    named nowhere."""
    cluster = make_cluster([member("alices", "alice"), member("bobs", "bob", minutes=5)], {})
    shown = rank_with_corroboration((candidate("bobs", 0.5, agent="bob"),), {"bobs": cluster})
    assert shown[0].corroborating_agents == ("alice",)
    canonical = rank_with_corroboration((candidate("alices", 0.5, agent="alice"),), {"alices": cluster})
    assert canonical[0].corroborating_agents == ("bob",)


def test_stage_asks_the_provider_for_what_the_request_may_read():
    asked = []

    class Provider:
        def clusters_for(self, scope, memory_ids):
            asked.append((scope, list(memory_ids)))
            return {}

    request = RecallRequest(
        query="q", scope=Scope("acme", "web"), top_k=5, char_budget=1000, candidate_limit=15
    )
    output = CorroborationStage(Provider())(request, (candidate("a", 0.4),))
    # The request's scope as its viewer sees it, with the org's shelf (storage.records.View).
    assert asked == [(View(Scope("acme", "web")), ["a"])]
    assert output.events[0].boosted == 0
