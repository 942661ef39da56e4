"""Facts that change, said in other words (pure): the rules that link a newer memory to the older one it makes
outdated when the newer does not say the older's words with another value in place. A new user's trial found
7 of 8 such pairs left with the stale memory recalled first and unmarked:

- **A thing given up** (``things_retired``): "we're dropping Redis for the job queue", "make deploy is
  deprecated", "8443 is gone", "We no longer use Jenkins", against "We use Redis for the job queue", "run
  `make deploy ENV=staging`", "billing API moved to port 8443".
- **A switch that names only what it switched to** (``switched_away``): "We switched billing to MySQL" against
  "we use Postgres for billing".
- **A version moved** (``versions_moved``): "Bumped pydantic to 2.9 now that ..." against "We pin pydantic to
  2.7 for now because ...".
- **A time moved** (``times_moved``): "Staging DB reset moved to Saturdays at 03:00 UTC" against "The staging
  database is wiped and reseeded every Sunday at 02:00 UTC".

Each reads a report of what was done, never an instruction, a tip, a plan, a question or a condition ("Remove
the debug flag before the release", "TODO: drop Redis", "removing node_modules fixes it", "we should drop
Redis", "if we remove the cache"): a verb of giving up counts in the past ("dropped", "removed"), with "is" or
"are" before it ("we're dropping"), or as "no longer use", "stopped using", "got rid of". What follows the thing
and says which use was given up ("for the job queue", "in staging", "from the worker", "to reach staging") must
be said by the older memory too.

Each pair only disputes: the newer memory says the older is no longer so on one point, not that all it says is
wrong (its port, its approvers), so recall puts the newer first and marks the older. Only sentences of up to
``SENTENCE_LIMIT`` characters are read (a statement of change is short), which also bounds each rule's time on
a long memory."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache

from retrieval.contradictions import (
    Contradiction,
    ContradictionInput,
    is_value,
    joined_as_words,
    said_of,
    written_out,
)
from retrieval.text import STOPWORDS, content_terms, keyed_by_text, negated

SENTENCE_LIMIT = 400
_SENTENCE = re.compile(r"(?:[^.!?;\n]|[.!?;](?![\s)]|\Z))++[.!?;]*+")


def _says_any(text: str, stems: tuple[str, ...]) -> bool:
    """Whether ``text`` holds one of ``stems`` (lower case): a look far cheaper than the patterns, before them
    (most memories change nothing)."""
    lowered = text.lower()
    return any(stem in lowered for stem in stems)


def _sentences(text: str) -> Iterator[tuple[int, str]]:
    """``text``'s sentences (and clauses after ";") of up to ``SENTENCE_LIMIT`` characters, with where each
    starts. A dot inside a word ("pg-billing-01.internal", "2.7") ends none."""
    for found in _SENTENCE.finditer(text):
        if found.group().strip() and len(found.group()) <= SENTENCE_LIMIT:
            yield found.start(), found.group()


# A thing: one to three words, possibly quoted as code ("`make deploy`", "redis-queue.internal:6379").
_WORD = r"[`'\"]?\w++(?:[./:@=+-]++\w++)*+[`'\"]?"
_THING = rf"(?P<thing>{_WORD}(?:\s+{_WORD}){{0,2}}?)"
# Which use of it was given up: a purpose or a place said right after it ("for the job queue", "in staging").
_WHICH = r"(?P<which>\s+(?:for|in|on|from)\s+[^.,;:()!?]{1,60}?)?"
# When, said after the thing: no part of what was given up ("We retired Jenkins last week").
_WHEN_AFTER = (
    r"last|yesterday|today|this\s+(?:week|month|quarter|sprint|year|morning)|earlier|recently|"
    r"(?:on|in)\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|"
    r"may|june|july|august|september|october|november|december|\d+)"
)
# Where the clause that gives it up ends: its punctuation, or a word that starts another clause or names the
# replacement ("and moving it to SQS", "with Argo CD", "in favour of Unleash", "now that ...").
_CLAUSE_END = (
    r"\s*(?=[.,;:()!?\u2014]|\s+(?:and|but|so|because|since|as|with|by|to|now|then|in\s+favou?r\s+of|"
    rf"after|before|once|when|until|{_WHEN_AFTER})\b|\s*\Z)"
)
_ARTICLE = r"(?:(?:the|our|all|any|its|their)\s+)?"
# A giving up reported as done: in the past, with "is"/"are" before it, or in words that say it is over.
_DONE_VERB = (
    r"(?:dropped|ditched|removed|retired|deprecated|decommissioned|sunsetted|replaced|killed|turned\s+off)"
)
_DOING_VERB = (
    r"(?:dropping|ditching|removing|retiring|deprecating|decommissioning|sunsetting|replacing|killing|"
    r"getting\s+rid\s+of|moving\s+(?:away\s+from|off(?:\s+of)?)|migrating\s+off|turning\s+off|shutting\s+down)"
)
_GIVING_UP = (
    rf"(?:\b{_DONE_VERB}|(?:\b(?:am|is|are|was|were|been)\s+|['\u2019]re\s+){_DOING_VERB}|"
    r"\b(?:moved|migrated|switched)\s+(?:away\s+from|off(?:\s+of)?)|"
    r"\bno\s+longer\s+(?:use|uses|using|(?:run|runs)(?:\s+on)?|need|needs)|\bstopped\s+using|\bgot\s+rid\s+of|"
    r"\b(?:we|they|i)\s+shut\s+down)"
)
# "we're dropping Redis for the job queue", "We no longer use Jenkins", "Removed the nightly export".
_GIVEN_UP_THING = re.compile(
    rf"(?P<verb>{_GIVING_UP})\s+{_ARTICLE}{_THING}{_WHICH}{_CLAUSE_END}", re.IGNORECASE
)
# "We moved CI off CircleCI to GitHub Actions": what was moved is the use given up.
_MOVED_OFF = re.compile(
    r"\b(?P<verb>(?:moved|migrated|switched|took)\s+(?:the\s+|our\s+)?(?P<use>[\w-]+(?:\s+[\w-]+)?)\s+"
    rf"(?:away\s+from|off(?:\s+of)?))\s+{_ARTICLE}{_THING}{_CLAUSE_END}",
    re.IGNORECASE,
)
# "make deploy is deprecated", "8443 is gone", "The nightly export was removed": the thing starts its clause.
_THING_GONE = re.compile(
    rf"(?:\A|(?<=[,:\u2014]\s)|(?<=\band\s)|(?<=\bbut\s)|(?<=\bso\s))\s*{_ARTICLE}{_THING}\s+"
    r"(?:is|are|was|were|has\s+been|have\s+been|got)\s+(?:now\s+)?"
    r"(?P<verb>gone|deprecated|retired|removed|dropped|decommissioned|replaced|dead|obsolete|turned\s+off|"
    r"shut\s+down|"
    r"no\s+longer\s+(?:used|needed|in\s+use))"
    rf"{_WHICH}{_CLAUSE_END}",
    re.IGNORECASE,
)
# Said before the giving up in its sentence, a word that makes it planned, asked, conditional, denied or advice.
_NOT_DONE = re.compile(
    r"\b(?:will|would|should|could|might|may|can|must|shall|plan(?:s|ned|ning)?|want(?:s|ed)?|going\s+to|"
    r"gonna|about\s+to|consider(?:s|ed|ing)?|propos(?:e|es|ed|ing)|if|unless|whether|until|when|don't|do\s+not|"
    r"doesn't|does\s+not|didn't|did\s+not|never|not|nobody|no\s+one|why|how|let's|let\s+us|please|"
    r"try(?:ing)?\s+to|todo|tip|remember\s+to|make\s+sure)\b",
    re.IGNORECASE,
)
# An older memory that already gives the thing up (or from which it was switched) is not outdated by it.
_ALREADY_GONE = (
    r"(?:from|off|instead\s+of|not|no\s+longer\s+\w+|rather\s+than|dropp\w*|remov\w*|deprecat\w*|retir\w*|"
    r"replac\w*)"
)
_GIVING_UP_STEMS = (
    "drop",
    "ditch",
    "remov",
    "retir",
    "deprecat",
    "decommission",
    "sunset",
    "replac",
    "kill",
    "turned off",
    "rid of",
    "away from",
    " off",
    "no longer",
    "stopped using",
    "shut down",
    "shutting down",
    "gone",
    "dead",
    "obsolete",
)
_TIME_VALUE = re.compile(r"[\d:.]+", re.ASCII)
_DROPPED_OFF = re.compile(r"(?:\A\s+|\s)(?:at|off|by|into)\b", re.IGNORECASE)  # "dropped the kids at school"
RETIRED = "the newer memory says a thing the older one uses is no longer used"


@dataclass(frozen=True)
class Retired:
    """A thing a memory gives up: its words as written (lower case, values joined as ``said_of`` joins them),
    its content terms, the terms of the use it was given up for (empty: every use), whether it can be named
    alone (two words or more, a value, code, a capital), and whether it is a value or a single name said
    to be gone ("8443 is gone", "Mom is gone"), which needs more in common with the older memory."""

    thing: str
    terms: frozenset[str]
    which: frozenset[str]
    named_alone: bool
    needs_company: int
    span: tuple[int, int]


def _named_alone(thing: str, written: str) -> bool:
    words = thing.split()
    return (
        len(words) > 1
        or any(is_value(word) for word in words)
        or re.search(r"[`./:@=_+-]", written) is not None
        or written.strip("`'\"")[:1].isupper()
    )


def _use_terms(which: str) -> frozenset[str]:
    """The words of a use ("for the job queue", "from node-3"): content words, an identifier kept whole, not
    a time ("in March", "in 2024")."""
    terms = content_terms(joined_as_words(which))
    return frozenset(
        term
        for term in terms
        if term not in STOPWORDS and not (_TIME_VALUE.fullmatch(term) or _is_calendar(term))
    )


def _is_calendar(term: str) -> bool:
    return is_value(term) and not any(char.isdigit() for char in term)


def _which_after(sentence: str, end: int, verb: str) -> str:
    """The use said after the match's end when the clause goes on: "Removed Priya and Dan from the reviewers
    list" (after "and"), "Replaced Redis with Valkey in tests" (after what replaced it), "no longer need the
    VPN to reach staging" (a purpose)."""
    rest = re.split(r"[.,;:()!?\u2014]", sentence[end:], maxsplit=1)[0]
    if re.match(r"\s+(?:and|with|by|in\s+favou?r\s+of)\s", rest):
        # "Replaced Redis with Valkey in the test fixtures": the use is said after what replaced it.
        found = re.search(r"\s(?:for|in|on|from)\s+(.{1,60})", rest)
        return found.group(0) if found else ""
    if re.search(r"\b(?:need|needs|use|uses|using)\b", verb, re.IGNORECASE) and re.match(
        r"\s+to\s+[a-z]", rest
    ):
        return rest
    return ""


