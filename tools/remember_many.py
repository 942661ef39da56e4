"""remember_many: store several memories in one call (one embedding batch, one append). Near-duplicates
within the batch collapse: the last one written survives and the others are kept as superseded by it,
with lineage; then each new memory is consolidated against the store as ``remember`` does."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, field_validator

from retrieval.consolidation.report import Actor
from retrieval.consolidation.rules import collapse_batch
from storage.records import LineageEvent
from tools.common import Caller, Identifier, OccurredAt, Runtime, ScopeArgs, Tag, ToolFailure
from tools.remember import (
    ConsolidationSummary,
    RememberInput,
    RememberOutput,
    as_array,
    check_limits,
    cluster_member,
    examined_as_written,
    new_record,
    not_blank,
    output_for,
    preceding_contents,
    remember,
    track_consolidation,
    unmarked_on_failure,
    with_vectors,
    without_secrets,
)


class BatchItem(BaseModel):
    # A misspelt key ("tag", "kinds") is refused, not dropped: the memory would be stored without it.
    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1, max_length=1_000_000, description="One memory, verbatim.")
    kind: Literal["fact", "episode", "artifact"] = "fact"
    tags: list[Tag] = Field(default_factory=list, max_length=1_000)
    episode_id: Identifier | None = None
    protection_tier: Literal["standard", "immutable", "protected", "ephemeral"] = "standard"
    occurred_at: OccurredAt = Field(None, description="When it was learned or happened. Default: now.")
    agent_id: Identifier | None = Field(
        None, description="Who said or learned this one, when it differs from the batch's agent_id."
    )

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # Checked here, not when the item becomes a RememberInput: that would fail inside the handler.
        return not_blank(value)


class RememberManyInput(ScopeArgs):
    items: list[BatchItem] = Field(
        min_length=1, max_length=200, description="The memories, in the order learned."
    )
    agent_id: Identifier | None = Field(None, description="Who learned them. Default: the MCP client's name.")
    session_id: Identifier | None = Field(
        None, description="The working session. Default: one per connection."
    )


class RememberManyOutput(BaseModel):
    results: list[RememberOutput] = Field(description="One per item, in order.")
    stored: int
    duplicates: int
    collapsed: int = Field(description="Items that were near-duplicates of a later item in the same batch.")


def remember_many(args: RememberManyInput, runtime: Runtime, caller: Caller) -> RememberManyOutput:
    # One freshness check for the request's reads; every write sequence in it checks again under the lock.
    with runtime.store.one_version():
        return _remember_many(args, runtime, caller)


def _remember_many(args: RememberManyInput, runtime: Runtime, caller: Caller) -> RememberManyOutput:
    inputs = [
        RememberInput(
            **item.model_dump(exclude={"agent_id"}),
            agent_id=item.agent_id or args.agent_id,
            session_id=args.session_id,
            org_id=args.org_id,
            project_id=args.project_id,
        )
        for item in args.items
    ]
    cleaned = [without_secrets(single) for single in inputs]
    inputs = [single for single, _ in cleaned]
    records = []
    for index, single in enumerate(inputs):
        try:  # every item is checked before anything is written: a refused batch stores nothing
            check_limits(single, runtime)
            records.append(new_record(single, runtime, caller))
        except ToolFailure as exc:
            raise ToolFailure(f"item {index}: {exc}") from None
    scope = records[0].scope
    store = runtime.store
    existing = store.get_memories([r.id for r in records], scope)
    fresh = list({r.id: r for r in records if r.id not in existing}.values())
    results: dict[str, RememberOutput] = {}
    # Items already stored go the single path (attestation, restore, resuming consolidation).
    for single, record in zip(inputs, records, strict=True):
        if record.id in existing and record.id not in results:
            results[record.id] = remember(single, runtime, caller)
    collapsed = collapse_batch(
        fresh,
        runtime.settings.consolidation_text_dedup_threshold,
        across_agents=runtime.settings.consolidate_across_agents,
    )
    losers = {loser.id: survivor.id for loser, survivor in collapsed}
    now = runtime.clock()
    # One write: every new memory stamped as examined (consolidation runs below), and the batch's own
    # near-duplicates stored already superseded by the item that restated them.
    written = [
        replace(examined_as_written(record, runtime), status="superseded", replaced_by=losers[record.id])
        if record.id in losers
        else examined_as_written(record, runtime)
        for record in fresh
    ]
    news = with_vectors(written, runtime, preceding_contents(records, store))
    stored = {record.id: record for record, created in store.insert_many(news) if created}
    vectors = {new.record.id: as_array(new.vector) for new in news}
    actor = Actor(records[0].agent_id, records[0].session_id)
    if losers:
        store.add_lineage(
            [
                LineageEvent.new(
                    scope,
                    "supersede",
                    loser_id,
                    related_id=survivor_id,
                    resolver="rules:intra-batch",
                    reason="a near-duplicate of a later memory in the same batch",
                    agent_id=actor.agent_id,
                    session_id=actor.session_id,
                    at=now,
                )
                for loser_id, survivor_id in losers.items()
            ]
        )
    with unmarked_on_failure(store, [record.id for record in written if record.id in stored]):
        for record in written:
            if record.id not in stored:
                continue
            if record.id in losers:
                summary = ConsolidationSummary(resolver="rules:intra-batch", absorbed_into=losers[record.id])
                results[record.id] = output_for(record, created=True, note=None, consolidation=summary)
                continue
            runtime.corroboration.observe(scope, cluster_member(record))
            report = runtime.consolidation.on_write(
                record, vectors[record.id], llm=caller.llm, actor=actor, mark=False
            )
            track_consolidation(runtime, scope, report, record.id)
            results[record.id] = output_for(
                record, created=True, note=None, consolidation=ConsolidationSummary.of(report)
            )
    ordered = [
        results[record.id].model_copy(update={"redacted": redacted}) if redacted else results[record.id]
        for record, (_, redacted) in zip(records, cleaned, strict=True)
    ]
    return RememberManyOutput(
        results=ordered,
        stored=sum(1 for r in ordered if r.status == "stored"),
        duplicates=sum(1 for r in ordered if r.status == "duplicate"),
        collapsed=len(losers),
    )


async def handle(args: RememberManyInput, runtime: Runtime, caller: Caller) -> RememberManyOutput:
    return await anyio.to_thread.run_sync(remember_many, args, runtime, caller)
