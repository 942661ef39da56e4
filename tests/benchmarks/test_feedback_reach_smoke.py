"""The feedback-reach benchmark: its bounds and measures by hand, and a run on a tiny conversation."""

import json

import numpy as np
import pytest

from benchmarks import feedback_reach as reach
from tests.benchmarks.sample import SAMPLE


def asked(evidence, vector, candidates, helpful=()):
    return reach.Asked(
        set(evidence),
        np.asarray(vector, dtype=float),
        [m for m, _ in candidates],
        list(candidates),
        set(helpful),
    )


def world() -> reach.Conversation:
    # One training question credited m_a (its evidence, D1) and m_b (D9, no test question's).
    train = [asked(["D1", "D9"], [1.0, 0.0], [("m_a", 0.9), ("m_b", 0.8)], helpful=["m_a", "m_b"])]
    related = asked(
        ["D1"], [0.8, 0.6], [("x1", 0.9), ("x2", 0.8), ("x3", 0.7), ("x4", 0.6), ("x5", 0.5), ("m_a", 0.4)]
    )
    unrelated = asked(
        ["D5"], [0.0, 1.0], [("y0", 0.5), ("y1", 0.45), ("y2", 0.4), ("y3", 0.35), ("m_5", 0.3), ("m_b", 0.1)]
    )
    turns = {"m_a": {"D1"}, "m_b": {"D9"}, "m_5": {"D5"}}
    return reach.Conversation(turns, train, [related, unrelated], ["related", "unrelated"])


def test_the_oracle_lifts_credited_evidence_and_the_blind_bound_lifts_every_credited_memory():
    conversation = world()
    # related: m_a (rank 6) to the top, R@5 0 -> 1; unrelated untouched by the oracle
    assert reach.change([conversation], reach.oracle) == {"related": 1.0, "unrelated": 0.0}
    # blind: m_b also first for the unrelated question, which pushes its evidence m_5 (fifth) out of the top 5
    assert reach.change([conversation], reach.blind) == {"related": 1.0, "unrelated": -1.0}


def test_query_closeness_scales_the_boost():
    conversation = world()
    # related query cosine with the training query 0.8: closeness (0.8 - 0.3) / 0.3 -> 1; m_a 0.4 x 1.75 = 0.7,
    # fourth of six: in the top 5
    assert reach.change([conversation], reach.query_close(0.75, 0.3, 0.6))["related"] == 1.0
    # x0.15: 0.4 x 1.15 = 0.46, below x5 (0.5): still sixth
    assert reach.change([conversation], reach.query_close(0.15, 0.3, 0.6))["related"] == 0.0


def test_separation_and_what_no_weighting_can_reach_by_hand():
    conversation = world()
    # credited candidates: m_a for the related question (evidence, cosine 0.8), m_b for the unrelated one
    # (not evidence, cosine 0.0): the one positive outranks the one negative
    assert reach.separation([conversation]) == (1.0, 1, 1)
    # the related question misses D1 from its top 5; m_a holds it and is a candidate: within reach
    assert reach.unreachable([conversation]) == (1, 0)
    conversation.test[0].candidates = [c for c in conversation.test[0].candidates if c[0] != "m_a"]
    assert reach.unreachable([conversation]) == (1, 1)


def test_a_credited_memory_that_is_not_a_candidate_joins_as_it_scored_for_the_closest_reporter():
    conversation = world()
    conversation.test[0].candidates = [c for c in conversation.test[0].candidates if c[0] != "m_a"]
    injection = reach.injected_as_reported(0.3, 0.6)
    # related: cosine 0.8 with the reporter -> closeness 1; m_a scored 0.9 of the reporter's best 0.9, times
    # this question's best 0.9 -> 0.9: first (x0.75 weight: 1.575), R@5 0 -> 1. m_b: 0.8 / 0.9 x 0.9 = 0.8
    # (not evidence). The unrelated question is orthogonal to the reporter (closeness 0): nothing joins.
    assert injection(conversation.test[0], conversation) == pytest.approx({"m_a": 0.9, "m_b": 0.8})
    assert injection(conversation.test[1], conversation) == {}
    assert reach.change([conversation], reach.query_close(0.75, 0.3, 0.6), injection) == {
        "related": 1.0,
        "unrelated": 0.0,
    }
    # without it the removed candidate is out of reach of any weighting
    assert reach.change([conversation], reach.oracle)["related"] == 0.0
    assert reach.change([conversation], reach.oracle, reach.oracle_injected)["related"] == 1.0


def test_the_benchmark_runs_on_a_tiny_conversation(tmp_path, capsys):
    data = tmp_path / "sample.json"
    data.write_text(json.dumps([SAMPLE]))
    assert reach.main(["--data", str(data)]) == 0
    printed = capsys.readouterr().out
    assert "credited, oracle" in printed and "query-close x0.75" in printed
    assert "credited non-candidates" in printed
    assert "credited but not a candidate" in printed


@pytest.mark.parametrize("boost", [0.15, 2.0])
def test_a_memory_no_training_question_credited_keeps_its_score(boost):
    conversation = world()
    weights = reach.query_close(boost, 0.3, 0.6)(conversation.test[0], conversation)
    assert "x1" not in weights and set(weights) == {"m_a", "m_b"}


def test_what_episode_neighbours_lent_is_added_after_the_weight_as_the_server_adds_it():
    conversation = world()
    related = conversation.test[0]
    # x0.15 alone leaves m_a sixth (0.4 x 1.15 = 0.46 < 0.5, above). Lent 0.05 by a neighbour, added after
    # the weight: 0.46 + 0.05 = 0.51, above x5 (0.5): fifth, R@5 0 -> 1.
    related.lent = {"m_a": 0.05}
    assert reach.change([conversation], reach.query_close(0.15, 0.3, 0.6))["related"] == 1.0
    # x5 lent 0.02 as well: 0.52 > 0.51, m_a sixth again
    related.lent = {"m_a": 0.05, "x5": 0.02}
    assert reach.change([conversation], reach.query_close(0.15, 0.3, 0.6))["related"] == 0.0
    # before any weighting, m_a (0.4 + 0.05) stays sixth, below x5 (0.5 + 0.02): the miss counted by hand
    assert reach.unreachable([conversation]) == (1, 0)


def test_session_only_reports_weigh_each_memory_as_the_server_credits_it():
    from retrieval.outcomes import Closeness, CreditPolicy

    conversation = world()
    conversation.test[0].candidates[-1] = ("m_a", 0.45)
    conversation.train[0].shown = [("m_a", 0.9), ("m_b", 0.8)]
    policy = reach.session_only(CreditPolicy.position_share, Closeness(0.3, 0.6))
    # The session succeeded (m_a holds D1). m_a, shown first, takes a full step for the related question
    # (cosine 0.8, closeness 1): 1 + 0.2 x (1.75 - 1) = 1.15, so 0.45 x 1.15 = 0.5175 passes x5 (0.5).
    assert policy(conversation.test[0], conversation) == {"m_a": pytest.approx(1.15)}
    # The unrelated question's cosine with the reporting one is 0: m_b (shown second) does not move for it.
    assert policy(conversation.test[1], conversation) == {"m_b": pytest.approx(1.0)}
    assert reach.change([conversation], policy, seen=True) == {"related": 1.0, "unrelated": 0.0, "seen": 0.0}
    # Only the best place credited: m_b takes nothing, m_a the same step.
    best_only = reach.session_only(lambda rank: 1.0 if rank == 0 else 0.0, Closeness(0.3, 0.6))
    assert best_only(conversation.train[0], conversation) == {"m_a": pytest.approx(1.15)}
