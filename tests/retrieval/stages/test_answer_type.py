import pytest

from retrieval.stages.answer_type import AnswerTypeStage, asked_for, lend_answer_type, states
from retrieval.trace import AnswerTypeApplied
from retrieval.types import Candidate, RecallRequest
from storage.records import Scope
from tests.records import memory_record

SCOPE = Scope("acme", "web")


def request(query: str) -> RecallRequest:
    return RecallRequest(query=query, scope=SCOPE, top_k=5, char_budget=2000, candidate_limit=10)


def candidate(
    memory_id: str, content: str, weighted: float, *, source: str = "direct", **scores
) -> Candidate:
    record = memory_record(memory_id, content=content)
    return Candidate(
        memory=record, relevance_score=weighted, weighted_score=weighted, source=source, **scores
    )


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("When did we migrate the billing database?", "time"),
        ("so when is the next deploy", "time"),
        ("What year did Acme switch to Postgres?", "time"),
        ("how long ago did the outage start", "time"),
        ("How many replicas does staging run?", "quantity"),
        ("how long does the nightly build take", "quantity"),
        ("Where is the deploy config kept?", "place"),
        ("In which city is the support office?", "place"),
        ("What did the reviewer decide about retries?", None),
        ("billing database migration", None),  # not a question
        ("Who owns the billing service?", None),
    ],
)
def test_the_question_says_what_kind_of_answer_it_asks_for(question, expected):
    assert asked_for(question) == expected


@pytest.mark.parametrize(
    ("answer_type", "text", "expected"),
    [
        ("time", "Migrated the billing DB to Postgres 15 on 2026-03-02.", True),
        ("time", "We went camping yesterday.", True),
        ("time", "The standup moved to 9:30 on Mondays.", True),
        ("time", "Finished it three weeks ago.", True),
        ("time", "Back in March the team was smaller.", True),
        ("time", "the release train leaves on thursday", True),  # agents write lowercase
        ("time", "we march on", False),  # "march" only as a capitalised month
        ("time", "We may go camping.", False),  # "may" is not the month
        ("time", "May I ask you something?", False),
        ("time", "The billing service uses Postgres.", False),
        ("place", "The config lives in /etc/memoria/conf.d.", True),
        ("place", "Our support office is in Lisbon.", True),
        ("place", "The docs are at https://example.com/docs.", True),
        ("place", "We met in May.", False),  # a month after a preposition is a time
        ("place", "It is kept somewhere safe.", False),
        ("quantity", "Staging runs three replicas.", True),
        ("quantity", "The build takes 12 minutes.", True),
        ("quantity", "Staging runs a few replicas.", True),
        ("quantity", "Staging is small.", False),
    ],
)
def test_a_memory_states_a_time_a_place_or_a_quantity(answer_type, text, expected):
    assert states(answer_type, text) is expected


def test_a_direct_match_stating_the_answer_type_is_lent_the_weight_and_may_overtake():
    found = (
        candidate("about", "The billing database runs Postgres.", 0.6),
        candidate("when", "We migrated the billing database on 2026-03-02.", 0.5),
        candidate("sibling", "It took all of 2025 to plan.", 0.55, source="sibling", sibling_of="about"),
    )
    out, lent = lend_answer_type(found, "time", 0.2)
    # when: 0.5 + 0.2 = 0.7 overtakes about (0.6); the sibling states a year but was not matched: 0.55
    assert [(c.id, c.final_score) for c in out] == [
        ("when", pytest.approx(0.7)),
        ("about", pytest.approx(0.6)),
        ("sibling", pytest.approx(0.55)),
    ]
    assert lent == 1


def test_the_loan_is_scaled_as_the_memory_own_score_is():
    # another author's memory (attribution 0.7), faded (decay 0.5), weighted down by feedback (0.8):
    # 0.2 x 0.7 x 0.5 x 0.8 = 0.056; a feedback weight above 1 counts as 1: 0.2 x 1 = 0.2
    found = (
        candidate(
            "demoted",
            "Deployed at 10:00.",
            0.3,
            attribution_factor=0.7,
            decay_factor=0.5,
            feedback_weight=0.8,
        ),
        candidate("favoured", "Deployed at 11:00.", 0.3, feedback_weight=1.5),
    )
    out, _ = lend_answer_type(found, "time", 0.2)
    assert {c.id: c.answer_type_bonus for c in out} == pytest.approx({"demoted": 0.056, "favoured": 0.2})


def test_the_stage_lends_nothing_to_a_query_that_asks_for_no_answer_type():
    found = (candidate("a", "Deployed on 2026-03-02.", 0.4), candidate("b", "Deploys run nightly.", 0.5))
    stage = AnswerTypeStage(0.2)
    out = stage(request("deploy schedule"), found)
    assert out.candidates == found
    assert out.events == (AnswerTypeApplied(None, 0.2, 0),)
    asked = stage(request("When did we deploy?"), found)
    assert [c.id for c in asked.candidates] == ["a", "b"]  # 0.4 + 0.2 = 0.6 over 0.5
    assert asked.events == (AnswerTypeApplied("time", 0.2, 1),)


def test_a_weight_of_zero_turns_the_stage_off():
    found = (candidate("a", "Deployed on 2026-03-02.", 0.4), candidate("b", "Deploys run nightly.", 0.5))
    out = AnswerTypeStage(0.0)(request("When did we deploy?"), found)
    assert out.candidates == found
    assert out.events == (AnswerTypeApplied(None, 0.0, 0),)


def test_a_negative_weight_is_refused():
    with pytest.raises(ValueError, match="answer_type_weight must be 0 or more"):
        AnswerTypeStage(-0.1)
