"""The write service: every memory is written here, by remember, remember_many, import and the background
consolidation sweep.

A draft is cleaned (secrets redacted, limits checked) into the record it would store, whose id is derived
from its scope and content, so the same content is stored once. New records are embedded a batch at a
time and inserted (the new memories of remembers in flight at once as one batch, by one thread; other
concurrent inserts share one commit: ``storage.group_commit``), then consolidated against their scope
(``writing.consolidation``); what consolidation changed is told to this process's corroboration
clusters, and every change leaves lineage. A record already stored is attested by another
agent, restored after a retraction, or has its unfinished consolidation resumed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING

from retrieval.outcomes import INITIAL_WEIGHT, WeightPolicy
from retrieval.text import PRECEDING_CHARS, after_purges_forgotten, cached_term_set, clip, searchable_text
from storage.group_commit import GroupCommit
from storage.records import (
    Audience,
    ContradictionRecord,
    LineageEvent,
    MemoryRecord,
    NewMemory,
    ProtectionTier,
    Scope,
    View,
    audience_of,
    written_by,
)
from storage.unfinished import DecidedSupersede, OwedConsolidation, UnfinishedWrites
from writing.behind import HandOnQueue
from writing.consolidation.report import Actor, ConsolidationReport
from writing.consolidation.rules import collapse_batch, explicit_version
from writing.drafts import (
    REFUSED_UPDATE,
    Clock,
    Draft,
    Prepared,
    UpdateRefused,
    WriteLimits,
    WriteRefused,
    WriteResult,
    as_array,
    as_restored,
    cluster_member,
    expiry_under,
    guarded_from,
    identical_note,
    in_batch_order,
    iso,
    no_longer_active,
    prepare,
    restated_change,
    spoken,
)
from writing.episodes import Quote, preceding_contents
from writing.inheritance import Inheritance, current_version
from writing.recovery import Recovery, restore_event
from writing.unfinished import WriteJournal, tags_digest, unmarked_on_failure

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from retrieval.aggregation import CorroborationService
    from retrieval.models.embedders.base import Embedder
    from retrieval.models.llm.base import LanguageModel
    from storage.store import MemoryStore
    from writing.consolidation.service import ConsolidationService, SupersedeBehind

log = logging.getLogger(__name__)

COALESCED_WRITES = 256  # remembers in flight inserted as one batch at most
MAX_SUPERSEDES_BEHIND = 64  # restatements whose supersede is still being committed, at most
MAX_VERSIONS = 50  # links followed along an artifact's chain of versions (as `lineage` follows them)
SUPERSEDES_YIELDING = 4  # with at most this many commits waiting, they let callers take the lock first
COMMIT_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class _Inserted:
    """A remember's new memory as its coalesced batch inserted it, and its vector."""

    record: MemoryRecord
    vector: npt.NDArray[np.float32]
    owed: int | None  # its consolidation, written down as owed (``storage.unfinished``)


def _new_vectors_by_scope(
    news: Sequence[NewMemory], stored: Sequence[tuple[MemoryRecord, bool]], *, consolidating: bool
) -> dict[Scope, list[npt.NDArray[np.float32]]]:
    """The vectors of the memories an insert created whose consolidation runs next, by scope: active,
    stamped as examined on the way in, and ``consolidating`` (the policy is on). Those another process
    stored are not consolidated here, and a product primed for a memory no consolidation searches for would
    wait in its scope's copy, a column of the matrix's height, until the bound drops it (a review)."""
    found: dict[Scope, list[npt.NDArray[np.float32]]] = {}
    if not consolidating:
        return found
    for new, (record, created) in zip(news, stored, strict=True):
        if created and record.status == "active" and record.consolidated_at is not None:
            found.setdefault(record.scope, []).append(as_array(new.vector))
    return found


def joined(*notes: str | None) -> str | None:
    """Notes said one after the other (None for none)."""
    return "; ".join(note for note in notes if note) or None


def absorbed_in_batch(record: MemoryRecord, report: ConsolidationReport, survivor: str) -> WriteResult:
    """The result of a batch item that the consolidation of an earlier item (its ``report``) superseded by
    ``survivor``: a batch is stored whole before any of it is examined, so an earlier item can absorb a later
    one (``collapse_batch`` only folds an item into a later one). It says so, as ``remember`` of it after the
    earlier one would have (a trial found it reading as plainly stored)."""
    absorbed = ConsolidationReport(resolver=report.resolver, absorbed_into=survivor)
    note = f"superseded by {survivor} when an earlier item of this batch was examined"
    return WriteResult(record, True, consolidation=absorbed, note=note)


