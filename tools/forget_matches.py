"""Forget by query: the memories that match a query closely enough to be forgotten, closest first."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from retrieval.contradictions import ContradictionInput, plain_value_changes
from retrieval.role_holders import holder_changes
from retrieval.text import clip, counted, negated
from storage.records import MemoryRecord, Reach, Scope
from tools.memory_views import LineageReader, absorbed_restatements

if TYPE_CHECKING:
    from tools.common import Runtime

MAX_BY_QUERY = 20  # memories one forget by query may take


def best_matches(
    runtime: Runtime, scope: Reach, query: str, limit: int, *, stored: bool = False
) -> list[tuple[MemoryRecord, float]]:
    """The active memories (``stored``: every memory whose text is stored, retracted, superseded or expired
    too) that match ``query`` best, with their fused relevance on the scale the relevance
    floor reads: the lower of the fused score with a full-text match read against the best match (as
    ranking reads it) and against a full match of the query (where the index keeps term statistics), so
    nothing is forgotten that recall's fusion scores below ``forget_min_relevance`` (no reranker, author
    or instruction factor: forget weighs the memory's own words and vector against the query). The two
    readings can order two candidates either way: the pool is three times ``limit``, ordered by this
    relevance, so that the closest match is never left out behind one that ranks higher. A memory is
    judged by what it says, not by its episode's context: a weak match between two strong ones stays."""
    fused, _ = runtime.pipeline.candidate_search.search(
        scope, query, leg_limit=limit * 9, limit=limit * 3, context_share=0.0, stored=stored
    )
    scored = [(candidate.memory, candidate.fused_score * candidate.absolute_share) for candidate in fused]
    scored.sort(key=lambda pair: (-pair[1], pair[0].id))
    return scored[:limit]


def closest_first(
    query: str, matches: Sequence[tuple[MemoryRecord, float]]
) -> list[tuple[MemoryRecord, float]]:
    """``matches`` by relevance (as shown, two decimals), and among matches as close as each other the
    memories that say what the query says before those that deny it ("the cache is not enabled" matches
    "cache enabled" word for word: a new user's trial saw a purge take it, on a tie, instead of "the cache
    is enabled"), then active ones before the older copies a purge also looks at (a superseded copy taken,
    its active restatement would keep the words)."""
    denies = negated(query)
    return sorted(
        matches,
        key=lambda match: (
            -round(match[1], 2),
            negated(match[0].content) != denies,
            match[0].status != "active",
        ),
    )


def left_as_they_are(
    store: LineageReader, view: Reach, above: Sequence[tuple[MemoryRecord, float]], taken: int, purge: bool
) -> list[tuple[MemoryRecord, float]]:
    """The matches after the ``taken`` first of ``above`` that a forget by query leaves as they are: for a
    purge, not those the taken ones replaced (restatements, what an update corrected), which it erases with
    them (a new user's trial was told of "1 more memory" matching as closely, then of the same memory among
    those the purge also erases)."""
    erased = set(absorbed_restatements(store, view, [m.id for m, _ in above[:taken]])) if purge else set()
    return [(memory, score) for memory, score in above[taken:] if memory.id not in erased]


def more_matches_note(left: Sequence[tuple[MemoryRecord, float]], capped: bool, floor: float) -> str:
    """What a forget by query leaves that matches as closely as what it took: ``left``, the matches at or
    above the relevance ``floor`` beyond ``max_memories`` (``capped``: the look ahead stopped there)."""
    one = len(left) == 1  # "at least 1 more memory matches" when the look ahead stopped at it
    return (
        f"{'at least ' if capped else ''}{counted(len(left), 'more memory')} "
        f"{'matches' if one else 'match'} the query closely enough too (relevance >= {floor:g}; the next "
        f"{left[0][1]:.2f}) and {'is' if one else 'are'} left as {'it is' if one else 'they are'}: raise "
        f"`max_memories` (up to {MAX_BY_QUERY}) to forget {'it' if one else 'them'} as well"
    )


