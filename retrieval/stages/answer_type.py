"""Stage: answer type. A question that asks *when*, *where* or *how many* is answered by a memory that
states a time, a place or a quantity ("when did we migrate the billing database?" - "migrated it to
Postgres 15 on 2026-03-02"). Among the matches of such a question, one whose text states what it asks for
is lent ``answer_type_weight`` (0.7) x its own weighted score (which carries its attribution, instruction
and decay factors and, when weighting is on, its feedback weight): ``final = weighted + neighbourhood +
answer_type``. Lent in proportion, it moves a memory among those about as relevant, whatever the scale
of the scores (a reranker's or the fused one), and lifts no barely relevant memory over a good one.

Why: the full-text and vector legs match what a question is *about* ("billing database"); several
memories are about it, and the one that says when (or where, or how many) is the one the agent needs.
Classical question answering ranked by the expected answer type for the same reason. On LoCoMo's
held-out conversations it lifted best-first R@5 by 0.008-0.011 on both backends, temporal questions most
(docs/retrieval.md, "The answer type").

What it reads, in English only. The question's first words (``asked_for``): "when" followed by a verb
("when did", "when is", "when's": not "when running the tests, ..."), "what date", "which year", "how long
ago"; "where", "which file", "in which city"; "what host", "which server"; "how many", "how much", "how
long", "how often". The memory's text (``states``): a date, a clock time, a year, a month or weekday name,
or a relative time ("yesterday", "last week", "3 days ago"); a capitalised name after a preposition ("in
Lisbon", "at the Acme office"), a path, a file name or a URL; for a host, a name in a private domain
("db-stg-02.internal") or of three labels in a public one ("smtp.sendgrid.net"), an IPv4 address,
localhost, a URL, or a capitalised name after a preposition with no version number after it (not "on
Python 3.10"); a number, or a number word from two up ("three", "twice").
A query that asks for none of these changes nothing. The stage runs after the relevance floor, so it never
lets a memory in. A match is a direct one, or one episode expansion lifted to a sibling's score (it was
matched); a memory only expansion brought is not, and a lifted one stays at most at its source's score.
"""

from __future__ import annotations

import re
from typing import Literal

from retrieval.stages.expansion import ranked, within_source
from retrieval.trace import AnswerTypeApplied, StageOutput
from retrieval.types import Candidate, RecallRequest

AnswerType = Literal["time", "place", "host", "quantity"]

_QUALIFIED = (
    r"(?:ports?|names?|keys?|config(?:uration)?s?|settings?|types?|formats?|sizes?|versions?|limits?|counts?|"
    r"numbers?|ids?|owners?|timeouts?|users?|passwords?|tokens?)\b"
)
_QUESTIONS: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    (
        "time",
        re.compile(
            r"(?:when(?:'s|\s+(?:did|do|does|is|are|was|were|will|would|has|have|had|can|could|should)\b)"
            r"|since when|how long ago|(?:what|which) (?:date|day|month|year|time|week)s?\b)",
            re.IGNORECASE,
        ),
    ),
    ("quantity", re.compile(r"how (?:many|much|long|often|old|far)\b", re.IGNORECASE)),
    # A place word before the noun it qualifies asks for that thing ("what host port", "which file format"),
    # not for a place (``_QUALIFIED``).
    (
        "host",
        re.compile(
            r"(?:on |at )?(?:what|which) (?:hosts?|hostnames?|servers?|ips?(?: address(?:es)?)?)\b(?!-)"
            # nor what runs on one ("what host OS", "which server framework", "which hosts file")
            r"(?!\s+(?:"
            + _QUALIFIED
            + r"|os|oses|operating|files?|frameworks?|software|ranges?|spaces?|blocks?))",
            re.IGNORECASE,
        ),
    ),
    (
        "place",
        re.compile(
            r"(?:where\b|(?:in )?(?:what|which) (?:city|cities|country|countries|town|place|state|"
            r"director(?:y|ies)|folders?|files?|repo(?:sitory|sitories|s)?)\b(?!\s+" + _QUALIFIED + r"))",
            re.IGNORECASE,
        ),
    ),
)
# Words that may open a question before the question word ("so when did...", "and where is...").
_LEAD = re.compile(
    r"\s*(?:(?:and|but|so|ok|okay|then|also|remind me|tell me|do you know)\b[\s,]*)*", re.IGNORECASE
)