@keyed_by_text
@lru_cache(maxsize=8_192)
def retired_things(text: str) -> tuple[Retired, ...]:
    """What ``text`` reports as given up (``Retired``), in the order said; none in a question."""
    if not _says_any(text, _GIVING_UP_STEMS):
        return ()
    found: list[Retired] = []
    for start, sentence in _sentences(text):
        if sentence.rstrip().endswith("?"):
            continue
        for pattern in (_GIVEN_UP_THING, _MOVED_OFF, _THING_GONE):
            for match in pattern.finditer(sentence):
                written = match.group("thing")
                words = [word.strip("`'\"").lower() for word in written.split()]
                if not words or words[0] in STOPWORDS or all(word in STOPWORDS for word in words):
                    continue  # "dropped by the office", "removed it"
                before = sentence[: match.start("verb") if pattern is not _THING_GONE else match.start()]
                if _NOT_DONE.search(before) or _NOT_DONE.search(
                    sentence[match.start("thing") : match.start("verb")]
                ):
                    continue
                after = sentence[match.end() :]
                if re.match(r"\s+as\b", after):
                    continue  # "Dan replaced Priya as the on-call lead": a role handed over (``role_holders``)
                verb = match.group("verb")
                if verb.lower().startswith("drop") and (
                    _DROPPED_OFF.match(after) or _DROPPED_OFF.search(written)
                ):
                    continue  # "Dropped the kids at school": dropped off, not given up
                which = (
                    f"in {match.group('use')}"
                    if pattern is _MOVED_OFF
                    else match.group("which") or _which_after(sentence, match.end(), verb)
                )
                thing = " ".join(joined_as_words(" ".join(words)).split())
                alone = _named_alone(thing, written)
                # A value, or one name said to be gone (a person may be), says little alone: "8443 is gone"
                # of the admin console's port, "Mom is gone now" of what Mom cooks.
                person = pattern is _THING_GONE and len(words) == 1 and verb.lower() in ("gone", "dead")
                company = 2 if any(is_value(w) for w in words) else 1 if person else 0
                found.append(
                    Retired(
                        thing,
                        frozenset(content_terms(" ".join(words))),
                        _use_terms(which) if which.strip() else frozenset(),
                        alone,
                        company,
                        (start + match.start(), start + match.end()),
                    )
                )
    return tuple(sorted(found, key=lambda retired: retired.span))


