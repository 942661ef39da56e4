"""The write side of an outcome report: what a report reads before it writes (and catches up on under the
lock), the scores a session's contexts showed, and the global weights replayed from every session's
current report, written with the corroboration clusters' canonical members following them. The
``report_outcome`` tool decides what a report credits; this module turns credits into weights."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, cast

from retrieval.outcomes import ShownContext, ShownMemory, WeightPolicy, with_credit
from retrieval.trace import lent_after_weighting, parse_trace
from storage.records import (
    CreditedSession,
    MemoryRecord,
    OutcomeLabel,
    OutcomeRecord,
    Reach,
    RetrievalRecord,
    Scope,
    View,
    WeightEvent,
    stored_in,
)
from storage.unfinished import ReportInFlight

if TYPE_CHECKING:
    from storage.store import MemoryStore
    from writing.unfinished import WriteJournal

log = logging.getLogger(__name__)


class ClusterWeights(Protocol):
    """The corroboration clusters, whose canonical member follows the weights (``CorroborationService``)."""

    def set_weights(self, scope: Scope, weights: Mapping[str, float]) -> None: ...


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

    def without(self, dropped: set[str]) -> ReportReads:
        """These reads for a report that no longer credits ``dropped`` (gone since they were read): those
        the session's earlier report (or one that failed half-way) credited are still recomputed."""
        kept = {*(self.previous.memory_ids if self.previous else ()), *self.half_done}
        return replace(self, affected=tuple(m for m in self.affected if m not in dropped or m in kept))


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


def used_kept(earlier: OutcomeRecord | None, used: Sequence[str]) -> tuple[str, ...]:
    """``used`` (what the session-end hook saw the agent use), with the memories the session's ``earlier``
    report credited so: a later report of it (the agent's own, the hook's after /clear, a command's)
    replaces that report, not the evidence that the agent used them. A memory the new report names takes
    the agent's word instead (``assign_credit``)."""
    kept = [credit.memory_id for credit in earlier.own_credits() if credit.role == "used"] if earlier else []
    return tuple(dict.fromkeys([*kept, *used]))


def shown_contexts(
    retrievals: Sequence[RetrievalRecord],
) -> tuple[list[ShownContext], tuple[str, ...], list[int]]:
    """What each recall of the session put into its context, in the context's order, with each memory's
    score there before feedback weighting and the final score it was ranked by; the session's distinct
    queries; and, per context, its query's index."""
    contexts = []
    queries: dict[str, int] = {}
    query_of_context = []
    for retrieval in retrievals:
        trace = parse_trace(retrieval.trace_json)
        placed = sorted(
            (entry for entry in trace.get("candidates", ()) if entry.get("in_context")),
            key=lambda entry: entry.get("context_position") or 0,
        )
        shown = tuple(
            ShownMemory(entry["id"], unweighted_score(entry), final_score(entry)) for entry in placed
        )
        contexts.append(ShownContext(retrieval.query, shown))
        query_of_context.append(queries.setdefault(retrieval.query, len(queries)))
    return contexts, tuple(queries), query_of_context


def final_score(entry: dict[str, Any]) -> float | None:
    """The score a traced candidate was ranked by in its recall's result (None in a trace without it)."""
    final = entry["scores"].get("final")
    return None if final is None else float(final)


def unweighted_score(entry: dict[str, Any]) -> float:
    """A traced candidate's score before feedback weighting: relevance plus boost, faded by age decay,
    for a direct match; the propagated score for an episode sibling (its final score without its own
    weight, which carries its source's decay). What its episode neighbours and its answer type lent it is
    not its own."""
    scores = entry["scores"]
    if entry.get("source") == "sibling":
        weight = scores.get("feedback_weight") or 1.0
        propagated = float(scores["final"]) - lent_after_weighting(scores)
        return propagated / min(1.0, weight) if weight > 0 else 0.0
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
    store: MemoryStore,
    clusters: ClusterWeights,
    current: Mapping[str, MemoryRecord],
    weights: Mapping[str, float],
    at: datetime,
    *,
    only_changed: bool = True,
) -> None:
    """Write ``weights``; with ``only_changed``, those that differ from ``current`` (this process's view)."""
    changed = {m: w for m, w in weights.items() if not only_changed or w != current[m].weight}
    store.set_weights(changed, at)
    # The canonical member of each cluster follows the weights, in the scope each memory is kept in (the
    # project's, or the org shelf's).
    for where, memories in stored_in(current[m] for m in changed).items():
        clusters.set_weights(where, {m.id: changed[m.id] for m in memories})


def converge(
    store: MemoryStore,
    clusters: ClusterWeights,
    policy: WeightPolicy,
    clock: Callable[[], datetime],
    scope: Scope,
    memory_ids: Sequence[str],
    replayed: Replay,
) -> None:
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
    if store.excludes_other_processes:
        return  # the reports' lock kept other processes' reports out while these weights were computed
    seen = _replay_keys(replayed, memory_ids)  # in replay order: the weights depend on it
    must_write = True
    for _ in range(8):
        latest = store.credits_for(scope, memory_ids, across_org=True)
        now_seen = _replay_keys(latest, memory_ids)
        if now_seen == seen and not must_write:
            return
        must_write = False
        seen = now_seen
        current = store.get_memories(memory_ids, View(scope))
        # Every weight, changed or not in this process's view: another replica may have written over
        # one since, and skipping it on a stale view would leave that replica's weight standing.
        weights = replayed_weights(policy, current, latest)
        write_weights(store, clusters, current, weights, clock(), only_changed=False)
    log.warning("outcome reports kept arriving while weights were recomputed; the next report settles them")


