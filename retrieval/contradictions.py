"""Contradiction detection over a scope (pure): two memories about the same subject that assert
opposite things (enabled/disabled, use/avoid, true/false, ...). Pairs are found through an inverted
index of subject words, never by comparing every memory with every other."""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache

from retrieval.text import (
    CALENDAR_NAMES,
    CALENDAR_WORD,
    STOPWORDS,
    SWAP_MAX_WORDS,
    clause_tokens,
    content_terms,
    keyed_by_text,
    light_stem,
    names_in,
    negated,
    negating_word,
    plain_thousands,
    set_jaccard,
    swapped_tokens,
    without_negations,
    without_references,
    word_tokens,
)
from retrieval.time_window import without_time_words

DEFAULT_OPPOSITIONS: tuple[tuple[str, str], ...] = (
    ("enabled", "disabled"),
    ("enable", "disable"),
    ("use", "avoid"),
    ("true", "false"),
    ("allow", "deny"),
    ("allowed", "forbidden"),
    ("always", "never"),
    ("works", "broken"),
    ("passes", "fails"),
    ("accept", "reject"),
    ("include", "exclude"),
    ("increase", "decrease"),
    ("required", "optional"),
    ("public", "private"),
    ("sync", "async"),
)


# A unit of time however it is spelt, as one spelling: "10s", "10 sec" and "10 seconds" are "10 seconds".
_UNIT_WORDS = {
    spelling: unit
    for unit, spellings in (
        ("milliseconds", "millisecond milliseconds msec msecs ms"),
        ("seconds", "second seconds sec secs s"),
        ("minutes", "minute minutes min mins m"),
        ("hours", "hour hours hr hrs h"),
        ("days", "day days d"),
    )
    for spelling in spellings.split()
}
_TIME_UNITS = frozenset(_UNIT_WORDS.values())  # as ``spelled_units`` spells them
# A number and its unit of time (not a decade, "1990s"). A size keeps its spelling: "512MB" then "1GB" reads
# as one value for another.
_UNIT_AFTER_NUMBER = re.compile(
    r"(?<![\w.$])(\d{1,3}(?:\.\d+)?|\d+(?:\.\d+)?(?=\s?[^\Ws]))\s?"
    rf"({'|'.join(sorted(_UNIT_WORDS, key=len, reverse=True))})(?![\w-]|\.\w)",
    re.IGNORECASE,
)


# A note's key and its number or the name that ends it: "port: 8080", "interval = 30s", "release manager:
# Sam Patel" (a word of lower case letters, not a command's variable, "DOCKER_BUILDKIT=1", nor a label,
# "Update: 5 replicas now", "Warning: Do ...").
_KEY_THEN_NUMBER = re.compile(
    r"(?<![\w`$-])(?!(?i:correction|corrected|update|updated|fix|note|nb|fyi|edit|steps?|todo|warning|caution"
    r"|important|tip|reminder|question|answer|summary|context|decision|reason|example|e\.g|i\.e)\b)"
    r"([A-Za-z][a-z-]{1,30})\s*+[:=]\s*+(?=\d|[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?\s*+[.!]?\s*+$)"
)


def spelled_units(text: str) -> str:
    """``text`` with each unit of time after a number spelt one way: "10s", "10 sec" and "10 seconds" are
    "10 seconds", "1 hour" is "1 hours", so that two values of one thing differ in one word (a trial:
    "The timeout is 10s." then "... is now 30 seconds." was linked to nothing); and a note's key and number,
    or the name that ends it, said as a sentence says them: "orders-worker port: 8080" is "orders-worker
    port is 8080" (the trial's "port: 8080" then "port: 9091" was linked to nothing)."""
    text = _KEY_THEN_NUMBER.sub(lambda found: f"{found.group(1)} is ", text)
    return _UNIT_AFTER_NUMBER.sub(
        lambda found: f"{found.group(1)} {_UNIT_WORDS[found.group(2).lower()]}", text
    )


@dataclass(frozen=True)
class ContradictionInput:
    id: str
    content: str
    created_at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", _as_compared(self.content))


@keyed_by_text
@lru_cache(maxsize=8_192)
def _as_compared(text: str) -> str:
    """What a memory's text is compared as. A number's thousands separators are not the joints of two
    values: "10,000" is read as 10000. A reference beside what the memory says ("(ticket OPS-12)") names the
    note, not a value of the fact. A unit of time and a note's key are spelt one way ("10s", "10 sec": "10
    seconds"; ``spelled_units``). Kept for the texts seen last: a write compares its memory with twenty
    others or so, mostly the neighbours of the writes before it, and these rewrites were a fifth of a
    remember's own processor time (``benchmarks.write_cpu``)."""
    return spelled_units(without_references(plain_thousands(text)))


@dataclass(frozen=True)
class Contradiction:
    older_id: str
    newer_id: str
    older_term: str
    newer_term: str
    subject_similarity: float
    # A value change whose newer memory names the old value as given up, or calls itself a correction: a
    # revision in words (``value_changes``).
    named_in_words: bool = False
    # Why the newer memory only disputes the older one and never supersedes it (None: it may supersede):
    # ``SAYS_MORE``, the older says more than the value the newer one replaces ("listens on 8081 in its
    # container; maps it to 18081 on the host", then "the host port changed from 18081 to 18082"), and
    # superseding it would take the rest along; ``MAY_HOLD_WHERE``, the newer one's clause after its value
    # ("after ...") may say where the value holds rather than why it changed; ``MAY_BE_A_SERIES``, the
    # newer one names the old value only as what it "was" ("..., previously 8443"), which may as well name
    # the one before it in a series ("build 1235 failed, previously 1234").
    only_disputes: str | None = None

    @property
    def covers_older(self) -> bool:
        return self.only_disputes is None

    @property
    def detail(self) -> str:
        """What the pair says, as lineage and the contradictions table record it."""
        older, newer = shown_value(self.older_term), shown_value(self.newer_term)
        return f"{older!r} then {newer!r} (subject overlap {self.subject_similarity:.2f})"


@lru_cache(maxsize=8)
def _opposition_scan(oppositions: tuple[tuple[str, str], ...]) -> tuple[dict[str, str], re.Pattern[str]]:
    """The stems of the opposite terms (each with a word that has it), and a cheap prefilter on the raw
    text: only memories that may contain an opposition word are tokenised. Made once per list of
    oppositions, not for every write."""
    stems = {light_stem(word): word for pair in oppositions for word in pair}
    mentions = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, stems), key=len, reverse=True)) + ")")
    return stems, mentions


def detect_contradictions(
    memories: Sequence[ContradictionInput],
    oppositions: Sequence[tuple[str, str]] = DEFAULT_OPPOSITIONS,
    *,
    threshold: float = 0.5,
    max_word_frequency: int = 500,
    negations: bool = True,
    swaps_of: str | None = None,
) -> list[Contradiction]:
    """Pairs asserting opposite terms whose remaining words overlap by Jaccard >= ``threshold``, with
    ``negations`` the pairs one of which negates the other's words (``negated_pairs``), and with
    ``swaps_of`` the pairs of that memory whose two texts say the same words with two parts in each other's
    place (``swapped_pairs``). Those two looks tokenise every memory given (the opposite terms are found by
    a cheap scan first): the write path asks them of a memory and its neighbours, a pass over a whole scope
    does not."""
    stems, mentions = _opposition_scan(tuple(oppositions))
    terms: dict[str, set[str]] = {}
    holders: dict[str, set[str]] = defaultdict(set)
    by_id = {}
    for memory in memories:
        if not mentions.search(memory.content.lower()):
            continue
        words = set(content_terms(memory.content))
        present = words & stems.keys()
        if not present:
            continue
        terms[memory.id] = words
        by_id[memory.id] = memory
        for stem in present:
            holders[stem].add(memory.id)
    found: dict[tuple[str, str], Contradiction] = {}
    for left_word, right_word in oppositions:
        left, right = light_stem(left_word), light_stem(right_word)
        left_side = holders.get(left, set()) - holders.get(right, set())
        right_side = holders.get(right, set()) - holders.get(left, set())
        if not left_side or not right_side:
            continue
        index: dict[str, list[str]] = defaultdict(list)
        for memory_id in right_side:
            for word in terms[memory_id] - stems.keys():
                index[word].append(memory_id)
        for memory_id in left_side:
            subject = terms[memory_id] - stems.keys()
            partners = {
                partner
                for word in subject
                if len(index.get(word, ())) <= max_word_frequency
                for partner in index.get(word, ())
            }
            for partner in partners:
                other = terms[partner] - stems.keys()
                similarity = len(subject & other) / len(subject | other) if subject | other else 0.0
                if similarity < threshold or _numbered_apart(
                    by_id[memory_id].content, by_id[partner].content
                ):
                    continue
                first, second = sorted((by_id[memory_id], by_id[partner]), key=lambda m: (m.created_at, m.id))
                older_term, newer_term = (
                    (left_word, right_word) if first.id == memory_id else (right_word, left_word)
                )
                key = (first.id, second.id)
                if key not in found or found[key].subject_similarity < similarity:
                    found[key] = Contradiction(
                        first.id, second.id, older_term, newer_term, round(similarity, 6)
                    )
    for contradiction in (
        *(negated_pairs(memories, max_word_frequency=max_word_frequency) if negations else ()),
        *(swapped_pairs(memories, swaps_of) if swaps_of is not None else ()),
    ):
        key = (contradiction.older_id, contradiction.newer_id)
        if key not in found:
            found[key] = contradiction
    return sorted(found.values(), key=lambda c: (c.older_id, c.newer_id))


@keyed_by_text
@lru_cache(maxsize=8192)
def _numbered(text: str) -> dict[str, str]:
    """The things ``text`` names by number, each number by the word before it: {"pr": "481"} of "PR 481
    passes CI" (not a date's or a version's parts, which follow a value)."""
    words = content_terms(text)
    return {
        before: word for before, word in itertools.pairwise(words) if word.isdigit() and not is_value(before)
    }


def _numbered_apart(left: str, right: str) -> bool:
    """Whether two texts name the same kind of thing by different numbers: "PR 481 passes CI" and "PR 482
    fails CI" are two PRs, not one said to pass and fail (a trial saw PR 481 marked DISPUTED by PR 482).
    "SSO is enabled since 2024-01-10" and "... disabled since 2024-03-02" are one thing (a review)."""
    theirs = _numbered(right)
    return any(theirs.get(name, number) != number for name, number in _numbered(left).items())


def swapped_pairs(memories: Sequence[ContradictionInput], memory_id: str) -> list[Contradiction]:
    """The pairs of memory ``memory_id`` and another of ``memories`` of which one says (nearly) the other's
    words with two of its parts in each other's place (``swapped_spans``: "deploys are allowed on Monday
    but not on Friday" / "... on Friday but not on Monday", "Alice reports to Bob" / "Bob reports to
    Alice"), older first."""
    focus = next((m for m in memories if m.id == memory_id), None)
    said, said_set = _clause_words(focus.content) if focus is not None else ((), frozenset())
    if focus is None or not 2 < len(said) <= SWAP_MAX_WORDS:
        return []
    found = []
    for other in memories:
        tokens, token_set = _clause_words(other.content)
        if other.id == memory_id or len(said_set & token_set) < 0.8 * max(len(said_set), len(token_set)):
            continue  # a swap shares (nearly) every word
        older, newer = sorted(
            ((focus, said), (other, tokens)), key=lambda pair: (pair[0].created_at, pair[0].id)
        )
        spans = swapped_tokens(older[1], newer[1])
        if spans is not None:
            first, last = spans
            found.append(
                Contradiction(older[0].id, newer[0].id, f"{first} ... {last}", f"{last} ... {first}", 1.0)
            )
    return found


