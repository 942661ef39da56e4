"""Which of the memories a session was shown its agent used: the ones whose telling content turns up in what
the agent said or did after it recalled them (its messages, the commands and edits of its tool calls).

The session-end hook names them in ``helpful_ids`` (``console.hook_usage``): a session the agent did
not report itself then still says which memories served, instead of only closing the session. An agent
relied on a memory when it wrote what only that memory told it:

- a *value* of the memory, a token with a digit or inner punctuation that the recall's query did not
  already hold (a port, a version, a path, a command line's ``ENV=prod``), said by the agent; or
- *its words*: at least ``MIN_SHARED_WORDS`` of the memory's content words that the query did not hold,
  and at least half of those words, or at least half of the agent's own (a short answer taken from one
  memory).

A memory that only shares the task's words (those of the query) never counts: every memory of the context
shares them. Pure functions; the tests compute each case by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from retrieval.text import index_terms

MIN_SHARED_WORDS = 2
SHARED_SHARE = 0.5  # of the memory's telling words, or of the agent's
MIN_VALUE_LENGTH = 3  # "20" or "v2" alone is said about too many things to tell one memory's
# A token's ends: what quotes, brackets and sentence punctuation leave around a value.
_EDGES = "\"'`()[]{}<>,;!?*.:"
_INNER = re.compile(r"[0-9/=_.:@-]")


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
    by hyphens or apostrophes ("blue-green", "don't") and abbreviations ("e.g.") are words, not values."""
    found = set()
    for raw in text.split():
        token = raw.strip(_EDGES).lower()
        if len(token) >= MIN_VALUE_LENGTH and _is_value(token):
            found.add(token)
    return found


def _is_value(token: str) -> bool:
    if any(char.isdigit() for char in token):
        return True
    core = token.lstrip("-")
    if core != token:
        return core.isalpha() and token.startswith("--")  # a long flag; "-" before a word is a dash
    if not _INNER.search(core):
        return False
    if re.fullmatch(r"[a-z]+(?:['-][a-z]+)*", core):
        return False  # words joined by hyphens or apostrophes
    parts = [part for part in re.split(r"[^a-z]", core) if part]
    return len(parts) > 1 and all(len(part) > 1 for part in parts[:2])  # not "e.g"


def used_memories(shown: Iterable[ShownText], said: str) -> list[str]:
    """The ids of the ``shown`` memories the agent used in ``said`` (what it wrote after the recalls), in
    the order shown, each once."""
    said_values = values(said)
    said_words = set(index_terms(said))
    used: dict[str, None] = {}
    for memory in shown:
        if memory.memory_id in used:
            continue
        if _used(memory, said_values, said_words):
            used[memory.memory_id] = None
    return list(used)


def _used(memory: ShownText, said_values: set[str], said_words: set[str]) -> bool:
    asked_values = values(memory.query)
    if (values(memory.content) - asked_values) & said_values:
        return True
    asked = set(index_terms(memory.query))
    telling = set(index_terms(memory.content)) - asked
    own = said_words - asked
    shared = len(telling & own)
    return shared >= MIN_SHARED_WORDS and (
        shared >= SHARED_SHARE * len(telling) or shared >= SHARED_SHARE * len(own)
    )
