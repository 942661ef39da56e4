"""Small read-only views of memories shared by the forget, drift and lineage tools."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import BaseModel, Field

from storage.records import PURGED_PREVIEW, LineageEvent, MemoryRecord, Reach
from tools.common import iso

PREVIEW_CHARS = 200


def preview_of(memory: MemoryRecord) -> str:
    """The start of a memory's content, or ``[purged]`` for a memory whose content a purge erased (as
    ``forget`` and ``explain_ranking`` show it)."""
    if memory.status == "purged":
        return PURGED_PREVIEW
    return memory.content[:PREVIEW_CHARS]


class MemoryBrief(BaseModel):
    id: str
    preview: str
    kind: str
    agent_id: str
    created_at: str
    status: str
    protection_tier: str
    replaced_by: str | None = None

    @classmethod
    def of(cls, memory: MemoryRecord, now: datetime | None = None) -> MemoryBrief:
        """``now``: the server's clock (``Runtime.clock``), which says whether the memory has expired."""
        return cls(
            id=memory.id,
            preview=preview_of(memory),
            kind=memory.kind,
            agent_id=memory.agent_id,
            created_at=iso(memory.created_at),
            status=memory.status_at(now or datetime.now(UTC)),
            protection_tier=memory.protection_tier,
            replaced_by=memory.replaced_by,
        )


class EventView(BaseModel):
    action: str
    memory_id: str
    related_id: str | None
    resolver: str
    reason: str
    by_agent: str
    at: str

    @classmethod
    def of(cls, event: LineageEvent) -> EventView:
        return cls(
            action=event.action,
            memory_id=event.memory_id,
            related_id=event.related_id,
            resolver=event.resolver,
            reason=event.reason,
            by_agent=event.agent_id,
            at=iso(event.at),
        )


REPLACING_ACTIONS = ("supersede", "revise", "version", "reword")


class LineageLink(BaseModel):
    """One step of a memory's history: the other memory, who wrote it and when, and who decided."""

    id: str = Field(description="The memory on the other side of this step.")
    preview: str
    written_by: str = Field(description="The agent that wrote that memory.")
    written_at: str
    action: str = Field(description="supersede, revise, version or reword.")
    resolver: str = Field(description="What decided: rules:..., revision:explicit, llm:<model>, ...")
    reason: str
    decided_at: str


@dataclass(frozen=True)
class Links:
    replaces: dict[str, list[LineageLink]]  # memory id -> what it replaced, oldest decision first
    replaced_by: dict[str, LineageLink]  # memory id -> what replaced it, if anything


def lineage_links(store: LineageReader, scope: Reach, memory_ids: Sequence[str]) -> Links:
    """Both directions of each memory's direct lineage, read now."""
    wanted = set(memory_ids)
    events = sorted(
        (
            event
            for event in store.lineage(scope, memory_ids)
            if event.action in REPLACING_ACTIONS and event.related_id is not None
        ),
        key=lambda e: e.at,
    )
    # Both ends: when a memory and the one that replaced it are both asked about, each needs the other.
    others = store.get_memories(
        list(dict.fromkeys(i for e in events for i in (e.memory_id, e.related_id) if i is not None)), scope
    )
    links = Links({memory_id: [] for memory_id in memory_ids}, {})
    for event in events:
        assert event.related_id is not None
        if event.related_id in wanted:
            links.replaces[event.related_id].append(_link(event, event.memory_id, others))
        if event.memory_id in wanted:
            links.replaced_by[event.memory_id] = _link(event, event.related_id, others)
    return links


def _link(event: LineageEvent, other_id: str, others: dict[str, MemoryRecord]) -> LineageLink:
    other = others.get(other_id)
    return LineageLink(
        id=other_id,
        preview=preview_of(other) if other else "",
        written_by=other.agent_id if other else "",
        written_at=iso(other.created_at) if other else "",
        action=event.action,
        resolver=event.resolver,
        reason=event.reason,
        decided_at=iso(event.at),
    )


# How far back a recall's include_lineage follows what each memory replaced, and how many it lists.
LINEAGE_DEPTH = 5
LINEAGE_LINKS = 5


