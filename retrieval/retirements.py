"""Things said to be given up (pure): "we're dropping Redis for the job queue", "make deploy is deprecated",
"8443 is gone", "We no longer use Jenkins". A memory that says such a thing is no longer used says that an
older memory using it is outdated on that point: "We use Redis for the job queue", "run `make deploy
ENV=staging`", "billing API moved to port 8443". A new user's trial found those older memories recalled
first and unmarked beside the memory that retired what they say.

A retirement names its thing in a clause of its own, in one of two shapes:

- a verb of giving up before it: "dropping Redis", "removed the nightly export", "moved off Heroku",
  "no longer use Jenkins", "got rid of the cron job";
- the thing, then that it is gone: "make deploy is deprecated", "8443 is gone", "The nightly export was
  removed".

What follows the thing in the same clause and says which use of it was given up ("for the job queue", "in
staging", "from the worker") must be said by the older memory too: "dropping Redis for the job queue" says
nothing of "We use Redis for the session cache". A retirement with no such words gives the thing up
everywhere, if the thing is one that can be named alone (two words or more, a value, a name written with a
capital, code); a single plain word ("the limit was removed") needs two more words in common with the
older memory. A retirement planned, asked or put as a condition ("we should drop Redis", "if we drop
Redis", "Did we drop Redis?") gives nothing up.

A switch that names only what it switched to ("We switched billing to MySQL", "Switched the queue to SQS")
gives up what an older memory says it used for the same thing ("we use Postgres for billing", "The job queue
runs on Redis"): the one name or value the older memory ties to it.

Such a pair only disputes: the newer memory says the older is no longer so on one point, not that all it
says is wrong (its port, its approvers), so recall puts the newer first and marks the older."""

from __future__ import annotations

import re
from collections.abc import Sequence
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

# A thing: one to three words, possibly quoted as code ("`make deploy`", "redis-queue.internal:6379").
_WORD = r"[`'\"]?[\w./:@=+-]*\w[`'\"]?"
_THING = rf"(?P<thing>{_WORD}(?:\s+{_WORD}){{0,2}}?)"
# Which use of it was given up: a place or purpose said right after it ("for the job queue", "in staging").
_WHICH = r"(?P<which>\s+(?:for|in|on|from|at|across)\s+[^.,;:()!?]{1,60}?)?"
# Where the clause that gives it up ends: its punctuation, or a word that starts another clause or names the
# replacement ("and moving it to SQS", "with Argo CD", "in favour of Unleash", "now that ...").
_CLAUSE_END = (
    r"\s*(?=[.,;:()!?\u2014]|\s+(?:and|but|so|because|since|as|with|by|to|now|then|in\s+favou?r\s+of|"
    r"after|before|once|when|until)\b|\s*\Z)"
)
_ARTICLE = r"(?:(?:the|our|all|any|its|their)\s+)?"
_GIVING_UP = (
    r"(?:dropp(?:ed|ing)|drops?|ditch(?:ed|ing|es)?|remov(?:ed|ing|es?)|retir(?:ed|ing|es?)|"
    r"deprecat(?:ed|ing|es?)|decommission(?:ed|ing|s)?|sunsett(?:ed|ing)|"
    r"(?:mov|migrat|switch)(?:ed|ing|es?)?\s+(?:away\s+from|off(?:\s+of)?)|"
    r"no\s+longer\s+(?:use|uses|using|run|runs|need|needs)|stopped\s+using|"
    r"(?:got|getting|get)\s+rid\s+of|replac(?:ed|ing|es?)|turned\s+off|shut\s+down)"
)
# "dropping Redis for the job queue", "We no longer use Jenkins".
_GIVEN_UP_THING = re.compile(
    rf"\b(?P<verb>{_GIVING_UP})\s+{_ARTICLE}{_THING}{_WHICH}{_CLAUSE_END}", re.IGNORECASE
)
# "make deploy is deprecated", "8443 is gone", "The nightly export was removed": the thing starts its clause.
_THING_GONE = re.compile(
    rf"(?:\A|(?<=[.;:!?,\u2014])|(?<=\band)|(?<=\bbut)|(?<=\bso))\s*{_ARTICLE}{_THING}\s+"
    r"(?:is|are|was|were|has\s+been|have\s+been|got|is\s+now|are\s+now)\s+(?:now\s+)?"
    r"(?P<verb>gone|deprecated|retired|removed|dropped|decommissioned|dead|obsolete|turned\s+off|shut\s+down|"
    r"no\s+longer\s+(?:used|needed|in\s+use))"
    rf"{_WHICH}{_CLAUSE_END}",
    re.IGNORECASE,
)
# Said before the giving up in its sentence, a word that makes it planned, asked, conditional or denied.
_NOT_DONE = re.compile(
    r"\b(?:will|would|should|could|might|may|can|must|shall|plan(?:s|ned|ning)?|want(?:s|ed)?|going\s+to|"
    r"gonna|about\s+to|consider(?:s|ed|ing)?|propos(?:e|es|ed|ing)|if|unless|whether|until|don't|do\s+not|"
    r"doesn't|does\s+not|didn't|did\s+not|never|not|nobody|no\s+one|why|how|let's|let\s+us|please|"
    r"try(?:ing)?\s+to)\b",
    re.IGNORECASE,
)
# An older memory that already gives the thing up (or from which it was switched) is not outdated by it.
_ALREADY_GONE = r"(?:from|off|instead\s+of|not|no\s+longer\s+\w+|rather\s+than|dropp\w*|remov\w*|deprecat\w*|retir\w*|replac\w*)"
RETIRED = "the newer memory says a thing the older one uses is no longer used"