def _disputed(
    older: ContradictionInput,
    newer: ContradictionInput,
    was: str,
    now: str,
    subject: set[str],
    terms: set[str],
    why: str,
) -> Contradiction:
    """The pair these rules record: a change said in words that only disputes (``why``), with the share of
    what the two memories are about in common (``subject``: the newer's terms, ``terms``: the older's)."""
    union = subject | terms
    similarity = len(subject & terms) / len(union) if union else 0.0
    return Contradiction(
        older.id, newer.id, was, now, round(similarity, 6), named_in_words=True, only_disputes=why
    )


def _used(text: str, thing: str) -> bool:
    """Whether ``text`` says ``thing`` is used: "We use Jenkins for CI", "CI runs on Jenkins"."""
    return (
        re.search(
            rf"\b(?:use|uses|using|run|runs|runs\s+on|run\s+on|on|with|via|through)\s+(?:the\s+)?{re.escape(thing)}\b",
            text,
            re.IGNORECASE,
        )
        is not None
    )


def things_retired(memory: ContradictionInput, others: Sequence[ContradictionInput]) -> list[Contradiction]:
    """The older of ``others`` that say, word for word, a thing ``memory`` says was given up, for the use it
    was given up for: "We use Redis for the job queue (redis-queue.internal:6379)" after "we're dropping
    Redis for the job queue and moving it to SQS". Each pair only disputes (``only_disputes``)."""
    retired = retired_things(memory.content)
    if not retired:
        return []
    rest = memory.content
    for item in reversed(retired):
        rest = rest[: item.span[0]] + " " + rest[item.span[1] :]
    subject = set(content_terms(rest))
    found: list[Contradiction] = []
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at or negated(other.content):
            continue
        said = said_of(other)
        terms = set(content_terms(joined_as_words(other.content))) | set(content_terms(other.content))
        for item in retired:
            thing = re.escape(item.thing)
            if not re.search(rf"(?<![\w-]){thing}(?![\w-])", said) or item.terms <= subject:
                continue  # not said by the older one, or said again by the newer one itself
            if re.search(rf"\b{_ALREADY_GONE}\s+(?:the\s+)?{thing}(?![\w-])", said):
                continue  # the older one gives it up too ("switched from Jenkins to ...")
            if any(gone.thing == item.thing for gone in retired_things(other.content)):
                continue  # the older one says it is gone too
            in_common = len((subject & terms) - item.terms)
            if item.which and not item.which <= terms:
                continue  # given up for another use ("for the job queue"; the older: "the session cache")
            if in_common < item.needs_company and not (
                item.needs_company == 1 and _used(other.content, item.thing)
            ):
                continue  # ("Jenkins is gone" does dispute "We use Jenkins for CI": a use of it)
            if not item.which and not item.named_alone and in_common < 2:
                continue  # a plain word given up ("the limit was removed") needs more in common
            found.append(
                _disputed(other, memory, item.thing, f"no longer {item.thing}", subject, terms, RETIRED)
            )
            break
    return found