@keyed_by_text
@lru_cache(maxsize=32_768)
def _clause_words(text: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """``clause_tokens`` of a memory, and their set; remembered, as a write's neighbours are mostly the
    neighbours of the writes before it."""
    tokens = tuple(clause_tokens(text))
    return tokens, frozenset(tokens)


@keyed_by_text
@lru_cache(maxsize=32_768)
def _affirmed_terms(text: str) -> frozenset[str]:
    """A memory's content terms with its negating words left out (``negated_pairs``); remembered."""
    return frozenset(content_terms(without_negations(text)))


# A negation contradicts only what it restates word for word: "the rotation is not weekly" against "the
# rotation is weekly", not against "the rotation's handover is weekly" (subject overlap 0.5).
NEGATION_OVERLAP = 0.8
AFFIRMED = "(no negation)"


# Words that say a thing has ended ("any more" apart is a quantity: "We don't have any more Jira licences",
# a review), and the words of permission of an older memory that such an ending ends as well.
_CEASED = re.compile(r"\b(?:anymore|no\s+longer)\b", re.IGNORECASE)
_PERMITTING = frozenset(content_terms("allowed permitted okay ok fine possible"))
# A time of day: a limit an older memory put on what it allowed ("until 15:00"), not which thing it is.
_TIME_OF_DAY = re.compile(r"\b\d{1,2}[:.]\d{2}(?::\d{2})?(?:\s*[ap]\.?m\.?)?(?!\d)", re.IGNORECASE)


def negated_pairs(
    memories: Sequence[ContradictionInput], *, max_word_frequency: int = 500
) -> list[Contradiction]:
    """Pairs with the same content words (Jaccard >= ``NEGATION_OVERLAP``) of which one negates ("not",
    "never", "isn't", ...) and the other does not."""
    negates = {memory.id: negated(memory.content) for memory in memories}
    if not any(negates.values()):
        return []
    ceased = {memory.id: bool(negates[memory.id] and _CEASED.search(memory.content)) for memory in memories}
    # What each affirming memory allowed, without its times of day and its words of permission
    # (``ended_by``).
    allowed = (
        {
            memory.id: _affirmed_terms(_TIME_OF_DAY.sub(" ", memory.content)) - _PERMITTING
            for memory in memories
            if not negates[memory.id]
        }
        if any(ceased.values())
        else {}
    )
    by_id = {memory.id: memory for memory in memories}
    terms = {memory.id: _affirmed_terms(memory.content) for memory in memories}
    index: dict[str, list[str]] = defaultdict(list)  # affirming memories by word
    for memory in memories:
        if not negates[memory.id]:
            for word in terms[memory.id]:
                index[word].append(memory.id)
    found = []
    for memory in memories:
        if not negates[memory.id]:
            continue
        subject = terms[memory.id]
        # A clause that negates is judged alone too: "Alice is no longer the on-call engineer; Bob is"
        # negates "Alice is the on-call engineer" as the clause without its successor does (a trial).
        clauses = negating_clauses(memory.content)
        partners = {
            partner for word in subject if len(index[word]) <= max_word_frequency for partner in index[word]
        }
        for partner in partners:
            other = terms[partner]
            similarity = len(subject & other) / len(subject | other) if subject | other else 0.0
            # A clause only says no more than the other memory: "Use Docker ... without root; CI uses
            # Podman" narrows "Use Docker for local development" by a word, and negates nothing of it (a
            # review).
            alone = max((len(said) / len(other) for said in clauses if said and said <= other), default=0.0)
            if ceased[memory.id]:
                alone = max(alone, ended_by(allowed[partner], [*clauses, subject]))
            similarity = max(similarity, alone)
            if similarity < NEGATION_OVERLAP:
                continue
            first, second = sorted((memory, by_id[partner]), key=lambda m: (m.created_at, m.id))
            term = {m.id: negating_word(m.content) or AFFIRMED for m in (first, second)}
            found.append(
                Contradiction(first.id, second.id, term[first.id], term[second.id], round(similarity, 6))
            )
    return found


def ended_by(allowed: AbstractSet[str], clauses: Sequence[AbstractSet[str]]) -> float:
    """How much of what an older memory ``allowed`` (its content terms without its times of day and its
    words of permission) the best of a newer memory's negating ``clauses`` says has ended ("anymore", "no
    longer"): "no production deploys on Fridays anymore" ends "Deploys to production are allowed on
    Fridays until 15:00" (a trial saw the two kept apart, the older recalled first). Every value of the
    older memory must be said again (the day it allowed it on, the release or ticket it is about: "Releases
    no longer ship on Fridays" ends nothing of "Release 4.2 shipped on Friday", and "No deploys on Saturdays
    anymore" nothing of a permission for Fridays and Saturdays, a review), and nothing the older did not
    say. 0 when none does."""
    values = {word for word in allowed if is_value(word)}
    return max(
        (
            len(said) / len(allowed)
            for said in clauses
            if len(said) >= 2 and said <= allowed and values <= said
        ),
        default=0.0,
    )


# Where a memory's clauses part: a semicolon, a comma or colon before a space, a dash between spaces, "but".
# (A break starts where a run of spaces starts, and takes the run whole: tried at each space of a long run,
# the pattern read the rest of the run each time, 2.9 s for 8,000 spaces and 434 s for 100,000, a review
# found.)
_CLAUSE_BREAK = re.compile(
    r"(?<!\s)\s*+(?:;|[,:](?=\s)|(?<=\s)[-\u2013\u2014]\s|\bbut\b|\bwhile\b)\s*", re.IGNORECASE
)


def negating_clauses(text: str) -> list[set[str]]:
    """The content terms (negation words left out) of each clause of ``text`` that negates, when it has
    more than one clause."""
    clauses = [clause for clause in _CLAUSE_BREAK.split(text) if clause.strip()]
    if len(clauses) < 2:
        return []
    return [set(content_terms(without_negations(clause))) for clause in clauses if negated(clause)]


# A value changes when two memories say the same words but for their values: numbers, versions, ports,
# times ("the API listens on port 8080" / "the API now listens on port 9090"), and the days and months by
# name, a closed class of values as the numbers are ("reset every Sunday" / "now reset every Saturday"); the
# new value said after the word that says it changed. A number before that word names which thing is meant
# ("PR 482 now passes CI" is not "PR 481 passes CI" changed). One word for another that is no value ("Bob
# is now the tech lead" after "Alice is the tech lead") is left to a language model: "Bob now likes green
# tea" does not revise "Alice likes green tea", and no rule tells the two apart.
VALUE_OVERLAP = 0.8
# The days and months by name ("May" is left out: a modal verb far more often), singular or plural.
_CALENDAR = CALENDAR_NAMES
_CALENDAR_WORD = CALENDAR_WORD
_CALENDAR_IN_TEXT = re.compile(rf"\b{_CALENDAR}\b", re.IGNORECASE)


def calendar_names(text: str) -> frozenset[str]:
    """The days and months ``text`` names, lower case and singular ("Mondays" is "monday"): values, as
    numbers are ("frozen every Friday" and "frozen every Thursday" say two things of one freeze)."""
    return frozenset(found.group(0).lower().removesuffix("s") for found in _CALENDAR_IN_TEXT.finditer(text))


# A value as written: a word with a digit in it, or a day or month by name. A word is only read from its
# start (the look-behind), so a long word without a digit is scanned once, not once from each of its letters.
_VALUE = rf"(?:(?<![^\s,;!?()])[^\s,;!?()]*?\d[^\s,;!?()]*|\b{_CALENDAR}\b)"
# A value joined by hyphens, dots or slashes ("us-east-1", "3.11-slim", "10.0.0.2", "2024-03-01") is one
# value: content words would split it ("us" a stop word, "east" and "1" left), so that "eu-west-1" would
# differ from "us-east-1" only in its words, never in its value. So is a time of day ("9:30": a colon
# between digits), which would otherwise be two values, its hours and its minutes, so that "at 10:00" after
# "at 9:30" would differ in two words. Its joints become letters the words keep.
_COMPOUND = re.compile(r"(?<!\w)\w++(?:(?:[-./]|(?<=\d):(?=\d))\w++)+")  # possessive: linear on long runs
_JOINTS = str.maketrans({"-": "\u01c0", ".": "\u01c1", "/": "\u01c2", ":": "\u01c3"})
_UNJOINTS = str.maketrans({"\u01c0": "-", "\u01c1": ".", "\u01c2": "/", "\u01c3": ":"})
_JOINT_LETTERS = "\u01c0\u01c1\u01c2\u01c3"


@keyed_by_text
@lru_cache(maxsize=8_192)
def joined_as_words(text: str) -> str:
    """``text`` with each value joined by hyphens, dots or slashes made one word (``_COMPOUND``): its joints
    become letters, which word tokens keep. Remembered, as ``written_out``."""
    return _COMPOUND.sub(
        lambda found: (
            found.group(0).translate(_JOINTS) if any(c.isdigit() for c in found.group(0)) else found.group(0)
        ),
        text,
    )


def _names_another_thing(new_values: AbstractSet[str], replaced: AbstractSet[str]) -> bool:
    """Whether a changed value is a joined name ("prod-1", "k8s-staging": letters that its counterpart's
    letters do not match) beside a changed value that is none: the name says which thing the other value is
    of ("now runs 6 nodes in k8s-staging" after "4 nodes in k8s-prod" is another cluster). A name alone, or
    among names only, is the value that changed ("the cache host is now cache-2", two regions), and a
    joined value whose letters its counterpart shares is a value ("1.5s", "3.11-slim", "db-1")."""
    before = {_letters(term) for term in replaced}
    after = {_letters(term) for term in new_values}

    def is_name(term: str, others: set[str]) -> bool:
        return (
            any(joint in term for joint in _JOINT_LETTERS)
            and bool(_letters(term))
            and _letters(term) not in others
        )

    names = [term for term in new_values if is_name(term, before)] + [
        t for t in replaced if is_name(t, after)
    ]
    return bool(names) and any(term not in names for term in new_values | replaced)


def _letters(term: str) -> str:
    return "".join(c for c in term if c.isalpha() and c not in _JOINT_LETTERS)


def shown_value(term: str) -> str:
    """A value term as written ("us-east-1"), its joints restored."""
    return term.translate(_UNJOINTS)


# Words that add to what was said rather than replace it ("now also listens on 9443").
_ADDING = re.compile(r"\b(?:also|too|as\s+well|additionally|another|besides)\b", re.IGNORECASE)
# The verbs that say a value changed ("from" one value "to" another may follow them).
_CHANGE_VERBS = (
    r"(?:changed|switched|updated|moved|raised|lowered|increased|decreased|reduced|bumped|upgraded|"
    r"downgraded|extended|shortened|postponed|rescheduled|pushed\s+back|brought\s+forward|scaled|migrated|"
    r"went(?=\s+from\b))"
)
# The verbs of what a thing does with a value it has, as content terms: they say nothing of which thing it
# is ("listens on port 3000", "runs on port 5173"; "uses Node 18").
_DOES = frozenset({"use", "using", "run", "listen", "serve", "bind", "expose", "happen"})
# Words that say a value changed; the new value comes after one of them.
_CHANGED = re.compile(rf"\b(?:now|{_CHANGE_VERBS})\b", re.IGNORECASE)


# A value said to have changed to another: the word of change, perhaps what changed and where it came from,
# then "to" and the value itself ("was raised to 45 minutes", "moved from 9:30 to 10:30", "upgraded to 16
# GB"). Not "increased 12% in Q3", "raised 2 concerns", "moved to Paris 2 years ago": a number there says
# how much, how many or when, not what the thing is now.
_CHANGED_TO = re.compile(
    _CHANGED.pattern
    # what changed may stand between the word of change and "to" ("upgraded the main database to ..."), and
    # the value's name before it ("... to Postgres 16"): a new user's trial saw "We upgraded the main
    # application database to Postgres 16 last week" left beside "We use Postgres 14 ..." as another fact.
    + r"(?:\s+(?!(?:to|from)\b)[A-Za-z][\w-]*){0,5}?"
    + r"(?:\s+from\s+\S+(?:\s+[A-Za-z]+)?)?\s+to\s+(?:[A-Za-z][\w-]*\s+)?(?P<value>"
    + _VALUE
    + ")",
    re.IGNORECASE,
)


def says_value_changed(text: str, new_values: Iterable[str]) -> bool:
    """Whether ``text`` says that a value changed to one of ``new_values`` (content terms): a word of change,
    then "to" and the value right after it. Such a value change revises the older value, as "switched
    from" does; any other reading of two values is left to a language model."""
    wanted = set(new_values)
    return any(
        wanted & set(content_terms(found.group("value")))
        for found in _CHANGED_TO.finditer(joined_as_words(text))
    )


# A value the newer memory names as given up ("9090, not 8080", "9090 (not 8080)", "now 3.12 instead of
# 3.11", "rather than port 8080", "no longer 8080", "eu-west-1; we migrated off us-east-1"): it names the
# old value, and says in so many words that it changed.
_GIVEN_UP = re.compile(
    # Tried from the start of a run of spaces only: a long run is then scanned once, not once a space.
    r"(?<!\s)(?:,\s*+|\s*+\(\s*+|\s++)(?:and\s+)?(?:not|instead\s+of|rather\s+than|no\s+longer|in\s+place\s+of|"
    r"replacing|(?:moved|migrated|switched)\s+(?:away\s+from|off(?:\s+of)?))\s+"
    r"(?:the\s+)?(?:(?:old|previous|former)\s+)?(?:[A-Za-z]+\s+)?(?P<value>" + _VALUE + ")",
    re.IGNORECASE,
)
# The same said in an aside, after a comma, a parenthesis or a dash, with a word of change ("9443 (changed
# from 8443)", "60 seconds, down from 300"). Only in an aside ("the deploy was 30 minutes late" names no
# value given up), and the value right after it: "..., previously incident 41" may name another incident.
_ASIDE = r"(?<!\s)(?:,\s*+|\s*+\(\s*+|\s*+[-\u2013\u2014]\s++)(?:it\s+)?"
_ASIDE_CHANGED = re.compile(
    _ASIDE + rf"(?:(?:was\s+)?{_CHANGE_VERBS}\s+from|(?:up|down)\s+from)\s+(?:the\s+)?"
    r"(?:(?:old|previous|former)\s+)?(?P<value>" + _VALUE + ")",
    re.IGNORECASE,
)
# An aside naming what the value "was" ("9443, was 8443", "(previously 8443)"): the old value, or the one
# before in a series ("build 1235 failed, previously 1234"). The pair then only disputes.
_ASIDE_WAS = re.compile(
    _ASIDE + r"(?:was|previously|formerly)\s+(?:the\s+)?(?P<value>" + _VALUE + ")", re.IGNORECASE
)
SAYS_MORE = "the older memory says more than this value"
SAID_OTHERWISE = "the newer memory names the older one's value as given up, but says the rest in other words"
GAVE_UP_ANOTHER = "the newer memory names another value than the older one's as given up"
MAY_HOLD_WHERE = "the newer memory's clause after its value may say when the value holds"
MAY_BE_A_SERIES = "what the newer memory says it 'was' may be the one before it in a series"
# A label a correction may start with: not content, so it does not count against the subject's overlap.
# It is no word of change by itself ("Update: build 1235 failed" is another build, a review found).
_LABEL = re.compile(r"^\s*(?:correction|corrected|update|updated|note)\s*[:\-\u2013\u2014]\s*", re.IGNORECASE)
# Words a speaker opens with that say nothing of the subject ("Actually, deploys now go out from the release
# branch, not main", "FYI: ...", "To be clear, ..."): ``without_opener`` sets them aside before a memory's
# words are compared with another's. A new user's trial: "Actually," alone kept a correction beside what it
# corrected, its one extra word enough to read the two as about different things. Each is followed by a
# comma, a colon, a dash between spaces or a space ("In fact-checking ..." opens with no opener); "Oh",
# "OK" and "well" only with their comma or dash ("Well water ..." is about wells); "also" never (it says a
# memory adds, ``_ADDING``).
_OPENER = re.compile(
    r"^\s*(?:(?:actually|in fact|fyi|btw|by the way|to be clear|to clarify|just to clarify|heads[- ]up|"
    r"(?:it\s+|as it\s+)?turns out(?:\s+that)?|psa)(?:\s*[,:]\s*|\s+[-\u2013\u2014]\s+|\s+)"
    r"|(?:oh|ok|okay|well|so|right)(?:\s*[,:]\s*|\s+[-\u2013\u2014]\s+))+",
    re.IGNORECASE,
)


def without_opener(text: str) -> str:
    """``text`` without the words it opens with that say nothing of its subject (``_OPENER``)."""
    opened = _OPENER.match(text)
    return text[opened.end() :] if opened and opened.end() < len(text) else text


# A value named as left behind by a change: "changed from 18081 to 18082", "moved the standup from Tuesday
# to Thursday": a verb of change, at most a few words, then "from" the value "to" another. Not after "now"
# alone: "support hours are now from 09:00 to 18:00" is a range, not 09:00 given up.
_FROM = re.compile(
    rf"\b{_CHANGE_VERBS}(?:\s+(?!from\b)[\w'-]+){{0,4}}?\s+"
    r"(?P<gone>from\s+(?:the\s+)?(?:[A-Za-z]+\s+)?(?P<value>" + _VALUE + r"))(?=\s+to\s)",
    re.IGNORECASE,
)
# What a memory may add after its new value that is not what the value is of: why it changed, or when ("...
# because 18081 clashed with the proxy", "... last week"). Not "when ...": that says where the value holds
# ("raised to 1000 requests a minute when the caller has an enterprise key"), and such a value revises
# nothing. "After ..." and "following ..." are either ("lowered to 60 seconds after the stale pricing
# incident", "lowered to 10 a minute after 5 failed logins"): set aside too, but the pair then only disputes.
# "For" a reason is why too ("extended to 90 days for compliance", "for security reasons": a trial saw the
# two kept apart, the 30 days recalled first); "for" anything else says what the value is of ("now uses
# port 9090 for metrics", "raised to 1000 for enterprise customers": another, narrower thing, a review).
_REASON = re.compile(
    r"\s(?:(?P<either>after|following)|because|since|due\s+to|as\s+part\s+of|so\s+that|"
    r"for\s+(?:compliance|security|performance|reliability|stability|safety|privacy|cost|legal|audit)"
    r"(?:\s+reasons?)?(?=\s*(?:[.;,)]|$))|"
    r"for\s+(?:[\w-]+\s+){0,3}(?:reasons|purposes|improvements|benefits)(?=\s*(?:[.;,)]|$))|"
    r"last\s+(?:week|weekend|month|year)|yesterday|today)\b",
    re.IGNORECASE,
)
_VALUE_IN_TEXT = re.compile(_VALUE, re.IGNORECASE)
# The share of the newer memory's subject words the older one must hold when the newer names a value of the
# older one as left behind but the two differ otherwise (the older says more): then the newer disputes it.
CONTAINED_OVERLAP = 0.75


# What the new value is, said right after it: "to db-staging-02.internal (new SSD host)", "..., a new SSD
# host", "..., which has more memory" (a trial: the words made the memory about more than the older one, and
# the two were kept as two facts). Not one that may say where or when the value holds ("(staging only)",
# "(for the EU region)"): the memory then says less than a change of the whole thing.
# The value's unit or what it counts may stand between ("now 30 minutes (the 5 minute TTL overloaded the
# database)": a trial saw the reason's old value read as a value the memory states, and nothing linked).
_ASIDE_ON_VALUE = re.compile(
    r"(?P<unit>(?:\s+(?!(?:only|for|in|on|at|when|if|except|unless|until|during|while|before|after|per|where)\b)"
    r"[A-Za-z][\w-]*){0,2}?)"
    r"\s*(?:\((?P<paren>[^()]{1,80})\)|,\s+(?P<appositive>(?:a|an|which)\s[^.;,()]{1,80}))",
    re.IGNORECASE,
)
_HOLDS_WHERE = frozenset(
    word_tokens("only for in on at when if except unless until during while before after per where")
)


def _without_reason(text: str, start: int) -> tuple[str, bool]:
    """``text`` up to a clause of why or when that follows the first value said after ``start``, or up to
    what that value is (``_ASIDE_ON_VALUE``), and whether that clause may instead say where the value holds
    ("after", "following")."""
    first = _VALUE_IN_TEXT.search(text, start)
    if first is None:
        return text, False
    aside = _ASIDE_ON_VALUE.match(text, first.end())
    if aside is not None:
        said = aside.group("paren") or aside.group("appositive")
        words = set(word_tokens(said))
        after = text[aside.end() :].strip(" .!;")
        # Only an aside that ends what the memory says, or that a reason follows: "... 60 minutes (customer
        # request) in staging" says where the value holds after it (a review).
        ends = not after or _REASON.match(f" {after}") is not None
        if ends and not words & _HOLDS_WHERE and not set(content_terms(said)) & _ENVIRONMENTS:
            return text[: aside.end("unit")], False
    reason = _REASON.search(text, first.end())
    if reason is None:
        return text, False
    return text[: reason.start()], reason.group("either") is not None


def _change_stems(text: str) -> set[str]:
    """The words of ``text`` that say a value changed, as content terms: not what it is about ("pushed
    back": both of its words)."""
    return {light_stem(word) for found in _CHANGED.finditer(text) for word in found.group(0).lower().split()}


def is_value(term: str) -> bool:
    """A word that is a value: it has a digit, or names a day or a month."""
    return any(char.isdigit() for char in term) or _CALENDAR_WORD.match(term) is not None


def _kinds(values: Iterable[str]) -> set[bool]:
    """Which kinds of value these are: a day or month by name (True), a number (False). A value replaces
    only one of its kind ("in December" is not changed by "moved to 17:00")."""
    return {_CALENDAR_WORD.match(value) is not None for value in values}


# A scope that leaves nothing out ("in all environments", "across every service", "everywhere") says no more of
# which thing has the value than a memory without it: "The API now listens on port 9090" revises "The API
# listens on port 8080 in all environments" (a fifth trial saw the two kept apart, unmarked).
_EVERYWHERE = re.compile(
    # (not "for each service", "for every region": a value per thing, which "1000 in total" is not)
    r"\b(?:(?:in|across|on|at|throughout)\s+(?:all|every|any)|for\s+all)\s+(?:(?:of\s+)?(?:the|our)\s+)?"
    r"(?:environments?|envs?|regions?|services?|clusters?|stages?|servers?|hosts?|machines?|nodes?|deployments?"
    r"|apps?|applications?|places|cases|situations)\b|\beverywhere\b",
    re.IGNORECASE,
)


def value_changes(memory: ContradictionInput, others: Sequence[ContradictionInput]) -> list[Contradiction]:
    """The older of ``others`` that say what ``memory`` says with other values: the same content words
    once their values (words with a digit, days and months by name) are set aside (Jaccard >=
    ``VALUE_OVERLAP``), each with a value the other lacks, neither negating where the other does not;
    ``memory`` says that something changed and says its new values after that word, and does not say it
    adds ("also", "as well"). A pair is a candidate revision: the write path supersedes with it only when
    the newer memory says it is a change, by the same author, and never a protected memory (an explicit
    revision in words is needed there)."""

    said_as_written = memory.content
    memory = replace(memory, content=_EVERYWHERE.sub(" ", joined_as_words(written_out(memory.content))))

    # What the memory states, without the values it names as given up and a "Correction:" label: those
    # say that something changed (and what it was), not what is so now.
    def named_by(*patterns: re.Pattern[str]) -> set[str]:
        return {
            term
            for pattern in patterns
            for found in pattern.finditer(memory.content)
            for term in content_terms(found.group("value"))
            if is_value(term)
        }

    given_up = named_by(_GIVEN_UP, _ASIDE_CHANGED)
    # The words that name a value given up with it ("not Node 18": "node 18"), as an older memory may say them.
    named_phrases = {
        " ".join(found.group(0).lower().split()[-2:])
        for found in _GIVEN_UP.finditer(memory.content)
        if len(found.group(0).split()) >= 3
    }
    was = named_by(_ASIDE_WAS) - given_up  # named only as what it "was": the pair only disputes
    given_up |= was
    labelled = _LABEL.match(memory.content)
    stated = memory.content[labelled.end() if labelled else 0 :]
    for pattern in (_ASIDE_CHANGED, _ASIDE_WAS, _GIVEN_UP):
        stated = pattern.sub(" ", stated)
    changed = _CHANGED.search(stated)
    conditional = False  # its clause after the new value may say where the value holds
    went_from: set[str] = set()  # the values it says the thing changed from ("changed from 7070 to 9090")
    if changed is not None:
        # "changed from 18081 to 18082": the value it went from is given up, named in words.
        left = list(_FROM.finditer(stated))
        went_from = {term for gone in left for term in content_terms(gone.group("value")) if is_value(term)}
        given_up |= went_from
        # Its "from" stays, without the value: "went" is a word of change only before it ("The build went
        # from 12 to 4 minutes"), and so a word of what the memory is about once it went.
        for gone in reversed(left):
            stated = stated[: gone.start("gone")] + " from " + stated[gone.end("gone") :]
        changed = _CHANGED.search(stated)
        if changed is not None:
            stated, conditional = _without_reason(stated, changed.end())
    if (changed is None and not given_up) or _ADDING.search(stated):
        return []
    own = set(content_terms(stated))
    own_values = {term for term in own if is_value(term)}
    # The word that says it changed is not what the memory is about ("The standup moved to 10:30" is
    # about the standup, as "The standup is at 9:30" is).
    # Nor is the verb of what the thing does with its value: "now runs on port 5173" is about the dev server,
    # as "listens on port 3000" is, and "upgraded the frontend build to Node 20" as "We use Node 18 for the
    # frontend build" is (a new user's trial saw both pairs kept apart, the older value recalled first).
    # Nor the word that says a value stayed ("(Django still 4.2)": what the memory says of Django).
    # Nor how often or how many of the values hold: "Releases now go out only on Wednesdays at 13:00" is about
    # what "Releases go out every Tuesday and Thursday at 14:00" is about (a second trial kept the two apart).
    subject = own - own_values - _change_stems(stated) - _DOES - _STILL - _HOW_MANY_OF
    # Nor is when it changed ("We upgraded the database to Postgres 16 last week" is about the database, as
    # "We use Postgres 14 for the database" is; a new user's trial saw the two kept apart, 14 recalled first).
    when = without_time_words(stated)
    if when is not None:
        subject -= set(content_terms(when[1])) - set(content_terms(when[0]))
    # The values said after the word of change are the new ones; with a value named as given up, every
    # value it states.
    said_after = (
        {term for term in content_terms(stated[changed.end() :]) if is_value(term)} if changed else set()
    )
    if changed is not None and changed.group(0).lower() == "now":
        # "now" after its value: "We're on Node 20 now for CI builds", "Sprint planning is on Tuesday at
        # 11:00 now" (a new user's trial saw both kept beside the older value). The values after the word
        # that says what the thing is or uses are new ones; none without one ("Build 1235 is green now"
        # names which build). With those after "now" too: "orders-service is on Python 3.12 now (Django
        # still 4.2)" (a second trial read only 4.2 as said after the change, and kept the two apart).
        said_after |= _after_the_predicate(stated[: changed.start()])
    if given_up - went_from:
        # A value given up in words ("not 8080", "no longer 8080"): every value it states is new. One it went
        # from leaves the values after the word of change the new ones: "Sprint 15 went from 10 to 12 days"
        # says 12 of sprint 15, not 15 of "Sprint 14 lasted 10 days" (a review).
        said_after = own_values
    if not own_values or not subject or not said_after:
        return []
    found = []
    # (the older memories read with their values joined, as the memory is; each one's values and what it
    # says them of remembered: a write's neighbours are mostly the neighbours of the writes before it)
    written = {other.id: other.content for other in others}
    others = [
        replace(other, content=_EVERYWHERE.sub(" ", joined_as_words(written_out(other.content))))
        for other in others
    ]
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at:
            continue
        if negated(other.content) != negated(stated):
            continue
        values, rest = _values_and_subject(other.content)  # "moved to 10:30" then "moved to 11:00": rest
        rest -= _DOES | _HOW_MANY_OF
        if not values or values <= own_values or own_values <= values:
            continue  # no value, or a value added or dropped: none replaced
        new_values = own_values - values
        if not new_values <= said_after:
            continue  # a value before the word of change names the thing, not its new value
        if _kinds(new_values) != _kinds(values - own_values):
            continue  # a month for a time of day: not the same thing's value
        if not (given_up and values - own_values <= given_up) and _names_another_thing(
            new_values, values - own_values
        ):
            continue  # "Postgres 16 on prod-1" after "Postgres 14 on staging-2": another place, not a value
        if went_from and not went_from & values:
            continue  # "changed from 7070 to 9090" after "listens on port 8080": the value of another thing
        about = subject
        said_once = (subject ^ rest) & _VALUE_NAMES
        # A value's name said by one of the two only ("runs version 1.27", then "was upgraded to 1.29") says
        # nothing of which thing it is, when the values are alike: not "port 6379" and "5GB", nor "version
        # 2.4" and "99.9%" (a review).
        if (
            said_once
            and subject - said_once
            and rest - said_once
            and _alike(new_values, values - own_values, memory.content, other.content)
        ):
            about, rest = subject - said_once, rest - said_once
        if (about - rest) & _ENVIRONMENTS and (rest - about) & _ENVIRONMENTS:
            continue  # "for staging" against "for prod": the same setting of another environment (a review)
        similarity = len(about & rest) / len(about | rest)
        newer_term = " ".join(sorted(new_values))
        if similarity >= VALUE_OVERLAP:
            replaced = values - own_values
            # The newer memory names what it replaces ("not 8080"): it says in words that this changed, as
            # "switched from" does.
            # Naming one of them is enough when the others come after it in the older memory: "every
            # Saturday night at 22:00 UTC, not Sunday" says the day changed, and the time with it (a new
            # user's trial: the pair was read as no change, and kept both undisputed). A value before it
            # names which thing is meant ("Sprint 14 ends on Friday", "Build 1234 failed on Tuesday": a
            # review found "Sprint 15 ends on Thursday, not Friday" superseding sprint 14's end).
            explicit = replaced <= given_up or (
                bool(given_up & replaced) and _after_the_named(other.content, replaced, given_up)
            )
            if rest < about and not explicit:
                # It says more of what the value is of, and nothing less: a narrower thing ("The staging API
                # gateway timeout is now 90 seconds" after "The API gateway timeout is 30 seconds"), whose
                # value leaves the older one standing elsewhere (a new user's trial saw it superseded).
                continue
            only_disputes = (
                MAY_HOLD_WHERE
                if conditional
                # "no longer 10 seconds; it is 90" of "... 17 seconds for region 7": not the value it gave up,
                # most likely another thing's (a trial saw ten regions' timeouts superseded by one sentence)
                else GAVE_UP_ANOTHER
                if given_up - went_from
                and not _holds_given_up(given_up & values, memory.content, other.content)
                else MAY_BE_A_SERIES
                if explicit and replaced <= was and changed is None  # ("now ..." says it changed)
                # It says less of the thing than the older memory, which says more than the value: "The
                # api-gateway metrics port changed to 9200" after "api-gateway exposes Prometheus metrics on
                # port 9102 at /metrics" (a second trial saw the older superseded, and with it Prometheus
                # and the path). Unless it names the value it replaces, the older stays, disputed.
                else SAYS_MORE
                if not explicit and _details_beyond(written[other.id], own, said_as_written)
                else None
            )
            found.append(
                Contradiction(
                    other.id,
                    memory.id,
                    " ".join(sorted(replaced)),
                    newer_term,
                    round(similarity, 6),
                    explicit,
                    only_disputes=only_disputes,
                )
            )
            continue
        # The older memory holds a value the newer one names as left behind, and nearly every word of what
        # the newer one is about: the newer disputes it, or revises it when the two differ by one word
        # at most on either side ("Access tokens now expire after 15 minutes, not 60 minutes" after "Access
        # tokens are valid for 60 minutes": a trial read "the older memory says more" of it). Or the newer
        # names the older's very words for the value as given up ("not Node 18" of "runs on Node 18") and
        # shares two more: it disputes it, however else it puts the rest.
        named = given_up & values
        shared = about & rest
        # (and one more word than the value's name and a verb of use: "The docs build uses Python 3.12, not
        # Python 3.11" is about another thing than "The CI image uses Python 3.11")
        verbatim = [phrase for phrase in named_phrases if phrase in said_of(other)]
        if verbatim and not shared - {light_stem(phrase.split()[0]) for phrase in verbatim} - _USE_STEMS:
            verbatim = []
        if named and len(shared) >= 2 and (len(shared) / len(about) >= CONTAINED_OVERLAP or verbatim):
            reworded = len(rest - about) <= 1 and len(about - rest) <= 1
            found.append(
                Contradiction(
                    other.id,
                    memory.id,
                    " ".join(sorted(named)),
                    newer_term,
                    round(similarity, 6),
                    named_in_words=True,
                    only_disputes=None
                    if reworded
                    else SAYS_MORE
                    if len(shared) / len(about) >= CONTAINED_OVERLAP
                    else SAID_OTHERWISE,
                )
            )
    return found


# A unit however it is spelt: "10 s" and "10 seconds" are one value (a time's as ``spelled_units`` spells it).
_UNIT_SPELLINGS = _UNIT_WORDS | {
    spelling: unit
    for unit, spellings in (("mb", "mb mib megabyte megabytes"), ("gb", "gb gib gigabyte gigabytes"))
    for spelling in spellings.split()
}


def _holds_given_up(values: AbstractSet[str], newer: str, older: str) -> bool:
    """Whether ``older`` holds one of the ``values`` ``newer`` names as given up, with the unit ``newer``
    gives it where ``older`` uses that unit for a value of its own: "no longer 10 seconds" gave up "10
    seconds for region 7", not "17 seconds for region 10", whose 10 names the region (a trial saw it
    superseded). A value given up without a unit the older memory uses is held wherever it is said; a unit
    is read however it is spelt (``_UNIT_SPELLINGS``)."""
    newer_words, older_words = (
        [_UNIT_SPELLINGS.get(word, word) for word in _TOKEN.findall(text.lower())] for text in (newer, older)
    )
    units_in_older = {
        word for value, word in itertools.pairwise(older_words) if is_value(value) and not is_value(word)
    }
    for value in values:
        units = {
            word for said, word in itertools.pairwise(newer_words) if said == value and word in units_in_older
        }
        if not units or any(
            said == value and word in units for said, word in itertools.pairwise(older_words)
        ):
            return True
    return False


_USE_STEMS = frozenset({"use", "run", "using", "uses", "runs"})
_STILL = frozenset(content_terms("still"))
_HOW_MANY_OF = frozenset(content_terms("every each only"))
# A detail of a memory a newer value would take with it: a name (a capitalised word inside a sentence) or a
# path.
_DETAIL = re.compile(r"(?<=[\w,;:)]\s)[A-Z][\w'-]*[a-z][\w'-]*|(?<![\w/.])/[\w.-][\w./-]*")


def _details_beyond(older: str, newer_terms: AbstractSet[str], newer: str) -> bool:
    """Whether ``older`` (as written) holds a name or a path the newer memory (``newer`` as written, and its
    content terms) does not say: "Prometheus" and "/metrics" in "api-gateway exposes Prometheus metrics on
    port 9102 at /metrics" beside "The api-gateway metrics port changed to 9200"."""
    return any(
        (found.group(0).rstrip(".") not in newer)
        if found.group(0).startswith("/")
        else not (
            _CALENDAR_WORD.match(found.group(0))  # a day or a month is a value
            or set(content_terms(joined_as_words(written_out(found.group(0))))) <= newer_terms
        )
        for found in _DETAIL.finditer(older)
    )


# The environments a setting may hold in, as content terms (short forms written out: "prod" is "production").
_ENVIRONMENTS = frozenset(
    light_stem(word)
    for word in ("production", "staging", "development", "qa", "sandbox", "preview", "canary")
)


def _alike(new_values: AbstractSet[str], old_values: AbstractSet[str], text: str, older_text: str) -> bool:
    """Whether the changed values are written alike: one each, the same letters and joints around their
    digits ("1.27" and "1.29", "8080" and "9090"), neither a share ("99.9%")."""
    if len(new_values) != 1 or len(old_values) != 1:
        return False
    [new], [old] = new_values, old_values

    def shape(term: str) -> str:
        return re.sub(r"\d+", "9", term)

    def a_share(term: str, said: str) -> bool:  # (``said`` as ``value_changes`` reads it: its values joined)
        return re.search(rf"(?<![\w{_JOINT_LETTERS}]){re.escape(term)}\s*%", said.lower()) is not None

    return shape(new) == shape(old) and not a_share(new, text) and not a_share(old, older_text)


def _after_the_predicate(text: str) -> set[str]:
    """The values of ``text`` said after its first word of what a thing is, uses or runs on
    (``_PREDICATE_CUES``), or of when it happens ("happens", "opens"): "on Node 20" in "We are on Node 20",
    not "1235" in "Build 1235 is green"."""
    words = text.split()
    cue = next((at for at, word in enumerate(words) if word.lower().strip(",.;:") in _STATE_CUES), None)
    if cue is None:
        return set()
    return {term for term in content_terms(" ".join(words[cue + 1 :])) if is_value(term)}


def _after_the_named(text: str, replaced: AbstractSet[str], named: AbstractSet[str]) -> bool:
    """Whether, in ``text`` (an older memory), every value of ``replaced`` not ``named`` as given up comes
    after the first that is: the time after the day in "reset every Sunday night at 23:00", not the
    sprint's number before its day in "Sprint 14 ends on Friday"."""
    terms = content_terms(text)
    first = {term: terms.index(term) for term in replaced if term in terms}
    named_at = min((first[term] for term in replaced & named if term in first), default=None)
    if named_at is None:
        return False
    return all(term in first and first[term] > named_at for term in replaced - named)


def said_of(memory: ContradictionInput) -> str:
    """A memory's text as a given-up phrase is looked for in it: its values joined, lower case, one space."""
    return " ".join(joined_as_words(memory.content).lower().split())


# Why a plain value change only disputes: neither memory says that anything changed.
NOT_SAID_TO_CHANGE = "neither memory says that the value changed"
# Words right before which (within three words) a value is what a thing is, uses or runs on ("uses Node 18",
# "is us-east-1", "listens on port 8081", "is reset every Sunday"). Not "on", "in", "at" or "was" alone:
# those say when or where far more often ("Deploy failed on Tuesday", "joined the team in 2021"), and a
# value after a name says which of a series ("Sprint 14 ends on Friday", "Build 1234 failed").
_PREDICATE_CUES = frozenset(
    {"is", "are", "uses", "use", "using", "runs", "requires", "needs", "pinned", "targets", "equals"}
    | {"listens", "defaults"}
)
# When a one-off thing of a schedule is, said right after it or after "at" or "on" ("The on-call handoff
# happens Monday at 10:00", "The meeting starts at 9am": a new user's trial saw the first stand beside its
# Tuesday as two facts). Not "every": "goes to the gym every Monday" and "... every Wednesday" are two habits
# (a review), and "closed every Friday in August" names a month it is no schedule of.
_WHEN_CUES = frozenset({"happens", "starts", "ends"})
# The words after which "now" at the end says what a thing is now ("is on Tuesday at 11:00 now",
# ``_after_the_predicate``).
_STATE_CUES = _PREDICATE_CUES | _WHEN_CUES | {"opens", "closes"}
# Words right before which a value is the one that word names, when a word of what a thing is, uses or runs
# on comes anywhere before ("runs postgres 16 on port 5432": a new user's trial planted "... on port 6543"
# unmarked, the verb four words away). Not without one: "Opened port 8080 in the firewall" and "Released
# version 1.2" are events, two of which are both true.
_VALUE_NAMES = frozenset({"port", "version"})
# Of the cues, the verbs of what a thing uses or runs on: "is" anywhere before says too little ("This is a
# breaking change in version 2.0", "The test is flaky on port 8080": a review).
_ACTION_CUES = _PREDICATE_CUES - {"is", "are", "equals"}
# What is deployed or shipped now, within three words before a value's name ("We deploy billing version
# 2.4.0 to production": a trial saw 2.3.1 stand beside it, recalled first); not "Deploy failed on Tuesday",
# "We ship every 2 features", "After each deploy we smoke test version 2" (a review), nor "deployed", which
# says when, an event of a series.
_SHIP_CUES = frozenset({"deploy", "deploys", "ship", "ships"})
_WHEN_BETWEEN = frozenset({"at", "on"})
# Words right before which a name is the one value a thing has ("Our primary database is PostgreSQL", "The
# payments service is owned by Carla Reyes": a new user's trial saw "... MySQL" and "... Dmitri Volkov"
# stand beside them as two facts): "is", "are", "equals", and "by" after a word of ownership. Not "uses",
# "runs" or "requires", which take several names ("uses Redis" and "uses Kafka" are both true, a review), nor
# "approved by" (two approvals). Right before the name, which ends the memory: "That is awesome, Caroline",
# "Caroline is Melanie's friend" and "is a Python developer" are not what a name is of.
_NAME_CUES = frozenset({"is", "are", "equals"})
_OWNED = frozenset({"owned", "led", "maintained", "managed", "run", "operated"})
_TEAMS = frozenset({"team", "squad", "group", "guild", "department"})  # what a team's name comes before
# Words before "team" that name no team ("the same team", "our team", "the whole team", "the scrum team").
_NO_TEAM_NAME = STOPWORDS | frozenset(
    {"same", "whole", "entire", "other", "another", "own", "new", "old", "scrum", "agile", "core", "dev"}
)
MAX_NAME_WORDS = 3  # a name in its place: "Carla Reyes", "Amazon Aurora PostgreSQL"
_TOKEN = re.compile(r"\w+")
# What two statements of one value may differ by and still say the same of one thing (a trial planted a
# conflicting port unmarked with "FYI" in front, "(checked)" after it, or "prod" for "production"): a
# leading word that only hands the statement over, an aside in brackets that only vouches for it (not one
# that says where it holds: "(staging)"), an article, and the short forms of a few words every team uses.
_HANDED_OVER = re.compile(
    # "Confirmed", "Reminder" and "Note" only as a label (a colon, a comma or a dash after them): "Confirmed
    # bookings are held 48 hours" is about confirmed bookings (a review).
    r"^\s*(?:(?:fyi|btw|psa|heads[\s-]+up)\b[\s:,.\-\u2013\u2014]*|"
    r"(?:confirmed|reminder|note)\s*[:,\-\u2013\u2014]\s*)",
    re.IGNORECASE,
)
_VOUCHED = re.compile(
    # (starting only where a run of spaces starts: linear on a memory of 20,000 spaces, as a review timed)
    r"(?<!\s)\s*+\(\s*(?:checked|verified|confirmed|double[\s-]checked|tested|afaik|iirc|as\s+of\s+today)\s*\)",
    re.IGNORECASE,
)
_ARTICLES = frozenset({"the", "a", "an"})
_SHORT_FORMS = {
    "prod": "production",
    "db": "database",
    "env": "environment",
    "config": "configuration",
    "repo": "repository",
    "k8s": "kubernetes",
    "postgresql": "postgres",
}


# A short form as a word of its own, never inside a name: "db-1", "registry.k8s.io", ".env", "config.yaml" and
# `pg_dump` are other things than "database-1" or "registry.kubernetes.io" (a review saw one host's backups
# merged into another's). A full stop after it ends a sentence only when nothing follows it.
_SHORT_FORM = re.compile(
    r"(?<![\w.\-/=:`@])(?:" + "|".join(_SHORT_FORMS) + r")(?![\w\-/=:`@])(?!\.\w)", re.IGNORECASE
)


# A pronoun's short form of a verb, written out: "We're on pydantic 2.10 now" says what "We are on pydantic
# 2.9" says (a new user's trial found the pair unlinked). Never a name's "'s" ("Priya's laptop").
_CONTRACTIONS = (
    (re.compile(r"\b(we|you|they)['\u2019]re\b", re.IGNORECASE), r"\1 are"),
    (re.compile(r"\b(it|that|there|here|what|who)['\u2019]s\b", re.IGNORECASE), r"\1 is"),
    (re.compile(r"\b(i)['\u2019]m\b", re.IGNORECASE), r"\1 am"),
    (re.compile(r"\b(i|we|you|they)['\u2019]ve\b", re.IGNORECASE), r"\1 have"),
)


@keyed_by_text
@lru_cache(maxsize=8_192)
def written_out(text: str, *, keep_case: bool = False) -> str:
    """``text`` without a leading word that hands it over ("FYI") or an aside that vouches for it
    ("(checked)"), its short forms written out ("prod": "production"): what it states, as two statements
    of one thing are compared (a value change, a restatement). ``keep_case``: a short form written with a
    capital is written out with one ("PostgreSQL": "Postgres"), as names are told apart. Remembered:
    consolidation reads a write's neighbours, mostly the neighbours of the writes before it, with
    several rules (written out each time, 3% of the interpreter's time with 30 remembers in flight)."""
    text = _VOUCHED.sub(" ", _HANDED_OVER.sub("", text))
    for short, long in _CONTRACTIONS:
        text = short.sub(long, text)

    def long_form(found: re.Match[str]) -> str:
        written = _SHORT_FORMS[found.group(0).lower()]
        return written.capitalize() if keep_case and found.group(0)[:1].isupper() else written

    return _SHORT_FORM.sub(long_form, text)


def comparable_words(text: str) -> list[str]:
    """``text``'s words as two statements of one value are compared (``plain_value_changes``): written out
    (``written_out``), lower case, without articles."""
    return [word for word in _TOKEN.findall(written_out(text).lower()) if word not in _ARTICLES]


def _names_at(text: str, words: Sequence[str]) -> tuple[bool, ...] | None:
    """For each of ``text``'s ``comparable_words`` (``words``), whether it is written with a capital first
    letter there, as names are; None where lower case splits the text into other words than it (a few
    letters of other scripts), so that no word is read as another's."""
    cased = [
        word for word in _TOKEN.findall(written_out(text, keep_case=True)) if word.lower() not in _ARTICLES
    ]
    if [word.lower() for word in cased] != list(words):
        return None
    return tuple(word[:1].isupper() for word in cased)


@keyed_by_text
@lru_cache(maxsize=32_768)
def _plain_reading(text: str) -> tuple[tuple[str, ...], tuple[bool, ...] | None, bool]:
    """An older memory as ``plain_value_changes`` compares it: its ``comparable_words`` with its values
    joined, which of them are written as names (``_names_at``), and whether it says a value changed;
    remembered, as a write's neighbours are mostly the neighbours of the writes before it."""
    said = joined_as_words(text)
    words = tuple(comparable_words(said))
    return words, _names_at(said, words), _CHANGED.search(said) is not None


def _places_apart(words: Sequence[str], theirs: Sequence[str]) -> list[int]:
    """Where two statements of the same length say another word."""
    return [at for at, (mine, old) in enumerate(zip(words, theirs, strict=True)) if mine != old]


def _time_apart(words: Sequence[str], theirs: Sequence[str]) -> tuple[int, str, str] | None:
    """(where, the older time, the newer) when two statements of the same length say another time in one
    place, its unit another ("10 seconds" / "10 minutes", "15 minutes" / "1 hours"): a number and a unit of
    time, the unit or both differing, nothing else."""
    differ = _places_apart(words, theirs)
    if not differ or len(differ) > 2:
        return None
    unit = differ[-1]
    if unit < 1 or (len(differ) == 2 and differ[0] != unit - 1):
        return None
    if words[unit] not in _TIME_UNITS or theirs[unit] not in _TIME_UNITS or words[unit] == theirs[unit]:
        return None
    if not (words[unit - 1].replace(".", "").isdigit() and theirs[unit - 1].replace(".", "").isdigit()):
        return None
    return unit - 1, f"{theirs[unit - 1]} {theirs[unit]}", f"{words[unit - 1]} {words[unit]}"


# What a duration said before it is a setting of: "with a 5 minute TTL", "a 30 second timeout".
_SETTINGS = frozenset(
    {
        "ttl",
        "timeout",
        "interval",
        "window",
        "retention",
        "delay",
        "expiry",
        "lease",
        "grace",
        "cooldown",
        "backoff",
    }
)


def _setting_after(words: Sequence[str], at: int) -> bool:
    """Whether the value at ``at`` is a duration of the setting named right after its unit ("caches sessions
    in Redis with a 5 minute TTL", then "... 60 minute TTL": the TTL's value, whatever verb comes before)."""
    return at + 2 < len(words) and words[at + 1] in _TIME_UNITS and words[at + 2] in _SETTINGS


def _one_place_apart(words: Sequence[str], theirs: Sequence[str]) -> int | None:
    """The one place where two statements of the same length say another word (None: none, or more)."""
    differ = _places_apart(words, theirs)
    return differ[0] if len(differ) == 1 else None


def _owned_by(words: Sequence[str], at: int) -> bool:
    """Whether the word at ``at`` follows "by" and a word of ownership ("owned by", "maintained by")."""
    return at >= 2 and words[at - 1] == "by" and words[at - 2] in _OWNED


def _team_named(words: Sequence[str]) -> bool:
    """Whether ``words`` name a team as what owns a thing: "maintained by (the) platform team"."""
    return any(
        _owned_by(words, at) and at + 1 < len(words) and words[at + 1] in _TEAMS for at in range(len(words))
    )


def _name_in_place(
    words: Sequence[str], names: Sequence[bool], theirs: Sequence[str], their_names: Sequence[bool]
) -> tuple[str, str] | None:
    """(the older name, the newer) when two memories say the same words but for one name in one place (up
    to ``MAX_NAME_WORDS`` words, each written with a capital in both, none a value), the last words of
    both, right after one of the ``_NAME_CUES`` or after "by" and a word of ownership: "is owned by Carla
    Reyes", then "... by Dmitri Volkov" (after ownership also followed by other words)."""
    differ = _places_apart(words, theirs)
    if not differ or len(differ) > MAX_NAME_WORDS or differ != list(range(differ[0], differ[-1] + 1)):
        return None
    start, end = differ[0], differ[-1] + 1
    # A team is named in lower case too: "maintained by the platform team", then "... by the networking
    # team" (a trial saw the two kept as two facts): the word after it, in both, says it is a name.
    team = (
        _owned_by(words, start)
        and end < len(words)
        and words[end] in _TEAMS
        and not {*words[start:end], *theirs[start:end]} & _NO_TEAM_NAME
    )
    if not all(
        (team or (names[i] and their_names[i])) and not is_value(words[i]) and not is_value(theirs[i])
        for i in differ
    ):
        return None
    # The whole name differs: a first name alike and the last one not ("Carla Reyes", "Carla Diaz") is
    # read as the same. The name ends the text, or follows a word of ownership and the words after it are no
    # name (a team's trial: "is owned by Priya and pages the payments channel ..." beside "... by Marco and
    # ..." went undisputed).
    if start == 0 or (names[start - 1] and their_names[start - 1]):
        return None
    cue = words[start - 1]
    owned = _owned_by(words, start)
    if cue not in _NAME_CUES and not owned:
        return None
    # A name in the middle is an owner's only: "is a Python developer" and "is a Go developer" say two things
    # the user is, "Caroline is Melanie's friend" and "... Jon's friend" two friends.
    if end != len(words) and (not owned or names[end] or their_names[end]):
        return None
    return " ".join(theirs[start:end]), " ".join(words[start:end])


@keyed_by_text
@lru_cache(maxsize=8_192)
def says_more_than_a_value(text: str) -> bool:
    """Whether ``text`` says a value changed, was added, given up or what it was: ``value_changes``'s to
    read, not a plain value or command set beside another."""
    return bool(
        _CHANGED.search(text) or _ADDING.search(text) or _GIVEN_UP.search(text) or _ASIDE_WAS.search(text)
    )


def _after_a_cue(tokens: Sequence[str], at: int) -> bool:
    """Whether the value at ``at`` says what a thing is, uses or runs on (one of the ``_PREDICATE_CUES``
    within three words before it, or one of the ``_VALUE_NAMES`` right before it and a cue anywhere before
    that), or when a thing of a schedule is (one of the ``_WHEN_CUES`` right before it, or with only "at"
    or "on" between)."""
    if not _PREDICATE_CUES.isdisjoint(tokens[max(0, at - 3) : at]):
        return True
    if at and tokens[at - 1] in _VALUE_NAMES and not _ACTION_CUES.isdisjoint(tokens[:at]):
        return True
    if at and tokens[at - 1] in _VALUE_NAMES and not _SHIP_CUES.isdisjoint(tokens[max(1, at - 4) : at - 1]):
        return True  # (not the sentence's first word: "Ship blockers are tracked in version 2", a review)
    before = at - 1
    while before >= 0 and tokens[before] in _WHEN_BETWEEN and at - before <= 2:
        before -= 1
    return before >= 0 and tokens[before] in _WHEN_CUES


# How often a thing happens, in one word ("rotates weekly", "is backed up nightly"), or as "every" or "each"
# and a unit of time ("every week"): one value of the thing, as a number is.
_FREQUENCIES = frozenset(
    {"hourly", "daily", "nightly", "weekly", "biweekly", "fortnightly", "monthly", "quarterly", "yearly"}
    | {"annually", "semiannually", "once", "twice", "thrice"}
)
_EVERY = frozenset({"every", "each"})
_TIMES_A = frozenset({"once", "twice", "thrice"})  # "twice a week": how often with the words after it
_UNITS = frozenset(
    {"minute", "hour", "day", "night", "morning", "evening", "week", "weekend", "month", "quarter", "year"}
    | {"sprint", "release"}
)


# Numbers in words, as a count of units after "every" ("every two weeks").
_NUMBER_WORDS = frozenset({"two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve"})


def _how_often(tokens: Sequence[str], at: int) -> bool:
    """Whether the word at ``at`` of ``comparable_words`` says how often a thing happens: "weekly", "every
    week", or the count in "every 6 hours", "every two weeks"."""
    word = tokens[at]
    if word in _FREQUENCIES or (at > 0 and tokens[at - 1] in _EVERY and word in _UNITS):
        return True
    return (
        0 < at < len(tokens) - 1
        and tokens[at - 1] in _EVERY
        and (word in _NUMBER_WORDS or word.isdigit())
        and tokens[at + 1].removesuffix("s") in _UNITS
    )


# How often, said in one word, as a count of units ("hourly": every 1 hour).
_PERIODS = {
    "hourly": (1, "hour"),
    "daily": (1, "day"),
    "nightly": (1, "day"),
    "weekly": (1, "week"),
    "biweekly": (2, "week"),
    "fortnightly": (2, "week"),
    "monthly": (1, "month"),
    "quarterly": (1, "quarter"),
    "semiannually": (6, "month"),
    "yearly": (1, "year"),
    "annually": (1, "year"),
}
_COUNTS = {
    word: count
    for count, word in enumerate(
        ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"], 2
    )
}
# Each unit in days ("every night" is "daily"; a month is about 30 days). Not a weekend, a sprint or a
# release: how long those are is not said.
_DAYS = {
    "minute": 1 / 1_440,
    "hour": 1 / 24,
    "day": 1.0,
    "night": 1.0,
    "morning": 1.0,
    "evening": 1.0,
    "week": 7.0,
    "month": 30.44,
    "quarter": 91.31,
    "year": 365.25,
}
_SAME_PERIOD = 0.1  # "every 4 weeks" and "monthly", "every 30 days" and "monthly": said as one period


def _count(word: str) -> int | None:
    """A count of units after "every": "15", "two" (not "²", nor a number too long to be a count)."""
    if word in _COUNTS:
        return _COUNTS[word]
    return int(word) if word.isascii() and word.isdigit() and len(word) <= 6 else None


def _frequency_spans(words: Sequence[str]) -> dict[int, list[int]]:
    """Where ``words`` say how often: for each start, the ends ("hourly", "every week", "every 15 minutes")."""
    spans: dict[int, list[int]] = {}
    for at, word in enumerate(words):
        if word in _FREQUENCIES and word not in _TIMES_A:
            spans.setdefault(at, []).append(at + 1)
        elif word in _EVERY and at + 1 < len(words):
            if words[at + 1].removesuffix("s") in _UNITS:
                spans.setdefault(at, []).append(at + 2)
            elif (
                _count(words[at + 1]) is not None
                and at + 2 < len(words)
                and words[at + 2].removesuffix("s") in _UNITS
            ):
                spans.setdefault(at, []).append(at + 3)
    return spans


def _period(said: Sequence[str]) -> float | None:
    """How often ``said`` (a ``_frequency_spans`` span) says, in days; None when it does not say how long
    ("every sprint", "every weekend")."""
    if len(said) == 1:
        count, unit = _PERIODS.get(said[0], (0, ""))
    else:
        unit = said[-1].removesuffix("s")
        count = (_count(said[1]) or 0) if len(said) == 3 else 1
    days = _DAYS.get(unit)
    return count * days if count and days else None


def _often_apart(words: Sequence[str], theirs: Sequence[str]) -> tuple[str, str] | None:
    """(the older, the newer) when two statements say the same words but how often, said in a word in one
    and in several in the other, and another period ("The backup job runs every 15 minutes", then "... runs
    hourly": a trial saw the two kept as two facts; not "every 60 minutes" and "hourly", nor "every sprint",
    whose length is not said; one word for another is ``_how_often``'s)."""
    same_start = 0
    for mine, old in zip(words, theirs, strict=False):
        if mine != old:
            break
        same_start += 1
    same_end = 0
    for mine, old in zip(reversed(words), reversed(theirs), strict=False):
        if mine != old:
            break
        same_end += 1
    their_spans = _frequency_spans(theirs)
    for start, ends in _frequency_spans(words).items():
        if start > same_start:
            break
        for end in ends:
            after = len(words) - end
            their_end = len(theirs) - after
            if (
                after > same_end
                or their_end not in their_spans.get(start, ())
                or their_end - start == end - start
            ):
                continue
            mine_days, old_days = _period(words[start:end]), _period(theirs[start:their_end])
            if mine_days is None or old_days is None or abs(mine_days - old_days) <= _SAME_PERIOD * old_days:
                return None  # the same period in other words, or one whose length is not said
            return " ".join(theirs[start:their_end]), " ".join(words[start:end])
    return None


def plain_value_changes(
    memory: ContradictionInput, others: Sequence[ContradictionInput]
) -> list[Contradiction]:
    """The older of ``others`` that say what ``memory`` says word for word, in the same order, but for one
    value in one place, with no word of change in either ("The frontend build uses Node 18", then "... Node
    20"): two values of one thing, the newer most likely the current one. Such a pair only disputes (a new
    user's trial: the two stood as two facts, the older recalled first): nothing says it changed. The value
    must follow, in both, one of the words that say what a thing is, uses or runs on (``_PREDICATE_CUES``,
    within three words), so that events on two days ("Deploy failed on Tuesday"), two of a series ("Sprint
    14", "issue 123") and one value for two subjects ("We use Node 18", "They use Node 20") stay two facts.
    A name in the value's place counts as one ("is owned by Carla Reyes", then "... by Dmitri Volkov";
    ``_name_in_place``). What ``value_changes`` reads (a word of change, a value given up, "also") is left
    to it."""
    text = joined_as_words(memory.content)
    if says_more_than_a_value(text):
        return []
    tokens = comparable_words(text)
    names = _names_at(text, tokens)
    # (a capital that only starts the text names nothing; a team is named in lower case too)
    named = names is not None and (any(names[1:]) or _team_named(tokens))
    often = [at for at in range(len(tokens)) if _how_often(tokens, at)]
    identified = any(joint in name for name in names_in(memory.content) for joint in "./@:_")
    if len(tokens) < 3 or not (named or often or identified or any(is_value(token) for token in tokens)):
        return []
    named = named and names is not None and not negated(text)  # (a name in a denial disputes nothing)
    found = []
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at:
            continue
        theirs, their_names, says_a_change = _plain_reading(other.content)
        if says_a_change:
            continue  # the older said a change ("now 18"): a value change, ``value_changes``'s to read
        if len(theirs) != len(tokens):
            how_often = (
                _often_apart(tokens, theirs) if not (negated(text) or negated(other.content)) else None
            )
            if how_often is not None:
                found.append(
                    Contradiction(other.id, memory.id, *how_often, 1.0, only_disputes=NOT_SAID_TO_CHANGE)
                )
            continue
        if named and names is not None and their_names is not None and not negated(other.content):
            name = _name_in_place(tokens, names, theirs, their_names)
            if name is not None:
                found.append(Contradiction(other.id, memory.id, *name, 1.0, only_disputes=NOT_SAID_TO_CHANGE))
                continue
        timed = _time_apart(tokens, theirs)
        if timed is not None:
            # A time with another unit ("10 seconds", then "10 minutes"; "15 minutes", then "1 hours"): a
            # value of it, read whole (a review: spelt one way, the unit alone differed and nothing was read).
            if _after_a_cue(tokens, timed[0]):
                found.append(
                    Contradiction(
                        other.id, memory.id, timed[1], timed[2], 1.0, only_disputes=NOT_SAID_TO_CHANGE
                    )
                )
            continue
        at = _one_place_apart(tokens, theirs)
        if at is None:
            continue
        new, old = tokens[at], theirs[at]
        if at in often and _how_often(theirs, at):
            # How often the same thing happens ("The staging database password rotates monthly", then
            # "... weekly"): one value of it, whatever the verb (a new user's trial saw both kept undisputed).
            found.append(Contradiction(other.id, memory.id, old, new, 1.0, only_disputes=NOT_SAID_TO_CHANGE))
            continue
        if not (is_value(new) or is_value(old)) and _where_it_is(tokens, at):
            # An identifier in the value's place ("runs on host ash.internal", then "... oak.internal": a
            # team's trial saw the two stand undisputed): the parts that differ, read whole.
            identifiers = _identifier_of(new, memory.content), _identifier_of(old, other.content)
            if identifiers[0] and identifiers[1]:
                found.append(
                    Contradiction(
                        other.id,
                        memory.id,
                        identifiers[1],
                        identifiers[0],
                        1.0,
                        only_disputes=NOT_SAID_TO_CHANGE,
                    )
                )
            continue
        if not (is_value(new) and is_value(old)) or _kinds({new}) != _kinds({old}):
            continue
        if _names_another_thing({new}, {old}) or not (_after_a_cue(tokens, at) or _setting_after(tokens, at)):
            continue
        found.append(Contradiction(other.id, memory.id, old, new, 1.0, only_disputes=NOT_SAID_TO_CHANGE))
    return found


# Where one thing is, runs or points (one place at a time): "runs on host ...", "lives in ...", "is ...".
# Not "uses": "the backend uses cache.internal" and "... uses db.internal" say two things it uses.
_WHERE_CUES = frozenset({"runs", "lives", "hosted", "located", "points", "deployed", "served", "stored"})


def _where_it_is(tokens: Sequence[str], at: int) -> bool:
    """Whether the identifier at ``at`` says where a thing is (a ``_WHERE_CUES`` word within three words
    before it) or what it is (one of the ``_NAME_CUES`` right before it)."""
    return bool(at) and (
        tokens[at - 1] in _NAME_CUES or not _WHERE_CUES.isdisjoint(tokens[max(0, at - 3) : at])
    )


def _identifier_of(part: str, text: str) -> str | None:
    """The identifier of ``text`` (``retrieval.text.names_in``: a host, a path, an address, joined by a dot,
    a slash, "@", a colon or an underscore) that ``part`` is a word of, if any."""
    for name in names_in(text):
        if any(joint in name for joint in "./@:_") and part in _TOKEN.findall(name):
            return name
    return None


_NOW = re.compile(r"\s+now\b(?=\s|[.!]?\s*$)", re.IGNORECASE)
# A port or a version said to have changed, in the words people use for it: "the API port is now 9090",
# "... port changed to 9090", "the API moved to port 9090" (a new user's trial: none was linked to "the API
# listens on port 8080", which recall then put first).
_NAMED_CHANGE = (
    re.compile(
        r"\b(?P<name>port|version)\s+(?:is\s+now|now\s+is|(?:was\s+|has\s+been\s+)?(?:changed|moved|"
        rf"switched|bumped|upgraded)\s+to)\s+(?P<value>{_VALUE})",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:now\s+)?(?:moved|changed|switched|bumped|upgraded)\s+to\s+(?P<name>port|version)\s+"
        rf"(?P<value>{_VALUE})",
        re.IGNORECASE,
    ),
)
# The words of what a thing is or does that say nothing of which thing it is ("the API listens on port").
_NOT_THE_THING = frozenset({"listen", "run", "use", "serve", "expose", "bind", "now", "port", "version"})


