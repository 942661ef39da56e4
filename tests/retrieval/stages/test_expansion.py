from datetime import UTC, datetime, timedelta

import pytest

from retrieval.stages.expansion import EpisodeExpansionStage, expand
from retrieval.types import Candidate, RecallRequest
from storage.records import EpisodeMemberStub, Scope
from tests.records import memory_record

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)


def direct(memory_id: str, final: float, episode: str | None = "ep", minutes: int = 0) -> Candidate:
    record = memory_record(memory_id, episode_id=episode, created_at=T0 + timedelta(minutes=minutes))
    return Candidate(memory=record, relevance_score=final, weighted_score=final)


def member(memory_id: str, minutes: int, weight: float = 1.0, episode: str = "ep", status: str = "active"):
    return memory_record(
        memory_id,
        episode_id=episode,
        created_at=T0 + timedelta(minutes=minutes),
        weight=weight,
        status=status,
    )


def test_sibling_score_is_alpha_times_its_sources_score_capped_by_its_own_weight():
    siblings = [member("s1", 1), member("s2", 2, weight=0.5), member("s3", 3, weight=1.5)]
    out, used, added = expand((direct("src", 0.8),), siblings, sources=5, alpha=0.5, max_siblings=3)
    scores = {c.id: c.final_score for c in out}
    # s1: 0.5 x 0.8 x 1.0 = 0.40; s2: 0.5 x 0.8 x 0.5 = 0.20; s3: weight above 1 does not lift it: 0.40
    assert scores == pytest.approx({"src": 0.8, "s1": 0.40, "s2": 0.20, "s3": 0.40})
    assert (used, added) == (1, 3)
    assert all(c.sibling_of == "src" and c.source == "sibling" for c in out if c.id != "src")
    # With weighting off (an org's A/B control) no weight scales a sibling: s2 0.5 x 0.8 = 0.40
    unweighted, _, _ = expand(
        (direct("src", 0.8),), siblings, sources=5, alpha=0.5, max_siblings=3, weighting_enabled=False
    )
    assert {c.id: c.final_score for c in unweighted}["s2"] == pytest.approx(0.40)


def test_siblings_rank_below_the_memory_that_brought_them():
    out, _, _ = expand(
        (direct("weak", 0.3, episode="other"), direct("src", 0.2)),
        [member("sib", 1)],
        sources=5,
        alpha=0.99,
        max_siblings=3,
    )
    order = [c.id for c in out]
    assert order.index("sib") > order.index("src")


def test_nearest_siblings_in_time_come_first_and_the_cap_applies():
    pool = [member(f"m{minutes}", minutes) for minutes in (-30, -1, 2, 45, 90)]
    out, _, added = expand((direct("src", 1.0, minutes=0),), pool, sources=5, alpha=0.5, max_siblings=2)
    assert added == 2
    assert {c.id for c in out if c.source == "sibling"} == {"m-1", "m2"}


def test_inactive_memories_are_never_siblings_and_sources_are_never_demoted():
    pool = [member("retired", 2, status="superseded"), member("fresh", 3)]
    candidates = (direct("src", 0.9), direct("other-source", 0.5))
    out, _, _ = expand(candidates, [*pool, member("other-source", 1)], sources=5, alpha=0.5, max_siblings=5)
    assert [c.id for c in out if c.source == "sibling"] == ["fresh"]
    assert next(c for c in out if c.id == "other-source").source == "direct"


def test_a_weak_direct_match_from_the_episode_is_lifted_to_its_sibling_score():
    pool = [member("weak", 1), member("strong-anyway", 2)]
    candidates = (direct("src", 0.9), direct("weak", 0.1), direct("strong-anyway", 0.6))
    out, _, _ = expand(candidates, pool, sources=1, alpha=0.5, max_siblings=5)
    by_id = {c.id: c for c in out}
    assert (by_id["weak"].source, by_id["weak"].sibling_of, by_id["weak"].final_score) == (
        "sibling",
        "src",
        0.45,
    )
    assert by_id["strong-anyway"].source == "direct" and by_id["strong-anyway"].final_score == 0.6


