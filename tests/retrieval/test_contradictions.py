from datetime import UTC, datetime, timedelta

import pytest

from retrieval.contradictions import (
    GAVE_UP_ANOTHER,
    MAY_BE_A_SERIES,
    MAY_HOLD_WHERE,
    NAMED_AS_GIVEN_UP,
    NOT_SAID_TO_CHANGE,
    SAID_OTHERWISE,
    SAYS_MORE,
    Contradiction,
    ContradictionInput,
    corrected_value_changes,
    detect_contradictions,
    held_values,
    is_value,
    joined_as_words,
    late_value_changes,
    may_restate_a_correction,
    named_value_changes,
    negating_clauses,
    now_value_changes,
    plain_command_changes,
    plain_value_changes,
    restated_correction,
    restates_given_up,
    said_command_changes,
    says_value_changed,
    shown_value,
    spelled_units,
    things_given_up,
    value_changes,
    value_said_now,
    values_replaced,
    without_correction_label,
    without_opener,
    written_out,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def memory(memory_id: str, text: str, minutes: int) -> ContradictionInput:
    return ContradictionInput(memory_id, text, T0 + timedelta(minutes=minutes))


def terms_of(found: Contradiction) -> tuple[str, str, str, str]:
    """A pair as the tests compare it: older id, newer id, older term, newer term."""
    return (found.older_id, found.newer_id, found.older_term, found.newer_term)


def test_opposite_claims_about_the_same_subject_are_found_older_first():
    found = detect_contradictions(
        [
            memory("new", "Feature flag checkout_v2 is disabled in staging", 5),
            memory("old", "Feature flag checkout_v2 is enabled in staging", 0),
        ]
    )
    assert [(c.older_id, c.newer_id, c.older_term, c.newer_term) for c in found] == [
        ("old", "new", "enabled", "disabled")
    ]
    assert found[0].subject_similarity == 1.0


def test_opposite_words_about_different_subjects_are_not_a_contradiction():
    assert (
        detect_contradictions(
            [
                memory("a", "Caching is enabled for search", 0),
                memory("b", "Logging is disabled for billing", 1),
            ]
        )
        == []
    )


def test_the_subject_overlap_threshold_is_a_jaccard_of_the_remaining_words():
    # subjects after dropping stop words and the opposition terms: {feature, flag, staging} vs {feature, flag, prod}
    # Jaccard = 2 / 4 = 0.5
    pair = [
        memory("a", "feature flag enabled in staging", 0),
        memory("b", "feature flag disabled in prod", 1),
    ]
    assert len(detect_contradictions(pair, threshold=0.5)) == 1
    assert detect_contradictions(pair, threshold=0.51) == []


def test_a_memory_stating_both_terms_is_ambiguous_and_skipped():
    both = [memory("a", "it was enabled then disabled", 0), memory("b", "it is disabled", 1)]
    assert detect_contradictions(both) == []


def test_a_negation_of_the_same_words_contradicts_them():
    found = detect_contradictions(
        [
            memory("old", "The on-call rotation is weekly; handover happens Monday 10:00", 0),
            memory("new", "The on-call rotation isn't weekly; handover happens Monday 10:00", 5),
            memory("other", "Handover notes are not kept in the wiki", 6),
        ]
    )
    assert [(c.older_id, c.newer_id, c.older_term, c.newer_term, c.subject_similarity) for c in found] == [
        ("old", "new", "(no negation)", "isn't", 1.0)
    ]


def test_a_clause_that_negates_the_same_words_contradicts_them_beside_another_clause():
    # A trial: "...; Bob is" added a word, {alice, call, engineer} against {alice, call, engineer, bob}
    # (3 / 4, below 0.8), and the stale fact stood unmarked. The negating clause alone says the same words.
    for said in (
        "Alice is no longer the on-call engineer; Bob is",
        "Alice is not the on-call engineer, but Bob is",
    ):
        found = detect_contradictions(
            [memory("old", "Alice is the on-call engineer", 0), memory("new", said, 5)]
        )
        assert [(c.older_id, c.newer_id, c.subject_similarity) for c in found] == [("old", "new", 1.0)]
    # A clause that narrows the older memory by a word ("without root") negates none of it (a review).
    for older_text, newer_text in (
        ("Use Docker for local development", "Use Docker for local development without root; CI uses Podman"),
        (
            "The API rate limit is 100 requests per minute",
            "The API rate limit is 100 requests per minute without an API key; with a key it is 1000",
        ),
    ):
        assert detect_contradictions([memory("old", older_text, 0), memory("new", newer_text, 5)]) == []
    # A clause that affirms is not judged alone: it negates nothing.
    other = [
        memory("old", "Bob is the on-call engineer", 0),
        memory("new", "Alice is not the lead; Bob is the on-call engineer", 5),
    ]
    assert detect_contradictions(other) == []


def test_a_thing_said_to_have_ended_contradicts_what_the_older_memory_allowed_of_it():
    # A trial: the newer decision was kept apart from what it ended, the older recalled first. What the older
    # allowed ("allowed") and its times of day ("until 15:00") are set aside; its other values are not.
    older = memory("old", "Deploys to production are allowed on Fridays until 15:00.", 0)
    ended = "After the refund incident we decided: no production deploys on Fridays anymore."
    found = detect_contradictions([older, memory("new", ended, 5)])
    # {deploy, production, friday} of {deploy, production, friday}
    assert [(c.older_id, c.newer_id, c.newer_term, c.subject_similarity) for c in found] == [
        ("old", "new", "no", 1.0)
    ]
    for newer_text in (
        "After the refund incident we decided: no production deploys on Mondays anymore.",  # another day
        "We decided: no staging deploys on Fridays anymore.",  # another thing
        "After the refund incident we decided: no production deploys on Fridays.",  # nothing said ended
    ):
        assert detect_contradictions([older, memory("new", newer_text, 5)]) == []
    # A review: a value that says which thing it is (a release, a ticket, a date: an event), or one of two
    # days, is not what the ending names; "any more" apart is a quantity.
    for older_text, newer_text in (
        ("Release 4.2 shipped on Friday.", "Releases no longer ship on Fridays."),
        ("Sprint 14 ends on Friday.", "Sprints don't end on Fridays anymore."),
        ("Ticket OPS-1234 is blocked by the VPN outage.", "Tickets are no longer blocked by the VPN outage."),
        ("The payments job crashed on 2026-11-02 at 03:00.", "The payments job no longer crashes."),
        ("SDK 2.3 supports Python 3.8 and 3.9.", "The SDK no longer supports Python 3.8."),
        (
            "Deploys to production are allowed on Fridays until 15:00 and on Saturdays until 12:00.",
            "No production deploys on Saturdays anymore.",
        ),
        ("We have 20 Jira licences.", "We don't have any more Jira licences."),
    ):
        assert detect_contradictions([memory("old", older_text, 0), memory("new", newer_text, 5)]) == []


def test_a_negation_that_shares_only_part_of_the_subject_is_no_contradiction():
    # {rotat, weekly} vs {rotat, handov, weekly}: 2 / 3, below the 0.8 a negation needs
    pair = [memory("a", "the rotation is weekly", 0), memory("b", "the rotation handover is not weekly", 1)]
    assert detect_contradictions(pair) == []
    # the same words, both negated, say the same thing, however many negating words each holds
    alike = [memory("a", "the rotation is not weekly", 0), memory("b", "the rotation is never weekly", 1)]
    assert detect_contradictions(alike) == []
    both = [
        memory("a", "Neither staging nor prod uses Redis", 0),
        memory("b", "Staging and prod do not use Redis", 1),
    ]
    assert detect_contradictions(both) == []
    numbered = [
        memory("a", "Ticket no. 42 tracks the outage", 0),
        memory("b", "Ticket 42 tracks the outage", 1),
    ]
    assert detect_contradictions(numbered) == []


def test_a_pass_over_a_whole_scope_leaves_negations_to_the_write_path():
    pair = [memory("a", "the rotation is weekly", 0), memory("b", "the rotation is not weekly", 1)]
    assert len(detect_contradictions(pair)) == 1
    assert detect_contradictions(pair, negations=False) == []


def test_a_value_changed_is_the_same_words_with_another_value_and_a_value_added_is_not():
    old = memory("old", "The API listens on port 8080", 0)
    [change] = value_changes(memory("new", "The API now listens on port 9090", 5), [old])
    # {api, listen, port} both ("now" is a function word): Jaccard 3 / 3.
    assert (change.older_id, change.newer_id, change.older_term, change.newer_term) == (
        "old",
        "new",
        "8080",
        "9090",
    )
    assert change.subject_similarity == 1.0
    # One more word: {api, listen, port} against {api, listen, port, public}, 3 / 4 < 0.8.
    assert value_changes(memory("public", "The public API listens on port 9090", 5), [old]) == []
    assert value_changes(memory("both", "The API listens on ports 8080 and 9090", 5), [old]) == []
    assert value_changes(memory("not", "The API does not listen on port 9090", 5), [old]) == []
    assert value_changes(memory("earlier", "The API listens on port 7070", -5), [old]) == []  # older
    assert value_changes(memory("also", "The API now also listens on port 9443", 5), [old]) == []  # adds
    # A number before the word of change names which thing is meant; a value needs a word of change.
    assert (
        value_changes(memory("pr", "PR 482 now passes CI", 5), [memory("pr1", "PR 481 passes CI", 0)]) == []
    )
    assert value_changes(memory("plain", "The API listens on port 9090", 5), [old]) == []
    # One word for another, without a digit: not for a rule to read as a change.
    lead = memory("lead", "Alice is the tech lead of the payments team", 0)
    assert value_changes(memory("bob", "Bob is now the tech lead of the payments team", 5), [lead]) == []


def test_a_value_named_as_given_up_says_in_words_that_it_changed():
    old = memory("old", "The API listens on port 8080", 0)
    for text in (
        "The API listens on port 9090, not 8080",
        "The API listens on port 9090 (not 8080)",
        "The API listens on port 9090 instead of port 8080",
        "The API listens on port 9090 rather than 8080",
        "Correction: the API listens on port 9090, not 8080",
    ):
        [change] = value_changes(memory("new", text, 5), [old])
        # {api, listen, port} on both sides once "not 8080" and the label are set aside: Jaccard 3 / 3.
        assert (change.older_term, change.newer_term, change.subject_similarity) == ("8080", "9090", 1.0)
        assert change.named_in_words
    # A dotted value is given up whole, and is one value: 3.11 then 3.12 (not "11" then "12").
    python = memory("py", "We use Python 3.11 for the CI image", 0)
    [dotted] = value_changes(memory("py2", "We use Python 3.12 for the CI image, not 3.11", 5), [python])
    assert (shown_value(dotted.older_term), shown_value(dotted.newer_term), dotted.named_in_words) == (
        "3.11",
        "3.12",
        True,
    )
    assert dotted.detail == "'3.11' then '3.12' (subject overlap 1.00)"

    # A label alone is no word of change: another build, not a new value of this one (a review's case).
    build = memory("b1", "Build 1234 failed on the linter", 0)
    assert value_changes(memory("b2", "Update: build 1235 failed on the linter", 5), [build]) == []
    assert value_changes(memory("label", "Correction: the API listens on port 9090", 5), [old]) == []
    # Without a word of change or a value given up: two facts; giving up another value: not this one.
    assert value_changes(memory("plain", "The API listens on port 9090", 5), [old]) == []
    [other] = value_changes(memory("other", "The API now listens on port 9090, not 7070", 5), [old])
    assert not other.named_in_words  # "now" finds the change; it names 7070, not 8080, as given up
    assert value_changes(memory("also", "The API also listens on port 9090, not 8080", 5), [old]) == []


def test_a_value_named_in_an_aside_as_what_it_was_is_given_up_in_words_too():
    """A trial: "9443 (changed from 8443)" kept the stale 8443 beside it, undisputed and first."""
    old = memory("old", "The payments API listens on port 8443 in staging", 0)
    for text in (
        "The payments API now listens on port 9443 in staging (changed from 8443)",
        "The payments API listens on port 9443 in staging, changed from 8443",
        "The payments API listens on port 9443 in staging, up from 8443",
        "The payments API now listens on port 9443 in staging (was 8443)",
    ):
        [change] = value_changes(memory("new", text, 5), [old])
        # {payments, api, listen, port, staging} on both sides once the aside is set aside: 5 / 5.
        assert (change.older_term, change.newer_term, change.subject_similarity) == ("8443", "9443", 1.0)
        assert change.named_in_words and change.covers_older
    # What it "was", with no other word of change, may be the one before it in a series: a dispute only.
    [was] = value_changes(
        memory("was", "The payments API listens on port 9443 in staging (was 8443)", 5), [old]
    )
    assert (was.named_in_words, was.only_disputes) == (True, MAY_BE_A_SERIES)
    # Not an aside: "was" in the sentence itself says what something was, not a value left behind.
    late = memory("late", "The staging deploy took 30 minutes", 0)
    assert value_changes(memory("was", "The staging deploy was 45 minutes late", 5), [late]) == []


def test_an_aside_naming_another_of_a_series_never_supersedes_it():
    """A review: "Incident 42 hit the payments API, previously incident 41" superseded incident 41."""
    for before, after in (
        ("Incident 41 hit the payments API", "Incident 42 hit the payments API, previously incident 41"),
        ("Build 1234 failed on main", "Build 1235 failed on main, previously build 1234"),
        ("Sprint 41 demo is on Friday", "Sprint 42 demo is on Friday, formerly sprint 41"),
        ("Build 1234 failed on main", "Build 1235 failed on main - was build 1234 yesterday"),
        ("The on-call for week 11 is Bob", "The on-call for week 12 is Dana, previously week 11 was Bob"),
    ):
        assert value_changes(memory("new", after, 5), [memory("old", before, 0)]) == []
    # The value right after "previously" is read, and a series' number only disputes.
    [series] = value_changes(
        memory("new", "Build 1235 failed on main, previously 1234", 5),
        [memory("old", "Build 1234 failed on main", 0)],
    )
    assert not series.covers_older


def test_a_value_remembered_late_is_the_older_of_a_pair_that_reads_as_a_change_either_way():
    later = memory("later", "The search cluster runs 6 data nodes", 10)
    said_now = memory("imported", "The search cluster now runs 4 data nodes", 5)
    [pair] = late_value_changes(said_now, [later])
    # {search, cluster, run, data, node} on both sides: 5 / 5; the imported one is the older.
    assert (pair.older_id, pair.newer_id, pair.older_term, pair.newer_term) == ("imported", "later", "4", "6")
    assert pair.subject_similarity == 1.0
    plain = memory("plain", "The search cluster runs 4 data nodes", 5)
    changed = memory("changed", "The search cluster now runs 6 data nodes", 10)
    [other_way] = late_value_changes(plain, [changed])
    assert (other_way.older_id, other_way.newer_id) == ("plain", "changed")
    # Two plain values, no word of change on either side, after "runs": disputed, as in date order.
    [plain_pair] = late_value_changes(plain, [later])
    assert (plain_pair.older_id, plain_pair.only_disputes) == ("plain", NOT_SAID_TO_CHANGE)
    series = memory("series", "Build 1234 failed on the linter", 5)
    assert late_value_changes(series, [memory("next", "Build 1235 failed on the linter", 10)]) == []


def test_two_parts_in_each_others_place_contradict_the_older_statement():
    found = detect_contradictions(
        [
            memory("old", "Deploys are allowed on Monday but not on Friday", 0),
            memory("new", "Deploys are allowed on Friday but not on Monday", 5),
            memory("same", "On Monday but not on Friday deploys are allowed", 9),  # reordered, no swap
            memory("copula", "The staging database is Postgres 15", 1),
            memory("copula2", "Postgres 15 is the staging database", 2),
        ],
        swaps_of="new",
    )
    assert [(c.older_id, c.newer_id, c.older_term, c.newer_term) for c in found] == [
        ("old", "new", "monday ... friday", "friday ... monday")
    ]


def test_the_days_and_months_by_name_are_values_as_numbers_are():
    reset = memory("old", "The staging database is reset every Sunday night", 0)
    [change] = value_changes(
        memory("new", "The staging database is now reset every Saturday night", 5), [reset]
    )
    # {stag, database, reset, every, night} on both sides once the days are set aside: Jaccard 5 / 5.
    assert (change.older_term, change.newer_term, change.subject_similarity) == ("sunday", "saturday", 1.0)
    assert not change.named_in_words
    offsite = memory("march", "The offsite is planned for March", 0)
    [given_up] = value_changes(memory("april", "The offsite is planned for April, not March", 5), [offsite])
    assert (given_up.older_term, given_up.newer_term, given_up.named_in_words) == ("march", "april", True)
    # As with numbers: without a word of change two facts, and a day added replaces none.
    assert (
        value_changes(memory("plain", "The staging database is reset every Saturday night", 5), [reset]) == []
    )
    retro = memory("fri", "The retro is every Friday", 0)
    assert value_changes(memory("mon", "The retro is now also every Monday", 5), [retro]) == []
    # "May" is a modal verb far more often than a month: no value.
    assert [is_value(word) for word in ("may", "march", "mondays", "v2", "night")] == [
        False,
        True,
        True,
        True,
        False,
    ]


def test_a_day_said_to_be_changed_to_is_a_value_change_in_words():
    assert says_value_changed("The weekly standup moved to Thursday at 9:30", ["thursday"])
    assert says_value_changed("The release was moved from Monday to Wednesdays", ["wednesday"])
    assert not says_value_changed("The standup moved to the big room on Thursday", ["thursday"])


def test_what_changed_and_the_values_name_may_stand_around_the_to_of_a_value_change():
    said = "We upgraded the main application database to Postgres 16 last week."
    assert says_value_changed(said, ["16"])
    # A time of day is one value (its colon joined as a letter), as a change of it reads it.
    assert says_value_changed("We moved the weekly standup to 10:30", [joined_as_words("10:30")])
    assert not says_value_changed("We moved the standup notes into the wiki, 3 pages", ["3"])
    # When it changed is not what it is about, nor the verb of what the database does with its value:
    # {main, application, database, postgre} on both sides, 4 / 4 = 1.0 (with "last week" 4 / 6).
    older = memory("old", "We use Postgres 14 for the main application database.", 0)
    [change] = value_changes(memory("new", said, 5), [older])
    assert (change.older_term, change.newer_term, change.subject_similarity) == ("14", "16", 1.0)


def test_a_new_value_said_of_less_than_the_older_memory_says_only_disputes_it():
    # A second trial: "The api-gateway metrics port changed to 9200" superseded the memory below, and with it
    # Prometheus and the path. {api, gateway, metric, port} against those and {prometheu}: 4 / 5 = 0.8 (the
    # path "/metrics" reads as "metric"), a value change; the older names Prometheus and a path the newer
    # does not say, so the two stay, the older disputed.
    metrics = memory("old", "api-gateway exposes Prometheus metrics on port 9102 at /metrics.", 0)
    [change] = value_changes(memory("new", "The api-gateway metrics port changed to 9200.", 5), [metrics])
    assert (change.older_term, change.newer_term, change.subject_similarity) == ("9102", "9200", 0.8)
    assert change.only_disputes == SAYS_MORE and not change.covers_older
    # The same words without the name and the path: a revision.
    plain = memory("old", "api-gateway exposes its metrics on port 9102.", 0)
    [change] = value_changes(memory("new", "The api-gateway metrics port changed to 9200.", 5), [plain])
    assert change.only_disputes is None
    # Naming the value it replaces revises, however much the older says.
    [change] = value_changes(
        memory("new", "The api-gateway metrics port changed to 9200, not 9102.", 5), [metrics]
    )
    assert change.named_in_words and change.only_disputes is None
    # A path the newer memory says as well is no more (a review found any path kept the pair disputed).
    [change] = value_changes(
        memory("new", "The api-gateway now exposes Prometheus metrics on port 9200 at /metrics", 5), [metrics]
    )
    assert change.only_disputes is None
    # A name the newer memory says too is no more ("Redis", "TTL" below), nor a day: a value.
    day = memory("old", "Sprint planning happens on Monday at 10:00", 0)
    [change] = value_changes(memory("new", "Sprint planning is on Tuesday at 11:00 now", 5), [day])
    assert change.only_disputes is None


def test_why_or_when_a_value_changed_is_not_what_the_value_is_of():
    ttl = memory("old", "The catalog service caches product pages in Redis with a TTL of 300 seconds", 0)
    because = (
        "The catalog service Redis TTL for product pages was lowered to 60 seconds because prices went stale"
    )
    [change] = value_changes(memory("new", because, 5), [ttl])
    # {catalog, service, redi, ttl, product, page, second} against those and {cache}: 7 / 8, once "because
    # prices went stale" is set aside (with it, 7 / 10 < 0.8).
    assert (change.older_term, change.newer_term, change.subject_similarity) == ("300", "60", 0.875)
    assert change.covers_older and not change.named_in_words
    # "After ..." may say why or where the value holds: set aside too, but the pair only disputes.
    after = (
        "The catalog service Redis TTL for product pages was lowered to 60 seconds after the pricing incident"
    )
    [disputed] = value_changes(memory("after", after, 5), [ttl])
    assert (disputed.older_term, disputed.newer_term, disputed.covers_older) == ("300", "60", False)
    # "When ..." says where the value holds: kept in the words compared (a review's case).
    limit = memory("l1", "The public API rate limit is 100 requests per minute", 0)
    enterprise = "The public API rate limit was raised to 1000 requests per minute when the caller has an enterprise key"
    assert value_changes(memory("l2", enterprise, 5), [limit]) == []
    # A value said after such a word is still the value: the clause is cut only after the new value.
    retry = memory("r1", "The retry happens after 10 seconds", 0)
    [later] = value_changes(memory("r2", "The retry now happens after 30 seconds", 5), [retry])
    assert (later.older_term, later.newer_term, later.subject_similarity) == ("10", "30", 1.0)
    assert later.covers_older


def test_a_value_named_as_changed_from_disputes_an_older_memory_that_says_more():
    compose = memory(
        "old",
        "The billing-api service listens on port 8081 inside its container; docker-compose maps it to 18081 "
        "on the host for local development",
        0,
    )
    newer = "The billing-api docker-compose host port was changed from 18081 to 18082 because 18081 clashed"
    [change] = value_changes(memory("new", newer, 5), [compose])
    # {billing, api, docker, compose, host, port}: every word of the newer subject is in the older memory.
    assert (change.older_term, change.newer_term) == ("18081", "18082")
    assert change.named_in_words and not change.covers_older
    # The same words as the older memory but for the value: it covers it, and names the value it replaces.
    port = memory("p1", "The API listens on port 8080", 0)
    [whole] = value_changes(memory("p2", "The API listen port was changed from 8080 to 9090", 5), [port])
    assert (whole.older_term, whole.newer_term, whole.named_in_words, whole.covers_older) == (
        "8080",
        "9090",
        True,
        True,
    )
    # A value the older memory does not hold names another thing; a thing of its own ("admin") too.
    assert value_changes(memory("other", "The API port was changed from 7070 to 9090", 5), [port]) == []
    admin = "The admin console was changed from 18081 to 18082 after a clash"
    assert value_changes(memory("admin", admin, 5), [compose]) == []


def test_a_range_is_no_value_given_up_and_a_value_replaces_only_one_of_its_kind():
    # A review's cases: "now from 09:00 to 18:00" gave up 09:00 in words; a month was replaced by a time.
    hours = memory("h1", "Support hours are from 09:00 to 17:00 on weekdays", 0)
    [change] = value_changes(
        memory("h2", "Support hours are now from 09:00 to 18:00 on weekdays", 5), [hours]
    )
    assert (shown_value(change.older_term), shown_value(change.newer_term), change.named_in_words) == (
        "17:00",
        "18:00",
        False,
    )
    freeze = memory("f1", "The release freeze is in December", 0)
    assert value_changes(memory("f2", "The release freeze was moved to 17:00", 5), [freeze]) == []


def test_long_words_and_long_runs_of_spaces_are_read_in_linear_time():
    import time

    old = memory("old", "The API listens on port 8080", 0)
    for text in (
        "The API now listens on " + "a" * 100_000,
        "The API now " + " " * 100_000 + "x",
        "The API listens on 9090" + " -" * 50_000 + " was",
    ):
        started = time.perf_counter()
        value_changes(memory("new", text, 5), [old])
        assert time.perf_counter() - started < 1.0  # seconds, where a quadratic scan took minutes


def test_a_value_said_again_after_its_correction_is_disputed_by_the_correction():
    """A trial: "Billing service listens on port 8081" (the old text but for "The") after 8081 was
    corrected to 9090 stood beside the correction undisputed, and was recalled first."""
    replaced = memory("m1", "The billing service listens on port 8081", 0)
    current = memory("m2", "The billing service listens on port 9090", 1)
    again = memory("m3", "Billing service listens on port 8081", 2)
    assert may_restate_a_correction(again, current)
    found = restated_correction(again, current, [replaced])
    # What they are about, linking words left out: {billing, service, port} on all three, 1.0 >= 0.5.
    assert found is not None
    assert terms_of(found) == ("m3", "m2", "8081", "9090")
    assert found.subject_similarity == 1.0 and not found.named_in_words
    # A correction corrected again (8081 -> 9090 -> 7070): what it replaced through the other counts too.
    latest = memory("m4", "The billing service listens on port 7070", 3)
    assert restated_correction(again, latest, [current, replaced]) is not None


def test_a_value_no_correction_replaced_or_said_of_another_thing_is_no_restated_correction():
    """A review: at half of the subject in common, another server's port 8080 read as the API's corrected one,
    and the new, true memory was the one marked disputed."""
    replaced = memory("m1", "The API server listens on port 8080", 0)
    current = memory("m2", "The API server listens on port 9090", 1)
    # Another server: {metrics, server, listen, port} shares 3 of 5 words with either, 0.6 < 0.8.
    assert (
        restated_correction(memory("m3", "The metrics server listens on port 8080", 2), current, [replaced])
        is None
    )
    # Nothing the current memory replaced held 8080.
    assert restated_correction(memory("m3", "The API server listens on port 8080", 2), current, []) is None
    other = memory("m1", "The API server listens on port 7070", 0)
    assert (
        restated_correction(memory("m3", "The API server listens on port 8080", 2), current, [other]) is None
    )
    # It names the correction's value too ("9090, not 8080"): it says what the correction says.
    assert (
        restated_correction(memory("m3", "API server port 9090 replaced 8080", 2), current, [replaced])
        is None
    )
    # A value of its own that neither holds says which thing or when (a second review).
    for text in [
        "The API server in us-east-1 listens on port 8080",
        "The API server listened on port 8080 until 2025-06-01",
    ]:
        assert restated_correction(memory("m3", text, 2), current, [replaced]) is None, text
    # It negates where they do not.
    assert (
        restated_correction(memory("m3", "The API server never listens on port 8080", 2), current, [replaced])
        is None
    )


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("The billing-api does not listen on port 8081 anymore; it listens on 8085.", {"8085"}),
        ("The billing-api listens on 8085, not 8081.", {"8085"}),
        ("Moved the billing-api from port 8081 to 8085.", {"8085"}),
        ("Port 8081 is no longer used. The billing-api listens on 8085.", {"8085"}),
        ("The billing-api listens on 8081 and the admin UI on 8443.", {"8081", "8443"}),
        ("The billing-api no longer listens on 8081.", set()),
        # A review: dotted values move too; a range or a route is no change; an aside or "and" parts
        # statements; "without" negates no value.
        ("The API server moved from 10.0.0.5 to 10.0.0.6.", {"10ǁ0ǁ0ǁ6"}),
        ("The firewall allows ports from 8000 to 8100.", {"8000", "8100"}),
        ("The proxy forwards requests from port 8090 to port 9090.", {"8090", "9090"}),
        ("search-indexer is now on 9090 (8090 is no longer used)", {"9090"}),
        ("search-indexer is now on 9090, and port 8090 is no longer used", {"9090"}),
        ("The billing-api listens on port 8085 without TLS.", {"8085"}),
    ],
)
def test_the_values_a_memory_holds_leave_out_those_it_negates_or_moves_from(text, held):
    assert held_values(text) == held


