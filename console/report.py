"""The data of ``memoria report``: what feedback did to rankings, where beliefs drift, which memories
several agents corroborate, and how the store's tables are doing, for one scope. ``console.report_page``
renders it as a self-contained HTML page."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from storage import inspection
from storage.records import PURGED_PREVIEW, SHARED_ONLY, AbLogRow, MemoryRecord, Scope, View, WeightEvent
from storage.stats import scope_stats
from tools.common import AggregationView, Caller, Progress, Runtime, aggregation_view, iso, no_progress
from tools.drift import DriftInput, DriftOutput, drift
from tools.memory_views import PREVIEW_CHARS

DRIFT_LIMIT = 50  # contradiction pairs and changes shown
CLUSTER_LIMIT = 30  # clusters shown with their members (all are counted)
# The report reads as no agent at all: it shows the shared memories of the scope and its org's shelf,
# never one private to an agent or a session.
REPORT_CALLER = Caller(SHARED_ONLY.agent_id, SHARED_ONLY.session_id)


def report_view(scope: Scope) -> View:
    """What the report may show: the shared memories of ``scope`` and its org's shelf."""
    return View(scope, SHARED_ONLY)


class RankPoint(BaseModel):
    """Candidates that had these two ranks (0-based), counted: the points of the rank scatter."""

    unweighted_rank: int
    weighted_rank: int
    count: int


class DeltaCount(BaseModel):
    delta: int = Field(description="unweighted_rank - weighted_rank: > 0 means feedback lifted it.")
    count: int


class MovedMemory(BaseModel):
    """A memory's rank deltas over the analysed retrievals."""

    id: str
    preview: str
    status: str | None = Field(description="Its status now; null if it is no longer in the store.")
    weight: float | None = Field(description="Its global feedback weight now (every report, any query).")
    applied_weight: float = Field(
        description="The mean weight feedback applied to it in the analysed recalls (its weight for each query)."
    )
    appearances: int = Field(description="Analysed retrievals it was a candidate in.")
    lifted: int = Field(description="Retrievals where weighting ranked it higher.")
    lowered: int = Field(description="Retrievals where weighting ranked it lower.")
    total_abs_delta: int
    mean_delta: float


class WeightPoint(BaseModel):
    at: str
    weight: float
    session_id: str | None = Field(description="The session whose report moved it; null for the start.")


class WeightHistory(BaseModel):
    id: str
    preview: str
    status: str | None
    movement: float = Field(description="Sum of |weight_after - weight_before| over its events.")
    points: list[WeightPoint] = Field(description="Starts at 1.0 when the memory was stored.")


class FeedbackImpact(BaseModel):
    retrievals_requested: int
    retrievals: int = Field(description="Recalls analysed (the newest ones in the scope).")
    first_at: str | None
    last_at: str | None
    candidates: int = Field(description="A/B rows: one per ranked candidate per retrieval.")
    weighting_disabled_retrievals: int = Field(description="Recalls the org's flag left unweighted.")
    moved_candidates: int = Field(description="Candidates whose weighted rank differs from the unweighted.")
    retrievals_reordered: int = Field(description="Retrievals where weighting changed any rank.")
    retrievals_top_k_changed: int = Field(
        description="Retrievals whose top_k set of memories differs between the two rankings."
    )
    retrievals_without_top_k: int = Field(
        description="Retrievals whose record (and so top_k) is missing: left out of the top-k count."
    )
    mean_abs_delta: float = Field(description="Mean |unweighted_rank - weighted_rank| over the candidates.")
    global_retrievals_top_k_changed: int = Field(
        description="Retrievals whose top_k set the global weights (the baseline, every report whatever the "
        "query) would have changed."
    )
    global_moved_candidates: int = Field(
        description="Candidates the global weights would have moved, against the weights for each query."
    )
    delta_histogram: list[DeltaCount] = Field(description="Every delta that occurs, ascending.")
    rank_points: list[RankPoint]
    most_moved: list[MovedMemory] = Field(description="By total |delta|, largest first.")
    weight_events: int = Field(description="Weight changes recorded in the scope (all time).")
    memories_with_weight_events: int
    weight_histories: list[WeightHistory] = Field(description="The memories whose weight moved most.")
    min_weight: float
    max_weight: float


class ClusterMemberView(BaseModel):
    id: str
    agent_id: str
    weight: float
    preview: str
    canonical: bool


class ClusterView(BaseModel):
    canonical_id: str
    size: int = Field(description="Near-duplicate memories in the cluster.")
    agents: list[str] = Field(description="The canonical's author first, then the corroborating agents.")
    corroboration_score: int
    boost: float = Field(description="log2(1 + corroboration_score) x 0.1, at most 0.3.")
    members: list[ClusterMemberView]


