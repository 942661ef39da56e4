"""report_outcome: move the feedback weight of every memory this session's recalls put into a context.

Weights are a replay of every session's current report, in the order sessions first reported, so a
repeated report changes nothing and a corrected report replaces the earlier one as if it had been
the only one sent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Literal

import anyio
from pydantic import BaseModel, Field, field_validator

from retrieval.outcomes import WeightPolicy, effective_score
from storage.records import MemoryRecord, OutcomeRecord, Scope, WeightEvent
from tools.common import Caller, Identifier, Runtime, ScopeArgs, WithoutSecrets

log = logging.getLogger(__name__)


class ReportOutcomeInput(ScopeArgs):
    outcome: Literal["success", "failure", "partial"] = Field(
        description="How the task went: success raises the weight of the memories this session recalled, "
        "failure lowers it, partial leaves it near neutral."
    )
    score: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Optional finer grade from 0 (failure) to 1 (success); overrides the label.",
    )
    session_id: Identifier | None = Field(
        None, description="The session to report on. Default: this client connection's session."
    )
    note: Annotated[str, Field(max_length=4_000), WithoutSecrets] | None = Field(
        None, description="Optional: what helped or misled."
    )


class WeightUpdate(BaseModel):
    id: str
    weight_before: float
    weight_after: float

    @field_validator("weight_before", "weight_after")
    @classmethod
    def _readable(cls, value: float) -> float:
        return round(value, 6)


class ReportOutcomeOutput(BaseModel):
    session_id: str
    outcome: str
    score: float
    status: Literal["applied", "replaced", "unchanged", "nothing_to_update"] = Field(
        description="applied: first report; replaced: a corrected report replaced the earlier one; "
        "unchanged: the same report again; nothing_to_update: this session's recalls put no memory into a context."
    )
    revision: int
    updated: list[WeightUpdate]


def report_outcome(args: ReportOutcomeInput, runtime: Runtime, caller: Caller) -> ReportOutcomeOutput:
    scope = args.scope(runtime.settings)
    session_id = args.session_id or caller.session_id
    score = effective_score(args.outcome, args.score)
    store = runtime.store
    policy = runtime.weight_policy

    with store.exclusive():
        memory_ids = tuple(
            dict.fromkeys(
                memory_id
                for retrieval in store.session_retrievals(scope, session_id)
                for memory_id in retrieval.context_ids
            )
        )
        previous = store.get_outcome(scope, session_id)
        if (
            previous is not None
            and previous.score == score
            and previous.outcome == args.outcome
            and previous.note == args.note
            and set(previous.memory_ids) == set(memory_ids)
        ):
            current = store.get_memories(memory_ids, scope)
            unchanged = [
                WeightUpdate(id=m, weight_before=current[m].weight, weight_after=current[m].weight)
                for m in memory_ids
                if m in current
            ]
            return ReportOutcomeOutput(
                session_id=session_id,
                outcome=args.outcome,
                score=score,
                status="unchanged",
                revision=previous.revision,
                updated=unchanged,
            )

        now = runtime.clock()
        record = OutcomeRecord(
            session_id=session_id,
            org_id=scope.org_id,
            project_id=scope.project_id,
            outcome=args.outcome,
            score=score,
            note=args.note,
            memory_ids=memory_ids,
            first_reported_at=previous.first_reported_at if previous is not None else now,
            reported_at=now,
            revision=previous.revision + 1 if previous is not None else 1,
        )
        affected = list(dict.fromkeys((*memory_ids, *(previous.memory_ids if previous else ()))))
        current = store.get_memories(affected, scope)
        replay_order = [o if o.session_id != session_id else record for o in store.outcomes_in_scope(scope)]
        if previous is None:
            replay_order.append(record)  # the newest report replays last
        weights = replayed_weights(policy, current, replay_order)
        updates = [
            WeightUpdate(id=memory_id, weight_before=current[memory_id].weight, weight_after=weight)
            for memory_id, weight in weights.items()
        ]
        write_weights(runtime, scope, current, weights, now)

        store.add_weight_events(
            [
                WeightEvent(
                    memory_id=update.id,
                    org_id=scope.org_id,
                    project_id=scope.project_id,
                    session_id=session_id,
                    weight_before=update.weight_before,
                    weight_after=update.weight_after,
                    revision=record.revision,
                    at=now,
                )
                for update in updates
            ]
        )
        # The report is saved last: if a write above fails, the retried call finds no matching report
        # and redoes the whole update instead of answering "unchanged" over stale weights.
        store.put_outcome(record)
        converge(runtime, scope, affected, replay_order)

    if not memory_ids and previous is None:
        status: Literal["applied", "replaced", "unchanged", "nothing_to_update"] = "nothing_to_update"
    else:
        status = "replaced" if previous is not None else "applied"
    return ReportOutcomeOutput(
        session_id=session_id,
        outcome=args.outcome,
        score=score,
        status=status,
        revision=record.revision,
        updated=updates,
    )


def replayed_weights(
    policy: WeightPolicy, memories: Mapping[str, MemoryRecord], replay_order: Sequence[OutcomeRecord]
) -> dict[str, float]:
    """Each memory's weight replayed from every report that put it into a context, oldest first."""
    weights = {}
    for memory_id, memory in memories.items():
        weight = policy.replay(outcome.score for outcome in replay_order if memory_id in outcome.memory_ids)
        if memory.protection_tier == "immutable":
            weight = max(weight, 1.0)  # immutable memories are never decayed
        weights[memory_id] = weight
    return weights


