"""forget: retract memories (kept for audit and lineage, never recalled again) or purge them (content,
tags and vector erased from the store's files). Either way a record of what was done stays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Literal

import anyio
from pydantic import BaseModel, Field

from retrieval.text import (
    PRECEDING_CHARS,
    after_purges_forgotten,
    counted,
    forget_cached_texts,
    has_visible_text,
    without_words_of,
)
from storage.records import (
    CONTENT_STATUSES,
    PURGED_PREVIEW,
    MemoryRecord,
    MemoryStatus,
    Scope,
    stored_in,
)
from tools.common import (
    Caller,
    Identifier,
    Runtime,
    ScopeArgs,
    Tag,
    ToolFailure,
    WithoutSecrets,
    no_such_memory,
    view_for,
)
from tools.empty_recall_notes import held_elsewhere
from tools.forget_matches import (
    MAX_BY_QUERY,
    apart_by_value,
    best_matches,
    closest_first,
    left_as_they_are,
    more_matches_note,
    nothing_close_note,
    org_wide_note,
)
from tools.forget_rights import may_forget, not_theirs
from tools.memory_views import MemoryBrief, absorbed_restatements
from writing.consolidation.report import Actor

if TYPE_CHECKING:
    from storage.store import MemoryStore


class ForgetInput(ScopeArgs):
    memory_id: Identifier | None = None
    query: Annotated[str, Field(min_length=1, max_length=4_000), WithoutSecrets] | None = Field(
        None,
        description="Instead: its close matches. Try dry_run first.",
    )
    mode: Literal["retract", "purge"] = Field("retract", description="purge: irreversible.")
    tag: Tag | None = Field(None, description="Instead: all with this tag; dry_run defaults to true.")
    max_memories: int = Field(1, ge=1, le=MAX_BY_QUERY, description="With query: at most this many.")
    reason: Annotated[str, Field(max_length=500), WithoutSecrets] | None = Field(
        None, description="Why, for the record."
    )
    # (a purge by query, or a forget by tag, is a dry run unless false is passed; its result says so)
    dry_run: bool = Field(False, description="Only show what would go.")
    session_id: Identifier | None = None  # whose session-private memories it sees (default: the connection's)


class Match(BaseModel):
    id: str
    relevance: float = Field(
        description="How closely it matches the query, [0, 1] (as the relevance floor reads it)."
    )


class ForgetOutput(BaseModel):
    mode: str
    dry_run: bool
    forgotten: list[MemoryBrief]
    matches: list[Match] = Field(
        default_factory=list,
        description="With query: the relevance of each memory forgotten (or that would be).",
    )
    note: str | None = None


# Memories a forget by tag takes in one call (the note says when more are left): a purge scrubs each
# one's text from the stored traces under the write lock, so it takes fewer at a time.
TAGGED_AT_ONCE = {"retract": 1_000, "purge": 100}


@after_purges_forgotten  # a forget by query reads its matches' texts into the text caches (apart_by_value)
def forget(args: ForgetInput, runtime: Runtime, caller: Caller) -> ForgetOutput:
    if sum(what is not None for what in (args.memory_id, args.query, args.tag)) != 1:
        raise ToolFailure(
            "pass exactly one of memory_id, query (with max_memories) or tag to say what to forget"
        )
    if args.max_memories != 1 and args.query is None:  # (a trial's went unheeded, unsaid; 1: a default sent)
        raise ToolFailure(
            "max_memories applies to a forget by query (a tag takes every memory with it, a memory_id one): "
            "drop it, or forget by query to take the best matches only"
        )
    view = view_for(args, runtime, caller)
    scope = view.home
    store = runtime.store
    if args.tag is not None and "dry_run" not in args.model_fields_set:
        args = args.model_copy(update={"dry_run": True})  # a whole tag: shown first unless told otherwise
    relevance: dict[str, float] = {}
    left_matching: str | None = None  # by query: the note on what matches as closely and is left
    other_value: str | None = None  # by query: the note on what says the query's words with another value
    if args.tag is not None:
        at_once = TAGGED_AT_ONCE[args.mode]
        # Memories past their expiry too (active until maintenance retracts them), and for a purge the
        # inactive ones whose text is still stored: a purge by tag leaves none of that tag's text behind.
        statuses: tuple[MemoryStatus, ...] = CONTENT_STATUSES if args.mode == "purge" else ("active",)
        tagged = store.list_memories(view, limit=at_once + 1, tag=args.tag, statuses=statuses, expired=True)
        targets = tagged[:at_once]
        if not targets:
            which = "memory" if args.mode == "purge" else "active memory"
            nothing = f"nothing was forgotten: no {which} has the tag {args.tag!r}"
            return ForgetOutput(mode=args.mode, dry_run=args.dry_run, forgotten=[], note=nothing)
    elif args.memory_id is not None:
        memory = store.get_memory(args.memory_id, view)
        if memory is None:
            elsewhere = held_elsewhere(runtime, caller, args.memory_id, scope)
            raise no_such_memory(args.memory_id, scope.org_id, scope.project_id, elsewhere)
        targets = [memory]
    else:
        assert args.query is not None
        if not has_visible_text(args.query):
            raise ToolFailure(
                "query is empty, or white space, control or blank characters only: say what to forget in words"
            )
        floor = runtime.settings.forget_min_relevance
        # As many as one call may take, and one more: whether more match than max_memories lets go. A purge
        # looks at every memory whose text is stored (retracted, superseded, past its expiry), as by tag.
        purge = args.mode == "purge"
        found = best_matches(runtime, view, args.query, MAX_BY_QUERY + 1, stored=purge)
        above, other_value = apart_by_value(args.query, [(m, score) for m, score in found if score >= floor])
        above = closest_first(args.query, above)
        relevance = {memory.id: score for memory, score in above[: args.max_memories]}
        targets = [memory for memory, _ in above[: args.max_memories]]
        left = left_as_they_are(store, view, above, len(targets), purge)
        left_matching = more_matches_note(left, len(found) > MAX_BY_QUERY, floor) if left else None
        if not targets:
            return ForgetOutput(
                mode=args.mode,
                dry_run=args.dry_run,
                forgotten=[],
                note=f"nothing was forgotten: {other_value}"
                if other_value
                else nothing_close_note(found, floor, purge),
            )
    # An immutable memory is its author's to forget: another agent's forget by id is refused, and one by
    # query or tag leaves it (a new user's trial: any agent's query retracted a team's immutable rule).
    if args.memory_id is not None and not may_forget(targets[0], caller):
        raise ToolFailure(not_theirs(targets[0], caller))
    held = [m for m in targets if not may_forget(m, caller)]
    targets = [m for m in targets if may_forget(m, caller)]
    # A retraction takes active memories; a purge also erases the text of inactive ones (retracted or
    # superseded), but one already purged has nothing left to erase.
    eligible = [m for m in targets if m.status == "active" or (args.mode == "purge" and m.status != "purged")]
    # A purge erases for good: what a query matched is shown first unless dry_run=false was said, however
    # many it matched (new users' trials: max_memories=1 purged the first of two flaky-test notes at once;
    # a query's one match was purged unseen, and a description may name another memory than the one meant).
    shown_first = (
        args.query is not None
        and args.mode == "purge"
        and bool(eligible)
        and "dry_run" not in args.model_fields_set
    )
    if shown_first:
        args = args.model_copy(update={"dry_run": True})
    briefs = [MemoryBrief.of(m) for m in eligible]
    matches = [Match(id=m.id, relevance=round(relevance[m.id], 4)) for m in eligible] if args.query else []
    if not args.dry_run:  # as they are after this call
        after = (
            {"status": "purged", "preview": PURGED_PREVIEW}
            if args.mode == "purge"
            else {"status": "retracted"}
        )
        briefs = [brief.model_copy(update=after) for brief in briefs]
    skipped = len(targets) - len(eligible)
    notes = []
    if skipped:
        notes.append(
            f"{skipped} already {'purged' if args.mode == 'purge' else 'inactive'}, left as "
            f"{'it was' if skipped == 1 else 'they were'}"
        )
    org_held = [m for m in held if m.visibility == "org" and not caller.may_change_org(m.org_id)]
    held = [m for m in held if m not in org_held]
    if held:
        authors = ", ".join(sorted({repr(m.agent_id) for m in held}))
        notes.append(
            f"{counted(len(held), 'immutable memory')} of another agent left: "
            f"{', '.join(m.id for m in held)} (only {authors}, who remembered "
            f"{'it' if len(held) == 1 else 'them'}, may forget {'it' if len(held) == 1 else 'them'})"
        )
    # A dry run names what the call will do (a trial's listed them, and the call then refused them all).
    if org_held:
        notes.append(
            f"{counted(len(org_held), 'org-visible memory')} left: {', '.join(m.id for m in org_held)} (read by "
            f"every project of the org: a token that grants {org_held[0].org_id}/* may forget them)"
        )
    org_wide = org_wide_note(eligible, scope, dry_run=args.dry_run) if args.memory_id is None else None
    notes += filter(None, [left_matching, other_value, org_wide])
    standing = (
        [m for m in eligible if m.status == "superseded" and m.replaced_by] if args.mode == "purge" else []
    )
    if standing:  # what replaced a memory may say its words again (a restatement), and stays
        notes.append(
            "what replaced "
            + ", ".join(f"{m.id} ({m.replaced_by})" for m in standing)
            + " stays: purge it too if it holds the same words"
        )
    if args.mode == "purge" and args.dry_run:  # what a purge erases with them, said before it does
        absorbed = [
            m
            for where, ms in stored_in(eligible).items()
            for m in absorbed_restatements(store, where, [x.id for x in ms])
        ]
        if absorbed:
            notes.append(
                f"a purge also erases {counted(len(absorbed), 'earlier memory')} they replaced (restatements, "
                f"or what an explicit update corrected): {', '.join(absorbed)}"
            )
    if shown_first:
        notes.insert(
            0,
            f"dry run: a purge erases for good, and {len(eligible)} memories match; check them, then call "
            "again with dry_run=false to purge them"
            if len(eligible) > 1
            else "dry run: a purge erases for good, and 1 memory matches; check it, then call again with "
            "dry_run=false to purge it (or pass its memory_id)"
            if left_matching is None
            else "dry run: a purge erases for good, and more memories match the query than "
            f"max_memories={args.max_memories} takes; check this one, then call again with dry_run=false to "
            "purge it (or pass its memory_id)",
        )
    note = "; ".join(notes) or None

    def tagged_note(count: int, note: str | None) -> str | None:  # what a forget by tag did, first
        if args.tag is None:
            return note
        more = f" (the first {at_once:,}; call again for the rest)" if len(tagged) > at_once else ""
        done = "purged" if args.mode == "purge" else "retracted"
        said = (
            f"dry run: the {counted(count, 'memory')} tagged {args.tag!r} would be {done}{more}; call "
            "again with dry_run=false to forget them"
            if args.dry_run
            else f"{counted(count, 'memory')} tagged {args.tag!r} {done}{more}"
        )
        return f"{said}; {note}" if note else said

    if args.dry_run or not eligible:
        return ForgetOutput(
            mode=args.mode,
            dry_run=args.dry_run,
            forgotten=briefs,
            matches=matches,
            note=tagged_note(len(eligible), note),
        )

    actor = Actor(caller.agent_id, caller.session_id)
    reason = args.reason or f"{args.mode} requested"
    if args.mode == "purge":
        # The purge's own reason keeps no word of what it erases, in any scope, tags included (a reason that
        # quoted a leaked secret kept it in lineage, the export and the store's files, a new user's trial
        # found).
        reason = without_words_of(reason, erased_texts(store, eligible))
    extras, raced = [], []
    for where, memories in stored_in(eligible).items():  # the project's memories, then the org shelf's
        extra, lost = _forget_in(
            runtime, where, [m.id for m in memories], args, reason, actor, caller.agent_id
        )
        extras += [extra] if extra else []
        raced += lost
    if raced:  # changed by another call first (a trial: both callers were told they did it, lineage twice)
        briefs = [brief for brief in briefs if brief.id not in raced]
        extras.append(
            f"{counted(len(raced), 'memory')} no longer active, changed by another call meanwhile: {', '.join(raced)}"
        )
    if extras:
        note = "; ".join([note, *extras]) if note else "; ".join(extras)
    note = tagged_note(len(eligible) - len(raced), note)
    return ForgetOutput(mode=args.mode, dry_run=False, forgotten=briefs, matches=matches, note=note)


def _forget_in(
    runtime: Runtime,
    scope: Scope,
    ids: list[str],
    args: ForgetInput,
    reason: str,
    actor: Actor,
    agent_id: str,
) -> tuple[str | None, list[str]]:
    """Retract or purge these memories of one scope, with lineage; returns a note on what else went, and
    the ids another call retracted first."""
    store = runtime.store
    now = runtime.clock()
    resolution = f"{args.mode} by {agent_id}"
    note = None
    if args.mode == "purge":
        restatements = absorbed_restatements(store, scope, ids)
        if restatements:
            ids += restatements
            note = f"also purged {counted(len(restatements), 'earlier memory')} it replaced: {', '.join(restatements)}"
        # The lineage goes with the purge: one recoverable operation (storage.store.MemoryStore.purge).
        events = runtime.consolidation.retirement_events(
            scope, ids, "purge", resolver="forget", reason=reason, actor=actor, at=now
        )
        store.purge(scope, ids, now, quoted_chars=PRECEDING_CHARS, events=events, resolution=resolution)
        forget_cached_texts()  # a purged memory's text leaves this process's caches too
        runtime.corroboration.retire(scope, ids)
        return note, []
    changed = runtime.writer.retract(scope, ids, reason=reason, resolution=resolution, actor=actor)
    return note, [i for i in ids if i not in changed]


def erased_texts(store: MemoryStore, memories: Sequence[MemoryRecord]) -> list[str]:
    """The contents and tags a purge of ``memories`` erases, with the earlier memories it erases with them
    (``absorbed_restatements``), in every scope they are stored in."""
    texts: list[str] = []
    for where, stored in stored_in(memories).items():
        ids = [memory.id for memory in stored]
        for memory in store.get_memories([*ids, *absorbed_restatements(store, where, ids)], where).values():
            texts += [memory.content, *memory.tags]
    return texts


async def handle(args: ForgetInput, runtime: Runtime, caller: Caller) -> ForgetOutput:
    return await anyio.to_thread.run_sync(forget, args, runtime, caller)