def test_a_correction_said_as_a_negation_finds_the_old_value_said_again_in_other_words():
    """A new user's trial: "billing-api runs on port 8081 (HTTP)", kept beside the memory a correction
    revised, stood undisputed above the correction. The correction holds 8085 only (8081 is in its negated
    clause); what the two are about, linking words ("runs", "listens") left out: {bill, api, http, port} and
    {bill, api, service, port}, 3 of 5 = 0.6 >= 0.5; before 8081 each names {bill, api, port} and
    {bill, api, service, port}: each of its words is one the replaced memory names there."""
    replaced = memory("m1", "The billing-api service listens on port 8081.", 0)
    current = memory(
        "m3", "The billing-api service does not listen on port 8081 anymore; it listens on 8085.", 2
    )
    again = memory("m2", "billing-api runs on port 8081 (HTTP).", 1)
    assert may_restate_a_correction(again, current)
    found = restated_correction(again, current, [replaced])
    assert found is not None
    assert terms_of(found) == ("m2", "m3", "8081", "8085")
    assert found.subject_similarity == 0.6
    # Another thing of the same kind: what they are about, {bill, api, metric, exporter, port}, overlaps by 3 of 6
    # = 0.5, but before 8081 it names "metric" and "exporter", which neither the replaced memory nor the
    # correction names.
    other = memory("m2", "The billing-api metrics exporter runs on port 8081.", 1)
    assert restated_correction(other, current, [replaced]) is None
    # A review: before 8081, each word must be one the replaced memory or the correction names: "admin" is
    # neither's, so the admin service is another thing.
    other = memory("m2", "The billing-api admin service listens on port 8081.", 1)
    assert restated_correction(other, current, [replaced]) is None


