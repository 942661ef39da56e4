"""Who holds a role (pure): "Priya is the on-call lead", then "Dan Reyes is the on-call lead" or "Dan took over
on-call from Priya". A role said with "the" (or "our") has one holder at a time, so a newer memory that gives
the same role to another name says the older one's holder is no longer it. A new user's trial saw the two kept
side by side as two facts, the older recalled first; the value rules (``retrieval.contradictions``) read a name
only in the place of a value at the end of the same words ("is owned by Carla Reyes", then "... by Dmitri
Volkov"), never as the subject, and never in names of two lengths.

Read only in memories of one sentence: a turn of a conversation that says more ("Caroline is the best. We
went hiking ...") is no statement of who holds what. An older memory's sentence of clauses is read clause by
clause ("The orders-service is owned by the Checkout team; the tech lead is Priya Nair"), and a newer
holder of a role one of them names only disputes it (``clause_holding``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from retrieval.contradictions import (
    NOT_SAID_TO_CHANGE,
    SAYS_MORE,
    Contradiction,
    ContradictionInput,
    is_value,
    without_correction_label,
)
from retrieval.text import STOPWORDS, keyed_by_text, negated

# A name: one to three words written with a capital ("Priya", "Dan Reyes", "Amazon Aurora PostgreSQL").
_NAME_WORD = r"[A-Z][\w'\u2019-]*"
_NAME = rf"{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,2}}"
# Or a host or an identifier that holds it: "pg-billing-02.internal is the billing Postgres primary", "v2.4 is the
# current release" (a letter first, then a digit or a dot inside).
_HOST = r"(?=[a-z][\w-]*\d|[a-z][\w-]*\.)[a-z][\w-]*+(?:\.[\w-]++)*+"
_HOLDER = rf"(?:{_NAME}|{_HOST})"
# The words before a role that make it the one of its kind: "the on-call lead", "our tech lead". Not "a" or
# "an": "Priya is an on-call engineer" and "Dan is an on-call engineer" are both true. Nor "my" or "their",
# whose holder depends on who says it: "My name is Caroline" and "My name is Melanie" in one conversation.
_ONE_OF = r"(?:the|our)"
_ROLE = r"[^.;:!?()]{1,80}?"
_END = r"\s*\.?\s*\Z"  # not "!": "Caroline is the best!" praises
# "Priya is the on-call lead", "Dan is now our tech lead", "Dan Reyes is the new on-call lead".
_HOLDER_IS = re.compile(
    rf"\A\s*(?P<holder>{_HOLDER})\s+(?:is|'s)\s+(?P<now>now\s+)?{_ONE_OF}\s+(?P<role>{_ROLE}){_END}"
)
# "The on-call lead is Priya", "Our tech lead is now Dan Reyes".
_ROLE_IS = re.compile(
    rf"\A\s*(?i:{_ONE_OF})\s+(?P<role>{_ROLE})\s+(?:is|'s)\s+(?P<now>now\s+)?(?P<holder>{_HOLDER}){_END}"
)
# A handover that names the holder given up: "Dan took over on-call from Priya", "Dan has taken over as the
# on-call lead from Priya", "Dan took over from Priya as on-call lead", "Dan replaced Priya as the tech lead".
_TAKES_OVER = r"(?:took|takes|has\s+taken|is\s+taking|will\s+take)\s+over"
_HANDED_OVER = (
    re.compile(
        rf"\A\s*(?P<holder>{_NAME})\s+{_TAKES_OVER}\s+(?:as\s+)?(?:{_ONE_OF}\s+)?(?P<role>{_ROLE})\s+"
        rf"from\s+(?P<former>{_NAME}){_END}"
    ),
    re.compile(
        rf"\A\s*(?P<holder>{_NAME})\s+(?:{_TAKES_OVER}\s+from|(?:has\s+)?replaced|replaces)\s+"
        rf"(?P<former>{_NAME})\s+as\s+(?:{_ONE_OF}\s+)?(?P<role>{_ROLE}){_END}"
    ),
)
# A holder who became it ("Dan became the on-call lead"), or to whom the former one handed it ("Priya handed the
# on-call lead over to Dan", "Priya handed over on-call to Dan").
_BECAME = re.compile(
    rf"\A\s*(?P<holder>{_NAME})\s+(?:became|has\s+become|becomes|is\s+becoming)\s+{_ONE_OF}\s+(?P<role>{_ROLE}){_END}"
)
_HANDED_TO = re.compile(
    rf"\A\s*(?P<former>{_NAME})\s+(?:has\s+)?(?:handed|hands|passed|passes)\s+(?:over\s+)?(?:{_ONE_OF}\s+)?"
    rf"(?P<role>{_ROLE})\s+(?:over\s+)?to\s+(?P<holder>{_NAME}){_END}"
)
# Ownership said to have moved to someone: "billing-api ownership moved to Dana Kim", "Ownership of the billing
# service passed to Dana", "The billing-api ownership was transferred to Dana Kim" (a new user's trial saw the
# first kept beside "The owner of billing-api is Marcus Lee", undisputed, the older recalled first).
# (and from whom, when it says: "Billing service ownership moved from Alice Chen to Dave Patel", a trial)
_MOVED_TO = (
    r"(?:has\s+|was\s+|got\s+)?(?:moved|passed|went|transferred|handed\s+over|reassigned)"
    rf"(?:\s+from\s+(?P<former>{_NAME}))?\s+to"
)
_OWNERSHIP_MOVED = (
    re.compile(
        rf"\A\s*(?i:the\s+)?(?P<role>{_ROLE})\s+(?i:ownership)\s+{_MOVED_TO}\s+(?P<holder>{_NAME}){_END}"
    ),
    re.compile(
        rf"\A\s*(?i:(?:the\s+)?ownership\s+of)\s+(?P<role>{_ROLE})\s+{_MOVED_TO}\s+(?P<holder>{_NAME}){_END}"
    ),
)
# Owned by someone, said of the thing: "The search service is owned by Marta Kowalski" (a trial saw "Ownership of
# the search service passed to Jonas Weber" leave it standing, undisputed).
_OWNED_BY = re.compile(
    rf"\A\s*(?P<role>(?i:the|our)\s+{_ROLE})\s+(?:is|are)\s+(?P<now>now\s+)?owned\s+by\s+(?P<holder>{_NAME}){_END}"
)
# Who owns a thing holds the role of its owner: "Marco Bianchi owns the billing service" (and "Lena took over
# ownership of the billing service from Marco").
_OWNS = re.compile(rf"\A\s*(?P<holder>{_NAME})\s+(?P<now>now\s+)?owns\s+(?P<role>{_ONE_OF}\s+{_ROLE}){_END}")
# When a role is held, said beside it: not what the role is ("the on-call lead this quarter", "... starting
# December", "... for now"). A role named with another time is still the same role; the handover's date is
# left to the reader (the older memory is then disputed, not superseded).
_CALENDAR = (
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june|july|"
    r"august|september|october|november|december|today|tomorrow)s?"
)
_WHEN = re.compile(
    r"\b(?:(?:this|next|last)\s+(?:week|month|quarter|sprint|year|rotation|cycle)|for\s+now|currently|"
    r"today|yesterday|for\s+(?:q[1-4]|h[12]|fy\d{2,4}|\d{4})|"
    r"right\s+now|going\s+forward|from\s+now\s+on|"
    rf"(?:starting|from|as\s+of|since|until|till|through|effective|in|on)\s+(?:(?:next|this)\s+)?"
    rf"(?:{_CALENDAR}|week|month|quarter|\S*\d\S*)(?:\s+\S*\d\S*)?)\b",
    re.IGNORECASE,
)
# What led to it, said first: "After the failover, ...". Not "With Priya out this week, Dan is the on-call lead"
# nor "Since Priya is at the offsite, ...": a stand-in, while the holder is away (a review).
_LED_TO = re.compile(r"\A(?:after|following)\s+[^,;.]{1,60},\s*", re.IGNORECASE)
_CALENDAR_NAME = re.compile(_CALENDAR, re.IGNORECASE)
# Words a role may say that add to who holds it rather than name another: "Dan is also the on-call lead".
_BESIDE = frozenset({"also", "too", "co", "another", "one", "backup", "deputy", "acting"})
# Words that only name a role as a role: "took over on-call" hands over "the on-call lead" whole.
_ROLE_NOUNS = frozenset({"lead", "owner", "manager", "engineer", "rotation", "duty", "person", "primary"})
_SOMEONES = frozenset({"my", "your", "his", "her", "their", "we", "i", "me", "us", "you"})
_COUNTS = frozenset({"two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "several"})
_HOLDER_OF = {"management": "manager", "leadership": "lead", "ownership": "owner"}
_ARTICLES = frozenset({"the", "our"})
_ROLE_WORD = re.compile(r"[\w'\u2019-]+")


@dataclass(frozen=True)
class Holding:
    """What a memory of one sentence says of a role: who holds it, the role's words (lower case, without
    when it is held), whether it says the holder changed ("now", "the new ...", a handover), the holder
    it names as given up ("from Priya"), and who a memory that says more says has left."""

    holder: tuple[str, ...]
    role: tuple[str, ...]
    changed: bool
    former: tuple[str, ...] = ()
    # who the rest of the memory says has left ("...; Marcus Lee has left the team")
    left: tuple[str, ...] = ()


def _name(text: str) -> tuple[str, ...] | None:
    """A name's words, lower case; None when it is no name: a word of the language that starts a sentence
    ("The", "We", "That"), or a value ("Monday", "Build 1234")."""
    words = tuple(text.lower().split())
    if len(words) == 1 and re.fullmatch(_HOST, text) and not _CALENDAR_NAME.fullmatch(words[0]):
        return words  # a host or an identifier: a value, but one that holds a role
    if words[0] in STOPWORDS or any(is_value(word) for word in words):
        return None
    return words


def _role(text: str) -> tuple[tuple[str, ...], bool] | None:
    """A role's words without when it is held, and whether it is "the new" one; None when it adds a holder
    ("also the on-call lead", "a backup on-call lead") or is only a time."""
    # (without "the" or "our": "Alice owns the billing service" and "billing service ownership moved to Dave"
    # name one role, as "owner of the billing service" and "owner of billing service" do)
    words = [word.lower() for word in _ROLE_WORD.findall(_WHEN.sub(" ", text))]
    words = [word for word in words if word not in _ARTICLES]
    new = bool(words) and words[0] == "new"
    words = words[1:] if new else words
    # What the role does, as its holder's name: "ownership of the billing service" gives its owner's role, and
    # "handed release management over" the release manager's (a new user's trial saw it kept beside "Ahmed Ali
    # is the release manager for Q3").
    words = [_HOLDER_OF.get(word, word) for word in words]
    if not words or _BESIDE & set(words) or (len(words) == 1 and words[0].endswith("est")):
        return None  # (a superlative alone praises: "Caroline is the greatest")
    if _SOMEONES & set(words) or any(is_value(word) or word in _COUNTS for word in words):
        return None  # "the name of my dog", "the mother of two": whose, or one of a count (a review)
    return tuple(words), new


@keyed_by_text
@lru_cache(maxsize=8_192)
def holding(text: str) -> Holding | None:
    """Who ``text`` says holds which role (``Holding``); None when it says no such thing, denies it ("Dan is
    not the on-call lead"), or says more than one sentence."""
    text = without_correction_label(text)  # ("Correction: ...": no part of who holds what)
    if negated(text) or re.search(r"[.!?;]\s+\S", text.strip()):
        return None
    said = " ".join(_WHEN.sub(" ", text).split())  # (when: no part of who holds what)
    # "After the failover, pg-billing-02 is the primary": what led to it is no part of who holds what either.
    said = _LED_TO.sub("", said, count=1)
    # "Dan is the on-call lead now": the change said last (a review found it read as less than without it).
    said, now_last = re.subn(r"\s+now\s*(?=\.?\Z)", "", said)
    for pattern, handed in (
        (_HOLDER_IS, False),
        (_ROLE_IS, False),
        (_OWNS, False),
        (_OWNED_BY, False),
        (_BECAME, False),
        *((p, True) for p in (*_HANDED_OVER, _HANDED_TO)),
        *((p, True) for p in _OWNERSHIP_MOVED),
    ):
        found = pattern.match(said)
        if found is None:
            continue
        written = found.group("role")
        owned = pattern in (_OWNS, _OWNED_BY) or pattern in _OWNERSHIP_MOVED
        holder, role = _name(found.group("holder")), _role(f"owner of {written}" if owned else written)
        former = _name(found.group("former")) if found.groupdict().get("former") else ()
        if holder is None or role is None or former is None:
            return None
        if re.search(r"\b(?:also|too)\b", said, re.IGNORECASE):
            return None
        now = not handed and (("now" in found.groupdict() and found.group("now") is not None) or now_last > 0)
        return Holding(holder, role[0], handed or now or role[1] or pattern is _BECAME, former)
    return None


# Someone said to have gone, in the rest of a memory that hands a role over ("...; Marcus Lee has left the team").
_LEFT = re.compile(rf"(?:\A|[;,.])\s*(?:and\s+)?(?P<former>{_NAME})\s+(?:has\s+)?(?:left|quit|departed)\b")


# Someone gone for good, said as a memory's first clause: "Dana Kim left the company", "Marcus has retired".
_LEFT_FOR_GOOD = re.compile(
    rf"(?P<former>{_NAME})\s+(?:has\s+)?(?:(?:left|quit)\s+(?:the\s+|our\s+)?(?:company|team|org|organi[sz]ation|"
    rf"project|job|firm)|resigned|retired|departed)\.?"
)
# What says a holder only stands in while the other is away.
_STANDING_IN = re.compile(
    r"\b(?:until|till|while|temporarily|covering|in\s+the\s+meantime|meanwhile|for\s+now|"
    r"for\s+the\s+(?:day|evening|night|week|weekend)|today|tonight|this\s+week)\b",
    re.IGNORECASE,
)


def handed_over_first(text: str) -> Holding | None:
    """A handover said in the first sentence or clause of a memory that says more ("Dan took over on-call
    from Priya today; page him for platform incidents", "billing-api ownership moved to Dana Kim; Marcus Lee
    has left the team"): what the rest says is the newer memory's own, but for whom it says has left
    (``Holding.left``), whose role is then the one handed over however each memory words it."""
    parts = re.split(r";|[.!?](?=\s)", text, maxsplit=1)  # (``holding`` sets a correction's label aside)
    if len(parts) < 2 or parts[0].strip() == text.strip():
        return None
    said = holding(parts[0])
    left = _LEFT.search(parts[1])
    first = without_correction_label(parts[0]).strip()
    if said is None and (gone_first := _LEFT_FOR_GOOD.fullmatch(first)) and not _STANDING_IN.search(parts[1]):
        # Who left for good, then who holds the role now: "Dana Kim left the company; Luis Ortega is now the
        # primary contact for the AWS account" (a new user's trial saw it kept beside Dana's role,
        # undisputed). Not someone away ("left for vacation", "left early today") nor a stand-in ("until
        # Friday", "for the evening"): the role is theirs again after (a review).
        said, left = holding(parts[1]), gone_first
    if said is None or not said.changed:
        return None
    gone = _name(left.group("former")) if left is not None else None
    if gone is not None and not set(gone) & set(said.holder):
        said = replace(said, left=gone)
    return said


def _names_one(some: tuple[str, ...], other: tuple[str, ...]) -> bool:
    """Whether two names may be one person's: one's words among the other's ("Priya", "Priya Nair")."""
    return set(some) <= set(other) or set(other) <= set(some)


def _same_role(newer: Holding, older: Holding) -> bool:
    """The same role: the same words, or, for a handover that names the older memory's holder as given up,
    one role's words among the other's ("took over on-call from Priya" and "Priya is the on-call lead")."""
    if newer.role == older.role:
        return True
    named = any(gone and _names_one(gone, older.holder) for gone in (newer.former, newer.left))
    return named and (set(newer.role) <= set(older.role) or set(older.role) <= set(newer.role))


# Words that tie a role to its thing: "the tech lead of the orders-service", "the on-call lead for payments".
_OF_THING = frozenset({"of", "for", "the", "our"})


def clause_holding(text: str, newer: Holding) -> Holding | None:
    """Who a clause of ``text``, a sentence of clauses, says holds ``newer``'s role: "The
    orders-service is owned by the Checkout team; the tech lead is Priya Nair" beside "The tech lead of the
    orders-service is now Marco Rossi" (a second trial kept the two undisputed, the older recalled first).
    The clause may leave out the thing the role is of when the memory names it elsewhere ("orders-service"
    in its first clause); with ``newer``'s role words then, as ``_same_role`` compares them."""
    if re.search(r"[.!?]\s+\S", text.strip()):
        return None  # more than one sentence: no statement of who holds what (as ``holding``)
    clauses = [clause for clause in text.split(";") if clause.strip()]
    if len(clauses) < 2:
        return None
    words = {word.lower() for word in _ROLE_WORD.findall(text)}
    for clause in clauses:
        said = holding(clause)
        if said is None:
            continue
        thing = set(newer.role) - set(said.role) - _OF_THING
        if said.role == newer.role or (set(said.role) < set(newer.role) and thing <= words):
            return replace(said, role=newer.role)
    return None


def holder_changes(memory: ContradictionInput, others: Sequence[ContradictionInput]) -> list[Contradiction]:
    """The older of ``others`` that give the role ``memory`` gives to one name to another, with no word in
    common ("Priya", then "Dan Reyes"; "Carla Reyes" and "Carla Diaz" may be one person written two ways).
    The pair is said in words (``named_in_words``) when ``memory`` says the holder changed ("now", "the new
    on-call lead", "took over ... from Priya", also as the first clause of a memory that says more; "Priya"
    names "Priya Nair"): a revision. Otherwise it only disputes: two holders of one role, the newer most
    likely the current one."""
    newer = holding(memory.content) or handed_over_first(memory.content)
    if newer is None:
        return []
    found = []
    for other in others:
        if other.id == memory.id or other.created_at > memory.created_at:
            continue
        older, says_more = holding(other.content), False
        if older is None:  # a clause of a memory that says more, then only disputed
            older, says_more = clause_holding(other.content, newer), True
        if older is None or set(older.holder) & set(newer.holder) or not _same_role(newer, older):
            continue
        if newer.former and not _names_one(newer.former, older.holder):
            continue  # a handover from someone else: not this holder's
        old, new = " ".join(older.holder), " ".join(newer.holder)
        if newer.role[0] == "owner" and not newer.changed:
            continue  # two owners said plainly may own it together ("John owns the house", "Maria owns ...")
        if says_more:
            found.append(Contradiction(other.id, memory.id, old, new, 1.0, only_disputes=SAYS_MORE))
        elif newer.changed:
            # A handover of part of the role ("took over on-call" from "the release manager and on-call
            # lead", or "... on-call lead for payments") says nothing of the rest: disputed (a review). A
            # word that only names it as a role is no rest ("on-call" and "the on-call lead").
            extra = set(older.role) - set(newer.role) - {"the"}  # ("owner of the billing-api": no more)
            part = None if newer.role == older.role or extra <= _ROLE_NOUNS else SAYS_MORE
            found.append(
                Contradiction(other.id, memory.id, old, new, 1.0, named_in_words=True, only_disputes=part)
            )
        else:
            found.append(Contradiction(other.id, memory.id, old, new, 1.0, only_disputes=NOT_SAID_TO_CHANGE))
    return found
