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
        ("when's the freeze?", "time"),
        ("When running the tests, which flags should I use?", None),  # a when-clause, not a question
        ("when to use feature flags", None),
        ("What year did Acme switch to Postgres?", "time"),
        ("how long ago did the outage start", "time"),
        ("How many replicas does staging run?", "quantity"),
        ("how long does the nightly build take", "quantity"),
        ("Where is the deploy config kept?", "place"),
        ("In which city is the support office?", "place"),
        ("which files set the retry policy?", "place"),
        ("Which host runs the nightly cron?", "host"),
        ("what host is the staging database on?", "host"),
        ("On which server does Redis run?", "host"),
        ("which IPs are allowed to reach the admin API?", "host"),
        # A review: what runs on a host, or another address, is not asked for as a host.
        ("What host OS runs the CI?", None),
        ("Which server-side framework do we use?", None),
        ("Which hosts file does the VPN write?", None),
        ("What IP range does the VPC use?", None),
        ("What machine learning model ranks the results?", None),
        # A place word qualifying the noun asked for (a new user's trial: read as a place, paths lent).
        ("What host port does billing-api use with docker compose?", None),
        ("Which file format do the exports use?", None),
        ("whereas the old deploy was manual", None),
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
        ("time", "The review is on Mar. 3", True),
        ("time", "Let's try again this time.", False),
        ("time", "the release train leaves on thursday", True),  # agents write lowercase
        ("time", "we march on", False),  # "march" only as a capitalised month
        ("time", "We may go camping.", False),  # "may" is not the month
        ("time", "May I ask you something?", False),
        ("time", "The billing service uses Postgres.", False),
        ("place", "The config lives in /etc/memoria/conf.d.", True),
        ("place", "The deploy script lives in scripts/deploy.sh", True),
        ("place", "retries are set in settings.toml", True),
        ("place", "see src/net/retry_policy for the backoff", True),
        ("place", "tests pass and/or fail at random", False),
        ("place", "Our support office is in Lisbon.", True),
        ("place", "The docs are at https://example.com/docs.", True),
        ("place", "We met in May.", False),  # a month after a preposition is a time
        ("place", "It is kept somewhere safe.", False),
        # A host (a new user's trial: "what host is the staging database on?" lent none of the hosts), for a
        # question that asks for one; a place answers it too. "Where ... stored?" reads no host.
        ("host", "The staging database moved from db-stg-01.internal to db-stg-02.internal.", True),
        ("host", "Redis is at 10.0.3.17:6379", True),
        ("host", "Connect with psql -h localhost -p 5432", True),
        ("host", "Mail goes out via smtp.sendgrid.net", True),
        ("host", "The CI runners live in Frankfurt.", True),
        ("host", "Python 3.11.4 is required, e.g. for the type hints", False),
        # A version of four numbers is not an IPv4 address (a note's leftover), however its label is written.
        ("host", "The agent runs version 1.2.3.4 of the SDK", False),
        ("host", "Release 4.0.1.2 fixed the leak", False),
        ("host", "The agent's config says version: 1.2.3.4", False),
        (
            "host",
            "The build 10.0.3.17 box runs the nightly jobs",
            True,
        ),  # an address after "build" (a review)
        ("host", "The docs are at https://docs.kestrel.io/ci.", True),
        # A second trial: a path, a file name or a runtime with its version answers no host question (they
        # were lent as much as the host the service had moved to, and ranked above it).
        ("host", "Deploy the orders-service with `./scripts/deploy.sh orders prod`.", False),
        ("host", "The orders-service runs on Python 3.10 with Django 4.2.", False),
        ("host", "The storefront is built on Node v18.", False),
        ("host", "The tests run on Python3.12.", False),  # a review: the version written on
        ("host", "retries are set in settings.toml", False),
        ("place", "The orders-service runs on Python 3.10 with Django 4.2.", True),
        ("place", "Redis is at 10.0.3.17:6379", False),
        # A review: an email address, a library, a site of two labels name no host.
        ("host", "Mail alice@example.com about socket.io and example.com", False),
        ("quantity", "Staging runs three replicas.", True),
        ("quantity", "The build takes 12 minutes.", True),
        ("quantity", "Deploys retry twice.", True),
        ("quantity", "no one owns the billing job", False),  # "one" as a pronoun
        ("quantity", "Staging runs a few replicas.", False),
        ("quantity", "Staging is small.", False),
    ],
)
def test_a_memory_states_a_time_a_place_or_a_quantity(answer_type, text, expected):
    assert states(answer_type, text) is expected