def test_values_named_as_given_up_with_another_held_in_their_place_are_replaced():
    """A new user's trial: "search-indexer now listens on port 9090; port 8090 is no longer used" only
    disputed "The search-indexer service listens on port 8090". What they are about, negations and linking
    words left out: {search, indexer, service, port} and {search, indexer, port}, 3 of 4 = 0.75."""
    older = memory("m1", "The search-indexer service listens on port 8090.", 0)
    newer = memory("m2", "search-indexer now listens on port 9090; port 8090 is no longer used.", 1)
    found = values_replaced(older, newer)
    assert found is not None
    assert (found.older_term, found.newer_term, found.subject_similarity) == ("8090", "9090", 0.75)
    assert found.named_in_words and found.only_disputes is None
    for text in [
        "The search-indexer service listens on port 8090 with 4 workers.",  # a value the newer does not name
        "The search-indexer service listens on port 8090 behind the nginx proxy.",  # 3 of 7: says more
        "The metrics service listens on port 8090.",  # another thing's port: 1 of 5
        "The search-indexer service does not listen on port 8090.",  # negates
    ]:
        assert values_replaced(memory("m1", text, 0), newer) is None, text
    # A review: a new value of a part of the thing ("metrics", "lint job") replaces nothing of the whole.
    for older_text, newer_text in [
        (
            "search-indexer listens on port 8090.",
            "search-indexer metrics now listen on port 9090; port 8090 is no longer used by metrics.",
        ),
        ("CI uses Node 18.", "CI lint job now uses Node 20; Node 18 is no longer used by lint."),
        ("The firewall allows port 8000.", "The firewall allows ports from 8000 to 8100."),  # a range
    ]:
        assert values_replaced(memory("m1", older_text, 0), memory("m2", newer_text, 1)) is None, newer_text
    # It names the old value but does not hold another in its place.
    assert values_replaced(older, memory("m2", "search-indexer no longer listens on port 8090.", 1)) is None


def test_a_new_value_said_now_of_the_thing_an_older_memory_names_disputes_it_when_it_says_more():
    """A new user's trial: "Grafana now listens on port 9090" left "Grafana listens on port 3000 on
    grafana.kestrel.internal" active, unmarked and recalled first. Before the values: {grafana, port} in
    both; what the newer is about, {grafana, port}, all in the older's {grafana, port, kestrel, internal}:
    2 of 4 = 0.5."""
    older = memory("m1", "Grafana listens on port 3000 on grafana.kestrel.internal.", 0)
    found = value_said_now(older, memory("m2", "Grafana now listens on port 9090.", 1))
    assert found is not None
    assert terms_of(found) == ("m1", "m2", "3000", "9090")
    assert found.subject_similarity == 0.5 and found.only_disputes == SAYS_MORE
    # A label says it changed as well: {api, gateway, port} before each value, 1.0.
    port = memory("m1", "The api-gateway listens on port 8080.", 0)
    labelled = value_said_now(port, memory("m2", "Update: api-gateway port is 9090.", 1))
    assert labelled is not None and labelled.subject_similarity == 1.0
    # A second trial: the older names the relay after more words, and its host's name after it. Before the
    # values, {smtp, relay, port} and {outgoing, mail, sent, smtp, relay, mail-relay.kestrel.internal, port}:
    # from "smtp" on, only the host's name is more. About: {smtp, relay, port} of those 7 (with "through").
    smtp = memory(
        "m1", "Outgoing mail is sent through the SMTP relay mail-relay.kestrel.internal on port 587.", 0
    )
    relay = value_said_now(smtp, memory("m2", "The SMTP relay now uses port 2525.", 1))
    assert relay is not None and terms_of(relay) == ("m1", "m2", "587", "2525")
    assert relay.only_disputes == SAYS_MORE
    # A review: a dotted name both say before the value names the thing in both.
    for older_text, newer_text in [
        (
            "The settings.py file sets the DB pool size to 10, tuned by Alice",
            "The settings.py file now sets the DB pool size to 20",
        ),
        (
            "Grafana on grafana.kestrel.internal listens on port 3000 behind Traefik",
            "Grafana on grafana.kestrel.internal now listens on port 9090",
        ),
    ]:
        assert value_said_now(memory("m1", older_text, 0), memory("m2", newer_text, 1)) is not None, (
            newer_text
        )
    for older_text, newer_text in [
        (
            "Outgoing mail is sent through the SMTP relay backup node on port 587.",
            "The SMTP relay now uses port 2525.",
        ),  # another word between the thing and its value: a part of it
        ("The metrics server listens on port 8080.", "The server now listens on port 9090."),  # a kind of it
        (
            "The api-gateway exposes metrics on port 9102.",
            "The api-gateway now listens on port 9090.",
        ),  # a part
        ("The metrics server listens on port 8080.", "The API server now listens on port 9090."),  # another
        ("Grafana listens on port 3000.", "Grafana now also listens on port 3443."),  # one added
        (
            "Grafana listens on port 3000 on grafana.kestrel.internal.",
            "Grafana now listens on 9090 for the admin UI.",
        ),
        ("The deploy took 10 minutes.", "Now it takes 4 minutes."),  # fewer than two words name the thing
    ]:
        assert value_said_now(memory("m1", older_text, 0), memory("m2", newer_text, 1)) is None, newer_text


def test_the_look_before_reading_what_a_memory_replaced_needs_another_value_of_one_kind():
    current = memory("m2", "The standup is at 9:30", 1)
    assert may_restate_a_correction(memory("m3", "Our standup starts at 10:00", 2), current)
    assert not may_restate_a_correction(memory("m3", "The standup is on Monday", 2), current)  # a day, a time
    assert not may_restate_a_correction(memory("m3", "Our standup starts at 9:30", 2), current)  # same value
    assert not may_restate_a_correction(memory("m3", "The deploy took 10 minutes", 2), current)  # no subject


def test_a_value_joined_by_hyphens_dots_or_slashes_is_one_value():
    """A trial: "Our primary AWS region is now eu-west-1" after "...is us-east-1" was kept as another fact
    ("us" a stop word, the rest split at the hyphens: {east, 1} against {eu, west, 1}, no value of its own)."""
    region = memory("r1", "Our primary AWS region is us-east-1", 0)
    [moved] = value_changes(memory("r2", "Our primary AWS region is now eu-west-1", 5), [region])
    # {primary, aws, region} on both sides once the values and "now" are set aside: Jaccard 3 / 3.
    assert (shown_value(moved.older_term), shown_value(moved.newer_term)) == ("us-east-1", "eu-west-1")
    assert moved.subject_similarity == 1.0 and not moved.named_in_words
    backup = memory("b1", "Our backup AWS region is us-west-2", 0)
    [named] = value_changes(memory("b2", "Our backup AWS region is eu-central-1, not us-west-2", 5), [backup])
    assert named.named_in_words and named.detail == "'us-west-2' then 'eu-central-1' (subject overlap 1.00)"
    # A decimal is one value too: "1.5" then "15" is a change (its digits alone would read the same).
    assert value_changes(
        memory("t2", "The timeout is now 15 seconds", 5), [memory("t1", "The timeout is 1.5 seconds", 0)]
    )


def test_a_joined_name_beside_another_changed_value_names_another_thing():
    """A review: once "prod-1" was one value, "We now run Postgres 16 on prod-1" read as a new value of "We
    run Postgres 14 on staging-2" and superseded it; alone, a joined name is the value that changed."""
    for older, newer in [
        ("We run Postgres 14 on staging-2", "We now run Postgres 16 on prod-1"),
        ("The cluster runs 4 nodes in k8s-prod", "The cluster now runs 6 nodes in k8s-staging"),
        ("We deploy the eu-west-1 stack on Tuesday", "We now deploy the us-east-1 stack on Thursday"),
    ]:
        assert value_changes(memory("b", newer, 5), [memory("a", older, 0)]) == []
    [host] = value_changes(
        memory("b", "The cache host is now cache-2", 5), [memory("a", "The cache host is cache-1", 0)]
    )
    assert host.detail == "'cache-1' then 'cache-2' (subject overlap 1.00)"


def test_a_joined_value_whose_letters_its_counterpart_shares_is_a_value_and_a_name_given_up_is_a_change():
    """A second review: units and version suffixes ("1.5s", "3.11-slim", "db-1") beside another changed value
    read as names, and real changes were dropped; so was one that names the old name as given up."""
    for older, newer in [
        ("Timeout is 1.5s with 3 retries", "Timeout is now 2.5s with 5 retries"),
        (
            "The CI image is python 3.11-slim with Node 18",
            "The CI image is now python 3.12-slim with Node 20",
        ),
        ("The app runs v1.4.2 with 3 replicas", "The app now runs v1.5.0 with 5 replicas"),
        ("The database is db-1 on port 5432", "The database is now db-2 on port 5433"),
        (
            "Primary region us-east-1, failover us-west-2",
            "Primary region now eu-west-1, failover eu-central-1",
        ),
        ("The DB is db-1 on port 5432", "Correction: the DB is staging-2 on port 5433, not db-1 on 5432"),
    ]:
        assert value_changes(memory("b", newer, 5), [memory("a", older, 0)]), newer


