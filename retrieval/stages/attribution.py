"""Stage: attribution. A query that names an agent ("what has Melanie painted?", "what did the reviewer
decide?") asks about what that agent wrote, so when some candidates were written by a named agent, the
others are discounted: ``relevance x (1 - author_discount)``. Another agent's memory that only mentions
the name ("Wow, Melanie, that painting is great!") then ranks below the named agent's own words, and
still ranks when nothing better exists. No named author among the candidates, or every author named:
nothing changes. Episode expansion applies the same factor to the siblings it brings.

An agent is named when every word of its id is a word of the query ("claude-code" by "what did claude
code decide"), ignoring ids made only of function words or of words shorter than three letters.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from retrieval.stages.rerank import by_relevance
from retrieval.text import STOPWORDS, word_tokens
from retrieval.trace import AuthorsNamed, StageOutput
from retrieval.types import Candidate, RecallRequest


def named_agents(query: str, authors: Iterable[str]) -> tuple[str, ...]:
    """The ``authors`` the query names, sorted; none when it names all of them (nothing to tell apart)."""
    distinct = set(authors)
    named = all_named_agents(query, distinct)
    return () if distinct <= set(named) else named


def all_named_agents(query: str, authors: Iterable[str]) -> tuple[str, ...]:
    """Every one of ``authors`` the query names, sorted."""
    words = set(word_tokens(query))
    named = []
    for agent in sorted(set(authors)):
        tokens = word_tokens(agent)
        telling = [token for token in tokens if token not in STOPWORDS and len(token) >= 3]
        if telling and all(token in words for token in tokens):
            named.append(agent)
    return tuple(named)


def without_agents(query: str, agents: Iterable[str]) -> str:
    """``query`` without these agents' ids (each as a phrase: its words in order, joined by anything but a
    letter or digit, with a possessive "'s" after them): what the vector leg of a recall embeds. Who wrote
    a memory is matched by the full-text leg (which indexes the author) and weighed by attribution; in a
    short query's embedding a name pulls towards memories that mention it, whatever they say. The query
    itself when no content word would be left."""
    text = unicodedata.normalize("NFKC", query)
    phrases = {tuple(word_tokens(agent)) for agent in agents}
    for words in sorted((w for w in phrases if w), key=len, reverse=True):
        phrase = r"[\W_]+".join(re.escape(word) for word in words)
        text = re.sub(rf"(?<![^\W_]){phrase}(?:['\u2019]s)?(?![^\W_])", " ", text, flags=re.IGNORECASE)
    left = " ".join(text.split())
    return left if any(word not in STOPWORDS for word in word_tokens(left)) else query


def author_factor(agent_id: str, named: tuple[str, ...], discount: float) -> float:
    """What a memory by ``agent_id`` keeps of its score: all of it, unless the query names other agents."""
    return 1.0 - discount if named and agent_id not in named else 1.0


def attribute(
    candidates: tuple[Candidate, ...], named: tuple[str, ...], discount: float
) -> tuple[tuple[Candidate, ...], int]:
    """Pure: set each candidate's ``attribution_factor`` for ``named`` (its relevance scaled to match, so
    applying it again, as iterative retrieval does on its merged pool, never discounts twice); returns
    the new order and how many are discounted."""
    factors = {c.id: author_factor(c.memory.agent_id, named, discount) for c in candidates}
    discounted = sum(factor < 1.0 for factor in factors.values())
    if all(factors[c.id] == c.attribution_factor for c in candidates):
        return candidates, discounted
    adjusted = tuple(
        c.revised(
            attribution_factor=factors[c.id],
            relevance_score=c.relevance_score * factors[c.id] / c.attribution_factor,
        )
        for c in candidates
    )
    return by_relevance(adjusted), discounted


class AttributionStage:
    name = "attribution"

    def __init__(self, discount: float) -> None:
        if not 0.0 <= discount < 1.0:
            raise ValueError(f"author_discount must be in [0, 1), but got {discount}")
        self._discount = discount

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        named = named_agents(request.query, (candidate.memory.agent_id for candidate in candidates))
        adjusted, discounted = attribute(candidates, named, self._discount)
        return StageOutput(adjusted, (AuthorsNamed(named, self._discount, discounted),))