@dataclass(frozen=True)
class Retired:
    """A thing a memory gives up: its words as written (lower case, values joined as ``said_of`` joins them),
    its content terms, the terms of the use it was given up for (empty: every use), and whether it can be
    named alone (two words or more, a value, a capital, code)."""

    thing: str
    terms: frozenset[str]
    which: frozenset[str]
    named_alone: bool
    span: tuple[int, int]


def _sentence_before(text: str, start: int) -> str:
    """The part of ``text``'s sentence before ``start``."""
    cut = max(text.rfind(mark, 0, start) for mark in (". ", "! ", "? ", "; ", "\n"))
    return text[cut + 1 if cut >= 0 else 0 : start]


def _named_alone(thing: str, written: str) -> bool:
    words = thing.split()
    return (
        len(words) > 1
        or any(is_value(word) for word in words)
        or re.search(r"[`./:@=_+-]", written) is not None
        or written.strip("`'\"")[:1].isupper()
    )


@keyed_by_text
@lru_cache(maxsize=8_192)
def retired_things(text: str) -> tuple[Retired, ...]:
    """What ``text`` says was given up (``Retired``), in the order said; none in a question."""
    found: list[Retired] = []
    for pattern in (_GIVEN_UP_THING, _THING_GONE):
        for match in pattern.finditer(text):
            written = match.group("thing")
            words = [word.strip("`'\"").lower() for word in written.split()]
            if not words or all(word in STOPWORDS for word in words) or words[0] in STOPWORDS:
                continue  # "dropped by the office", "removed it"
            sentence_end = re.search(r"[.!?](?:\s|\Z)|\Z", text[match.end() :])
            if text[match.end() + (sentence_end.start() if sentence_end else 0) :][:1] == "?":
                continue
            if _NOT_DONE.search(
                _sentence_before(text, match.start("verb") if pattern is _GIVEN_UP_THING else match.start())
            ):
                continue
            if pattern is _THING_GONE and _NOT_DONE.search(text[match.start("thing") : match.start("verb")]):
                continue
            if re.match(r"\s+as\b", text[match.end() :]):
                continue  # "Dan replaced Priya as the on-call lead": a role handed over (``role_holders``)
            thing = " ".join(joined_as_words(" ".join(words)).split())
            which = match.group("which") or ""
            which_terms = (
                frozenset(t for t in content_terms(which) if not is_value(t))
                if which.strip()
                else frozenset()
            )
            found.append(
                Retired(
                    thing,
                    frozenset(content_terms(" ".join(words))),
                    which_terms,
                    _named_alone(thing, written),
                    match.span(),
                )
            )
    return tuple(sorted(found, key=lambda retired: retired.span))


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
        terms = set(content_terms(other.content))
        for item in retired:
            thing = re.escape(item.thing)
            if not re.search(rf"(?<![\w-]){thing}(?![\w-])", said) or item.terms <= subject:
                continue  # not said by the older one, or said again by the newer one itself
            if re.search(rf"\b{_ALREADY_GONE}\s+(?:the\s+)?{thing}(?![\w-])", said):
                continue  # the older one gives it up too ("switched from Jenkins to ...")
            if any(gone.thing == item.thing for gone in retired_things(other.content)):
                continue  # the older one says it is gone too
            if item.which:
                if not item.which <= terms:
                    continue  # given up for another use ("for the job queue"; the older: "the session cache")
            elif not item.named_alone and len((subject & terms) - item.terms) < 2:
                continue  # a plain word given up ("the limit was removed") needs more in common
            similarity = len(subject & terms) / len(subject | terms) if subject | terms else 0.0
            found.append(
                Contradiction(
                    other.id,
                    memory.id,
                    item.thing,
                    f"no longer {item.thing}",
                    round(similarity, 6),
                    named_in_words=True,
                    only_disputes=RETIRED,
                )
            )
            break
    return found


