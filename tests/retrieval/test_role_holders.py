from datetime import UTC, datetime, timedelta

import pytest

from retrieval.contradictions import NOT_SAID_TO_CHANGE, SAYS_MORE, ContradictionInput
from retrieval.role_holders import Holding, handed_over_first, holder_changes, holding

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def memory(memory_id: str, text: str, minutes: int) -> ContradictionInput:
    return ContradictionInput(memory_id, text, T0 + timedelta(minutes=minutes))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Priya is the on-call lead.", Holding(("priya",), ("on-call", "lead"), False)),
        ("Dan Reyes is the on-call lead", Holding(("dan", "reyes"), ("on-call", "lead"), False)),
        ("The on-call lead is Dan Reyes.", Holding(("dan", "reyes"), ("on-call", "lead"), False)),
        ("Our tech lead is Ana", Holding(("ana",), ("tech", "lead"), False)),
        ("Postgres is the primary database.", Holding(("postgres",), ("primary", "database"), False)),
        # When it is held is no part of the role.
        (
            "Priya is the on-call lead this quarter for harbor.",
            Holding(("priya",), ("on-call", "lead", "for", "harbor"), False),
        ),
        (
            "Dan Reyes is the on-call lead for harbor starting December.",
            Holding(("dan", "reyes"), ("on-call", "lead", "for", "harbor"), False),
        ),
        # A change said in words.
        ("Dan is now the on-call lead.", Holding(("dan",), ("on-call", "lead"), True)),
        ("The on-call lead is now Dan.", Holding(("dan",), ("on-call", "lead"), True)),
        ("Dan is the new on-call lead.", Holding(("dan",), ("on-call", "lead"), True)),
        ("Dan took over on-call from Priya.", Holding(("dan",), ("on-call",), True, ("priya",))),
        (
            "Dan has taken over as the on-call lead from Priya Shah.",
            Holding(("dan",), ("on-call", "lead"), True, ("priya", "shah")),
        ),
        ("Dan replaced Priya as the tech lead.", Holding(("dan",), ("tech", "lead"), True, ("priya",))),
        ("Dan took over from Priya as tech lead.", Holding(("dan",), ("tech", "lead"), True, ("priya",))),
        # Became it, or was handed it (a new user's trial found these unlinked).
        ("Dan became the on-call lead.", Holding(("dan",), ("on-call", "lead"), True)),
        (
            "Priya handed the on-call lead over to Dan.",
            Holding(("dan",), ("on-call", "lead"), True, ("priya",)),
        ),
        ("Priya handed over on-call to Dan.", Holding(("dan",), ("on-call",), True, ("priya",))),
        # Who owns a thing holds its owner's role, said either way.
        (
            "Marco Bianchi owns the billing service.",
            Holding(("marco", "bianchi"), ("owner", "of", "billing", "service"), False),
        ),
        (
            "Lena Ortiz took over ownership of the billing service from Marco.",
            Holding(("lena", "ortiz"), ("owner", "of", "billing", "service"), True, ("marco",)),
        ),
        # Ownership said to have moved, either way round, after a correction's label (a new user's trial).
        (
            "Correction: billing-api ownership moved to Dana Kim last month.",
            Holding(("dana", "kim"), ("owner", "of", "billing-api"), True),
        ),
        (
            "Ownership of the billing service was transferred to Dana Kim.",
            Holding(("dana", "kim"), ("owner", "of", "billing", "service"), True),
        ),
        # A host or an identifier holds a role too, and what led to it is no part of the role.
        (
            "The billing Postgres primary is pg-billing-01.internal.",
            Holding(("pg-billing-01.internal",), ("billing", "postgres", "primary"), False),
        ),
        (
            "After the failover, pg-billing-02.internal is the billing Postgres primary.",
            Holding(("pg-billing-02.internal",), ("billing", "postgres", "primary"), False),
        ),
        ("v2.4 is the current release.", Holding(("v2.4",), ("current", "release"), False)),
    ],
)
def test_a_sentence_that_gives_a_role_to_a_name_says_who_holds_it(text, expected):
    assert holding(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Priya is an on-call engineer.",  # one of several
        "Dan is also the on-call lead.",  # a second holder
        "Dan is the backup on-call lead.",
        "Dan is not the on-call lead.",  # a denial
        "That is the plan.",  # no name
        "We is the team.",
        "Monday is the deadline.",  # a day, not a name
        "My name is Caroline.",  # who "my" is depends on who says it
        "Caroline is the best!",  # praise
        "2024 is the year.",  # a value that names no holder
        "monday is the deadline.",
        "Caroline is the greatest.",
        "Priya is the on-call lead. Page her on Slack.",  # says more than who holds the role
        "priya is the on-call lead",  # no name written as one
        "Oscar is the name of my dog.",  # whose (a review)
        "Melanie is the mother of two.",  # one of a count
    ],
)
def test_a_sentence_that_gives_no_single_holder_a_role_says_none(text):
    assert holding(text) is None


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        ("Priya is the on-call lead.", "Dan Reyes is the on-call lead."),
        ("The on-call lead is Priya.", "The on-call lead is Dan Reyes."),  # names of two lengths
        ("Priya is the on-call lead.", "The on-call lead is Dan."),  # said the other way round
        # A new user's trial: the two stood as two facts, the older recalled second only by chance.
        (
            "Priya is the on-call lead this quarter for harbor.",
            "Dan Reyes is the on-call lead for harbor starting December.",
        ),
    ],
)
def test_another_holder_of_the_same_role_said_plainly_disputes_the_older(older_text, newer_text):
    [change] = holder_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (change.older_id, change.newer_id) == ("old", "new")
    assert (change.named_in_words, change.only_disputes) == (False, NOT_SAID_TO_CHANGE)


