"""Undo a retraction (``memoria restore``, and the page of ``memoria ui``): each retracted memory is remembered
again as it was (its text, kind, tags, tier, episode, date, expiry, author and readers), which restores it under
its id with its weight (``writing``: an identical memory that had been retracted is restored). A new user's trial
retracted five memories with one `forget --query` and found no way back but to retype each; a later trial found
no way back in the page at all. A purged memory's text is gone, and a superseded one is corrected on what
replaced it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from server.arguments import friendly_validation_message
from storage.records import Scope, org_shelf
from tools.common import Caller, Progress, Runtime, ToolFailure, expired_by, no_progress
from tools.empty_recall_notes import stored_in

if TYPE_CHECKING:
    from tools.remember import RememberOutput


def restore(
    runtime: Runtime,
    scope: Scope,
    memory_ids: Sequence[str],
    *,
    flags: str | None = "",
    progress: Progress = no_progress,
) -> list[RememberOutput]:
    """Restore these retracted memories of ``scope``, all or none: a ``ToolFailure`` says why one cannot be
    (``flags``: what a command that follows needs to reach the same store and scope; None for the live page,
    which names no other org or project and no command's flags)."""
    from tools.remember import RememberInput, remember

    found = {memory_id: runtime.store.get_memory(memory_id) for memory_id in dict.fromkeys(memory_ids)}
    for memory_id, memory in found.items():
        problem = _not_restorable(memory_id, memory, scope, flags) or _refused_update(
            runtime, memory_id, scope
        )
        if problem:
            raise ToolFailure(problem + ("; nothing was restored" if len(found) > 1 else ""))
    results = []
    for memory in found.values():
        assert memory is not None
        caller = Caller(agent_id=memory.agent_id, session_id=memory.session_id, person=True)
        values = {
            "content": memory.content,
            "kind": memory.kind,
            "tags": list(memory.tags),
            "episode_id": memory.episode_id,
            "protection_tier": memory.protection_tier,
            "occurred_at": memory.created_at.isoformat(),
            "expires_at": memory.expires_at.isoformat() if memory.expires_at else None,
            "visibility": memory.visibility,
            # An org-visible memory lives on the org's shelf: written from this project, it goes back
            # there (its visibility says so).
            "org_id": scope.org_id,
            "project_id": scope.project_id,
        }
        try:  # kept under limits that have changed since (fewer tags, shorter texts): said as the tool says it
            arguments = RememberInput.model_validate({k: v for k, v in values.items() if v is not None})
        except ValidationError as exc:
            raise ToolFailure(friendly_validation_message("restore", exc, retry="")) from None
        results.append(remember(arguments, runtime, caller))
        # Each is a remember, consolidated again: hundreds take minutes (a trial's undo of a forget by tag
        # of 310 memories ran 35 minutes with nothing said).
        progress("restoring", len(results), len(found))
    return results


def _refused_update(runtime: Runtime, memory_id: str, scope: Scope) -> str | None:
    """Why a memory written for an explicit update that was refused cannot be restored: it never stood,
    and restored it would be a second, unmarked successor of the memory it was to replace (a trial: two
    servers raced updates of one memory, and `restore` of the loser's text set it beside the winner's)."""
    from writing.drafts import REFUSED_UPDATE

    retractions = [
        event
        for event in runtime.store.lineage(scope, [memory_id])
        if event.memory_id == memory_id and event.action == "retract"
    ]
    if not retractions or not retractions[-1].reason.startswith(REFUSED_UPDATE):
        return None
    why = retractions[-1].reason.removeprefix(REFUSED_UPDATE).removeprefix(": ")
    return (
        f"{memory_id} was written for an explicit update that was refused ({why}) and never stood: recall "
        "again, and update the memory that stands (`memoria edit ID ...`) or remember the text anew"
    )


def _not_restorable(memory_id: str, memory: Any, scope: Scope, flags: str | None = "") -> str | None:
    """Why ``memory_id`` cannot be restored here (None when it can): not found in this scope, active
    already, superseded, or purged. ``flags`` None: said for the live page (no other scope named)."""
    here = (scope.org_id, scope.project_id)
    if memory is None or (
        (memory.org_id, memory.project_id) != here
        and not (
            memory.visibility == "org" and Scope(memory.org_id, memory.project_id) == org_shelf(scope.org_id)
        )
    ):
        if flags is None:
            return f"no memory {memory_id!r} here: check the id"
        return (
            f"no memory {memory_id!r} in org {scope.org_id!r} / project {scope.project_id!r}{stored_in(memory)}: check the "
            "id (`memoria list --status retracted`) and --org/--project"
        )
    if memory.status == "active" and memory.past_expiry(datetime.now(UTC)):
        # Past its expiry, not yet retracted (a trial was told it "is active"): it is out of recall already.
        return (
            f"{memory_id} expired at {memory.expires_at:%Y-%m-%d %H:%M} UTC ({expired_by(memory)}) and recall "
            "leaves it out: remember its text again (`memoria remember TEXT`, with a later --until or none) "
            "to have it back"
        )
    if memory.status == "active":
        return f"{memory_id} is active: there is nothing to restore"
    if memory.status == "purged":
        return f"{memory_id} was purged: its text is erased for good, and cannot be restored"
    expired = memory.expires_at is not None and memory.expires_at <= datetime.now(UTC)
    if memory.protection_tier == "ephemeral" and expired:  # remembered again, it would expire at once
        return (
            f"{memory_id} was ephemeral and its time ran out at {memory.expires_at:%Y-%m-%d %H:%M} UTC: "
            "remember its text again as a lasting memory (`memoria remember --tier standard ...`) "
            "if it still holds"
        )
    if expired:  # its expiry is restored with it (a trial: restored without it, it never expired again)
        return (
            f"{memory_id} expired at {memory.expires_at:%Y-%m-%d %H:%M} UTC: remember its text again "
            "(`memoria remember TEXT`, with a later --until or none) if it still holds"
        )
    if memory.status == "superseded":
        return (
            f"{memory_id} was superseded by {memory.replaced_by}: correct that one with `memoria edit "
            f"{memory.replaced_by} TEXT{flags or ''}` if it is wrong"
        )
    return None