# A switch that names what it switched to and not what from: "We switched billing to MySQL", "Moved the queue
# over to SQS". (With "from", ``revision.parse_revision`` reads it and names what was given up.)
_SWITCHED_TO = re.compile(
    r"\b(?:switch|switched|switching|move|moved|moving|migrate|migrated|migrating|swap|swapped|swapping)\s+"
    rf"{_ARTICLE}(?P<thing>[\w-]+(?:\s+[\w-]+){{0,2}}?)\s+(?:over\s+)?to\s+(?P<new>{_WORD}(?:\s+{_WORD}){{0,2}}?)"
    rf"{_CLAUSE_END}",
    re.IGNORECASE,
)
# What an older memory says was used for a thing: a name written with a capital inside its sentence (one to
# three words), a value, or code.
_USED = re.compile(
    r"`[^`\n]+`|(?<!\A)(?<![.!?]\s)\b[A-Z][\w+-]*(?:\.[\w+-]+)*(?:\s+[A-Z][\w+-]*(?:\.[\w+-]+)*){0,2}|\b[\w-]*\d[\w:-]*(?:\.[\w:-]+)*"
)
SWITCHED_AWAY = "the newer memory switched what the older one says was used to another, without naming it"


def _ties(text: str, used: str, thing: str) -> bool:
    """Whether ``text`` says ``used`` is what is used for ``thing``: "use Postgres for billing", "The job queue
    runs on Redis", "Postgres is our billing database"."""
    x, t = re.escape(used), r"\s+".join(re.escape(word) for word in thing.split())
    return any(
        re.search(pattern, text, re.IGNORECASE)
        for pattern in (
            rf"\b(?:use|uses|using|used|run|runs|on|with|via)\s+(?:the\s+)?{x}\s+(?:for|as|in|to\s+run)\s+(?:the\s+|our\s+)?(?:[\w-]+\s+){{0,2}}?{t}\b",
            rf"\b{t}\s+(?:[\w-]+\s+){{0,2}}?(?:uses|use|runs\s+on|run\s+on|is\s+on|are\s+on|lives\s+(?:in|on)|is|are|on|via|with|in)\s+(?:the\s+)?{x}(?![\w-])",
            rf"(?<![\w-]){x}\s+(?:is|as)\s+(?:the\s+|our\s+)(?:[\w-]+\s+){{0,2}}?{t}\b",
        )
    )


