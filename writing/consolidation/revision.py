"""Explicit belief revision in text (pure): "we switched from Postgres to MySQL", "replaced X with Y",
"no longer use X", "Y instead of X", and revision words ("now", "no longer", "anymore") that turn an
opposite claim into a revision rather than an open contradiction."""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

from retrieval.text import (
    cached_term_set,
    content_terms,
    keyed_by_text,
    light_stem,
    negated,
    term_set,
    word_tokens,
)

# What a thing's name runs over: anything but punctuation that ends a clause. A dot or colon inside a name
# ("./deploy.sh", "Node.js", "postgres:16") is part of it (a trial's "switched from `./deploy.sh` to ...").
_NAME = r"(?:[^.,;:!?]|[.:](?=[^\s.,;:!?]))"
_END = r"(?=[.,;:!?](?:\s|$)|[)\]]|\s+(?:for|in|on|at|because|since|so|and|but|as|when|after|last|this|next)\b|$)"
# A rename names what it renamed ("We renamed the default branch from master to main"): said without it
# ("The repo was renamed from api to api-server"), the old name is an ordinary word that memories of
# other things use ("We use the API gateway from Kong"), and a review saw such memories retired.
_RENAMED = re.compile(
    r"\b(?:renamed|renaming)\s+(?P<subject>(?:[\w-]+\s+){1,3}?)from\s+(?P<old>"
    + _NAME
    + r"{1,80}?)\s+to\s+(?P<new>"
    + _NAME
    + r"{1,80}?)"
    + _END,
    re.IGNORECASE,
)
_PATTERNS = (
    re.compile(
        r"\b(?:switched|switching|moved|moving|migrated|migrating|changed|changing|went|transitioned|converted)\s+"
        r"(?P<subject>(?:[\w-]+\s+){0,3}?)from\s+(?P<old>"
        + _NAME
        + r"{1,80}?)\s+(?:to|onto|over to|in favou?r of)\s+"
        r"(?P<new>" + _NAME + r"{1,80}?)" + _END,
        re.IGNORECASE,
    ),
    _RENAMED,
    re.compile(
        r"\breplaced\s+(?P<old>" + _NAME + r"{1,80}?)\s+with\s+(?P<new>" + _NAME + r"{1,80}?)" + _END,
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:no longer|stopped)\s+(?:use|using|uses|run|running)\s+(?P<old>" + _NAME + r"{1,80}?)" + _END,
        re.IGNORECASE,
    ),
    # "Instead of Stripe we now use Adyen", at the head of a clause (a trial: not read as a switch).
    re.compile(
        r"\binstead of\s+(?P<old>" + _NAME + r"{1,80}?),?\s+(?:(?:we|they|i|the team|it)\s+)?(?:now\s+)?"
        r"(?:use|uses|run|runs|chose|picked|went with|moved to|switched to)\s+(?P<new>"
        + _NAME
        + r"{1,80}?)"
        + _END,
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:use|using|uses|run|running|chose|picked)\s+(?P<new>"
        + _NAME
        + r"{1,80}?)\s+instead of\s+(?P<old>"
        + _NAME
        + r"{1,80}?)"
        + _END,
        re.IGNORECASE,
    ),
    # What a thing goes with, on, to or through, instead of another: "Deploys now go out with Argo CD instead
    # of Spinnaker", "Alerts go to Opsgenie instead of PagerDuty" (a trial: no usage verb, read as no switch,
    # and the Spinnaker memory kept beside it). After the verbs above, which name the thing more closely.
    re.compile(
        r"\b(?:with|on|onto|to|via|through)\s+(?P<new>"
        + _NAME
        + r"{1,80}?)\s+instead of\s+(?P<old>"
        + _NAME
        + r"{1,80}?)"
        + _END,
        re.IGNORECASE,
    ),
)

REVISION_WORDS = frozenset(
    {
        "now",
        "anymore",
        "longer",
        "switched",
        "changed",
        "instead",
        "replaced",
        "revised",
        "updated",
        "henceforth",
    }
)
# Words that, right before a subject, say "we use it" ("we use Postgres", "billing is on Postgres").
USAGE_CUES = frozenset(
    {
        "use",
        "uses",
        "using",
        "used",
        "run",
        "runs",
        "running",
        "on",
        "chose",
        "choose",
        "picked",
        "pick",
        "prefer",
        "prefers",
        "preferred",
        "adopted",
        "rely",
        "relies",
        "standardised",
        "standardized",
        "via",
        "with",
        "in",
        "is",
        "are",
    }
)


