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

import logging
from dataclasses import replace
from typing import Annotated, Literal

from pydantic import BaseModel, Field, PrivateAttr, field_validator, model_validator

from retrieval.outcomes import assign_credit, effective_score, score_contradicts
from storage.records import MemoryRecord, OutcomeRecord, View, Viewer, WeightEvent
from tools.common import Caller, Identifier, Runtime, ScopeArgs, ToolFailure, WithoutSecrets, view_for
from tools.outcome_notes import (
    amend_note,
    applied_note,
    dropped_note,
    inactive_note,
    unnamed_note,
    unseen_note,
    without_gone,
)
from writing.outcomes import (
    caught_up,
    read_for_report,
    replayed_weights,
    shown_contexts,
    used_kept,
    with_report,
    write_report,
)

log = logging.getLogger(__name__)

MAX_NAMED = 100  # memories one report may name as helpful, and as misleading


class ReportOutcomeInput(ScopeArgs):
    outcome: Literal["success", "failure", "partial"] = Field(description="How the task went.")
    _used: tuple[str, ...] = PrivateAttr(())  # the session-end hook's: memories it saw the agent use
    score: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="0 (failure) to 1, on outcome's side of 0.5.",
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
    def _consistent(self) -> ReportOutcomeInput:
        both = sorted(set(self.helpful_ids or ()) & set(self.misleading_ids or ()))
        if both:
            raise ValueError(
                f"helpful_ids and misleading_ids both name {', '.join(both)}: a memory named both helpful "
                "and misleading says nothing; name each memory in one list only"
            )
        if contradiction := score_contradicts(self.outcome, self.score):
            raise ValueError(contradiction)
        return self


class WeightUpdate(BaseModel):
    id: str
    role: Literal["helpful", "misleading", "context", "used"] = Field(
        description="helpful/misleading: named by the agent (a full step); context: shown by this "
        "session's recalls (a share of a step by its position); used: the hook saw it used."
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
    known: dict[str, MemoryRecord] = {}
    retrievals = store.session_retrievals(scope, session_id)
    if named:
        # Another tenant's ids read as unknown here, and so do another agent's private memories: get_memories
        # sees what the caller may read in this scope (and its org's shelf), and what the session's own
        # recalls could show: an agent named by recall's agent_id reports on its private memories too (a
        # new user's trial was told they did not exist).
        view = view_for(args, runtime, caller)
        for agent_id in dict.fromkeys([caller.agent_id, *(r.agent_id for r in retrievals)]):
            reader = replace(view, viewer=Viewer(agent_id, session_id))
            known |= store.get_memories([i for i in named if i not in known], reader)
        unknown = [memory_id for memory_id in named if memory_id not in known]
        if unknown:
            raise ToolFailure(
                f"no memory {', '.join(unknown)} in org {scope.org_id!r} / project {scope.project_id!r}; nothing "
                "was reported. Name ids from this session's recall results (each memory's id), with the org_id "
                "and project_id those recalls were given, then report again."
            )

    reported = store.get_outcome(scope, session_id)  # the session's report so far, if any
    if not retrievals and reported is not None and reported.queries:
        # Reported once with its recalls, which the journal has dropped since (its retention): a new report
        # would credit nothing they showed and take back what the first one credited.
        raise ToolFailure(
            f"session {session_id!r} was reported on {reported.reported_at:%Y-%m-%d}, and its recalls are "
            "older than the journal keeps them (MEMORIA_JOURNAL_RETENTION_DAYS): its report stands as it was "
            "and nothing moved. Report a newer session instead."
        )
    if (
        not retrievals
        and args.session_id is not None
        and args.session_id != caller.session_id
        and reported is None
    ):
        # Another session, named by id, that never recalled here and was never reported: most likely a
        # mistyped id, and a report of it would make up a session (and move what it names).
        raise ToolFailure(
            f"no recall of session {session_id!r} is recorded in org {scope.org_id!r} / project "
            f"{scope.project_id!r}; nothing was reported. Check `session_id` (the structured content of every recall "
            "result carries its session_id), or leave it out to report this connection's own session."
        )
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
            used=used_kept(reported, args._used),
            policy=runtime.credit_policy,
        )
    )
    shown_only = {credit.memory_id for credit in credits if credit.role == "context"}
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
        # Only what will be shown again moves (``without_gone``), read under the lock as the scope holds it,
        # not as the reporter sees it (the session's recalls showed it to whoever recalled): a memory
        # restated since the checks above handed nothing on (no report had moved it), so read as active it
        # would keep the credit where no recall shows it (a review).
        held = store.get_memories(list(dict.fromkeys([*memory_ids, *known])), View(scope))
        expired_by = runtime.clock()
        credits = without_gone(credits, held, expired_by)
        kept = tuple(credit.memory_id for credit in credits)
        reads, memory_ids = reads.without(set(memory_ids) - set(kept)), kept
        # Named ones superseded since they were shown: their credits go on after this sequence (idempotent).
        used = [credit.memory_id for credit in credits if credit.role == "used"]  # handed on as named ones
        known |= {memory_id: held[memory_id] for memory_id in (*known, *used) if memory_id in held}
        runtime.writer.inheritance.hand_on_reported(
            [known[memory_id] for memory_id in (*named, *used) if memory_id in known]
        )
        if (
            previous is not None
            and previous.score == score
            and previous.outcome == args.outcome
            and previous.note == args.note
            and previous.own_credits() == set(credits)
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
                "nothing moved again" + inactive_note(store, known, named, expired_by),
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
        # The weights and protection tiers as they are now (the scope's copy: no table read).
        current = store.get_memories(reads.affected, View(scope))
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
        events = [
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
        clusters, journal = runtime.corroboration, runtime.writer.journal
        write_report(
            store, clusters, policy, runtime.clock, journal, record, reads, current, weights, events, replay
        )

    status: Literal["applied", "replaced", "unchanged", "nothing_to_update"]
    if previous is not None:
        status = "replaced"
        detail = (
            f"session {session_id} was reported before (revision {previous.revision}); this report replaced "
            "it, and the weights were recomputed as if only this report had been made"
        ) + unnamed_note(previous.own_credits(), credits)
    elif not credits and not retrievals:
        status = "nothing_to_update"
        detail = (
            f"session {session_id} recalled nothing in org {scope.org_id!r} / project {scope.project_id!r} "
            + (
                "and none of the memories named can move: nothing moved"
                if named
                else "and named no memory: nothing moved. Report after recalling, and name the memories you used "
                "with helpful_ids"
            )
        )
    elif not credits:
        status = "nothing_to_update"
        detail = (
            f"session {session_id}'s recalls put no memory that is still active into a context above the "
            + (
                # Named, but none of them moves (a trial was told none was named): the notes below say why.
                "relevance floor and none of the memories named can move: nothing moved"
                if named
                else "relevance floor and none was named: nothing moved. Name the memories you used with helpful_ids"
            )
        )
    else:
        status = "applied"
        detail = applied_note(session_id, [credit.role for credit in credits], recalled=bool(queries))
    detail += inactive_note(store, known, named, expired_by) + unseen_note(contexts, named)
    detail += dropped_note(len(shown_only - {c.memory_id for c in credits if c.role == "context"}))
    last = caller.previous_session
    detail += amend_note(
        store, scope, last, named_session=args.session_id is not None, recalled=bool(retrievals)
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


async def handle(args: ReportOutcomeInput, runtime: Runtime, caller: Caller) -> ReportOutcomeOutput:
    return await runtime.lanes.run("report", report_outcome, args, runtime, caller)
