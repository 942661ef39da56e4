"""The recall trace: typed events each stage emits, and the record ``explain_ranking`` reads back.

The pipeline writes this at recall time; explain never recomputes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from retrieval.types import Candidate
from storage.records import MemoryRecord, TimeWindow
from storage.search_filter import tag_filter

PREVIEW_CHARS = 160


@dataclass(frozen=True)
class SearchLegRan:
    leg: str
    backend: str
    hits: int
    limit: int


@dataclass(frozen=True)
class QueryEmbeddedWithoutAgents:
    agents: tuple[str, ...]  # authors of full-text hits that the query names
    embedded: str  # what the vector leg embedded instead of the query


@dataclass(frozen=True)
class SearchLegSkipped:
    leg: str
    reason: str


@dataclass(frozen=True)
class CandidatesFused:
    method: str
    vector_weight: float
    fulltext_weight: float
    union: int
    kept: int
    # What a BM25 score was divided by: for ranking always the best score found; for the relevance floor
    # "full match" (the score of a memory matching every query term: absolute relevance) or "best match"
    # (where the index keeps no term statistics, the floor reads the ranking score).
    fulltext_normalised_by: str = "best match"
    floor_normalised_by: str = "best match"
    # c: the share of the vector weight given to a memory's context cosine (0: its own cosine alone).
    context_share: float = 0.0


@dataclass(frozen=True)
class Reranked:
    backend: str
    candidates: int


@dataclass(frozen=True)
class RerankSkipped:
    reason: str


@dataclass(frozen=True)
class RerankFellBack:
    backend: str
    reason: str
    transient: bool


@dataclass(frozen=True)
class AuthorsNamed:
    agents: tuple[str, ...]  # agents the query names that wrote some of the candidates
    discount: float
    discounted: int  # candidates by other agents whose relevance was discounted


@dataclass(frozen=True)
class InstructionsFlagged:
    flagged: tuple[tuple[str, tuple[str, ...]], ...]  # (memory id, the signals it matched)
    factor: float  # what a flagged memory keeps of its relevance (1.0: flagged only)


@dataclass(frozen=True)
class DecayApplied:
    half_lives: dict[str, float]  # days per protection tier that fades
    decayed: int  # candidates whose score it lowered


@dataclass(frozen=True)
class FeedbackApplied:
    weighting_enabled: bool
    reordered: int


@dataclass(frozen=True)
class GateDecided:
    retrieve: bool
    method: str  # "local" | "llm" | "off"
    reason: str


@dataclass(frozen=True)
class BelowThreshold:
    memory_id: str
    score: float
    threshold: float


@dataclass(frozen=True)
class FloorApplied:
    floor: float  # the relevance floor: below it a candidate never enters the context
    dropped: int


@dataclass(frozen=True)
class IterationSkipped:
    reason: str


@dataclass(frozen=True)
class SufficiencyJudged:
    iteration: int
    sufficient: bool
    confidence: float
    threshold: float
    sub_queries: tuple[str, ...]
    model: str


@dataclass(frozen=True)
class SubQueryRan:
    iteration: int
    query: str
    hits: int
    new_candidates: int


@dataclass(frozen=True)
class CrossReranked:
    method: str
    candidates: int


@dataclass(frozen=True)
class LLMReranked:
    model: str
    success: bool
    candidates: int
    duration_ms: float
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None


@dataclass(frozen=True)
class LLMPassRan:
    """An LLM pass at assembly (retrieval.stages.llm_passes): whether its answer was applied, what it left out
    (memory ids), and why it was not applied when it was not."""

    llm_pass: str  # context_selection, fact_selection, cleanup
    model: str | None
    applied: bool
    dropped: tuple[str, ...]
    reason: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None


@dataclass(frozen=True)
class CorroborationApplied:
    boosted: int
    clusters: int


@dataclass(frozen=True)
class SiblingsAdded:
    sources: int
    siblings: int
    alpha: float


@dataclass(frozen=True)
class NeighbourhoodApplied:
    weight: float  # the share of a neighbouring direct match's score a memory is lent
    turns: int  # how many turns away, either side, a neighbour may be
    episodes: int  # episodes whose order was read
    supported: int  # candidates lent a bonus


@dataclass(frozen=True)
class AnswerTypeApplied:
    answer_type: str | None  # what the question asks for: time, place, host, quantity; None: none of them
    weight: float  # the share of its weighted score a match stating it is lent
    matched: int  # matches lent it


@dataclass(frozen=True)
class ContradictionsMarked:
    marked: int
    joined: int = 0  # newer values of disputed matches the search did not find, joined as candidates


@dataclass(frozen=True)
class StageSkipped:
    reason: str


@dataclass(frozen=True)
class LeftOut:
    memory_id: str
    reason: str


@dataclass(frozen=True)
class ContextAssembled:
    included: int
    chars: int
    char_budget: int
    folded: int = 0  # near-duplicates of placed memories, left out without taking a slot
    filler: int = 0  # direct matches left out as filler beside the best match
    share_of_best: float = 0.0  # the share of the best match under which a memory is filler (0: none)


TraceEvent = (
    GateDecided
    | BelowThreshold
    | FloorApplied
    | IterationSkipped
    | SufficiencyJudged
    | SubQueryRan
    | CrossReranked
    | LLMReranked
    | LLMPassRan
    | CorroborationApplied
    | DecayApplied
    | SiblingsAdded
    | NeighbourhoodApplied
    | AnswerTypeApplied
    | ContradictionsMarked
    | StageSkipped
    | SearchLegRan
    | QueryEmbeddedWithoutAgents
    | SearchLegSkipped
    | CandidatesFused
    | Reranked
    | RerankSkipped
    | RerankFellBack
    | AuthorsNamed
    | InstructionsFlagged
    | FeedbackApplied
    | LeftOut
    | ContextAssembled
)


@dataclass(frozen=True)
class StageOutput:
    """What a stage hands on: the candidates in their new order, what it did, and (assembly) the context."""

    candidates: tuple[Candidate, ...]
    events: tuple[TraceEvent, ...] = ()
    context: str | None = None
    # Set by a stage that ends the recall early (the gate): later stages are recorded as skipped.
    halt: str | None = None


@dataclass(frozen=True)
class StageRecord:
    name: str
    elapsed_ms: float
    events: tuple[TraceEvent, ...]


@dataclass(frozen=True)
class RecallTrace:
    """Everything one recall did, stage by stage, and where each candidate ended up."""

    retrieval_id: str
    query: str
    backends: dict[str, str]
    weighting_enabled: bool
    top_k: int
    char_budget: int
    stages: tuple[StageRecord, ...]
    candidates: tuple[Candidate, ...]
    gated: str | None = None  # why the gate skipped retrieval, when it did
    window: TimeWindow | None = None  # the time window searched (since/until, resolved), if any
    window_from: str | None = None  # where it came from (since/until, the query's words), or why none
    filters: dict[str, Any] | None = None  # the tags (and whether all of them) and kinds searched within

    @property
    def relevance_floor(self) -> float | None:
        """The floor the relevance-floor stage applied, if it ran."""
        for stage in self.stages:
            for event in stage.events:
                if isinstance(event, FloorApplied):
                    return event.floor
        return None

    def to_json(self) -> str:
        """The trace as the retrieval record keeps it. orjson: every recall writes one (about 100 KB for
        60 candidates), and the standard encoder took a tenth of a loaded server's interpreter time."""
        return dump_trace(
            {
                "retrieval_id": self.retrieval_id,
                "query": self.query,
                "backends": self.backends,
                "weighting_enabled": self.weighting_enabled,
                "top_k": self.top_k,
                "char_budget": self.char_budget,
                "gated": self.gated,
                "window": window_to_dict(self.window, self.window_from),
                "filters": self.filters,
                "stages": [
                    {
                        "name": stage.name,
                        "elapsed_ms": round(stage.elapsed_ms, 3),
                        "events": [event_to_dict(event) for event in stage.events],
                    }
                    for stage in self.stages
                ],
                "candidates": [candidate_to_dict(candidate) for candidate in self.candidates],
            }
        )


