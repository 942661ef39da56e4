"""An update that keeps a memory's text: its tags, protection tier or expiry change in place
(``WriteService.amend``).
A new user's trial could fix a wrong tag, or make an ephemeral memory lasting, only by rewording it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from writing.consolidation.report import Actor
from writing.drafts import WriteRefused

if TYPE_CHECKING:
    from storage.records import MemoryRecord
    from tools.common import Runtime
    from tools.remember import MemoryFields, RememberOutput
    from writing.drafts import Prepared


def amended(
    runtime: Runtime, memory: MemoryRecord, prepared: Prepared, args: MemoryFields, *, retag: bool = True
) -> RememberOutput:
    """``memory`` with the tier ``args`` gives and (``retag``) its tags as ``prepared`` redacted them, its
    text unchanged. The same text with ``replaces`` changes nothing else: another kind, episode, date or
    visibility is refused, not dropped unsaid."""
    from tools.remember import output_of

    given = args.model_fields_set
    if retag and (others := sorted({"kind", "episode_id", "occurred_at", "visibility"} & given)):
        raise WriteRefused(
            f"the same text with replaces changes only tags, protection_tier and expires_at; its {' and '.join(others)} "
            f"{'stays' if len(others) == 1 else 'stay'} as {'it is' if len(others) == 1 else 'they are'}: leave "
            f"{'it' if len(others) == 1 else 'them'} out, or pass the corrected text"
        )
    record = prepared.record
    result = runtime.writer.amend(
        memory,
        Actor(record.agent_id, record.session_id),
        tags=record.tags if retag and "tags" in given else None,
        tier=args.protection_tier if "protection_tier" in given else None,
        redacted=prepared.redacted,
        until=args.expires_at if "expires_at" in given else None,
        clear_expiry="expires_at" in given and args.expires_at is None,
    )
    out = output_of(result, args)
    out.status, out.duplicate_of = "updated", None
    return out


def made_lasting(
    runtime: Runtime, out: RememberOutput, prepared: Prepared, args: MemoryFields
) -> RememberOutput | None:
    """An ephemeral memory stated again (``out``, a duplicate) with a lasting tier: its author's makes it
    lasting (a trial's went on expiring, with nothing said); another agent's says it stays ephemeral (in
    ``out``'s note). None when there is nothing to change."""
    if not (
        out.status == "duplicate"
        and out.protection_tier == "ephemeral"
        and "protection_tier" in args.model_fields_set
        and args.protection_tier != "ephemeral"
    ):
        return None
    if out.agent_id != prepared.record.agent_id:
        kept = f"kept its ephemeral tier: only its author ({out.agent_id}) makes it lasting"
        out.note = f"{out.note}; {kept}" if out.note else kept
        return None
    stored = runtime.store.get_memory(out.id, prepared.record.scope)
    if stored is None or stored.status != "active":  # superseded meanwhile: the note names what stands
        return None
    if stored.protection_tier != "ephemeral":  # made lasting already, by an earlier item of the same batch
        return out.model_copy(update={"protection_tier": stored.protection_tier, "expires_at": None})
    return amended(runtime, stored, prepared, args, retag=False)  # restating added its tags


def kept_expiry(out: RememberOutput, prepared: Prepared, args: MemoryFields) -> None:
    """A text stored already keeps its expiry: it changes only by an update of it (a restatement by another
    agent must not expire someone's memory); ``out``'s note says so when another was asked for."""
    from tools.common import iso

    asked = iso(prepared.record.expires_at) if prepared.record.expires_at else None
    if out.status == "duplicate" and "expires_at" in args.model_fields_set and out.expires_at != asked:
        kept = f"kept its expiry ({out.expires_at or 'none'}): pass replaces={out.id} with expires_at to change it"
        out.note = f"{out.note}; {kept}" if out.note else kept
