"""Stage: rerank. Relevance becomes a [0, 1] score from the LLM reranker (when configured and the request
has an LLM), else the cross-encoder or Cohere; with none of them, or when they fail, relevance stays the
fused score and the trace says why."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from retrieval.models.llm.base import ClientInputNeeded
from retrieval.models.model_files import short_reason
from retrieval.models.rerankers.base import Reranker, RerankFailed
from retrieval.models.rerankers.llm import RerankerConfiguration, RerankerService, RerankServiceResult
from retrieval.trace import LLMReranked, Reranked, RerankFellBack, RerankSkipped, StageOutput, TraceEvent
from retrieval.types import Candidate, RecallRequest

log = logging.getLogger(__name__)


def by_relevance(candidates: tuple[Candidate, ...]) -> tuple[Candidate, ...]:
    return tuple(sorted(candidates, key=lambda candidate: (-candidate.relevance_score, candidate.id)))


class RerankStage:
    name = "rerank"

    def __init__(
        self,
        reranker: Reranker | None,
        *,
        skipped_reason: str = "no reranker configured",
        llm_config: RerankerConfiguration | None = None,
        llm_rerankers: RerankerService | None = None,
        agent_configs: Mapping[str, RerankerConfiguration] | None = None,
    ) -> None:
        self._reranker = reranker
        self._skipped_reason = skipped_reason
        self._llm_config = llm_config
        self._agent_configs = dict(agent_configs or {})
        self._llm_rerankers = llm_rerankers or RerankerService()

    def llm_config_for(self, agent_id: str | None) -> RerankerConfiguration | None:
        """The LLM reranker configuration of this agent (its own, else the server's), if enabled."""
        config = self._agent_configs.get(agent_id or "", self._llm_config)
        return config if config is not None and config.enabled else None

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        return self.rerank(request.query, candidates, request)

    def rerank(self, query: str, candidates: tuple[Candidate, ...], request: RecallRequest) -> StageOutput:
        """Rerank ``candidates`` against ``query`` (the iterative stage reuses this for its cross-rerank)."""
        # relevance = (rerank score, else fused) x attribution_factor, whenever relevance is (re)set.
        unranked = tuple(
            candidate.revised(
                relevance_score=candidate.fused_score * candidate.attribution_factor,
                rerank_score=None,
            )
            for candidate in candidates
        )
        events: list[TraceEvent] = []
        config = self.llm_config_for(request.agent_id)
        if config is not None and request.llm is not None and candidates:
            reranked = self._llm_rerank(query, unranked, request, events, config)
            if reranked is not None:
                return StageOutput(reranked, tuple(events))
        if self._reranker is None:
            events.append(RerankSkipped(self._skipped_reason))
            return StageOutput(by_relevance(unranked), tuple(events))
        if not candidates:
            return StageOutput((), (*events, Reranked(self._reranker.name, 0)))
        try:
            scores = self._reranker.rerank(query, [candidate.memory.content for candidate in candidates])
        except RerankFailed as exc:
            events.append(RerankFellBack(self._reranker.name, str(exc), exc.transient))
            return StageOutput(by_relevance(unranked), tuple(events))
        except Exception as exc:  # a reranker bug must cost ranking quality, never the recall
            log.exception("reranker %s failed", self._reranker.name)
            events.append(RerankFellBack(self._reranker.name, short_reason(exc), False))
            return StageOutput(by_relevance(unranked), tuple(events))
        if len(scores) != len(candidates):
            reason = f"returned {len(scores)} scores for {len(candidates)} documents"
            events.append(RerankFellBack(self._reranker.name, reason, False))
            return StageOutput(by_relevance(unranked), tuple(events))
        reranked = tuple(
            candidate.revised(rerank_score=score, relevance_score=score * candidate.attribution_factor)
            for candidate, score in zip(unranked, scores, strict=True)
        )
        events.append(Reranked(self._reranker.name, len(reranked)))
        return StageOutput(by_relevance(reranked), tuple(events))

    def _llm_rerank(
        self,
        query: str,
        candidates: tuple[Candidate, ...],
        request: RecallRequest,
        events: list[TraceEvent],
        config: RerankerConfiguration,
    ) -> tuple[Candidate, ...] | None:
        assert request.llm is not None
        ordered = by_relevance(candidates)  # the LLM sees the best fused candidates first
        try:
            result = self._llm_rerankers.get(config.modelId).rerank(
                query, [candidate.memory.content for candidate in ordered], request.llm, config.topK
            )
        except ClientInputNeeded:
            raise  # the client answers in the next round
        except Exception as exc:  # a bug or surprise in the LLM path costs ranking quality, never the recall
            log.exception("LLM reranker failed")
            result = RerankServiceResult(
                (), False, 0.0, config.modelId or request.llm.name, error=short_reason(exc)
            )
        usage = result.usage
        events.append(
            LLMReranked(
                result.model,
                result.success,
                len(ordered),
                round(result.durationMs, 3),
                usage.promptTokens if usage else None,
                usage.completionTokens if usage else None,
                usage.cost if usage else None,
            )
        )
        if not result.success:
            fallback = self._reranker.name if self._reranker is not None else "fused scores"
            events.append(
                RerankFellBack(f"llm:{result.model}", f"{result.error}; fell back to {fallback}", False)
            )
            return None
        kept = []
        for candidate, score in zip(ordered, result.scores, strict=True):
            if score is None:  # beyond the LLM reranker's topK: only its top K keep a score
                continue
            if config.minScore is not None and score < config.minScore:
                continue
            kept.append(
                candidate.revised(rerank_score=score, relevance_score=score * candidate.attribution_factor)
            )
        return by_relevance(tuple(kept))