@pytest.mark.parametrize(
    ("older_text", "newer_text", "older_term", "newer_term"),
    [
        ("Priya is the on-call lead.", "Dan is now the on-call lead.", "priya", "dan"),
        ("The on-call lead is Priya.", "The on-call lead is now Dan Reyes.", "priya", "dan reyes"),
        ("Priya is the on-call lead.", "Dan is the new on-call lead.", "priya", "dan"),
        # A handover that names the holder given up may name the role in fewer words.
        ("Priya is the on-call lead.", "Dan took over on-call from Priya.", "priya", "dan"),
        ("Priya Shah is our tech lead.", "Dan replaced Priya Shah as tech lead.", "priya shah", "dan"),
        # A new user's trial: the older holder named in full, or the handover saying more after it.
        ("Priya Nair is the on-call lead.", "Dan took over on-call from Priya.", "priya nair", "dan"),
        (
            "Priya is the on-call lead.",
            "Dan took over on-call from Priya today; page him for platform incidents.",
            "priya",
            "dan",
        ),
        ("Priya is the on-call lead.", "Dan became the on-call lead.", "priya", "dan"),
        ("Priya is the on-call lead.", "Priya handed the on-call lead over to Dan.", "priya", "dan"),
        (
            "Marco Bianchi owns the billing service.",
            "Lena Ortiz took over ownership of the billing service from Marco.",
            "marco bianchi",
            "lena ortiz",
        ),
        # A new user's trial: kept beside the older, undisputed, the older recalled first.
        (
            "The owner of billing-api is Marcus Lee.",
            "Correction: billing-api ownership moved to Dana Kim last month; Marcus Lee has left the team.",
            "marcus lee",
            "dana kim",
        ),
        (
            "Marco Bianchi owns the billing service.",
            "Ownership of the billing service passed to Dana Kim.",
            "marco bianchi",
            "dana kim",
        ),
        # Owned by someone, said of the thing (a later trial).
        (
            "The search service is owned by Marta Kowalski.",
            "Ownership of the search service passed to Jonas Weber.",
            "marta kowalski",
            "jonas weber",
        ),
        # A change said in the first clause of a memory that says more.
        (
            "Priya is the on-call lead.",
            "Dan is now the on-call lead; page him for incidents.",
            "priya",
            "dan",
        ),
    ],
)
def test_another_holder_said_to_have_taken_over_revises_the_older(
    older_text, newer_text, older_term, newer_term
):
    [change] = holder_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)])
    assert (change.older_term, change.newer_term) == (older_term, newer_term)
    assert (change.named_in_words, change.covers_older) == (True, True)