def test_the_same_words_with_one_value_in_its_place_after_what_a_thing_is_or_uses_only_dispute():
    """A trial: "uses Node 18" then "uses Node 20" stood as two facts, the older recalled first."""
    old = memory("old", "The frontend build uses Node 18", 0)
    [change] = plain_value_changes(memory("new", "The frontend build uses Node 20", 5), [old])
    assert (change.older_id, change.newer_id, change.older_term, change.newer_term) == (
        "old",
        "new",
        "18",
        "20",
    )
    assert (
        change.only_disputes == NOT_SAID_TO_CHANGE and not change.named_in_words and not change.covers_older
    )
    region = memory("region", "Our primary AWS region is us-east-1", 0)
    [joined] = plain_value_changes(memory("eu", "Our primary AWS region is eu-west-1", 5), [region])
    assert shown_value(joined.older_term) == "us-east-1"
    later = memory("later", "The frontend build uses Node 20", 5)
    assert plain_value_changes(memory("older", "The frontend build uses Node 16", 0), [later]) == []
    # Remembered late (dated before a memory already stored): it arrives disputed, the older of the pair.
    [late] = late_value_changes(memory("older", "The frontend build uses Node 16", 0), [later])
    assert (late.older_id, late.newer_id, late.only_disputes) == ("older", "later", NOT_SAID_TO_CHANGE)
    for text, older_text in [
        ("Sprint 15 ends on Friday", "Sprint 14 ends on Friday"),  # the value names which sprint
        ("Build 1235 failed in CI", "Build 1234 failed in CI"),
        ("We deployed version 2.4 on Monday", "We deployed version 2.3 on Monday"),
        ("The reviewer raised 2 concerns on PR 14", "The reviewer raised 3 concerns on PR 12"),  # two values
        ("The frontend build also uses Node 20", "The frontend build uses Node 18"),  # one more
        ("The frontend build does not use Node 20", "The frontend build uses Node 18"),  # a denial
        ("The frontend build uses Node 20 and npm", "The frontend build uses Node 18"),  # other words too
        ("Postgres 16 runs on prod-1", "Postgres 14 runs on staging-2"),  # another place
        ("The frontend build now uses Node 20", "The frontend build uses Node 18"),  # value_changes's to read
        # A review's pairs: events on two days, two of a series, one value for two subjects, a test matrix.
        ("Deploy failed on Thursday", "Deploy failed on Tuesday"),
        ("I went running on Thursday", "I went running on Monday"),
        ("Alice is out of office on Friday", "Alice is out of office on Monday"),
        (
            "Caroline went to the support group on 20 May 2023",
            "Caroline went to the support group on 7 May 2023",
        ),
        ("Fixed the null pointer bug in issue 456", "Fixed the null pointer bug in issue 123"),
        ("CI runs the tests on Python 3.12", "CI runs the tests on Python 3.11"),
        ("Disk usage on db-2 is at 90%", "Disk usage on db-1 is at 90%"),
        ("Tom joined the team in 2022", "Tom joined the team in 2021"),
        ("He is 35 years old", "She is 34 years old"),
        ("They use Node 20 for the frontend", "We use Node 18 for the frontend"),
        ("The API listens on port 9090 after the proxy", "The API listens on port 8080 before the proxy"),
        ("Opened port 9090 in the firewall", "Opened port 8080 in the firewall"),  # two events
        ("Released version 1.3 to the beta users", "Released version 1.2 to the beta users"),
        # A review: "is" somewhere before says nothing of what the port or version is of.
        ("This is a breaking change in version 3.0", "This is a breaking change in version 2.0"),
        ("The test is flaky on port 9090", "The test is flaky on port 8080"),
    ]:
        assert plain_value_changes(memory("new", text, 5), [memory("old", older_text, 0)]) == [], text


@pytest.mark.parametrize(
    ("older_text", "newer_text", "older_term", "newer_term"),
    [
        # A new user's trial: each pair stood as two facts, the older often recalled first.
        (
            "The on-call handoff happens Monday at 10:00 CET.",
            "The on-call handoff happens Tuesday at 10:00 CET.",
            "monday",
            "tuesday",
        ),
        (
            "The payments service is owned by Carla Reyes.",
            "The payments service is owned by Dmitri Volkov.",
            "carla reyes",
            "dmitri volkov",
        ),
        (
            "Our primary database for payments is PostgreSQL.",
            "Our primary database for payments is MySQL.",
            "postgres",
            "mysql",
        ),
        ("The weekly sync starts at 9am", "The weekly sync starts at 10am", "9am", "10am"),
        # A trial planted a port the verb is four words away from; a value right after "port" or "version"
        # is the one that word names.
        (
            "The staging database runs postgres 16 on port 5432",
            "The staging database runs postgres 16 on port 6543",
            "5432",
            "6543",
        ),
        (
            "Staging runs the postgres database version 15",
            "Staging runs the postgres database version 16",
            "15",
            "16",
        ),
        # A team's trial: two agents' hosts and owners stood undisputed, the one folded into the other.
        (
            "The nightly search indexer job runs on host ash.internal with the default settings",
            "The nightly search indexer job runs on host oak.internal with the default settings",
            "ash.internal",
            "oak.internal",
        ),
        ("The wiki lives at wiki.acme.io", "The wiki lives at docs.acme.io", "wiki.acme.io", "docs.acme.io"),
        (
            "The billing reconciliation cron is owned by Priya and pages the payments channel when it fails",
            "The billing reconciliation cron is owned by Marco and pages the payments channel when it fails",
            "priya",
            "marco",
        ),
    ],
)
def test_a_day_after_a_word_of_when_or_a_name_in_a_values_place_disputes_too(
    older_text, newer_text, older_term, newer_term
):
    [change] = plain_value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (change.older_id, change.newer_id, change.older_term, change.newer_term) == (
        "old",
        "new",
        older_term,
        newer_term,
    )
    assert change.only_disputes == NOT_SAID_TO_CHANGE


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        ("Alice uses vim for the backend", "Bob uses vim for the backend"),  # a name as the subject
        ("That is awesome, Caroline", "That is awesome, Melanie"),  # said to two people
        ("Thanks, Caroline, see you Friday", "Thanks, Melanie, see you Friday"),
        ("The payments service is owned by Carla Reyes", "The payments service is owned by Carla Diaz"),
        ("The team is led by Ana", "The team is led by Ben Ortiz"),  # other words in number: read elsewhere
        ("Our primary database is Postgres", "Our primary database is PostgreSQL"),  # one name written out
        # A review: verbs that take several names, approvals, a name that is not the memory's last word, a
        # denial, a value in either name, and "every", which says one habit of several.
        ("The backend uses Redis", "The backend uses Kafka"),
        ("The deploy requires Docker", "The deploy requires Terraform"),
        ("The CI uses GitHub Actions", "The CI uses GitLab CI"),
        ("The PR was approved by Alice", "The PR was approved by Bob"),
        ("The user is a Python developer", "The user is a Go developer"),
        ("Caroline is Melanie's friend", "Caroline is Jon's friend"),
        ("The database is not PostgreSQL", "The database is not MySQL"),
        ("The build uses Python3", "The build uses Python"),
        ("User goes to the gym every Monday", "User goes to the gym every Wednesday"),
        ("Office is closed every Friday in August", "Office is closed every Friday in July"),
        ("Melanie ran a 5k every weekend in 2022", "Melanie ran a 5k every weekend in 2023"),
        ("The database is postgres", "The database is mysql"),  # no capitals: no names to tell
        # (a team's name before "team" is one: test_a_team_named_in_lower_case_is_an_owner_in_its_place)
        # identifiers a thing uses (several), not where it is
        ("The backend uses cache.internal", "The backend uses db.internal"),
        ("Alerts go to ops@acme.io", "Alerts go to dev@acme.io"),
    ],
)
def test_a_name_elsewhere_or_in_part_or_in_lower_case_disputes_nothing(older_text, newer_text):
    assert plain_value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


def test_a_value_said_again_with_a_word_that_hands_it_over_or_vouches_for_it_still_disputes():
    """A trial planted a conflicting port unmarked by adding "FYI", "(checked)" or writing "prod"."""
    old = memory("old", "The production Postgres database listens on port 5432", 0)
    for text in (
        "FYI the production Postgres database listens on port 6543",
        "Heads up: the production Postgres database listens on port 6543",
        "The production Postgres database listens on port 6543 (checked)",
        "The prod Postgres database listens on port 6543",
        "Production PostgreSQL database listens on port 6543",
    ):
        [change] = plain_value_changes(memory("new", text, 5), [old])
        assert (change.older_term, change.newer_term, change.only_disputes) == (
            "5432",
            "6543",
            NOT_SAID_TO_CHANGE,
        )
    for text in (
        "The staging Postgres database listens on port 6543",  # another database
        "The production Postgres database listens on port 6543 (staging)",  # where it holds
        "The production Postgres replica listens on port 6543",
    ):
        assert plain_value_changes(memory("new", text, 5), [old]) == [], text
    bookings = memory(
        "old", "Bookings are held for 24 hours", 0
    )  # "Confirmed" says which bookings (a review)
    assert plain_value_changes(memory("new", "Confirmed bookings are held for 48 hours", 5), [bookings]) == []


def test_a_value_migrated_off_is_named_as_given_up():
    """A trial: another agent's "eu-west-1 now; we migrated off us-east-1" was no dispute."""
    old = memory("old", "Our primary AWS region is us-east-1", 0)
    for text in (
        "Our primary AWS region is eu-west-1 now; we migrated off us-east-1",
        "Our primary AWS region is eu-west-1, moved away from us-east-1",
    ):
        [change] = value_changes(memory("new", text, 5), [old])
        assert change.named_in_words and shown_value(change.older_term) == "us-east-1", text


def test_a_value_given_up_in_other_words_revises_or_disputes_as_much_as_the_two_share():
    """A trial: "Access tokens now expire after 15 minutes, not 60 minutes" only disputed "Access tokens are
    valid for 60 minutes" ("the older memory says more", which it does not), and "web/ uses Node 20, pinned
    in .nvmrc, not Node 18" left "The frontend in web/ runs on Node 18" undisputed and first."""
    tokens = memory("old", "Access tokens are valid for 60 minutes.", 0)
    [reworded] = value_changes(
        memory("new", "Access tokens now expire after 15 minutes, not 60 minutes.", 5), [tokens]
    )
    # {access, token, expire, minut} against {access, token, valid, minut}: one word apart on each side.
    assert (reworded.older_term, reworded.newer_term, reworded.subject_similarity) == ("60", "15", 0.6)
    assert reworded.named_in_words and reworded.covers_older
    node = memory("node", "The frontend in web/ runs on Node 18.", 0)
    [other_words] = value_changes(
        memory("nvm", "web/ uses Node 20, pinned in .nvmrc, not Node 18.", 5), [node]
    )
    assert other_words.named_in_words and other_words.only_disputes == SAID_OTHERWISE
    # The old value's words in another thing's memory: the name and a verb of use are not enough.
    ci = memory("ci", "The CI image uses Python 3.11 and Node 18", 0)
    assert value_changes(memory("docs", "The docs build uses Python 3.12, not Python 3.11", 5), [ci]) == []