_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
# Month names in any case, but "may" and "march" only capitalised, and not "May I ask".
_MONTH_NAMED = (
    r"(?i:january|february|april|june|july|august|september|october|november|december)"
    r"|March|May(?! (?:I|we|you|he|she|they)\b)"
)
_SHORT_MONTHS = "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
_DAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
_UNITS = r"(?:second|minute|hour|day|night|week|weekend|month|year|summer|winter|spring|autumn|fall)"
# From two up: "one" is as often a pronoun ("no one", "the one in utils"), and "a few" says no number.
_NUMBER_WORDS = (
    r"two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|"
    r"thousand|million|billion|dozen|twice"
)
_FILE = r"[\w-]+\.(?:py|ts|tsx|js|jsx|go|rs|java|kt|rb|php|cs|c|h|cpp|hpp|sh|sql|toml|ya?ml|json|ini|cfg|conf|md|txt|env|lock)"
# A host: a name in a private domain ("db-stg-02.internal"), a name of three labels or more in a public one
# ("smtp.sendgrid.net"; two, "socket.io", "example.com", name a library or a site as often), not an email
# address's domain; an IPv4 address (not a version of four numbers); localhost.
_LABEL = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
_HOST = (
    rf"(?i:(?<![@\w.-])(?:(?:{_LABEL}\.)+(?:internal|local|lan|corp|intra|cluster|svc)"
    rf"|(?:{_LABEL}\.){{2,}}(?:com|net|org|io|dev|app|cloud|ai|co|us|eu|uk|de))\b(?![.-]\w)"
    # (a version of four numbers is not one: "version 1.2.3.4", "version: 1.2.3.4", "release 4.0.1.2")
    r"|(?<![\w.])(?<!version )(?<!version: )(?<!versions )(?<!release )(?<!release: )"
    r"(?:\d{1,3}\.){3}\d{1,3}(?![\w.]\d?)|\blocalhost\b)"
)
# A capitalised name after a preposition ("in Lisbon", "at the Acme office"), not a month, a day or "I".
_AFTER_PREPOSITION = rf"\b(?i:in|at|to|from|near|into|inside|outside|around|under|on)\s+(?:the\s+)?(?!(?:{_MONTHS}|{_DAYS}|I)\b)"
_URL = r"\bhttps?://\S+"
# The places that answer a host question: a capitalised name after a preposition ("the runners live in
# Frankfurt", "runs on Kestrel-Bastion") with no digit in it and no version number after it, or a URL. Not a
# path or a file name, nor a runtime with its version: a second trial's "what host is the orders-service on?"
# lent "Deploy the orders-service with `./scripts/deploy.sh orders prod`" and "The orders-service runs on
# Python 3.10 with Django 4.2" as much as the host it had moved to, and ranked that one fourth.
_HOST_PLACE = rf"{_AFTER_PREPOSITION}(?![\w'-]*\d)[A-Z][\w'-]+(?!\s+v?\d)(?![\w'-])|{_URL}"
_STATES: dict[AnswerType, re.Pattern[str]] = {
    "time": re.compile(
        rf"\b(?:\d{{4}}-\d{{2}}(?:-\d{{2}})?|\d{{1,2}}:\d{{2}}|\d{{1,2}}\s?(?:[ap]\.?m)\b|(?:19|20)\d{{2}}|"
        rf"{_MONTH_NAMED}|(?i:{_DAYS})s?)\b|\b(?:{_SHORT_MONTHS})\.?(?=\s+\d)"
        rf"|(?i:\b(?:yesterday|today|tonight|tomorrow|recently|ago|"
        rf"(?:last|next|this|past|previous|coming) (?:{_UNITS}|{_DAYS.lower()})s?)\b)"
    ),
    "quantity": re.compile(rf"\b\d+(?:[.,]\d+)?\b|(?i:\b(?:{_NUMBER_WORDS})\b)"),
    "place": re.compile(
        rf"{_AFTER_PREPOSITION}[A-Z][\w'-]+"
        r"|(?<![\w/.~])(?:~|\.{1,2})?/[\w.-]+/[\w./-]*|\b[\w.-]+/[\w.-]+/[\w./-]*|\b[A-Za-z]:\\\S+"
        rf"|{_URL}|\b(?:[\w.-]+/)*{_FILE}\b"
    ),
    # A host: a name in a domain a host lives in, an IPv4 address, localhost (a new user's trial: "what host
    # is the staging database on?" lent "CI runs on GitHub Actions" and "stored in UTC", not "moved from
    # db-stg-01.internal to db-stg-02.internal"). Only a question that asks for a host reads hosts: "where
    # are the backups stored?" lent the database's host as much as the backups' bucket. Or a place that may
    # be one (``_HOST_PLACE``).
    "host": re.compile(f"{_HOST}|{_HOST_PLACE}"),
}


