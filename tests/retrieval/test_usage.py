"""Which shown memories an agent used (retrieval.usage): values and words it wrote, by hand."""

from retrieval.usage import ShownText, used_memories, values

ROLLBACK = ShownText(
    "m_rollback", "Roll back a bad deploy with make rollback ENV=prod", "how do I roll back a deploy"
)
SEARCH = ShownText(
    "m_search", "Product search uses OpenSearch for full-text queries", "how do I roll back a deploy"
)
STAGING = ShownText("m_staging", "The staging database resets every Sunday night", "when does staging reset")


def test_values_are_tokens_with_a_digit_a_flag_or_punctuation_that_joins_more_than_letters():
    said = "Ran make rollback ENV=prod (see ops/deploy.sh). Port 8080, Python 3.12, --force; e.g. blue-green, pool 20"
    assert values(said) == {"env=prod", "ops/deploy.sh", "8080", "3.12", "--force"}


def test_a_value_of_the_memory_the_agent_wrote_means_it_used_the_memory():
    said = '{"command": "make rollback ENV=prod"}\nRolled back.'
    assert used_memories([ROLLBACK, SEARCH], said) == ["m_rollback"]


def test_a_value_the_query_already_held_tells_nothing():
    asked = ShownText("m_port", "The API listens on port 8080 behind nginx", "is the api on port 8080")
    # 8080 was the question's: writing it back is no sign the memory served.
    assert used_memories([asked], "Yes, the API is on 8080.") == []
    # Its telling words are: listen, behind, nginx; two of them written back (2 >= half of 3) are.
    assert used_memories([asked], "Yes, the API is on 8080 behind nginx.") == ["m_port"]


def test_most_of_a_memorys_telling_words_written_back_mean_it_was_used():
    # Telling words of STAGING (not in its query): database, every, sunday, night (stemmed). The agent
    # wrote database, sunday and night: 3 >= 2, and 3 >= half of 4.
    said = "Careful: the database is wiped on Sunday night, so seed it again on Monday."
    assert used_memories([STAGING, SEARCH], said) == ["m_staging"]
    # The query's own words (staging, reset) never count: only one telling word is shared here.
    assert used_memories([STAGING], "The staging reset happens weekly, on Sunday.") == []


def test_a_short_answer_taken_from_one_memory_counts_by_the_agents_own_words():
    long_turn = ShownText(
        "m_turn",
        "I'm keen on continuing my education, exploring career options and looking into adoption agencies",
        "What did Caroline research?",
    )
    # The answer's two words are both in the memory: half of the agent's own words (2 of 2), though far
    # fewer than half of the memory's.
    assert used_memories([long_turn], "Adoption agencies") == ["m_turn"]
    assert used_memories([long_turn], "Agencies") == []  # one shared word is too few


def test_each_memory_once_in_the_order_shown():
    again = ShownText("m_rollback", ROLLBACK.content, "rollback command")
    assert used_memories(
        [STAGING, ROLLBACK, again], "make rollback ENV=prod; the database resets Sunday night"
    ) == [
        "m_staging",
        "m_rollback",
    ]