def test_a_thing_named_as_given_up_disputes_the_older_memory_that_says_it():
    """A trial: "..., not make db-up" left "Database migrations are applied with `make db-up`" first."""
    old = memory("old", "Database migrations are applied with `make db-up`, which runs golang-migrate.", 0)
    newer = "Migrations are applied with make migrate (goose), not make db-up (golang-migrate was removed)."
    [given] = things_given_up(memory("new", newer, 5), [old])
    assert (given.older_id, given.newer_id, given.older_term, given.newer_term) == (
        "old",
        "new",
        "make db-up",
        "not make db-up",
    )
    assert given.only_disputes == NAMED_AS_GIVEN_UP and not given.covers_older
    for older_text, newer_text in [
        (
            "I love coffee in the morning",
            "I prefer tea in the morning, not coffee",
        ),  # one word more in common
        ("We format Python with black and isort", "Use ruff for formatting, not black"),
        ("The API listens on port 8080", "The API listens on port 9090, not 8080"),  # a value: value_changes
        ("Migrations are applied with make db-up", "Migrations are applied with make db-up, not make up"),
    ]:
        assert things_given_up(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == [], newer_text


@pytest.mark.parametrize(
    "newer_text",
    [
        "catalog-service does not use Memcached anymore; it uses Redis on redis-03.kestrel.internal.",
        "The catalog-service no longer uses Memcached.",
        "Memcached is no longer used, catalog-service uses Redis now.",
    ],
)
def test_a_thing_no_longer_used_disputes_the_older_memory_that_says_it(newer_text):
    """A second trial: "does not use Memcached anymore" revised "catalog-service uses Memcached for caching"
    but left this longer one undisputed. Beside "memcached", {catalog, service} in common."""
    old = memory(
        "old",
        "The catalog-service caches product lookups in Memcached on cache-01.kestrel.internal:11211.",
        0,
    )
    [given] = things_given_up(memory("new", newer_text, 5), [old])
    assert (given.older_term, given.newer_term, given.only_disputes) == (
        "memcached",
        "not memcached",
        NAMED_AS_GIVEN_UP,
    )
    # Another service giving it up shares one word ("service"): nothing.
    other = memory("new", "The search-service no longer uses Memcached.", 5)
    assert things_given_up(other, [old]) == []


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        (
            "The billing service uses Postgres for storage",
            "Unit tests for the billing service do not use Postgres.",
        ),
        (
            "The billing service uses Postgres for storage",
            "If the billing service does not use Postgres, storage falls back to SQLite.",
        ),
        (
            "Our CI pipeline runs on Jenkins for the web app",
            "The mobile app CI pipeline no longer runs on Jenkins.",
        ),
    ],
)
def test_a_thing_another_user_or_a_condition_gives_up_disputes_nothing(older_text, newer_text):
    # A review: who no longer uses it is named before, and the older memory must say all of it.
    assert things_given_up(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


@pytest.mark.parametrize(
    ("older_text", "newer_text", "thing"),
    [
        (
            "The billing service uses Postgres 15 for storage on db-02.",
            "We no longer use Postgres for the billing service storage.",
            "postgres",
        ),
        (
            "The catalog-service caches product lookups in Memcached on cache-01.kestrel.internal:11211.",
            "Memcached is no longer used for product lookups in catalog-service.",
            "memcached",
        ),
        (
            "The catalog-service caches product lookups in Memcached on cache-01.kestrel.internal:11211.",
            "We don't use Memcached for product lookups anymore.",
            "memcached",
        ),
        (
            "Load tests run on the staging cluster every night.",
            "We no longer use the staging cluster for load tests.",
            "staging cluster",  # the article is no part of what is named
        ),
    ],
)
def test_a_thing_no_longer_used_for_what_the_older_memory_says_disputes_it(older_text, newer_text, thing):
    # What it is no longer used for follows the thing: "We" names no user, and "for the billing service
    # storage" is what both memories are about (the older says all of it).
    [given] = things_given_up(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (given.older_term, given.newer_term, given.only_disputes) == (
        thing,
        f"not {thing}",
        NAMED_AS_GIVEN_UP,
    )


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        # No longer used for something the older memory does not say it is used for.
        (
            "The billing service uses Postgres 15 for storage.",
            "We no longer use Postgres for caching in the billing service.",
        ),
        (
            "Our CI pipeline runs on Jenkins for the web app",
            "We no longer run on Jenkins for the mobile app CI pipeline.",
        ),
        # By another user.
        (
            "The catalog-service caches product lookups in Memcached on cache-01.kestrel.internal:11211.",
            "The search-service no longer uses Memcached for product lookups.",
        ),
        # Not a purpose: "since March" says when, and the older memory does not say Memcached.
        ("The billing service uses Postgres 15 for storage.", "Memcached is no longer used since March."),
    ],
)
def test_a_thing_no_longer_used_for_something_else_disputes_nothing(older_text, newer_text):
    assert things_given_up(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


def test_a_long_run_of_spaces_is_read_in_one_pass():
    # A review: the clause break, tried at each space of a run, read the rest of the run each time (434 s for
    # 100,000 spaces). Linear now: what is asserted is the split, the time is only bounded by the test's run.
    text = "on Ab" + " " * 100_000 + "x now 9090"
    assert value_said_now(memory("m1", "Grafana listens on port 3000", 0), memory("m2", text, 1)) is None
    spaced = (
        "Redis is not used" + " " * 50_000 + "- Memcached is not used;" + " " * 50_000 + "Kafka is not used"
    )
    assert len(negating_clauses(spaced)) == 3
    # What a thing is no longer used for, word by word (a run of spaces inside it cost 5 s at 10,000).
    long_purpose = memory("m2", "We no longer use Postgres for caching" + " " * 100_000 + "billing.", 1)
    older = memory("m1", "The billing service uses Postgres 15 for storage.", 0)
    assert things_given_up(long_purpose, [older]) == []  # the older memory says no caching


def test_a_thing_given_up_at_the_end_of_a_sentence_is_read_without_its_full_stop():
    # A trial: "..., not main." looked for "main." in the older memory, and found nothing.
    old = memory("old", "Release tags are cut from the main branch.", 0)
    [given] = things_given_up(
        memory("new", "Release tags are cut from the release branch, not main.", 5), [old]
    )
    assert (given.older_term, given.newer_term) == ("main", "not main")


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("Actually, deploys go out from main.", "deploys go out from main."),
        ("FYI: staging is reset on Sundays.", "staging is reset on Sundays."),
        ("Oh, actually - to be clear, the port is 9090.", "the port is 9090."),
        ("Turns out the cache TTL is 24 hours.", "the cache TTL is 24 hours."),
        # Words that only look like an opener stay: they are the subject, or say the memory adds.
        ("Well water feeds the office coffee machine.", "Well water feeds the office coffee machine."),
        ("Also, the API uses gRPC.", "Also, the API uses gRPC."),
        ("In fact-checking we use Snopes.", "In fact-checking we use Snopes."),  # a review
        ("Actually", "Actually"),  # nothing after it: the text itself
    ],
)
def test_an_opener_that_says_nothing_of_the_subject_is_set_aside(text, plain):
    assert without_opener(text) == plain


def test_the_same_words_but_for_one_command_in_code_dispute_the_older():
    # A trial: an agent remembered each new deploy command; the four stood as facts, the oldest first.
    older = memory("old", "Deploy to production with `make deploy ENV=prod`", 0)
    newer = memory("new", "Deploy to production with `argocd app sync web-prod`", 5)
    assert [
        (c.older_id, c.newer_id, c.older_term, c.newer_term, c.only_disputes)
        for c in plain_command_changes(newer, [older])
    ] == [("old", "new", "make deploy ENV=prod", "argocd app sync web-prod", NOT_SAID_TO_CHANGE)]
    assert plain_command_changes(older, [newer]) == []  # only an older memory is disputed
    # An imperative that opens with its cue is one step of several; other words around the code, or two
    # commands that differ, are not one command changed.
    steps = [
        memory("lint", "Run `make lint` before pushing", 0),
        memory("test", "Run `make test` before pushing", 5),
    ]
    assert plain_command_changes(steps[1], steps[:1]) == []
    other = memory("o", "Deploy to staging with `make deploy ENV=staging`", 0)
    assert plain_command_changes(newer, [other]) == []
    both = memory("b", "Build with `npm run build` and deploy with `make deploy`", 0)
    changed = memory("c", "Build with `pnpm build` and deploy with `argocd app sync`", 5)
    assert plain_command_changes(changed, [both]) == []
    # A review: steps of one list ("runs", "run" and "is" say no how), and one command extending another.
    for older_text, newer_text in (
        ("CI runs `make lint` on every pull request", "CI runs `make test` on every pull request"),
        ("The pre-commit hook runs `ruff check`", "The pre-commit hook runs `ruff format`"),
        ("Before pushing, run `make lint`", "Before pushing, run `make test`"),
        ("Test the web app with `pnpm test`", "Test the web app with `pnpm test --watch`"),
    ):
        assert plain_command_changes(memory("n", newer_text, 5), [memory("o", older_text, 0)]) == []
    # Said to have changed: ``value_changes``'s to read.
    said = memory("s", "Deploy to production now with `argocd app sync web-prod`", 5)
    assert plain_command_changes(said, [older]) == []


@pytest.mark.parametrize(
    ("text", "stated"),
    [
        ("FYI the prod DB is up", "the production database is up"),
        ("Heads up: the env var is set", "the environment var is set"),
        ("Confirmed: the port is 6543 (checked)", "the port is 6543 "),
        ("It runs in prod.", "It runs in production."),
        # Never inside a name, nor a word that is no label (a review).
        ("Backups run on db-1 and registry.k8s.io", "Backups run on db-1 and registry.k8s.io"),
        ("Load .env and config.yaml with pg_dump", "Load .env and config.yaml with pg_dump"),
        ("Confirmed bookings are held for 48 hours", "Confirmed bookings are held for 48 hours"),
        ("Reminders go out at 09:00", "Reminders go out at 09:00"),
        ("psalm 23", "psalm 23"),
    ],
)
def test_a_statement_written_out_drops_what_only_hands_it_over_and_expands_short_words(text, stated):
    assert written_out(text) == stated


def test_a_texts_readings_are_remembered_and_forgotten_with_the_text_caches():
    # Consolidation reads a write's neighbours with several rules; each reading of a text is made once,
    # and a purge empties them as it does every cache keyed by memory text.
    from retrieval.contradictions import says_more_than_a_value
    from retrieval.text import _TEXT_CACHES, forget_cached_texts, negated

    text = "FYI the API in prod moved to port 9090, not 8080"
    readings = (written_out, joined_as_words, negated, says_more_than_a_value)
    assert all(reading in _TEXT_CACHES for reading in readings)
    first = [reading(text) for reading in readings]
    assert first == ["the API in production moved to port 9090, not 8080", text, True, True]
    hits = [reading.cache_info().hits for reading in readings]
    assert [reading(text) for reading in readings] == first
    assert [reading.cache_info().hits for reading in readings] == [hit + 1 for hit in hits]
    forget_cached_texts()
    assert all(reading.cache_info().currsize == 0 for reading in readings)


@pytest.mark.parametrize(
    ("older_text", "newer_text", "older_term", "newer_term"),
    [
        # A new user's trial: "now" left these unlinked, where the same words without it disputed.
        (
            "The billing service is owned by Marco Bianchi.",
            "The billing service is now owned by Lena Ortiz.",
            "marco bianchi",
            "lena ortiz",
        ),
        ("The API port is 8080", "The API port is now 9090", "8080", "9090"),
        ("We are on pydantic 2.9", "We are on pydantic 2.10 now.", "2.9", "2.10"),
    ],
)
def test_the_same_words_but_for_one_value_and_now_are_a_change_said_in_words(
    older_text, newer_text, older_term, newer_term
):
    [change] = now_value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (shown_value(change.older_term), shown_value(change.newer_term)) == (older_term, newer_term)
    assert (change.named_in_words, change.covers_older) == (True, True)


def test_now_with_other_words_changed_or_a_value_added_is_no_such_change():
    older = [memory("old", "The billing service is owned by Marco Bianchi.", 0)]
    for text in [
        "The billing service is now also owned by Lena Ortiz.",  # one more owner
        "The ledger service is now owned by Lena Ortiz.",  # another service
        "Now the billing service is owned by Lena Ortiz, and now the ledger too.",
    ]:
        assert now_value_changes(memory("new", text, 5), older) == [], text


@pytest.mark.parametrize(
    "newer_text",
    [
        "the API port is now 9090",
        "The API port changed to 9090.",
        "the API port was changed to 9090 because of the mesh migration",
        "the API moved to port 9090",
    ],
)
def test_a_port_said_to_have_changed_in_other_words_revises_the_older_port_of_the_same_thing(newer_text):
    """A new user's trial: none of these was linked to "the API listens on port 8080"."""
    [change] = named_value_changes(
        memory("new", newer_text, 5), [memory("old", "the API listens on port 8080", 0)]
    )
    assert (change.older_id, change.older_term, change.newer_term) == ("old", "8080", "9090")
    assert (change.named_in_words, change.covers_older) == (True, True)


@pytest.mark.parametrize(
    "newer_text",
    ["We moved the API to port 9090.", "The API port changed to 9090.", "The API now listens on port 9090."],
)
def test_a_scope_that_leaves_nothing_out_says_no_more_of_which_thing_has_the_value(newer_text):
    """A fifth trial: "in all environments" kept the older port apart from each of these, unmarked."""
    for older_text in (
        "The API listens on port 8080 in all environments.",
        "The API listens on port 8080 everywhere.",
        "Across every cluster the API listens on port 8080.",
    ):
        [change] = value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)])
        assert (change.older_term, change.newer_term, change.only_disputes) == ("8080", "9090", None)
    # A narrower thing still leaves the older value standing elsewhere.
    older = [memory("old", "The API listens on port 8080 in all environments.", 0)]
    assert value_changes(memory("new", "The staging API now listens on port 9090.", 5), older) == []
    # A value per thing ("for each service") is not the one of the whole (a review).
    total = [memory("old", "The rate limit is 1000 requests per minute.", 0)]
    per_service = memory("new", "The rate limit is now 100 requests per minute for each service.", 5)
    assert value_changes(per_service, total) == []