_CONDITION_WORDS = r"(?:if|when|whenever|should|unless|once)\b"
_CONDITION = re.compile(rf"\s*{_CONDITION_WORDS}", re.IGNORECASE)


def _the_thing(text: str) -> frozenset[str]:
    """What a port or version is of, in the words before it: its content terms but the verbs of what it
    does and values."""
    return frozenset(t for t in content_terms(text) if t not in _NOT_THE_THING and not is_value(t))


def named_value_changes(
    memory: ContradictionInput, others: Sequence[ContradictionInput]
) -> list[Contradiction]:
    """The older of ``others`` whose one port (or version) ``memory`` says changed, in other words than
    theirs: "the API port is now 9090", "the API port changed to 9090" or "the API moved to port 9090" after
    "the API listens on port 8080". What the port is of (``memory``'s words before the change, at least
    one) must all be words of the older memory, which names one value after "port" and another than the new
    one. An older memory that says another value besides ("... on port 8080 and uses Node 18") is disputed,
    not revised (``SAYS_MORE``)."""
    text = joined_as_words(memory.content)
    said = next((hit for pattern in _NAMED_CHANGE if (hit := pattern.search(text))), None)
    if said is None or _ADDING.search(text) or _CONDITION.match(text):
        return []
    # Anything after the value may say where it holds ("... in staging", a review): only why or when it
    # changed is set aside ("because ...", "last week"); "after ..." may say either, and then only disputes.
    after = text[said.end() :].strip(" .!")
    reason = _REASON.match(f" {after}") if after else None
    if after and reason is None:
        return []
    where = reason is not None and reason.group("either") is not None
    name, new = said.group("name").lower(), said.group("value").lower().rstrip(".")
    thing = _the_thing(text[: said.start()])
    if not thing:
        return []
    named = re.compile(rf"\b{name}\s+(?P<value>{_VALUE})", re.IGNORECASE)
    several = re.compile(rf"\b{name}s\b", re.IGNORECASE)  # "listens on ports 8080 and 8443": not one
    found = []
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at or negated(other.content):
            continue
        older = joined_as_words(other.content)
        spots = list(named.finditer(older))
        if len(spots) != 1 or several.search(older):
            continue
        spot = spots[0]
        # The same thing, in the same words, before its value ("The API listens on port": "the API"), and
        # nothing after it: "The metrics endpoint of the API ..." or "... on port 443 forwards to ..." are
        # other things (a review).
        was = spot.group("value").lower().rstrip(".")
        if was == new or _the_thing(older[: spot.start()]) != thing:
            continue
        more = bool(older[spot.end() :].strip(" .!"))  # "... on port 8080 and runs Node 18"
        found.append(
            Contradiction(
                other.id,
                memory.id,
                was,
                new,
                1.0,
                named_in_words=True,
                only_disputes=SAYS_MORE if more else MAY_HOLD_WHERE if where else None,
            )
        )
    return found


