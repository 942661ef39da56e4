"""stats: what one scope's memory holds (counts by status, kind, tier and embedder, weights moved by
outcomes, sessions reported, open contradictions) and which backends serve it. Only the scope's own
numbers: nothing here counts across a tenant boundary."""

from __future__ import annotations

from dataclasses import asdict

import anyio
from pydantic import BaseModel, Field

from tools.common import AggregationView, Caller, Runtime, ScopeArgs, aggregation_view, iso, view_for


class StatsInput(ScopeArgs):
    pass


class WeightStats(BaseModel):
    moved: int = Field(description="Active memories whose feedback weight is no longer the initial 1.0.")
    raised: int
    lowered: int
    lowest: float | None
    highest: float | None


class StatsOutput(BaseModel):
    org_id: str
    project_id: str
    store: str | None = Field(
        description="The store's LanceDB URI (null for a caller with a bearer token: the server's paths are "
        "not shown to token holders)."
    )
    schema_version: int
    memories: int = Field(
        description="Every memory of the scope, whatever its status (for a bearer token's holder: those it may read)."
    )
    active: int
    org_wide: int = Field(
        0,
        description="Active memories remembered for the whole org, which this project reads beside its own "
        "(its listing shows them; not counted in the other figures).",
    )
    by_status: dict[str, int] = Field(description='"expired": ephemeral, past expiry, not yet retracted.')
    by_kind: dict[str, int] = Field(description="Active memories by kind.")
    by_tier: dict[str, int] = Field(description="Active memories by protection tier.")
    by_embedder: dict[str, int] = Field(
        description="Memories with content by the embedder that made their vectors; more than one means "
        "`memoria reembed` has work to do."
    )
    agents: int = Field(description="Distinct agents that wrote the active memories.")
    episodes: int
    weights: WeightStats
    first_written: str | None = Field(
        description="The earliest memory's date: when it happened (occurred_at), else when it was written."
    )
    last_written: str | None = Field(description="The latest memory's date, read the same way.")
    retrievals: int = Field(
        description="Recalls and explains recorded (kept for explain_ranking and outcomes)."
    )
    sessions_reported: dict[str, int] = Field(description="Sessions with an outcome report, by outcome.")
    open_contradictions: int
    lineage_events: int
    backends: dict[str, str]
    note: str | None = Field(
        None,
        description="With no memory here: the projects that hold some, or that only the org's shelf does.",
    )
    aggregation: AggregationView | None = Field(
        None,
        description="The last aggregation pass over the scope (first at start, then every "
        "MEMORIA_AGGREGATION_INTERVAL_SECONDS); null before it finished.",
    )


def stats(args: StatsInput, runtime: Runtime, caller: Caller) -> StatsOutput:
    from storage.stats import (
        org_wide_active,
        scope_stats,
    )  # LanceDB: loaded with the runtime, after the handshake

    view = view_for(args, runtime, caller)
    scope = view.home
    # A bearer token's holder counts what it may read, as its listing shows it: another principal's private
    # memories are not its to count (a new user's trial read 2 in stats where the listing showed 1). On
    # stdio and at the command line the store is the operator's own, counted whole as the report does.
    viewer = view.viewer if caller.remote else None
    found = scope_stats(runtime.store, scope, viewer)
    note = None
    if not found.memories:  # a mistyped project, most likely (a trial read "memories 0 (none)" alone)
        from tools.empty_recall_notes import empty_project_note

        note = empty_project_note(runtime, view, caller)
    return StatsOutput(
        org_id=scope.org_id,
        project_id=scope.project_id,
        store=None if caller.remote else runtime.store.uri,
        schema_version=runtime.store.schema_version,
        memories=found.memories,
        active=found.by_status.get("active", 0),
        org_wide=org_wide_active(runtime.store, scope, viewer),
        by_status=found.by_status,
        by_kind=found.by_kind,
        by_tier=found.by_tier,
        by_embedder=found.by_embedder,
        agents=found.agents,
        episodes=found.episodes,
        weights=WeightStats(**asdict(found.weights)),
        first_written=iso(found.first_written) if found.first_written else None,
        last_written=iso(found.last_written) if found.last_written else None,
        retrievals=found.retrievals,
        sessions_reported=found.outcomes,
        open_contradictions=found.open_contradictions,
        lineage_events=found.lineage_events,
        backends=runtime.backends,
        note=note,
        # The pass reads every memory of the scope: its counts are not a token holder's to see.
        aggregation=None if caller.remote else aggregation_view(runtime, scope),
    )


async def handle(args: StatsInput, runtime: Runtime, caller: Caller) -> StatsOutput:
    return await anyio.to_thread.run_sync(stats, args, runtime, caller)