def test_a_port_change_leaves_other_things_ports_and_disputes_an_older_memory_that_says_more():
    new = memory("new", "The API port is now 9090", 5)
    assert named_value_changes(new, [memory("m", "The metrics exporter listens on port 9100", 0)]) == []
    assert named_value_changes(new, [memory("two", "The API listens on ports 8080 and 8443", 0)]) == []
    assert (
        named_value_changes(
            memory("new", "The port is now 9090", 5), [memory("o", "The API listens on port 8080", 0)]
        )
        == []
    )
    assert (
        named_value_changes(
            memory("new", "The API port is now also 9090", 5),
            [memory("o", "The API listens on port 8080", 0)],
        )
        == []
    )
    [change] = named_value_changes(new, [memory("more", "The API listens on port 8080 and runs Node 18", 0)])
    assert change.only_disputes == SAYS_MORE
    old = memory("old", "The API listens on port 8080", 0)
    [after] = named_value_changes(memory("new", "The API port changed to 9090 after the migration", 5), [old])
    assert after.only_disputes == MAY_HOLD_WHERE  # "after" may say when it holds


def test_why_a_value_changed_said_with_for_is_set_aside_and_for_what_is_not():
    # A trial: "for compliance" made the newer memory about more than the older, and the 30 days stood.
    older = memory("old", "Log retention for payments logs is 30 days.", 0)
    for why in (
        "for compliance",
        "for compliance reasons",
        "for security purposes",
        "for query speed improvements",
    ):
        newer = memory("new", f"Log retention for payments logs was extended to 90 days {why}.", 5)
        [change] = value_changes(newer, [older])
        assert (terms_of(change), change.only_disputes) == (("old", "new", "30", "90"), None)
    # "For" what says which thing the value is of: another, narrower one (a review).
    for older_text, newer_text in (
        (
            "Log retention for payments logs is 30 days.",
            "Log retention for payments logs was extended to 90 days for staging.",
        ),
        ("The API server uses port 8080.", "The API server now uses port 9090 for metrics."),
        (
            "The connection pool size is 20.",
            "The connection pool size was raised to 50 for the reporting jobs.",
        ),
        ("The retry limit is 3.", "The retry limit was raised to 5 for webhook deliveries."),
        (
            "The rate limit is 100 a minute.",
            "The rate limit was raised to 1000 a minute for enterprise customers.",
        ),
    ):
        assert value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        # A review: other things, a more specific thing, a condition, a place the new value holds.
        ("The app uses Django version 4.2 on Python", "The Python version is now 3.12"),
        ("The mobile app requires iOS version 15", "The mobile app version is now 2.3"),
        (
            "The API gateway on port 443 forwards to the billing service",
            "The billing service port is now 9090",
        ),
        ("The metrics endpoint of the API listens on port 8080", "The API port changed to 9090."),
        ("The API listens on port 8080", "If the API port changed to 9090, update the proxy"),
        ("The API listens on port 8080", "The API port changed to 9090 in staging"),
        ("The billing API listens on port 8080", "The API moved to port 9090"),
        ("The API listens on port 8080", "The API port is now 9090 as well"),
    ],
)
def test_a_port_said_to_have_changed_leaves_other_things_and_conditional_changes_alone(
    older_text, newer_text
):
    assert named_value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        ("We are on pydantic 2.9.", "We're on pydantic 2.10."),
        ("It is pinned to 2.9.", "It\u2019s pinned to 2.10."),
        ("They're on Node 18.", "They are on Node 20."),
    ],
)
def test_a_pronouns_short_form_reads_as_the_words_written_out(older_text, newer_text):
    """A new user's trial: "We're on pydantic 2.10 now" left "We are on pydantic 2.9" unlinked."""
    [change] = plain_value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert change.only_disputes == NOT_SAID_TO_CHANGE


@pytest.mark.parametrize(
    ("older_text", "newer_text", "older_term", "newer_term"),
    [
        (
            "The staging database password rotates monthly.",
            "The staging database password rotates weekly.",
            "monthly",
            "weekly",
        ),
        ("The full backup runs every week.", "The full backup runs every night.", "week", "night"),
    ],
)
def test_how_often_the_same_thing_happens_said_twice_is_two_values_of_it(
    older_text, newer_text, older_term, newer_term
):
    # A new user's trial: "rotates weekly" stood beside "rotates monthly", undisputed. No verb of use
    # before it is needed: how often a thing happens is one value of it, as a number after "is" is.
    [change] = plain_value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (change.older_term, change.newer_term, change.only_disputes) == (
        older_term,
        newer_term,
        NOT_SAID_TO_CHANGE,
    )


def test_how_often_differs_only_as_one_value_in_the_same_words():
    older = [memory("old", "We go hiking every week with the kids.", 0)]
    for text in [
        "We go climbing every month with the kids.",  # another thing done, too
        "We go hiking every week with the dogs.",  # the same frequency
        "We go hiking weekly with the kids and the dogs.",  # more words
    ]:
        assert plain_value_changes(memory("new", text, 5), older) == [], text


@pytest.mark.parametrize(
    ("text", "stated"),
    [
        ("Correction: the API port is 9090", "the API port is 9090"),
        ("Scratch that - the password rotates weekly.", "the password rotates weekly."),
        ("Scratch that, the password rotates weekly.", "the password rotates weekly."),
        ("I was wrong: the standup is at 10:00.", "the standup is at 10:00."),
        ("Update: build 1235 failed", "build 1235 failed"),
        ("Scratchpad notes are in the wiki", "Scratchpad notes are in the wiki"),
        ("Correction", "Correction"),
    ],
)
def test_a_label_that_opens_a_correction_is_set_aside(text, stated):
    assert without_correction_label(text) == stated


def test_a_correction_label_before_the_same_words_with_another_value_says_the_change_in_words():
    older = [memory("old", "The staging database password rotates monthly.", 0)]
    for text in [
        "Scratch that - the staging database password rotates weekly.",
        "Correction: the staging database password rotates weekly.",
        "My mistake, the staging database password rotates weekly.",
    ]:
        [change] = corrected_value_changes(memory("new", text, 5), older)
        assert (change.older_term, change.newer_term, change.named_in_words) == ("monthly", "weekly", True)
        assert change.only_disputes is None
    # "Update:" says no change of this thing: another build (a review's case), and no label, no change in words.
    builds = [memory("b1", "Build 1234 failed on the linter", 0)]
    assert corrected_value_changes(memory("b2", "Update: build 1235 failed on the linter", 5), builds) == []
    plain = "The staging database password rotates weekly."
    assert corrected_value_changes(memory("new", plain, 5), older) == []


def test_a_verb_of_what_a_thing_does_with_its_value_and_why_it_changed_are_not_what_it_is_about():
    # A new user's trial: "now runs on port 5173 since we moved to Vite" after "listens on port 3000", and
    # "upgraded the frontend build to Node 20" after "We use Node 18 for the frontend build", were kept apart.
    port = memory("old", "The acme-web dev server listens on port 3000.", 0)
    said = "The acme-web dev server now runs on port 5173 since we moved to Vite."
    [change] = value_changes(memory("new", said, 5), [port])
    # {acme, web, dev, server, port} on both sides: 5 / 5.
    assert (change.older_term, change.newer_term, change.subject_similarity) == ("3000", "5173", 1.0)
    node = memory("n1", "We use Node 18 for the frontend build.", 0)
    [change] = value_changes(memory("n2", "We upgraded the frontend build to Node 20.", 5), [node])
    # {frontend, build, node} on both sides: 3 / 3.
    assert (change.older_term, change.newer_term, change.subject_similarity) == ("18", "20", 1.0)
    # Another thing's value, whatever the verb: {acme, web, api, server, port} against the dev server's.
    api = "The acme-web API server now runs on port 5173."
    assert value_changes(memory("api", api, 5), [port]) == []


def test_a_value_of_a_narrower_thing_is_no_change_of_the_older_value_unless_it_names_it():
    # A new user's trial: each newer memory superseded the general one, whose value still holds elsewhere.
    for older_text, newer_text in [
        ("The API gateway timeout is 30 seconds.", "The staging API gateway timeout is now 90 seconds."),
        (
            "Log retention in Elasticsearch is 14 days.",
            "Audit log retention in Elasticsearch is now 365 days.",
        ),
    ]:
        older = memory("old", older_text, 0)
        assert value_changes(memory("new", newer_text, 5), [older]) == [], newer_text
    # Naming the older value as given up says it is the same thing's.
    older = memory("old", "The API gateway timeout is 30 seconds.", 0)
    said = "The staging API gateway timeout is now 90 seconds, not 30 seconds."
    [change] = value_changes(memory("new", said, 5), [older])
    assert (change.older_term, change.newer_term, change.named_in_words) == ("30", "90", True)


@pytest.mark.parametrize(
    ("older_text", "newer_text", "older_term", "newer_term"),
    [
        # A new user's trial saw each kept beside the fact it corrects, the older recalled first.
        # "now" after the new value, another verb of use, "all" and "'re":
        ("We use Node 18 for all CI builds", "We're on Node 20 now for CI builds", "18", "20"),
        (
            "Our Python services run on Python 3.10",
            "All our Python services are on Python 3.12 now",
            "3.10",
            "3.12",
        ),
        # "happens" is what a meeting does with its time, as "runs" is what a server does with its port:
        (
            "Sprint planning happens on Monday at 10:00",
            "Sprint planning is on Tuesday at 11:00 now",
            "10:00 monday",
            "11:00 tuesday",
        ),
        # a second trial: "now" after the new value and an aside after it that a value stayed (it was read
        # as the only value said after the change, and the pair kept apart):
        (
            "The orders-service runs on Python 3.10 with Django 4.2.",
            "orders-service is on Python 3.12 now (Django still 4.2).",
            "3.10",
            "3.12",
        ),
        # how often or how many of the values hold ("every", "only") is not what the memory is about (a
        # second trial kept the two apart: {release, go, utc} against those and {every}, 0.75):
        (
            "Releases go out every Tuesday and Thursday at 14:00 UTC.",
            "Releases now go out only on Wednesdays at 13:00 UTC.",
            "14:00 thursday tuesday",
            "13:00 wednesday",
        ),
        # a short form, and the value's name said by the older memory only:
        (
            "The production Kubernetes cluster runs version 1.27",
            "The production k8s cluster was upgraded to 1.29",
            "1.27",
            "1.29",
        ),
        # when it changed, and a change of schedule in words:
        (
            "The main database is PostgreSQL 14",
            "The main database was upgraded to PostgreSQL 16 last weekend",
            "14",
            "16",
        ),
        (
            "Code freeze for the winter release starts on November 20",
            "Code freeze for the winter release got pushed back to November 27",
            "20",
            "27",
        ),
        # "went from" the value: "went" says what changed, not what the memory is about
        ("The build takes 12 minutes", "The build went from 12 to 4 minutes", "12", "4"),
    ],
)
def test_a_change_said_in_the_words_people_use_reads_as_a_value_change(
    older_text, newer_text, older_term, newer_term
):
    [change] = value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (shown_value(change.older_term), shown_value(change.newer_term)) == (older_term, newer_term)
    assert change.covers_older


def test_now_after_a_value_that_only_names_which_thing_changes_nothing():
    # "1235" names which build, not what build 1234 now is: no word of what it is or uses before it.
    assert (
        value_changes(memory("new", "Build 1235 is green now", 5), [memory("old", "Build 1234 is green", 0)])
        == []
    )
    # The older memory's name for its value set aside, what the newer one is about is still another thing.
    older = [memory("old", "The billing service connects to Postgres on port 5432", 0)]
    assert (
        value_changes(memory("new", "The billing service Postgres timeout was changed to 5433", 5), older)
        == []
    )


def test_how_often_counted_in_units_is_a_value_of_the_same_words():
    older = [memory("old", "Database backups run every 6 hours", 0)]
    [change] = plain_value_changes(memory("new", "Database backups run every 4 hours", 5), older)
    assert (change.older_term, change.newer_term, change.only_disputes) == ("6", "4", NOT_SAID_TO_CHANGE)
    [change] = corrected_value_changes(
        memory("new", "Correction: database backups run every 4 hours", 5), older
    )
    assert (change.named_in_words, change.only_disputes) == (True, None)
    weeks = [memory("old", "The on-call rotation changes every two weeks", 0)]
    [change] = plain_value_changes(memory("new", "The on-call rotation changes every three weeks", 5), weeks)
    assert (change.older_term, change.newer_term) == ("two", "three")
    # a count of things, not of units of time: two things done, not one thing's frequency
    runs = [memory("old", "We ship every 2 features to staging", 0)]
    assert plain_value_changes(memory("new", "We ship every 3 features to staging", 5), runs) == []


def test_actually_opens_a_correction_of_the_same_words_with_another_value():
    older = [memory("old", "The max upload size for attachments is 10 MB", 0)]
    said = "Actually, the max upload size for attachments is 25 MB"
    [change] = corrected_value_changes(memory("new", said, 5), older)
    assert (change.older_term, change.newer_term, change.named_in_words) == ("10", "25", True)
    assert without_correction_label(said) == "the max upload size for attachments is 25 MB"


