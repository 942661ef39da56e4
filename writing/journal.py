"""The journal of retrievals: what each recall and explanation did (the record ``explain_ranking`` and
``report_outcome`` read) and the A/B rows of a recall (the Feedback Impact view's), written after the
pipeline ran. Losing either never fails the recall: the caller is told instead."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol

from retrieval.types import RecallRequest
from storage.records import AbLogRow, RetrievalRecord

if TYPE_CHECKING:
    from retrieval.pipeline import RecallResult

log = logging.getLogger(__name__)


class RetrievalJournal(Protocol):
    """Where retrievals and A/B rows are kept (the store)."""

    def record_retrieval(self, record: RetrievalRecord, quoted: Iterable[str] | None = None) -> None: ...

    def log_ab_rows(self, rows: Sequence[AbLogRow]) -> None: ...


def record_retrieval(
    store: RetrievalJournal,
    clock: Callable[[], datetime],
    request: RecallRequest,
    result: RecallResult,
    *,
    session_id: str,
    agent_id: str,
    purpose: Literal["recall", "explain"],
    ab_log: bool = True,
) -> tuple[RetrievalRecord, list[str]]:
    """Persist what the recall did (for explain and outcomes) and, for a recall unless ``ab_log`` is off,
    the A/B rows (``ab_rows``); returns the record and warnings for the caller."""
    warnings = []
    now = request.now or clock()  # the recall's one instant
    record = RetrievalRecord(
        retrieval_id=request.retrieval_id,
        org_id=request.scope.org_id,
        project_id=request.scope.project_id,
        session_id=session_id,
        agent_id=agent_id,
        query=request.query,
        purpose=purpose,
        created_at=now,
        top_k=request.top_k,
        char_budget=request.char_budget,
        context_ids=tuple(candidate.id for candidate in result.in_context),
        trace_json=result.trace.to_json(),
    )
    try:
        # The memories its trace quotes, so that the append need not parse the trace to mask a purge.
        store.record_retrieval(record, quoted=[candidate.memory.id for candidate in result.trace.candidates])
    except Exception as exc:
        log.error("could not record retrieval %s: %s", request.retrieval_id, exc)
        warnings.append(
            f"this retrieval could not be recorded ({type(exc).__name__}), so explain_ranking and "
            "report_outcome will not know it"
        )
    if purpose == "recall" and ab_log:
        try:
            store.log_ab_rows(ab_rows(request, result, session_id=session_id, at=now))
        except Exception as exc:  # A/B logging is best effort: a lost row never fails the recall
            log.warning("A/B log for retrieval %s not written: %s", request.retrieval_id, exc)
    return record, warnings


def ab_rows(request: RecallRequest, result: RecallResult, *, session_id: str, at: datetime) -> list[AbLogRow]:
    """One A/B row per candidate, episode siblings included (no ranks: they are not ranked):
    ``relevance_score`` the raw relevance, the vector similarity when the vector leg found the
    memory, else its keyword (BM25) score (``relevance_kind``); what feedback multiplied (relevance after
    rerank, attribution and instruction factors, plus the corroboration boost, times decay) in
    ``boosted_score``, and the reranker's score in ``rerank_score``."""
    rows = []
    for candidate in result.candidates:
        if candidate.vector_score is not None:
            raw, kind = candidate.vector_score, "vector"
        elif candidate.fulltext_score is not None:
            raw, kind = candidate.fulltext_score, "keyword"
        else:
            raw, kind = 0.0, "none"
        rows.append(
            AbLogRow(
                retrieval_id=request.retrieval_id,
                session_id=session_id,
                org_id=request.scope.org_id,
                project_id=request.scope.project_id,
                query_text=request.query,
                observation_id=candidate.id,
                relevance_score=raw,
                relevance_kind=kind,
                boosted_score=candidate.boosted_score,
                rerank_score=candidate.rerank_score,
                feedback_weight=candidate.global_weight,
                context_weight=candidate.feedback_weight,
                weighted_score=candidate.weighted_score,
                unweighted_rank=candidate.unweighted_rank,
                weighted_rank=candidate.weighted_rank,
                weighting_enabled=request.weighting_enabled,
                # A direct match an episode lifted is shown as a sibling but was ranked: logged as direct. A
                # newer value joined for a match was not ranked either (``contradiction_marks``).
                source="direct"
                if candidate.weighted_rank is not None
                else "newer_value"
                if candidate.newer_value_of
                else "sibling",
                created_at=at,
            )
        )
    return rows
