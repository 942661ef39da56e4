"""What a superseded memory earned, handed on to the memory that stands in its place: its tags at once, and
its outcome reports' credits with the global weight they replay behind the call, by one thread of their own
(``writing.behind``), each carry written down first (``storage.unfinished.HandOn``)."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from functools import partial
from itertools import pairwise
from typing import TYPE_CHECKING

from retrieval.outcomes import WeightPolicy
from retrieval.text import searchable_text
from storage.records import LineageEvent, MemoryRecord, ProtectionTier, Scope
from storage.unfinished import HandOn
from writing.behind import HandOnQueue
from writing.drafts import tags_to_add
from writing.episodes import preceding_contents

if TYPE_CHECKING:
    from retrieval.aggregation import CorroborationService
    from storage.store import MemoryStore
    from writing.unfinished import WriteJournal

log = logging.getLogger(__name__)


class Inheritance:
    def __init__(
        self,
        store: MemoryStore,
        corroboration: CorroborationService,
        journal: WriteJournal,
        weights: WeightPolicy,
        clock: Callable[[], datetime],
        max_tags: int,
    ) -> None:
        self._store = store
        self._corroboration = corroboration
        self._journal = journal
        self._weights = weights
        self._clock = clock
        self._max_tags = max_tags
        # Credits a superseded memory earned are carried after its successor's caller is answered; the
        # memories they are on their way to (a count per heir, of the carries queued or running).
        self._hand_ons = HandOnQueue("memoria-hand-on")
        self._heirs_pending: Counter[str] = Counter()
        self._heirs_lock = threading.Lock()

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until what was handed on so far is carried; False if ``timeout`` passed first."""
        return self._hand_ons.settle(timeout)

    def close(self) -> None:
        """Carry what is still being handed on (what a timed-out close leaves stays written down)."""
        self._hand_ons.close()

    def weigh_behind(self, scope: Scope, memory_id: str) -> None:
        """Write ``memory_id``'s global weight replayed from its credits behind the call, as a report would
        write it (the reports' lock, then the write lock)."""
        self._hand_ons.submit(partial(self._weigh_behind, scope, memory_id))

    def inherit(self, scope: Scope, restated: Sequence[str], corrected: Sequence[str] = ()) -> None:
        """What consolidation just superseded hands what it had earned to the memory that now stands in
        its place (followed through ``replaced_by``), as an explicit update does: its tags (a restatement
        made without them would otherwise drop out of every recall filtered by them) and its outcome
        reports' credits, with the global weight they replay (a restated memory that helped would otherwise
        start again at 1.0, and an agent restating what it learned would undo what its reports taught).
        The tags are handed on before this returns; the credits right after, by one thread of their own
        (``writing.behind``: they wait for the reports' lock, and the caller's write is committed already).
        ``restated``: the same claim again (a restatement, a rewording, a newer version), which inherits
        every credit; ``corrected``: a belief a newer memory revised, whose failures are not the
        correction's (only the credits of sessions that went at least partly well go on). Only a memory
        a report moved has credits to hand on: a weight still at 1.0 means none did (or only partial
        outcomes, which move nothing), and the reports' lock is not taken for it.

        Best effort: the change consolidation made is committed already, and a failure here leaves the
        memory that stands with what it had (logged), not the caller with an error."""
        try:
            self._inherit(scope, restated, corrected)
        except Exception:
            log.warning("could not hand on what the superseded memories earned", exc_info=True)

    def _inherit(self, scope: Scope, restated: Sequence[str], corrected: Sequence[str]) -> None:
        store = self._store
        blamed = set(restated)
        # Asked before the weights are read: a carry to one of them that finishes in between has written
        # its weight by the time it leaves this set.
        receiving = self.pending_heirs({*restated, *corrected})
        heirs: dict[str, list[MemoryRecord]] = {}
        for memory in store.get_memories([*restated, *corrected], scope).values():
            if memory.status != "superseded" or not memory.replaced_by:
                continue
            head = current_version(store, memory)  # the memory that took its place may be superseded too
            if head.id != memory.id and head.status == "active":
                heirs.setdefault(head.id, []).append(memory)
        for heir_id, losers in heirs.items():
            self._inherit_tags(scope, heir_id, losers)
            # A memory with credits to hand on: a report moved it, or a carry is on its way to it (a
            # restatement of a restatement), which the carry queued here follows.
            credited = [
                (memory.id, memory.id in blamed)
                for memory in losers
                if memory.weight != 1.0 or memory.id in receiving
            ]
            if credited:
                self.hand_on(scope, heir_id, credited)

    def hand_on_reported(self, named: Sequence[MemoryRecord]) -> None:
        """A report named these memories, and some were superseded since the session saw them (an agent
        that recalled a memory, restated it, then reported on what it recalled): the credits the report
        gave them go on to the memory that stands in their place, step by step along ``replaced_by``, as
        they would have gone had the report come before the change (a correction takes none of a failure).
        Behind the call, like every carry of credits; carrying is idempotent."""
        by_scope: dict[Scope, list[str]] = {}
        for memory in named:
            if memory.status == "superseded":
                by_scope.setdefault(memory.scope, []).append(memory.id)
        for scope, memory_ids in by_scope.items():
            try:  # the report is committed: a failure here leaves the credit where it is (logged)
                self.hand_on_chains(scope, memory_ids)
            except Exception:
                log.warning(
                    "could not hand on a report's credits to what replaced %s", memory_ids, exc_info=True
                )

    def hand_on_chains(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        store = self._store
        # Each named memory's chain in order, walked on its own (a chain through a memory another chain
        # starts from is carried again from there: carrying is idempotent, and the later carry then takes
        # on what the earlier step brought).
        steps: list[tuple[str, str]] = []  # (superseded, what took its place)
        for memory in store.get_memories(memory_ids, scope).values():
            chain = [memory, *successors(store, memory)]
            steps += [(loser.id, heir.id) for loser, heir in pairwise(chain) if loser.status == "superseded"]
        if not steps:
            return
        # How each step was taken, by its latest lineage event: a correction (a revision, an explicit
        # update) takes none of a failure; a restatement, a rewording or a newer version takes all.
        latest: dict[tuple[str, str], LineageEvent] = {}
        # Not waiting for supersedes still being committed (a report holds the reports' lock here): a step
        # without its event yet is a restatement, which takes the whole blame.
        for event in store.lineage(scope, list(dict.fromkeys(loser for loser, _ in steps)), settled=False):
            if event.related_id is not None:
                latest[(event.memory_id, event.related_id)] = event  # oldest first: the last one stays
        for loser, heir in steps:
            step = latest.get((loser, heir))
            corrected = step is not None and (
                step.action == "revise" or (step.action == "supersede" and step.resolver == "explicit")
            )
            self.hand_on(scope, heir, [(loser, not corrected)])

    def pending_heirs(self, memory_ids: set[str]) -> set[str]:
        """Those of ``memory_ids`` that a queued or running carry of credits is for."""
        with self._heirs_lock:
            return {memory_id for memory_id in memory_ids if self._heirs_pending[memory_id] > 0}

    def hand_on(self, scope: Scope, heir_id: str, losers: list[tuple[str, bool]]) -> None:
        """Carry the credits of ``losers`` (id, whether their failures go too) to ``heir_id`` behind the
        call, after the carries queued before it. Always to that memory, even if it is superseded by then:
        its own successor's carry, queued after this one, takes them on from there, with the blame that
        step deserves (a correction takes none)."""
        written = self._journal.write_down(
            HandOn(scope, heir_id, tuple(losers)), f"the credits handed on to {heir_id}"
        )
        with self._heirs_lock:
            self._heirs_pending[heir_id] += 1

        def carry() -> None:
            try:
                with self._store.behind_the_calls():
                    self.inherit_credits(scope, heir_id, losers)
            finally:
                with self._heirs_lock:
                    self._heirs_pending[heir_id] -= 1
                    if self._heirs_pending[heir_id] <= 0:
                        del self._heirs_pending[heir_id]
                self._journal.done(written)

        self._hand_ons.submit(carry)

    def _inherit_tags(self, scope: Scope, heir_id: str, losers: Sequence[MemoryRecord]) -> None:
        store = self._store
        heir = store.get_memories([heir_id], scope).get(heir_id)
        if heir is None or not tags_to_add(heir, losers):
            return  # nothing to hand on: the write lock is not taken (every writer would wait for it)
        # Read again and written in one sequence of the write lock: a purge in between never has its text back.
        with store.exclusive():
            heir = store.get_memories([heir_id], scope).get(heir_id)
            if heir is None or heir.status != "active":
                return
            added = tags_to_add(heir, losers)
            tags = [*heir.tags, *added][: max(self._max_tags, len(heir.tags))]
            if tuple(tags) == heir.tags:
                return
            self.retag(heir, tags)

    def retag(
        self,
        memory: MemoryRecord,
        tags: Sequence[str],
        tier: tuple[ProtectionTier, datetime | None] | None = None,
    ) -> None:
        """Write ``memory``'s tags with the search text that indexes them (and with ``tier`` its protection
        tier and expiry), inside the caller's write sequence, on the memory as read in it."""
        quote = preceding_contents(self._store, [memory]).get(memory.id)
        text = searchable_text(
            memory.content, tags, memory.agent_id, memory.created_at, quote.content if quote else None
        )
        self._store.set_tags(memory.id, tags, text, self._clock(), tier=tier)

    def inherit_credits(self, scope: Scope, heir_id: str, losers: Sequence[tuple[str, bool]]) -> None:
        store = self._store
        with store.reporting():  # as a report: its credits and the weights they replay, one at a time
            carried = sum(
                store.carry_credits(scope, memory_id, heir_id, blame=blame) for memory_id, blame in losers
            )
            if carried:
                self._weigh_again(scope, heir_id)

    def _weigh_behind(self, scope: Scope, memory_id: str) -> None:
        with self._store.behind_the_calls(), self._store.reporting():
            self._weigh_again(scope, memory_id)

    def _weigh_again(self, scope: Scope, memory_id: str) -> None:
        """Write ``memory_id``'s global weight replayed from its credits, as a report would (inside the
        caller's ``reporting`` sequence)."""
        from writing.outcomes import replay_weights

        replay_weights(self._store, self._corroboration, self._weights, self._clock, scope, [memory_id])


def successors(store: MemoryStore, memory: MemoryRecord) -> Iterator[MemoryRecord]:
    """The memories that took ``memory``'s place in turn, along ``replaced_by`` (an update that went back,
    A -> B -> A, ends the walk)."""
    seen = {memory.id}
    while memory.replaced_by and memory.replaced_by not in seen:
        following = store.get_memory(memory.replaced_by, memory.scope)
        if following is None:
            return
        seen.add(following.id)
        yield following
        memory = following


def current_version(store: MemoryStore, memory: MemoryRecord) -> MemoryRecord:
    """Follow ``replaced_by`` to the memory that is authoritative now."""
    *_, head = [memory, *successors(store, memory)]
    return head
