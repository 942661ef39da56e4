"""What a recall that matched nothing says of where it looked: a project that holds nothing this caller may
read (a mistyped ``project_id``, most likely: the org's projects that hold memories are named), one whose
memories were all retracted or superseded, one that reads only the org's shelf, and a time window that
holds memories that did not match, or that were corrected since; and where a memory not found in the
caller's scope is (``held_elsewhere``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC
from typing import TYPE_CHECKING

from tools.recall_notes import NOTHING_MATCHED

if TYPE_CHECKING:
    from storage.records import MemoryRecord, MemoryStatus, Scope, TimeWindow, View
    from tools.common import Caller, Runtime


def empty_recall_note(
    runtime: Runtime,
    view: View,
    window: TimeWindow | None,
    note: str,
    *,
    scope_too: bool,
    name_projects: bool = False,
) -> tuple[str, str | None]:
    """A recall that matched nothing: its ``note``, in place of which (``scope_too``, without a window) the
    scope's own emptiness is said, or to which what its window held since is added; and that window part
    alone, which the text shows beside an empty context."""
    if window is None:
        scoped = (
            empty_scope_note(runtime, replace(view, with_org=False), name_projects=name_projects)
            if scope_too
            else None
        )
        return scoped or note, None
    if window.since is not None and window.since > runtime.clock():  # (a trial was told of the floor)
        moment = window.since.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        return (
            f"{NOTHING_MATCHED}: the time window searched starts in the future ({moment}), and no memory "
            "is dated after now: search from a time before now, or without since",
            None,
        )
    history = history_note(runtime, view, window)
    # A question in few words about a time ("what did we decide?" since last week) may match nothing there
    # while the window holds what it asks for (a new user's trial): say how to read the window whole.
    held = (
        "this window holds memories that did not match the query: the `memoria://memories` resource "
        "with the same since/until (and time_zone) lists them"
        if runtime.store.holds_memories_in(view, window)
        else None
    )
    said = "; ".join(part for part in (note, held, history) if part)
    return said, "; ".join(part for part in (held, history) if part) or None


# How the notes of a scope that holds nothing current this caller may read begin (the org's shelf aside).
SCOPE_EMPTY_NOTES = ("nothing is stored in ", "every memory of ")
ELSEWHERE = "holds memories in project"  # the clause that names the org's other projects


def empty_scope_note(
    runtime: Runtime, view: View, *, name_projects: bool = False, searched: bool = True
) -> str | None:
    """What an empty recall adds when the scope holds no current memory this caller may read: none at all
    (a new user's trial with a mistyped project_id read "Nothing relevant was found", as for any query in a
    project full of memories), or only memories retracted or superseded since (another trial was sent
    looking for a typo in ids that were right). None when it holds some. With ``name_projects`` (a caller
    on this machine, not a token's holder, to whom other projects' names are no secret), an empty project
    names the org's projects that hold memories, the nearest spelling first (a trial's "wbe" for "web"), or
    says that the whole store is empty (``_elsewhere``). ``searched`` False: the caller searched for nothing
    (drift), so nothing "matched nothing" (a trial)."""
    if runtime.store.holds_memories_in(view, None):
        return None
    where = f"org {view.home.org_id!r} / project {view.home.project_id!r}"
    if runtime.store.holds_memories_in(view, None, _HISTORY):
        return (
            f"every memory of {where} that this caller may read was retracted or superseded since: nothing "
            "current to recall (the `memoria://memories` resource with status=any lists them)"
        )
    if runtime.store.holds_memories_in(replace(view, with_org=True), None):  # the org's shelf only
        if not searched:  # (drift: nothing was searched for, and nothing of the shelf's is in dispute)
            return (
                f"{where} holds no memory of its own, only the org's shelf, which every project reads: check "
                "`project_id` if this project should hold some"
            )
        return (
            f"nothing relevant was found; {where} holds no memory of its own, and the org's shelf, which every "
            "project reads, matched nothing: check `project_id` if this project should hold some"
        )
    named = _elsewhere(runtime, view) if name_projects else ""
    return (
        f"nothing is stored in {where} that this caller may read: check `org_id` and `project_id` "
        f"(memories are kept per project){named}"
    )


def empty_project_note(runtime: Runtime, view: View, caller: Caller) -> str | None:
    """``empty_scope_note`` for a call that searched for nothing (drift, stats): the project's emptiness as
    it is, nothing said to have "matched nothing"."""
    return empty_scope_note(
        runtime, replace(view, with_org=False), name_projects=not caller.remote, searched=False
    )


# The most projects an empty project's note names.
PROJECTS_NAMED = 5


def _elsewhere(runtime: Runtime, view: View) -> str:
    """Where the memories are, for an empty project's note: the projects of its org that hold active
    memories, the nearest spelling first (``difflib``'s ratio, then by name; at most ``PROJECTS_NAMED``),
    or, when the whole store holds none, the store itself (a mistyped MEMORIA_DB_URI makes a new, empty
    store, which a new user's trial saw only as empty recalls: the warning went to the server's stderr)."""
    from difflib import SequenceMatcher

    scopes = runtime.store.scopes()
    if not scopes:
        return (
            f"; the store at {runtime.store.uri} holds no memory in any project: if another store was meant, "
            "check MEMORIA_DB_URI"
        )
    org_id, project_id = view.home.org_id, view.home.project_id
    held = {scope.project_id for scope in scopes if scope.org_id == org_id and scope.project_id}
    held.discard(project_id)
    if not held:
        return ""
    nearest = sorted(held, key=lambda name: (-SequenceMatcher(None, project_id, name).ratio(), name))
    named = nearest[:PROJECTS_NAMED]
    return f"; org {org_id!r} {ELSEWHERE}{'s' if len(named) > 1 else ''} " + ", ".join(map(repr, named))


def history_note(runtime: Runtime, view: View, window: TimeWindow) -> str | None:
    """What an empty recall within ``window`` adds when the window holds memories retracted or superseded
    since (a trial asked who was on call a week whose memory was corrected since, and read nothing)."""
    if not runtime.store.holds_memories_in(view, window, _HISTORY):
        return None
    return (
        "this window also holds memories superseded or retracted since, which recall leaves out: the "
        "`memoria://memories` resource with status=any and the same since/until lists them"
    )


# What a memory retracted or superseded since is; a purged one has no text left to show.
_HISTORY: tuple[MemoryStatus, ...] = ("superseded", "retracted")


def held_elsewhere(runtime: Runtime, caller: Caller, memory_id: str, asked: Scope) -> str:
    """Where a memory not found in the caller's scope is stored, said to a caller on this machine (the
    command line, stdio: to whom the store's projects are no secret, as for an empty project's note), when
    the whole project reads it: "; it is in org 'default' / project 'alpha'". A new user's trial was told
    an id from `memoria list --project alpha` did not exist, by a command run without --project. Never to a
    token's holder, and a memory private to an agent or a session only to a person at the command line, who
    may read it with ``--agent`` (a new user's trial listed such a memory with `list --agent alice`, and
    `show`, `edit` and `forget` then said that it did not exist), and with ``--org``/``--project`` too when
    it is stored elsewhere than the ``asked`` scope."""
    if caller.remote:
        return ""
    memory = runtime.store.get_memory(memory_id)
    if memory is not None and not memory.shared and caller.person:
        session = f" --session {memory.session_id}" if memory.visibility == "session" else ""
        whose = f"a session of agent {memory.agent_id!r}" if session else f"agent {memory.agent_id!r}"
        where = (f"--org {memory.org_id} " if memory.org_id != asked.org_id else "") + (
            f"--project {memory.project_id} " if memory.project_id != asked.project_id else ""
        )
        return (
            f"; it is private to {whose} in org {memory.org_id!r} / project {memory.project_id!r} (pass "
            f"{where}--agent {memory.agent_id}{session})"
        )
    return stored_in(memory)


def stored_in(memory: MemoryRecord | None) -> str:
    """Where a memory the whole project reads is stored, as a not-found message adds it (``held_elsewhere``);
    nothing for none, or for a memory private to an agent or a session."""
    if memory is None or not memory.shared:
        return ""
    return f"; it is in org {memory.org_id!r} / project {memory.project_id!r}"
