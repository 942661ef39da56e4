import pytest

from retrieval.stages.attribution import (
    AttributionStage,
    all_named_agents,
    attribute,
    author_factor,
    named_agents,
    without_agents,
)
from retrieval.trace import AuthorsNamed
from retrieval.types import Candidate, RecallRequest
from storage.records import Scope
from tests.records import memory_record


def candidate(memory_id: str, agent: str, relevance: float) -> Candidate:
    return Candidate(memory=memory_record(memory_id, agent_id=agent), relevance_score=relevance)


def request(query: str) -> RecallRequest:
    return RecallRequest(query=query, scope=Scope("o", "p"), top_k=5, char_budget=1000, candidate_limit=15)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What has Melanie painted?", ("Melanie",)),
        ("What do Melanie's kids like?", ("Melanie",)),  # possessive
        ("what did claude code decide about the pool?", ("claude-code",)),  # every id word, any order
        ("what did claude decide?", ()),  # "code" missing: not named
        ("What did Caroline and Melanie both paint?", ("Caroline", "Melanie")),
        ("which database do we use?", ()),
    ],
)
def test_an_agent_is_named_when_every_word_of_its_id_is_in_the_query(query, expected):
    assert named_agents(query, ["Melanie", "Caroline", "claude-code", "Melanie"]) == expected


def test_when_the_query_names_every_author_there_is_nothing_to_tell_apart():
    assert named_agents("What did Caroline and Melanie both paint?", ["Caroline", "Melanie"]) == ()


def test_ids_of_function_words_or_short_words_are_never_named():
    assert named_agents("what can we do about it", ["we", "it", "a1", "can"]) == ()


def test_author_factor_keeps_named_authors_whole_and_cuts_the_others():
    assert author_factor("Melanie", ("Melanie",), 0.5) == 1.0
    assert author_factor("Caroline", ("Melanie",), 0.5) == 0.5
    assert author_factor("Caroline", (), 0.5) == 1.0


def test_other_authors_lose_the_discount_and_the_named_author_moves_up():
    candidates = (
        candidate("mentions", "Caroline", 0.8),  # "Wow, Melanie, that painting is great!"
        candidate("own-words", "Melanie", 0.6),
        candidate("unrelated", "Caroline", 0.1),
    )
    out, discounted = attribute(candidates, ("Melanie",), 0.5)
    # mentions: 0.8 x (1 - 0.5) = 0.40 < 0.6; unrelated: 0.1 x 0.5 = 0.05
    assert [(c.id, c.relevance_score, c.attribution_factor) for c in out] == [
        ("own-words", 0.6, 1.0),
        ("mentions", pytest.approx(0.40), 0.5),
        ("unrelated", pytest.approx(0.05), 0.5),
    ]
    assert discounted == 2


def test_nothing_changes_without_a_named_author_or_with_a_zero_discount():
    candidates = (candidate("b", "Caroline", 0.3), candidate("a", "Melanie", 0.2))
    assert attribute(candidates, (), 0.5) == (candidates, 0)
    assert attribute(candidates, ("Melanie",), 0.0) == (candidates, 0)


def test_the_stage_traces_who_was_named_and_how_many_were_discounted():
    stage = AttributionStage(0.3)
    output = stage(
        request("what did Melanie paint"), (candidate("x", "Caroline", 0.6), candidate("y", "Melanie", 0.5))
    )
    assert [c.id for c in output.candidates] == ["y", "x"]  # x: 0.6 x (1 - 0.3) = 0.42 < 0.5
    assert output.candidates[1].relevance_score == pytest.approx(0.42)
    assert output.events == (AuthorsNamed(("Melanie",), 0.3, 1),)


@pytest.mark.parametrize("discount", [-0.1, 1.0])
def test_the_discount_must_leave_something(discount):
    with pytest.raises(ValueError, match="author_discount"):
        AttributionStage(discount)


def test_applying_attribution_again_sets_the_factor_instead_of_discounting_twice():
    candidates = (candidate("mentions", "Caroline", 0.8), candidate("own-words", "Melanie", 0.6))
    once, _ = attribute(candidates, ("Melanie",), 0.5)
    twice, discounted = attribute(once, ("Melanie",), 0.5)
    assert twice == once and discounted == 1
    lifted, _ = attribute(once, (), 0.5)  # a pool where no author is named any more: back to whole
    assert {c.id: c.relevance_score for c in lifted} == pytest.approx({"mentions": 0.8, "own-words": 0.6})


def test_all_named_agents_lists_every_named_author_even_all_of_them():
    assert all_named_agents("what did Caroline tell Melanie", ["Melanie", "Caroline", "Jon"]) == (
        "Caroline",
        "Melanie",
    )
    assert all_named_agents("what did Caroline tell Melanie", ["Melanie", "Caroline"]) == (
        "Caroline",
        "Melanie",
    )
    assert named_agents("what did Caroline tell Melanie", ["Melanie", "Caroline"]) == ()


@pytest.mark.parametrize(
    ("query", "agents", "expected"),
    [
        ("What did Caroline research?", ["Caroline"], "What did research?"),
        ("Where did caroline's family go camping?", ["Caroline"], "Where did family go camping?"),
        ("What did Caroline\u2019s mentor say to Melanie", ["Caroline", "Melanie"], "What did mentor say to"),
        ("what did claude code decide about caching", ["claude-code"], "what did decide about caching"),
        # an id is removed as a phrase: its words elsewhere in the query stay
        ("did claude-code break the code review", ["claude-code"], "did break the code review"),
        ("did build_bot break the build", ["build-bot"], "did break the build"),
        # only whole words go: a longer word that starts with the name stays
        ("Carolines plan", ["Caroline"], "Carolines plan"),
        # nothing but the name: the query itself
        ("Caroline?", ["Caroline"], "Caroline?"),
        # nothing but function words would be left: the query itself
        ("what about Caroline", ["Caroline"], "what about Caroline"),
        ("What did Jon say", [], "What did Jon say"),
    ],
)
def test_the_vector_leg_embeds_the_query_without_the_named_agents(query, agents, expected):
    assert without_agents(query, agents) == expected