def now_value_changes(
    memory: ContradictionInput, others: Sequence[ContradictionInput]
) -> list[Contradiction]:
    """What ``plain_value_changes`` reads once the word "now" is set aside, when "now" is all that says
    a change ("The billing service is now owned by Lena Ortiz" after "... is owned by Marco Bianchi", "The
    API port is now 9090" after "The API port is 8080"): a change said in words, so the pair is a revision
    (``named_in_words``), where without "now" it would only dispute. A new user's trial saw "now" leave the
    pair unlinked, the older recalled first: a clearer word of change must never read as less."""
    text = joined_as_words(memory.content)
    if len(_NOW.findall(text)) != 1:
        return []
    plain = _NOW.sub("", text, count=1)
    if says_more_than_a_value(plain):
        return []
    found = plain_value_changes(replace(memory, content=plain), others) or _choice_in_place(
        plain, memory, others
    )
    return [replace(change, named_in_words=True, only_disputes=None) for change in found]


# Verbs of a preference or a choice, after which another word with "now" says the choice changed ("Bob
# prefers rebase merges now" after "Bob prefers squash merges": a trial saw the two kept as two facts, the
# older recalled first). Not "is", "uses" or "requires": another word after them often adds to what holds
# ("The frontend uses TypeScript now" beside React; a review saw it retire a memory still true).
_CHOICE_CUES = frozenset(
    {"prefers", "prefer", "likes", "like", "favours", "favors", "wants", "want", "chose", "picked"}
)


