"""What a report's detail says: what moved and how far, then about the memories it was given or shown:
named ones no recall of the session showed, named ones recall no longer shows, and shown ones that no
longer count."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from retrieval.outcomes import NAMED_ROLES, ShownContext
from retrieval.text import counted
from storage.records import MemoryCredit, MemoryRecord, Scope

if TYPE_CHECKING:
    from datetime import datetime

    from storage.store import MemoryStore


def applied_note(session_id: str, roles: Sequence[str], *, recalled: bool) -> str:
    """The detail of an applied report: the memories named and those of its contexts, and how far they
    move (``recalled``: the session's queries are compared with later ones)."""
    named = [
        counted(roles.count(role), f"{role} memory") for role in ("helpful", "misleading") if role in roles
    ]
    if not named:
        moved = "no memory was named"
    elif recalled:
        moved = (
            f"{' and '.join(named)} moved a full step (to the top or bottom weight for tasks as close as this "
            "session's, less for tasks further away)"
        )
    else:
        moved = (
            f"{' and '.join(named)} moved a full step (the session recalled nothing, so its report counts "
            "for every task, by one step of the global weight only)"
        )
    used = (
        f"{counted(roles.count('used'), 'memory')} the session-end hook saw used a whole share; "
        if "used" in roles
        else ""
    )
    return (
        f"session {session_id} reported: {moved}; {used}"
        f"{counted(roles.count('context'), 'other memory')} of its contexts a share by their position"
    )


def unseen_note(contexts: Sequence[ShownContext], named: Sequence[str]) -> str:
    """What the report's detail adds for named memories none of the session's recalls put into a context
    (an id from another session, or from memory): they count as named all the same, and the agent hears
    it, since a memory named for a task it was not shown for moves for that task's queries."""
    shown = {memory.memory_id for context in contexts for memory in context.memories}
    unseen = [memory_id for memory_id in named if memory_id not in shown]
    if not contexts or not unseen:
        return ""
    return (
        f". Not in this session's recall results: {', '.join(unseen)}; counted as named all the same. A "
        "weight moves what recall finds: one that matched these queries below the relevance floor stays out "
        "of their results whatever its weight (explain_ranking with the query and its memory_id says; "
        "rewording it with replaces=, in the words the task used, brings it in)"
    )


def inactive_note(
    store: MemoryStore, known: dict[str, MemoryRecord], named: Iterable[str], now: datetime
) -> str:
    """What the report's detail adds for the named memories recall cannot show (superseded, retracted or
    purged since the session saw them): a superseded one's credit goes on to the memory that stands in its
    place (``Inheritance.hand_on_reported``), as if the report had come before the change; the others'
    counts if they are restored. "" when all are active."""
    handed, kept, expired, tiers = [], [], [], set()  # tiers: whether each expired one was ephemeral
    for memory in (known[memory_id] for memory_id in named if memory_id in known):
        if memory.past_expiry(now):
            expired.append(f"{memory.id} (expired at {memory.expires_at:%Y-%m-%d %H:%M} UTC)")
            tiers.add(memory.protection_tier == "ephemeral")
            continue
        if memory.status == "active":
            continue
        head = None
        if memory.replaced_by:
            from writing.inheritance import current_version  # (not imported before the handshake)

            head = current_version(store, memory)
        if head is not None and head.status == "active" and head.id != memory.id:
            handed.append(
                f"{memory.id} (superseded by {memory.replaced_by}): its credit goes on to {head.id}"
            )
        else:
            newer = f" by {memory.replaced_by}" if memory.replaced_by else ""
            kept.append(f"{memory.id} ({memory.status}{newer})")
    note = ""
    if handed:
        note += (
            f". Recall does not show {'; '.join(handed)}, which stands now (as a report made before the change "
            "would have gone: a correction takes none of a failure)"
        )
    if kept:
        note += f". Recall does not show {', '.join(kept)}: the credit counts only if they are active again"
    if expired:
        note += (
            f". Recall does not show {', '.join(expired)}: an expired memory's credit counts for nothing, and "
            "it did not move (remember its text again" + _how_to_renew(tiers) + " if it still holds)"
        )
    return note


def dropped_note(count: int) -> str:
    """For the memories of the session's contexts, named by nobody, that were retracted, purged or
    superseded since they were shown: their share was dropped (``report_outcome``)."""
    if not count:
        return ""
    return (
        f". {counted(count, 'memory')} of its contexts no longer active (retracted, purged, superseded or "
        "expired) did not move"
    )


def unnamed_note(previous: Iterable[MemoryCredit], now: Iterable[MemoryCredit]) -> str:
    """What a replacing report stopped saying: memories the earlier report named (helpful or misleading)
    that this one does not name the same way. Such a report moves them by their place alone now, and a
    report made from another tool (the CLI, the session-end hook) must not drop an agent's word unseen."""
    kept = {credit.memory_id for credit in now if credit.role in NAMED_ROLES}  # named again, either way
    dropped = sorted(
        (credit.role, credit.memory_id)
        for credit in previous
        if credit.role in NAMED_ROLES and credit.memory_id not in kept
    )
    if not dropped:
        return ""
    named = "; ".join(
        f"{role} {', '.join(memory_id for r, memory_id in dropped if r == role)}"
        for role in ("helpful", "misleading")
        if any(r == role for r, _ in dropped)
    )
    return (
        f". The earlier report named memories this one does not ({named}): they now move by their place "
        "in the contexts only. Report again naming them (helpful_ids / misleading_ids) to keep what it said"
    )


def amend_note(
    store: MemoryStore, scope: Scope, previous_session: str | None, *, named_session: bool, recalled: bool
) -> str:
    """For a report of the connection's own session that recalled nothing, right after its previous session
    (one that recalled) was reported: how to change that report instead (a trial reported, remembered, then
    reported again to add an id, and the second report went to the new, empty session, counting for every
    task)."""
    if recalled or named_session or previous_session is None:
        return ""
    if not store.session_retrievals(scope, previous_session):
        return ""  # that one recalled nothing either: no report of it to change
    return (
        f". This connection's previous session {previous_session} was reported before a remember or a recall "
        f"began this one: to change that report, report again with session_id={previous_session}"
    )


def without_gone(
    credits: tuple[MemoryCredit, ...], records: Mapping[str, MemoryRecord], now: datetime
) -> tuple[MemoryCredit, ...]:
    """The credits of a report that move a memory shown again. A memory of the contexts that nobody named
    moves only because it was shown; one retracted, purged or superseded since then will not be shown
    again, so its share is dropped (``inactive_note``: a named one keeps its credit, handed on to what took
    its place or counted if it is restored). An ephemeral memory past its expiry is not shown again
    either: whatever its role, its credit would move a memory nobody reads (a trial saw one moved).
    ``records``: the credited memories as the scope holds them now."""
    expired = {memory_id for memory_id, record in records.items() if record.past_expiry(now)}
    return tuple(
        credit
        for credit in credits
        if credit.memory_id not in expired
        and (
            credit.role != "context"
            or (credit.memory_id in records and records[credit.memory_id].status == "active")
        )
    )


def _how_to_renew(ephemeral: set[bool]) -> str:
    """How to have expired memories back: a tier that lasts for an ephemeral one, a later expiry (or none)
    for one given its own (a trial was told the first of a standard memory)."""
    if ephemeral == {True}:
        return ", with a tier that lasts,"
    if ephemeral == {False}:
        return ", with a later expires_at or none,"
    return " (with a tier that lasts if it was ephemeral, else a later expires_at or none)"
