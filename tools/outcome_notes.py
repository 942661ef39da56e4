"""What a report's detail adds about the memories it was given or shown: named ones no recall of the
session showed, named ones recall no longer shows, and shown ones that no longer count."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from retrieval.outcomes import ShownContext
from retrieval.text import counted
from storage.records import MemoryRecord

if TYPE_CHECKING:
    from storage.store import MemoryStore


def unseen_note(contexts: Sequence[ShownContext], named: Sequence[str]) -> str:
    """What the report's detail adds for named memories none of the session's recalls put into a context
    (an id from another session, or from memory): they count as named all the same, and the agent hears
    it, since a memory named for a task it was not shown for moves for that task's queries."""
    shown = {memory.memory_id for context in contexts for memory in context.memories}
    unseen = [memory_id for memory_id in named if memory_id not in shown]
    if not contexts or not unseen:
        return ""
    return f". Not in this session's recall results: {', '.join(unseen)}; counted as named all the same"


def inactive_note(store: MemoryStore, known: dict[str, MemoryRecord], named: Iterable[str]) -> str:
    """What the report's detail adds for the named memories recall cannot show (superseded, retracted or
    purged since the session saw them): a superseded one's credit goes on to the memory that stands in its
    place (``WriteService.hand_on_reported``), as if the report had come before the change; the others'
    counts if they are restored. "" when all are active."""
    handed, kept = [], []
    for memory in (known[memory_id] for memory_id in named if memory_id in known):
        if memory.status == "active":
            continue
        head = None
        if memory.replaced_by:
            from writing.service import current_version  # (not imported before the handshake)

            head = current_version(store, memory)
        if head is not None and head.status == "active" and head.id != memory.id:
            handed.append(
                f"{memory.id} (superseded by {memory.replaced_by}): its credit goes on to {head.id}"
            )
        else:
            newer = f" by {memory.replaced_by}" if memory.replaced_by else ""
            kept.append(f"{memory.id} ({memory.status}{newer})")
    note = ""
    if handed:
        note += (
            f". Recall does not show {'; '.join(handed)}, which stands now (as a report made before the change "
            "would have gone: a correction takes none of a failure)"
        )
    if kept:
        note += f". Recall does not show {', '.join(kept)}: the credit counts only if they are active again"
    return note


def dropped_note(count: int) -> str:
    """For the memories of the session's contexts, named by nobody, that were retracted, purged or
    superseded since they were shown: their share was dropped (``report_outcome``)."""
    if not count:
        return ""
    return f". {counted(count, 'memory')} of its contexts no longer active (retracted, purged or superseded) did not move"