@dataclass(frozen=True)
class Revision:
    old: tuple[str, ...]  # content terms of what was given up
    new: tuple[str, ...]  # content terms of what replaced it (empty for "no longer use X")
    phrase: str
    about: frozenset[str] = frozenset()  # the text's other content words: what the switch is of ("billing")
    # What the switch names as moved, between its verb and "from" ("switched CI from", "moved the Friday
    # deploys from"): empty when it names nothing there ("switched from", "the team switched us from").
    subject: frozenset[str] = frozenset()
    text: str = ""  # the whole text the switch was read from


# Verbs that say where a thing goes, is kept or is handled: "The webshop deploys to Fly.io", "Error tracking
# goes to Sentry", "Payments are processed by Stripe" (stemmed as content terms are).
_PLACING = frozenset(
    content_terms(
        "deploy deploys deployed go goes went live lives host hosts hosted run runs ran point points ship "
        "ships shipped send sends sent route routes routed store stores stored serve serves served process "
        "processes processed handle handles handled use uses used upload uploads uploaded push pushes pushed"
    )
)
# Words that say an older text is about the old state itself, which a switch leaves true: "Legacy image
# uploads remain on S3", "Archived image uploads: S3", "Historical error tracking: Sentry".
_OLD_STATE = frozenset(
    content_terms(
        "legacy archived archive historical historic former formerly previous previously remain remains "
        "remained stay stays existing"
    )
)

# Things named by a time before which they were made ("image uploads from before 2024", "orders placed prior
# to March", "logs older than 2023", "pre-2024 uploads", "uploads from 2023 and earlier"): a change made now
# leaves them where they were. The time's words. ("Until the migration" is not one: it says the state ends,
# and a switch is that end.)
# A time is a year (not a count: "older than 2000 seconds", "before 2000 UTC"), a month or season with or
# without a day or a year, a quarter, or the last or this calendar unit ("before this release", "before last
# merge" are no times).
_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|"
    r"apr|jun|jul|aug|sept|sep|oct|nov|dec)"
)
_SEASON = r"(?:spring|summer|autumn|fall|winter)"
_YEAR = (
    r"(?:19|20)\d\d(?![\w:]|\.\d)(?!\s*(?:ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|"
    r"months?|years?|utc|gmt|am|pm|[kmgt]i?b|bytes?|rows?|items?|requests?|records?|users?|%)(?!\w))"
)
_DAY = r"(?:\d{1,2}(?:st|nd|rd|th)?)"
_TIME = (
    r"(?:the\s+)?(?:(?:end|start|beginning)\s+of\s+)?"
    rf"(?:(?:(?:{_DAY}\s+)?(?:{_MONTH}|{_SEASON}|q[1-4])\s+(?:{_DAY},?\s+)?)?{_YEAR}|"
    rf"(?:{_DAY}\s+)?{_MONTH}\b(?!\.?\d)(?:\s+{_DAY}\b)?|q[1-4]\b|"
    rf"(?:the\s+)?(?:last|this)\s+(?:year|quarter|month|week|{_SEASON}|{_MONTH})\b)"
)
_EARLIER_THAN = (
    re.compile(rf"\b(?:before|prior\s+to|older\s+than)\s+({_TIME})", re.IGNORECASE),
    re.compile(rf"\bpre-?({_YEAR})", re.IGNORECASE),
    re.compile(rf"\b(?:from|in)\s+({_YEAR})\s+(?:and|or)\s+(?:earlier|before|older)\b", re.IGNORECASE),
)
# A time before which something is to be done is no cohort: "since before 2020" (still so), "plan to replace
# it before 2026", "upgrade its plugins before March" (a review: a current use with a deadline was never
# revised). What comes before the time in its clause says which: "since", an intention or obligation said
# as one ("we plan to", "is scheduled", "must"), an object pronoun right before it, or a clause that starts
# with a verb of doing and its object ("Upgrade the plugins", not "Deploy logs" nor "Orders placed by
# customers before 2023 ...", which stay cohorts: a sixth review found such nouns read as verbs).
_CLAUSE_END = re.compile(r"[.;:!?\n]|,\s|\s(?:but|then|so)\s")
_CLAUSE_WIDTH = 160  # characters of a clause read before a time: a longer run says nothing more of it
# Words that say so whatever stands around them.
_OBLIGED = frozenset(word_tokens("will must should shall deadline"))
# Words that say so as a verb or predicate: followed by "to" or "on" ("plan to", "planning on", "due to"),
# or after a subject, a form of "be" or a modal ("we plan", "is scheduled", "are due"): "Terraform plans",
# "scheduled backups" and "invoices due before 2024" are things.
_INTENDED = frozenset(
    word_tokens(
        "plan plans planned planning want wants intend intends scheduled due aim aims expect expects hope "
        "hopes need needs needed required targeted expected"
    )
)
_ONLY_BEFORE_TO = frozenset(word_tokens("have has had going ought supposed meant got"))  # "have to"
_SAYERS = frozenset(
    word_tokens(
        "i we you they he she it is are was were be been being am will would must should shall can could may "
        "might also still"
    )
)
_DOING = frozenset(
    word_tokens(
        "upgrade replace migrate move switch finish retire drop remove update rotate renew fix ship complete "
        "check review test run deploy merge patch release submit send pay sign clean delete archive rename "
        "back"
    )
)
# What follows a verb of doing at a clause's head: its object's determiner or pronoun, or its particle
# ("back up", "clean out").
_OBJECT_HEADS = frozenset(
    word_tokens(
        "the a an its it them this that these those our your their his her my all every each any some up off "
        "out over"
    )
)
_OBJECTS = frozenset(word_tokens("it them this that these those him her"))
# A quarter alone or "the <year> launch" is as often a deadline or an event as a cohort's bound ("upgrade
# before Q3", "froze the config before the 2024 launch"): such a time names a cohort only in a cohort's
# shape, "from before", "older than", or a participle said of the things ("releases placed by the old team
# before Q3", not "we placed", "is required").
_WEAK_TIME = re.compile(rf"(?:q[1-4]|the\s+{_YEAR})$", re.IGNORECASE)
_PARTICIPLES = frozenset(
    word_tokens("made built written taken sent done bought sold paid set kept given held won begun run shot")
)