def switched_away(memory: ContradictionInput, others: Sequence[ContradictionInput]) -> list[Contradiction]:
    """The older of ``others`` (one sentence each) that tie one name, value or code to the thing ``memory``
    says was switched to another without naming what from: "we use Postgres for billing", then "We switched
    billing to MySQL". An older memory that names more than one such thing, or the one switched to, is left
    alone. Each pair only disputes."""
    if re.search(r"\bfrom\b", memory.content, re.IGNORECASE):
        return []
    switches = []
    for match in _SWITCHED_TO.finditer(memory.content):
        thing = match.group("thing").lower()
        new = match.group("new").strip("`'\"").lower()
        if all(word in STOPWORDS or word in ("it", "everything", "them") for word in thing.split()):
            continue
        if _NOT_DONE.search(_sentence_before(memory.content, match.start())):
            continue
        switches.append((thing, new))
    found: list[Contradiction] = []
    mine = memory.content.lower()
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at or negated(other.content):
            continue
        text = other.content.strip()
        if re.search(r"[.!?;]\s+\S", text):
            continue  # one sentence only: a memory that says more is more than what was used
        used = {m.group(0) for m in _USED.finditer(text)}
        for thing, new in switches:
            named = [u for u in used if not set(u.lower().split()) & set(thing.split())]
            if len(named) != 1 or named[0].strip("`").lower() in mine or new in text.lower():
                continue
            if not _ties(text, named[0], thing):
                continue
            terms = set(content_terms(other.content))
            subject = set(content_terms(memory.content))
            similarity = len(subject & terms) / len(subject | terms) if subject | terms else 0.0
            found.append(
                Contradiction(
                    other.id,
                    memory.id,
                    named[0].strip("`").lower(),
                    new,
                    round(similarity, 6),
                    named_in_words=True,
                    only_disputes=SWITCHED_AWAY,
                )
            )
            break
    return found


# A version moved in words, of a thing named right before it: "Bumped pydantic to 2.9", "upgraded Node to 20".
# (With "from", ``revision.parse_revision`` reads it.)
_MOVED_VERSION = re.compile(
    r"\b(?:bump(?:ed|ing|s)?|upgrad(?:ed|ing|es?)|downgrad(?:ed|ing|es?)|updat(?:ed|ing|es?)|pinn(?:ed|ing)|"
    r"pins?)\s+(?:the\s+|our\s+)?(?P<thing>[a-z][\w-]*)\s+(?:again\s+)?to\s+(?:version\s+|v)?"
    r"(?P<value>\d+(?:\.\d+)*)\b",
    re.IGNORECASE,
)
VERSION_MOVED = "the newer memory moves the version of a thing the older one says more about"


def _versions_of(text: str, thing: str) -> set[str]:
    """The versions ``text`` gives ``thing``, right after its name: "pydantic 2.7", "pydantic==2.7", "pin
    pydantic to 2.7", "Node v18"."""
    return {
        found.group(1)
        for found in re.finditer(
            rf"(?<![\w-]){re.escape(thing)}(?:\s*==\s*|@|\s+(?:to\s+|at\s+|is\s+)?(?:version\s+|v)?)(\d+(?:\.\d+)*)\b",
            text,
            re.IGNORECASE,
        )
    }


def versions_moved(memory: ContradictionInput, others: Sequence[ContradictionInput]) -> list[Contradiction]:
    """The older of ``others`` that give the thing ``memory`` moves to another version one version of its own
    ("We pin pydantic to 2.7 for now because of the settings migration", then "Bumped pydantic to 2.9 now
    that the settings migration is done"). The value rules leave such a pair when the older says more than
    the version; it only disputes, for what else it says."""
    if re.search(r"\bfrom\b", memory.content, re.IGNORECASE):
        return []
    moves = []
    for match in _MOVED_VERSION.finditer(memory.content):
        thing = match.group("thing").lower()
        if thing in STOPWORDS or thing in ("it", "version", "port"):
            continue
        if _NOT_DONE.search(_sentence_before(memory.content, match.start())):
            continue
        moves.append((thing, match.group("value")))
    found: list[Contradiction] = []
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at or negated(other.content):
            continue
        for thing, value in moves:
            held = _versions_of(other.content, thing)
            if len(held) != 1 or value in held or value in other.content:
                continue
            terms = set(content_terms(other.content))
            subject = set(content_terms(memory.content))
            similarity = len(subject & terms) / len(subject | terms) if subject | terms else 0.0
            found.append(
                Contradiction(
                    other.id,
                    memory.id,
                    next(iter(held)),
                    value,
                    round(similarity, 6),
                    named_in_words=True,
                    only_disputes=VERSION_MOVED,
                )
            )
            break
    return found


