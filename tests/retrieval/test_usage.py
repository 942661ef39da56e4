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
    said = "Ran make rollback ENV=prod (see ops/deploy.sh). Port 8080, Python 3.12, --force; e.g. blue-green, pool 20 in 2023"
    assert values(said) == {"env=prod", "ops/deploy.sh", "8080", "3.12", "--force"}


def test_a_value_of_the_memory_the_agent_wrote_means_it_used_the_memory():
    said = '{"command": "make rollback ENV=prod"}\nRolled back.'
    assert used_memories([ROLLBACK, SEARCH], said) == ["m_rollback"]


def test_a_value_the_query_already_held_tells_nothing():
    asked = ShownText("m_port", "The API listens on port 8080 behind nginx", "is the api on port 8080")
    # 8080 was the question's: writing it back is no sign the memory served.
    assert used_memories([asked], "Yes, the API is on 8080 behind nginx.") == []
    assert used_memories([asked], "Yes: curl http://localhost:8080/health answers behind nginx.") == []


def test_words_alone_never_name_a_memory():
    # Most of STAGING's words written back (database, sunday, night): measured and not kept, since a third
    # of what words named was not what served (docs/feedback.md). A value of it would.
    said = "Careful: the database is wiped on Sunday night, so seed it again on Monday."
    assert used_memories([STAGING, SEARCH], said) == []
    dated = ShownText(
        "m_reset", "The staging database resets at 23:00 every Sunday", "when does staging reset"
    )
    assert used_memories([dated], "It resets Sunday at 23:00.") == ["m_reset"]


def test_each_memory_once_in_the_order_shown():
    dated = ShownText(
        "m_reset", "The staging database resets at 23:00 every Sunday", "when does staging reset"
    )
    again = ShownText("m_rollback", ROLLBACK.content, "rollback command")
    said = "make rollback ENV=prod; the database resets at 23:00"
    assert used_memories([dated, ROLLBACK, again], said) == ["m_reset", "m_rollback"]


def test_slash_joined_words_and_brackets_end_tokens_as_words_do():
    said = "Use read/write and/or tcp/ip; see [runbook](https://wiki.example.com/rollback) and app.run(port=8080)."
    assert values(said) == {"https://wiki.example.com/rollback", "app.run", "port=8080"}
    assert values(r"C:\Users\me\app") == {r"c:\users\me\app"}
