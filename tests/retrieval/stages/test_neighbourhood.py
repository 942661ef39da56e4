from datetime import UTC, datetime, timedelta

import pytest

from retrieval.stages.neighbourhood import NeighbourhoodStage, lend, turn_positions
from retrieval.trace import NeighbourhoodApplied
from retrieval.types import Candidate, RecallRequest
from storage.records import EpisodeMemberStub, Scope
from tests.records import memory_record

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
SCOPE = Scope("acme", "web")


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def candidate(
    memory_id: str, final: float, minutes: int, *, episode: str = "ep", source: str = "direct", **scores
):
    record = memory_record(memory_id, episode_id=episode, created_at=at(minutes))
    return Candidate(memory=record, relevance_score=final, weighted_score=final, source=source, **scores)


def stubs(*ids: str, episode: str = "ep") -> list[EpisodeMemberStub]:
    """Members of ``episode`` one minute apart, in the order given."""
    return [EpisodeMemberStub(memory_id, episode, at(minute), 1.0) for minute, memory_id in enumerate(ids)]


def test_turns_are_the_episode_members_in_time_order():
    members = [*stubs("a", "b", "c"), *stubs("x", "y", episode="other")]
    shuffled = [members[2], members[4], members[0], members[3], members[1]]
    assert turn_positions(shuffled) == {
        "a": ("ep", 0),
        "b": ("ep", 1),
        "c": ("ep", 2),
        "x": ("other", 0),
        "y": ("other", 1),
    }


def test_a_memory_is_lent_weight_times_its_best_direct_neighbour_within_the_turns():
    # turns: t0 match (0.9), t1 answer (0.3), t2 (not a candidate), t3 other match (0.6), t4 isolated (0.5)
    positions = turn_positions(stubs("t0", "t1", "t2", "t3", "t4", "t5", "t6"))
    found = (
        candidate("t0", 0.9, 0),
        candidate("t3", 0.6, 3),
        candidate("t1", 0.3, 1),
        candidate("t6", 0.5, 6),
    )
    out, supported = lend(found, positions, weight=0.2, turns=2)
    scores = {c.id: c.final_score for c in out}
    # t0: best within t-2..t2 besides itself is t1 (0.3): 0.9 + 0.2 x 0.3 = 0.96
    # t1: t0 (0.9) and t3 (0.6) are within 2 turns: 0.3 + 0.2 x 0.9 = 0.48
    # t3: t1 (0.3) within 2 turns (t5 is not a candidate, t6 is 3 away): 0.6 + 0.2 x 0.3 = 0.66
    # t6: nothing within 2 turns: 0.5
    assert scores == pytest.approx({"t0": 0.96, "t1": 0.48, "t3": 0.66, "t6": 0.5})
    assert supported == 3
    assert {c.id: c.neighbourhood_of for c in out} == {"t0": "t1", "t1": "t0", "t3": "t1", "t6": None}
    assert [c.id for c in out] == ["t0", "t3", "t6", "t1"]


def test_an_answer_next_to_the_best_match_overtakes_an_isolated_match():
    positions = turn_positions(stubs("question", "answer", "later") + stubs("lone", episode="other"))
    found = (
        candidate("question", 0.8, 0),
        candidate("lone", 0.45, 0, episode="other"),
        candidate("answer", 0.4, 1),
    )
    out, _ = lend(found, positions, weight=0.2, turns=2)
    # answer: 0.4 + 0.2 x 0.8 = 0.56 > lone's 0.45
    assert [c.id for c in out] == ["question", "answer", "lone"]


def test_siblings_are_lent_but_only_direct_matches_lend():
    positions = turn_positions(stubs("src", "sib", "far"))
    found = (candidate("src", 0.8, 0), candidate("sib", 0.4, 1, source="sibling"), candidate("far", 0.1, 2))
    out, _ = lend(found, positions, weight=0.25, turns=1)
    scores = {c.id: c.final_score for c in out}
    # sib: 0.4 + 0.25 x 0.8 = 0.6; far's only neighbour within 1 turn is the sibling, which lends nothing
    assert scores == pytest.approx({"src": 0.8, "sib": 0.6, "far": 0.1})


def test_neighbours_lend_their_scores_before_any_bonus_so_nothing_is_counted_twice():
    positions = turn_positions(stubs("a", "b"))
    out, _ = lend((candidate("a", 0.5, 0), candidate("b", 0.5, 1)), positions, weight=0.5, turns=1)
    assert {c.id: c.final_score for c in out} == pytest.approx({"a": 0.75, "b": 0.75})


def test_a_memory_without_an_episode_order_keeps_its_score():
    out, supported = lend((candidate("a", 0.5, 0, episode="unread"),), {}, weight=0.5, turns=2)
    assert out[0].final_score == 0.5 and out[0].neighbourhood_bonus == 0.0 and supported == 0


class Members:
    def __init__(self, members: list[EpisodeMemberStub]) -> None:
        self.members = members
        self.asked: list[list[str]] = []

    def episode_member_stubs(self, reach, episode_ids):
        self.asked.append(list(episode_ids))
        return [stub for stub in self.members if stub.episode_id in episode_ids]