def _intended(words: list[str]) -> bool:
    for position, word in enumerate(words):
        following = words[position + 1] if position + 1 < len(words) else ""
        if word in _OBLIGED or (word in _ONLY_BEFORE_TO and following == "to"):
            return True
        if word in _INTENDED and (following in {"to", "on"} or (position and words[position - 1] in _SAYERS)):
            return True
    return False


def _doing(words: list[str]) -> bool:
    return words[0] in _DOING and (len(words) == 1 or words[1] in _OBJECT_HEADS)


def _participle_of_things(words: list[str]) -> bool:
    return any(
        (word.endswith("ed") or word in _PARTICIPLES) and position and words[position - 1] not in _SAYERS
        for position, word in enumerate(words)
    )


@keyed_by_text
@lru_cache(maxsize=4_096)
def earlier_times(text: str) -> frozenset[frozenset[str]]:
    """The times before which ``text`` names things as made (each time's content terms). Remembered: a
    write's switch is compared with each of its neighbours, and read once for all of them."""
    ends = [found.end() for found in _CLAUSE_END.finditer(text)]
    times = set()
    for pattern in _EARLIER_THAN:
        for found in pattern.finditer(text):
            at = found.start()
            clause_start = ends[bisect_right(ends, at) - 1] if ends and ends[0] <= at else 0
            words = word_tokens(text[max(clause_start, at - _CLAUSE_WIDTH) : at])
            if words and (words[-1] == "since" or words[-1] in _OBJECTS or _doing(words) or _intended(words)):
                continue
            time = found.group(1)
            if (
                _WEAK_TIME.search(time.strip())
                and not found.group(0).lower().startswith("older")
                and not (words and words[-1] == "from")
                and not _participle_of_things(words)
            ):
                continue
            times.add(term_set(time))
    return frozenset(times)


# When a switch was made, no part of what it is about either ("... to MySQL in March", "last week").
_WHEN = frozenset(
    content_terms(
        "january february march april may june july august september october november december jan feb mar "
        "apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday day days "
        "week weeks month months year years quarter ago last yesterday today tonight recently earlier lately "
        "morning afternoon evening night"
    )
)

# Who was switched is no part of what was: "Alice switched us from Postgres to MySQL".
_WHO = frozenset({"us", "them", "it", "me", "you", "everyone", "everybody", "everyth", "everything"})

