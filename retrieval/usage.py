"""Which of the memories a session was shown its agent used: the ones whose values turn up in what the agent
wrote after it recalled them (its messages, the commands and edits of its tool calls).

The session-end hook credits them (``console.hook_usage``; the ``used`` role of ``retrieval.outcomes``): a
session the agent did not report itself then still says which memories served, instead of only closing
the session. A memory served when the agent wrote one of its *values* that the recall's query did not
already hold: a token with a digit, a long flag, or inner punctuation joining more than letters (a port, a
version, a path, a command line's ``ENV=prod``). Only that memory can have told the agent the value.

Words are not enough. Naming the memories that share most of their content words with what the agent
wrote (two or more, half of the memory's or of the agent's) was measured and not kept: in the feedback
experiment's ``hook`` arm (docs/feedback.md), named as the agent names (a full step), it lifted the
questions asked again, but with a model's vectors it lowered the related questions by 0.030 of R@5: a
third of what it named was not evidence.
Pure functions; the tests compute each case by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MIN_VALUE_LENGTH = 3  # "20" or "v2" alone is said about too many things to tell one memory's
# A token's ends: what quotes, brackets and sentence punctuation leave around a value.
_EDGES = "\"'`()[]{}<>,;!?*.:"
_INNER = re.compile(r"[0-9/=_.:@\\-]")
# Where a token ends besides white space: brackets and quotes (a markdown link, a call's arguments).
_SPLIT = re.compile(r"[\s()\[\]{}<>\"'`,;|]+")
_YEAR = re.compile(r"(?:19|20)\d\d")


@dataclass(frozen=True)
class ShownText:
    """A memory as a recall of the session showed it: its id, its content, and that recall's query."""

    memory_id: str
    content: str
    query: str


def values(text: str) -> set[str]:
    """The value-like tokens of ``text``, lower-cased, at least ``MIN_VALUE_LENGTH`` long once the sentence's
    punctuation around them is stripped: with a digit ("8080", "3.12"), a flag ("--force"), or inner
    punctuation that joins more than letters ("ENV=prod", "ops/deploy.sh", "ci@example.com"). Words joined
    by hyphens or apostrophes ("blue-green", "don't") or two by a slash ("and/or"), abbreviations ("e.g.")
    and a year alone ("2023") are not values. Brackets and quotes end a token as white space does."""
    found = set()
    for raw in _SPLIT.split(text):
        token = raw.strip(_EDGES).lower()
        if len(token) >= MIN_VALUE_LENGTH and _is_value(token):
            found.add(token)
    return found


def _is_value(token: str) -> bool:
    if _YEAR.fullmatch(token):
        return False  # a year is said of too many things (a port like 8080 or 5432 is not one)
    if any(char.isdigit() for char in token):
        return True
    core = token.lstrip("-")
    if core != token:
        return core.isalpha() and token.startswith("--")  # a long flag; "-" before a word is a dash
    if not _INNER.search(core):
        return False
    if re.fullmatch(r"[a-z]+(?:['-][a-z]+)*", core) or re.fullmatch(r"[a-z]+/[a-z]+", core):
        return False  # words joined by hyphens or apostrophes, two words by a slash ("and/or", "tcp/ip")
    parts = [part for part in re.split(r"[^a-z]", core) if part]
    return len(parts) > 1 and not all(len(part) == 1 for part in parts)  # not "e.g"


def used_memories(shown: Iterable[ShownText], said: str, known: Iterable[str] = ()) -> list[str]:
    """The ids of the ``shown`` memories the agent used in ``said`` (what it wrote after the recalls), in
    the order shown, each once. ``known``: values the agent had from elsewhere (the user, a tool's result,
    what it wrote before recalling): writing one of those is no sign a memory served."""
    return used_by_values(shown, values(said) - set(known))


def used_by_values(shown: Iterable[ShownText], written: set[str]) -> list[str]:
    """The ids of the ``shown`` memories with a value among ``written`` (values the agent wrote that it had
    from nowhere else) that their recall's query did not hold, in the order shown, each once."""
    used: dict[str, None] = {}
    for memory in shown:
        if memory.memory_id not in used and (values(memory.content) - values(memory.query)) & written:
            used[memory.memory_id] = None
    return list(used)