_OPPOSED = frozenset(word for pair in DEFAULT_OPPOSITIONS for word in pair)


def _choice_in_place(
    plain: str, memory: ContradictionInput, others: Sequence[ContradictionInput]
) -> list[Contradiction]:
    """The older of ``others`` that say ``plain`` (``memory`` without its "now") word for word but for one
    word, no function word, within three words after one of the ``_CHOICE_CUES``; neither denies, nor does
    the older say a change. Not a value (``plain_value_changes`` reads those) nor the subject: "Alice prefers
    rebase merges now" names another person than "Bob prefers squash merges"."""
    tokens = comparable_words(plain)
    if len(tokens) < 3 or negated(plain):
        return []
    found = []
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at or negated(other.content):
            continue
        theirs, _, says_a_change = _plain_reading(other.content)
        if len(theirs) != len(tokens) or says_a_change:
            continue
        at = _one_place_apart(tokens, theirs)
        if at is None:
            continue
        new, old = tokens[at], theirs[at]
        if {new, old} & STOPWORDS or is_value(new) or is_value(old) or {new, old} <= _OPPOSED:
            continue  # (opposites, "enabled" then "disabled": ``detect_contradictions`` reads those)
        if _CHOICE_CUES.isdisjoint(tokens[max(0, at - 3) : at]):
            continue
        found.append(Contradiction(other.id, memory.id, old, new, 1.0))
    return found