class WriteService:
    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        consolidation: ConsolidationService,
        corroboration: CorroborationService,
        limits: WriteLimits,
        clock: Clock,
        weights: WeightPolicy | None = None,
        journal: UnfinishedWrites | None = None,
    ) -> None:
        """``weights``: the feedback weight policy, to replay a memory's global weight when it inherits
        the outcome reports' credits of memories it took the place of (default: the spec's). ``journal``:
        this process's journal of unfinished writes, shared with consolidation (default: the store's)."""
        self._store = store
        self._embedder = embedder
        self.consolidation = consolidation
        self._corroboration = corroboration
        self.limits = limits
        self._clock = clock
        self._weights = weights or WeightPolicy()
        # New memories of remembers in flight at once are inserted together (``_insert_coalesced``).
        self._coalesced: GroupCommit[Prepared, _Inserted | None] = GroupCommit(
            self._insert_coalesced,
            max_items=COALESCED_WRITES,
            retry=partial(self._insert_coalesced, retry=True),  # a caller alone, after its batch failed
        )
        # A restatement's supersede is committed right after its remember answers, in the order decided
        # (``storage.pending`` holds it in this process until then).
        self._supersedes = HandOnQueue("memoria-supersede")
        self._holding = threading.Lock()  # a supersede is held and queued in one step (``_SupersedesBehind``)
        # Credits handed on and consolidations owed are written down first: a crash leaves them to the next
        # start (``storage.unfinished``).
        self._journal = WriteJournal(journal or store.unfinished_writes(), clock)
        # What a superseded memory earned goes on to the memory that took its place (``writing.inheritance``).
        self.inheritance = Inheritance(
            store, corroboration, self._journal, self._weights, clock, limits.max_tags
        )
        self.recovery = Recovery(self)  # what dead processes left written down (``writing.recovery``)

    @property
    def store(self) -> MemoryStore:
        return self._store

    @property
    def journal(self) -> WriteJournal:
        return self._journal

    @property
    def corroboration(self) -> CorroborationService:
        return self._corroboration

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def weights(self) -> WeightPolicy:
        return self._weights

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until what superseded memories earned, handed on so far, is carried (``writing.behind``);
        False if ``timeout`` passed first."""
        return self._supersedes.settle(timeout) and self.inheritance.settle(timeout)

    def close(self) -> None:
        """Commit the supersedes and carry what is still being handed on; before the store closes. What a
        timed-out close leaves stays written down for the next start."""
        self._supersedes.close()
        self.inheritance.close()
        self._journal.close()

    def recover_unfinished(self) -> tuple[int, int]:
        """Finish what processes that are gone began and never finished (``storage.unfinished``): the
        supersedes they decided and answered, as decided, then the consolidations owed by memories they
        inserted, then the credits they handed on. Returns how many memories were consolidated and how
        many carries of credits were made. A runtime does it as it is built, before anything is served,
        and in every maintenance round (``server.upkeep.finish_unfinished``)."""
        with self._journal.entries.claimed() as orphans:  # held: another server skips them meanwhile
            return self.recovery.run(orphans)

    def retract(
        self, scope: Scope, memory_ids: Sequence[str], *, reason: str, resolution: str, actor: Actor
    ) -> list[str]:
        """Retract these memories of ``scope`` (``forget``), with lineage and their contradictions closed;
        returns the ids whose status changed. Written down first: a crash between the retraction and its
        lineage leaves it for the next start to record."""
        with self._journal.changing(self._journal.change(scope, memory_ids, "retract", "forget", actor)):
            now = self._clock()
            changed = self._store.retract(scope, memory_ids, now)
            self.consolidation.record_retirement(  # those it retracted: not another call's, twice
                scope,
                changed,
                "retract",
                resolver="forget",
                reason=reason,
                resolution=resolution,
                actor=actor,
                at=now,
            )
        self._corroboration.retire(scope, list(memory_ids))
        return changed

    # -- drafts -----------------------------------------------------------------------------------------

    def prepare(self, draft: Draft) -> Prepared:
        """The record ``draft`` would store: secrets in its content and tags replaced, limits checked
        (``WriteRefused`` names the one it breaks), its id derived from scope and content."""
        return prepare(draft, self.limits, self._clock(), self._embedder.name)

    @after_purges_forgotten  # it reads neighbours' texts into the text caches, a purge may run beside
    def remember(
        self,
        prepared: Prepared,
        *,
        llm: LanguageModel | None,
        replaces: MemoryRecord | None = None,
        by_person: bool = False,
    ) -> WriteResult:
        """Store one prepared record (or say what was already there), then consolidate it. ``replaces``:
        an explicit update of that active memory of the same scope, which the stored memory supersedes
        (lineage "explicit update") before consolidation looks at its neighbours; the new memory takes the
        credits of the sessions the old one served, and the weight they replay.

        A new memory is inserted together with the other remembers in flight (``_insert_coalesced``), then
        consolidated here, in the caller's thread, with the caller's language model. ``by_person``: a
        person at this machine (the command line, the page), whose update of a protected memory replaces
        it, where another agent's only disputes it (``_dispute_update``)."""
        if replaces is not None:
            if replaces.id == prepared.record.id:
                if prepared.redacted:  # the texts differ only in a secret (a trial's changed wifi password)
                    raise WriteRefused(
                        f"with its secrets redacted ({prepared.redacted}), the new content is the same as "
                        f"{replaces.id}'s: secrets are never stored, so only the text around them can be "
                        "updated. Keep the secret in a secret manager, and remember where it is kept"
                    )
                raise WriteRefused(
                    f"the new content is the same as {replaces.id}'s: nothing to update. Pass the corrected text"
                )
            if not by_person and guarded_from(replaces, prepared.record.agent_id):
                return self._dispute_update(prepared, replaces, llm)
            # An update decides on the rows of both memories (an update of a restatement, or back to the text
            # it restated): what a remember decided about them is committed first.
            self._store.settle_supersedes([replaces.id, prepared.record.id])
            with self._store.one_version():
                return replace(self._remember(prepared.record, llm, replaces), redacted=prepared.redacted)
        [inserted] = self._coalesced.run([prepared])
        # Its supersedes are committed behind the call when its consolidation is written down as owed (a
        # crash before they land leaves it to the next start); otherwise (an object store) before it answers.
        behind = None
        if inserted is not None and inserted.owed is not None:
            behind = _SupersedesBehind(inserted.record, self._store, self._holding, self._commit_one)
        with self._store.one_version():  # one freshness check for the reads; writes check under the lock
            if inserted is None:  # stored already, or stated again after a retraction or purge
                result = self._remember(prepared.record, llm)
            else:
                result = self._consolidate_new(inserted.record, inserted.vector, llm, behind=behind)
        # The consolidation owed is done once its supersedes are in. One that failed (its stamp taken off for
        # the sweep, ``unmarked_on_failure``) raised above and stays written down: the next start runs it.
        if inserted is not None:
            self._owed_done_behind(behind, inserted.owed)
        return replace(result, redacted=prepared.redacted)

    def _dispute_update(
        self, prepared: Prepared, protected: MemoryRecord, llm: LanguageModel | None
    ) -> WriteResult:
        """Another agent's explicit update of a protected memory: stored as a memory of its own, beside the
        protected one, disputing it (the pair open, the newer first in recall, the older marked), as another
        agent's correction in words does. One write token must not make a protected fact, which its author
        (and perhaps others) stated, vanish from recall: a trial's third agent replaced such a fact with a
        false host, and the replacement took its tier. Its author can replace it; anyone may forget it. A
        text the protected memory itself replaced (or another superseded text) is refused: stored again it
        would stay superseded, and dispute nothing."""
        record, author = prepared.record, protected.agent_id
        guarded = f"{protected.id} is protected and was remembered by {author!r}: another agent's update does not replace it"
        held = self._store.get_memory(record.id, record.scope)
        if held is not None and held.status == "superseded":
            raise WriteRefused(
                f"{guarded}, and this text is {held.id}, which is superseded: nothing was changed. Ask {author!r} "
                f"to update {protected.id}, or forget {protected.id} first"
            )
        result = self.remember(prepared, llm=llm)
        new = result.memory
        if new.status != "active" or new.id == protected.id:
            said = f"{guarded}; this text is {new.id} ({new.status}), which disputes nothing"
        else:
            detail = f"{record.agent_id} asked to replace {author}'s protected memory"
            self.consolidation.dispute(protected, new, detail)
            where = "is stored as" if result.created else f"was stored already (by {new.agent_id!r}) as"
            said = (
                f"{guarded}. This text {where} {new.id} beside it, disputing it (recall shows both, this one "
                f"first). {author!r} can replace it; or forget {protected.id} first"
            )
        return replace(result, note=f"{result.note}; {said}" if result.note else said)

    @after_purges_forgotten  # it reads neighbours' texts into the text caches, a purge may run beside
    def amend(
        self,
        memory: MemoryRecord,
        actor: Actor,
        *,
        tags: Sequence[str] | None,
        tier: ProtectionTier | None,
        redacted: str | None = None,
        until: datetime | None = None,
        clear_expiry: bool = False,
    ) -> WriteResult:
        """An explicit update that keeps the text: ``memory``'s tags replaced by ``tags`` (already redacted,
        as ``prepare`` makes them) and its protection tier set to ``tier`` (None: as they are), with a
        lineage event that says what they were. A trial could fix a wrong tag, or make an ephemeral memory
        lasting, only by rewording it: restating adds tags and never lowers a tier, and an update with the
        same text was refused. Only the memory's author changes its tier (as a restatement raises it: another
        agent's word must not make someone's memory unchangeable, or expire it), and an immutable memory
        keeps its own. An ephemeral memory made lasting no longer expires; one made ephemeral expires its
        time after it happened, as a memory remembered ephemeral does (refused when that time is past).
        ``until``: when it stops being true now (an expiry given; a lasting memory keeps the one it has);
        ``clear_expiry``: it no longer expires (not an ephemeral one: its tier is its time). Only its author
        changes when it expires (another agent's word must not expire someone's memory)."""
        store = self._store
        with store.exclusive():  # read again and written in one sequence: a purge in between stays purged
            current = store.get_memories([memory.id], memory.scope).get(memory.id)
            if current is None or current.status != "active":
                raise WriteRefused(f"{memory.id} is no longer active: nothing was changed")
            new_tags = list(dict.fromkeys(tags)) if tags is not None else list(current.tags)
            new_tier = tier or current.protection_tier
            if new_tier != current.protection_tier:
                if actor.agent_id != current.agent_id:
                    raise WriteRefused(
                        f"{memory.id} was written by {current.agent_id!r}: only its author changes its "
                        "protection tier; nothing was changed. Leave protection_tier out to change its tags"
                    )
                if current.protection_tier == "immutable":
                    raise WriteRefused(
                        f"{memory.id} is immutable and keeps its tier; nothing was changed. Leave "
                        "protection_tier out to change its tags"
                    )
            if (until is not None or clear_expiry) and actor.agent_id != current.agent_id:
                raise WriteRefused(
                    f"{memory.id} was written by {current.agent_id!r}: only its author changes when it expires; "
                    "nothing was changed. Leave expires_at out to change its tags"
                )
            if clear_expiry and new_tier == "ephemeral":
                # A review: `--until never` of an ephemeral memory was answered "nothing to update".
                raise WriteRefused(
                    f"{memory.id} is ephemeral: its tier is when it expires, and an ephemeral memory always "
                    "does; nothing was changed. Pass protection_tier 'standard' too to keep it"
                )
            if until is not None:
                if new_tier == "immutable":
                    raise WriteRefused(
                        f"{memory.id} is immutable and never expires; nothing was changed. Leave expires_at out"
                    )
                if until <= self._clock():
                    raise WriteRefused(
                        f"`expires_at` {iso(until)} is past (now is {iso(self._clock())}); nothing was changed. "
                        f"Pass when it stops being true, or forget {memory.id} if it no longer holds"
                    )
            if (
                tuple(new_tags) == current.tags
                and new_tier == current.protection_tier
                and (until is None or until == current.expires_at)
                and not (clear_expiry and current.expires_at is not None)
            ):
                raise WriteRefused(
                    f"{memory.id} already has this text, these tags, this tier and this expiry: nothing to "
                    "update. Pass the corrected text, or the tags, protection_tier or expires_at to change"
                )
            expires_at = until or (None if clear_expiry else expiry_under(current, new_tier))
            if until is None and new_tier == "ephemeral":
                # Its time counts from when it happened, as for a memory remembered ephemeral (a trial: an
                # amend counted it from now, and kept a memory that remembering would have refused).
                lasts = timedelta(seconds=self.limits.ephemeral_ttl_seconds)
                expires_at = current.expires_at or current.created_at + lasts
                if expires_at <= self._clock():
                    raise WriteRefused(
                        f"{memory.id} happened at {iso(current.created_at)}: as an ephemeral memory it expired "
                        f"at {iso(expires_at)} ({spoken(lasts)} later: MEMORIA_EPHEMERAL_TTL_SECONDS), so "
                        "recall would never show it; nothing was changed. Keep its tier, or forget it"
                    )
            said = []
            if tuple(new_tags) != current.tags:
                said.append(f"its tags are now {new_tags} (were {list(current.tags)})")
            if until is not None and until != current.expires_at:
                was = (
                    f"was to expire at {iso(current.expires_at)}" if current.expires_at else "did not expire"
                )
                said.append(f"it expires at {iso(until)} (it {was})")
            elif (
                current.expires_at is not None and expires_at is None and new_tier == current.protection_tier
            ):
                said.append(f"it no longer expires (it was to expire at {iso(current.expires_at)})")
            if new_tier != current.protection_tier:
                lasting = (
                    "; it no longer expires" if current.expires_at is not None and expires_at is None else ""
                )
                said.append(f"its protection tier is now {new_tier} (was {current.protection_tier}){lasting}")
            outcome = tags_digest(new_tags, new_tier, expires_at)
            with self._journal.changing(
                self._journal.change(current.scope, [current.id], "amend", "explicit", actor, outcome)
            ):
                self.inheritance.retag(current, new_tags, (new_tier, expires_at))
                event = LineageEvent.new(
                    current.scope,
                    "amend",
                    current.id,
                    resolver="explicit",
                    reason=" and ".join(said),
                    agent_id=actor.agent_id,
                    session_id=actor.session_id,
                    at=self._clock(),
                )
                store.add_lineage([event])
            amended = store.get_memories([current.id], current.scope).get(current.id, current)
        if (
            amended.protection_tier == "immutable" != current.protection_tier
            and amended.weight < INITIAL_WEIGHT
        ):
            # Never weighed below where it started, as a restatement that makes it immutable does.
            self.inheritance.weigh_behind(amended.scope, amended.id)
        note = "updated in place, the text unchanged: " + " and ".join(said)
        return WriteResult(amended, False, note, redacted=redacted)

    def _commit_one(
        self,
        behind: _SupersedesBehind,
        scope: Scope,
        losers: list[str],
        survivor_id: str,
        at: datetime,
        record: Callable[[list[str]], None],
        decided: DecidedSupersede | None = None,
    ) -> None:
        """Queue the commit of one supersede held by ``written``'s consolidation (``_SupersedesBehind``, under
        ``_holding``: commits are queued in the order held, so a chain A -> B -> C commits A's before B's).
        When what it was to be superseded by was superseded meanwhile (a revision, the sweep, another
        process), the step is committed as decided, so the chain reads A -> B -> C; when it was forgotten,
        they stay as they are. One whose commit fails is given up (the rows stay as they are) and
        ``written`` loses its stamp, so that the sweep examines it again."""
        store, written = self._store, behind.written
        # The pairs this write gathered so far are written first: the commit, on another thread, carries the
        # losers' open pairs to the survivor (a pair still gathered was missed, then found both inactive).
        store.write_gathered_contradictions()
        # Written down as decided before the caller is answered: a crash before the commit lands has the next
        # start commit this very step (a language model's decision is not taken again by the rules).
        number = (
            self._journal.write_down(decided, f"the supersede of {losers} by {survivor_id}")
            if decided
            else None
        )

        def commit() -> None:
            # Behind the calls (callers waiting for the write lock go first) while the queue is short; a
            # burst of restatements that outruns the commits takes its turn like any write instead, or the
            # queue would reach its bound and the remembers wait for it (``MAX_SUPERSEDES_BEHIND``).
            yielding = self._supersedes.pending <= SUPERSEDES_YIELDING
            try:
                if not yielding:  # behind the calls, the write lock's sequences wait for it themselves
                    store.after_compactions_beside()  # a status change would preempt its commit
                with store.behind_the_calls() if yielding else nullcontext():
                    changed = store.supersede(scope, losers, survivor_id, at, decided=True)
                    if changed:
                        record(changed)
                    if len(changed) < len(losers):
                        log.info(
                            "%s: %s of %s stay as they are (forgotten or replaced meanwhile, or %s was forgotten)",
                            written.id,
                            [memory_id for memory_id in losers if memory_id not in changed],
                            losers,
                            survivor_id,
                        )
            except Exception:
                log.warning(
                    "could not supersede %s by %s; the sweep looks again", losers, survivor_id, exc_info=True
                )
                try:
                    store.mark_consolidated([written.id], None)
                except Exception:  # stamped, and owed still: the next start consolidates it
                    log.warning("could not clear the consolidation stamp of %s", written.id, exc_info=True)
                    behind.stamp_kept = True
            finally:
                store.release_superseded(losers, survivor_id)
                self._journal.done(number)

        self._supersedes.submit(commit)

    def _owed_done_behind(self, behind: _SupersedesBehind | None, owed: int | None) -> None:
        """Write down that a remember's consolidation is done: now, or after the commits it queued, unless
        one of them failed to take the memory's stamp off (then the next start consolidates it again)."""
        if behind is None or not behind.queued:
            self._journal.done(owed)
            return

        self._store.write_gathered_contradictions()  # (inside a batch's block) before it is written down done

        def done() -> None:  # after this remember's commits, on the same thread
            if not behind.stamp_kept:
                self._journal.done(owed)

        self._supersedes.submit(done)
        # Commits queued faster than they land would hold more and more memories in this process only:
        # past a bound, the remember waits for the queue, as it waited for its own commit before.
        with self._store.awaiting_supersedes():  # the commits it waits for no longer wait for a compaction
            below = self._supersedes.wait_below(MAX_SUPERSEDES_BEHIND, timeout=COMMIT_WAIT_SECONDS)
        if not below:
            log.warning(
                "%d supersedes still being committed after %g s", MAX_SUPERSEDES_BEHIND, COMMIT_WAIT_SECONDS
            )

    @property
    def queued(self) -> int:
        """Remembers waiting to be inserted with the next batch."""
        return self._coalesced.queued

    def _insert_coalesced(self, batch: list[Prepared], *, retry: bool = False) -> list[_Inserted | None]:
        """The new memories of the remembers in flight at once, inserted by one thread: one read of their
        ids per scope, one embedding batch and one commit. A draft whose memory is stored already (or
        another draft of the batch writes it) gets None, and goes the single path (``_remember``: a
        duplicate, a corroboration, a restore). Thirty threads each reading, embedding and inserting
        their own spent most of their time waiting for each other at the scope copies' lock (each commit
        applies its rows to the copy while the others read it) and for the interpreter; the group commit
        of inserts alone left that in place. Consolidation is left to each caller: a draft's consolidation
        may ask its own request's language model, which must hold up no other write."""
        results: list[_Inserted | None] = [None] * len(batch)
        by_scope: dict[Scope, list[int]] = {}
        for index, prepared in enumerate(batch):
            by_scope.setdefault(prepared.record.scope, []).append(index)
        writers: list[int] = []  # the draft that writes each new memory (the first of its id)
        written: list[MemoryRecord] = []
        preceding: dict[str, Quote] = {}
        with self._store.one_version():
            for scope, indices in by_scope.items():
                existing = self._store.get_memories([batch[index].record.id for index in indices], scope)
                first: dict[str, int] = {}
                for index in indices:
                    found = existing.get(batch[index].record.id)
                    # Retried alone after the shared insert failed, a row that insert wrote is this draft's
                    # own: inserted again, it comes back as created (``storage.memories``), and is consolidated.
                    if found is None or (retry and written_by(found, batch[index].record)):
                        first.setdefault(batch[index].record.id, index)
                records = [self.examined_as_written(batch[index].record) for index in first.values()]
                # In an episode, the turn before a memory is the batch's previous one by time (drafts
                # queue in about the order they were made, not exactly).
                preceding |= self.preceding_contents(sorted(records, key=lambda record: record.created_at))
                writers += first.values()
                written += records
            if not written:
                return results
            news = self.embedded(written, preceding)
            # Left open if the insert fails: whether it committed is then unknown, and the next start looks.
            stamped = [index for index, record in enumerate(written) if record.consolidated_at]
            numbers = self._journal.owe_many(
                [OwedConsolidation(written[index].scope, (written[index].id,)) for index in stamped]
            )
            owed: list[int | None] = [None] * len(written)
            for index, number in zip(stamped, numbers, strict=True):
                owed[index] = number
            stored = self._store.insert_many(news, retry=retry)  # one commit for every scope of the batch
            # Each new memory's consolidation searches its neighbours next: one pass over each scope's copy
            # for the batch instead of one a memory.
            consolidating = self.consolidation.policy.enabled
            for scope, vectors in _new_vectors_by_scope(news, stored, consolidating=consolidating).items():
                self._store.prime_nearest(scope, vectors)
        for index, new, number, (record, created) in zip(writers, news, owed, stored, strict=True):
            if created:
                results[index] = _Inserted(record, as_array(new.vector), number)
            else:  # stored by another process meanwhile: its writer owes the consolidation
                self._journal.done(number)
        return results

    def _consolidate_new(
        self,
        stored: MemoryRecord,
        vector: npt.NDArray[np.float32],
        llm: LanguageModel | None,
        *,
        note: str | None = None,
        restored: bool = False,
        replaces: MemoryRecord | None = None,
        behind: SupersedeBehind | None = None,
    ) -> WriteResult:
        """A memory just written (stamped as examined), consolidated against its scope: ``restored`` after
        a retraction or purge (with lineage), or replacing ``replaces`` (an explicit update) first."""
        actor = Actor(stored.agent_id, stored.session_id)
        self.observe(stored)
        with unmarked_on_failure(self._store, [stored.id]):  # inside: a failure must not leave it stamped
            if restored:
                self._store.add_lineage([restore_event(stored, actor, self._clock())])
                # The disputes its retraction closed, with memories still active, open again (examined
                # again below, it finds only what its neighbours say: a trial's undo of a forget of 20
                # values left 28 of their 117 disputes closed between two active memories).
                self.reopen_contradictions(stored)
            if replaces is not None:
                note = self.apply_update(replaces, stored, actor, carry=True, withdraw=True)
                if explicit_version(replaces, stored):  # read again: the update may have made it a version
                    stored = self._store.get_memory(stored.id, stored.scope) or stored
            consolidation = self.consolidation.on_write(
                stored, vector, llm=llm, actor=actor, mark=False, behind=behind
            )
            if replaces is not None:  # what said the same as the text it corrects is disputed by it
                self.consolidation.on_correction(replaces, stored, consolidation)
        self.track(stored.scope, consolidation, stored.id)
        if replaces is not None:
            # Said in the report too (after `track`: the update carried its credits itself), as a version or
            # a supersede the rules found would be (a trial read "superseded: []" after an update).
            consolidation.superseded.insert(0, replaces.id)
            consolidation.resolver = consolidation.resolver or "explicit"
            consolidation.version_of = stored.version_of or consolidation.version_of
        return WriteResult(stored, True, note, consolidation)

    def _remember(
        self, record: MemoryRecord, llm: LanguageModel | None, replaces: MemoryRecord | None = None
    ) -> WriteResult:
        store = self._store
        existing = store.get_memory(record.id, record.scope)
        actor = Actor(record.agent_id, record.session_id)
        note = None
        consolidation: ConsolidationReport | None = None
        expired = existing is not None and existing.past_expiry(self._clock())
        if expired and existing is not None:
            # Stated again after its time ran out, before the maintenance round retracted it: recall no
            # longer shows it, so this write would otherwise be a duplicate no one can read. It expires
            # now (with lineage), and is restored below with this write's tier and expiry.
            self.expire(existing.scope, [existing.id])
            existing = store.get_memory(record.id, record.scope)
        if existing is None or existing.status in ("retracted", "purged"):
            drafted = record
            if existing is not None and existing.status == "retracted":
                record = as_restored(existing, record)
            record = self.examined_as_written(record)
            new = self.embedded([record], self.preceding_contents([record]))[0]  # only what is new
            owed = restoring = None
            if record.consolidated_at is not None or replaces is not None:
                owed = self._journal.owe(
                    OwedConsolidation(record.scope, (record.id,), replaces.id if replaces else None)
                )
            done = False  # a failure leaves the consolidation written down as owed, for the next start
            try:
                if existing is None:
                    stored, created = store.insert_memory(new)
                    if not created and stored.agent_id != record.agent_id:
                        # Another agent's identical write committed in the same group: corroboration.
                        done = True  # its writer owes the consolidation
                        stored, added = self.take_restated(stored, record)
                        return self._attested(stored, record, added)
                else:  # stated again after a retraction or purge: it is live again, with lineage
                    restoring = self._journal.begin_change(
                        self._journal.change(record.scope, [record.id], "restore", "remember", actor)
                    )
                    restored = store.restore_memory(new)
                    if restored is None:  # another remember of the same content restored it first
                        done = True  # that remember owes the consolidation
                        return self._remember(drafted, llm, replaces)
                    stored, created = restored, True
                    # Retracted when its time had run out (by the maintenance round, or just above): expired.
                    timed_out = (
                        existing.status == "retracted"
                        and existing.expires_at is not None
                        and existing.expires_at <= existing.updated_at
                    )
                    was = "had expired" if expired or timed_out else f"had been {existing.status}"
                    note = f"restored: an identical memory {was}"
                if not created:  # the same agent's identical write committed in the same group
                    done = True
                    stored, added = self.take_restated(stored, record)
                    return WriteResult(stored, False, identical_note(added))
                try:
                    result = self._consolidate_new(
                        stored,
                        as_array(new.vector),
                        llm,
                        note=note,
                        restored=existing is not None,
                        replaces=replaces,
                    )
                except WriteRefused:  # the update was refused and what it wrote retracted: nothing owed
                    done = True
                    raise
                done = True
                return result
            finally:
                if done:  # else left written down for the next start, with the restore if it began one
                    self._journal.done(owed)
                    self._journal.done(restoring)
        else:
            stored, created = existing, False
            if replaces is not None and stored.status == "active":
                # The corrected text is already stored (another memory): that one replaces it, with its own
                # reports (the replaced memory's are not poured into them). Unless the two share no word of
                # what they are about: then the text is most likely another memory's, pasted by mistake (a
                # trial's `memoria edit` made a database decision replace a release deadline).
                if not cached_term_set(stored.content) & cached_term_set(replaces.content):
                    raise WriteRefused(
                        f"this text is already memory {stored.id} ({clip(stored.content, 60)!r}), which shares "
                        f"no word with {replaces.id} ({clip(replaces.content, 60)!r}); nothing was changed. Pass "
                        f"{replaces.id}'s corrected text, or forget {replaces.id} if {stored.id} is what stands"
                    )
                return WriteResult(stored, False, self.apply_update(replaces, stored, actor))
            if replaces is not None and stored.status == "superseded":
                # Back to an earlier text (an update reverted): that memory is active again and replaces. Both
                # in one write sequence, once the memory it replaces is read active there: an update refused
                # after the revive would have left the earlier text active beside what stands (a review).
                store.settle_supersedes([replaces.id, stored.id])
                with store.exclusive():
                    current = store.get_memories([replaces.id], replaces.scope).get(replaces.id)
                    if current is None or current.status != "active":
                        raise no_longer_active(replaces)
                    # Written down as one change: a crash between the revive and the update has the next start
                    # finish the update (a review: both texts stayed active for good).
                    back = self._journal.change(
                        stored.scope, [stored.id], "restore", "remember", actor, replaces=replaces.id
                    )
                    with self._journal.changing(back):
                        revived = self.revive(stored, actor, "an explicit update restored it")
                        if revived is not None:
                            return WriteResult(revived, False, self.apply_update(replaces, revived, actor))
            if stored.status == "superseded":
                head = current_version(store, stored)
                now = self._clock()
                if head.id != stored.id and head.past_expiry(now):
                    # What replaced it ran out of time: recall no longer shows it, and it expires now (a
                    # new user's trial was told to update it with replaces=, which was then refused).
                    self.expire(head.scope, [head.id])
                    return self._remember(record, llm, replaces)
                if head.status != "active" and head.id != stored.id:
                    # What replaced it was forgotten since: nothing stands in its place, so said again it is
                    # current again (with lineage), as after a retraction of its own.
                    reason = f"stated again; {head.id}, which had replaced it, is {head.status}"
                    revived = self.revive(stored, actor, reason)
                    if revived is not None and revived.past_expiry(now):
                        # Its own time ran out too: it expires, and is restored with this write's tier and
                        # expiry (a trial was told "restored" of a memory recall would never show).
                        self.expire(revived.scope, [revived.id])
                        return self._remember(record, llm, replaces)
                    if revived is not None:
                        return WriteResult(revived, False, f"restored: {reason}")
                    return self._remember(record, llm, replaces)  # changed meanwhile: look again
                note = f"an identical memory was superseded; the current memory is {head.id}" + (
                    " (immutable)"
                    if head.protection_tier == "immutable"
                    else f". To make this text current again, remember it with replaces={head.id}"
                )
            else:
                stored, added = self.take_restated(stored, record)
                if stored.status != "active":  # forgotten meanwhile: restored, or said to be superseded
                    return self._remember(record, llm, replaces)
                note = identical_note(added)
                if stored.consolidated_at is None and stored.agent_id == record.agent_id:
                    # A retried call (or the next round of one) finishes the consolidation the first one began:
                    # the write is done now, and said stored (a trial: the next round of a call that asked
                    # the client's LLM was told its own new memory was a duplicate of itself).
                    vectors = store.memory_vectors([stored.id], stored.scope)
                    if stored.id in vectors:
                        consolidation = self.consolidation.on_write(
                            stored, vectors[stored.id], llm=llm, actor=actor, late=True
                        )
                        # (the same session's: not a restatement days later of one whose first failed, a review)
                        created = self.consolidation.policy.enabled and stored.session_id == record.session_id
                else:
                    attested = self._attested(stored, record, added)
                    disputed = self._disputed(stored, record.agent_id)
                    return replace(attested, note=joined(attested.note, disputed))
                note = joined(note, self._disputed(stored, record.agent_id))
        if consolidation is not None:
            self.track(stored.scope, consolidation, stored.id)
        return WriteResult(stored, created, note, consolidation)

    def _disputed(self, stored: MemoryRecord, agent_id: str) -> str | None:
        """What a write of ``stored``'s text again is told when newer memories dispute it: said again, it
        stays below them, marked DISPUTED (a trial restated "... port 8080" after 9090 and read only
        "already stored"), and how to make it current."""
        newer = self._store.newer_contradictions(stored.scope, [stored.id]).get(stored.id)
        if not newer:
            return None
        one = len(newer) == 1
        said = (
            f"{'a newer memory disputes' if one else 'newer memories dispute'} it ({', '.join(newer)}): recall "
            f"shows it below {'that one' if one else 'them'}, marked DISPUTED"
        )
        found = self._store.get_memories(newer, View(stored.scope)).values()
        # One of the org's shelf and one of a project only dispute each other: an update of the org's changes
        # it for every project (a review: the advice below had a project's agent replace the org's memory).
        across = [memory for memory in found if memory.scope != stored.scope]
        if across and stored.scope.is_org_shelf:
            projects = ", ".join(sorted({repr(memory.project_id) for memory in across}))
            return (
                f"{said} in project {projects}, whose memory disputes the org's there only: if it is wrong, "
                "correct or forget it in that project"
            )
        if across:
            return (
                f"{said}. {'It is' if one else 'One of them is'} the org's, on its shelf: replacing it changes it "
                "for every project of the org. If it is wrong, ask who writes the org's memories; if this "
                "project's text is wrong, forget it"
            )
        # An update would not replace an immutable one, nor another agent's protected one (a review).
        if any(memory.protection_tier == "immutable" or guarded_from(memory, agent_id) for memory in found):
            return f"{said}. If this text is what holds now, ask the author of the newer one to correct it, or forget it"
        how = f"replaces={newer[0]}" if one else "replaces= each of them in turn"
        return f"{said}. If this text is what holds now, remember it with {how} to make it current"

    def revive(
        self, superseded: MemoryRecord, actor: Actor, reason: str, resolver: str = "remember"
    ) -> MemoryRecord | None:
        """A superseded memory active again, with a ``restore`` lineage record by ``resolver`` giving
        ``reason``; None when it is not superseded any more."""
        with self._journal.changing(
            self._journal.change(superseded.scope, [superseded.id], "restore", resolver, actor)
        ):
            revived = self._store.reactivate(superseded.scope, superseded.id, self._clock())
            if revived is not None:
                self._store.add_lineage([restore_event(revived, actor, self._clock(), reason, resolver)])
        if revived is not None:
            self.observe(revived)
            self.reopen_contradictions(revived)
        return revived

    def reopen_contradictions(self, memory: MemoryRecord) -> None:
        """The contradictions closed when ``memory`` left the active set, with memories still active, open
        again now that it is back (it is not consolidated again: what it says was judged when written; a
        review found a revived claim clustered with its reversal, unmarked)."""
        closed = self._store.contradictions(memory.scope, status="resolved", memory_ids=[memory.id])
        # Those with a memory no longer active stay closed (``put_contradictions`` writes none of them), and
        # so do those with one past its expiry (recall no longer shows it) or that no longer read in date
        # order (its text said again takes the new statement's time: its examination judges the pair again).
        others = self._store.get_memories(
            [pair.newer_id if pair.older_id == memory.id else pair.older_id for pair in closed], memory.scope
        )
        now = self._clock()

        def still_holds(pair: ContradictionRecord) -> bool:
            other = others.get(pair.newer_id if pair.older_id == memory.id else pair.older_id)
            if other is None:
                return True  # (another scope's: a shelf memory's pair kept in a project)
            older, newer = (memory, other) if pair.older_id == memory.id else (other, memory)
            return not other.past_expiry(now) and older.created_at <= newer.created_at

        reopened = self._store.put_contradictions(
            [
                replace(pair, status="open", resolution=None, resolved_at=None)
                for pair in closed
                if still_holds(pair)
            ]
        )
        for pair in reopened:  # (in the pair's own scope: one with the org's shelf is a project's)
            self._corroboration.keep_apart(pair.scope, pair.older_id, pair.newer_id)

    def next_version(self, old: MemoryRecord, new: MemoryRecord) -> bool:
        """Whether ``new``, replacing artifact ``old`` by an explicit update, is its next version: not when
        ``new`` is one of ``old``'s earlier versions (an update back to an earlier text: A -> B -> C, then
        C updated with A's text, would loop the chain A -> C -> B -> A)."""
        if not explicit_version(old, new):
            return False
        current, seen = old, {old.id}
        while current.version_of and current.version_of not in seen and len(seen) < MAX_VERSIONS:
            if current.version_of == new.id:
                return False
            previous = self._store.get_memory(current.version_of, old.scope)
            if previous is None:
                break
            current = previous
            seen.add(current.id)
        return True

    def apply_update(
        self,
        old: MemoryRecord,
        new: MemoryRecord,
        actor: Actor,
        *,
        carry: bool = False,
        withdraw: bool = False,
    ) -> str:
        """``new`` supersedes ``old`` by the caller's word: lineage, its contradictions closed, and with
        ``carry`` its reports' credits carried to ``new`` (a memory just written for it); returns the note
        for the caller. When ``old`` left the active set meanwhile, the update is refused, and with
        ``withdraw`` the memory just written for it is retracted again (with lineage), so a refused update
        leaves nothing new behind."""
        now = self._clock()
        changed = self._store.supersede(old.scope, [old.id], new.id, now)
        if not changed:
            current = self._store.get_memories([old.id], old.scope).get(old.id)
            if current is not None and current.status == "superseded" and current.replaced_by == new.id:
                # Another write's consolidation, between this update's insert and this step, found the two
                # texts alike and superseded the old one by the new one itself (a trial): the update stands
                # as asked. Refused, it would have retracted the new text, and nothing would stand.
                return f"explicit update: {new.id} replaces {old.id}, which stays superseded for audit"
            refused = no_longer_active(old)
            withdrawn = withdraw and bool(self._store.retract(new.scope, [new.id], now))
            if withdrawn:
                self.consolidation.record_retirement(
                    new.scope,
                    [new.id],
                    "retract",
                    resolver="explicit",
                    reason=f"{REFUSED_UPDATE}: {refused.reason}",
                    resolution="explicit update refused",
                    actor=actor,
                    at=now,
                )
                self._corroboration.retire(new.scope, [new.id])
            standing = None  # the memory that stands now, at the end of the replacements (a review)
            if current is not None and (head := current_version(self._store, current)).id != current.id:
                standing = head.id
            raise UpdateRefused(refused.reason, withdrawn=new.id if withdrawn else None, standing=standing)
        if self.next_version(old, new):
            self._store.set_version_of(new.id, old.id)
        self.consolidation.record_retirement(
            old.scope,
            changed,
            "supersede",
            resolver="explicit",
            reason="explicit update",
            resolution=f"superseded by {new.id} (explicit update)",
            actor=actor,
            at=now,
            related_id=new.id,
        )
        if carry:
            # A correction: the sessions the old memory served go on, with the weight they replay; those it
            # misled stay with it. Behind the carries still on their way to the old memory, if any.
            if self.inheritance.pending_heirs({old.id}):
                self.inheritance.hand_on(old.scope, new.id, [(old.id, False)])
            else:
                self.inheritance.inherit_credits(old.scope, new.id, [(old.id, False)])
        self._corroboration.retire(old.scope, changed)
        return f"explicit update: {new.id} replaces {old.id}, which stays superseded for audit"

    def _attested(self, stored: MemoryRecord, record: MemoryRecord, added: str | None = None) -> WriteResult:
        """The same content from another agent: stored once, counted as corroboration (``added``: what the
        write added to the stored memory, if anything: ``take_restated``)."""
        if not self._store.add_attestation(stored, record.agent_id, record.session_id, record.created_at):
            return WriteResult(stored, False, identical_note(added))
        self._corroboration.attest(stored.scope, stored.id, record.agent_id)
        attested = f"already stored by {stored.agent_id}; recorded {record.agent_id} as corroborating it"
        return WriteResult(stored, False, f"{attested}; {added}" if added else attested)

    def take_restated(self, stored: MemoryRecord, record: MemoryRecord) -> tuple[MemoryRecord, str | None]:
        """``_take_restated``, and a word when the statement asked for another kind, which a memory never
        changes (a new user's trial: a duplicate batch item's kind "artifact" was dropped without a word)."""
        current, said = self._take_restated(stored, record)
        if record.kind != current.kind:
            kept = (
                f"kept its kind {current.kind} ({record.kind} was asked: a memory keeps the kind it was first "
                f"stored with; forget it and remember the text again as {record.kind} to change it)"
            )
            said = f"{said} and {kept}" if said else kept
        return current, said

    def _take_restated(self, stored: MemoryRecord, record: MemoryRecord) -> tuple[MemoryRecord, str | None]:
        """An active memory stated again word for word (``record``) keeps what the new statement adds: the
        tags it lacks (a recall filtered by them would otherwise not find it) and, from its own author, a
        protected or immutable tier asked for. Never less: a lower tier or fewer tags leave it as it is, and
        an ephemeral memory keeps its expiry. Returns the memory as it stands now (not active: forgotten
        meanwhile) and what changed ("added its tags ['ops']"), if anything."""
        limit = self.limits.max_tags
        change = restated_change(stored, record, limit)
        if change is None:
            return stored, None
        if tuple(change[0]) == stored.tags and change[1] == stored.protection_tier:
            # Nothing to write (only tags beyond the limit to name): the write lock is not taken.
            return stored, f"left out the tags {change[2]}: a memory has at most {limit}"
        store = self._store
        with store.exclusive():  # read again and written in one sequence: a purge in between stays purged
            current = store.get_memories([stored.id], stored.scope).get(stored.id)
            if current is None:  # unreadable now (rows are never deleted): left as it was read
                return stored, None
            if current.status != "active":
                return current, None
            change = restated_change(current, record, limit)
            if change is None:
                return current, None
            tags, tier, left_out = change
            if tuple(tags) != current.tags or tier != current.protection_tier:
                self.inheritance.retag(current, tags, (tier, expiry_under(current, tier)))
                current = store.get_memories([current.id], current.scope).get(current.id, current)
        if (
            current.protection_tier == "immutable" != stored.protection_tier
            and current.weight < INITIAL_WEIGHT
        ):
            # An immutable memory is never weighed below where it started: its global weight follows, as
            # the weight for a query does already (``retrieval.outcomes``), without waiting for the next
            # report; behind the call, as a report would write it (the reports' lock, then the write lock).
            self.inheritance.weigh_behind(current.scope, current.id)
        said = []
        if added := [tag for tag in record.tags if tag in current.tags and tag not in stored.tags]:
            said.append(f"added its tags {added}")
        if left_out:
            said.append(f"left out the tags {left_out}: a memory has at most {limit}")
        if current.protection_tier != stored.protection_tier:
            said.append(
                f"raised its protection tier from {stored.protection_tier} to {current.protection_tier}"
            )
        return current, " and ".join(said)

    # -- a batch ----------------------------------------------------------------------------------------

    @after_purges_forgotten  # it reads neighbours' texts into the text caches, a purge may run beside
    def remember_many(self, prepared: Sequence[Prepared], *, llm: LanguageModel | None) -> list[WriteResult]:
        """Store a batch of one scope: one embedding batch, one insert; near-duplicates within the batch
        by the same agent collapse into the last one (kept as superseded by it, with lineage); then each
        new memory is consolidated as ``remember`` does. Results in input order."""
        with self._store.one_version():
            return self._remember_many(prepared, llm)

    def _remember_many(self, prepared: Sequence[Prepared], llm: LanguageModel | None) -> list[WriteResult]:
        records = in_batch_order([item.record for item in prepared])
        scope = records[0].scope
        store = self._store
        existing = store.get_memories([r.id for r in records], scope)
        first: dict[str, MemoryRecord] = {}  # the first item of each id: its author writes the memory
        for record in records:
            if record.id not in existing:
                first.setdefault(record.id, record)
        fresh = list(first.values())
        results: dict[str, WriteResult] = {}
        # Records already stored go the single path (attestation, restore, resuming consolidation).
        for record in records:
            if record.id in existing and record.id not in results:
                results[record.id] = self._remember(record, llm)
        audiences: dict[Audience, list[MemoryRecord]] = {}
        for record in fresh:  # a batch's private memories collapse only with their own audience's
            audiences.setdefault(audience_of(record), []).append(record)
        collapsed = [
            pair
            for members in audiences.values()
            for pair in collapse_batch(
                members,
                self.limits.consolidation_text_dedup_threshold,
                across_agents=self.limits.consolidation_across_agents,
            )
        ]
        losers = {loser.id: survivor.id for loser, survivor in collapsed}
        # One write: every new memory stamped as examined (consolidation runs below), and the batch's own
        # near-duplicates stored already superseded by the record that restated them.
        written = [
            replace(self.examined_as_written(record), status="superseded", replaced_by=losers[record.id])
            if record.id in losers
            else self.examined_as_written(record)
            for record in fresh
        ]
        news = self.embedded(written, self.preceding_contents(records))
        stamped = tuple(record.id for record in written if record.consolidated_at and record.id not in losers)
        owed = (
            self._journal.owe(OwedConsolidation(scope, stamped)) if stamped else None
        )  # open if the insert fails
        stored = {record.id: record for record, created in store.insert_many(news) if created}
        # A failure leaves the consolidation written down as owed, for the next start.
        self._consolidate_batch(
            scope, written, stored, losers, {new.record.id: new for new in news}, results, llm
        )
        self._journal.done(owed)
        return self._in_input_order(prepared, results)

    def _consolidate_batch(
        self,
        scope: Scope,
        written: list[MemoryRecord],
        stored: dict[str, MemoryRecord],
        losers: dict[str, str],
        news: dict[str, NewMemory],
        results: dict[str, WriteResult],
        llm: LanguageModel | None,
    ) -> None:
        """``_remember_many``'s part after the insert: the lineage of the batch's own near-duplicates, then
        each new memory consolidated, its result in ``results``."""
        store = self._store
        now = self._clock()
        vectors = {memory_id: as_array(new.vector) for memory_id, new in news.items()}
        authors = {record.id: Actor(record.agent_id, record.session_id) for record in written}
        # The pairs the items dispute are written together as the batch ends (one commit, not one each).
        stored_ids = [record.id for record in written if record.id in stored]
        with unmarked_on_failure(store, stored_ids), store.gathering_contradictions():
            # Only the near-duplicates this batch stored superseded: one another writer stored first stays
            # as it is (active), and no event may say otherwise (a review).
            superseded = {loser: survivor for loser, survivor in losers.items() if loser in stored}
            if superseded:  # inside: a failure here must not leave the batch stamped as examined
                store.add_lineage(
                    [
                        LineageEvent.new(
                            scope,
                            "supersede",
                            loser_id,
                            related_id=survivor_id,
                            resolver="rules:intra-batch",
                            reason="a near-duplicate of a later memory in the same batch",
                            agent_id=authors[survivor_id].agent_id,  # who restated it
                            session_id=authors[survivor_id].session_id,
                            at=now,
                        )
                        for loser_id, survivor_id in superseded.items()
                    ]
                )
                self.inheritance.inherit(scope, list(superseded))  # their tags
            # The items an earlier item's consolidation superseded: its report, and that item.
            gone: dict[str, tuple[ConsolidationReport, str]] = {}
            for record in written:
                if record.id not in stored:
                    results.setdefault(record.id, self._remember(record, llm))
                    continue
                if record.id in losers:
                    results[record.id] = WriteResult(record, True, absorbed_into=losers[record.id])
                    continue
                if record.id in gone:  # not examined again from its copy read as active (a review)
                    report, examined = gone[record.id]
                    # The memory that resolution kept: the earlier item, or one it was absorbed into or
                    # reworded as (a review); read as it will be once the supersede behind the calls lands.
                    now_stored = store.get_memories([record.id], scope).get(record.id)
                    survivor = now_stored.replaced_by if now_stored is not None else None
                    results[record.id] = absorbed_in_batch(record, report, survivor or examined)
                    continue
                self.observe(record)
                report = self.consolidation.on_write(
                    record,
                    vectors[record.id],
                    llm=llm,
                    actor=Actor(record.agent_id, record.session_id),
                    mark=False,
                    written_with=frozenset(stored_ids),
                )
                self.track(scope, report, record.id)
                results[record.id] = WriteResult(record, True, consolidation=report)
                for memory_id in report.superseded:
                    gone.setdefault(memory_id, (report, record.id))
            self._later_in_batch(scope, results)

    def _later_in_batch(self, scope: Scope, results: dict[str, WriteResult]) -> None:
        """The results of a batch's items that the batch's consolidation superseded or revised after their own
        was reported (by a later item's, or theirs found a newer item revising them): each says so, and no
        longer that it contradicts or was kept beside what replaced it (a trial read "kept beside" an item that
        had revised it, and "contradicts" a pair drift no longer listed)."""
        examined = [
            i
            for i, r in results.items()
            if r.consolidation is not None and not r.absorbed_into and not r.consolidation.absorbed_into
        ]
        now = self._store.get_memories(examined, scope)
        for memory_id in examined:
            memory, result = now.get(memory_id), results[memory_id]
            if memory is None or memory.status != "superseded":
                continue
            assert result.consolidation is not None  # (examined: each has one)
            report = replace(result.consolidation, kept=[], contradicts=[])
            note = joined(result.note, f"superseded by {memory.replaced_by} when this batch was examined")
            results[memory_id] = replace(result, memory=memory, consolidation=report, note=note)

    def _in_input_order(
        self, prepared: Sequence[Prepared], results: dict[str, WriteResult]
    ) -> list[WriteResult]:
        """One result per item. An item whose content an earlier item of the batch already had is what
        the same content remembered again would be: from the same agent a duplicate of it, from another
        agent a corroboration of it."""
        seen: set[str] = set()
        ordered = []
        for item in prepared:
            result = results[item.record.id]
            if item.record.id in seen:
                memory, added = result.memory, None
                if memory.status == "active":  # what this item adds (tags, its author's tier) is kept
                    memory, added = self.take_restated(memory, item.record)
                    results[item.record.id] = replace(result, memory=memory)
                if item.record.agent_id != memory.agent_id and memory.status != "purged":
                    result = self._attested(memory, item.record, added)
                else:
                    said = "the same content as an earlier item of this batch"
                    # Folded into a later item with it: said, as for that item (a trial read the id of a
                    # superseded memory as the one stored).
                    folded = result.absorbed_into or (
                        memory.replaced_by if memory.status == "superseded" else None
                    )
                    if folded:
                        said += f", superseded by {folded}"
                    result = WriteResult(memory, False, joined(said, added))
            seen.add(item.record.id)
            ordered.append(replace(result, redacted=item.redacted))
        return ordered

    # -- the parts ----------------------------------------------------------------------------------------

    def examined_as_written(self, record: MemoryRecord) -> MemoryRecord:
        """``record`` stamped as examined by consolidation, which runs right after it is inserted: one
        write instead of an insert and then an update (the update was most of a remember's time)."""
        if not self.consolidation.policy.enabled:
            return record
        return replace(record, consolidated_at=self._clock())

    def embedded(
        self, records: Sequence[MemoryRecord], preceding: dict[str, Quote] | None = None
    ) -> list[NewMemory]:
        """Embed in one batch and attach the full-text field (content, tags, author, date, the memory before
        it in its episode: ``preceding`` maps record id -> that content)."""
        embedder = self._embedder
        vectors = embedder.embed_documents([record.content for record in records])
        news = []
        for record, vector in zip(records, vectors, strict=True):
            quote = (preceding or {}).get(record.id)
            text = searchable_text(
                record.content,
                record.tags,
                record.agent_id,
                record.created_at,
                quote.content if quote else None,
            )
            of, quoted = None, 0
            if quote is not None and quote.content:  # the text ends with "\n" and its first characters
                of, quoted = quote.of, 1 + min(len(quote.content), PRECEDING_CHARS)
            # ``vector``: a float32 row of the embedder's batch
            news.append(NewMemory(record, vector, text, quotes=of, quoted_chars=quoted))
        return news

    def preceding_contents(self, records: Sequence[MemoryRecord]) -> dict[str, Quote]:
        """The memory before each record of an episode, as its search text quotes it (``writing.episodes``)."""
        return preceding_contents(self._store, records)

    def track(self, scope: Scope, report: ConsolidationReport, written_id: str | None = None) -> None:
        """Tell this process's cluster cache what consolidation changed: reworded memories join it, memories
        that left the active set stop counting, absorbed authors count as corroborating their survivor."""
        if report.created:
            for memory in self._store.get_memories(report.created, scope).values():
                self.observe(memory)
        for memory_id, agent_id in report.attested:
            self._corroboration.attest(scope, memory_id, agent_id)
        gone = [*report.superseded, *report.revised]
        if written_id is not None and report.absorbed_into:
            gone.append(written_id)
        if gone:
            self._corroboration.retire(scope, gone)
            restated = [memory_id for memory_id in gone if memory_id not in report.revised]
            self.inheritance.inherit(scope, restated, report.revised)

    def expire(self, scope: Scope, memory_ids: Sequence[str]) -> list[str]:
        """Retract these memories of ``scope`` past their time (ephemeral, or given an expiry), with lineage
        (the maintenance rounds, and a remember that states one again); returns the ids that changed."""
        now, upkeep = self._clock(), Actor("memoria", "upkeep")
        with self._journal.changing(self._journal.change(scope, memory_ids, "expire", "expiry", upkeep)):
            changed = self._store.retract_expired(scope, memory_ids, now)
            self.consolidation.record_retirement(
                scope,
                changed,
                "expire",
                resolver="expiry",
                reason="past its expiry",
                resolution="expired",
                actor=upkeep,
                at=now,
            )
        self._corroboration.retire(scope, changed)
        return changed

    def observe(self, memory: MemoryRecord) -> None:
        """A memory just written (or written around this service, by an import): its corroboration cluster
        learns of it, if others may read it (a private memory corroborates nothing others read)."""
        if memory.shared:
            self._corroboration.observe(memory.scope, cluster_member(memory))