def asked_for(question: str) -> AnswerType | None:
    """What kind of answer ``question`` asks for, from its first words; None when it asks for none of them."""
    start = _LEAD.match(question)
    rest = question[start.end() :] if start else question
    for answer_type, pattern in _QUESTIONS:
        if pattern.match(rest):
            return answer_type
    return None


def states(answer_type: AnswerType, text: str) -> bool:
    """Whether ``text`` states an answer of that type (a time, a place, a host or a place that may be one, a
    quantity)."""
    return _STATES[answer_type].search(text) is not None


def matched(candidate: Candidate) -> bool:
    """A direct match, or a direct match episode expansion lifted to its sibling score (it keeps the rank
    feedback gave it); not a memory only expansion brought."""
    return candidate.source == "direct" or candidate.weighted_rank is not None


def lend_answer_type(
    candidates: tuple[Candidate, ...], answer_type: AnswerType, weight: float
) -> tuple[tuple[Candidate, ...], int]:
    """Pure: each match whose text states ``answer_type`` is lent ``weight x`` its weighted score; a
    lifted sibling's final score stays at most its source's. Returns the candidates in final order and
    how many were lent."""
    bonuses = {
        c.id: weight * c.weighted_score
        for c in candidates
        if matched(c) and c.weighted_score > 0.0 and states(answer_type, c.memory.content)
    }
    finals = {c.id: c.final_score - c.answer_type_bonus + bonuses.get(c.id, 0.0) for c in candidates}
    revised: list[Candidate] = []
    for candidate in candidates:
        own = candidate.final_score - candidate.answer_type_bonus
        bonus = within_source(bonuses.get(candidate.id, 0.0), candidate, finals, own)
        if bonus != candidate.answer_type_bonus:
            candidate = candidate.revised(answer_type_bonus=bonus)
        revised.append(candidate)
    return ranked(revised), sum(1 for candidate in revised if candidate.answer_type_bonus > 0.0)


class AnswerTypeStage:
    name = "answer_type"

    def __init__(self, weight: float) -> None:
        if weight < 0.0:
            raise ValueError(f"answer_type_weight must be 0 or more, but got {weight}")
        self._weight = weight

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        answer_type = asked_for(request.query) if self._weight > 0.0 else None
        if answer_type is None or not candidates:
            return StageOutput(candidates, (AnswerTypeApplied(answer_type, self._weight, 0),))
        lent, count = lend_answer_type(candidates, answer_type, self._weight)
        return StageOutput(lent, (AnswerTypeApplied(answer_type, self._weight, count),))