def write_weights(
    runtime: Runtime,
    scope: Scope,
    current: Mapping[str, MemoryRecord],
    weights: Mapping[str, float],
    at: datetime,
    *,
    only_changed: bool = True,
) -> None:
    """Write ``weights``; with ``only_changed``, those that differ from ``current`` (this process's view)."""
    changed = {m: w for m, w in weights.items() if not only_changed or w != current[m].weight}
    runtime.store.set_weights(changed, at)
    runtime.corroboration.set_weights(scope, changed)  # the canonical member follows the weights


def converge(
    runtime: Runtime, scope: Scope, memory_ids: Sequence[str], replayed: Sequence[OutcomeRecord]
) -> None:
    """Make the weights just written replay every report there now is.

    On a local store the write lock keeps other processes out, and this is one read that finds nothing
    new. Replicas on an object store share no lock: a report another replica committed while this one
    computed is missing from the weights just written. So a replica re-reads the reports after saving
    its own and writes the weights they replay at least once, then again until a re-read finds nothing
    new. Another replica's last weight write came after its last re-read; a report that re-read missed
    was saved after it, so the owner's write after saving comes after that write - the weights that
    stay replay every report. (Writing only when the re-read differs is not enough: a replica whose
    computation already had every report it then re-reads skips the write, while a third report can
    have made another replica write weights without this one's report in between.)"""
    seen = [(o.session_id, o.revision) for o in replayed]  # in replay order: the weights depend on it
    must_write = not runtime.store.excludes_other_processes
    for _ in range(8):
        latest = runtime.store.outcomes_in_scope(scope)
        now_seen = [(o.session_id, o.revision) for o in latest]
        if now_seen == seen and not must_write:
            return
        must_write = False
        seen = now_seen
        current = runtime.store.get_memories(memory_ids, scope)
        # Every weight, changed or not in this process's view: another replica may have written over
        # one since, and skipping it on a stale view would leave that replica's weight standing.
        weights = replayed_weights(runtime.weight_policy, current, latest)
        write_weights(runtime, scope, current, weights, runtime.clock(), only_changed=False)
    log.warning("outcome reports kept arriving while weights were recomputed; the next report settles them")


async def handle(args: ReportOutcomeInput, runtime: Runtime, caller: Caller) -> ReportOutcomeOutput:
    return await anyio.to_thread.run_sync(report_outcome, args, runtime, caller)
