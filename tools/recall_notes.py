"""What recall says when it places fewer than ``top_k`` memories: none matched above the relevance floor,
some matched far below the best match (filler), the LLM passes left some out, or char_budget had no room;
when age decay, feedback weights or the instruction flag put a match that passed the floor below it as
scored; and when its vector search skipped memories that have no vector of the active embedder. (What a
recall that matched nothing says of where it looked: ``tools.empty_recall_notes``.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrieval.text import counted

if TYPE_CHECKING:
    from retrieval.pipeline import RecallResult
    from retrieval.types import RecallRequest
    from tools.common import Runtime

# How the note begins when memories matched but the LLM passes at assembly left none in the context.
EMPTIED_BY_PASSES = "nothing left in the context"
# How the note begins when no memory matched at all (any other note with an empty context says why the
# memories that matched were not placed: the char_budget, or the LLM passes).
NOTHING_MATCHED = "nothing relevant was found"


def recall_note(result: RecallResult, top_k: int) -> str | None:
    """What a recall says beside its context: the shortfall (``shortfall_note``), and whether even its best
    match is weak (``weak_match_note``; only when something was placed, so never beside "nothing")."""
    said, weak = shortfall_note(result, top_k), weak_match_note(result)
    return f"{said}; {weak}" if said and weak else said or weak


def shortfall_note(result: RecallResult, top_k: int) -> str | None:
    """What to say when fewer than ``top_k`` memories matched the query, or fewer were placed than matched
    (None when top_k were placed)."""
    direct = sum(1 for candidate in result.in_context if candidate.source == "direct")
    if direct >= top_k:
        return None
    floor = result.trace.relevance_floor
    above = f" above the relevance floor ({floor:g})" if floor is not None else ""
    left_out = sum(1 for c in result.candidates if c.dropped is not None and c.source == "direct")
    by_passes = (
        f"; the language model's context or fact selection left out {left_out} more" if left_out else ""
    )
    from retrieval.stages.assembly import (  # (numpy: after the handshake)
        left_out_as_older,
        left_out_by_caps,
        left_out_for_room,
    )
    from retrieval.stages.filler import left_out_as_filler

    filler = left_out_as_filler(result.candidates)
    older = left_out_as_older(result.candidates)
    summaries, episodes = left_out_by_caps(result.candidates)
    capped = _capped(summaries, episodes)
    no_room = left_out_for_room(result.candidates)
    if no_room:
        chosen = direct + no_room
        if chosen == 1:
            fitted = f"the 1 memory chosen for the context (the best match{above}, up to top_k={top_k}) does not fit"
            left = "it"
        else:
            which = "none" if not direct else f"only {direct}"
            fitted = (
                f"{which} of the {chosen} memories chosen for the context (the best matches{above}, up to "
                f"top_k={top_k}) fit"
            )
            left = "them" if not direct else f"the other {no_room}"
        return (
            f"{fitted} in char_budget={result.trace.char_budget}: raise char_budget to see {left}"
            + (_none_fitted(result) if not direct else "")
            + by_passes
            + _filler(result, filler, "more")
            + (f"; {capped}" if capped else "")
            + _older(older)
        )
    if not result.in_context:
        if capped:
            return f"no memory was placed: {capped}" + by_passes + _filler(result, filler, "more")
        if left_out:
            return (
                f"{EMPTIED_BY_PASSES}: the language model's context or fact selection left out all {left_out} "
                "memories that matched" + _filler(result, filler, "more")
            )
        return f"{NOTHING_MATCHED}: no memory matched the query{above}"
    matched = direct + filler + summaries + episodes + older
    fewer = f", fewer than top_k={top_k}" if matched < top_k else ""
    if capped:
        return (
            f"{matched} memories matched the query{above}{fewer}"
            + _scored_below(result, floor)
            + f"; {direct} {'is' if direct == 1 else 'are'} shown: {capped}"
            + _filler(result, filler, f"of the {matched}")
            + by_passes
            + _older(older)
        )
    return (
        f"{counted(matched, 'memory')} matched the query{above}{fewer}"
        + _scored_below(result, floor)
        + _filler(result, filler, f"of the {matched}")
        + by_passes
        + _siblings_shown(result)
        + _joined(result)
        + _folded(result)
        + _older(older)
    )


def _none_fitted(result: RecallResult) -> str:
    """When nothing fitted: the best match's id, and where its whole text is read (a trial's recall with
    char_budget 200 returned nothing, and named nothing to read instead)."""
    from retrieval.stages.assembly import DID_NOT_FIT

    best = next(
        (
            c
            for c in result.candidates
            if c.source == "direct" and (c.exclusion_reason or "").startswith(DID_NOT_FIT)
        ),
        None,
    )
    return f", or read the best match, {best.memory.id}, at memoria://memory/{best.memory.id}" if best else ""


# A recall whose best direct match reads below this many times the relevance floor says that what it shows
# may not answer the query: it cleared the floor, but barely (docs/retrieval.md, "Weak matches").
WEAK_MATCH = 2.0
WEAK_SAID = "even the best match is weak"  # how that note's clause begins,
WEAK_ENDS = "so what is shown may not answer the query"  # and how it ends


def weak_match_note(result: RecallResult) -> str | None:
    """What to say when even the best match placed clears the relevance floor only barely (below
    ``WEAK_MATCH`` times it, on the scale the floor reads): a new user's trial on the model path asked
    "what is the AWS account id for production?" of a store that never held it, and read five unrelated
    memories at 0.15-0.18 over a floor of 0.15 with nothing said, where the offline backend said that
    nothing relevant was found. None when there is no floor, or nothing placed."""
    floor = result.trace.relevance_floor
    if not floor:
        return None
    from retrieval.trace import floor_compared

    read = [
        floor_compared(c) for c in result.in_context if c.source == "direct" and c.memory.kind != "episode"
    ]
    best = max((score for score in read if score is not None), default=None)
    if best is None or best >= WEAK_MATCH * floor:
        return None
    return (
        f"{WEAK_SAID}: it matches the query at {best:.2f} (the relevance floor reads "
        f"{floor:g}; explain_ranking shows each score), {WEAK_ENDS}"
    )


def _folded(result: RecallResult) -> str:
    """The clause on the near-duplicates folded into the memories shown: they matched too, and say what a
    memory shown says (a team's trial read "1 memory matched" where three agents had said it)."""
    from retrieval.stages.assembly import FOLDED

    folded = sum(
        1 for c in result.candidates if c.source == "direct" and (c.exclusion_reason or "").endswith(FOLDED)
    )
    if not folded:
        return ""
    return (
        f"; {counted(folded, 'more memory')} that {'says' if folded == 1 else 'say'} the same {'is' if folded == 1 else 'are'}"
        " folded into the memories shown (explain_ranking lists each; other agents who said them are listed "
        "as also stating them)"
    )


def _siblings_shown(result: RecallResult) -> str:
    """The clause on the memories shown beside the matches from their episodes (episode expansion): a new
    user's trial read "2 memories matched ..., fewer than top_k=5" over five memories and took the three
    others for matches."""
    siblings = sum(1 for candidate in result.in_context if candidate.source == "sibling")
    if not siblings:
        return ""
    return (
        f"; {counted(siblings, 'more memory')} from their episodes {'is' if siblings == 1 else 'are'} shown "
        "beside them (source 'sibling': what was said around a match, not a match)"
    )


def _joined(result: RecallResult) -> str:
    """The clause on the newer values shown that the search did not find: joined for a match they dispute
    (``retrieval.stages.contradiction_marks``), counted among the matches."""
    joined = sum(1 for candidate in result.in_context if candidate.newer_value_of)
    if not joined:
        return ""
    return (
        f"; {'1 of them is a newer value' if joined == 1 else f'{joined} of them are newer values'} that the "
        f"search did not find, of {'a match it disputes' if joined == 1 else 'matches they dispute'} "
        "(newer_value_of: scored as that match)"
    )


def _older(older: int) -> str:
    """The clause on the ``older`` values left out: matches that say another value of what a memory shown
    says now, behind the value it replaced (``retrieval.stages.assembly.select``)."""
    if not older:
        return ""
    return (
        f"; {counted(older, 'older value')} of things the memories shown say now {'was' if older == 1 else 'were'}"
        " left out: a value is shown with the one it replaced, not every earlier one (explain_ranking lists each)"
    )


def _filler(result: RecallResult, filler: int, which: str) -> str:
    """The clause on the matches left out as filler beside the best match (``retrieval.stages.filler``)."""
    if not filler:
        return ""
    from retrieval.trace import ContextAssembled

    share = next(
        (
            event.share_of_best
            for record in result.trace.stages
            for event in record.events
            if isinstance(event, ContextAssembled)
        ),
        0.0,
    )
    return (
        f"; {filler} {which} matched the query under {share:g} of what the best match does and "
        f"{'was' if filler == 1 else 'were'} left out as filler (the server's MEMORIA_MIN_SHARE_OF_BEST)"
    )


def _capped(summaries: int, episodes: int) -> str:
    """The matches a context's caps left out: a recall shows at most ``top_k_episodes`` episode summaries
    (memories of kind episode) and memories of at most ``max_episodes`` episodes, whatever its top_k."""
    said = []
    if summaries:
        said.append(
            f"{summaries} more are episode summaries (kind episode) beyond the ones a recall shows (the "
            'server\'s MEMORIA_TOP_K_EPISODES; kinds=["episode"] shows up to top_k of them)'
        )
    if episodes:
        said.append(
            f"{episodes} more are in episodes beyond the ones a recall shows (the server's "
            "MEMORIA_MAX_EPISODES; narrow the query, or filter by tags, kinds or time, to reach them)"
        )
    return "; ".join(said)


def _scored_below(result: RecallResult, floor: float | None) -> str:
    """The floor reads how well a memory matches; its score shown is after age decay, feedback weights and
    the instruction flag, which may put a good match below the floor (an ephemeral memory 6 days old)."""
    below = [
        c.memory.id
        for c in result.in_context
        if c.source == "direct" and round(c.final_score, 6) < (floor or 0)
    ]
    if not below:
        return ""
    # Each named: a trial read "(it is scored below it ...)" after a report, with nothing to say which
    # memory, nor that "it" was the floor.
    named = ", ".join(below[:3]) + (f" and {len(below) - 3} more" if len(below) > 3 else "")
    which = f"{named} is" if len(below) == 1 else f"{len(below)} of them, {named}, are"
    after = "age decay, feedback weights or the instruction flag: explain_ranking shows by how much"
    return f" ({which} scored below the floor after {after})"


def unsearched_note(runtime: Runtime, request: RecallRequest, args: Any) -> str | None:
    """Memories this recall's vector search skipped: no vector of the active embedder (being re-embedded at
    start, another model's, the offline fallback's). Only full-text search can find them, and a recall
    that misses them said "nothing relevant" with nothing to tell why (a new user's trial, switching a
    store to a model)."""
    embedder = runtime.models.embedder.name
    skipped = runtime.store.skipped_by_vector_search(
        request.reach,
        embedder=embedder,
        kinds=args.kinds,
        tags=args.tags,
        window=request.window,
        all_tags=args.tags_all,
    )
    if not skipped:
        return None
    fix = (
        "the configured model did not load, and the server is on its offline backend: make it load (see "
        "`memoria doctor`)"
        if runtime.models.embedder_info.offline_fallback
        else "the server re-embeds those of the offline fallback or an older recipe at start; for another "
        "model's run `memoria reembed`"
    )
    return (
        f"{counted(skipped, 'memory')} searched here {'has' if skipped == 1 else 'have'} no vector from the "
        f"active embedder ({embedder}) yet, so only their words can match and this recall may have missed "
        f"some: {fix}"
    )
