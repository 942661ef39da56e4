"""What a write is made of before and after the write service stores it: a caller's draft, the record it
would store (``prepare``: secrets redacted, limits checked, its id derived from its scope and content), the
result of a write, and the rules a memory stated again follows (what it adds, what it keeps)."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from retrieval.redaction import Redacted, redact
from retrieval.stages.corroboration import ClusterMember
from retrieval.text import content_hash, has_visible_text, negated, wording
from storage.records import (
    Audience,
    MemoryKind,
    MemoryRecord,
    ProtectionTier,
    Scope,
    Visibility,
    org_shelf,
)
from writing.consolidation.report import ConsolidationReport

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)


FUTURE_SLACK = timedelta(minutes=5)  # clocks of different machines disagree a little
EARLIEST = datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)  # an agent's memory dated before it is a placeholder


class WriteRefused(ValueError):
    """A draft that cannot be stored as it is; the message says what to change."""


class UpdateRefused(WriteRefused):
    """An explicit update of a memory that left the active set meanwhile; ``reason`` says so, without what
    to do."""

    def __init__(self, reason: str, *, withdrawn: str | None = None, standing: str | None = None) -> None:
        """``withdrawn``: the memory written for the update, retracted again as it was refused (kept for the
        audit trail, never recalled: a trial read "nothing was changed" and then found it listed as
        retracted); ``standing``: the memory that replaced the one the update named, if one did."""
        done = (
            f"the update was refused, and the text written for it ({withdrawn}) is retracted again (kept for "
            "audit only; recall never shows it)"
            if withdrawn
            else "nothing was changed"
        )
        then = (
            f"update {standing}, the memory that replaced it"
            if standing
            else "update the memory that is current"
        )
        super().__init__(f"{reason}: {done}. Recall again and {then}")
        self.reason = reason


# The reason a refused update's own memory was retracted with (its lineage): `memoria restore` reads it.
REFUSED_UPDATE = "the explicit update it was written for was refused"


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
    expires_at: datetime | None = None  # when it stops being true (None: never, or the ephemeral tier's time)

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


def prepare(draft: Draft, limits: WriteLimits, now: datetime, embedder: str) -> Prepared:
    """The record ``draft`` would store at ``now`` (embedded by the embedder named ``embedder``): secrets
    in its content and tags replaced, limits checked (``WriteRefused`` names the one it breaks), its id
    derived from scope and content."""
    content = redact(draft.content)
    tags = [redact(tag) for tag in draft.tags]
    found: Counter[str] = Counter()
    for result in (content, *tags):
        found.update(dict(result.found))
    summary = Redacted(content.text, tuple(found.items())).summary() if found else None
    if summary:
        # The caller is told in its result ("redacted before storing: ..."); at warning level the CLI
        # printed it twice, once as a raw log line (a new user's trial).
        log.info("replaced secrets in a memory before storing it: %s", summary)
    text = content.text
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
    when = now if draft.occurred_at is None else draft.occurred_at
    if when > now + FUTURE_SLACK:
        raise WriteRefused(
            f"`occurred_at` {iso(when)} is in the future (now is {iso(now)}): pass when it was learned "
            "or happened, or leave it out for now"
        )
    if when < EARLIEST:
        where = "is before 1970" if when.year < 1970 else "is the Unix epoch"
        raise WriteRefused(
            f"`occurred_at` {iso(when)} {where}, where placeholder dates (0001-01-01, the Unix epoch) "
            "fall: pass when it was learned or happened, or leave it out for now"
        )
    # An ephemeral memory expires as it decays, counted from when it happened (``retrieval.stages.decay``).
    lasts = timedelta(seconds=limits.ephemeral_ttl_seconds)
    if draft.protection_tier == "ephemeral" and draft.expires_at is None and when + lasts <= now:
        raise WriteRefused(
            f"an ephemeral memory that happened at {iso(when)} expired at {iso(when + lasts)} "
            f"({spoken(lasts)} after it happened: MEMORIA_EPHEMERAL_TTL_SECONDS), so "
            "recall would never show it: remember it with another protection_tier, or leave occurred_at out "
            "if it still holds now"
        )
    expires_at = draft.expires_at or (when + lasts if draft.protection_tier == "ephemeral" else None)
    if draft.expires_at is not None:
        if draft.protection_tier == "immutable":
            raise WriteRefused(
                "an immutable memory never changes, and never expires: leave expires_at out, or remember it "
                "with another protection_tier"
            )
        if draft.expires_at <= now:  # (when it happened is never after now)
            raise WriteRefused(
                f"`expires_at` {iso(draft.expires_at)} is not after now (now is {iso(now)}), so recall would "
                "never show it: pass when it stops being true, or leave expires_at out if it still holds"
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
        embedder=embedder,
        simhash=fingerprint(text),
        expires_at=expires_at,
        visibility=draft.visibility,
    )
    return Prepared(record, summary)


# -- one memory -------------------------------------------------------------------------------------


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


def identical_note(added: str | None) -> str | None:
    """The note of a write whose text is stored already, saying what it added to the memory (if anything)."""
    return f"an identical memory is stored; {added}" if added else None


def expiry_under(memory: MemoryRecord, tier: ProtectionTier) -> datetime | None:
    """The expiry ``memory`` keeps once its tier is ``tier``: an ephemeral memory's (its tier's time) only
    while it stays ephemeral; one given to a lasting memory (``expires_at``) under any tier but immutable,
    which never expires."""
    if tier == "immutable" or (memory.protection_tier == "ephemeral" and tier != "ephemeral"):
        return None
    return memory.expires_at


# Protection tiers from the least to the most protected: a memory stated again never loses protection.
TIER_ORDER: tuple[ProtectionTier, ...] = ("ephemeral", "standard", "protected", "immutable")


def restated_change(
    stored: MemoryRecord, record: MemoryRecord, max_tags: int
) -> tuple[list[str], ProtectionTier, list[str]] | None:
    """(tags, tier, tags left out for want of room) of ``stored`` once ``record``, the same text stated
    again, is taken into it; None when it adds nothing. Only the memory's author raises its tier, and only
    to protected or immutable: "standard" is also what a statement that names no tier says, and another
    agent's word must not make someone's memory unchangeable."""
    new = tags_to_add(stored, [record])
    room = max(0, max_tags - len(stored.tags))
    tags, left_out = [*stored.tags, *new[:room]], new[room:]
    tier = stored.protection_tier
    if (
        record.agent_id == stored.agent_id
        and record.protection_tier in ("protected", "immutable")
        and TIER_ORDER.index(record.protection_tier) > TIER_ORDER.index(tier)
    ):
        tier = record.protection_tier
    if tuple(tags) == stored.tags and tier == stored.protection_tier and not left_out:
        return None
    return tags, tier, left_out


def tags_to_add(heir: MemoryRecord, losers: Sequence[MemoryRecord]) -> list[str]:
    """The superseded memories' tags that the memory standing in their place lacks, in their order."""
    added: list[str] = []
    for memory in losers:
        added += [tag for tag in memory.tags if tag not in heir.tags and tag not in added]
    return added


def guarded_from(memory: MemoryRecord, agent_id: str) -> bool:
    """Whether an explicit update by ``agent_id`` may not replace ``memory``: a protected memory another
    agent remembered (``WriteService._dispute_update``)."""
    return memory.protection_tier == "protected" and memory.agent_id != agent_id


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
        record.content,
    )


# numpy (SimHash and vectors) is imported on the first write, not when the server starts: the MCP
# handshake must not wait for it.
def fingerprint(content: str) -> int:
    from retrieval.simhash import simhash

    return simhash(content)


def as_array(vector: npt.NDArray[np.float32] | Sequence[float]) -> npt.NDArray[np.float32]:
    import numpy as np

    return np.asarray(vector, dtype=np.float32)


def iso(moment: datetime) -> str:
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
