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

import hashlib
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import pairwise
from typing import TYPE_CHECKING, Protocol

from retrieval.outcomes import INITIAL_WEIGHT, WeightPolicy
from retrieval.redaction import Redacted, redact
from retrieval.stages.corroboration import ClusterMember
from retrieval.text import (
    PRECEDING_CHARS,
    cached_term_set,
    clip,
    content_hash,
    has_visible_text,
    negated,
    searchable_text,
    wording,
)
from storage.group_commit import GroupCommit
from storage.records import (
    Audience,
    LineageEvent,
    MemoryKind,
    MemoryRecord,
    NewMemory,
    ProtectionTier,
    Scope,
    View,
    Visibility,
    audience_of,
    org_shelf,
    written_by,
)
from storage.unfinished import (
    DecidedSupersede,
    HandOn,
    OwedConsolidation,
    StatusChange,
    Unfinished,
    UnfinishedWrites,
)
from writing.behind import HandOnQueue
from writing.consolidation.report import Actor, ConsolidationReport
from writing.consolidation.rules import collapse_batch

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import numpy.typing as npt

    from retrieval.aggregation import CorroborationService
    from retrieval.models.embedders.base import Embedder
    from retrieval.models.llm.base import LanguageModel
    from storage.store import MemoryStore
    from writing.consolidation.service import ConsolidationService, SupersedeBehind

log = logging.getLogger(__name__)

FUTURE_SLACK = timedelta(minutes=5)  # clocks of different machines disagree a little
EARLIEST = datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)  # an agent's memory dated before it is a placeholder
COALESCED_WRITES = 256  # remembers in flight inserted as one batch at most
MAX_SUPERSEDES_BEHIND = 64  # restatements whose supersede is still being committed, at most
SUPERSEDES_YIELDING = 4  # with at most this many commits waiting, they let callers take the lock first
COMMIT_WAIT_SECONDS = 30.0


class WriteRefused(ValueError):
    """A draft that cannot be stored as it is; the message says what to change."""


