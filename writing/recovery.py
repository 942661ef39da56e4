"""What processes that are gone began and never finished, finished by the next start
(``WriteService.recover_unfinished``): the supersedes they decided and answered, the changes of status
they committed without their lineage, the consolidations owed by memories they inserted, and the credits
they handed on (``storage.unfinished``). Each step is idempotent: running one twice, or after a process
that did finish it, changes nothing more."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from storage.records import LineageEvent, MemoryRecord, Scope
from storage.unfinished import (
    DecidedSupersede,
    HandOn,
    OwedConsolidation,
    ReportInFlight,
    StatusChange,
    Unfinished,
)
from writing.consolidation.report import Actor
from writing.unfinished import tags_digest, unmarked_on_failure

if TYPE_CHECKING:
    from pathlib import Path

    from writing.service import WriteService

log = logging.getLogger(__name__)

RECOVERED = "committed before a crash cut off its lineage; recorded by the next start"
# What leaves a memory inactive: the event a restore follows.
RETIRING_ACTIONS = frozenset({"retract", "expire", "supersede", "revise", "absorb", "reword", "purge"})


class Recovery:
    """The write service's recovery of what dead processes left written down."""

    def __init__(self, writer: WriteService) -> None:
        self._writer = writer
        self._store = writer.store
        self._journal = writer.journal
        self._inheritance = writer.inheritance
        self._corroboration = writer.corroboration
        self._clock = writer.clock

    def run(self, orphans: list[tuple[Path, list[Unfinished]]]) -> tuple[int, int]:
        consolidated = carried = 0
        for path, entries in orphans:
            # Each entry is written down again in this process's file as it is begun (a crash now leaves it
            # there), so the orphan file can go once every entry ran; one that failed keeps it for the next
            # round (running an entry again is idempotent).
            failed = False
            for entry in entries:  # what was decided first: the consolidations owed then find it done
                if isinstance(entry, DecidedSupersede):
                    try:
                        self._finish_supersede(entry)
                    except Exception:
                        failed = True
                        log.warning(
                            "could not supersede as decided: %s; the next round tries again",
                            entry,
                            exc_info=True,
                        )
            for entry in entries:  # a change committed before its lineage: recorded first, as it came first
                if isinstance(entry, StatusChange):
                    try:
                        self._finish_status_change(entry)
                    except Exception:
                        failed = True
                        log.warning("could not record %s; the next round tries again", entry, exc_info=True)
            for entry in entries:  # a report's credits settled before a consolidation hands any on
                if isinstance(entry, ReportInFlight):
                    try:
                        self._finish_report(entry)
                    except Exception:
                        failed = True
                        log.warning("could not finish %s; the next round tries again", entry, exc_info=True)
            for entry in entries:
                if isinstance(entry, OwedConsolidation):
                    try:
                        consolidated += self._finish_consolidation(entry)
                    except Exception:
                        failed = True
                        log.warning(
                            "could not consolidate %s; the next round tries again", entry, exc_info=True
                        )
            for entry in entries:
                if isinstance(entry, HandOn):
                    self._inheritance.hand_on(entry.scope, entry.heir_id, list(entry.losers))
                    # Its memory may have been replaced since (no carry of this process was on its way to it
                    # then): its credits go on from there, behind this carry.
                    try:
                        self._inheritance.hand_on_chains(entry.scope, [entry.heir_id])
                    except Exception:
                        log.warning(
                            "could not follow %s along what replaced it", entry.heir_id, exc_info=True
                        )
                    carried += 1
            if not failed:
                self._journal.entries.discard(path)
        return consolidated, carried

    def _finish_report(self, entry: ReportInFlight) -> None:
        """An outcome report a crash cut off between its commits: completed from its credits, or taken back
        (``writing.outcomes.finish_report``). Written down again first, as every entry run here."""
        from writing.outcomes import finish_report  # (as the weights' replay elsewhere: not at start-up)

        number = self._journal.write_down(entry, f"the report of session {entry.session_id}")
        writer = self._writer
        done = finish_report(self._store, self._corroboration, writer.weights, self._clock, entry)
        log.info("the report of session %s cut off by a crash: %s", entry.session_id, done)
        self._journal.done(number)

    def _finish_consolidation(self, owed: OwedConsolidation) -> int:
        """The consolidation a process that died owed memories it inserted stamped as examined (and the
        explicit update they were written for): done now as the remember would have done it, with the
        rules (no request, so no language model), the update's corrections included (``on_correction``,
        whose disputes keep their first detection). Idempotent: a memory no longer active, or never
        inserted, is left alone, and one consolidated already finds its restatements gone from the active
        set. Written down again first, so that a crash now leaves it to the next start once more."""
        store = self._store
        ids = [*owed.memory_ids, *([owed.replaces] if owed.replaces else [])]
        store.settle_supersedes(ids)  # what this process decided about them is committed first
        number = self._journal.owe(owed)  # left open if what follows fails: the next start runs it again
        current = store.get_memories(ids, owed.scope)
        active = [current[i] for i in owed.memory_ids if i in current and current[i].status == "active"]
        if not active:
            self._journal.done(number)
            return 0
        vectors = store.memory_vectors([memory.id for memory in active], owed.scope)
        replaced = current.get(owed.replaces) if owed.replaces else None
        for memory in active:
            actor = Actor(memory.agent_id, memory.session_id)
            self._writer.observe(memory)
            self._mend_retirements(memory, owed.replaces, actor)
            with unmarked_on_failure(store, [memory.id]):
                if replaced is not None and replaced.status == "active":
                    log.info("finishing the explicit update of %s by %s", replaced.id, memory.id)
                    self._writer.apply_update(replaced, memory, actor, carry=True)
                    memory = store.get_memory(memory.id, owed.scope) or memory  # it may be a version now
                # As the update would have, if it replaced the old text (another write may have superseded
                # or forgotten it first: a review): the next version of an artifact (a crash may have come
                # between the supersede and the link), and what said the old text disputed by it.
                now_replaced = store.get_memory(replaced.id, owed.scope) if replaced else None
                if now_replaced is not None and now_replaced.replaced_by != memory.id:
                    now_replaced = None
                if now_replaced is not None and self._writer.next_version(now_replaced, memory):
                    store.set_version_of(memory.id, now_replaced.id)
                    memory = replace(memory, version_of=now_replaced.id)
                if memory.id in vectors:
                    report = self._writer.consolidation.on_write(
                        memory,
                        vectors[memory.id],
                        llm=None,
                        actor=actor,
                        mark=False,
                        late=True,  # what was written since met it
                    )
                    if now_replaced is not None:
                        self._writer.consolidation.on_correction(now_replaced, memory, report)
                    self._writer.track(owed.scope, report, memory.id)
        self._journal.done(number)
        return len(active)

    def _finish_supersede(self, decided: DecidedSupersede) -> None:
        """A supersede decided and answered that a crash kept from being committed (or from its lineage, or
        from what followed it): committed now as decided, with its lineage, the absorbed authors'
        corroboration and the losers' tags and credits handed on. Each step is idempotent."""
        number = self._journal.write_down(
            decided, f"the supersede of {list(decided.losers)} by {decided.survivor}"
        )
        store, scope, now = self._store, decided.scope, self._clock()
        if decided.survivor not in store.get_memories([decided.survivor], scope):
            # A rewording the crash came before: its memory was never inserted, and nothing was changed.
            self._journal.done(number)
            return
        store.supersede(scope, list(decided.losers), decided.survivor, now, decided=True)
        superseded, missing = self._replaced_unrecorded(scope, decided.survivor, decided.losers)
        replaced = sorted(m.id for m in superseded)
        if missing:
            log.info("superseding %s by %s as decided before a crash", missing, decided.survivor)
            self._writer.consolidation.record_retirement(
                scope,
                missing,
                decided.action,
                resolver=decided.resolver,
                # Its reason was not written down (it may quote the memory's words, and a purge would leave them).
                reason="decided before a crash; committed by the next start",
                resolution=f"{decided.action} by {decided.survivor}",
                actor=Actor(decided.agent, decided.session),
                at=now,
                related_id=decided.survivor,
            )
        survivor = store.get_memories([decided.survivor], scope).get(decided.survivor)
        if superseded and survivor is not None:
            for memory_id, agent in self._writer.consolidation.carry_corroboration(survivor, superseded):
                self._corroboration.attest(scope, memory_id, agent)
            self._corroboration.retire(scope, replaced)
            corrected = replaced if decided.action == "revise" else []
            self._inheritance.inherit(scope, [i for i in replaced if i not in corrected], corrected)
        self._journal.done(number)

    def _finish_status_change(self, change: StatusChange) -> None:
        """A change of status or tags that a crash may have cut off from its lineage event: each memory whose
        change is committed and that no event records (``unrecorded_change``) gets its event now, with what
        follows it (a retirement closes the memory's contradictions, a restore reopens them), and a restore
        made for an update back to an earlier text has that update finished. A change that never committed
        needs nothing: nothing was changed, and the caller was never answered. Idempotent."""
        number = self._journal.write_down(change, f"the {change.action} of {list(change.memory_ids)}")
        store, scope = self._store, change.scope
        current = store.get_memories(list(change.memory_ids), scope)
        latest: dict[str, LineageEvent] = {}
        for event in store.lineage(scope, list(current), settled=False):  # oldest first: the last one stays
            if event.memory_id in current:
                latest[event.memory_id] = event
        began = datetime.fromisoformat(change.began)
        unrecorded = [
            memory
            for memory_id, memory in current.items()
            if unrecorded_change(change, memory, latest.get(memory_id), began)
        ]
        if unrecorded:
            ids = [memory.id for memory in unrecorded]
            log.info("recording the %s of %s, which a crash left without lineage", change.action, ids)
            actor, now = Actor(change.agent, change.session), self._clock()
            if change.action in ("retract", "expire"):
                self._writer.consolidation.record_retirement(
                    scope,
                    ids,
                    change.action,
                    resolver=change.resolver,
                    reason=RECOVERED,
                    resolution=f"{change.action} (recorded by the next start)",
                    actor=actor,
                    at=now,
                )
                self._corroboration.retire(scope, ids)
            elif change.action == "restore":
                store.add_lineage(
                    [restore_event(memory, actor, now, RECOVERED, change.resolver) for memory in unrecorded]
                )
                for memory in unrecorded:
                    self._writer.observe(memory)
                    self._writer.reopen_contradictions(memory)
            else:
                store.add_lineage(
                    [
                        LineageEvent.new(
                            scope,
                            "amend",
                            memory.id,
                            resolver=change.resolver,
                            reason=f"{RECOVERED}: its tags are {list(memory.tags)} and its protection tier "
                            f"{memory.protection_tier}; what they were is not known",
                            agent_id=actor.agent_id,
                            session_id=actor.session_id,
                            at=now,
                        )
                        for memory in unrecorded
                    ]
                )
        if change.replaces is not None:
            self._finish_update_back(change, current)
        self._journal.done(number)

    def _finish_update_back(self, change: StatusChange, current: dict[str, MemoryRecord]) -> None:
        """The explicit update a restore was made for (back to an earlier text), which a crash cut off after
        the restore: the restored memory, active, replaces the memory named, if that one is still active."""
        assert change.replaces is not None
        replaced = self._store.get_memories([change.replaces], change.scope).get(change.replaces)
        if replaced is None or replaced.status != "active":
            return
        for memory in current.values():
            if memory.status == "active" and memory.id != replaced.id:
                log.info("finishing the explicit update of %s by %s", replaced.id, memory.id)
                self._writer.apply_update(replaced, memory, Actor(change.agent, change.session))

    def _mend_retirements(self, memory: MemoryRecord, replaces: str | None, actor: Actor) -> None:
        """What a crash cut off after a status change: the memories ``memory`` replaced that no lineage event
        names as replaced by it get one now, their contradictions closed (a status change and the lineage
        that follows it are separate commits; their resolver says that recovery recorded them), and the
        memory of the explicit update it was written for (``replaces``) hands its credits on: a crash may
        also have come between that update's lineage and its carry."""
        scope = memory.scope
        superseded, missing = self._replaced_unrecorded(scope, memory.id)
        for loser_id in missing:
            explicit = loser_id == replaces
            log.info("recording that %s superseded %s, which a crash left unrecorded", memory.id, loser_id)
            self._writer.consolidation.record_retirement(
                scope,
                [loser_id],
                "supersede",
                resolver="explicit" if explicit else "recovery",
                reason="explicit update" if explicit else "superseded before a crash cut off its lineage",
                resolution=f"superseded by {memory.id}" + (" (explicit update)" if explicit else ""),
                actor=actor,
                at=self._clock(),
                related_id=memory.id,
            )
            self._corroboration.retire(scope, [loser_id])
        # Its credits, with or without its lineage (handing on is idempotent).
        if replaces is not None and any(loser.id == replaces for loser in superseded):
            self._inheritance.hand_on(scope, memory.id, [(replaces, False)])

    def _replaced_unrecorded(
        self, scope: Scope, survivor_id: str, among: Sequence[str] | None = None
    ) -> tuple[list[MemoryRecord], list[str]]:
        """The superseded memories ``survivor_id`` replaced (of ``among``, if given), and the ids of those no
        lineage event names as replaced by it (a crash came between a status change and its lineage)."""
        superseded = [
            loser
            for loser in self._store.replaced_by(scope, [survivor_id])
            if loser.status == "superseded" and (among is None or loser.id in among)
        ]
        ids = sorted(loser.id for loser in superseded)
        recorded = {e.memory_id for e in self._store.lineage(scope, ids) if e.related_id == survivor_id}
        return superseded, [memory_id for memory_id in ids if memory_id not in recorded]


def unrecorded_change(
    change: StatusChange, memory: MemoryRecord, latest: LineageEvent | None, began: datetime
) -> bool:
    """Whether ``change`` is committed on ``memory`` and no lineage event records it: retracted (or expired)
    with a last event that is no retraction; active again with a last event that retired it; amended
    (its tags and tier as the change wrote them) with no amend event since the change began."""
    if change.action in ("retract", "expire"):
        return memory.status == "retracted" and (latest is None or latest.action not in ("retract", "expire"))
    if change.action == "restore":
        return memory.status == "active" and latest is not None and latest.action in RETIRING_ACTIONS
    if change.action == "amend":
        amended = tags_digest(memory.tags, memory.protection_tier, memory.expires_at) == change.outcome
        return amended and (latest is None or latest.action != "amend" or latest.at < began)
    return False


def restore_event(
    memory: MemoryRecord,
    actor: Actor,
    at: datetime,
    reason: str = "the same content was remembered again",
    resolver: str = "remember",
) -> LineageEvent:
    return LineageEvent.new(
        memory.scope,
        "restore",
        memory.id,
        resolver=resolver,
        reason=reason,
        agent_id=actor.agent_id,
        session_id=actor.session_id,
        at=at,
    )