# Words that open a correction of what was said before ("Correction: ...", "Scratch that - ...", "I was wrong,
# ...", "Actually, ..."): the speaker says in words that what follows replaces something. ("Actually, the max
# upload size is 25 MB" after "The max upload size is 10 MB" by the same writer: a new user's trial saw the
# pair only disputed.)
_CORRECTING = re.compile(
    r"^\s*(?:actually|correction|corrected|scratch\s+that|strike\s+that|to\s+correct\s+(?:that|myself|the\s+above)|"
    r"i\s+was\s+wrong|my\s+(?:mistake|bad))(?:\s*[:,.]\s*|\s*[-\u2013\u2014]+\s*)",
    re.IGNORECASE,
)


def without_correction_label(text: str) -> str:
    """``text`` without a label that opens a correction or an update ("Correction:", "Scratch that -",
    ``_CORRECTING``, ``_LABEL``)."""
    opened = _CORRECTING.match(text) or _LABEL.match(text)
    return text[opened.end() :] if opened and opened.end() < len(text) else text


def corrected_value_changes(
    memory: ContradictionInput, others: Sequence[ContradictionInput]
) -> list[Contradiction]:
    """What ``plain_value_changes`` reads once a word that opens a correction is set aside ("Scratch that -
    the staging database password rotates weekly" after "... rotates monthly"): a change said in words, as
    with "now" (``now_value_changes``). A new user's trial saw such a correction kept beside what it
    corrected, undisputed, the older recalled first."""
    opened = _CORRECTING.match(memory.content)
    if opened is None or opened.end() >= len(memory.content):
        return []
    rest = memory.content[opened.end() :]
    found = plain_value_changes(replace(memory, content=rest), others)
    return [replace(change, named_in_words=True, only_disputes=None) for change in found]


