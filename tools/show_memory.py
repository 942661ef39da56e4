"""show_memory: one memory in full (content, provenance, tier, status, weight and its history) with its
lineage, for the memory-by-id resource and ``memoria show``."""

from __future__ import annotations

import anyio
from pydantic import BaseModel, Field

from storage.records import Scope, View
from tools.common import Caller, Identifier, Runtime, ScopeArgs, iso, no_such_memory
from tools.empty_recall_notes import held_elsewhere
from tools.lineage import LineageInput, LineageOutput, lineage


class ShowMemoryInput(ScopeArgs):
    memory_id: Identifier = Field(description="Any memory id, active or not.")


class WeightStep(BaseModel):
    memory_id: str = Field(
        description="Whose weight moved: this memory, or one it replaced by an explicit update."
    )
    session_id: str
    weight_before: float
    weight_after: float
    revision: int
    at: str


class ShowMemoryOutput(BaseModel):
    id: str
    org_id: str
    project_id: str
    content: str = Field(description="Verbatim; empty once purged.")
    kind: str
    tags: list[str]
    agent_id: str
    session_id: str
    episode_id: str | None
    protection_tier: str
    visibility: str
    status: str
    replaced_by: str | None
    weight: float
    weight_history: list[WeightStep] = Field(
        description="Every move of its weight by an outcome, oldest first."
    )
    created_at: str
    updated_at: str
    expires_at: str | None
    embedder: str
    lineage: LineageOutput


def show_memory(args: ShowMemoryInput, runtime: Runtime, caller: Caller) -> ShowMemoryOutput:
    scope = args.scope(runtime.settings)
    memory = runtime.store.get_memory(args.memory_id, View(scope, caller.viewer))
    if memory is None:
        elsewhere = held_elsewhere(runtime, caller, args.memory_id, scope)
        raise no_such_memory(args.memory_id, scope.org_id, scope.project_id, elsewhere)
    history = sorted(
        (
            event
            for owner in replaced_before(runtime, memory.scope, memory.id)
            for event in runtime.store.weight_events(scope, owner)
        ),
        key=lambda event: (event.at, event.revision),
    )
    return ShowMemoryOutput(
        id=memory.id,
        org_id=memory.org_id,
        project_id=memory.project_id,
        content=memory.content,
        kind=memory.kind,
        tags=list(memory.tags),
        agent_id=memory.agent_id,
        session_id=memory.session_id,
        episode_id=memory.episode_id,
        protection_tier=memory.protection_tier,
        visibility=memory.visibility,
        status=memory.status_at(runtime.clock()),
        replaced_by=memory.replaced_by,
        weight=round(memory.weight, 6),
        weight_history=[
            WeightStep(
                memory_id=event.memory_id,
                session_id=event.session_id,
                weight_before=round(event.weight_before, 6),
                weight_after=round(event.weight_after, 6),
                revision=event.revision,
                at=iso(event.at),
            )
            for event in history
        ],
        created_at=iso(memory.created_at),
        updated_at=iso(memory.updated_at),
        expires_at=iso(memory.expires_at) if memory.expires_at else None,
        embedder=memory.embedder,
        lineage=lineage(
            LineageInput(org_id=scope.org_id, project_id=scope.project_id, memory_id=memory.id),
            runtime,
            caller,
        ),
    )


# The lineage actions by which a memory takes another's place and its reports' credits with them.
TAKES_ITS_PLACE = frozenset({"supersede", "revise", "reword", "version"})


def replaced_before(runtime: Runtime, scope: Scope, memory_id: str) -> list[str]:
    """``memory_id`` and the memories it replaced (an explicit update, a restatement, a revision, a
    rewording, a newer version), back through each one's own: their weight history is the memory's (their
    credits were carried over; a corrected belief's failures stay its own, but its history is shown)."""
    found = [memory_id]
    for current in found:  # grows as predecessors are found
        for event in runtime.store.lineage(scope, [current]):
            if (
                event.action in TAKES_ITS_PLACE
                and event.related_id == current
                and event.memory_id not in found
            ):
                found.append(event.memory_id)
    return found


async def handle(args: ShowMemoryInput, runtime: Runtime, caller: Caller) -> ShowMemoryOutput:
    return await anyio.to_thread.run_sync(show_memory, args, runtime, caller)
