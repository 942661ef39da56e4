"""Consolidation run again over a scope's active memories, oldest first, with this release's rules
(``memoria consolidate``): each memory is examined as its write would examine it now, against the memories
active beside it, so what an earlier release's rules missed is found (a revision read as two distinct
facts, a contradiction left unmarked: a trial upgrading a store found "now listens on port 9090" beside
"listens on port 8080", both active and unmarked, the stale one recalled first). Nothing decided before is
undone: a memory superseded, retracted or disputed stays so. Rules only (no language model), as the next
start's recovery of an unfinished consolidation decides."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from storage.records import Scope
from writing.consolidation.report import Actor

if TYPE_CHECKING:
    from writing.service import WriteService

PAGE = 1_000  # memories listed per read
BATCH = 200  # memories whose vectors are read at once


@dataclass
class Reconsolidated:
    """What a run found: memories examined, superseded (revised included) and newly disputed."""

    examined: int = 0
    superseded: int = 0
    disputed: int = 0


def consolidate_again(
    writer: WriteService, scope: Scope, progress: Callable[[str, int, int], None] | None = None
) -> Reconsolidated:
    """Examine every active memory of ``scope`` again, oldest first (a memory an earlier one's examination
    superseded meanwhile is skipped)."""
    store = writer.store
    ids: list[str] = []
    before = None
    # Not a memory past its expiry: recall no longer shows it, and maintenance retracts it (a review: an
    # expired "now listens on 9090" superseded the live "listens on 8080", leaving nothing on the subject).
    while page := store.list_memories(scope, limit=PAGE, before=before, now=writer.clock()):
        ids += [memory.id for memory in page]
        before = (page[-1].created_at, page[-1].id)
    ids.reverse()  # oldest first: each memory meets what was written before it as its write did
    found = Reconsolidated()
    open_before = set(store.open_contradiction_pairs(scope))
    for start in range(0, len(ids), BATCH):
        chunk = ids[start : start + BATCH]
        vectors = store.memory_vectors(chunk, scope)
        for memory_id in chunk:
            memory = store.get_memories([memory_id], scope).get(memory_id)  # as the steps before left it
            if memory is None or memory.status != "active" or memory_id not in vectors:
                continue
            report = writer.consolidation.on_write(
                memory,
                vectors[memory_id],
                llm=None,
                actor=Actor(memory.agent_id, memory.session_id),
                as_written=True,
            )
            writer.track(scope, report, memory_id)
            found.examined += 1
            found.superseded += len(report.superseded) + len(report.revised)
            if progress:
                progress("consolidating", found.examined, len(ids))
    found.disputed = len(set(store.open_contradiction_pairs(scope)) - open_before)  # new pairs only
    return found