# "now" that says how a thing is done now, before the command: "are now run with", "now runs with", "is now
# done through". Not an instruction's next step ("Deploy with `./deploy.sh production` now", a review).
# ("We now deploy ...": a person's "now" before a verb too, trial 184.)
_STATED_NOW = re.compile(
    r"\b(?:is|are|gets?)\s+now\b|\bnow\s+[a-z]+s\b|\b(?:we|they|you|i)\s+now\s+[a-z]+\b", re.IGNORECASE
)


def said_command_changes(
    memory: ContradictionInput, others: Sequence[ContradictionInput]
) -> list[Contradiction]:
    """What ``plain_command_changes`` reads once the one "now" or the label that opens a correction is set
    aside ("Integration tests are now run with `pnpm test:integration`" after "... with `npm run
    test:int`"): a command said to have changed in words, as a value is (``now_value_changes``). A new
    user's trial saw such a pair kept apart, the older command recalled first."""
    text = memory.content
    opened = _CORRECTING.match(text)
    if opened is not None and opened.end() < len(text):
        if opened.group(0).strip(" ,:").lower() == "actually":
            return []  # ("Actually, install it with `apt install jq`": maybe another platform's way, a review)
        plain = text[opened.end() :]
    elif len(_NOW.findall(text)) == 1 and _STATED_NOW.search(text.split("`", 1)[0]):
        plain = _NOW.sub("", text, count=1)
    else:
        return []
    found = plain_command_changes(replace(memory, content=plain), others)
    return [replace(change, named_in_words=True, only_disputes=None) for change in found]


# A command or path said in code (backticks) is a value of what does a thing: "Deploy to production with
# `make deploy ENV=prod`", then "... with `argocd app sync web-prod`" (a trial: four such memories stood
# as four facts, the oldest first). The code follows one of these words within three, which say how a
# thing is done; "run" or "is" do not (a review: "Before pushing, run `make lint`" and "... `make test`",
# "The pre-commit hook runs `ruff check`" and "... `ruff format`" are steps of one list).
_CODE = re.compile(r"`([^`\n]+)`")
_COMMAND_CUES = frozenset({"with", "via", "using", "through"})
_CODE_MARK = "codespan"


def plain_command_changes(
    memory: ContradictionInput, others: Sequence[ContradictionInput]
) -> list[Contradiction]:
    """The older of ``others`` that say what ``memory`` says word for word but for one command or path in
    backticks (``_CODE``), with no word of change: two commands for one thing, the newer most likely the
    current one. Such a pair only disputes, as ``plain_value_changes``'s. Not when one command extends the
    other (`pnpm test`, `pnpm test --watch`: another use of the same). The caller asks it of one agent's
    memories: another agent's command may be for its own setup."""
    text = memory.content
    if says_more_than_a_value(text):
        return []
    mine = _CODE.findall(text)
    if not mine:
        return []
    frame = _code_frame(text)
    found = []
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at or _CHANGED.search(other.content):
            continue
        theirs = _CODE.findall(other.content)
        if len(theirs) != len(mine) or _code_frame(other.content) != frame:
            continue
        differ = [
            i for i, (new, old) in enumerate(zip(mine, theirs, strict=True)) if new.strip() != old.strip()
        ]
        if len(differ) != 1:
            continue
        at = [i for i, token in enumerate(frame) if token == _CODE_MARK][differ[0]]
        if not any(frame[i] in _COMMAND_CUES for i in range(max(0, at - 3), at)):
            continue
        new, old = mine[differ[0]].strip(), theirs[differ[0]].strip()
        if new.split()[: len(old.split())] == old.split() or old.split()[: len(new.split())] == new.split():
            continue
        found.append(Contradiction(other.id, memory.id, old, new, 1.0, only_disputes=NOT_SAID_TO_CHANGE))
    return found


def _code_frame(text: str) -> list[str]:
    """``text``'s words with each span of code one mark: what two commands for one thing share."""
    return _TOKEN.findall(_CODE.sub(f" {_CODE_MARK} ", text).lower())


# A thing the newer memory names as given up, a command or a name rather than a value (", not make
# db-up", "(instead of `npm install`)"): after a comma or a parenthesis, one to three words, up to the end
# of the clause.
_THING_GIVEN_UP = re.compile(
    r"(?:,|\()\s*(?:not|instead\s+of|rather\s+than)\s+(?P<thing>[`'\"]?[\w./-]+(?:\s+[\w./-]+){0,2}?[`'\"]?)"
    r"\s*(?=[.,;:)(]|$)",
    re.IGNORECASE,
)
# Or given up in a sentence of its own: "catalog-service does not use Memcached anymore", "no longer runs on
# Jenkins", "Memcached is no longer used" (a second trial: "The catalog-service caches product lookups in
# Memcached on cache-01.kestrel.internal:11211" stood undisputed beside the first).
_THING = r"[`'\"]?[\w./-]+(?:\s+[\w./-]+){0,2}?[`'\"]?"
# What it is no longer used for, or where, up to the end of the clause: "no longer use Postgres for the
# billing service storage", "Memcached is no longer used for product lookups". The older memory must say
# all of it too: "We no longer use Postgres for caching" gives up no Postgres the storage still uses.
# (word by word, so that a run of spaces is read once: as any characters, 10,000 spaces took 5 s)
_PURPOSE = (
    r"(?:\s+(?P<purpose>(?:for|in|on|at|as|with|by)(?:\s+[^\s.,;:()]+)+?)"
    r"(?=\s*(?:\bany\s*more\b|[.,;:)(]|$)))?"
)
# (who no longer uses it is said before: "catalog-service does not use ...")
_NO_LONGER_USES = re.compile(
    r"\b(?:does\s+not|doesn't|do\s+not|don't|no\s+longer)\s+(?:uses?|runs?\s+on|depends?\s+on)\s+"
    rf"(?P<thing>{_THING}){_PURPOSE}\s*(?=\bany\s*more\b|[.,;:)(]|$)",
    re.IGNORECASE,
)
_NO_LONGER_USED = re.compile(
    rf"(?:^|(?<=[.;:,]\s))(?P<thing>{_THING})\s+(?:is|are)\s+no\s+longer\s+(?:used|in\s+use)\b{_PURPOSE}",
    re.IGNORECASE,
)
NAMED_AS_GIVEN_UP = "the newer memory names what the older one says as given up"
_CONDITION_IN = re.compile(rf"\b{_CONDITION_WORDS}", re.IGNORECASE)
_NO_USER_WORDS = frozenset(content_terms("we our now longer"))
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an|our)\s+(?=\S)")


def _named_terms(text: str) -> frozenset[str]:
    """The stemmed content words of ``text`` that name who or what (none for "We ": unlike
    ``content_terms``, function words alone are not kept)."""
    return frozenset(light_stem(w) for w in word_tokens(text) if w not in STOPWORDS) - _NO_USER_WORDS


def things_given_up(memory: ContradictionInput, others: Sequence[ContradictionInput]) -> list[Contradiction]:
    """The older of ``others`` that say, word for word, a thing ``memory`` names as given up, and share two
    more words of what they are about: "Migrations are applied with make migrate (goose), not make db-up"
    after "Database migrations are applied with `make db-up`" (a new user's trial: the outdated memory
    stood undisputed and first). Such a pair only disputes: the newer says what is no longer so, not that
    all the older says is wrong. Values ("not 8080") are ``value_changes``'s."""
    found: list[Contradiction] = []
    things: list[tuple[str, set[str], frozenset[str]]] = []  # (thing, its terms, who gives it up)
    patterns = (_THING_GIVEN_UP, _NO_LONGER_USES, _NO_LONGER_USED)
    for pattern in patterns:
        for match in pattern.finditer(memory.content):
            # (a sentence's full stop is no part of the thing: "..., not main." gives up "main")
            thing = " ".join(match.group("thing").strip("`'\"").lower().split()).rstrip(".")
            # ("the staging cluster": what is named is "staging cluster")
            thing = _LEADING_ARTICLE.sub("", thing)
            terms = set(content_terms(thing))
            # What it was used for, the older memory must say as well (``_PURPOSE``).
            user = _named_terms(match.groupdict().get("purpose") or "")
            if pattern is _NO_LONGER_USES:
                # Who no longer uses it, said before, in its sentence: the older memory must say all of it
                # ("Unit tests for the billing service do not use Postgres" is about the tests, "The mobile app
                # CI pipeline no longer runs on Jenkins" about the mobile app's); and not as a condition ("If
                # the billing service does not use Postgres, ..."): a review found both disputing.
                before = re.split(r"[.!?;]\s", memory.content[: match.start()])[-1]
                if _CONDITION_IN.search(before):
                    continue
                user |= _named_terms(before)
            if terms and not any(is_value(term) for term in terms):
                things.append((thing, terms, user))
    if not things:
        return found
    stated = memory.content
    for pattern in patterns:  # what it was used for stays part of what the newer memory is about
        stated = pattern.sub(lambda match: f" {match.groupdict().get('purpose') or ''} ", stated)
    subject = set(content_terms(stated))
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at:
            continue
        said = said_of(other)
        rest = set(content_terms(other.content))
        for thing, terms, user in things:
            if not re.search(rf"(?<![\w-]){re.escape(thing)}(?![\w-])", said) or terms <= subject:
                continue  # not said by the older one, or said again by the newer one itself
            if not user <= rest:
                continue  # another user of the thing
            shared = (subject & rest) - terms
            if len(shared) >= 2 and negated(other.content) == negated(stated):
                similarity = len(subject & rest) / len(subject | rest)
                found.append(
                    Contradiction(
                        other.id,
                        memory.id,
                        thing,
                        f"not {thing}",
                        round(similarity, 6),
                        named_in_words=True,
                        only_disputes=NAMED_AS_GIVEN_UP,
                    )
                )
                break
    return found


def restates_given_up(
    memory: ContradictionInput, others: Sequence[ContradictionInput]
) -> list[Contradiction]:
    """The pairs of ``memory``, which states a value plainly (it says no change itself), and an older of
    ``others`` that names that value as given up while it says the new one ("... now listens on port 9443
    after the mTLS migration (it was 8443)", then another agent's "Payments service port is 8443 in prod":
    a trial saw the stale value recalled first, unmarked). ``memory`` is the disputed one of each pair
    (``older_id``), as if the older memory's change had come after it: what ``value_changes`` reads then,
    with the value named in words."""
    if says_more_than_a_value(memory.content) or not says_values(memory):
        return []
    after = memory.created_at + timedelta(microseconds=1)
    found = []
    for other in others:
        if (
            other.id == memory.id
            or other.created_at > memory.created_at
            or not says_more_than_a_value(other.content)
        ):
            continue
        for change in value_changes(replace(other, created_at=after), [memory]):
            if change.older_id == memory.id and change.named_in_words:
                found.append(change)
    return found


def late_value_changes(
    memory: ContradictionInput, newer: Sequence[ContradictionInput]
) -> list[Contradiction]:
    """The pairs of ``memory`` and memories of ``newer`` (dated after it) that read as one value of one
    thing changed, either way round: ``memory`` says its value changed ("now runs 4 nodes") where a newer
    one says another value ("runs 6 nodes"), or a newer one says the change. ``memory`` is the older of
    each (``older_id``): history remembered after what followed it arrives outdated on that point."""
    latest = max((other.created_at for other in newer), default=memory.created_at)
    # ``memory`` as if it came after them: each pair it would revise then is one it is older than now.
    found = [
        replace(
            change,
            older_id=memory.id,
            newer_id=change.older_id,
            older_term=change.newer_term,
            newer_term=change.older_term,
        )
        for change in (
            *value_changes(replace(memory, created_at=latest + timedelta(microseconds=1)), newer),
            *plain_value_changes(replace(memory, created_at=latest + timedelta(microseconds=1)), newer),
        )
    ]
    said = {change.newer_id for change in found}
    for other in newer:
        if other.id not in said and other.created_at > memory.created_at:
            found += value_changes(other, [memory])
    return found