# A switch that names what it switched to and not what from: "We switched billing to MySQL", "Moved the queue
# over to SQS". (With "from", ``revision.parse_revision`` reads it and names what was given up.) What it
# switched to is a name (written with a capital) or code: "moved the team to the 4th floor", "switched the
# logger to JSON output", "Moved the release to Friday" switch nothing used.
_NAME_WORD = r"[A-Z][\w+-]*+(?:\.[\w+-]++)*+"
_SWITCHED_TO = re.compile(
    r"\b(?:switched|moved|migrated|swapped|(?:(?:\b(?:am|is|are|was|were)\s+)|['\u2019]re\s+)"
    r"(?:switching|moving|migrating|swapping))\s+"
    rf"{_ARTICLE}(?P<thing>[\w-]+(?:\s+[\w-]+){{0,2}}?)\s+(?:over\s+)?to\s+"
    rf"(?P<new>`[^`\n]+`|(?-i:{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,2}})){_CLAUSE_END}",
    re.IGNORECASE,
)
# The same said of the thing first: "The orders database was migrated to Postgres 15" (trial 184: left beside
# "The orders database is hosted on MySQL 5.7", the older recalled first). A version may follow the name.
# The thing is what the sentence opens with: "Traffic for the checkout service was moved to Cloudflare" moved
# the traffic, not what the checkout service runs on (a review), after an opening of a few words at most
# ("Last week, ...", "Update: ...").
_SWITCHED_TO_PASSIVE = re.compile(
    rf"\A\s*(?:[\w-]+(?:\s+[\w-]+){{0,3}}[,:]\s+)?{_ARTICLE}(?P<thing>[\w-]+(?:\s+[\w-]+){{0,2}}?)\s+"
    r"(?:was|were|has\s+been|have\s+been|got|is\s+now|are\s+now)\s+(?:switched|moved|migrated|swapped)\s+"
    rf"(?:over\s+)?to\s+(?P<new>`[^`\n]+`|(?-i:{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,2}}))"
    rf"(?:\s+v?\d+(?:\.\d+)*+)?{_CLAUSE_END}",
    re.IGNORECASE,
)
SWITCHED_AWAY = "the newer memory switched what the older one says was used to another, without naming it"