def replaced_chains(
    store: LineageReader, scope: Reach, memory_ids: Sequence[str]
) -> dict[str, list[LineageLink]]:
    """What each memory replaced, and what those replaced, up to ``LINEAGE_DEPTH`` steps back: the
    memories it replaced directly first (oldest decision first), then theirs (a trial read only the
    direct step of a fact corrected twice)."""
    chains: dict[str, list[LineageLink]] = {memory_id: [] for memory_id in memory_ids}
    reach = {memory_id: [memory_id] for memory_id in memory_ids}  # each chain's memories one step back
    for _ in range(LINEAGE_DEPTH):
        asked = list(dict.fromkeys(i for ids in reach.values() for i in ids))
        if not asked:
            break
        links = lineage_links(store, scope, asked).replaces
        for memory_id, ids in reach.items():
            seen = {memory_id, *(link.id for link in chains[memory_id])}  # a cycle ends the chain
            room = LINEAGE_LINKS - len(chains[memory_id])  # a merge of many fans out: at most so many
            step = [link for i in ids for link in links.get(i, []) if link.id not in seen][:room]
            chains[memory_id] += step
            reach[memory_id] = [link.id for link in step]
    return chains


def lineage_text(memories: Sequence[Any], room: int) -> str | None:
    """The history a recall with include_lineage shows after its context: per memory in it, what it
    replaced, further back as far as followed, in at most ``room`` characters (what the context left of
    char_budget; a review found a chain of five corrections four times the budget). None when none
    replaced anything."""
    lines = []
    for memory in memories:
        steps = memory.replaces or []
        if steps:
            said = "; ".join(
                f"{link.id} {link.preview[:80]!r} ({link.written_at[:10]}, {link.action} by {link.resolver})"
                for link in steps
            )
            lines.append(f"[{memory.position}] {memory.id} replaced {said}")
    if not lines:
        return None
    head = "History (include_lineage), newest first:"
    shown: list[str] = []
    used = len(head)
    for line in lines:
        if used + len(line) + 1 > room:
            break
        shown.append(line)
        used += len(line) + 1
    if len(shown) < len(lines):
        rest = f"({len(lines) - len(shown)} more in `memories[].replaces`: no room in char_budget)"
        if used + len(rest) + 1 <= room:
            shown.append(rest)
        elif not shown:
            return None
    return "\n".join([head, *shown])


class LineageReader(Protocol):
    def lineage(self, reach: Reach, memory_ids: Sequence[str]) -> list[LineageEvent]: ...

    def get_memories(self, memory_ids: Sequence[str], reach: Reach) -> dict[str, MemoryRecord]: ...


class MemoryReader(Protocol):
    def get_memory(self, memory_id: str, reach: Reach | None = None) -> MemoryRecord | None: ...


MAX_CHAIN = 50  # links followed along a memory's chain of replacements (or of versions)


def replacements(
    store: MemoryReader, reach: Reach, memory: MemoryRecord
) -> Iterator[tuple[MemoryRecord, MemoryRecord]]:
    """Each (memory, the one that replaced it) along ``memory``'s chain of replacements, as far as
    ``reach``'s reader sees it (lineage shows it; an update of a replaced memory names where it ends)."""
    current, seen = memory, {memory.id}
    while current.replaced_by and current.replaced_by not in seen and len(seen) < MAX_CHAIN:
        following = store.get_memory(current.replaced_by, reach)
        if following is None:
            return
        yield current, following
        seen.add(following.id)
        current = following


def absorbed_events(
    store: LineageReader,
    scope: Reach,
    memory_ids: Sequence[str],
    actions: Sequence[str],
    max_memories: int | None = None,
) -> list[LineageEvent]:
    """Breadth-first through ``actions`` events: how ``memory_ids`` replaced others, then how those had
    replaced others, each memory once (stopping after ``max_memories`` memories are seen)."""
    found: list[LineageEvent] = []
    frontier, seen = list(memory_ids), set(memory_ids)
    while frontier and (max_memories is None or len(seen) < max_memories):
        events = [
            e for e in store.lineage(scope, frontier) if e.related_id in frontier and e.action in actions
        ]
        frontier = []
        for event in events:
            if event.memory_id not in seen:
                seen.add(event.memory_id)
                frontier.append(event.memory_id)
                found.append(event)
    return found


def absorbed_restatements(store: LineageReader, scope: Reach, ids: Sequence[str]) -> list[str]:
    """Memories that ``ids`` superseded or reworded (transitively): restatements, which hold the same text,
    and what an explicit update (``replaces``) corrected, which often differs by a detail only: a purge for
    privacy must erase them too, and a dry run names them first. Revised beliefs and older artifact
    versions say something else and are left as they are."""
    return [e.memory_id for e in absorbed_events(store, scope, ids, ("supersede", "reword"))]