class _SupersedesBehind:
    """The supersedes one remember's consolidation decides (``SupersedeBehind``): held in this process at
    once and queued for their commit (``WriteService._commit_one``) in one step under ``holding``, so
    that commits are queued in the order held."""

    def __init__(
        self,
        written: MemoryRecord,
        store: MemoryStore,
        holding: threading.Lock,
        commit: Callable[
            [
                _SupersedesBehind,
                Scope,
                list[str],
                str,
                datetime,
                Callable[[list[str]], None],
                DecidedSupersede | None,
            ],
            None,
        ],
    ) -> None:
        self.written = written
        self._store = store
        self._holding = holding
        self._commit = commit
        self.queued = 0  # commits queued
        self.stamp_kept = False  # a commit failed and could not take ``written``'s stamp off either

    def __call__(
        self,
        scope: Scope,
        loser_ids: Sequence[str],
        survivor_id: str,
        at: datetime,
        record: Callable[[list[str]], None],
        why: tuple[str, str] = ("supersede", ""),
        actor: Actor | None = None,
    ) -> list[str]:
        # As the write lock's check would: never replaced by a memory that is not active, and only active
        # memories leave the active set (read as this process will have them).
        current = self._store.get_memories([*loser_ids, survivor_id], scope)
        if survivor_id not in current or current[survivor_id].status != "active":
            return []
        active = [
            memory_id
            for memory_id in loser_ids
            if memory_id in current and current[memory_id].status == "active"
        ]
        with self._holding:
            held = self._store.hold_superseded(active, survivor_id)
            if held:
                decided = None
                if actor is not None:
                    action, resolver = why  # not its reason: it may quote the memory (a purge would leave it)
                    decided = DecidedSupersede(
                        scope, tuple(held), survivor_id, action, resolver, actor.agent_id, actor.session_id
                    )
                self._commit(self, scope, held, survivor_id, at, record, decided)
                self.queued += 1
        return held