def nothing_close_note(found: Sequence[tuple[MemoryRecord, float]], floor: float, stored: bool) -> str:
    """Why a forget by query took nothing, naming the closest memory (``found``, best first) and how to
    forget it. A new user's trial: recall ranked a memory first at 0.83 and forget said "the closest scored
    0.36" without saying which one, nor why the two figures differ (recall reads a full-text match against
    the best match; forget weighs it against the whole query, so that no query forgets whatever happens to
    match it best)."""
    head = (
        f"nothing was forgotten: no {'stored' if stored else 'active'} memory matches the query closely enough "
        f"(relevance >= {floor:g})"
    )
    if not found or found[0][1] < floor / 2:  # nothing near: no memory to point to
        scored = f" (the closest scored {found[0][1]:.2f})" if found else ""
        return f"{head}{scored}. Pass memory_id to forget a particular memory."
    closest, score = found[0]
    return (
        f"{head}. The closest is {closest.id} ({clip(closest.content, 60)!r}) at {score:.2f}: this relevance "
        "weighs a match against the whole query, where recall's scores read it against the best match and run "
        f"higher. Say more of its words, or pass memory_id={closest.id}{' with mode=purge' if stored else ''} "
        "to forget it."
    )


def apart_by_value(
    query: str, matches: Sequence[tuple[MemoryRecord, float]]
) -> tuple[list[tuple[MemoryRecord, float]], str | None]:
    """``matches`` without the memories that say what the query says with another value in its place
    ("... listens on port 5432" for the query "... listens on port 6543"), and the note that names them. They
    match the query's words almost all, yet state what the query would remove as wrong: a trial's forget of
    a planted port took the true port with it. Read two ways: word for word but for one value
    (``plain_value_changes``), and, for a query in few words, a memory that names numbers, none of them the
    query's (another trial: "Redis session cache port 6380" retracted "Redis is used as the session cache,
    on port 6379, ..."; "... listens on port 5434" offered to retract "... on port 5433, not the default
    5432")."""
    said = ContradictionInput("query", query, datetime.max.replace(tzinfo=UTC))
    stated = [ContradictionInput(m.id, m.content, m.created_at) for m, _ in matches]
    # ... or that give the role the query gives to one name to another ("Dan Reyes is the on-call lead" for
    # the query "Priya is the on-call lead").
    other = {
        change.older_id for change in [*plain_value_changes(said, stated), *holder_changes(said, stated)]
    }
    from retrieval.stages.assembly import numbers  # (numpy: after the handshake)

    asked = numbers(query)
    if asked:
        other |= {m.id for m, _ in matches if (named := numbers(m.content)) and asked.isdisjoint(named)}
    if not other:
        return list(matches), None
    left = [memory for memory, _ in matches if memory.id in other]
    note = (
        f"left {counted(len(left), 'memory')} that {'says' if len(left) == 1 else 'say'} the query's words with "
        f"another value: {', '.join(f'{m.id} ({clip(m.content, 60)!r})' for m in left)}; pass memory_id to "
        f"forget {'it' if len(left) == 1 else 'one of them'} too"
    )
    return [match for match in matches if match[0].id not in other], note


def org_wide_note(memories: Sequence[MemoryRecord], home: Scope, *, dry_run: bool) -> str | None:
    """For a forget by tag or query from a project: which of ``memories`` are org-wide, and so forgotten for
    every project of the org (a trial: ``memoria forget --tag logging --project web`` retracted the org's
    memory tagged so for every project, and neither its preview nor its result said so)."""
    shelf = [memory.id for memory in memories if memory.visibility == "org"]
    if not shelf or home.is_org_shelf:
        return None
    one = len(shelf) == 1
    return (
        f"{len(shelf)} of these {'is' if one else 'are'} org-wide, read by every project of org "
        f"{home.org_id!r}, not {home.project_id!r} alone: {'it' if one else 'they'} "
        f"{'would be' if dry_run else 'was' if one else 'were'} forgotten for every project ({', '.join(shelf)})"
    )