@pytest.mark.parametrize(
    ("older_text", "newer_text"),
    [
        ("Priya is the on-call lead for billing.", "Dan is the on-call lead for harbor."),  # two roles
        ("Carla Reyes is the tech lead.", "Carla Diaz is the tech lead."),  # maybe one person
        ("Dan is the tech lead.", "Dan Reyes is the tech lead."),
        ("Priya is the on-call lead.", "Dan took over on-call from Sam."),  # someone else's handover
        ("Priya is the on-call lead.", "Dan took over the billing migration from Priya."),  # another role
        ("Priya is the on-call lead.", "Dan is an on-call engineer."),
        ("Priya is the on-call lead.", "Dan is not the on-call lead."),
        # More than one sentence reads as a handover only when its first one is one.
        ("Priya is the on-call lead.", "Dan Reyes is the on-call lead. He starts Monday."),
        ("Priya is the on-call lead.", "We talked about on-call; Dan took over on-call from Priya."),
        ("Marco owns the billing service.", "Lena owns the ledger service."),  # two things owned
        ("Priya is the on-call lead.", "Sam handed the on-call lead over to Dan."),  # not Priya's to hand
        ("John owns the house on Elm Street.", "Maria owns the house on Elm Street."),  # may own it together
        # A stand-in while the holder is away (a review).
        ("Priya is the on-call lead.", "With Priya out this week, Dan is the on-call lead."),
        ("Priya is the on-call lead.", "Since Priya is at the offsite, Dan is the on-call lead."),
        # Ownership of another thing moved; a first clause that says no change, the rest naming who left.
        ("The owner of billing-api is Marcus Lee.", "ledger-api ownership moved to Dana Kim."),
        ("The owner of billing-api is Marcus Lee.", "Dana Kim is the owner of billing-api; Marcus Lee left."),
    ],
)
def test_two_holders_of_different_roles_or_one_holder_written_twice_are_no_change(older_text, newer_text):
    assert holder_changes(memory("new", newer_text, 5), [memory("old", older_text, 0)]) == []


@pytest.mark.parametrize(
    "older_text",
    ["Priya is the release manager and on-call lead.", "Priya is the on-call lead for payments."],
)
def test_a_handover_of_part_of_an_older_role_only_disputes_it(older_text):
    """A review: "Dan took over on-call from Priya" superseded Priya's release-manager role with it."""
    [change] = holder_changes(
        memory("new", "Dan took over on-call from Priya.", 5), [memory("old", older_text, 0)]
    )
    assert change.only_disputes == SAYS_MORE


def test_now_said_last_is_a_change_too():
    assert holding("Dan is the on-call lead now.") == Holding(("dan",), ("on-call", "lead"), True)


def test_only_an_older_memory_is_read_as_the_holder_given_up():
    newer = memory("new", "Dan Reyes is the on-call lead.", 0)
    assert holder_changes(newer, [memory("later", "Priya is the on-call lead.", 5)]) == []


def test_who_has_left_in_the_rest_of_a_handover_names_the_older_holder_of_a_role_worded_otherwise():
    said = "billing-api ownership moved to Dana Kim; Marcus Lee has left the team."
    assert handed_over_first(said) == Holding(
        ("dana", "kim"), ("owner", "of", "billing-api"), True, left=("marcus", "lee")
    )
    # "the billing-api" and "billing-api": one role, since the older holder is the one who left.
    older = memory("old", "The owner of the billing-api is Marcus Lee.", 0)
    [change] = holder_changes(memory("new", said, 5), [older])
    assert (change.older_term, change.newer_term, change.covers_older) == ("marcus lee", "dana kim", True)
    # Someone else said to have left: the role's older holder is still the one handed over from, with or
    # without "the" before the thing (a trial: "Alice Chen owns the billing service" stood beside "billing
    # service ownership moved to Dave Patel").
    other = "billing-api ownership moved to Dana Kim; Sam Wu has left the team."
    exact = memory("exact", "The owner of billing-api is Marcus Lee.", 0)
    assert [c.older_id for c in holder_changes(memory("new", other, 5), [older, exact])] == ["old", "exact"]
    # The new holder said to have left is no one who left the role.
    assert handed_over_first("billing-api ownership moved to Dana Kim; Dana Kim left.").left == ()


