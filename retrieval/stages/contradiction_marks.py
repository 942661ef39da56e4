"""Stage: contradiction marks. A memory with an unresolved newer contradiction (the same subject, an
opposite claim, neither revised) is marked, so the context and the caller can see it is disputed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from retrieval.trace import ContradictionsMarked, StageOutput
from retrieval.types import Candidate, RecallRequest
from storage.records import Reach


class ContradictionSource(Protocol):
    def newer_contradictions(self, reach: Reach, memory_ids: Sequence[str]) -> dict[str, list[str]]: ...


class ContradictionStage:
    name = "contradictions"

    def __init__(self, source: ContradictionSource) -> None:
        self._source = source

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        newer = (
            self._source.newer_contradictions(request.reach, [c.id for c in candidates]) if candidates else {}
        )
        marked = tuple(
            candidate.revised(contradicted_by=tuple(newer[candidate.id]))
            if candidate.id in newer
            else candidate
            for candidate in candidates
        )
        return StageOutput(marked, (ContradictionsMarked(sum(1 for c in marked if c.contradicted_by)),))
