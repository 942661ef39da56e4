"""Stage: answer type. A question that asks *when*, *where* or *how many* is answered by a memory that
states a time, a place or a quantity ("when did we migrate the billing database?" - "migrated it to
Postgres 15 on 2026-03-02"). Among the direct matches of such a question, one whose text states what it
asks for is lent ``answer_type_weight`` (0.2) x its own scale (attribution, instruction and decay factors,
its feedback weight up to 1, as the episode neighbourhood scales its loan): ``final = weighted +
neighbourhood + answer_type``.

Why: the full-text and vector legs match what a question is *about* ("billing database"); several
memories are about it, and the one that says when (or where, or how many) is the one the agent needs.
Classical question answering ranked by the expected answer type for the same reason. On LoCoMo's
held-out conversations it lifted best-first R@5 by 0.008 on both backends, temporal questions by 0.04
(docs/retrieval.md, "The answer type").

What it reads, in English only: the question's first words (``asked_for``), and the memory's text
(``states``): a date, a clock time, a year, a month or weekday name, or a relative time ("yesterday",
"last week", "3 days ago"); a capitalised name after a preposition ("in Lisbon", "at the Acme
office"), a path or a URL; a number or a number word. A question that asks for none of these, or a query
that is not a question, changes nothing. The stage runs after the relevance floor, so it never lets a
memory in; siblings are not lent anything (they were not matched).
"""

from __future__ import annotations

import re
from typing import Literal

from retrieval.stages.expansion import ranked
from retrieval.stages.neighbourhood import own_scale
from retrieval.trace import AnswerTypeApplied, StageOutput
from retrieval.types import Candidate, RecallRequest

AnswerType = Literal["time", "place", "quantity"]

_QUESTIONS: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    (
        "time",
        re.compile(
            r"(?:when|since when|how long ago|(?:what|which) (?:date|day|month|year|time|week))\b",
            re.IGNORECASE,
        ),
    ),
    ("quantity", re.compile(r"how (?:many|much|long|often|old|far)\b", re.IGNORECASE)),
    (
        "place",
        re.compile(
            r"(?:where|(?:in )?(?:what|which) (?:city|country|town|place|state|directory|folder|file|"
            r"repo|repository|host|server)\b)",
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
_UNITS = r"(?:second|minute|hour|day|night|week|weekend|month|year|summer|winter|spring|autumn|fall|time)"
_NUMBER_WORDS = (
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|"
    r"thousand|million|billion|dozen|once|twice|several|few|couple"
)
_STATES: dict[AnswerType, re.Pattern[str]] = {
    "time": re.compile(
        rf"\b(?:\d{{4}}-\d{{2}}(?:-\d{{2}})?|\d{{1,2}}:\d{{2}}|\d{{1,2}}\s?(?:[ap]\.?m)\b|(?:19|20)\d{{2}}|"
        rf"{_MONTH_NAMED}|(?:{_SHORT_MONTHS})\.?(?=\s+\d)|(?i:{_DAYS})s?)\b"
        rf"|(?i:\b(?:yesterday|today|tonight|tomorrow|recently|ago|"
        rf"(?:last|next|this|past|previous|coming) (?:{_UNITS}|{_DAYS.lower()})s?)\b)"
    ),
    "quantity": re.compile(rf"\b\d+(?:[.,]\d+)?\b|(?i:\b(?:{_NUMBER_WORDS})\b)"),
    "place": re.compile(
        rf"\b(?i:in|at|to|from|near|into|inside|outside|around|under|on)\s+(?:the\s+)?"
        rf"(?!(?:{_MONTHS}|{_DAYS}|I)\b)[A-Z][\w'-]+"
        r"|(?<![\w/])(?:~|\.{1,2})?/[\w.-]+/[\w./-]*|\b[A-Za-z]:\\\S+|\bhttps?://\S+"
    ),
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
    """Whether ``text`` states an answer of that type (a time, a place, a quantity)."""
    return _STATES[answer_type].search(text) is not None


def lend_answer_type(
    candidates: tuple[Candidate, ...], answer_type: AnswerType, weight: float
) -> tuple[tuple[Candidate, ...], int]:
    """Pure: each direct match whose text states ``answer_type`` is lent ``weight x own_scale``; returns the
    candidates in final order and how many were lent."""
    lent = 0
    revised: list[Candidate] = []
    for candidate in candidates:
        bonus = 0.0
        if candidate.source == "direct" and states(answer_type, candidate.memory.content):
            bonus = weight * own_scale(candidate)
        if bonus > 0.0:
            lent += 1
        if bonus != candidate.answer_type_bonus:
            candidate = candidate.revised(answer_type_bonus=bonus)
        revised.append(candidate)
    return ranked(revised), lent


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