def test_who_left_said_first_then_who_holds_the_role_now_is_a_handover_from_them():
    # A new user's trial saw this kept beside "Dana Kim is the primary contact ...", undisputed.
    said = "Dana Kim left the company; Luis Ortega is now the primary contact for the AWS account"
    role = ("primary", "contact", "for", "aws", "account")
    assert handed_over_first(said) == Holding(("luis", "ortega"), role, True, left=("dana", "kim"))
    older = memory("old", "Dana Kim is the primary contact for the AWS account", 0)
    [change] = holder_changes(memory("new", said, 5), [older])
    assert (change.older_term, change.newer_term, change.named_in_words) == ("dana kim", "luis ortega", True)
    # Who holds it, said plainly after who left, says no change in words; nor does a second clause that
    # gives no role.
    assert handed_over_first("Dana Kim left the company; Luis Ortega is the primary contact.") is None
    assert handed_over_first("Dana Kim left the company; we threw her a party.") is None


def test_what_a_role_does_names_the_role_and_a_quarter_is_when_it_is_held():
    # A new user's trial saw "Ahmed handed release management over to Sofia Rossi" kept beside "Ahmed Ali is
    # the release manager for Q3", undisputed.
    older = memory("old", "Ahmed Ali is the release manager for Q3", 0)
    assert holding(older.content) == Holding(("ahmed", "ali"), ("release", "manager"), False)
    said = "Ahmed handed release management over to Sofia Rossi"
    assert holding(said) == Holding(("sofia", "rossi"), ("release", "manager"), True, former=("ahmed",))
    [change] = holder_changes(memory("new", said, 5), [older])
    assert (change.older_term, change.newer_term, change.covers_older) == ("ahmed ali", "sofia rossi", True)
    assert holding("Dan took over team leadership from Priya").role == ("team", "lead")
    # A count of weeks is no time it is held at: the role is left unread, as before.
    assert holding("Priya is the lead for 2 weeks") is None


@pytest.mark.parametrize(
    "said",
    [
        "Dana Kim left for vacation; Luis Ortega is now the on-call lead until Friday.",
        "Dana Kim left for parental leave; Luis Ortega is now the on-call lead.",
        "Dana Kim left early today; Luis Ortega is now the support contact for the evening.",
        "Dana Kim left the company; Luis Ortega is now the on-call lead until Friday.",
    ],
)
def test_someone_away_or_a_stand_in_is_no_handover_from_who_left(said):
    # (a review) The role is theirs again once they are back.
    assert handed_over_first(said) is None


def test_a_role_said_in_a_clause_of_an_older_memory_that_says_more_is_disputed():
    # A second trial kept the two undisputed, the older recalled first. The clause leaves out what the role
    # is of, which the memory names in its first clause.
    older = memory("old", "The orders-service is owned by the Checkout team; the tech lead is Priya Nair.", 0)
    for newer_text in (
        "The tech lead of the orders-service is now Marco Rossi.",
        "Marco Rossi is now the tech lead of the orders-service.",
    ):
        [change] = holder_changes(memory("new", newer_text, 5), [older])
        assert (change.older_term, change.newer_term) == ("priya nair", "marco rossi")
        # The owning team stays said: disputed, never superseded.
        assert change.only_disputes == SAYS_MORE and not change.covers_older
    # Another service's tech lead; a memory of two sentences (a conversation's turn) is no such statement.
    assert (
        holder_changes(memory("new", "The tech lead of the billing-api is now Marco Rossi.", 5), [older])
        == []
    )
    turns = memory("old", "We met the team. The tech lead is Priya Nair; she is great.", 0)
    assert holder_changes(memory("new", "The tech lead is now Marco Rossi.", 5), [turns]) == []


def test_ownership_moved_from_one_name_to_another_hands_it_over_from_the_first():
    # A trial: "Billing service ownership moved from Alice Chen to Dave Patel" stood beside "Alice Chen owns
    # the billing service; page her ...", undisputed, and Alice was recalled first.
    said = "Billing service ownership moved from Alice Chen to Dave Patel as of December."
    assert holding(said) == Holding(
        ("dave", "patel"), ("owner", "of", "billing", "service"), True, ("alice", "chen")
    )
    plain = memory("plain", "Alice Chen owns the billing service.", 0)
    more = memory("more", "Alice Chen owns the billing service; page her for billing incidents.", 0)
    someone_else = memory("else", "Bob Smith owns the billing service.", 0)
    changes = {c.older_id: c for c in holder_changes(memory("new", said, 5), [plain, more, someone_else])}
    assert set(changes) == {"plain", "more"}  # the handover names Alice: not Bob's
    assert (changes["plain"].named_in_words, changes["plain"].covers_older) == (True, True)
    assert changes["more"].only_disputes == SAYS_MORE  # paging her is more than who owns it
