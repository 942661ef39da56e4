"""drift: where beliefs changed or conflict. Open contradiction pairs (the same subject, opposite claims,
neither revised), and the recent revisions and consolidations with what replaced what."""

from __future__ import annotations

from typing import Literal

import anyio
from pydantic import BaseModel, Field

from retrieval.contradictions import AFFIRMED
from storage.records import MemoryRecord
from tools.common import Caller, Runtime, ScopeArgs, iso, view_for
from tools.memory_views import REPLACING_ACTIONS, EventView, MemoryBrief


class DriftInput(ScopeArgs):
    include_resolved: bool = Field(False, description="Also settled ones.")
    limit: int = Field(50, ge=1, le=500, description="At most this many of each.")


class ContradictionView(BaseModel):
    older: MemoryBrief
    newer: MemoryBrief
    kind: str
    detail: str
    subject_similarity: float
    status: str
    resolution: str | None
    org_wide: Literal["older", "newer"] | None = Field(
        None,
        description="Which of the two is the org's (on its shelf, read by every project), beside a project's.",
    )
    detected_at: str


class ChangeView(BaseModel):
    event: EventView
    replaced: MemoryBrief | None
    by: MemoryBrief | None


class DriftOutput(BaseModel):
    open_contradictions: int
    contradictions: list[ContradictionView]
    changes: list[ChangeView] = Field(description="Recent revisions and consolidations, newest first.")
    note: str | None = Field(None, description="With nothing to show: the project holds nothing to read.")


def drift(args: DriftInput, runtime: Runtime, caller: Caller) -> DriftOutput:
    view = view_for(args, runtime, caller)
    store = runtime.store
    status = None if args.include_resolved else "open"
    # The project's and the org shelf's, of memories the caller may read (private ones are its own).
    every = [pair for scope in view.scopes for pair in store.contradictions(scope, status=status)]
    # Every event, then the newest of those the caller may read: another agent's private ones must not
    # crowd out its own.
    events = [e for scope in view.scopes for e in store.recent_lineage(scope, REPLACING_ACTIONS, None)]
    ids = {pair.older_id for pair in every} | {pair.newer_id for pair in every}
    ids |= {event.memory_id for event in events} | {event.related_id for event in events if event.related_id}
    memories = store.get_memories(sorted(ids), view)
    # An open pair with a side no longer active is being carried to what restated it, or closed (the write
    # path's work behind the call): listed once that is done, not as a dispute of a memory gone (a trial).
    # (`stats` counts the table's open pairs as they are.)
    found = [
        pair
        for pair in every
        if pair.older_id in memories
        and pair.newer_id in memories
        and (
            pair.status != "open"
            or memories[pair.older_id].status == memories[pair.newer_id].status == "active"
        )
    ]
    open_count = sum(1 for pair in found if pair.status == "open")
    pairs = sorted(found, key=lambda pair: pair.detected_at, reverse=True)[: args.limit]
    changes = sorted(
        (event for event in events if event.memory_id in memories), key=lambda e: e.at, reverse=True
    )[: args.limit]
    note = None
    if not found and not changes:  # a mistyped project_id, most likely, as recall says (a trial)
        from tools.empty_recall_notes import empty_project_note

        note = empty_project_note(runtime, view, caller)
    return DriftOutput(
        note=note,
        open_contradictions=open_count,
        contradictions=[
            ContradictionView(
                older=MemoryBrief.of(memories[pair.older_id]),
                newer=MemoryBrief.of(memories[pair.newer_id]),
                kind=pair.kind,
                detail=pair.detail,
                subject_similarity=pair.similarity,
                status=pair.status,
                resolution=pair.resolution,
                detected_at=iso(pair.detected_at),
                org_wide=_org_wide(memories[pair.older_id], memories[pair.newer_id]),
            )
            for pair in pairs
            if pair.older_id in memories and pair.newer_id in memories
        ],
        changes=[
            ChangeView(
                event=EventView.of(event),
                replaced=MemoryBrief.of(memories[event.memory_id]) if event.memory_id in memories else None,
                by=MemoryBrief.of(memories[event.related_id]) if event.related_id in memories else None,
            )
            for event in changes
        ],
    )


async def handle(args: DriftInput, runtime: Runtime, caller: Caller) -> DriftOutput:
    return await anyio.to_thread.run_sync(drift, args, runtime, caller)


# How to settle a dispute, as the tools do it (``memoria drift`` says it with its commands).
SETTLE = (
    "Settle each: forget the one that is wrong (forget memory_id=...), or remember what is true with replaces= "
    "the wrong one's id."
)


def text_of(out: DriftOutput, settle: str = SETTLE) -> str:
    """What an agent reads of drift: each contradiction as the two statements, newer first, with how to
    settle it, then the recent changes, one line each (a trial read raw JSON, and "'(no negation)' then
    'not'" for a denial). The structured content carries every field."""
    lines = [f"{out.open_contradictions} open contradiction{'s' if out.open_contradictions != 1 else ''}."]
    if any(pair.status == "open" for pair in out.contradictions):  # said once (a trial read it per pair)
        lines[0] += f" {settle}"
    for pair in out.contradictions:
        state = "open" if pair.status == "open" else f"{pair.status}: {pair.resolution or 'settled'}"
        lines.append(
            f"[{state}] {_brief(pair.newer)}\n    against the older {_brief(pair.older)}\n"
            f"    ({pair.kind}: {_readable(pair.detail)})"
        )
        if pair.org_wide:  # (a review: the advice above had a project's agent replace the org's memory)
            lines.append(
                f"    (the {pair.org_wide} is the org's, on its shelf: replacing it changes it for every project; "
                "settle this project's side)"
            )
    listed = sum(1 for pair in out.contradictions if pair.status == "open")
    if out.open_contradictions > listed:
        lines.append(f"{out.open_contradictions - listed} more open beyond `limit`: raise it to see them.")
    if out.changes:
        lines.append("Recent changes, newest first:")
        for change in out.changes:
            event = change.event
            by = f" by {_brief(change.by)}" if change.by else ""
            replaced = _brief(change.replaced) if change.replaced else event.memory_id
            lines.append(
                f"- {event.at[:10]} {event.action}: {replaced}{by} ({event.resolver}; {event.reason})"
            )
    if out.note:
        lines.append(f"{out.note[0].upper()}{out.note[1:]}.")
    return "\n".join(lines)


AFFIRMED_TERM = repr(AFFIRMED)  # how a pair's detail names the statement that does not negate


def _readable(detail: str) -> str:
    """A pair's detail with a denial said in words: "'(no negation)' then 'not'" is "the newer denies it
    ('not')", the other way round "the newer affirms what the older denied ('not')"."""
    if detail.startswith(f"{AFFIRMED_TERM} then "):
        rest = detail.removeprefix(f"{AFFIRMED_TERM} then ")
        word, _, overlap = rest.partition(" (")
        return f"the newer denies it ({word})" + (f" ({overlap}" if overlap else "")
    if f" then {AFFIRMED_TERM}" in detail:
        word, _, overlap = detail.partition(f" then {AFFIRMED_TERM}")
        return f"the newer affirms what the older denied ({word})" + overlap
    return detail


def _brief(memory: MemoryBrief) -> str:
    return f"{memory.id} ({memory.agent_id}, {memory.created_at[:10]}) {memory.preview!r}"


def _org_wide(older: MemoryRecord, newer: MemoryRecord) -> Literal["older", "newer"] | None:
    """Which of a pair of the org's shelf and a project is the org's."""
    if older.scope == newer.scope:
        return None
    return "older" if older.scope.is_org_shelf else "newer"