def _names_used(text: str) -> set[str]:
    """The names (written with a capital inside the sentence, up to three words together) and code an older
    memory says. Read word by word: no pattern over the whole text."""
    names: set[str] = set(re.findall(r"`[^`\n]+`", text))
    run: list[str] = []
    words = text.split()
    for at, raw in enumerate(words):
        word = raw.strip("()[]\"',;:!?")
        starts = at == 0 or words[at - 1].endswith((".", "!", "?"))
        if word[:1].isupper() and not starts and not any(char.isdigit() for char in word) and len(run) < 3:
            run.append(word.rstrip("."))
            if raw.endswith((",", ";", ":", ".", ")")):
                names.add(" ".join(run))
                run = []
            continue
        if run:
            names.add(" ".join(run))
        run = []
    if run:
        names.add(" ".join(run))
    return names


def _ties(text: str, used: str, thing: str) -> bool:
    """Whether ``text`` says ``used`` is what is used for ``thing``: "use Postgres for billing", "We use Redis
    for the job queue", "The job queue runs on Redis"."""
    x, t = re.escape(used), r"\s+".join(re.escape(word) for word in thing.split())
    return any(
        re.search(pattern, text, re.IGNORECASE)
        for pattern in (
            rf"\b(?:use|uses|using|used)\s+(?:the\s+)?{x}\s+(?:for|as)\s+(?:the\s+|our\s+)?(?:[\w-]+\s+){{0,2}}?{t}\b",
            rf"\b{t}\s+(?:uses|runs\s+on|is\s+on|are\s+on|is\s+hosted\s+on|is\s+backed\s+by)\s+(?:the\s+)?{x}(?![\w-])",
        )
    )


@keyed_by_text
@lru_cache(maxsize=8_192)
def _switches(text: str) -> tuple[tuple[str, str], ...]:
    """What ``text`` says was switched to another name without naming what from: (the thing, the name)."""
    if not _says_any(text, ("switch", "mov", "migrat", "swap")) or re.search(
        r"\bfrom\b", text, re.IGNORECASE
    ):
        return ()
    switches = []
    for _, sentence in _sentences(text):
        for match in (*_SWITCHED_TO.finditer(sentence), *_SWITCHED_TO_PASSIVE.finditer(sentence)):
            thing = match.group("thing").lower()
            if all(word in STOPWORDS or word in ("it", "everything", "them") for word in thing.split()):
                continue
            if _NOT_DONE.search(sentence[: match.start()]) or _times(match.group("new")):
                continue  # (to a day or a month: "Moved the release to Friday" moved a time)
            switches.append((thing, match.group("new").strip("`").lower()))
    return tuple(switches)


def switched_away(memory: ContradictionInput, others: Sequence[ContradictionInput]) -> list[Contradiction]:
    """The older of ``others`` (one sentence each) that tie one name or code to the thing ``memory`` says was
    switched to another name without naming what from: "we use Postgres for billing", then "We switched
    billing to MySQL". An older memory that names more than one such thing, or the one switched to, is left
    alone. Each pair only disputes."""
    switches = _switches(memory.content)
    if not switches:
        return []
    found: list[Contradiction] = []
    mine = memory.content.lower()
    subject = set(content_terms(memory.content))
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at or negated(other.content):
            continue
        text = other.content.strip()
        if len(text) > SENTENCE_LIMIT or re.search(r"[.!?;]\s+\S", text):
            continue  # one sentence only: a memory that says more is more than what was used
        used = _names_used(text)
        for thing, new in switches:
            named = [u for u in used if not set(u.lower().split()) & set(thing.split())]
            if len(named) != 1 or named[0].strip("`").lower() in mine or new in text.lower():
                continue
            if not _ties(text, named[0], thing):
                continue
            terms = set(content_terms(other.content))
            was = named[0].strip("`").lower()
            found.append(_disputed(other, memory, was, new, subject, terms, SWITCHED_AWAY))
            break
    return found