# Words of a switch itself, no part of what it is about.
_SWITCH_TERMS = frozenset(
    content_terms(
        "switched switching moved moving migrated migrating changed changing went transitioned converted "
        "replaced stopped using use uses run running chose picked instead longer"
    )
)


# A denial is a revision only with a word of change ("we don't run X anymore", "doesn't use X now"): "does
# not use X" beside "uses X" says the opposite without saying that anything changed, a contradiction left
# open (a new user's trial: another agent's denial superseded the fact as a revision).
_DENIAL = re.compile(
    r"\b(?:don't|do not|doesn't|does not|won't|will not)\s+(?:use|using|run|running)\s+(?P<old>"
    + _NAME
    + r"{1,80}?)"
    + _END,
    re.IGNORECASE,
)


def parse_revision(text: str) -> Revision | None:
    patterns = (*_PATTERNS, _DENIAL) if has_revision_words(text) else _PATTERNS
    for pattern in patterns:
        match = pattern.search(text)
        if match is None:
            continue
        old = tuple(content_terms(match.group("old")))[:4]
        new = tuple(content_terms(match.groupdict().get("new") or ""))[:4]
        if old:
            about = frozenset(content_terms(text)) - set(old) - set(new) - _SWITCH_TERMS - _WHEN
            subject = frozenset(content_terms(match.groupdict().get("subject") or "")) - _SWITCH_TERMS - _WHO
            if pattern is _RENAMED and not subject:
                continue  # "We renamed it from api to api-server": what was renamed is not said (a review)
            return Revision(old, new, match.group(0), about, subject, text)
    return None


def has_revision_words(text: str) -> bool:
    """A word of change: "no longer", "from now on" (longer, now), "anymore" or "any more"."""
    words = word_tokens(text)
    return not REVISION_WORDS.isdisjoint(words) or any(pair == ("any", "more") for pair in pairwise(words))


def asserts_use_of(text: str, subject: tuple[str, ...]) -> bool:
    """Does ``text`` state the subject as the current choice: a usage cue within three words before it
    ("we use Postgres", "billing runs on Postgres 15"), not merely mention it ("Postgres listens on 5432")?"""
    words = word_tokens(text)
    stems = [light_stem(word) for word in words]
    head = subject[0]
    for position, stem in enumerate(stems):
        if stem != head:
            continue
        if any(word in USAGE_CUES for word in words[max(0, position - 3) : position]):
            return True
    return False


def names_apart(terms: list[str], wanted: tuple[str, ...], within: tuple[str, ...]) -> bool:
    """Whether the run of content ``terms`` holds ``wanted`` somewhere that is not inside a run of
    ``within``: "React" said apart from "React Native", in "uses React and ... React Native"."""
    size, outer = len(wanted), len(within)
    if not size:
        return False
    covered: set[int] = set()
    for start in range(len(terms) - outer + 1):
        if outer and tuple(terms[start : start + outer]) == within:
            covered.update(range(start, start + outer))
    return any(
        tuple(terms[start : start + size]) == wanted and not set(range(start, start + size)) <= covered
        for start in range(len(terms) - size + 1)
    )


def describes_old_state(text: str, newer: str) -> bool:
    """Whether ``text`` is about an old state itself ("Legacy image uploads remain on S3", "Archived image
    uploads: S3"), which a change away from it (the ``newer`` text) leaves true (a review): it says a word of
    an old state that the newer text does not. "Archive retention is 30 days" then "archive retention is now
    90 days" is a change of the same thing (a second review). So is a text about the things made before a
    time ("Image uploads from before 2024 are still on S3"), unless the newer text names the things made
    before that same time too (a third review: a move of image uploads superseded it, protected as it was;
    a fifth: "In 2024 we moved image uploads ..." names the year, not the uploads made before it)."""
    if (term_set(text) & _OLD_STATE) - cached_term_set(newer):
        return True
    return bool(earlier_times(text) - earlier_times(newer))