def dump_trace(payload: Mapping[str, Any]) -> str:
    """A trace (or any JSON document of the journal) as text; numpy scalars as numbers, NaN as null."""
    return orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def parse_trace(text: str) -> dict[str, Any]:
    """A retrieval record's trace, read back (``RecallTrace.to_json``'s document). Records written by the
    standard encoder before 2026-11-29 may hold NaN or Infinity, which only it reads."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("a retrieval trace is a JSON object")
    return value


def window_to_dict(window: TimeWindow | None, source: str | None = None) -> dict[str, str | None] | None:
    """A time window as ISO-8601 UTC moments (``until`` exclusive) and where it came from; None when the
    recall had none and nothing was said about one."""
    if window is None:
        return None if source is None else {"since": None, "until": None, "from": source}

    def iso(moment: datetime | None) -> str | None:  # to the second: "past 7 days" reads without microseconds
        return None if moment is None else _utc_iso(moment, "seconds")

    return {"since": iso(window.since), "until": iso(window.until), "from": source}


def _utc_iso(moment: datetime, timespec: str = "auto") -> str:
    return moment.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def floor_compared(candidate: Candidate) -> float | None:
    """What the relevance floor compared for a direct match: its floor score before the instruction stage
    (which runs after the floor) scaled it, from the scores that make it (so a demotion to 0 hides nothing);
    None for an episode sibling, which the floor never reads."""
    if candidate.source != "direct":
        return None
    rerank = candidate.rerank_score
    relevance = (rerank if rerank is not None else candidate.fused_score) * candidate.attribution_factor
    return relevance * candidate.absolute_share


def event_to_dict(event: TraceEvent) -> dict[str, Any]:
    """An event as the trace keeps it: its name and its fields. Nested records (a candidate's id list, a
    window) stay as they are: orjson writes a dataclass as ``asdict`` would, without copying it first (a
    recall writes some 17 events; ``asdict``'s deep copy was a fifth of the trace's cost)."""
    return {"event": type(event).__name__, **vars(event)}


def candidate_to_dict(candidate: Candidate) -> dict[str, Any]:
    memory = candidate.memory
    return {
        "id": memory.id,
        "kind": memory.kind,
        "agent_id": memory.agent_id,
        "session_id": memory.session_id,
        "episode_id": memory.episode_id,
        "created_at": memory.created_at.isoformat(),
        "protection_tier": memory.protection_tier,
        "status": memory.status,
        "preview": memory.content[:PREVIEW_CHARS],
        "found_by": list(candidate.found_by),
        "queries": list(candidate.queries),
        "source": candidate.source,
        "sibling_of": candidate.sibling_of,
        "newer_value_of": candidate.newer_value_of,
        "corroborating_agents": list(candidate.corroborating_agents),
        "contradicted_by": list(candidate.contradicted_by),
        "cluster_canonical": candidate.cluster_canonical,
        "instruction_signals": list(candidate.instruction_signals),
        "scores": {
            "vector": candidate.vector_score,
            "context": candidate.context_score,
            "fulltext": candidate.fulltext_score,
            "fused": candidate.fused_score,
            "fused_absolute": candidate.fused_absolute,
            "rerank": candidate.rerank_score,
            "attribution": candidate.attribution_factor,
            "instruction_factor": candidate.instruction_factor,
            "relevance": candidate.relevance_score,
            "floor": floor_compared(candidate),
            "corroboration_boost": candidate.corroboration_boost,
            "decay": candidate.decay_factor,
            "feedback_weight": candidate.feedback_weight,
            "global_weight": candidate.global_weight,
            "neighbourhood": candidate.neighbourhood_bonus,
            "answer_type": candidate.answer_type_bonus,
            "final": candidate.final_score,
        },
        "neighbourhood_of": candidate.neighbourhood_of,
        "feedback": {
            "reports": candidate.feedback_reports,
            "far": candidate.feedback_far,
            "set_apart": candidate.feedback_set_apart,
            "steps": [
                {
                    "session_id": step.session_id,
                    "role": step.role,
                    "outcome_score": step.outcome_score,
                    "share": round(step.share, 6),
                    "closeness": round(step.closeness, 6),
                    "weight_before": round(step.weight_before, 6),
                    "weight_after": round(step.weight_after, 6),
                }
                for step in candidate.feedback_steps
            ],
        },
        "unweighted_rank": candidate.unweighted_rank,
        "weighted_rank": candidate.weighted_rank,
        "in_context": candidate.in_context,
        "context_position": candidate.context_position,
        "shown_chars": candidate.shown_chars,
        "exclusion_reason": candidate.exclusion_reason,
    }


def lent_after_weighting(scores: Mapping[str, Any]) -> float:
    """What a traced candidate's final score holds beyond its weighted score: what its episode neighbours
    and its answer type lent it."""
    return float(scores.get("neighbourhood") or 0.0) + float(scores.get("answer_type") or 0.0)


def ranks_without_feedback(entries: Sequence[Mapping[str, Any]], weighting_enabled: bool) -> list[int]:
    """Each traced candidate's 0-based place in the final order (the order of ``entries``) had this query's
    feedback weights been 1, read from the trace's scores: a direct match's weighted score and what the
    answer type lent in proportion to it divided by its weight; what an episode neighbour lent divided by the
    ``min(1, weight)`` it was scaled by and by the lender's weight; an episode sibling's score divided by its
    ``min(1, weight)`` and moved as its source's was (it is ``alpha x`` the source's final). A sibling's or
    a loan's cap at its source's score is not replayed. The feedback stage's own ranks come before episode
    expansion, the neighbours and the answer type, which can undo or reverse what the weights did (a trial
    found explain_ranking saying "feedback moved it up 1" of three memories the weights had each moved down
    in the order recall returned). Without weighting, the order itself."""
    if not weighting_enabled:
        return list(range(len(entries)))
    weights = {entry.get("id"): _weight(entry) for entry in entries}
    unweighted: dict[int, float] = {}

    def replayed(entry: Mapping[str, Any], ratio: float) -> float:
        scores = entry.get("scores") or {}
        final, weight = float(scores.get("final") or 0.0), _weight(entry)
        lent = float(scores.get("neighbourhood") or 0.0)
        lender = weights.get(entry.get("neighbourhood_of"), 1.0)
        own = weight if entry.get("source") != "sibling" else min(1.0, weight)
        if own == 1.0 and lender == 1.0 and ratio == 1.0:
            return final  # nothing to take out: the same float, so an exact tie stays one
        return (final - lent) / own * ratio + lent / min(1.0, weight) / lender

    finals = {entry.get("id"): float((entry.get("scores") or {}).get("final") or 0.0) for entry in entries}
    for index, entry in enumerate(entries):
        if entry.get("source") != "sibling":
            unweighted[index] = replayed(entry, 1.0)
    by_id = {entries[index].get("id"): score for index, score in unweighted.items()}
    for index, entry in enumerate(entries):
        if entry.get("source") == "sibling":
            source = entry.get("sibling_of")
            ratio = by_id[source] / finals[source] if source in by_id and finals.get(source) else 1.0
            unweighted[index] = replayed(entry, ratio)
    order = sorted(range(len(entries)), key=lambda index: (-unweighted[index], index))
    places = [0] * len(entries)
    for place, index in enumerate(order):
        places[index] = place
    return places


def _weight(entry: Mapping[str, Any]) -> float:
    weight = (entry.get("scores") or {}).get("feedback_weight")
    return float(weight) if weight else 1.0


def placement(entry: dict[str, Any]) -> str:
    """Where a traced candidate ended up, in words: its place in the context or why it was left out, and
    what else the trace says of it (a sibling's episode, text that reads as instructions)."""
    if entry["in_context"]:
        reason = f"in the context at position [{entry.get('context_position')}]"
        if entry.get("shown_chars") is not None:
            reason += f", cut to the first {entry['shown_chars']:,} characters of its text for char_budget"
    else:
        reason = entry["exclusion_reason"] or "not placed in the context"
    if entry.get("source") == "sibling":
        reason += f"; a sibling from the episode of {entry.get('sibling_of')}"
    if entry.get("neighbourhood_of"):
        reason += f"; lifted by its episode neighbour {entry['neighbourhood_of']}"
    if entry.get("newer_value_of"):
        reason += (
            f"; not found by the search: joined as the newer value of {entry['newer_value_of']}, which it"
            " disputes, and scored as it"
        )
    if (entry.get("scores") or {}).get("answer_type"):
        reason += (
            "; lifted for stating the kind of answer the question asks for (a time, place, host or quantity)"
        )
    if entry.get("instruction_signals"):
        reason += "; reads as instructions to the model (" + ", ".join(entry["instruction_signals"]) + ")"
    return reason


def not_a_candidate(memory: MemoryRecord, recalled_at: datetime, trace: dict[str, Any], embedder: str) -> str:
    """Why ``memory`` is not among a traced recall's candidates: past its expiry, not active, stored later,
    outside the recall's time window or filters, found but below the relevance floor, or ranked below both
    search legs' limits (only full-text search when another embedder made its vector)."""
    expires = memory.expires_at
    # Expired before the recall: still active until a maintenance round retracts it, or retracted by it.
    if (
        expires is not None
        and expires <= recalled_at
        and (memory.status == "active" or expires <= memory.updated_at)
    ):
        which = (
            "an ephemeral memory that" if memory.protection_tier == "ephemeral" else "a memory whose expiry"
        )
        return (
            f"{memory.id} is {which} expired at {_utc_iso(expires, 'seconds')}, before this retrieval "
            "ran: recall leaves out memories past their expiry"
        )
    if memory.status != "active":
        return f"{memory.id} is {memory.status}: only active memories are searched"
    if memory.created_at > recalled_at:
        return f"{memory.id} was stored after this retrieval ran"
    left_out = _outside(memory, trace)  # a trial was told the searches ranked it too low
    if left_out:
        return left_out
    events = [event for stage in trace["stages"] for event in stage["events"]]
    for event in events:
        if event.get("event") == "BelowThreshold" and event.get("memory_id") == memory.id:
            return (  # the floor's scale, not the relevance (a trial read one number under both names)
                f'{memory.id} was found by the search, but its match to the query ("matches the query at"), '
                f"{float(event['score']):.3f}, is below the relevance floor ({float(event['threshold']):g}): "
                "a memory below it never enters the context. Ask in words closer to the memory's, or lower "
                "the floor (the MEMORIA_MIN_FACT_SCORE setting)"
            )
    limits = [event["limit"] for event in events if event.get("event") == "SearchLegRan"]
    within = f"within its top {limits[0]}" if limits else "high enough"
    note = f"{memory.id} was not among the candidates: neither the vector nor the full-text search ranked it {within}"
    if memory.embedder != embedder:
        note += f" (its vector was made by {memory.embedder}, not {embedder}, so only full-text search can find it)"
    return note


def _outside(memory: MemoryRecord, trace: dict[str, Any]) -> str | None:
    """Why the recall's time window or its kinds and tags left ``memory`` out of the search, if they did."""
    window = trace.get("window") or {}
    dated = _utc_iso(memory.created_at, "seconds")
    since, until = window.get("since"), window.get("until")
    if since and memory.created_at < datetime.fromisoformat(since):
        return f"{memory.id} is dated {dated}, before the time window this retrieval searched (from {since})"
    if until and memory.created_at >= datetime.fromisoformat(until):
        return f"{memory.id} is dated {dated}, after the time window this retrieval searched (until {until})"
    filters = trace.get("filters") or {}
    kinds = filters.get("kinds") or []
    if kinds and memory.kind not in kinds:
        article = "an" if memory.kind[0] in "aeiou" else "a"
        return f"{memory.id} is {article} {memory.kind}: this retrieval searched only {', '.join(kinds)}"
    wanted = list(filters.get("tags") or [])
    tagged = tag_filter(wanted, bool(filters.get("tags_all")))  # as the search read them, in any case
    if tagged is not None and not tagged(memory):
        said = f"tagged {', '.join(memory.tags)}" if memory.tags else "untagged"
        need = "" if len(wanted) == 1 else "all of " if filters.get("tags_all") else "one of "
        return (
            f"{memory.id} is {said}: this retrieval searched only memories tagged {need}{', '.join(wanted)}"
        )
    return None
