"""Stage: contradiction marks. A memory with an unresolved newer contradiction (the same subject, an
opposite claim, neither revised) is marked, so the context and the caller can see it is disputed. The marks
carry what each disputing memory says (those the caller may read, active): the context quotes a disputer that
is not in it beside the memory it disputes. A second trial recalled "The catalog-service caches product
lookups in Memcached on cache-01..." first, marked "DISPUTED by newer mem_...", with the memory that said
Memcached was given up ranked out of the context: the agent read the stale fact and only an id."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from retrieval.stages.instructions import instruction_signals
from retrieval.trace import ContradictionsMarked, StageOutput
from retrieval.types import Candidate, RecallRequest
from storage.records import MemoryRecord, Reach


class ContradictionSource(Protocol):
    def newer_contradictions(self, reach: Reach, memory_ids: Sequence[str]) -> dict[str, list[str]]: ...

    def get_memories(self, memory_ids: Sequence[str], reach: Reach) -> dict[str, MemoryRecord]: ...


class ContradictionStage:
    name = "contradictions"

    def __init__(self, source: ContradictionSource) -> None:
        self._source = source

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        newer = (
            self._source.newer_contradictions(request.reach, [c.id for c in candidates]) if candidates else {}
        )
        said, written = self._disputers_said(request, candidates, newer)
        marked = tuple(
            candidate.revised(
                contradicted_by=tuple(newer[candidate.id]),
                disputers_said=tuple((other, said[other]) for other in newer[candidate.id] if other in said),
                disputers_earlier=tuple(
                    other
                    for other in newer[candidate.id]
                    if other in written and written[other] < candidate.memory.created_at
                ),
            )
            if candidate.id in newer
            else candidate
            for candidate in candidates
        )
        return StageOutput(marked, (ContradictionsMarked(sum(1 for c in marked if c.contradicted_by)),))

    def _disputers_said(
        self, request: RecallRequest, candidates: tuple[Candidate, ...], newer: dict[str, list[str]]
    ) -> tuple[dict[str, str], dict[str, datetime]]:
        """What each disputing memory says: a candidate's own text, else read (one read for all of them)
        within the caller's view, so another agent's private memory is neither quoted nor revealed. Not
        quoted: one no longer active (retracted, superseded since) or past its expiry, and one whose text
        reads as instructions to the model (recall demotes such a memory; quoted, it would ride in on any
        memory it disputes, a review found). The mark still names them. Also when each the caller may read
        was written (a disputer written before the memory it disputes is marked "earlier")."""
        wanted = {other for others in newer.values() for other in others}
        if not wanted:
            return {}, {}
        known = {c.id: c.memory for c in candidates if c.id in wanted}
        missing = wanted - set(known)
        if missing:
            known |= self._source.get_memories(sorted(missing), request.reach)
        now = request.now or datetime.now(UTC)
        said = {
            memory_id: record.content
            for memory_id, record in known.items()
            if record.status_at(now) == "active" and not instruction_signals(record.content)
        }
        return said, {memory_id: record.created_at for memory_id, record in known.items()}
