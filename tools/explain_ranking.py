"""explain_ranking: every candidate of a retrieval with its score at each stage, its unweighted and
weighted rank, whether it reached the context and why not, the backends and each stage's time.

It reads the trace the pipeline wrote at recall time; given a query instead of a retrieval id it runs
the pipeline once (recorded as an "explain" retrieval that report_outcome ignores) and reads that.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from retrieval.text import has_visible_text
from retrieval.trace import not_a_candidate, parse_trace, placement, ranks_without_feedback
from storage.records import PURGED_PREVIEW, RetrievalRecord, View
from tools.common import (
    Caller,
    Identifier,
    Runtime,
    ScopeArgs,
    Tag,
    ToolFailure,
    WithoutSecrets,
    iso,
    no_such_memory,
    view_for,
)
from tools.explain_models import FeedbackExplanation, FeedbackMove, StageScores
from tools.memory_views import LineageLink, lineage_links
from tools.recall import build_request, check_bounds
from writing.journal import record_retrieval


class ExplainRankingInput(ScopeArgs):
    retrieval_id: Identifier | None = Field(None, description="From recall.")
    query: Annotated[str, Field(min_length=1, max_length=100_000), WithoutSecrets] | None = Field(
        None, description="Instead: a query to run now."
    )
    memory_id: Identifier | None = Field(None, description="Only this memory.")
    # With query, as for recall:
    top_k: int | None = Field(None, ge=1, le=1_000)
    char_budget: int = Field(16_000, ge=1, le=10_000_000)
    tags: list[Tag] | None = Field(None, max_length=100)
    kinds: list[Literal["fact", "episode", "artifact"]] | None = None


class CandidateExplanation(BaseModel):
    id: str
    preview: str
    kind: str
    agent_id: str
    episode_id: str | None
    created_at: str
    protection_tier: str
    found_by: list[str]
    queries: list[str] = Field(
        default_factory=list, description="Which queries found it (iterative retrieval)."
    )
    source: str = Field("direct", description="direct match, or sibling brought by episode expansion")
    brought_by: str | None = Field(None, description="For a sibling: the memory whose episode brought it.")
    neighbourhood_of: str | None = Field(None, description="The direct match near it that lent it a score.")
    newer_value_of: str | None = Field(
        None,
        description="Not found by the search: joined as the newer value of this match, which it disputes, "
        "and scored as it.",
    )
    corroborating_agents: list[str] = Field(default_factory=list)
    cluster_canonical: str | None = Field(
        None, description="The canonical member of its near-duplicate cluster."
    )
    instruction_signals: list[str] = Field(
        default_factory=list,
        description="Why its text reads as instructions to the model (override, role-change, "
        "prompt-extraction, chat-markup, tool-call, exfiltration): shown as data, demoted by "
        "instruction_factor.",
    )
    scores: StageScores
    feedback: FeedbackExplanation = Field(default_factory=FeedbackExplanation)
    rank: int = Field(0, description="0-based place in the order recall ranked the candidates (final score).")
    unweighted_rank: int | None = Field(
        description="0-based rank at the feedback stage by relevance alone (the A/B log's; a sibling has none)."
    )
    weighted_rank: int | None = Field(
        description="0-based rank at the feedback stage after feedback weighting."
    )
    rank_delta: int | None = Field(
        description="Places feedback moved it in the final order: its rank there with this query's feedback "
        "weights taken out of the scores, less rank (> 0 if feedback lifted it; 0 without weighting)."
    )
    in_context: bool
    context_position: int | None = None
    reason: str
    contradicted_by: list[str] = Field(
        default_factory=list, description="Unresolved newer contradictions at recall time."
    )
    replaces: list[LineageLink] = Field(
        default_factory=list,
        description="Memories it replaced: who wrote them, when, and which resolver decided (read now).",
    )
    status_now: str | None = Field(None, description="Its status now, if it changed since the recall.")
    replaced_by_now: LineageLink | None = Field(
        None, description="What replaced it since the recall, if anything, and which resolver decided."
    )


class StageReport(BaseModel):
    stage: str
    elapsed_ms: float
    events: list[dict[str, Any]]


class ExplainRankingOutput(BaseModel):
    retrieval_id: str
    purpose: str
    query: str
    created_at: str
    session_id: str
    agent_id: str
    org_id: str
    project_id: str
    top_k: int
    char_budget: int
    weighting_enabled: bool
    gated: str | None = Field(None, description="Why the gate skipped retrieval, when it did.")
    window: dict[str, str | None] | None = Field(None, description="Time window searched: {since, until}.")
    filters: dict[str, Any] | None = Field(None, description="Tags and kinds searched within.")
    backends: dict[str, str]
    stages: list[StageReport]
    candidates: list[CandidateExplanation]
    notes: list[str]


def explain_ranking(args: ExplainRankingInput, runtime: Runtime, caller: Caller) -> ExplainRankingOutput:
    if (args.retrieval_id is None) == (args.query is None):
        raise ToolFailure(
            "pass exactly one of retrieval_id (from a recall result) or query (to run and explain a recall now)"
        )
    view = view_for(args, runtime, caller)
    scope = view.home
    if args.retrieval_id is not None:
        record = runtime.store.get_retrieval(args.retrieval_id, scope)
        if record is None:
            raise ToolFailure(
                f"no retrieval {args.retrieval_id!r} in org {scope.org_id!r} / project {scope.project_id!r} "
                "(recalls are kept for MEMORIA_JOURNAL_RETENTION_DAYS): pass a retrieval_id returned by recall, "
                "with the org_id and project_id that recall was given, or pass query instead"
            )
        check_visible(record, view, runtime)
    else:
        assert args.query is not None
        if not has_visible_text(args.query):
            raise ToolFailure(
                "query is empty, or white space, control or blank characters only: describe what you need to know"
            )
        top_k = check_bounds(runtime, args.query, args.top_k, args.char_budget)
        request = build_request(
            runtime,
            scope,
            args.query,
            top_k,
            args.char_budget,
            args.kinds,
            args.tags,
            caller.llm,
            agent_id=caller.agent_id,
            viewer=view.viewer,
        )
        with runtime.store.one_version():
            result = runtime.pipeline.run(request)
        record, _ = record_retrieval(
            runtime.store,
            runtime.clock,
            request,
            result,
            session_id=caller.session_id,
            agent_id=caller.agent_id,
            purpose="explain",
        )
    return _explain(record, args.memory_id, runtime, view)


def check_visible(record: RetrievalRecord, view: View, runtime: Runtime) -> None:
    """Another agent's retrieval is explained only if it holds no memory private to that agent (or its
    session): its trace quotes every candidate."""
    ids = [entry["id"] for entry in parse_trace(record.trace_json)["candidates"]]
    hidden = runtime.store.hidden_from(ids, view)
    if hidden:
        raise ToolFailure(
            f"retrieval {record.retrieval_id!r} was made by another agent or session and is not shown to this "
            "caller: pass query instead to explain a recall of your own"
        )


def _explain(
    record: RetrievalRecord, memory_id: str | None, runtime: Runtime, view: View
) -> ExplainRankingOutput:
    trace = parse_trace(record.trace_json)
    without = ranks_without_feedback(trace["candidates"], bool(trace["weighting_enabled"]))
    candidates = [_candidate(entry, rank, without[rank]) for rank, entry in enumerate(trace["candidates"])]
    notes: list[str] = []
    if memory_id is not None:
        candidates = [candidate for candidate in candidates if candidate.id == memory_id]
        if not candidates:
            memory = runtime.store.get_memory(memory_id, view)
            if memory is None:
                raise no_such_memory(memory_id, record.org_id, record.project_id)
            notes.append(not_a_candidate(memory, record.created_at, trace, runtime.models.embedder.name))
    candidates = _with_lineage(candidates, runtime, view)
    return ExplainRankingOutput(
        retrieval_id=record.retrieval_id,
        purpose=record.purpose,
        query=record.query,
        created_at=iso(record.created_at),
        session_id=record.session_id,
        agent_id=record.agent_id,
        org_id=record.org_id,
        project_id=record.project_id,
        top_k=record.top_k,
        char_budget=record.char_budget,
        weighting_enabled=bool(trace["weighting_enabled"]),
        gated=trace.get("gated"),
        window=trace.get("window"),
        filters=trace.get("filters"),
        backends=dict(trace["backends"]),
        stages=[
            StageReport(stage=s["name"], elapsed_ms=s["elapsed_ms"], events=s["events"])
            for s in trace["stages"]
        ],
        candidates=candidates,
        notes=notes,
    )


def _with_lineage(
    candidates: list[CandidateExplanation], runtime: Runtime, scope: View
) -> list[CandidateExplanation]:
    """Lineage is history, not ranking: read it now, next to what the recall recorded."""
    ids = [candidate.id for candidate in candidates]
    now = runtime.store.get_memories(ids, scope)
    links = lineage_links(runtime.store, scope, ids)
    updated = []
    for candidate in candidates:
        memory = now.get(candidate.id)
        changed = memory is not None and memory.status != "active"
        purged = memory is not None and memory.status == "purged"
        updated.append(
            candidate.model_copy(
                update={
                    "replaces": links.replaces.get(candidate.id, []),
                    "status_now": memory.status if changed and memory else None,
                    "replaced_by_now": links.replaced_by.get(candidate.id) if changed else None,
                    # Purged since: what the trace quotes of it is erased (or about to be) from the store.
                    **({"preview": PURGED_PREVIEW} if purged else {}),
                }
            )
        )
    return updated


def _candidate(entry: dict[str, Any], rank: int, rank_without_feedback: int) -> CandidateExplanation:
    feedback = entry.get("feedback", {})
    # The trace's fields under the explanation's names, then those the explanation builds itself.
    built = {"scores", "feedback", "rank_delta", "reason", "brought_by"}
    kept = {
        name: entry[name] for name in CandidateExplanation.model_fields if name in entry and name not in built
    }
    return CandidateExplanation(
        **kept,
        rank=rank,
        brought_by=entry.get("sibling_of"),
        scores=StageScores(**entry["scores"]),
        feedback=FeedbackExplanation(
            reports=feedback.get("reports", 0),
            far=feedback.get("far", 0),
            set_apart=feedback.get("set_apart", 0),
            moves=[FeedbackMove(**step) for step in feedback.get("steps", [])],
        ),
        rank_delta=rank_without_feedback - rank,
        reason=placement(entry),
    )


async def handle(args: ExplainRankingInput, runtime: Runtime, caller: Caller) -> ExplainRankingOutput:
    return await runtime.lanes.run("read", explain_ranking, args, runtime, caller)