class CorroborationSection(BaseModel):
    aggregation: AggregationView | None = Field(None, description="The scope's last aggregation pass.")
    clusters: int
    corroborated: int = Field(description="Clusters with at least one corroborating agent.")
    memories_in_clusters: int
    shown: list[ClusterView] = Field(description="The biggest clusters, most corroborated first.")


class IndexView(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    name: str
    index_type: str
    columns: list[str]
    indexed_rows: int
    unindexed_rows: int


class TableView(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    name: str
    rows: int
    fragments: int
    small_fragments: int
    version: int
    data_bytes: int
    disk_bytes: int | None
    indexes: list[IndexView]


class HealthSection(BaseModel):
    schema_version: int
    vector_dim: int
    disk_bytes: int | None = Field(description="The whole store folder; null when the store is not local.")
    tables: list[TableView]
    memories: int = Field(description="Memories in the scope, every status.")
    by_status: dict[str, int]
    by_kind: dict[str, int] = Field(description="Active memories by kind.")
    by_tier: dict[str, int] = Field(description="Active memories by protection tier.")
    by_embedder: dict[str, int]
    elsewhere: list[str] = Field(
        default_factory=list,
        description="When this scope holds no memory: the scopes (org/project) that hold active ones.",
    )


class ReportData(BaseModel):
    generated_at: str
    store_uri: str
    org_id: str
    project_id: str
    backends: dict[str, str]
    feedback: FeedbackImpact
    drift: DriftOutput
    corroboration: CorroborationSection
    health: HealthSection


def build_report(
    runtime: Runtime,
    scope: Scope,
    *,
    retrievals: int = 200,
    most_moved: int = 8,
    progress: Progress = no_progress,
) -> ReportData:
    """Read everything the report shows for ``scope``, bounded by ``retrievals`` recent recalls."""
    if retrievals < 1:
        raise ValueError(f"retrievals must be >= 1, but got {retrievals}")
    if most_moved < 1:
        raise ValueError(f"most_moved must be >= 1, but got {most_moved}")
    steps = ("feedback impact", "drift", "corroboration clusters", "store health")
    store = runtime.store

    progress(steps[0], 0, 1)
    rows = inspection.recent_ab_rows(store, scope, retrievals)
    top_ks = inspection.retrieval_top_ks(store, scope, sorted({row.retrieval_id for row in rows}))
    events = inspection.scope_weight_events(store, scope)
    feedback = _feedback_impact(runtime, scope, rows, top_ks, events, retrievals, most_moved)
    progress(steps[0], 1, 1)

    progress(steps[1], 0, 1)
    drift_view = _drift(runtime, scope)
    progress(steps[1], 1, 1)

    progress(steps[2], 0, 1)
    census = scope_stats(store, scope)
    corroboration = _corroboration(runtime, scope, census.active_ids)
    progress(steps[2], 1, 1)

    progress(steps[3], 0, 1)
    health = inspection.store_health(store)
    health_section = HealthSection(
        schema_version=health.schema_version,
        vector_dim=health.vector_dim,
        disk_bytes=health.disk_bytes,
        tables=[TableView.model_validate(table) for table in health.tables],
        memories=census.memories,
        by_status=census.by_status,
        by_kind=census.by_kind,
        by_tier=census.by_tier,
        by_embedder=census.by_embedder,
        # A trial ran the report on the default scope of a store whose memories were all in another.
        # (projects only: an org's shelf is read by its projects, and no report is made of it alone)
        elsewhere=[f"{s.org_id}/{s.project_id}" for s in store.scopes() if s != scope and s.project_id]
        if not census.memories
        else [],
    )
    progress(steps[3], 1, 1)

    return ReportData(
        generated_at=iso(runtime.clock()),
        store_uri=store.uri,
        org_id=scope.org_id,
        project_id=scope.project_id,
        backends=runtime.backends,
        feedback=feedback,
        drift=drift_view,
        corroboration=corroboration,
        health=health_section,
    )


# ---------------------------------------------------------------------------------------- feedback impact


def _feedback_impact(
    runtime: Runtime,
    scope: Scope,
    rows: Sequence[AbLogRow],
    top_ks: dict[str, int],
    events: Sequence[WeightEvent],
    requested: int,
    most_moved: int,
) -> FeedbackImpact:
    by_retrieval: dict[str, list[AbLogRow]] = defaultdict(list)
    for row in rows:
        by_retrieval[row.retrieval_id].append(row)
    deltas = [unweighted - weighted for unweighted, weighted in map(_ranks, rows)]

    top_k_changed = reordered = without_top_k = disabled = global_top_k_changed = global_moved = 0
    for retrieval_id, candidates in by_retrieval.items():
        disabled += not candidates[0].weighting_enabled
        reordered += any(row.unweighted_rank != row.weighted_rank for row in candidates)
        global_rank = _global_ranks(candidates)
        global_moved += sum(1 for row in candidates if global_rank[row.observation_id] != row.unweighted_rank)
        top_k = top_ks.get(retrieval_id)
        if top_k is None:
            without_top_k += 1
            continue
        before = {row.observation_id for row in candidates if _ranks(row)[0] < top_k}
        after = {row.observation_id for row in candidates if _ranks(row)[1] < top_k}
        top_k_changed += before != after
        global_top_k_changed += before != {m for m, rank in global_rank.items() if rank < top_k}

    per_memory: dict[str, list[int]] = defaultdict(list)
    applied: dict[str, list[float]] = defaultdict(list)
    for row, delta in zip(rows, deltas, strict=True):
        per_memory[row.observation_id].append(delta)
        applied[row.observation_id].append(
            row.context_weight if row.context_weight is not None else row.feedback_weight
        )
    event_lists: dict[str, list[WeightEvent]] = defaultdict(list)
    for event in events:
        event_lists[event.memory_id].append(event)
    # The report shows what every reader of the project may read: a memory private to an agent or a
    # session is left out of its lists (one no longer in the store is still listed, as such).
    hidden = runtime.store.hidden_from([*per_memory, *event_lists], report_view(scope))
    ranked_ids = sorted(
        (memory_id for memory_id, found in per_memory.items() if any(found) and memory_id not in hidden),
        key=lambda memory_id: (-sum(abs(d) for d in per_memory[memory_id]), memory_id),
    )[:most_moved]
    movement = {
        memory_id: sum(abs(e.weight_after - e.weight_before) for e in found)
        for memory_id, found in event_lists.items()
    }
    history_ids = sorted(
        (memory_id for memory_id, moved in movement.items() if moved > 0 and memory_id not in hidden),
        key=lambda memory_id: (-movement[memory_id], memory_id),
    )[:most_moved]
    memories = runtime.store.get_memories([*ranked_ids, *history_ids], report_view(scope))
    points = Counter(_ranks(row) for row in rows)
    times = sorted(row.created_at for row in rows)
    return FeedbackImpact(
        retrievals_requested=requested,
        retrievals=len(by_retrieval),
        first_at=iso(times[0]) if times else None,
        last_at=iso(times[-1]) if times else None,
        candidates=len(rows),
        weighting_disabled_retrievals=disabled,
        moved_candidates=sum(1 for delta in deltas if delta),
        retrievals_reordered=reordered,
        retrievals_top_k_changed=top_k_changed,
        retrievals_without_top_k=without_top_k,
        mean_abs_delta=sum(abs(delta) for delta in deltas) / len(deltas) if deltas else 0.0,
        global_retrievals_top_k_changed=global_top_k_changed,
        global_moved_candidates=global_moved,
        delta_histogram=[DeltaCount(delta=d, count=c) for d, c in sorted(Counter(deltas).items())],
        rank_points=[
            RankPoint(unweighted_rank=u, weighted_rank=w, count=c) for (u, w), c in sorted(points.items())
        ],
        most_moved=[
            _moved(memory_id, per_memory[memory_id], applied[memory_id], memories.get(memory_id))
            for memory_id in ranked_ids
        ],
        # Only the events that moved a weight (a report writes one for every memory it credits, moved or not),
        # of the memories the page may show (a trial counted a private one the page then left out).
        weight_events=sum(
            1
            for event in events
            if event.weight_after != event.weight_before and event.memory_id not in hidden
        ),
        memories_with_weight_events=sum(
            1
            for memory_id, found in event_lists.items()
            if memory_id not in hidden and any(e.weight_after != e.weight_before for e in found)
        ),
        weight_histories=[
            _history(memory_id, event_lists[memory_id], movement[memory_id], memories.get(memory_id))
            for memory_id in history_ids
        ],
        min_weight=runtime.weight_policy.low,
        max_weight=runtime.weight_policy.high,
    )


def _ranks(row: AbLogRow) -> tuple[int, int]:
    """A ranked row's unweighted and weighted rank (``recent_ab_rows`` returns only direct matches, which
    have both; an episode sibling has none)."""
    if row.unweighted_rank is None or row.weighted_rank is None:
        raise ValueError(f"the A/B row of {row.observation_id} has no ranks (an episode sibling)")
    return row.unweighted_rank, row.weighted_rank


def _global_ranks(candidates: Sequence[AbLogRow]) -> dict[str, int]:
    """The ranks the global weights would have given one retrieval's candidates (boosted score x global
    weight, as the A/B log records both; relevance alone where weighting was off)."""

    def score(row: AbLogRow) -> float:
        return row.boosted_score * row.feedback_weight if row.weighting_enabled else row.boosted_score

    order = sorted(candidates, key=lambda row: (-score(row), -row.boosted_score, row.observation_id))
    return {row.observation_id: rank for rank, row in enumerate(order)}


def _moved(
    memory_id: str, deltas: list[int], applied: list[float], memory: MemoryRecord | None
) -> MovedMemory:
    return MovedMemory(
        id=memory_id,
        preview=_preview(memory),
        status=memory.status if memory else None,
        weight=memory.weight if memory else None,
        applied_weight=sum(applied) / len(applied),
        appearances=len(deltas),
        lifted=sum(1 for delta in deltas if delta > 0),
        lowered=sum(1 for delta in deltas if delta < 0),
        total_abs_delta=sum(abs(delta) for delta in deltas),
        mean_delta=sum(deltas) / len(deltas),
    )


def _history(
    memory_id: str, events: list[WeightEvent], movement: float, memory: MemoryRecord | None
) -> WeightHistory:
    start = memory.created_at if memory is not None and memory.created_at <= events[0].at else events[0].at
    return WeightHistory(
        id=memory_id,
        preview=_preview(memory),
        status=memory.status if memory else None,
        movement=movement,
        points=[
            WeightPoint(at=iso(start), weight=1.0, session_id=None),
            *(WeightPoint(at=iso(e.at), weight=e.weight_after, session_id=e.session_id) for e in events),
        ],
    )


def _preview(memory: MemoryRecord | None) -> str:
    """Its first words; "[purged]" once its text was erased, as every other view shows it; "" when it is
    not in the store (the page says so)."""
    if memory is None:
        return ""
    return PURGED_PREVIEW if memory.status == "purged" else memory.content[:PREVIEW_CHARS]


# ---------------------------------------------------------------------------------------- drift


def _drift(runtime: Runtime, scope: Scope) -> DriftOutput:
    """Open pairs first: the newest ``DRIFT_LIMIT`` pairs of any status, and every open one among the
    newest ``DRIFT_LIMIT`` open pairs if resolved ones crowded them out."""

    def asked(*, include_resolved: bool = False) -> DriftInput:
        return DriftInput(
            org_id=scope.org_id,
            project_id=scope.project_id,
            include_resolved=include_resolved,
            limit=DRIFT_LIMIT,
        )

    both = drift(asked(include_resolved=True), runtime, REPORT_CALLER)
    shown_open = sum(1 for pair in both.contradictions if pair.status == "open")
    if shown_open >= min(both.open_contradictions, DRIFT_LIMIT):
        return both
    only_open = drift(asked(), runtime, REPORT_CALLER)
    resolved = [pair for pair in both.contradictions if pair.status != "open"]
    return both.model_copy(update={"contradictions": [*only_open.contradictions, *resolved][:DRIFT_LIMIT]})


# ---------------------------------------------------------------------------------------- corroboration


def _corroboration(runtime: Runtime, scope: Scope, active_ids: Sequence[str]) -> CorroborationSection:
    """The clusters of an aggregation pass run now, and that pass's figures (the background job's last
    pass may be a minute old, and a CLI process has none)."""
    runtime.corroboration.run_pass(scope)
    by_member = runtime.corroboration.clusters_for(scope, active_ids)
    clusters = {cluster.canonical.id: cluster for cluster in by_member.values()}
    ordered = sorted(
        clusters.values(),
        key=lambda c: (-len(c.members), -c.corroboration_score, c.canonical.id),
    )
    shown = ordered[:CLUSTER_LIMIT]
    memories = runtime.store.get_memories([m.id for c in shown for m in c.members], report_view(scope))
    return CorroborationSection(
        aggregation=aggregation_view(runtime, scope),
        clusters=len(clusters),
        corroborated=sum(1 for cluster in clusters.values() if cluster.corroboration_score > 0),
        memories_in_clusters=sum(len(cluster.members) for cluster in clusters.values()),
        shown=[
            ClusterView(
                canonical_id=cluster.canonical.id,
                size=len(cluster.members),
                agents=[cluster.canonical.agent_id, *cluster.corroborating_agents],
                corroboration_score=cluster.corroboration_score,
                boost=cluster.boost,
                members=[
                    ClusterMemberView(
                        id=member.id,
                        agent_id=member.agent_id,
                        weight=member.weight,
                        preview=_preview(memories.get(member.id)),
                        canonical=member.id == cluster.canonical.id,
                    )
                    for member in cluster.members
                ],
            )
            for cluster in shown
        ],
    )