def test_a_match_stating_the_answer_type_is_lent_a_share_of_its_weighted_score_and_may_overtake():
    found = (
        candidate("about", "The billing database runs Postgres.", 0.6),
        candidate("when", "We migrated the billing database on 2026-03-02.", 0.5),
        candidate("sibling", "It took all of 2025 to plan.", 0.25, source="sibling", sibling_of="about"),
    )
    out, lent = lend_answer_type(found, "time", 0.5)
    # when: 0.5 + 0.5 x 0.5 = 0.75 overtakes about (0.6); the sibling states a year, but only episode
    # expansion brought it (no weighted rank): 0.25
    assert [(c.id, c.final_score) for c in out] == [
        ("when", pytest.approx(0.75)),
        ("about", pytest.approx(0.6)),
        ("sibling", pytest.approx(0.25)),
    ]
    assert lent == 1


def test_a_match_expansion_lifted_to_a_sibling_is_lent_too_but_never_past_its_source():
    found = (
        candidate("top", "The billing service moved to Postgres.", 0.6),
        candidate(
            "lifted", "We did it on a Sunday.", 0.3, source="sibling", sibling_of="top", weighted_rank=3
        ),
        candidate("brought", "It took all of 2025.", 0.3, source="sibling", sibling_of="top"),
        candidate("lifted_far", "Done in 2024.", 0.5, source="sibling", sibling_of="top", weighted_rank=1),
    )
    out, lent = lend_answer_type(found, "time", 0.5)
    finals = {c.id: c.final_score for c in out}
    # lifted: 0.3 + 0.5 x 0.3 = 0.45; lifted_far: 0.5 + 0.25 = 0.75, held at its source's 0.6
    assert finals == pytest.approx({"top": 0.6, "lifted": 0.45, "brought": 0.3, "lifted_far": 0.6})
    assert lent == 2


def test_the_loan_follows_the_memory_weighted_score():
    # another author's memory (attribution 0.7) whose weighted score is 0.3 x 0.7 = 0.21: lent 0.5 x 0.21
    found = (candidate("demoted", "Deployed at 10:00.", 0.21, attribution_factor=0.7),)
    out, _ = lend_answer_type(found, "time", 0.5)
    assert out[0].answer_type_bonus == pytest.approx(0.105)


def test_the_stage_lends_nothing_to_a_query_that_asks_for_no_answer_type():
    found = (candidate("a", "Deployed on 2026-03-02.", 0.4), candidate("b", "Deploys run nightly.", 0.5))
    stage = AnswerTypeStage(0.5)
    out = stage(request("deploy schedule"), found)
    assert out.candidates == found
    assert out.events == (AnswerTypeApplied(None, 0.5, 0),)
    asked = stage(request("When did we deploy?"), found)
    assert [c.id for c in asked.candidates] == ["a", "b"]  # 0.4 + 0.5 x 0.4 = 0.6 over 0.5
    assert asked.events == (AnswerTypeApplied("time", 0.5, 1),)


def test_a_weight_of_zero_turns_the_stage_off():
    found = (candidate("a", "Deployed on 2026-03-02.", 0.4), candidate("b", "Deploys run nightly.", 0.5))
    out = AnswerTypeStage(0.0)(request("When did we deploy?"), found)
    assert out.candidates == found
    assert out.events == (AnswerTypeApplied(None, 0.0, 0),)


def test_a_negative_weight_is_refused():
    with pytest.raises(ValueError, match="answer_type_weight must be 0 or more"):
        AnswerTypeStage(-0.1)