# A version moved in words, of a thing named right before it: "Bumped pydantic to 2.9", "upgraded Node to 20",
# reported as done (not "Upgrade Node to 20 before running the e2e suite"). (With "from",
# ``revision.parse_revision`` reads it.) Where it was moved, said after the version ("in the frontend"), must
# be where the older memory's version is.
_MOVED = r"(?:bumped|upgraded|downgraded|updated|pinned)"
_TO_VERSION = (
    r"\s+(?:again\s+)?to\s+(?:version\s+|v)?(?P<value>\d+(?:\.\d+)*+)\b"
    r"(?:\s+(?:in|for|on)\s+(?:the\s+|our\s+)?(?P<where>[\w-]+))?"
)
_MOVED_VERSION = (
    # "Bumped pydantic to 2.9", "Upgraded prod Postgres to 16" (a word before the thing says where).
    re.compile(
        rf"\b{_MOVED}\s+(?:the\s+|our\s+)?(?:(?P<before>[a-z][\w-]*+)\s+)?(?P<thing>[a-z][\w-]*+){_TO_VERSION}",
        re.IGNORECASE,
    ),
    # "Bumped the project to Python 3.12", "The dashboard was upgraded to React 18": the thing after "to".
    re.compile(
        rf"\b{_MOVED}\s+(?:(?:the\s+|our\s+)?(?P<before>[\w-]+(?:\s+[\w-]+)?)\s+)?to\s+(?P<thing>[A-Za-z][\w-]*+)\s+"
        r"(?:version\s+|v)?"
        r"(?P<value>\d+(?:\.\d+)*+)\b(?:\s+(?:in|for|on)\s+(?:the\s+|our\s+)?(?P<where>[\w-]+))?",
        re.IGNORECASE,
    ),
    # "pydantic upgraded to 2.9", "Node was bumped to 20".
    re.compile(
        rf"(?:\A|(?<=[\s(]))(?P<thing>[a-z][\w-]*+)\s+(?:(?:was|is|got|has\s+been)\s+)?{_MOVED}{_TO_VERSION}",
        re.IGNORECASE,
    ),
)
VERSION_MOVED = "the newer memory moves the version of a thing the older one says more about"
# Words for the kind of thing a version runs on, which an older memory need not say after the name of where:
# "We upgraded the GKE clusters to Kubernetes 1.30" moves "We deploy on Kubernetes 1.27 on GKE" (a trial saw
# it left unmarked). Alone ("Upgraded the servers to Ubuntu 24.04") it still names where (a review).
_HOST_KINDS = "cluster server host machine instance vm runner container pod box fleet"
_KINDS_OF_HOST = frozenset(kind + plural for kind in _HOST_KINDS.split() for plural in ("", "s", "es"))
# Words before a thing's version that say it is what is used ("uses Node 18", "pin pydantic to 2.7", "on
# Postgres 15"), not a fact about that version ("numpy 2.0 breaks the ingest script").
_USE_CUES = frozenset(
    {"use", "uses", "using", "used", "run", "runs", "on", "pin", "pins", "pinned", "require", "requires"}
    | {"target", "targets", "is", "are", "at", "with", "need", "needs", "install", "installs"}
)


def _versions_used(text: str, thing: str) -> set[str]:
    """The versions ``text`` gives ``thing``, right after its name ("uses pydantic 2.7", "pydantic==2.7", "pin
    pydantic to 2.7", "on Node v18"), when it says of one of them that it is what is used; none otherwise
    ("numpy 2.0 breaks the ingest script")."""
    found, used = set(), False
    for match in re.finditer(
        rf"(?<![\w-]){re.escape(thing)}(?P<eq>\s*==\s*|@|\s+(?:to\s+|at\s+|is\s+)?(?:version\s+|v)?)(\d+(?:\.\d+)*+)\b",
        text,
        re.IGNORECASE,
    ):
        before = [
            word.lower() for word in re.findall(r"[\w']+", text[max(0, match.start() - 40) : match.start()])
        ]
        found.add(match.group(2))
        used = (
            used or "=" in match.group("eq") or "@" in match.group("eq") or bool(_USE_CUES & set(before[-3:]))
        )
    return found if used else set()