# The look before reading what a neighbour replaced: half of what the two are about in common, the words
# that link a thing to its value ("listens on", "runs on") left out. A restatement must then name its value's
# thing as the memory it restates or the correction does (``_names_alike``).
RESTATED_OVERLAP = 0.5
# Words that say how a thing holds its value, not what the thing is ("billing-api runs on port 8081" and
# "The billing-api service listens on port 8081" say one port of one service), as content terms.
_LINKING = frozenset(
    content_terms(
        "listen listens listening listened run runs running ran use uses using used serve serves serving served "
        "host hosts hosted hosting bind binds bound live lives expose exposes exposed point points pointed "
        "set sits sit located answer answers reachable available"
    )
)
_AFTER_NEGATION = frozenset(content_terms("longer anymore"))
# Where a memory's statements part: its clauses (``_CLAUSE_BREAK``), its sentences, an aside in parentheses
# and "and" ("9090 (8090 is no longer used)", "9090, and 8090 is no longer used").
_STATEMENT_BREAK = re.compile(r"[.!?](?:\s+|$)|[()]|\band\b|" + _CLAUSE_BREAK.pattern, re.IGNORECASE)
# A change "from" one value "to" another ("moved billing-api from port 8081 to 8085", "migrated from
# 10.0.0.5 to 10.0.0.6"): what stands between is what was given up. Not a range or a route without a word
# of change ("allows ports from 8000 to 8100", "forwards requests from port 8090 to port 9090").
_FROM_TO = re.compile(
    r"\b(?:moved|moving|changed|changing|switched|switching|migrated|migrating|upgraded|downgraded|bumped|"
    r"raised|lowered|increased|decreased|reduced|updated|went|shifted|relocated|rotated|renamed)\b"
    r"(?:[^.;!?]|\.(?=\S)){0,60}?\bfrom\b(?P<old>(?:[^.;,!?]|\.(?=\S)){1,80}?)\bto\b",
    re.IGNORECASE,
)
# A negating word that leaves the values of its statement held: "listens on 8085 without TLS".
_HOLDS_WITH = frozenset({"without"})


@keyed_by_text
@lru_cache(maxsize=32_768)
def _values_and_subject(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The values a text says, and what it says them of; remembered, as a write's neighbours are mostly the
    neighbours of the writes before it."""
    text = joined_as_words(text)
    terms = frozenset(content_terms(text))
    values = frozenset(term for term in terms if is_value(term))
    return values, terms - values - _change_stems(text)


def _values_of(text: str) -> frozenset[str]:
    """The values of ``_values_and_subject``, not remembered: for parts of a text."""
    return frozenset(term for term in content_terms(joined_as_words(text)) if is_value(term))


@keyed_by_text
@lru_cache(maxsize=2_048)
def held_values(text: str) -> frozenset[str]:
    """The values ``text`` says hold: those of its statements that negate nothing (or only say "without"),
    less those it says were given up "from" one "to" another after a word of change. "The billing-api does not listen on port 8081 anymore; it listens on
    8085" holds 8085, as "moved billing-api from port 8081 to 8085" does: a correction names the value it
    replaces, and still holds only its own. Remembered for the texts of the latest writes' neighbours."""
    given_up = {value for found in _FROM_TO.finditer(text) for value in _values_of(found["old"])}
    held: set[str] = set()
    for statement in _STATEMENT_BREAK.split(text):
        if not statement or not statement.strip():
            continue
        negation = negating_word(statement)
        if negation is None or negation in _HOLDS_WITH:
            held |= _values_of(statement)
    return frozenset(held - given_up)


def _about(text: str) -> frozenset[str]:
    """What a text says its values of, without its negations ("no longer", "not ... anymore") and the words
    that link a thing to its value (``_LINKING``). Read from the text's remembered subject; the words of a
    negation that are content words ("longer", "anymore") send it through the text without its negations."""
    subject = _values_and_subject(text)[1]
    if subject & _AFTER_NEGATION:
        subject = _values_and_subject(without_negations(text))[1]
    return subject - _LINKING


def _named_before(text: str, values: AbstractSet[str]) -> frozenset[str]:
    """The content words before the first of ``values`` in ``text`` (linking words left out): what it names
    as holding the value ("billing-api runs on port" for 8081)."""
    return frozenset(_words_before(text, values)) - _LINKING


def _words_before(text: str, values: AbstractSet[str]) -> tuple[str, ...]:
    """The content words before the first of ``values`` in ``text``, in order (none when no value is in it)."""
    words: list[str] = []
    for word in content_terms(joined_as_words(text)):
        if word in values:
            return tuple(words)
        words.append(word)
    return ()


# A host's or a file's name: words joined by dots, with no digit ("mail-relay.kestrel.internal").
_DOTTED_NAME = re.compile(r"(?<![\w.-])(?:[A-Za-z][\w-]*\.)+[A-Za-z][\w-]*(?![\w-]|\.\w)")
_RAW_WORD = re.compile(r"[\w'-]+")
_DETERMINERS = frozenset({"the", "a", "an", "our", "its", "their", "this", "that", "these", "those"})


def _names_the_thing(names: AbstractSet[str], older: str, value: str) -> bool:
    """Whether ``older`` names the thing that holds ``value`` with ``names`` (a newer memory's words before
    its value): the same words, or those after more words before them and a host's name among them ("The
    SMTP relay ... port" in "Outgoing mail is sent through the SMTP relay mail-relay.kestrel.internal on
    port 587"). Not with another word among them: "The api-gateway exposes metrics on port 9102" names a
    part of the api-gateway ("metrics"), not the thing "The api-gateway ... port" names."""
    # (a dotted name the newer memory names as well stays: "The settings.py file ...")
    plain = _DOTTED_NAME.sub(
        lambda found: found.group(0) if set(content_terms(found.group(0))) <= names else " ", older
    )
    before = _words_before(plain, {value})
    starts = [at for at, word in enumerate(before) if word in names]
    if not starts or not names <= set(before) - _LINKING or set(before[starts[0] :]) - _LINKING - names:
        return False
    if starts[0] == 0:
        return True
    # After more words, the thing's name opens a phrase of its own ("through the SMTP relay"), not one that a
    # word before it qualifies: "The metrics server listens on port 8080" is not "The server" of "The server
    # now listens on port 9090".
    words = _RAW_WORD.findall(plain)
    first = next((at for at, word in enumerate(words) if set(content_terms(word)) & names), None)
    return first is not None and (first == 0 or words[first - 1].lower() in _DETERMINERS)


def _names_alike(memory: str, gone: str, current: str, values: AbstractSet[str]) -> bool:
    """Whether ``memory`` names the thing that holds ``values`` as ``gone`` did: each word before the value
    in it is one ``gone`` has before the value, or one the correction ``current`` is about ("billing-api ...
    port" beside "The billing-api service ... port"); not another thing of the same kind ("The metrics
    server ... port" is not "The API server ... port"), nor a part of the thing ("The billing-api metrics
    exporter ... port" is not "billing-api ... port")."""
    mine = _named_before(memory, values)
    return bool(mine) and mine <= _named_before(gone, values) | _about(current)


def says_values(memory: ContradictionInput) -> bool:
    """Whether the memory states a value at all (most of a conversation's turns do not)."""
    return bool(_values_and_subject(memory.content)[0])


def may_restate_a_correction(memory: ContradictionInput, current: ContradictionInput) -> bool:
    """The cheap look before ``restated_correction`` reads what ``current`` replaced: each says a value the
    other does not hold (``held_values``), of one kind, about the same thing (``RESTATED_OVERLAP`` of what
    they are about)."""
    values = _values_and_subject(memory.content)[0]
    current_values = held_values(current.content)
    mine, theirs = _about(memory.content), _about(current.content)
    return bool(
        values - current_values
        and current_values - values
        and _kinds(values - current_values) == _kinds(current_values - values)
        and mine
        and set_jaccard(mine, theirs) >= RESTATED_OVERLAP
    )


def values_replaced(older: ContradictionInput, newer: ContradictionInput) -> Contradiction | None:
    """``newer`` names each value ``older`` says and holds none of them (``held_values``), and holds another
    of the same kind in their place, for the thing the older one names (``RESTATED_OVERLAP`` of what they
    are about, ``_names_no_more``): "search-indexer now listens on port 9090; port 8090 is no longer used"
    after "The search-indexer service listens on port 8090" (a new user's trial found the pair only
    disputed). A revision in words, as "9090, not 8090" is. None when ``older`` says no value, negates, or
    says a value the newer one does not name (it says more than what was given up)."""
    values = _values_and_subject(older.content)[0]
    said, held = _values_and_subject(newer.content)[0], held_values(newer.content)
    instead = held - values
    if not values or not values <= said or values & held or not instead or negated(older.content):
        return None
    if _kinds(values) != _kinds(instead):
        return None
    mine, theirs = _about(older.content), _about(newer.content)
    overlap = set_jaccard(mine, theirs) if mine else 0.0
    if overlap < RESTATED_OVERLAP or not _names_no_more(newer.content, instead, older.content, values):
        return None
    return Contradiction(
        older.id,
        newer.id,
        " ".join(sorted(values)),
        " ".join(sorted(instead)),
        round(overlap, 6),
        named_in_words=True,
    )


# Words that say a value is added beside the one held, not put in its place ("now also listens on 9443").
_ADDS = re.compile(r"\b(?:also|as well|too|additionally|in addition|another)\b", re.IGNORECASE)


def value_said_now(older: ContradictionInput, newer: ContradictionInput) -> Contradiction | None:
    """``newer``, which says that something changed (its words of change are the caller's to read), holds a
    value of a thing to which ``older`` gives another value of that kind: the words before the new value
    in ``newer`` (two at least) name the thing as ``older`` names it before one of its values that ``newer``
    does not hold (``_names_the_thing``), and all that ``newer`` is about, ``older`` is about too. "Grafana
    now listens on port 9090" after "Grafana listens on port 3000 on grafana.kestrel.internal", "Update:
    api-gateway port is 9090" after "The api-gateway listens on port 8080" (a new user's trial: neither was
    read, the older value recalled first); "The SMTP relay now uses port 2525" after "Outgoing mail is sent
    through the SMTP relay mail-relay.kestrel.internal on port 587" (a second trial). Not "The api-gateway
    now listens on port 9090" beside "The api-gateway exposes metrics on port 9102": the metrics port is a
    part of it. The older memory says more than the value (a host after it, a framework), so the pair only
    disputes (``SAYS_MORE``): recall reads the newer first and marks the older. None when ``newer`` adds a
    value ("now also listens on 9443"), or ``older`` negates."""
    text = without_correction_label(newer.content)
    if _ADDS.search(text) or negated(older.content):
        return None
    old_values = _values_and_subject(older.content)[0]
    held = held_values(text)
    new = held - old_values
    names = _named_before(text, new) if new else frozenset()
    if len(names) < 2:
        return None
    mine, theirs = _about(older.content), _about(text)
    if not theirs or len(mine & theirs) < len(theirs):
        return None
    for value in sorted(old_values - held):
        if _kinds({value}) == _kinds(new) and _names_the_thing(names, older.content, value):
            overlap = round(set_jaccard(mine, theirs), 6)
            return Contradiction(
                older.id, newer.id, value, " ".join(sorted(new)), overlap, only_disputes=SAYS_MORE
            )
    return None


def _names_no_more(
    newer: str, new_values: AbstractSet[str], older: str, old_values: AbstractSet[str]
) -> bool:
    """Whether the words before ``new_values`` in ``newer`` are among those before ``old_values`` in
    ``older``: the new value is of the thing the older memory named, not of a part of it ("search-indexer
    metrics now listen on port 9090" does not replace "search-indexer listens on port 8090")."""
    mine = _named_before(newer, new_values)
    return bool(mine) and mine <= _named_before(older, old_values)


def restated_correction(
    memory: ContradictionInput, current: ContradictionInput, replaced: Sequence[ContradictionInput]
) -> Contradiction | None:
    """``memory`` says a value that ``current`` replaced: one of ``replaced`` (the memories ``current``
    superseded, directly or through others) held it, ``current`` holds another in its place
    (``held_values``: "does not listen on 8081 anymore; it listens on 8085" holds 8085), and ``memory`` says
    nothing of ``current``'s value. "Billing service listens on port 8081" after "The billing service listens
    on port 8081" was corrected to "... port 9090", by any agent; or "billing-api runs on port 8081 (HTTP)",
    written before the correction beside the memory it revised. The two stay, ``memory`` disputed by
    ``current`` (its ``older_id``: it says what the correction replaced; neither is superseded, since a
    restatement the rules link by words is no revision). None when no replaced memory held one of its values
    about the same thing (``RESTATED_OVERLAP`` of what they are about, linking words left out, with the thing
    named as the replaced memory or the correction names it: ``_names_alike``), when it says a value of its
    own that neither holds, or when it negates where the replaced memory does not."""
    values = _values_and_subject(memory.content)[0]
    subject = _about(memory.content)
    current_values = held_values(current.content)
    if not subject:
        return None
    for gone in replaced:
        gone_values = _values_and_subject(gone.content)[0]
        gone_subject = _about(gone.content)
        revived = (values & gone_values) - current_values
        instead = current_values - gone_values  # what the correction put in its place
        if not revived or not instead or instead & values or negated(gone.content) != negated(memory.content):
            continue
        if values - gone_values - current_values:
            continue  # a value of its own says which thing or when: "in us-east-1", "PR 14", "until 2025"
        overlap = set_jaccard(subject, gone_subject)
        if overlap >= RESTATED_OVERLAP and _names_alike(
            memory.content, gone.content, current.content, revived
        ):
            return Contradiction(
                memory.id, current.id, " ".join(sorted(revived)), " ".join(sorted(instead)), round(overlap, 6)
            )
    return None
