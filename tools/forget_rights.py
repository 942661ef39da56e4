"""Who may forget a memory, and what a refusal says: any memory the caller may read, but an immutable one only
by its author, and an org-visible one only with a token that writes to every project of its org."""

from __future__ import annotations

import shlex

from storage.records import MemoryRecord
from tools.common import Caller


def may_forget(memory: MemoryRecord, caller: Caller) -> bool:
    """Whether ``caller`` may retract or purge ``memory``: any memory it may read, but an immutable one
    only if it remembered it (the tier its author chose says that no other agent changes it), and an
    org-visible one only with a token that writes to every project of its org."""
    if memory.visibility == "org" and not caller.may_change_org(memory.org_id):
        return False
    return memory.protection_tier != "immutable" or memory.agent_id == caller.agent_id


def not_theirs(memory: MemoryRecord, caller: Caller) -> str:
    if memory.visibility == "org" and not caller.may_change_org(memory.org_id):
        return (
            f"{memory.id} (org-visible) is read by every project of org {memory.org_id!r}, and this token may not "
            f"write to all of them: nothing was forgotten. A token that grants {memory.org_id}/* may forget it"
        )
    said = (
        f"{memory.id} is immutable and was remembered by agent {memory.agent_id!r}: only that agent may forget "
        f"it, and {caller.agent_id!r} is another; nothing was forgotten. Ask {memory.agent_id!r} to forget it"
    )
    if caller.remote:  # a token's holder: the command line of the server's machine is not theirs
        return said
    flags = f" --org {shlex.quote(memory.org_id)}" + (
        f" --project {shlex.quote(memory.project_id)}" if memory.project_id else ""
    )
    return f"{said} (from this machine's command line: memoria forget {memory.id}{flags} --agent {shlex.quote(memory.agent_id)})"