class UpdateRefused(WriteRefused):
    """An explicit update of a memory that left the active set meanwhile; ``reason`` says so, without what
    to do."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}: nothing was changed. Recall again and update the memory that is current")
        self.reason = reason


def no_longer_active(old: MemoryRecord) -> UpdateRefused:
    """The refusal of an explicit update of ``old``, which another write superseded or forgot meanwhile."""
    return UpdateRefused(f"{old.id} is no longer active (another write superseded or forgot it meanwhile)")


SHARED = Audience()  # a memory the whole project (or org) reads: its id is its scope's and content's


def memory_id_for(scope: Scope, content_digest: str, audience: Audience = SHARED) -> str:
    """Deterministic: the same content for the same readers always maps to the same id (idempotent
    writes). A private memory's id names its owner, so that two agents' private notes of the same text
    are two memories, and neither finds (or corroborates) the other's, nor a shared memory's."""
    key = f"{scope.org_id}\x1f{scope.project_id}\x1f{content_digest}"
    if audience.private:
        key += f"\x1f{audience.visibility}\x1f{audience.agent_id}\x1f{audience.session_id}"
    return "mem_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def stored_content(content: str) -> str:
    """The content to store: NUL characters removed (they never reach storage); refused (``ValueError``)
    when nothing visible is left once control and format characters are set aside."""
    if not content.strip():
        raise ValueError("is empty or whitespace only: pass the text to remember")
    cleaned = content.replace("\x00", "")
    if not has_visible_text(cleaned):
        raise ValueError(
            "holds only control or blank characters (no visible text once they are removed): pass the text to remember"
        )
    return cleaned


@dataclass(frozen=True)
class Draft:
    """What a caller asks to store (validated as a tool's arguments already). ``scope`` is where the caller
    works; an org-visible draft is stored on its org's shelf (``storage.records.org_shelf``)."""

    content: str
    scope: Scope
    agent_id: str
    session_id: str
    kind: MemoryKind = "fact"
    tags: tuple[str, ...] = ()
    episode_id: str | None = None
    protection_tier: ProtectionTier = "standard"
    occurred_at: datetime | None = None
    visibility: Visibility = "project"

    @property
    def home(self) -> Scope:
        """The scope the memory is stored in."""
        return org_shelf(self.scope.org_id) if self.visibility == "org" else self.scope


@dataclass(frozen=True)
class Prepared:
    """A draft as the record it would store, and what redaction replaced in it (None: nothing)."""

    record: MemoryRecord
    redacted: str | None = None


@dataclass(frozen=True)
class WriteResult:
    """What writing one draft did."""

    memory: MemoryRecord  # as stored (the existing memory for a duplicate)
    created: bool
    note: str | None = None
    consolidation: ConsolidationReport | None = None
    absorbed_into: str | None = None  # a near-duplicate of a later draft of the same batch
    redacted: str | None = None


@dataclass(frozen=True)
class _Inserted:
    """A remember's new memory as its coalesced batch inserted it, and its vector."""

    record: MemoryRecord
    vector: npt.NDArray[np.float32]
    owed: int | None  # its consolidation, written down as owed (``storage.unfinished``)


@dataclass(frozen=True)
class WriteLimits:
    max_content_chars: int = 20_000
    max_tags: int = 32
    ephemeral_ttl_seconds: float = 7 * 24 * 3600.0
    # the settings of the same names: drafts of one batch collapse at this token Jaccard, and drafts by
    # different agents only when consolidation works across agents
    consolidation_text_dedup_threshold: float = 0.8
    consolidation_across_agents: bool = False


class Clock(Protocol):
    def __call__(self) -> datetime: ...


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
        # Credits a superseded memory earned are carried after its successor's caller is answered; the
        # memories they are on their way to (a count per heir, of the carries queued or running).
        self._hand_ons = HandOnQueue("memoria-hand-on")
        # A restatement's supersede is committed right after its remember answers, in the order decided
        # (``storage.pending`` holds it in this process until then).
        self._supersedes = HandOnQueue("memoria-supersede")
        self._holding = threading.Lock()  # a supersede is held and queued in one step (``_SupersedesBehind``)
        # Credits handed on and consolidations owed are written down first: a crash leaves them to the next
        # start (``storage.unfinished``).
        self._journal = journal or store.unfinished_writes()
        self._heirs_pending: Counter[str] = Counter()
        self._heirs_lock = threading.Lock()

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until what superseded memories earned, handed on so far, is carried (``writing.behind``);
        False if ``timeout`` passed first."""
        return self._supersedes.settle(timeout) and self._hand_ons.settle(timeout)

    def close(self) -> None:
        """Commit the supersedes and carry what is still being handed on; before the store closes. What a
        timed-out close leaves stays written down for the next start."""
        self._supersedes.close()
        self._hand_ons.close()
        self._journal.close()

    def recover_unfinished(self) -> tuple[int, int]:
        """Finish what processes that are gone began and never finished (``storage.unfinished``): the
        supersedes they decided and answered, as decided, then the consolidations owed by memories they
        inserted, then the credits they handed on. Returns how many memories were consolidated and how
        many carries of credits were made. A runtime does it as it is built, before anything is served,
        and in every maintenance round (``server.upkeep.finish_unfinished``)."""
        with self._journal.claimed() as orphans:  # held: another server skips them meanwhile
            return self._recover(orphans)

    def _recover(self, orphans: list[tuple[Path, list[Unfinished]]]) -> tuple[int, int]:
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
                    self._hand_on(entry.scope, entry.heir_id, list(entry.losers))
                    # Its memory may have been replaced since (no carry of this process was on its way to it
                    # then): its credits go on from there, behind this carry.
                    try:
                        self._hand_on_chains(entry.scope, [entry.heir_id])
                    except Exception:
                        log.warning(
                            "could not follow %s along what replaced it", entry.heir_id, exc_info=True
                        )
                    carried += 1
            if not failed:
                self._journal.discard(path)
        return consolidated, carried

    def _finish_consolidation(self, owed: OwedConsolidation) -> int:
        """The consolidation a process that died owed memories it inserted stamped as examined (and the
        explicit update they were written for): done now as the remember would have done it, with the
        rules (no request, so no language model). Idempotent: a memory no longer active, or never
        inserted, is left alone, and one consolidated already finds its restatements gone from the active
        set. Written down again first, so that a crash now leaves it to the next start once more."""
        store = self._store
        ids = [*owed.memory_ids, *([owed.replaces] if owed.replaces else [])]
        store.settle_supersedes(ids)  # what this process decided about them is committed first
        number = self._owe(owed)  # left open if what follows fails: the next start runs it again
        current = store.get_memories(ids, owed.scope)
        active = [current[i] for i in owed.memory_ids if i in current and current[i].status == "active"]
        if not active:
            self._owed_done(number)
            return 0
        vectors = store.memory_vectors([memory.id for memory in active], owed.scope)
        replaced = current.get(owed.replaces) if owed.replaces else None
        for memory in active:
            actor = Actor(memory.agent_id, memory.session_id)
            self.observe(memory)
            self._mend_retirements(memory, owed.replaces, actor)
            with unmarked_on_failure(store, [memory.id]):
                if replaced is not None and replaced.status == "active":
                    log.info("finishing the explicit update of %s by %s", replaced.id, memory.id)
                    self._update(replaced, memory, actor, carry=True)
                if memory.id in vectors:
                    report = self.consolidation.on_write(
                        memory, vectors[memory.id], llm=None, actor=actor, mark=False
                    )
                    self.track(owed.scope, report, memory.id)
        self._owed_done(number)
        return len(active)

    def _finish_supersede(self, decided: DecidedSupersede) -> None:
        """A supersede decided and answered that a crash kept from being committed (or from its lineage, or
        from what followed it): committed now as decided, with its lineage, the absorbed authors'
        corroboration and the losers' tags and credits handed on. Each step is idempotent."""
        number = self._write_down(decided, f"the supersede of {list(decided.losers)} by {decided.survivor}")
        store, scope, now = self._store, decided.scope, self._clock()
        if decided.survivor not in store.get_memories([decided.survivor], scope):
            # A rewording the crash came before: its memory was never inserted, and nothing was changed.
            self._owed_done(number)
            return
        store.supersede(scope, list(decided.losers), decided.survivor, now, decided=True)
        superseded, missing = self._replaced_unrecorded(scope, decided.survivor, decided.losers)
        replaced = sorted(m.id for m in superseded)
        if missing:
            log.info("superseding %s by %s as decided before a crash", missing, decided.survivor)
            self.consolidation.record_retirement(
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
            for memory_id, agent in self.consolidation.carry_corroboration(survivor, superseded):
                self._corroboration.attest(scope, memory_id, agent)
            self._corroboration.retire(scope, replaced)
            corrected = replaced if decided.action == "revise" else []
            self.inherit(scope, [i for i in replaced if i not in corrected], corrected)
        self._owed_done(number)

    def _finish_status_change(self, change: StatusChange) -> None:
        """A change of status or tags that a crash may have cut off from its lineage event: each memory whose
        change is committed and that no event records (``unrecorded_change``) gets its event now, with what
        follows it (a retirement closes the memory's contradictions, a restore reopens them), and a restore
        made for an update back to an earlier text has that update finished. A change that never committed
        needs nothing: nothing was changed, and the caller was never answered. Idempotent."""
        number = self._write_down(change, f"the {change.action} of {list(change.memory_ids)}")
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
                self.consolidation.record_retirement(
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
                store.add_lineage([restore_event(memory, actor, now, RECOVERED) for memory in unrecorded])
                for memory in unrecorded:
                    self.observe(memory)
                    self._reopen_contradictions(memory)
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
        self._owed_done(number)

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
                self._update(replaced, memory, Actor(change.agent, change.session))

    @contextmanager
    def _changing(self, change: StatusChange) -> Iterator[None]:
        """Write down ``change`` (``_change``), a change of status (or of tags and tier) whose lineage event is
        a commit of its own after it, for the length of the block: a process killed between the two leaves
        it to the next start, which records what was committed (``_finish_status_change``). A block that
        raises leaves it written down too: the change may be committed already (its lineage is what failed)."""
        number = self._begin_change(change)
        yield
        self._owed_done(number)

    def _begin_change(self, change: StatusChange) -> int | None:
        """Write down a change of status or tags about to be committed; its number."""
        return self._write_down(change, f"the {change.action} of {list(change.memory_ids)}")

    def _change(
        self,
        scope: Scope,
        memory_ids: Sequence[str],
        action: str,
        resolver: str,
        actor: Actor,
        outcome: str | None = None,
        replaces: str | None = None,
    ) -> StatusChange:
        """A change of status or tags about to begin now, on behalf of ``actor`` (``StatusChange``)."""
        return StatusChange(
            scope,
            tuple(memory_ids),
            action,
            resolver,
            actor.agent_id,
            actor.session_id,
            self._clock().isoformat(),
            outcome,
            replaces,
        )

    def retract(
        self, scope: Scope, memory_ids: Sequence[str], *, reason: str, resolution: str, actor: Actor
    ) -> list[str]:
        """Retract these memories of ``scope`` (``forget``), with lineage and their contradictions closed;
        returns the ids whose status changed. Written down first: a crash between the retraction and its
        lineage leaves it for the next start to record."""
        with self._changing(self._change(scope, memory_ids, "retract", "forget", actor)):
            now = self._clock()
            changed = self._store.retract(scope, memory_ids, now)
            self.consolidation.record_retirement(
                scope,
                list(memory_ids),
                "retract",
                resolver="forget",
                reason=reason,
                resolution=resolution,
                actor=actor,
                at=now,
            )
        self._corroboration.retire(scope, list(memory_ids))
        return changed

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
            self.consolidation.record_retirement(
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
            self._hand_on(scope, memory.id, [(replaces, False)])

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

    def _owe(self, owed: OwedConsolidation) -> int | None:
        """Write down that these memories' consolidation is owed, before their stamped rows are committed."""
        return self._write_down(owed, f"the consolidation owed by {list(owed.memory_ids)}")

    def _write_down(self, entry: Unfinished, what: str) -> int | None:
        """Begin ``entry`` in this process's journal of unfinished writes; its number (None: not written).
        The work is done all the same: only a crash before it ends would now lose it."""
        try:
            return self._journal.begin(entry)
        except Exception:
            log.warning("could not write down %s", what, exc_info=True)
            return None

    def _owed_done(self, number: int | None) -> None:
        """End the journal entry ``number`` (a failure is logged: the next start runs it again, which is
        idempotent)."""
        try:
            self._journal.end(number)
        except Exception:
            log.warning("could not write down that entry %s ran", number, exc_info=True)

    # -- drafts -----------------------------------------------------------------------------------------

    def prepare(self, draft: Draft) -> Prepared:
        """The record ``draft`` would store: secrets in its content and tags replaced, limits checked
        (``WriteRefused`` names the one it breaks), its id derived from scope and content."""
        content = redact(draft.content)
        tags = [redact(tag) for tag in draft.tags]
        found: Counter[str] = Counter()
        for result in (content, *tags):
            found.update(dict(result.found))
        summary = Redacted(content.text, tuple(found.items())).summary() if found else None
        if summary:
            log.warning("replaced secrets in a memory before storing it: %s", summary)
        text = content.text
        limits = self.limits
        if len(text) > limits.max_content_chars:
            raise WriteRefused(
                f"content is {len(text):,} characters; the limit is {limits.max_content_chars:,}. "
                "Store one fact per memory, or split the text into smaller memories."
            )
        if len(tags) > limits.max_tags:
            raise WriteRefused(
                f"`tags` has {len(tags)} entries; at most {limits.max_tags} are allowed: keep the ones recall "
                "should filter by"
            )
        now = self._clock()
        when = now if draft.occurred_at is None else draft.occurred_at
        if when > now + FUTURE_SLACK:
            raise WriteRefused(
                f"`occurred_at` {_iso(when)} is in the future (now is {_iso(now)}): pass when it was learned "
                "or happened, or leave it out for now"
            )
        if when < EARLIEST:
            where = "is before 1970" if when.year < 1970 else "is the Unix epoch"
            raise WriteRefused(
                f"`occurred_at` {_iso(when)} {where}, where placeholder dates (0001-01-01, the Unix epoch) "
                "fall: pass when it was learned or happened, or leave it out for now"
            )
        # An ephemeral memory expires as it decays, counted from when it happened (``retrieval.stages.decay``).
        lasts = timedelta(seconds=limits.ephemeral_ttl_seconds)
        if draft.protection_tier == "ephemeral" and when + lasts <= now:
            raise WriteRefused(
                f"an ephemeral memory that happened at {_iso(when)} expired at {_iso(when + lasts)} "
                f"({spoken(lasts)} after it happened: MEMORIA_EPHEMERAL_TTL_SECONDS), so "
                "recall would never show it: remember it with another protection_tier, or leave occurred_at out "
                "if it still holds now"
            )
        digest = content_hash(text)
        home = draft.home
        record = MemoryRecord(
            id=memory_id_for(home, digest, Audience.of(draft.visibility, draft.agent_id, draft.session_id)),
            org_id=home.org_id,
            project_id=home.project_id,
            agent_id=draft.agent_id,
            session_id=draft.session_id,
            episode_id=draft.episode_id,
            kind=draft.kind,
            content=text,
            content_hash=digest,
            tags=tuple(dict.fromkeys(tag.text for tag in tags)),
            protection_tier=draft.protection_tier,
            status="active",
            replaced_by=None,
            weight=1.0,
            created_at=when,
            updated_at=now,
            embedder=self._embedder.name,
            simhash=fingerprint(text),
            expires_at=when + lasts if draft.protection_tier == "ephemeral" else None,
            visibility=draft.visibility,
        )
        return Prepared(record, summary)

    # -- one memory -------------------------------------------------------------------------------------

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

    def amend(
        self,
        memory: MemoryRecord,
        actor: Actor,
        *,
        tags: Sequence[str] | None,
        tier: ProtectionTier | None,
        redacted: str | None = None,
    ) -> WriteResult:
        """An explicit update that keeps the text: ``memory``'s tags replaced by ``tags`` (already redacted,
        as ``prepare`` makes them) and its protection tier set to ``tier`` (None: as they are), with a
        lineage event that says what they were. A trial could fix a wrong tag, or make an ephemeral memory
        lasting, only by rewording it: restating adds tags and never lowers a tier, and an update with the
        same text was refused. Only the memory's author changes its tier (as a restatement raises it: another
        agent's word must not make someone's memory unchangeable, or expire it), and an immutable memory
        keeps its own. An ephemeral memory made lasting no longer expires; one made ephemeral expires its
        time from now."""
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
            if tuple(new_tags) == current.tags and new_tier == current.protection_tier:
                raise WriteRefused(
                    f"{memory.id} already has this text, these tags and this tier: nothing to update. Pass the "
                    "corrected text, or the tags or protection_tier to change"
                )
            expires_at = None
            if new_tier == "ephemeral":
                lasts = timedelta(seconds=self.limits.ephemeral_ttl_seconds)
                expires_at = current.expires_at or self._clock() + lasts
            said = []
            if tuple(new_tags) != current.tags:
                said.append(f"its tags are now {new_tags} (were {list(current.tags)})")
            if new_tier != current.protection_tier:
                lasting = "; it no longer expires" if current.protection_tier == "ephemeral" else ""
                said.append(f"its protection tier is now {new_tier} (was {current.protection_tier}){lasting}")
            outcome = tags_digest(new_tags, new_tier)
            with self._changing(
                self._change(current.scope, [current.id], "amend", "explicit", actor, outcome)
            ):
                self._retag(current, new_tags, (new_tier, expires_at))
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
            self._hand_ons.submit(partial(self._weigh_behind, amended.scope, amended.id))
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
        # Written down as decided before the caller is answered: a crash before the commit lands has the next
        # start commit this very step (a language model's decision is not taken again by the rules).
        number = self._write_down(decided, f"the supersede of {losers} by {survivor_id}") if decided else None

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
                self._owed_done(number)

        self._supersedes.submit(commit)

    def _owed_done_behind(self, behind: _SupersedesBehind | None, owed: int | None) -> None:
        """Write down that a remember's consolidation is done: now, or after the commits it queued, unless
        one of them failed to take the memory's stamp off (then the next start consolidates it again)."""
        if behind is None or not behind.queued:
            self._owed_done(owed)
            return

        def done() -> None:  # after this remember's commits, on the same thread
            if not behind.stamp_kept:
                self._owed_done(owed)

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
            owed = [
                self._owe(OwedConsolidation(record.scope, (record.id,))) if record.consolidated_at else None
                for record in written
            ]
            stored = self._store.insert_many(news, retry=retry)  # one commit for every scope of the batch
        for index, new, number, (record, created) in zip(writers, news, owed, stored, strict=True):
            if created:
                results[index] = _Inserted(record, as_array(new.vector), number)
            else:  # stored by another process meanwhile: its writer owes the consolidation
                self._owed_done(number)
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
            if replaces is not None:
                note = self._update(replaces, stored, actor, carry=True, withdraw=True)
            consolidation = self.consolidation.on_write(
                stored, vector, llm=llm, actor=actor, mark=False, behind=behind
            )
        self.track(stored.scope, consolidation, stored.id)
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
                owed = self._owe(
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
                    restoring = self._begin_change(
                        self._change(record.scope, [record.id], "restore", "remember", actor)
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
                    return WriteResult(stored, False, _identical(added))
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
                    self._owed_done(owed)
                    self._owed_done(restoring)
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
                return WriteResult(stored, False, self._update(replaces, stored, actor))
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
                    back = self._change(
                        stored.scope, [stored.id], "restore", "remember", actor, replaces=replaces.id
                    )
                    with self._changing(back):
                        revived = self._revive(stored, actor, "an explicit update restored it")
                        if revived is not None:
                            return WriteResult(revived, False, self._update(replaces, revived, actor))
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
                    revived = self._revive(stored, actor, reason)
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
                note = _identical(added)
                if stored.consolidated_at is None and stored.agent_id == record.agent_id:
                    # A retried call (or the next round of one) finishes the consolidation the first one began.
                    vectors = store.memory_vectors([stored.id], stored.scope)
                    if stored.id in vectors:
                        consolidation = self.consolidation.on_write(
                            stored, vectors[stored.id], llm=llm, actor=actor
                        )
                else:
                    return self._attested(stored, record, added)
        if consolidation is not None:
            self.track(stored.scope, consolidation, stored.id)
        return WriteResult(stored, created, note, consolidation)

    def _revive(self, superseded: MemoryRecord, actor: Actor, reason: str) -> MemoryRecord | None:
        """A superseded memory active again, with a ``restore`` lineage record giving ``reason``; None when
        it is not superseded any more."""
        with self._changing(self._change(superseded.scope, [superseded.id], "restore", "remember", actor)):
            revived = self._store.reactivate(superseded.scope, superseded.id, self._clock())
            if revived is not None:
                self._store.add_lineage([restore_event(revived, actor, self._clock(), reason)])
        if revived is not None:
            self.observe(revived)
            self._reopen_contradictions(revived)
        return revived

    def _reopen_contradictions(self, memory: MemoryRecord) -> None:
        """The contradictions closed when ``memory`` left the active set, with memories still active, open
        again now that it is back (it is not consolidated again: what it says was judged when written; a
        review found a revived claim clustered with its reversal, unmarked)."""
        closed = self._store.contradictions(memory.scope, status="resolved", memory_ids=[memory.id])
        # Those with a memory no longer active stay closed (``put_contradictions`` writes none of them).
        reopened = self._store.put_contradictions(
            [replace(pair, status="open", resolution=None, resolved_at=None) for pair in closed]
        )
        for pair in reopened:
            self._corroboration.keep_apart(memory.scope, pair.older_id, pair.newer_id)

    def _update(
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
            refused = no_longer_active(old)
            if withdraw and self._store.retract(new.scope, [new.id], now):
                self.consolidation.record_retirement(
                    new.scope,
                    [new.id],
                    "retract",
                    resolver="explicit",
                    reason=f"the explicit update it was written for was refused: {refused.reason}",
                    resolution="explicit update refused",
                    actor=actor,
                    at=now,
                )
                self._corroboration.retire(new.scope, [new.id])
            raise refused
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
            if self._pending_heirs({old.id}):
                self._hand_on(old.scope, new.id, [(old.id, False)])
            else:
                self._inherit_credits(old.scope, new.id, [(old.id, False)])
        self._corroboration.retire(old.scope, changed)
        return f"explicit update: {new.id} replaces {old.id}, which stays superseded for audit"

    def _attested(self, stored: MemoryRecord, record: MemoryRecord, added: str | None = None) -> WriteResult:
        """The same content from another agent: stored once, counted as corroboration (``added``: what the
        write added to the stored memory, if anything: ``take_restated``)."""
        if not self._store.add_attestation(stored, record.agent_id, record.session_id, record.created_at):
            return WriteResult(stored, False, _identical(added))
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
        change = _restated(stored, record, limit)
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
            change = _restated(current, record, limit)
            if change is None:
                return current, None
            tags, tier, left_out = change
            if tuple(tags) != current.tags or tier != current.protection_tier:
                expires_at = current.expires_at if tier == "ephemeral" else None  # only the ephemeral expire
                self._retag(current, tags, (tier, expires_at))
                current = store.get_memories([current.id], current.scope).get(current.id, current)
        if (
            current.protection_tier == "immutable" != stored.protection_tier
            and current.weight < INITIAL_WEIGHT
        ):
            # An immutable memory is never weighed below where it started: its global weight follows, as
            # the weight for a query does already (``retrieval.outcomes``), without waiting for the next
            # report; behind the call, as a report would write it (the reports' lock, then the write lock).
            self._hand_ons.submit(partial(self._weigh_behind, current.scope, current.id))
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
        owed = self._owe(OwedConsolidation(scope, stamped)) if stamped else None  # open if the insert fails
        stored = {record.id: record for record, created in store.insert_many(news) if created}
        # A failure leaves the consolidation written down as owed, for the next start.
        self._consolidate_batch(
            scope, written, stored, losers, {new.record.id: new for new in news}, results, llm
        )
        self._owed_done(owed)
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
        with unmarked_on_failure(store, [record.id for record in written if record.id in stored]):
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
                self.inherit(scope, list(superseded))  # their tags
            for record in written:
                if record.id not in stored:
                    results.setdefault(record.id, self._remember(record, llm))
                    continue
                if record.id in losers:
                    results[record.id] = WriteResult(record, True, absorbed_into=losers[record.id])
                    continue
                self.observe(record)
                report = self.consolidation.on_write(
                    record,
                    vectors[record.id],
                    llm=llm,
                    actor=Actor(record.agent_id, record.session_id),
                    mark=False,
                )
                self.track(scope, report, record.id)
                results[record.id] = WriteResult(record, True, consolidation=report)

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
                    result = WriteResult(memory, False, f"{said}; {added}" if added else said)
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
        """For each record in an episode, the content of the memory just before it in that episode and
        read by the same people (its search text holds that content, which must not reach other readers):
        the previous such record of the batch, or for the first the latest such stored member not newer
        than it. Record id -> that content (and the stored memory it is of, for the insert to check that
        no purge took it meanwhile)."""
        preceding: dict[str, Quote] = {}
        first: dict[tuple[str, Audience], MemoryRecord] = {}
        last: dict[tuple[str, Audience], str] = {}
        for record in records:
            if record.episode_id is None:
                continue
            key = (record.episode_id, audience_of(record))
            if key in last:
                preceding[record.id] = Quote(last[key])
            else:
                first[key] = record
            last[key] = record.content
        if not first:
            return preceding
        store = self._store
        scope = records[0].scope
        batch = {record.id for record in records}
        by_audience: dict[Audience, dict[str, MemoryRecord]] = {}  # audience -> episode -> its first record
        for (episode_id, audience), record in first.items():
            by_audience.setdefault(audience, {})[episode_id] = record
        before: dict[str, str] = {}  # record id -> id of the stored memory before it
        for audience, firsts in by_audience.items():
            stubs = store.episode_member_stubs(View(scope, with_org=False, audience=audience), list(firsts))
            for episode_id, record in firsts.items():
                earlier = [
                    s
                    for s in stubs
                    if s.episode_id == episode_id and s.id not in batch and s.created_at <= record.created_at
                ]
                if earlier:
                    before[record.id] = max(earlier, key=lambda s: (s.created_at, s.id)).id
        if before:
            found = store.get_memories(list(set(before.values())), scope)
            preceding |= {rid: Quote(found[mid].content, mid) for rid, mid in before.items() if mid in found}
        return preceding

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
            self.inherit(scope, restated, report.revised)

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
        receiving = self._pending_heirs({*restated, *corrected})
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
                self._hand_on(scope, heir_id, credited)

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
                self._hand_on_chains(scope, memory_ids)
            except Exception:
                log.warning(
                    "could not hand on a report's credits to what replaced %s", memory_ids, exc_info=True
                )

    def _hand_on_chains(self, scope: Scope, memory_ids: Sequence[str]) -> None:
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
            self._hand_on(scope, heir, [(loser, not corrected)])

    def _pending_heirs(self, memory_ids: set[str]) -> set[str]:
        """Those of ``memory_ids`` that a queued or running carry of credits is for."""
        with self._heirs_lock:
            return {memory_id for memory_id in memory_ids if self._heirs_pending[memory_id] > 0}

    def _hand_on(self, scope: Scope, heir_id: str, losers: list[tuple[str, bool]]) -> None:
        """Carry the credits of ``losers`` (id, whether their failures go too) to ``heir_id`` behind the
        call, after the carries queued before it. Always to that memory, even if it is superseded by then:
        its own successor's carry, queued after this one, takes them on from there, with the blame that
        step deserves (a correction takes none)."""
        written = self._write_down(
            HandOn(scope, heir_id, tuple(losers)), f"the credits handed on to {heir_id}"
        )
        with self._heirs_lock:
            self._heirs_pending[heir_id] += 1

        def carry() -> None:
            try:
                with self._store.behind_the_calls():
                    self._inherit_credits(scope, heir_id, losers)
            finally:
                with self._heirs_lock:
                    self._heirs_pending[heir_id] -= 1
                    if self._heirs_pending[heir_id] <= 0:
                        del self._heirs_pending[heir_id]
                self._owed_done(written)

        self._hand_ons.submit(carry)

    def _inherit_tags(self, scope: Scope, heir_id: str, losers: Sequence[MemoryRecord]) -> None:
        store = self._store
        heir = store.get_memories([heir_id], scope).get(heir_id)
        if heir is None or not _tags_to_add(heir, losers):
            return  # nothing to hand on: the write lock is not taken (every writer would wait for it)
        # Read again and written in one sequence of the write lock: a purge in between never has its text back.
        with store.exclusive():
            heir = store.get_memories([heir_id], scope).get(heir_id)
            if heir is None or heir.status != "active":
                return
            added = _tags_to_add(heir, losers)
            tags = [*heir.tags, *added][: max(self.limits.max_tags, len(heir.tags))]
            if tuple(tags) == heir.tags:
                return
            self._retag(heir, tags)

    def _retag(
        self,
        memory: MemoryRecord,
        tags: Sequence[str],
        tier: tuple[ProtectionTier, datetime | None] | None = None,
    ) -> None:
        """Write ``memory``'s tags with the search text that indexes them (and with ``tier`` its protection
        tier and expiry), inside the caller's write sequence, on the memory as read in it."""
        quote = self.preceding_contents([memory]).get(memory.id)
        text = searchable_text(
            memory.content, tags, memory.agent_id, memory.created_at, quote.content if quote else None
        )
        self._store.set_tags(memory.id, tags, text, self._clock(), tier=tier)

    def _inherit_credits(self, scope: Scope, heir_id: str, losers: Sequence[tuple[str, bool]]) -> None:
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
        from writing.outcomes import converge, replayed_weights, write_weights

        store = self._store
        current = store.get_memories([memory_id], scope)
        if memory_id not in current:
            return
        replay = store.credits_for(scope, [memory_id], across_org=True)
        weights = replayed_weights(self._weights, current, replay)
        write_weights(store, self._corroboration, current, weights, self._clock())
        # Replicas on an object store share no lock: the weight written must replay every report there is.
        converge(store, self._corroboration, self._weights, self._clock, scope, [memory_id], replay)

    def expire(self, scope: Scope, memory_ids: Sequence[str]) -> list[str]:
        """Retract these ephemeral memories of ``scope`` past their time, with lineage (the maintenance
        rounds, and a remember that states one again); returns the ids that changed."""
        now, upkeep = self._clock(), Actor("memoria", "upkeep")
        with self._changing(self._change(scope, memory_ids, "expire", "expiry", upkeep)):
            changed = self._store.retract_expired(scope, memory_ids, now)
            self.consolidation.record_retirement(
                scope,
                changed,
                "expire",
                resolver="expiry",
                reason="ephemeral memory past its expiry",
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


@dataclass(frozen=True)
class Quote:
    """The memory before a new one in its episode, as its search text quotes it: the content, and the stored
    memory it is of (None: the batch's previous record)."""

    content: str
    of: str | None = None


def in_batch_order(records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
    """A batch's records with those that share a time (one ``occurred_at`` for a whole transcript) a
    microsecond apart in the batch's order: a list, an episode's chain of turns and each turn's context
    (the turn before it) then read them as the batch gave them, not in an arbitrary order (a trial)."""
    seen: Counter[datetime] = Counter()
    ordered = []
    for record in records:
        later = timedelta(microseconds=seen[record.created_at])
        seen[record.created_at] += 1
        if later:
            expires = record.expires_at + later if record.expires_at is not None else None
            record = replace(record, created_at=record.created_at + later, expires_at=expires)
        ordered.append(record)
    return ordered


def as_restored(retracted: MemoryRecord, record: MemoryRecord) -> MemoryRecord:
    """``record`` stating a retracted memory again, as the memory comes back: with its tags and those the
    new statement adds (a recall filtered by a tag finds it again) and its weight (what its reports replay
    to: a new user's trial found it back at 1.0 beside a weight history that said otherwise). Its time is
    the new statement's, as are who states it, its kind, tier, expiry and readers: stated again, it is the
    newest word on its subject, and consolidation reads it so (a review: kept at its old time, a value
    stated again read as older than the value it had replaced). A purged memory kept nothing to come back
    to."""
    return replace(
        record, tags=tuple(dict.fromkeys((*retracted.tags, *record.tags))), weight=retracted.weight
    )


def _identical(added: str | None) -> str | None:
    """The note of a write whose text is stored already, saying what it added to the memory (if anything)."""
    return f"an identical memory is stored; {added}" if added else None


# Protection tiers from the least to the most protected: a memory stated again never loses protection.
_TIER_ORDER: tuple[ProtectionTier, ...] = ("ephemeral", "standard", "protected", "immutable")


def _restated(
    stored: MemoryRecord, record: MemoryRecord, max_tags: int
) -> tuple[list[str], ProtectionTier, list[str]] | None:
    """(tags, tier, tags left out for want of room) of ``stored`` once ``record``, the same text stated
    again, is taken into it; None when it adds nothing. Only the memory's author raises its tier, and only
    to protected or immutable: "standard" is also what a statement that names no tier says, and another
    agent's word must not make someone's memory unchangeable."""
    new = _tags_to_add(stored, [record])
    room = max(0, max_tags - len(stored.tags))
    tags, left_out = [*stored.tags, *new[:room]], new[room:]
    tier = stored.protection_tier
    if (
        record.agent_id == stored.agent_id
        and record.protection_tier in ("protected", "immutable")
        and _TIER_ORDER.index(record.protection_tier) > _TIER_ORDER.index(tier)
    ):
        tier = record.protection_tier
    if tuple(tags) == stored.tags and tier == stored.protection_tier and not left_out:
        return None
    return tags, tier, left_out


def _tags_to_add(heir: MemoryRecord, losers: Sequence[MemoryRecord]) -> list[str]:
    """The superseded memories' tags that the memory standing in their place lacks, in their order."""
    added: list[str] = []
    for memory in losers:
        added += [tag for tag in memory.tags if tag not in heir.tags and tag not in added]
    return added


@contextmanager
def unmarked_on_failure(store: MemoryStore, memory_ids: Sequence[str]) -> Iterator[None]:
    """If consolidation fails after memories went in stamped as examined, take the stamp off again, so a
    retried call (or the background sweep) examines them. A process killed in between leaves them
    stamped, and their consolidation written down as owed: the next start does it
    (``WriteService.recover_unfinished``)."""
    try:
        yield
    except BaseException:
        if memory_ids:
            try:
                store.mark_consolidated(memory_ids, None)
            except Exception:
                log.warning("could not clear the consolidation stamp of %s", memory_ids, exc_info=True)
        raise


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


def guarded_from(memory: MemoryRecord, agent_id: str) -> bool:
    """Whether an explicit update by ``agent_id`` may not replace ``memory``: a protected memory another
    agent remembered (``_dispute_update``)."""
    return memory.protection_tier == "protected" and memory.agent_id != agent_id


RECOVERED = "committed before a crash cut off its lineage; recorded by the next start"
# What leaves a memory inactive: the event a restore follows.
RETIRING_ACTIONS = frozenset({"retract", "expire", "supersede", "revise", "absorb", "reword", "purge"})


def tags_digest(tags: Sequence[str], tier: str) -> str:
    """A digest of a memory's tags and protection tier: what an amend's journal entry holds of them (a
    purge must be able to erase the tags themselves)."""
    return hashlib.sha256("\x1f".join([tier, *tags]).encode("utf-8")).hexdigest()[:32]


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
        amended = tags_digest(memory.tags, memory.protection_tier) == change.outcome
        return amended and (latest is None or latest.action != "amend" or latest.at < began)
    return False


def restore_event(
    memory: MemoryRecord, actor: Actor, at: datetime, reason: str = "the same content was remembered again"
) -> LineageEvent:
    return LineageEvent.new(
        memory.scope,
        "restore",
        memory.id,
        resolver="remember",
        reason=reason,
        agent_id=actor.agent_id,
        session_id=actor.session_id,
        at=at,
    )


def cluster_member(record: MemoryRecord) -> ClusterMember:
    value = record.simhash if record.simhash is not None else fingerprint(record.content)
    return ClusterMember(
        record.id,
        record.agent_id,
        record.weight,
        record.created_at,
        value,
        negated(record.content),
        wording(record.content),
    )


# numpy (SimHash and vectors) is imported on the first write, not when the server starts: the MCP
# handshake must not wait for it.
def fingerprint(content: str) -> int:
    from retrieval.simhash import simhash

    return simhash(content)


def as_array(vector: npt.NDArray[np.float32] | Sequence[float]) -> npt.NDArray[np.float32]:
    import numpy as np

    return np.asarray(vector, dtype=np.float32)


def _iso(moment: datetime) -> str:
    from datetime import UTC

    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def spoken(span: timedelta) -> str:
    """A duration as words: "7 days", "1 day 12 hours", "90 seconds" (not "7 days, 0:00:00")."""
    seconds = int(span.total_seconds())
    parts = []
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    return " ".join(parts[:2]) or "0 seconds"
