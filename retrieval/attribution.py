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

from collections.abc import Iterable
from dataclasses import replace

from retrieval.rerank import by_relevance
from retrieval.text import STOPWORDS, word_tokens
from retrieval.trace import AuthorsNamed, StageOutput
from retrieval.types import Candidate, RecallRequest


def named_agents(query: str, authors: Iterable[str]) -> tuple[str, ...]:
    """The ``authors`` the query names, sorted; none when it names all of them (nothing to tell apart)."""
    words = set(word_tokens(query))
    distinct = set(authors)
    named = []
    for agent in sorted(distinct):
        tokens = word_tokens(agent)
        telling = [token for token in tokens if token not in STOPWORDS and len(token) >= 3]
        if telling and all(token in words for token in tokens):
            named.append(agent)
    return () if distinct <= set(named) else tuple(named)


def author_factor(agent_id: str, named: tuple[str, ...], discount: float) -> float:
    """What a memory by ``agent_id`` keeps of its score: all of it, unless the query names other agents."""
    return 1.0 - discount if named and agent_id not in named else 1.0


def attribute(
    candidates: tuple[Candidate, ...], named: tuple[str, ...], discount: float
) -> tuple[tuple[Candidate, ...], int]:
    """Pure: discount the relevance of candidates not written by a ``named`` agent; (new order, how many)."""
    others = {c.id for c in candidates if named and discount > 0.0 and c.memory.agent_id not in named}
    if not others:
        return candidates, 0
    factor = 1.0 - discount
    adjusted = tuple(
        replace(c, attribution_factor=factor, relevance_score=c.relevance_score * factor)
        if c.id in others
        else c
        for c in candidates
    )
    return by_relevance(adjusted), len(others)


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