def _replay_keys(replay: Replay, memory_ids: Sequence[str]) -> list[list[tuple[str, int, float, float]]]:
    return [
        [(c.session_id, c.revision, c.credit.share, c.credit.score) for c in replay.get(memory_id, ())]
        for memory_id in memory_ids
    ]


def write_report(
    store: MemoryStore,
    clusters: ClusterWeights,
    policy: WeightPolicy,
    clock: Callable[[], datetime],
    journal: WriteJournal,
    record: OutcomeRecord,
    reads: ReportReads,
    current: Mapping[str, MemoryRecord],
    weights: Mapping[str, float],
    events: Sequence[WeightEvent],
    replay: Replay,
) -> None:
    """Write a report (caller holds ``reporting()``): the weights of every memory it affects, their weight
    events, the session's credits and, last, its row (a retry after a failure in between finds no
    matching report and redoes the whole update instead of answering "unchanged" over stale weights).
    Four commits, written down first (``ReportInFlight``): a process killed between them leaves the
    report to the next start, which completes it or takes it back (``finish_report``). ``current``: the
    affected memories as the weights were computed from them."""
    scope = Scope(record.org_id, record.project_id)
    entry = ReportInFlight(
        scope,
        record.session_id,
        record.revision,
        record.outcome,
        record.score,
        record.first_reported_at.isoformat(),
        record.reported_at.isoformat(),
        record.memory_ids,
        reads.affected,
    )
    number = journal.write_down(entry, f"the report of session {record.session_id}")
    write_weights(store, clusters, current, weights, record.reported_at)
    store.add_weight_events(events)
    store.put_outcome(record, reads.previous, cleared=reads.half_done, first=reads.session_revision is None)
    converge(store, clusters, policy, clock, scope, reads.affected, replay)
    journal.done(number)


def finish_report(
    store: MemoryStore,
    clusters: ClusterWeights,
    policy: WeightPolicy,
    clock: Callable[[], datetime],
    entry: ReportInFlight,
) -> str:
    """A report a dead process left part-way (``write_report``), finished: with its credits committed and
    its row not, it is completed (its row saved from the entry, without its note, which the entry does not
    keep); with its credits not committed, it is taken back (the weight events it wrote are deleted).
    Either way the weights of every memory it affected are replayed from the reports there are. A
    session reported again since, by a live server before this one recovered the entry, at this report's
    revision (its row never saved) took its place: the dead report is taken back, its weight events (its
    revision, at its time) deleted, the live report's kept (a review: two events of one revision, one of a
    report that never was); one saved and then replaced keeps its events, as history. Idempotent.
    Returns what was done, for the log."""
    scope, at = entry.scope, datetime.fromisoformat(entry.reported_at)
    with store.reporting():
        saved = store.get_outcome(scope, entry.session_id)
        unsaved = saved is None or saved.revision < entry.revision  # no row of its revision, nor later
        if saved is not None and (saved.revision, saved.reported_at) == (entry.revision, at):
            done = "saved already"
        elif unsaved and store.session_feedback(scope, entry.session_id).revision == entry.revision:
            outcome = cast(OutcomeLabel, entry.outcome)  # as the report wrote it
            store.put_report_row(
                OutcomeRecord(
                    session_id=entry.session_id,
                    org_id=scope.org_id,
                    project_id=scope.project_id,
                    outcome=outcome,
                    score=entry.score,
                    note=None,
                    memory_ids=entry.memory_ids,
                    first_reported_at=datetime.fromisoformat(entry.first_reported_at),
                    reported_at=at,
                    revision=entry.revision,
                )
            )
            done = "completed from its credits"
        elif unsaved or store.weight_event_times(scope, entry.session_id, entry.revision) - {at}:
            # Its credits never committed, or a live server's report of the session took its revision (and
            # its events) first: this one never was, and its events go.
            store.drop_weight_events(scope, entry.session_id, entry.revision, at)
            done = "taken back"
        else:  # it was saved, and the session reported again since (a second review): its events stay
            done = "saved already, and reported again since"
        replay_weights(store, clusters, policy, clock, View(scope), entry.affected)
    return done


def replay_weights(
    store: MemoryStore,
    clusters: ClusterWeights,
    policy: WeightPolicy,
    clock: Callable[[], datetime],
    reach: Reach,
    memory_ids: Sequence[str],
) -> None:
    """Write the global weights of these memories of ``reach`` replayed from every report's credits, as a
    report would (inside the caller's ``reporting`` sequence): after credits were carried to a memory, and
    after a report a crash cut off was finished. Replicas on an object store share no lock: the weights
    written must replay every report there is (``converge``)."""
    current = store.get_memories(list(memory_ids), reach)
    if not current:
        return
    scope = reach.home if isinstance(reach, View) else reach
    replay = store.credits_for(scope, list(current), across_org=True)
    write_weights(store, clusters, current, replayed_weights(policy, current, replay), clock())
    converge(store, clusters, policy, clock, scope, list(current), replay)
