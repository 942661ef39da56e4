"""report_outcome: move the feedback weights of the memories a session relied on.

The memories the agent names move a full step (helpful up, misleading down); the other memories of the
session's contexts move by a share of their position there, and filler below the relevance floor never
moves (``retrieval.outcomes.assign_credit``). The report keeps the session's queries, so that at
recall a memory's weight is its weight for tasks like the session's (``retrieval.feedback_index``).

Weights are a replay of every session's current report, in the order sessions first reported, so a
repeated report changes nothing and a corrected report replaces the earlier one as if it had been
the only one sent.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from pydantic import BaseModel, Field, field_validator, model_validator

from retrieval.outcomes import (
    ShownContext,
    ShownMemory,
    WeightPolicy,
    assign_credit,
    effective_score,
    with_credit,
)
from storage.records import (
    CreditedSession,
    MemoryRecord,
    OutcomeRecord,
    RetrievalRecord,
    Scope,
    View,
    WeightEvent,
)
from tools.common import (
    Caller,
    Identifier,
    Runtime,
    ScopeArgs,
    ToolFailure,
    WithoutSecrets,
    by_scope,
    view_for,
)

if TYPE_CHECKING:
    from storage.store import MemoryStore

log = logging.getLogger(__name__)

MAX_NAMED = 100  # memories one report may name as helpful, and as misleading


class ReportOutcomeInput(ScopeArgs):
    outcome: Literal["success", "failure", "partial"] = Field(description="How the task went.")
    score: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="0 (failure) to 1 (success); overrides outcome.",
    )
    helpful_ids: list[Identifier] | None = Field(
        None,
        max_length=MAX_NAMED,
        description="Ids of the memories you relied on.",
    )
    misleading_ids: list[Identifier] | None = Field(
        None,
        max_length=MAX_NAMED,
        description="Ids of memories that misled you.",
    )
    session_id: Identifier | None = Field(None, description="Default: one per connection.")
    note: Annotated[str, Field(max_length=4_000), WithoutSecrets] | None = Field(
        None, description="What helped or misled."
    )

    @model_validator(mode="after")
    def _named_once(self) -> ReportOutcomeInput:
        both = sorted(set(self.helpful_ids or ()) & set(self.misleading_ids or ()))
        if both:
            raise ValueError(
                f"{', '.join(both)} named both helpful and misleading: name each memory in one list only"
            )
        return self


class WeightUpdate(BaseModel):
    id: str
    role: Literal["helpful", "misleading", "context"] = Field(
        description="helpful/misleading: named by the agent (a full step); context: shown by this "
        "session's recalls (a share of a step by its position)."
    )
    share: float = Field(description="Its share of a full feedback step in this report.")
    weight_before: float
    weight_after: float

    @field_validator("weight_before", "weight_after", "share")
    @classmethod
    def _readable(cls, value: float) -> float:
        return round(value, 6)


class ReportOutcomeOutput(BaseModel):
    session_id: str = Field(description="The session this report is about.")
    outcome: str
    score: float
    status: Literal["applied", "replaced", "unchanged", "nothing_to_update"] = Field(
        description="applied: first report; replaced: this session was reported before and this report "
        "replaced that one (weights recomputed, not moved twice); unchanged: the same report again; "
        "nothing_to_update: no memory was shown above the relevance floor or named."
    )
    revision: int
    detail: str = Field(description="What the report did, in a sentence.")
    updated: list[WeightUpdate] = Field(
        description="Each memory's global weight before and after; at recall the weight that applies "
        "is the one for the query, from reports of sessions with close queries."
    )


def report_outcome(args: ReportOutcomeInput, runtime: Runtime, caller: Caller) -> ReportOutcomeOutput:
    scope = args.scope(runtime.settings)
    session_id = args.session_id or caller.session_id
    score = effective_score(args.outcome, args.score)
    store = runtime.store
    policy = runtime.weight_policy
    helpful = list(dict.fromkeys(args.helpful_ids or ()))
    misleading = list(dict.fromkeys(args.misleading_ids or ()))
    named = [*helpful, *misleading]
    if named:
        # Another tenant's ids read as unknown here, and so do another agent's private memories: get_memories
        # sees what the caller may read in this scope (and its org's shelf).
        known = store.get_memories(named, view_for(args, runtime, caller))
        unknown = [memory_id for memory_id in named if memory_id not in known]
        if unknown:
            raise ToolFailure(
                f"no memory {', '.join(unknown)} in org {scope.org_id!r} / project {scope.project_id!r}; nothing "
                "was reported. Name ids from this session's recall results (each memory's id), then report again."
            )

    retrievals = store.session_retrievals(scope, session_id)
    contexts, queries, query_of_context = shown_contexts(retrievals)
    credits = tuple(
        replace(
            credit, query_index=None if credit.query_index is None else query_of_context[credit.query_index]
        )
        for credit in assign_credit(
            contexts,
            session_score=score,
            helpful=helpful,
            misleading=misleading,
            policy=runtime.credit_policy,
        )
    )
    embedder = runtime.models.embedder
    query_vectors = tuple(tuple(float(x) for x in embedder.embed_query(query)) for query in queries)
    memory_ids = tuple(credit.memory_id for credit in credits)

    # What the report reads (the session's earlier report, every credit of the memories it moves) is read
    # before the reports' lock, at the versions ``seen`` of the credit and report tables; under the lock
    # only what reports committed since is read (``caught_up``: a report writes its credits, then its row,
    # so both versions count). The lock is then held for the writes and that small read: under load,
    # reports queued behind each other's reads (0.43 s a report). It is the reports' lock, not the write lock:
    # remembers do not wait for a report, only for its weight write.
    seen = store.report_versions()
    reads = read_for_report(store, scope, session_id, memory_ids)
    with store.reporting():
        if store.report_versions() != seen:
            reads = caught_up(reads, store, scope, session_id, memory_ids, seen)
        previous = reads.previous
        if (
            previous is not None
            and previous.score == score
            and previous.outcome == args.outcome
            and previous.note == args.note
            and set(previous.credits) == set(credits)
            and set(previous.memory_ids) == set(memory_ids)
            and previous.queries == queries
        ):
            current = store.get_memories(memory_ids, View(scope))
            unchanged = [
                WeightUpdate(
                    id=c.memory_id,
                    role=c.role,
                    share=c.share,
                    weight_before=current[c.memory_id].weight,
                    weight_after=current[c.memory_id].weight,
                )
                for c in credits
                if c.memory_id in current
            ]
            return ReportOutcomeOutput(
                session_id=session_id,
                outcome=args.outcome,
                score=score,
                status="unchanged",
                revision=previous.revision,
                detail=f"session {session_id} was already reported exactly so (revision {previous.revision}): "
                "nothing moved again",
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
            credits=credits,
            queries=queries,
            query_vectors=query_vectors,
            query_embedder=embedder.name,
        )
        half_done = reads.half_done
        affected = reads.affected
        # The weights and protection tiers as they are now (the scope's copy: no table read).
        current = store.get_memories(affected, View(scope))
        # Every report's credits for these memories, with this session's replaced by the new report's.
        replay = with_report(reads.credited, record)
        weights = replayed_weights(policy, current, replay)
        credit_of = {credit.memory_id: credit for credit in credits}
        updates = [
            WeightUpdate(
                id=memory_id,
                role=credit_of[memory_id].role if memory_id in credit_of else "context",
                share=credit_of[memory_id].share if memory_id in credit_of else 0.0,
                weight_before=current[memory_id].weight,
                weight_after=weight,
            )
            for memory_id, weight in weights.items()
        ]
        write_weights(runtime, current, weights, now)

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
        store.put_outcome(record, previous, cleared=half_done, first=reads.session_revision is None)
        converge(runtime, scope, affected, replay)

    status: Literal["applied", "replaced", "unchanged", "nothing_to_update"]
    if previous is not None:
        status = "replaced"
        detail = (
            f"session {session_id} was reported before (revision {previous.revision}); this report replaced "
            "it, and the weights were recomputed as if only this report had been made"
        )
    elif not credits:
        status = "nothing_to_update"
        detail = (
            f"session {session_id}'s recalls put no memory into a context above the relevance floor and none "
            "was named: nothing moved. Name the memories you used with helpful_ids"
        )
    else:
        status = "applied"
        roles = [credit.role for credit in credits]
        closeness_note = (
            " (for tasks as close as this session's, to the top or bottom weight)"
            if queries
            else " (the session recalled nothing, so its report counts for every task, by that step only)"
        )
        detail = (
            f"session {session_id} reported: {roles.count('helpful')} helpful and {roles.count('misleading')} "
            f"misleading memories moved a full step{closeness_note}, {roles.count('context')} others of its contexts a share "
            "by their position"
        )
    return ReportOutcomeOutput(
        session_id=session_id,
        outcome=args.outcome,
        score=score,
        status=status,
        revision=record.revision,
        detail=detail,
        updated=updates,
    )


Replay = Mapping[str, Sequence[CreditedSession]]  # memory id -> its credits, in replay order


@dataclass(frozen=True)
class ReportReads:
    """What a report reads before it writes: the session's current report, the memories a report of it
    that failed half-way credited, the revision of the session's credit rows (None: it has none), every
    memory this report touches, and all their credits."""

    previous: OutcomeRecord | None
    half_done: tuple[str, ...]
    session_revision: int | None
    affected: tuple[str, ...]
    credited: Replay


def read_for_report(
    store: MemoryStore, scope: Scope, session_id: str, memory_ids: Sequence[str]
) -> ReportReads:
    previous = store.get_outcome(scope, session_id)
    # Every memory this session's report moved or moves, including one a report that crashed half-way
    # had credited (its credit rows are there, its report row is not).
    session = store.session_feedback(scope, session_id)
    affected = tuple(
        dict.fromkeys((*memory_ids, *(previous.memory_ids if previous else ()), *session.credited))
    )
    return ReportReads(
        previous,
        session.credited,
        session.revision,
        affected,
        store.credits_for(scope, affected, across_org=True),
    )


def caught_up(
    reads: ReportReads,
    store: MemoryStore,
    scope: Scope,
    session_id: str,
    memory_ids: Sequence[str],
    seen: tuple[int, int],
) -> ReportReads:
    """``reads``, made at the report tables' versions ``seen``, brought up to the reports committed since
    (under the write lock): only the credits of the affected memories written after ``seen`` are read,
    and each replaces the same session's credit of its memory. A report of this same session in between
    means everything is read again: its rows written since, or its report row changed (possible only
    when the session's credit rows and its report row were read at different revisions: a report of it
    was in flight, or died half-way)."""
    changed, ours = store.credits_changed_since(seen[0], scope, reads.affected, session_id)
    if ours:
        return read_for_report(store, scope, session_id, memory_ids)
    revision = reads.previous.revision if reads.previous is not None else None
    if (
        reads.session_revision != revision
        and store.report_versions()[1] != seen[1]
        and store.outcome_revision(scope, session_id) != revision
    ):
        return read_for_report(store, scope, session_id, memory_ids)
    credited = {memory_id: list(found) for memory_id, found in reads.credited.items()}
    for credit in changed:
        memory_id = credit.credit.memory_id
        credited[memory_id] = with_credit(credited.get(memory_id, ()), credit.session_id, credit)
    return replace(reads, credited=credited)


def shown_contexts(
    retrievals: Sequence[RetrievalRecord],
) -> tuple[list[ShownContext], tuple[str, ...], list[int]]:
    """What each recall of the session put into its context, with each memory's score there before
    feedback weighting; the session's distinct queries; and, per context, its query's index."""
    contexts = []
    queries: dict[str, int] = {}
    query_of_context = []
    for retrieval in retrievals:
        trace = json.loads(retrieval.trace_json)
        shown = tuple(
            ShownMemory(entry["id"], unweighted_score(entry))
            for entry in trace.get("candidates", ())
            if entry.get("in_context")
        )
        contexts.append(ShownContext(retrieval.query, shown))
        query_of_context.append(queries.setdefault(retrieval.query, len(queries)))
    return contexts, tuple(queries), query_of_context


def unweighted_score(entry: dict[str, Any]) -> float:
    """A traced candidate's score before feedback weighting: relevance plus boost, faded by age decay,
    for a direct match; the propagated score for an episode sibling (its final score without its own
    weight, which carries its source's decay)."""
    scores = entry["scores"]
    if entry.get("source") == "sibling":
        weight = scores.get("feedback_weight") or 1.0
        return float(scores["final"]) / min(1.0, weight) if weight > 0 else 0.0
    boosted = float(scores["relevance"]) + float(scores.get("corroboration_boost") or 0.0)
    return boosted * float(scores.get("decay", 1.0))


def with_report(credited: Replay, record: OutcomeRecord) -> dict[str, list[CreditedSession]]:
    """``credited`` with ``record``'s session's credits replaced by the record's (a corrected report
    keeps its session's place in the replay order; a first report replays last)."""
    new = {
        credit.memory_id: CreditedSession(
            record.session_id, record.first_reported_at, record.revision, credit
        )
        for credit in record.credits
    }
    return {
        memory_id: with_credit(found, record.session_id, new.get(memory_id))
        for memory_id, found in credited.items()
    }


def replayed_weights(
    policy: WeightPolicy, memories: Mapping[str, MemoryRecord], replay: Replay
) -> dict[str, float]:
    """Each memory's global weight: its credit in every report, replayed oldest first."""
    weights = {}
    for memory_id, memory in memories.items():
        weight = policy.replay_credits((c.credit.share, c.credit.score) for c in replay.get(memory_id, ()))
        if memory.protection_tier == "immutable":
            weight = max(weight, 1.0)  # immutable memories are never decayed
        weights[memory_id] = weight
    return weights


def write_weights(
    runtime: Runtime,
    current: Mapping[str, MemoryRecord],
    weights: Mapping[str, float],
    at: datetime,
    *,
    only_changed: bool = True,
) -> None:
    """Write ``weights``; with ``only_changed``, those that differ from ``current`` (this process's view)."""
    changed = {m: w for m, w in weights.items() if not only_changed or w != current[m].weight}
    runtime.store.set_weights(changed, at)
    # The canonical member of each cluster follows the weights, in the scope each memory is kept in (the
    # project's, or the org shelf's).
    for where, memories in by_scope(current[m] for m in changed).items():
        runtime.corroboration.set_weights(where, {m.id: changed[m.id] for m in memories})


def converge(runtime: Runtime, scope: Scope, memory_ids: Sequence[str], replayed: Replay) -> None:
    """Make the weights just written replay every report there now is.

    On a local store the reports' lock keeps other processes' reports out, and this is one read that
    finds nothing new. Replicas on an object store share no lock: a report another replica committed while this one
    computed is missing from the weights just written. So a replica re-reads the reports after saving
    its own and writes the weights they replay at least once, then again until a re-read finds nothing
    new. Another replica's last weight write came after its last re-read; a report that re-read missed
    was saved after it, so the owner's write after saving comes after that write - the weights that
    stay replay every report. (Writing only when the re-read differs is not enough: a replica whose
    computation already had every report it then re-reads skips the write, while a third report can
    have made another replica write weights without this one's report in between.)"""
    if runtime.store.excludes_other_processes:
        return  # the reports' lock kept other processes' reports out while these weights were computed
    seen = _replay_keys(replayed, memory_ids)  # in replay order: the weights depend on it
    must_write = True
    for _ in range(8):
        latest = runtime.store.credits_for(scope, memory_ids, across_org=True)
        now_seen = _replay_keys(latest, memory_ids)
        if now_seen == seen and not must_write:
            return
        must_write = False
        seen = now_seen
        current = runtime.store.get_memories(memory_ids, View(scope))
        # Every weight, changed or not in this process's view: another replica may have written over
        # one since, and skipping it on a stale view would leave that replica's weight standing.
        weights = replayed_weights(runtime.weight_policy, current, latest)
        write_weights(runtime, current, weights, runtime.clock(), only_changed=False)
    log.warning("outcome reports kept arriving while weights were recomputed; the next report settles them")


def _replay_keys(replay: Replay, memory_ids: Sequence[str]) -> list[list[tuple[str, int, float, float]]]:
    return [
        [(c.session_id, c.revision, c.credit.share, c.credit.score) for c in replay.get(memory_id, ())]
        for memory_id in memory_ids
    ]


async def handle(args: ReportOutcomeInput, runtime: Runtime, caller: Caller) -> ReportOutcomeOutput:
    return await anyio.to_thread.run_sync(report_outcome, args, runtime, caller)
