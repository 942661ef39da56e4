"""The recall pipeline: an explicit, ordered list of stages, each timed and traced.

Later stages (gate, corroboration, episode expansion) slot into ``build_stages`` at their place in the
seeds' order: gate -> candidate search -> rerank -> corroboration -> feedback -> expansion -> assembly.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from retrieval.assembly import AssemblyStage
from retrieval.candidate_search import CandidateSearchStage, CandidateSource
from retrieval.feedback import FeedbackStage
from retrieval.providers import Models
from retrieval.rerank import RerankStage
from retrieval.trace import RecallTrace, StageOutput, StageRecord
from retrieval.types import Candidate, RecallRequest


class Stage(Protocol):
    name: str

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput: ...


@dataclass(frozen=True)
class RecallResult:
    candidates: tuple[Candidate, ...]
    context: str
    trace: RecallTrace

    @property
    def in_context(self) -> tuple[Candidate, ...]:
        return tuple(candidate for candidate in self.candidates if candidate.in_context)


@dataclass(frozen=True)
class PipelineOptions:
    vector_weight: float = 0.5
    use_vector: bool = True
    use_fulltext: bool = True
    use_rerank: bool = True


def build_stages(source: CandidateSource, models: Models, options: PipelineOptions) -> list[Stage]:
    reranker = models.reranker if options.use_rerank else None
    skipped = "disabled by configuration" if not options.use_rerank else models.reranker_info.describe()
    return [
        CandidateSearchStage(
            source,
            models.embedder,
            vector_weight=options.vector_weight,
            use_vector=options.use_vector,
            use_fulltext=options.use_fulltext,
        ),
        RerankStage(reranker, skipped_reason=f"no reranker: {skipped}"),
        FeedbackStage(),
        AssemblyStage(),
    ]


class RecallPipeline:
    def __init__(self, stages: Sequence[Stage], backends: dict[str, str]) -> None:
        self._stages = list(stages)
        self._backends = dict(backends)

    @property
    def stage_names(self) -> list[str]:
        return [stage.name for stage in self._stages]

    def run(self, request: RecallRequest) -> RecallResult:
        candidates: tuple[Candidate, ...] = ()
        context = ""
        records = []
        for stage in self._stages:
            started = time.perf_counter()
            output = stage(request, candidates)
            records.append(
                StageRecord(stage.name, (time.perf_counter() - started) * 1000.0, tuple(output.events))
            )  # type: ignore[arg-type]
            candidates = output.candidates
            if output.context is not None:
                context = output.context
        trace = RecallTrace(
            retrieval_id=request.retrieval_id,
            query=request.query,
            backends=self._backends,
            weighting_enabled=request.weighting_enabled,
            top_k=request.top_k,
            char_budget=request.char_budget,
            stages=tuple(records),
            candidates=candidates,
        )
        return RecallResult(candidates, context, trace)