def disputed_by(text: str, revision: Revision) -> bool:
    """Whether ``revision`` disputes ``text`` that it does not revise: ``text`` places what the switch is of on
    what was given up, with a verb of placing in the present right before it, and says more of it ("Async
    jobs go through RabbitMQ on the shared cluster", then "We moved async jobs from RabbitMQ to Kafka": a trial
    saw the two kept apart, the older recalled unmarked). Not the old state itself, a text that names what
    replaced it, a negation, one that only mentions the two ("Alice designed the on-call rotation"), a past
    ("Async jobs went through RabbitMQ in 2022"), nor one whose verb places another thing ("Billing service
    backups of Postgres 14 are stored in S3", a review)."""
    terms = term_set(text)
    thing = revision.subject or revision.about
    return (
        bool(revision.new and thing and thing <= terms)
        and _names_what_was_given_up(text, terms, revision)
        and not negated(text)
        and not describes_old_state(text, revision.text)
        and _placed_on(text, revision.old)
    )


# A verb that places a thing on what it names right after it, said in the present: "go through RabbitMQ",
# "runs on Jenkins", "is hosted on Fly.io" (a participle after "is" or "are").
_PLACES = frozenset(
    word_tokens(
        "go goes run runs live lives deploy deploys host hosts point points ship ships send sends route routes "
        "store stores serve serves process processes handle handles use uses push pushes upload uploads"
    )
)
_PLACED = frozenset(
    word_tokens("hosted stored served processed handled routed sent deployed pushed uploaded kept")
)


def _placed_on(text: str, old: tuple[str, ...]) -> bool:
    """Whether ``text`` places something on ``old`` (its first content term) with a verb of ``_PLACES``
    within the three words before it, or a participle of ``_PLACED`` after "is" or "are" there."""
    words = word_tokens(text)
    for position, word in enumerate(words):
        if light_stem(word) != old[0]:
            continue
        before = words[max(0, position - 3) : position]
        if _PLACES & set(before) or (_PLACED & set(before) and {"is", "are"} & set(before)):
            return True
    return False


def _names_what_was_given_up(text: str, terms: set[str] | frozenset[str], revision: Revision) -> bool:
    """Whether ``text`` (its content ``terms``) names what ``revision`` gave up, and not already what replaced
    it: "uses React and React Native" names React Native apart from React (``names_apart``)."""
    return (
        set(revision.old) <= terms
        and not (set(revision.new) - set(revision.old)) & terms
        and not names_apart(content_terms(text), revision.new, revision.old)
    )


def revised_by(text: str, revision: Revision) -> bool:
    """Whether ``revision`` gives up what ``text`` states as the current choice: it names what was given
    up, and not already what replaced it ("switched from Postgres 16 to Postgres 17" revises "uses Postgres
    16", not "uses Postgres 16 and 17", nor, for "from React Native to React", "the web app uses React and
    the mobile app React Native"), and states it as in use (``asserts_use_of``, or a switch to it)."""
    terms = term_set(text)
    if not _names_what_was_given_up(text, terms, revision):
        return False
    # A switch of a named thing ("moved the production deploys from Fly.io to Render") is of that thing
    # only: an older text about another ("Staging deploys run on Fly.io", "Monday deploys ...") or about the
    # old state itself ("Legacy image uploads remain on S3") stays (a review: protected memories of each were
    # superseded). The thing is what the switch names before "from", not its reasons or who made it ("...
    # because the team knows it better", "Alice switched us from ...": a second review).
    of_another = bool(revision.subject) and not revision.subject <= terms
    if of_another or describes_old_state(text, revision.text):
        return False
    if asserts_use_of(text, revision.old):
        return True
    # A switch that names both ends and what it is of ("moved the webshop deploys from Fly.io to Render")
    # revises an older text that says only that this thing goes to what was given up ("The webshop deploys
    # to Fly.io"), whatever placing verb it said so with (a trial: "deploys to", "goes to", "processed by"
    # are no usage cues): every word of what the switch is of is there, nothing else but such a verb, and
    # it negates nothing. Not "Error tracking must never send user emails to Sentry", nor "Alice designed
    # the on-call rotation" after the rotation moved from Alice to Bob (reviews).
    thing = revision.subject or revision.about
    extra = terms - thing - set(revision.old)
    if (
        revision.new
        and thing
        and thing <= terms
        and extra <= _PLACING
        and len(extra) <= 1
        and not negated(text)
    ):
        return True
    # A switch states what it moved to as the choice: in a chain each switch revises the one before (a
    # trial found the second left standing), when both are of the same thing: "We moved the roadmap from
    # Notion to Linear" leaves "We moved the docs from Confluence to Notion" (a review).
    earlier = parse_revision(text)
    return (
        earlier is not None
        and earlier.new[: len(revision.old)] == revision.old
        and (earlier.about <= revision.about or revision.about <= earlier.about)
    )
