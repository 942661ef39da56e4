"""Stage: cross-encoder (or Cohere) rerank. Relevance becomes the reranker's [0, 1] score; with no
reranker, or when it fails, relevance stays the fused score and the trace says why."""

from __future__ import annotations

import logging
from dataclasses import replace

from retrieval.model_files import short_reason
from retrieval.rerankers.base import Reranker, RerankFailed
from retrieval.trace import Reranked, RerankFellBack, RerankSkipped, StageOutput
from retrieval.types import Candidate, RecallRequest

log = logging.getLogger(__name__)


log = logging.getLogger(__name__)


def by_relevance(candidates: tuple[Candidate, ...]) -> tuple[Candidate, ...]:
    return tuple(sorted(candidates, key=lambda candidate: (-candidate.relevance_score, candidate.id)))


class RerankStage:
    name = "rerank"

    def __init__(self, reranker: Reranker | None, *, skipped_reason: str = "no reranker configured") -> None:
        self._reranker = reranker
        self._skipped_reason = skipped_reason

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        unranked = tuple(
            replace(candidate, relevance_score=candidate.fused_score) for candidate in candidates
        )
        if self._reranker is None:
            return StageOutput(by_relevance(unranked), (RerankSkipped(self._skipped_reason),))
        if not candidates:
            return StageOutput((), (Reranked(self._reranker.name, 0),))
        try:
            scores = self._reranker.rerank(
                request.query, [candidate.memory.content for candidate in candidates]
            )
        except RerankFailed as exc:
            event = RerankFellBack(self._reranker.name, str(exc), exc.transient)
            return StageOutput(by_relevance(unranked), (event,))
        except Exception as exc:  # a reranker bug must cost ranking quality, never the recall
            log.exception("reranker %s failed", self._reranker.name)
            event = RerankFellBack(self._reranker.name, short_reason(exc), False)
            return StageOutput(by_relevance(unranked), (event,))
        if len(scores) != len(candidates):
            reason = f"returned {len(scores)} scores for {len(candidates)} documents"
            return StageOutput(by_relevance(unranked), (RerankFellBack(self._reranker.name, reason, False),))
        reranked = tuple(
            replace(candidate, rerank_score=score, relevance_score=score)
            for candidate, score in zip(candidates, scores, strict=True)
        )
        return StageOutput(by_relevance(reranked), (Reranked(self._reranker.name, len(reranked)),))