# A time moved in words: "Staging DB reset moved to Saturdays at 03:00 UTC so it doesn't clash with ...",
# "Standup moved to 10:00", "The release freeze was pushed to Thursday": what moved, then when it is now.
_MOVED_WHEN = re.compile(
    r"\A\s*(?:(?:heads\s+up|fyi|note|update)\s*[:,-]\s*)?(?P<thing>[^.;:!?,]{3,80}?)\s+"
    r"(?:(?:was|is|has\s+been|have\s+been|were|got)\s+)?(?:now\s+)?"
    r"(?:moved|rescheduled|shifted|pushed|changed)\s+(?:back\s+|forward\s+)?to\s+(?P<when>(?:\d{1,2}:\d{2}|[^.;:!?,]){1,60}?)"
    rf"{_CLAUSE_END}",
    re.IGNORECASE,
)
TIME_MOVED = "the newer memory moves the time of what the older one says, in other words"


def _calendar_kinds(values: set[str]) -> set[bool]:
    """Which kinds these values are: a day or month by name (True), a number or a time (False)."""
    return {not any(char.isdigit() for char in value) for value in values}


_TIME_TOKEN = re.compile(r"\d{1,2}:\d{2}(?:\s*[ap]m)?|\d[\w.]*|[a-z]+", re.IGNORECASE)
# Words right before a time that say when something happens: "every Sunday", "is at 9:30", "starts on Wednesday".
_SCHEDULE_CUES = frozenset(
    {"at", "on", "every", "each", "is", "are", "starts", "runs", "happens", "until", "from"}
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


_NOT_SAID_DONE = re.compile(
    r"\b(?:if|unless|whether|not|never|should|would|could|might|may|will|can|must)\b", re.IGNORECASE
)


def times_moved(memory: ContradictionInput, others: Sequence[ContradictionInput]) -> list[Contradiction]:
    """The older of ``others`` that give what ``memory`` says was moved to another time (every word of it, or
    all but one of two or more: "The staging database is wiped and reseeded every Sunday at 02:00 UTC" for
    "Staging DB reset moved to Saturdays at 03:00 UTC") a time of the same kind that the move does not keep.
    The value rules leave such a pair when the two say it in other words. Each pair only disputes."""
    if re.search(r"\bfrom\b", memory.content, re.IGNORECASE):
        return []
    match = _MOVED_WHEN.match(memory.content)
    if match is None or _NOT_SAID_DONE.search(match.group("thing")):
        return []
    moved_to = _times(match.group("when"))
    thing = set(content_terms(written_out(match.group("thing")))) - {"now"}
    if not moved_to or not thing or any(is_value(term) for term in thing):
        return []
    kinds = _calendar_kinds(moved_to)
    found: list[Contradiction] = []
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at or negated(other.content):
            continue
        terms = set(content_terms(written_out(other.content)))
        shared = thing & terms
        if not (shared == thing or (len(shared) >= 2 and len(shared) >= len(thing) - 1)):
            continue
        if len(shared) == 1 and not re.search(
            rf"\b{re.escape(next(iter(shared)))}\w*\s+(?:is|are|starts|runs|happens|takes\s+place)\b",
            other.content,
            re.IGNORECASE,
        ):
            continue  # one word in common: the older memory must say when that thing happens ("standup is at")
        held = _times(other.content, cued=True) - moved_to
        if not held or not kinds <= _calendar_kinds(held) or not _calendar_kinds(held) <= kinds:
            continue  # no time of its own, or one of another kind ("in December" beside "moved to 17:00")
        subject = set(content_terms(memory.content))
        similarity = len(subject & terms) / len(subject | terms) if subject | terms else 0.0
        found.append(
            Contradiction(
                other.id,
                memory.id,
                " ".join(sorted(held)),
                " ".join(sorted(moved_to)),
                round(similarity, 6),
                named_in_words=True,
                only_disputes=TIME_MOVED,
            )
        )
    return found