def request(top_k: int = 2) -> RecallRequest:
    return RecallRequest(query="q", scope=SCOPE, top_k=top_k, char_budget=2000, candidate_limit=10)


def test_the_stage_reads_the_order_of_the_episodes_of_the_first_top_k_candidates():
    source = Members([*stubs("a", "b"), *stubs("c", "d", episode="e2"), *stubs("z", episode="e3")])
    found = (
        candidate("a", 0.9, 0),
        candidate("c", 0.8, 0, episode="e2"),
        candidate("b", 0.3, 1),
        candidate("z", 0.2, 0, episode="e3"),
    )
    out = NeighbourhoodStage(source, weight=0.2, turns=2)(request(top_k=2), found)
    assert source.asked == [["ep", "e2"]]
    assert {c.id: c.final_score for c in out.candidates} == pytest.approx(
        {"a": 0.96, "c": 0.8, "b": 0.48, "z": 0.2}
    )
    assert out.events == (NeighbourhoodApplied(0.2, 2, 2, 2),)


def test_a_weight_of_zero_turns_the_stage_off():
    source = Members(stubs("a", "b"))
    found = (candidate("a", 0.9, 0), candidate("b", 0.3, 1))
    out = NeighbourhoodStage(source, weight=0.0, turns=2)(request(), found)
    assert out.candidates == found and source.asked == []
    assert out.events == (NeighbourhoodApplied(0.0, 2, 0, 0),)


@pytest.mark.parametrize(("weight", "turns"), [(-0.1, 2), (0.2, -1)])
def test_a_negative_weight_or_turn_count_is_refused(weight, turns):
    with pytest.raises(ValueError, match="neighbourhood"):
        NeighbourhoodStage(Members([]), weight=weight, turns=turns)


def test_members_stored_at_one_moment_share_a_turn():
    members = [EpisodeMemberStub(m, "ep", at(0), 1.0) for m in ("b", "a", "c")]
    members.append(EpisodeMemberStub("d", "ep", at(1), 1.0))
    assert turn_positions(members) == {"a": ("ep", 0), "b": ("ep", 0), "c": ("ep", 0), "d": ("ep", 1)}
    found = (candidate("a", 0.8, 0), candidate("b", 0.4, 0), candidate("d", 0.2, 1))
    out, _ = lend(found, turn_positions(members), weight=0.5, turns=1)
    # a: best of b (0.4) and d (0.2): 0.8 + 0.2; b: a (0.8): 0.4 + 0.4; d: a: 0.2 + 0.4
    assert {c.id: c.final_score for c in out} == pytest.approx({"a": 1.0, "b": 0.8, "d": 0.6})


def test_the_bonus_is_scaled_as_the_memorys_own_score_so_a_demotion_stands():
    positions = turn_positions(stubs("match", "flagged", "named-away", "misled"))
    found = (
        candidate("match", 0.9, 0),
        candidate("flagged", 0.3, 1, instruction_factor=0.5),
        candidate("named-away", 0.2, 2, attribution_factor=0.5, decay_factor=0.8),
        candidate("misled", 0.1, 3, feedback_weight=0.25),
    )
    out, _ = lend(found, positions, weight=0.2, turns=3)
    bonus = {c.id: c.neighbourhood_bonus for c in out}
    # 0.2 x 0.9 = 0.18 scaled: x 0.5; x 0.5 x 0.8; x 0.25 (a weight above 1 would count as 1)
    assert bonus["flagged"] == pytest.approx(0.09)
    assert bonus["named-away"] == pytest.approx(0.072)
    assert bonus["misled"] == pytest.approx(0.045)
    # An org's A/B control (weighting off) keeps the unweighted order: the weight scales nothing there.
    unweighted, _ = lend(found, positions, weight=0.2, turns=3, weighting_enabled=False)
    assert {c.id: c.neighbourhood_bonus for c in unweighted}["misled"] == pytest.approx(0.18)


def test_a_sibling_is_never_lifted_above_the_memory_that_brought_it():
    # src brought sib; a stronger match two turns from sib (and three from src) would lift sib past src.
    positions = turn_positions(stubs("src", "x", "sib", "y", "strong"))
    found = (
        candidate("strong", 0.9, 4),
        candidate("src", 0.3, 0),
        candidate("sib", 0.15, 2, source="sibling", sibling_of="src"),
    )
    out, _ = lend(found, positions, weight=0.2, turns=2)
    scores = {c.id: c.final_score for c in out}
    # src: sib is no direct match, strong is 4 turns away: 0.3. sib: 0.15 + 0.18 = 0.33, capped at 0.3.
    assert scores == pytest.approx({"strong": 0.9, "src": 0.3, "sib": 0.3})
    assert [c.id for c in out] == ["strong", "src", "sib"]


def test_lending_again_gives_the_same_scores():
    positions = turn_positions(stubs("a", "b"))
    once, _ = lend((candidate("a", 0.5, 0), candidate("b", 0.4, 1)), positions, weight=0.5, turns=1)
    twice, _ = lend(once, positions, weight=0.5, turns=1)
    assert [(c.id, c.final_score) for c in twice] == [(c.id, c.final_score) for c in once]