def test_only_the_first_top_k_direct_matches_bring_siblings():
    candidates = (direct("no-episode", 0.9, episode=None), direct("second", 0.8, episode="ep"))
    out, used, added = expand(candidates, [member("sib", 1)], sources=1, alpha=0.5, max_siblings=3)
    assert (used, added) == (0, 0) and {c.id for c in out} == {"no-episode", "second"}


def test_each_source_picks_its_nearest_members_however_long_another_episode_is():
    from retrieval.stages.expansion import nearest_members
    from storage.records import EpisodeMemberStub

    long_episode = [EpisodeMemberStub(f"long{i}", "long", T0 + timedelta(minutes=i), 1.0) for i in range(500)]
    short_episode = [EpisodeMemberStub("short-near", "short", T0 + timedelta(minutes=1), 1.0)]
    sources = [direct("a", 0.9, episode="long", minutes=250), direct("b", 0.8, episode="short")]
    chosen = nearest_members(sources, long_episode + short_episode, max_siblings=2)
    # nearest to minute 250: long250 (0 min), then long249 and long251 (1 min each; the tie goes by id)
    assert chosen == ["long250", "long249", "short-near"]


def test_a_sibling_by_another_agent_than_the_one_the_query_names_keeps_part_of_its_score():
    pool = [
        memory_record("by-named", episode_id="ep", created_at=T0 + timedelta(minutes=1), agent_id="Melanie"),
        memory_record("by-other", episode_id="ep", created_at=T0 + timedelta(minutes=2), agent_id="Caroline"),
    ]
    out, _, _ = expand(
        (direct("src", 0.8),),
        pool,
        sources=5,
        alpha=0.5,
        max_siblings=3,
        named=("Melanie",),
        author_discount=0.5,
    )
    scores = {c.id: (c.final_score, c.attribution_factor) for c in out}
    # by-named: 0.5 x 0.8 = 0.40; by-other: 0.5 x 0.8 x (1 - 0.5) = 0.20
    assert scores["by-named"] == (pytest.approx(0.40), 1.0)
    assert scores["by-other"] == (pytest.approx(0.20), 0.5)


class _Episode:
    """An EpisodeSource over records held in memory."""

    def __init__(self, records):
        self.records = {record.id: record for record in records}

    def episode_member_stubs(self, reach, episode_ids):
        return [
            EpisodeMemberStub(r.id, r.episode_id, r.created_at, r.weight)
            for r in self.records.values()
            if r.episode_id in episode_ids
        ]

    def get_memories(self, memory_ids, reach):
        return {i: self.records[i] for i in memory_ids if i in self.records}


@pytest.mark.parametrize(
    ("asked", "joined"),
    [
        ({"kinds": ("artifact",)}, ["config"]),
        ({"kinds": ("episode",)}, ["summary"]),
        ({"tags": ("config",)}, ["config"]),
        ({"tags": ("config", "db"), "tags_all": True}, []),
        ({}, ["config", "fact", "summary"]),
    ],
)
def test_siblings_are_of_the_kinds_and_tags_the_recall_searched_within(asked, joined):
    """A trial: kinds=["artifact"] brought the episode's summary and facts beside its config."""
    source = memory_record("source", kind="artifact", tags=("config",), episode_id="ep", created_at=T0)
    others = [
        memory_record(
            "config", kind="artifact", tags=("config",), episode_id="ep", created_at=T0 + timedelta(minutes=1)
        ),
        memory_record(
            "summary",
            kind="episode",
            tags=("incident",),
            episode_id="ep",
            created_at=T0 + timedelta(minutes=2),
        ),
        memory_record("fact", tags=("db",), episode_id="ep", created_at=T0 + timedelta(minutes=3)),
    ]
    stage = EpisodeExpansionStage(_Episode([source, *others]), alpha=0.5)
    request = RecallRequest(
        query="config", scope=Scope("o", "p"), top_k=5, char_budget=2000, candidate_limit=10, **asked
    )
    out = stage(request, (Candidate(memory=source, relevance_score=0.9, weighted_score=0.9),))
    assert sorted(c.id for c in out.candidates if c.source == "sibling") == joined