@keyed_by_text
@lru_cache(maxsize=8_192)
def _version_moves(text: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """What ``text`` reports moved to another version: (the thing, the version, where it was moved)."""
    stems = ("bumped", "upgraded", "downgraded", "updated", "pinned")
    if not _says_any(text, stems) or re.search(r"\bfrom\b", text, re.IGNORECASE):
        return ()
    moves = []
    for _, sentence in _sentences(text):
        for match in (found for pattern in _MOVED_VERSION for found in pattern.finditer(sentence)):
            thing = match.group("thing").lower()
            if thing in STOPWORDS or thing in ("it", "version", "port"):
                continue
            if _NOT_DONE.search(sentence[: match.start()]):
                continue
            before = (match.groupdict().get("before") or "").lower().split()
            # "the GKE clusters": GKE names where (not "both clusters": a word of its own is left)
            if len(before) == 2 and before[1] in _KINDS_OF_HOST and before[0] not in STOPWORDS:
                before = before[:1]
            said = [(match.group("where") or "").lower(), *before]
            where = tuple(word for word in said if word and word not in STOPWORDS)
            moves.append((thing, match.group("value"), where))
    return tuple(moves)


def versions_moved(memory: ContradictionInput, others: Sequence[ContradictionInput]) -> list[Contradiction]:
    """The older of ``others`` that say the thing ``memory`` moves to another version is used at one version
    of its own ("We pin pydantic to 2.7 for now because of the settings migration", then "Bumped pydantic to
    2.9 now that the settings migration is done"). The value rules leave such a pair when the older says
    more than the version; it only disputes, for what else it says."""
    moves = _version_moves(memory.content)
    if not moves:
        return []
    subject = set(content_terms(memory.content))
    found: list[Contradiction] = []
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at or negated(other.content):
            continue
        for thing, value, where in moves:
            held = _versions_used(other.content, thing)
            if len(held) != 1 or value in held or value in other.content:
                continue
            if any(not re.search(rf"\b{re.escape(word)}", other.content, re.IGNORECASE) for word in where):
                continue  # moved somewhere the older memory does not speak of ("in the frontend")
            terms = set(content_terms(other.content))
            found.append(_disputed(other, memory, next(iter(held)), value, subject, terms, VERSION_MOVED))
            break
    return found


# A time moved in words: "Staging DB reset moved to Saturdays at 03:00 UTC so it doesn't clash with ...",
# "Standup moved to 10:00", "The release freeze was pushed to Thursday": what moved, then when it is now (a
# day, a month or a time first: "Priya moved to the platform team on Monday" moved no time).
_MOVED_WHEN = re.compile(
    r"\A\s*+(?:(?:heads\s+up|fyi|note|update)\s*[:,-]\s*)?(?P<thing>[^.;:!?,]{3,80}?)\s+"
    r"(?:(?:was|is|has\s+been|have\s+been|were|got)\s+)?(?:now\s+)?"
    r"(?:moved|rescheduled|shifted|pushed)\s+(?:back\s+|forward\s+)?to\s+(?P<when>(?:\d{1,2}:\d{2}|[^.;:!?,]){1,60}?)"
    rf"{_CLAUSE_END}",
    re.IGNORECASE,
)
TIME_MOVED = "the newer memory moves the time of what the older one says, in other words"
_TIME_TOKEN = re.compile(r"\d{1,2}:\d{2}(?:\s*[ap]m)?|\d[\w.]*|[a-z]+", re.IGNORECASE)
# Words right before a time that say when something happens: "every Sunday", "is at 9:30", "starts on Wednesday".
_SCHEDULE_CUES = frozenset(
    {"at", "on", "every", "each", "is", "are", "starts", "runs", "happens", "until", "from"}
)
_NOT_SAID_DONE = re.compile(
    r"\b(?:if|unless|whether|not|never|should|would|could|might|may|will|can|must|my|our|his|her|their|i|we|"
    r"you|he|she|they)\b",
    re.IGNORECASE,
)
# A move for one time only leaves the usual time standing: "Standup moved to 10:00 tomorrow", "... this week".
_ONE_OFF = re.compile(
    r"\b(?:tomorrow|today|tonight|(?<!starting\s)(?<!from\s)(?:this|next)\s+week|this\s+time|only|for\s+now|"
    r"temporarily|just\s+this|one-off|once)\b",
    re.IGNORECASE,
)


def _times(text: str, *, cued: bool = False) -> set[str]:
    """The days, months, times and numbers ``text`` says, lower case, one form a day ("Saturdays":
    "saturday"); with ``cued``, only those said right after a word of when (``_SCHEDULE_CUES``), or after
    another time ("Sunday at 02:00")."""
    words = [word.lower() for word in _TIME_TOKEN.findall(text)]
    found = set()
    for at, word in enumerate(words):
        single = word[:-1] if word.endswith("s") and is_value(word[:-1]) and not word[-2].isdigit() else word
        if not is_value(single):
            continue
        before = words[max(0, at - 2) : at]
        if not cued or _SCHEDULE_CUES & set(before) or any(is_value(w) for w in before[-1:]):
            found.add(single)
    return found


@keyed_by_text
@lru_cache(maxsize=8_192)
def _time_move(text: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """What ``text``'s first sentence says was moved to another time: the content terms of what moved, and
    the times it moved to; None when it says no such thing."""
    if not _says_any(text, ("moved", "rescheduled", "shifted", "pushed")):
        return None
    first = next(_sentences(text), None)
    if first is None or first[0] > len(text) - len(text.lstrip()):
        return None
    sentence = first[1]
    if re.search(r"\bfrom\b", sentence, re.IGNORECASE) or _ONE_OFF.search(text):
        return None
    match = _MOVED_WHEN.match(sentence)
    if match is None or _NOT_SAID_DONE.search(match.group("thing")):
        return None
    when = match.group("when")
    opening = re.sub(r"\A(?:(?:every|each|on|at|the)\s+)*", "", when.strip(), flags=re.IGNORECASE)
    if not _times(opening.split()[0] if opening.split() else ""):
        return None  # moved to a place or a team, not to a time
    moved_to = frozenset(_times(when))
    thing = frozenset(content_terms(written_out(match.group("thing")))) - {"now"}
    if not moved_to or not thing or any(is_value(term) for term in thing):
        return None
    return thing, moved_to


def _named_otherwise(text: str, shared: AbstractSet[str], thing: AbstractSet[str]) -> bool:
    """Whether ``text`` names the thing its words ``shared`` with a moved ``thing`` are of with a word of its
    own right before them: "platform" in "The platform team standup is at 10:00", where the move is of "the
    data team standup". Not an article or a time before them ("Every Sunday the staging database ...")."""
    words = re.findall(r"[\w'-]+", written_out(text))
    stems = [set(content_terms(word)) for word in words]
    first = next((at for at, stem in enumerate(stems) if stem & shared), None)
    if not first:
        return False
    word = words[first - 1]
    return word.lower() not in STOPWORDS and not stems[first - 1] & thing and not is_value(word)


def times_moved(memory: ContradictionInput, others: Sequence[ContradictionInput]) -> list[Contradiction]:
    """The older of ``others`` that give what ``memory`` says was moved to another time (every word of it, or
    all but one of two or more: "The staging database is wiped and reseeded every Sunday at 02:00 UTC" for
    "Staging DB reset moved to Saturdays at 03:00 UTC") a time of the same kind that the move does not keep.
    The value rules leave such a pair when the two say it in other words. Each pair only disputes."""
    moved = _time_move(memory.content)
    if moved is None:
        return []
    thing, moved_to = moved
    kinds = {_is_calendar(value) for value in moved_to}
    subject = set(content_terms(memory.content))
    found: list[Contradiction] = []
    for other in others:
        if (
            other.id == memory.id
            or other.created_at > memory.created_at
            or len(other.content) > 2 * SENTENCE_LIMIT  # (a schedule is said in a sentence or two)
            or negated(other.content)
        ):
            continue
        terms = set(content_terms(written_out(other.content)))
        shared = thing & terms
        if not (shared == thing or (len(shared) >= 2 and len(shared) >= len(thing) - 1)):
            continue
        if shared != thing and _named_otherwise(other.content, shared, thing):
            continue  # "The platform team standup" is another than "The data team standup" (a trial)
        if len(shared) == 1 and not re.search(
            rf"\b{re.escape(next(iter(shared)))}\w*\s+(?:is|are|starts|runs|happens|takes\s+place)\b",
            other.content,
            re.IGNORECASE,
        ):
            continue  # one word in common: the older memory must say when that thing happens ("standup is at")
        # The times of the kinds moved: "Planning moved to Tuesday" moves the day of "Planning is on Monday
        # at 10:00" (its time may hold); none of that kind ("in December" beside "moved to 17:00") is no pair.
        held = {
            value for value in _times(other.content, cued=True) - moved_to if _is_calendar(value) in kinds
        }
        if not held:
            continue
        was, now = " ".join(sorted(held)), " ".join(sorted(moved_to))
        found.append(_disputed(other, memory, was, now, subject, terms, TIME_MOVED))
    return found
