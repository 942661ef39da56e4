"""The recall pipeline: an explicit, ordered list of stages, each timed and traced.

gate -> candidate search -> rerank -> attribution -> min score -> iterative retrieval -> instruction flags
-> corroboration -> decay -> feedback -> episode expansion -> neighbourhood -> answer type -> contradiction marks
-> episode-grouped assembly. A stage that halts the recall (the gate) leaves the rest recorded as skipped.
The optional LLM passes at assembly (``retrieval.stages.llm_passes``, off by default) run as stages of
their own: context selection before assembly, fact selection and cleanup after it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from retrieval.feedback_index import FeedbackIndex
from retrieval.models.embedders.base import QueryMemo
from retrieval.models.providers import Models
from retrieval.models.rerankers.llm import RerankerConfiguration, RerankerService
from retrieval.stages.answer_type import AnswerTypeStage
from retrieval.stages.assembly import AssemblyStage
from retrieval.stages.attribution import AttributionStage
from retrieval.stages.candidate_search import CandidateSearchStage, CandidateSource
from retrieval.stages.contradiction_marks import ContradictionSource, ContradictionStage
from retrieval.stages.corroboration import ClusterProvider, CorroborationStage, MemoryCluster
from retrieval.stages.decay import DecayStage
from retrieval.stages.expansion import EpisodeExpansionStage, EpisodeSource
from retrieval.stages.feedback import FeedbackStage
from retrieval.stages.fusion import SEMANTIC_CONTEXT_SHARE, SEMANTIC_VECTOR_WEIGHT
from retrieval.stages.gate import GateMode, GateStage
from retrieval.stages.instructions import InstructionStage
from retrieval.stages.iterative import IterativeRetrievalStage
from retrieval.stages.llm_passes import LLMPass, pass_stages
from retrieval.stages.neighbourhood import NeighbourhoodStage
from retrieval.stages.rerank import RerankStage
from retrieval.stages.threshold import MinScoreStage
from retrieval.text import after_purges_forgotten
from retrieval.trace import RecallTrace, StageOutput, StageRecord, StageSkipped
from retrieval.types import Candidate, RecallRequest
from storage.records import Reach


class Stage(Protocol):
    name: str

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput: ...


class ContextStage(Protocol):
    """A stage after assembly: it reads the assembled context too (``reads_context`` is True)."""

    name: str
    reads_context: bool

    def __call__(
        self, request: RecallRequest, candidates: tuple[Candidate, ...], context: str
    ) -> StageOutput: ...


class PipelineStore(CandidateSource, EpisodeSource, ContradictionSource, Protocol):
    """Everything the stages read from the store."""


@dataclass(frozen=True)
class RecallResult:
    candidates: tuple[Candidate, ...]
    context: str
    trace: RecallTrace

    @property
    def in_context(self) -> tuple[Candidate, ...]:
        """The memories in the context, in the order the context shows them."""
        chosen = [candidate for candidate in self.candidates if candidate.in_context]
        return tuple(sorted(chosen, key=lambda candidate: candidate.context_position or 0))

    @property
    def gated(self) -> str | None:
        return self.trace.gated


@dataclass(frozen=True)
class PipelineOptions:
    """Which stages run and their knobs (``server.config.Settings`` is where the defaults are set)."""

    vector_weight: float = SEMANTIC_VECTOR_WEIGHT
    context_share: float = SEMANTIC_CONTEXT_SHARE  # of the vector weight, for a memory's context cosine
    use_vector: bool = True
    fulltext_search: bool = True
    use_rerank: bool = True
    gate: GateMode = "local"
    min_fact_score: float = 0.0
    min_share_of_best: float | None = 0.0  # 0: none is filler beside the best; None: by relevance's kind
    author_discount: float = 0.5  # 0: attribution off
    instruction_demotion: float = 0.5  # 1: memories that read as instructions are flagged, not demoted
    max_iterations: int = 1
    sufficiency_threshold: float = 0.7
    corroboration: bool = True
    episode_expansion: bool = True
    score_propagation_alpha: float = 0.5
    max_siblings: int = 3
    neighbourhood_weight: float = 0.2  # 0: no neighbourhood bonus
    neighbourhood_turns: int = 2
    answer_type_weight: float = 0.7  # 0: no answer-type bonus
    top_k_episodes: int = 3
    max_episodes: int = 10
    fold_threshold: float | None = 0.8  # None: near-duplicates each take a slot
    llm_reranker: RerankerConfiguration | None = None
    llm_reranker_by_agent: Mapping[str, RerankerConfiguration] = field(default_factory=dict)
    llm_prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # USD per 1M tokens
    half_lives: Mapping[str, float] = field(default_factory=dict)  # decay: days per protection tier
    llm_passes: tuple[LLMPass, ...] = ()  # the LLM passes at assembly that run (none by default)


class _NoClusters:
    def clusters_for(self, reach: Reach, memory_ids: Sequence[str]) -> Mapping[str, MemoryCluster]:
        return {}


def build_stages(
    store: PipelineStore,
    models: Models,
    options: PipelineOptions,
    clusters: ClusterProvider | None = None,
    feedback: FeedbackIndex | None = None,
) -> list[Stage | ContextStage]:
    """The stages in order. ``feedback``: the index of outcome reports that gives each memory its
    weight for the query (without it, memories carry their global weight)."""
    reranker = models.reranker if options.use_rerank else None
    skipped = "disabled by configuration" if not options.use_rerank else models.reranker_info.describe()
    embedder = QueryMemo(models.embedder)  # the stages that embed the same text embed it once
    search = CandidateSearchStage(
        store,
        embedder,
        vector_weight=options.vector_weight,
        context_share=options.context_share,
        use_vector=options.use_vector,
        use_fulltext=options.fulltext_search,
    )
    rerank = RerankStage(
        reranker,
        skipped_reason=f"no reranker: {skipped}",
        llm_config=options.llm_reranker if options.use_rerank else None,
        llm_rerankers=RerankerService(options.llm_prices),
        agent_configs=options.llm_reranker_by_agent if options.use_rerank else None,
    )
    threshold = MinScoreStage(options.min_fact_score)
    attribution = AttributionStage(options.author_discount)
    stages: list[Stage] = [
        GateStage(options.gate),
        search,
        rerank,
        attribution,
        threshold,
        IterativeRetrievalStage(
            search,
            rerank,
            threshold,
            attribution=attribution,
            max_iterations=options.max_iterations,
            sufficiency_threshold=options.sufficiency_threshold,
        ),
        InstructionStage(options.instruction_demotion),
        CorroborationStage(clusters if clusters is not None and options.corroboration else _NoClusters()),
        DecayStage(options.half_lives),
        FeedbackStage(feedback, embedder),
    ]
    if options.episode_expansion:
        stages.append(
            EpisodeExpansionStage(
                store,
                alpha=options.score_propagation_alpha,
                max_siblings=options.max_siblings,
                author_discount=options.author_discount,
                feedback=feedback,
                embedder=embedder,
            )
        )
    stages.append(
        NeighbourhoodStage(store, weight=options.neighbourhood_weight, turns=options.neighbourhood_turns)
    )
    stages.append(AnswerTypeStage(options.answer_type_weight))
    stages.append(ContradictionStage(store))
    assembly = AssemblyStage(
        store,
        top_k_episodes=options.top_k_episodes,
        max_episodes=options.max_episodes,
        fold_threshold=options.fold_threshold,
        min_share_of_best=options.min_share_of_best,
    )
    before, after = pass_stages(options.llm_passes, assembly, options.llm_prices)
    return [*stages, *before, assembly, *after]


class RecallPipeline:
    def __init__(self, stages: Sequence[Stage | ContextStage], backends: dict[str, str]) -> None:
        self._stages = list(stages)
        self._backends = dict(backends)

    @property
    def candidate_search(self) -> CandidateSearchStage:
        """The pipeline's candidate search, for tools that find memories as a recall would (forget)."""
        for stage in self._stages:
            if isinstance(stage, CandidateSearchStage):
                return stage
        raise LookupError("this pipeline has no candidate search stage")

    @after_purges_forgotten
    def run(self, request: RecallRequest) -> RecallResult:
        candidates: tuple[Candidate, ...] = ()
        context = ""
        records = []
        halted: str | None = None
        for stage in self._stages:
            if halted is not None:
                records.append(StageRecord(stage.name, 0.0, (StageSkipped(f"not run: {halted}"),)))
                continue
            started = time.perf_counter()
            output = (
                stage(request, candidates, context)  # type: ignore[call-arg]
                if getattr(stage, "reads_context", False)
                else stage(request, candidates)  # type: ignore[call-arg]
            )
            records.append(StageRecord(stage.name, (time.perf_counter() - started) * 1000.0, output.events))
            candidates = output.candidates
            if output.context is not None:
                context = output.context
            halted = output.halt
        trace = RecallTrace(
            retrieval_id=request.retrieval_id,
            query=request.query,
            backends=self._backends,
            weighting_enabled=request.weighting_enabled,
            top_k=request.top_k,
            char_budget=request.char_budget,
            stages=tuple(records),
            candidates=candidates,
            gated=halted,
            window=request.window,
            window_from=request.window_from,
            filters=(
                {"tags": list(request.tags), "tags_all": request.tags_all, "kinds": list(request.kinds)}
                if request.tags or request.kinds
                else None
            ),
        )
        return RecallResult(candidates, context, trace)