def test_a_time_of_day_is_one_value():
    # Its hours and minutes would be two values, and "10:00" after "9:30" two words that differ (a new
    # user's trial saw this correction kept beside what it corrected).
    older = [memory("old", "The standup is at 9:30", 0)]
    [change] = corrected_value_changes(memory("new", "Actually, the standup is at 10:00", 5), older)
    assert (shown_value(change.older_term), shown_value(change.newer_term), change.covers_older) == (
        "9:30",
        "10:00",
        True,
    )
    assert corrected_value_changes(memory("new", "Actually, the retro is at 10:00", 5), older) == []
    # A colon between words or after a word stays a colon: "Note: ..." and "host:port" name no time.
    assert joined_as_words("Note: the standup is at 9:30") == "Note: the standup is at 9\u01c330"
    assert joined_as_words("redis:6379") == "redis:6379"


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        ("The build takes 12 minutes on CI", "The test suite went from 12 to 4 minutes after caching"),
        # A value before the word of change names which thing (a review of "went from": each of these was
        # superseded, or already was before it).
        ("Sprint 14 lasted 10 days", "Sprint 15 went from 10 to 12 days"),
        ("Sprint 14 velocity was 30 points", "Sprint 15 velocity went from 30 to 40 points"),
        ("Q1 revenue went from 2M to 3M", "Q2 revenue went from 3M to 4M"),
        ("In 2023 we went from 3 to 5 regions", "In 2024 we went from 5 to 7 regions"),
        ("Release 2.3 went from 4 to 6 weeks of testing", "Release 2.4 went from 6 to 3 weeks of testing"),
        # the same setting of another environment
        ("Key rotation for prod happens every 90 days", "Key rotation for staging went from 90 to 30 days"),
    ],
)
def test_went_from_a_value_revises_only_the_same_thing(older_text, newer_text):
    assert value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


def test_a_command_said_to_have_changed_in_words_revises_the_same_words_with_another_command():
    older = [memory("old", "Integration tests are run with `npm run test:int`", 0)]
    for text in [
        "Integration tests are now run with `pnpm test:integration`",
        "Correction: integration tests are run with `pnpm test:integration`",
    ]:
        [change] = said_command_changes(memory("new", text, 5), older)
        assert (change.older_term, change.newer_term) == ("npm run test:int", "pnpm test:integration")
        assert (change.named_in_words, change.covers_older) == (True, True)
    # Without a word of change it is left to ``plain_command_changes`` (a dispute); another thing's command
    # is none; an extension of the same command is another use of it.
    plain = "Integration tests are run with `pnpm test:integration`"
    assert said_command_changes(memory("new", plain, 5), older) == []
    assert said_command_changes(memory("new", "Unit tests are now run with `pnpm test:unit`", 5), older) == []
    watch = "Integration tests are now run with `npm run test:int --watch`"
    assert said_command_changes(memory("new", watch, 5), older) == []
    # A person's "now" before the verb (trial 184: "We now deploy ..." linked nothing, "We deploy ..." did).
    deploy = [memory("old", "We deploy the web app with `make deploy`.", 0)]
    [change] = said_command_changes(
        memory("new", "We now deploy the web app with `argocd app sync web`.", 5), deploy
    )
    assert (change.older_term, change.newer_term) == ("make deploy", "argocd app sync web")


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        # (a review of the rules above) A value's name said by one memory only is set aside only when the
        # values are written alike: a size, a share or a latency is no port or version.
        ("The Redis cache listens on port 6379.", "The Redis cache is now 5GB."),
        ("The Redis cache is 5GB.", "The Redis cache now listens on port 6380."),
        ("The API gateway runs version 2.4.", "The API gateway is now at 99.9%."),
        ("The API listens on port 8080.", "The API is now at 350ms."),
        # When a value holds, said after it, is no reason it changed: it may be for a while only.
        ("Support hours are 09:00-18:00.", "Support hours are reduced to 10:00-14:00 over the weekend."),
        ("Deploys happen at 14:00.", "Deploys were moved to 16:00 this week for the mobile team only."),
        (
            "The replica count is 3.",
            "The replica count was increased to 10 last night for the launch traffic.",
        ),
        ("Revenue was 1.1M in Q2.", "Revenue increased to 1.5M last quarter."),
    ],
)
def test_another_measure_or_a_value_for_a_while_is_no_change_of_the_older_value(older_text, newer_text):
    assert value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        ("Listening on 8080.", "Port is now 9090."),
        ("Port 8080", "Version is now 2.0"),
        ("Runs 1.27.", "Version now 1.29."),
        ("Uses v2.", "The version is now v3."),
    ],
)
def test_a_value_name_alone_against_a_memory_of_no_other_word_reads_without_failing(older_text, newer_text):
    # A review found these raised ZeroDivisionError out of remember: nothing is left of what either is about.
    assert value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


def test_a_command_to_run_next_or_said_actually_is_no_change_of_the_command_in_words():
    # (a review) "now" at the end of an instruction is its next step; "Actually," may give another
    # platform's way. Both stay as ``plain_command_changes`` reads them (a dispute at most).
    for older, newer in [
        ("Deploy with `./deploy.sh staging`.", "Deploy with `./deploy.sh production` now."),
        ("Run the tests with `pytest tests/unit`.", "Run the tests with `pytest tests/integration` now."),
        ("Install it with `brew install jq`.", "Actually, install it with `apt install jq`."),
    ]:
        assert said_command_changes(memory("new", newer, 5), [memory("old", older, 0)]) == [], newer
    [change] = said_command_changes(
        memory("new", "The build now runs with `ninja`", 5),
        [memory("old", "The build runs with `make all`", 0)],
    )
    assert (change.older_term, change.newer_term) == ("make all", "ninja")


@pytest.mark.parametrize(
    ("older_text", "newer_text", "old", "new"),
    [
        ("Bob prefers squash merges.", "Bob prefers rebase merges now.", "squash", "rebase"),
        ("Bob prefers squash merges.", "Bob now prefers rebase merges.", "squash", "rebase"),
        ("Ana likes dark themes.", "Ana likes light themes now.", "dark", "light"),
    ],
)
def test_a_choice_said_with_now_in_the_place_of_another_is_a_change_in_words(
    older_text, newer_text, old, new
):
    # A trial: "Bob prefers rebase merges now" was kept beside "Bob prefers squash merges", the older first.
    [change] = now_value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (change.older_term, change.newer_term, change.named_in_words, change.covers_older) == (
        old,
        new,
        True,
        True,
    )


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        ("Bob prefers squash merges.", "Alice prefers squash merges now."),  # another person's choice
        ("The frontend uses React.", "The backend uses React now."),  # another thing's
        # After "uses", "is" or "requires" another word often adds to what holds (a review).
        ("The frontend uses React.", "The frontend uses TypeScript now."),
        ("The API is stable.", "The API is documented now."),
        ("The release branch is protected.", "The release branch is frozen now."),
        ("Bob prefers squash merges.", "Bob prefers squash merges now."),  # nothing in its place
        ("Bob prefers squash merges.", "Bob does not prefer rebase merges now."),  # a denial
        ("Bob prefers squash merges.", "Bob prefers rebase commits now."),  # two words
    ],
)
def test_now_beside_another_subject_or_more_than_one_word_changes_no_choice(older_text, newer_text):
    assert now_value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


@pytest.mark.parametrize(
    "newer_text",
    [
        "We moved the staging Postgres database from db-staging-01.internal to db-staging-02.internal.",
        "We moved the staging Postgres database from db-staging-01.internal to db-staging-02.internal "
        "(new SSD host).",
        "We moved the staging Postgres database from db-staging-01.internal to db-staging-02.internal, a new "
        "SSD host.",
    ],
)
def test_what_a_new_value_is_said_after_it_is_no_part_of_what_changed(newer_text):
    # A trial: "(new SSD host)" after the new host made the memory about more than the older one.
    old = memory("old", "The staging Postgres database runs on host db-staging-01.internal.", 0)
    [change] = value_changes(memory("new", newer_text, 5), [old])
    assert change.newer_term.startswith("db") and change.covers_older


def test_an_aside_that_says_where_the_new_value_holds_keeps_the_change_apart():
    old = memory("old", "The staging Postgres database runs on host db-staging-01.internal.", 0)
    newer = "We moved the staging Postgres database from db-staging-01.internal to db-staging-02.internal (EU region only)."
    assert value_changes(memory("new", newer, 5), [old]) == []


