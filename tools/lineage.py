"""lineage: for any memory, what it replaced (all the way back), what replaced it (up to the memory that
is authoritative now), its artifact versions, who wrote each, when, and which resolver decided."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from pydantic import BaseModel, Field

from storage.records import MemoryRecord, Reach
from tools.common import Caller, Identifier, Runtime, ScopeArgs, expired_by, iso, no_such_memory, view_for
from tools.empty_recall_notes import held_elsewhere
from tools.memory_views import (
    MAX_CHAIN,
    REPLACING_ACTIONS,
    EventView,
    MemoryBrief,
    absorbed_events,
    replacements,
)

if TYPE_CHECKING:
    from storage.store import MemoryStore


class LineageInput(ScopeArgs):
    memory_id: Identifier = Field(description="Any memory, active or not.")


class ReplacedMemory(BaseModel):
    memory: MemoryBrief
    how: EventView


class LineageOutput(BaseModel):
    memory: MemoryBrief
    current: MemoryBrief = Field(description="The chain's last memory (this one, if none replaced it).")
    replaced_by_chain: list[ReplacedMemory] = Field(
        description="From this memory forward to the current one."
    )
    replaces: list[ReplacedMemory] = Field(
        description="Every memory this one replaced, directly or through others."
    )
    versions: list[MemoryBrief] = Field(description="For an artifact: earlier versions, newest first.")
    events: list[EventView] = Field(description="Everything recorded about this memory, oldest first.")
    note: str | None = Field(None, description="When nothing active stands in its place.")


def lineage(args: LineageInput, runtime: Runtime, caller: Caller) -> LineageOutput:
    scope = view_for(args, runtime, caller)  # the caller's own private memories, the shared ones, the org's
    store = runtime.store
    now = runtime.clock()  # the server's clock says what has expired, as the writer's does
    memory = store.get_memory(args.memory_id, scope)
    if memory is None:
        home = scope.home
        elsewhere = held_elsewhere(runtime, caller, args.memory_id, home)
        raise no_such_memory(args.memory_id, home.org_id, home.project_id, elsewhere)

    forward: list[ReplacedMemory] = []
    current = previous = memory
    for before, following in replacements(store, scope, memory):
        previous = before
        how = next(
            (
                e
                for e in store.lineage(scope, [before.id])
                if e.memory_id == before.id and e.related_id == following.id
            ),
            None,
        )
        if how is not None:
            forward.append(ReplacedMemory(memory=MemoryBrief.of(following, now), how=EventView.of(how)))
        current = following

    note = None
    shown = current.status_at(now)
    if shown == "expired" and current.id == memory.id and current.expires_at is not None:
        note = (
            f"it expired at {iso(current.expires_at)} ({expired_by(current)}) and is no longer "
            "recalled: remember its text again to restore it"
        )
    elif shown != "active" and current.id != memory.id:
        # A new user's trial read a retracted correction as "current", with no way back in sight.
        # The version it replaced, the last that stood (a trial: after A -> B -> C and C retracted, the
        # note named A, the oldest).
        again = (
            ""
            if previous.status == "purged"
            else f": remember the text of {previous.id}, the version it replaced, again to make it current"
        )
        note = f"nothing stands in its place: {current.id}, the last memory to replace it, is {shown}{again}"
    return LineageOutput(
        note=note,
        memory=MemoryBrief.of(memory, now),
        current=MemoryBrief.of(current, now),
        replaced_by_chain=forward,
        replaces=replaced_by(store, scope, memory.id),
        versions=[MemoryBrief.of(m, now) for m in versions(store, scope, memory)],
        events=[EventView.of(e) for e in store.lineage(scope, [memory.id])],
    )


def replaced_by(store: MemoryStore, scope: Reach, memory_id: str) -> list[ReplacedMemory]:
    """What ``memory_id`` absorbed, and what those had absorbed (breadth-first)."""
    events = absorbed_events(store, scope, [memory_id], REPLACING_ACTIONS, MAX_CHAIN)
    older = store.get_memories([e.memory_id for e in events], scope)
    return [
        ReplacedMemory(memory=MemoryBrief.of(older[e.memory_id]), how=EventView.of(e))
        for e in events
        if e.memory_id in older
    ]


def versions(store: MemoryStore, scope: Reach, memory: MemoryRecord) -> list[MemoryRecord]:
    chain = []
    current, seen = memory, {memory.id}
    while current.version_of and current.version_of not in seen and len(seen) < MAX_CHAIN:
        previous = store.get_memory(current.version_of, scope)
        if previous is None:
            break
        chain.append(previous)
        seen.add(previous.id)
        current = previous
    return chain


async def handle(args: LineageInput, runtime: Runtime, caller: Caller) -> LineageOutput:
    return await anyio.to_thread.run_sync(lineage, args, runtime, caller)