@pytest.mark.parametrize(
    "stale",
    [
        "Payments service port is 8443 in prod.",
        "The payments service listens on port 8443.",
    ],
)
def test_a_value_said_plainly_that_an_older_memory_names_as_given_up_is_disputed_by_it(stale):
    # A trial: another agent's "port is 8443" after "now listens on port 9443 ... (it was 8443)" stood first,
    # unmarked. The stale statement is the disputed one, whenever it was written.
    correction = memory(
        "fix",
        "The payments service now listens on port 9443 in production after the mTLS migration (it was 8443).",
        0,
    )
    [pair] = restates_given_up(memory("stale", stale, 5), [correction])
    assert (pair.older_id, pair.newer_id, pair.older_term, pair.newer_term) == (
        "stale",
        "fix",
        "8443",
        "9443",
    )


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        # The older names no value as given up: two values, for the value rules.
        (
            "The payments service listens on port 9443 in production.",
            "Payments service port is 8443 in prod.",
        ),
        # The newer says a change itself: the value rules read it.
        (
            "The payments service now listens on port 9443 (it was 8443).",
            "The payments service is back on port 8443 now.",
        ),
        # Another thing's port.
        (
            "The payments service now listens on port 9443 (it was 8443).",
            "The search service listens on port 8443.",
        ),
    ],
)
def test_a_plain_value_beside_no_given_up_value_or_saying_a_change_itself_is_left_to_the_value_rules(
    older_text, newer_text
):
    assert restates_given_up(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


def test_a_version_deployed_or_shipped_in_the_same_words_disputes_the_older_one():
    """A trial: "We deploy billing version 2.4.0 to production" stood beside "... 2.3.1 ...", recalled
    after it; "runs version" disputed. A deploy that happened ("Deployed version 2.4.0 ... on Friday") is an
    event of a series, and one of another service says another thing's version."""
    older = [memory("old", "We deploy billing version 2.3.1 to production", 0)]
    [change] = plain_value_changes(memory("new", "We deploy billing version 2.4.0 to production", 5), older)
    assert (shown_value(change.older_term), shown_value(change.newer_term), change.only_disputes) == (
        "2.3.1",
        "2.4.0",
        NOT_SAID_TO_CHANGE,
    )
    shipped = [memory("old", "The mobile team ships app version 7.1", 0)]
    assert len(plain_value_changes(memory("new", "The mobile team ships app version 7.2", 5), shipped)) == 1
    events = [memory("old", "Deployed version 2.3.1 to prod on Monday", 0)]
    assert plain_value_changes(memory("new", "Deployed version 2.4.0 to prod on Friday", 5), events) == []
    other = [memory("old", "We deploy payments version 2.3.1 to production", 0)]
    assert plain_value_changes(memory("new", "We deploy billing version 2.4.0 to production", 5), other) == []


def test_a_value_given_up_revises_only_what_held_it_and_disputes_another_value():
    """A trial: "The staging API gateway timeout is no longer 10 seconds; it is 90 seconds" superseded ten
    regions' timeouts (17 seconds for region 7, ...), not only the one that said 10."""
    newer = memory("new", "The staging API gateway timeout is no longer 10 seconds; it is 90 seconds", 5)
    held = memory("ten", "The staging API gateway timeout is 10 seconds", 0)
    other = memory("region", "The staging API gateway timeout is 17 seconds for region 7", 0)
    by_id = {found.older_id: found for found in value_changes(newer, [held, other])}
    assert by_id["ten"].covers_older and by_id["ten"].named_in_words
    assert (by_id["region"].covers_older, by_id["region"].only_disputes) == (False, GAVE_UP_ANOTHER)
    # The value given up, said as another thing's name ("region 10"), is not held: its unit is missing.
    named = memory("named", "The staging API gateway timeout is 17 seconds for region 10", 0)
    [found] = value_changes(newer, [named])
    assert (found.covers_older, found.only_disputes) == (False, GAVE_UP_ANOTHER)
    # With the unit, in a region of its own, it is held.
    [found] = value_changes(
        newer, [memory("seven", "The staging API gateway timeout is 10 seconds for region 7", 0)]
    )
    assert found.covers_older
    # However its unit is spelt (a review: "10 s" was another unit than "10 seconds").
    from retrieval.contradictions import _holds_given_up

    said = "The staging API gateway timeout is no longer 10 seconds; it is 90 seconds"
    assert _holds_given_up({"10"}, said, "The gateway timeout is 10 s and the retry wait 30 seconds")
    assert not _holds_given_up({"10"}, said, "The gateway timeout is 17 seconds for region 10")


def test_a_value_written_with_thousands_separators_is_one_value():
    """A trial: "... no longer 10000 MB; it is 12000 MB" only disputed "... 10,000 MB" (the comma split it into
    "10" and "000", so the value given up was another), and a change of "1,000" read as one of "1"."""
    older = memory("old", "The export job's memory limit is 10,000 MB", 0)
    [revised] = value_changes(
        memory("new", "The export job's memory limit is no longer 10000 MB; it is 12000 MB", 5), [older]
    )
    assert revised.covers_older and revised.named_in_words
    [change] = value_changes(
        memory("new", "The API rate limit is now 5,000 requests per minute", 5),
        [memory("old", "The API rate limit is 1,000 requests per minute", 0)],
    )
    assert (shown_value(change.older_term), shown_value(change.newer_term)) == ("1000", "5000")


def test_a_unit_spelt_another_way_and_a_notes_key_are_read_as_one_value_change():
    """A trial: "... timeout is 10s." then "... is now 30 seconds." and "orders-worker port: 8080" then
    "... port: 9091" were linked to nothing, the older value recalled first, unmarked."""
    for text, spelt in (
        ("The timeout is 10s.", "The timeout is 10 seconds."),
        ("The timeout is 10 sec", "The timeout is 10 seconds"),
        ("Retention is 1 hour, then 7d", "Retention is 1 hours, then 7 days"),
        ("A 512MB limit, 2000ms and 1.5s", "A 512MB limit, 2000 milliseconds and 1.5 seconds"),
        ("orders-worker port: 8080", "orders-worker port is 8080"),
        ("interval = 30s", "interval is 30 seconds"),
        ("Release manager for the 4.x line: Sam Patel.", "Release manager for the 4.x line is Sam Patel."),
    ):
        assert spelled_units(text) == spelt
    for text in (
        "Music of the 1990s",
        "4 s3 buckets",
        "DOCKER_BUILDKIT=1",
        "Update: 5 replicas",
        "at 10:00",
        "Warning: Do not deploy",
        "Deploys: Monday and Tuesday",
    ):
        assert spelled_units(text) == text
    [change] = now_value_changes(
        memory("new", "The payments API timeout is now 30 seconds.", 5),
        [memory("old", "The payments API timeout is 10s.", 0)],
    )
    assert (shown_value(change.older_term), shown_value(change.newer_term)) == ("10", "30")
    [change] = plain_value_changes(
        memory("new", "orders-worker port: 9091", 5), [memory("old", "orders-worker port: 8080", 0)]
    )
    assert (shown_value(change.older_term), shown_value(change.newer_term)) == ("8080", "9091")
    # The same number with another unit, or both: a time read whole (a review: "10s" then "now 10min" read
    # nothing once the units were spelt one way).
    for older, newer, terms in (
        ("The API timeout is 10s.", "The API timeout is now 10min.", ("10 seconds", "10 minutes")),
        ("The cache TTL is 15 minutes.", "The cache TTL is now 1 hour.", ("15 minutes", "1 hours")),
        ("The API timeout is 30s.", "The API timeout is now 30m.", ("30 seconds", "30 minutes")),
    ):
        [change] = now_value_changes(memory("new", newer, 5), [memory("old", older, 0)])
        assert (change.older_term, change.newer_term) == terms


def test_a_duration_said_before_the_setting_it_is_of_is_that_settings_value():
    """Noticed in the last notes: "... with a 5 minute TTL" then "... 60 minute TTL" was not disputed, though
    "TTL is 5 minutes" then "... 60 minutes" was."""
    older = memory("old", "billing-api caches user sessions in Redis db 3 with a 5 minute TTL", 0)
    [change] = plain_value_changes(
        memory("new", "billing-api caches user sessions in Redis db 3 with a 60 minute TTL", 5), [older]
    )
    assert (change.older_term, change.newer_term) == ("5", "60")
    # Not a duration of something that happened: two runs, two facts.
    assert not plain_value_changes(
        memory("new", "The nightly export took 60 minutes after the upgrade", 5),
        [memory("old", "The nightly export took 5 minutes after the upgrade", 0)],
    )


def test_opposite_words_about_two_numbered_things_are_no_contradiction():
    """A trial: "PR 482 fails CI." marked "PR 481 passes CI." DISPUTED, and recall read PR 482 first."""
    for older, newer in (
        ("PR 481 passes CI.", "PR 482 fails CI."),
        ("Build 1234 of the web app passes.", "Build 1235 of the web app fails."),
    ):
        assert detect_contradictions([memory("old", older, 0), memory("new", newer, 5)]) == [], newer
    for older, newer in (
        ("Port 8080 is enabled on the bastion.", "Port 8080 is disabled on the bastion."),
        ("Port 8080 is enabled on the bastion.", "The bastion port is disabled."),
        # Dates and versions are when, not which (a review: these were left undisputed).
        ("SSO login is enabled since 2024-01-10.", "SSO login is disabled since 2024-03-02."),
        (
            "As of v3.1 the checkout feature flag is enabled.",
            "As of v3.2 the checkout feature flag is disabled.",
        ),
    ):
        [found] = detect_contradictions([memory("old", older, 0), memory("new", newer, 5)])
        assert (found.older_term, found.newer_term) == ("enabled", "disabled")


def test_a_change_that_names_who_said_it_is_read_as_the_same_change_without_the_name():
    """A trial: "The payments API timeout is now 30 seconds (per Dana)" after "... is 10 seconds" was linked
    to nothing, the older value recalled first, unmarked."""
    older = memory("old", "The payments API timeout is 10 seconds.", 0)
    for said in (
        "The payments API timeout is now 30 seconds (per Dana).",
        "The payments API timeout is now 30 seconds, per Dana (2026-03).",
        "Per Dana, the payments API timeout is now 30 seconds.",
    ):
        [change] = now_value_changes(memory("new", said, 5), [older])
        assert (shown_value(change.older_term), shown_value(change.newer_term)) == ("10", "30")
    # Two events said by two people stay two events.
    assert not plain_value_changes(
        memory("new", "Deploy failed (per Marco).", 5), [memory("old", "Deploy failed (per Dana).", 0)]
    )


def test_two_notes_that_differ_in_a_value_and_in_their_reference_dispute_each_other():
    """A trial: "... port 1111 in staging (note 1)" then "... port 2222 ... (note 2)" were kept apart as
    distinct (two values differed), and recall read five ports, none marked."""
    for reference in ("(note {})", "(ticket OPS-{}0)", "(see #{}00)"):
        older = memory("old", f"The billing service listens on port 1111 in staging {reference.format(1)}", 0)
        newer = memory("new", f"The billing service listens on port 2222 in staging {reference.format(2)}", 5)
        [change] = plain_value_changes(newer, [older])
        assert (shown_value(change.older_term), shown_value(change.newer_term)) == ("1111", "2222")
    # A key alone in parentheses, and a list written with commas, are values (a review: they were read as
    # a reference and as one number, and the change went unmarked).
    for old_text, new_text in (
        ("Backups are encrypted with (AES-128)", "Backups are encrypted with (AES-256)"),
        ("The load balancer listens on 80,443", "The load balancer listens on 80,8443"),
    ):
        assert len(plain_value_changes(memory("new", new_text, 5), [memory("old", old_text, 0)])) == 1


def test_deploy_or_ship_says_a_value_only_as_a_verb_close_before_its_name():
    """A review: the noun, or the verb far from the version, made two coexisting versions a dispute."""
    for older, newer in (
        (
            "Ship blockers are tracked in version 2 of the tracker",
            "Ship blockers are tracked in version 3 of the tracker",
        ),
        (
            "After each deploy we smoke test version 2 of the API",
            "After each deploy we smoke test version 3 of the API",
        ),
    ):
        assert plain_value_changes(memory("new", newer, 5), [memory("old", older, 0)]) == [], newer


@pytest.mark.parametrize(
    ("older_text", "newer_text", "older_term", "newer_term"),
    [
        (
            "The web deployment runs 4 replicas in production.",
            "Scaled the web deployment to 6 replicas in production.",
            "4",
            "6",
        ),
        ("The reports database runs on 3 nodes.", "The reports database was migrated to 5 nodes.", "3", "5"),
    ],
)
def test_scaled_or_migrated_to_a_value_says_it_changed(older_text, newer_text, older_term, newer_term):
    # Trial 184: "Scaled the web deployment to 6 replicas" stood beside "... runs 4 replicas", unlinked.
    [change] = value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (change.older_term, change.newer_term) == (older_term, newer_term)


def test_a_reason_in_brackets_after_the_new_value_and_its_unit_is_set_aside():
    # Trial 184: the reason's "5 minute" read as a value the newer memory states, and nothing was linked.
    older = [memory("old", "The session cache TTL is 5 minutes.", 0)]
    newer = "The session cache TTL is now 30 minutes (the 5 minute TTL overloaded the database)."
    [change] = value_changes(memory("new", newer, 5), older)
    assert (change.older_term, change.newer_term) == ("5", "30")
    # An aside that may say where the value holds stays part of what the memory says.
    assert (
        value_changes(memory("new", "The session cache TTL is now 30 minutes (in staging).", 5), older) == []
    )


def test_a_team_named_in_lower_case_is_an_owner_in_its_place():
    older = [memory("old", "The VPN gateway is maintained by the platform team.", 0)]
    [plain] = plain_value_changes(
        memory("new", "The VPN gateway is maintained by the networking team.", 5), older
    )
    assert (plain.older_term, plain.newer_term, plain.only_disputes) == (
        "platform",
        "networking",
        NOT_SAID_TO_CHANGE,
    )
    # Trial 184: "is now maintained by the networking team" was linked to nothing; "now" says it changed.
    [now] = now_value_changes(
        memory("new", "The VPN gateway is now maintained by the networking team.", 5), older
    )
    assert (now.older_term, now.newer_term, now.named_in_words, now.covers_older) == (
        "platform",
        "networking",
        True,
        True,
    )
    for text in [
        "The VPN gateway is monitored by the networking team.",  # not who owns it
        "The VPN gateway is maintained by the same team.",  # no team's name (a review)
        "The VPN gateway is maintained by our team.",
        "The billing API is maintained by the platform team.",  # another thing
    ]:
        assert plain_value_changes(memory("new", text, 5), older) == [], text
    alerts = [memory("old", "Alerts for the API are sent to the platform team.", 0)]
    assert (
        plain_value_changes(memory("new", "Alerts for the API are sent to the networking team.", 5), alerts)
        == []
    )


def test_how_often_in_one_word_against_a_count_of_units_is_another_value():
    # Trial 184: "The backup job now runs hourly" stood beside "... runs every 15 minutes", unlinked.
    older = [memory("old", "The backup job runs every 15 minutes.", 0)]
    [change] = plain_value_changes(memory("new", "The backup job runs hourly.", 5), older)
    assert (change.older_term, change.newer_term, change.only_disputes) == (
        "every 15 minutes",
        "hourly",
        NOT_SAID_TO_CHANGE,
    )
    [now] = now_value_changes(memory("new", "The backup job now runs hourly.", 5), older)
    assert (now.older_term, now.newer_term, now.covers_older) == ("every 15 minutes", "hourly", True)


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        ("The backup job runs every 60 minutes.", "The backup job runs hourly."),
        ("The backup job runs every night.", "The backup job runs nightly."),
        ("The backup job runs every two weeks.", "The backup job runs fortnightly."),
        ("The backup job runs every 3 months.", "The backup job runs quarterly."),
        ("We go hiking every week with the kids.", "We go hiking weekly with the kids."),
        ("The cleanup job runs every 15 minutes.", "The backup job runs hourly."),  # another job
        # a review: a period said in days against months, a count in words, one whose length is not said,
        # two denials, and a count that is no number Python reads
        ("The backup job runs every 30 days.", "The backup job runs monthly."),
        ("The backup job runs every twelve months.", "The backup job runs annually."),
        ("The backup job runs every six months.", "The backup job runs semiannually."),
        ("The backup job runs every weekend.", "The backup job runs weekly."),
        ("The backup job does not run every 15 minutes.", "The backup job does not run hourly."),
        ("The backup job runs hourly.", "The backup job runs every \u00b2 hours."),
        ("The backup job runs hourly.", "The backup job runs every " + "9" * 5_000 + " hours."),
    ],
)
def test_the_same_period_in_other_words_or_another_things_is_no_change(older_text, newer_text):
    assert plain_value_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


def test_every_reading_of_a_text_the_rules_keep_is_forgotten_with_the_text_caches():
    # A review: the compared text of a purged memory stayed in a cache no purge emptied.
    import retrieval.contradictions as rules
    from retrieval.text import _TEXT_CACHES

    kept = [
        name
        for name, value in vars(rules).items()
        if hasattr(value, "cache_info")
        and value.__module__ == rules.__name__  # (the rules' own, not the text module's)
        and name != "_opposition_scan"  # (keyed by the oppositions)
    ]
    assert "_as_compared" in kept and "_numbered" in kept
    assert [name for name in kept if getattr(rules, name) not in _TEXT_CACHES] == []
