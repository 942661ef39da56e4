"""list_memories: the scope's active memories page by page, newest first, for the
``memoria://memories{?...}`` resource and ``memoria list``.

A page ends with a cursor (the last memory's time and id, opaque to the caller); the next page starts
after it. Memories written while someone pages come before the first page, so no page repeats a memory.
Tenancy is that of every read: the caller's org and project only.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import ClassVar, Literal

import anyio
from pydantic import BaseModel, Field, field_validator

from retrieval.time_window import EXAMPLES as WINDOW_EXAMPLES
from retrieval.time_window import WindowError, resolve, span, zone_of
from storage.records import MemoryStatus, View
from tools.common import Caller, Identifier, Runtime, ScopeArgs, Tag, TimeText, ToolFailure, ZoneText, iso

PREVIEW_CHARS = 300
PAGE = 50
MAX_PAGE = 200


ListedStatus = Literal["active", "superseded", "retracted", "any"]
# What each status lists: "any" is the history a window held (a purged memory has no text to list).
LISTED_STATUSES: dict[str, tuple[MemoryStatus, ...]] = {
    "active": ("active",),
    "superseded": ("superseded",),
    "retracted": ("retracted",),
    "any": ("active", "superseded", "retracted"),
}


class ListMemoriesInput(ScopeArgs):
    # Here agent_id names whose memories to list, not who lists them: with a token too, any author.
    agent_id_filters: ClassVar[bool] = True
    agent_id: Identifier | None = Field(None, description="Only memories this agent wrote.")
    tag: Tag | None = Field(None, description="Only memories with this tag.")
    kind: Literal["fact", "episode", "artifact"] | None = None
    episode_id: Identifier | None = Field(None, description="Only this episode's memories.")
    since: TimeText | None = Field(
        None, description=f"Dated (occurred_at, else written) at or after: {WINDOW_EXAMPLES}."
    )
    until: TimeText | None = Field(None, description="Dated before (a day, week or month: before it ends).")
    time_zone: ZoneText | None = Field(None, description='Whose days and weeks, e.g. "Europe/Paris".')
    cursor: str | None = Field(None, max_length=512, description="The next_cursor of the previous page.")
    limit: int = Field(PAGE, ge=1, le=MAX_PAGE, description="Memories per page.")
    status: ListedStatus = Field(
        "active",
        description="active (the default), superseded, retracted, or any: a window's history as well (with "
        "memories past their expiry, status expired).",
    )

    @field_validator("since", "until")
    @classmethod
    def _readable(cls, value: str | None) -> str | None:
        if value is not None:  # refused here, with examples, if it names no time (resolved when listing)
            span(value, now=datetime.now(UTC))
        return value


class ListedMemory(BaseModel):
    id: str
    preview: str = Field(description=f"The first {PREVIEW_CHARS} characters of its content.")
    kind: str
    tags: list[str]
    agent_id: str
    episode_id: str | None
    created_at: str
    protection_tier: str
    expires_at: str | None = Field(
        None, description="When it expires: an ephemeral one, or one given expires_at (null: never)."
    )
    visibility: str = Field(description="Who may read it: org, project, agent or session.")
    weight: float
    status: str = "active"
    replaced_by: str | None = Field(None, description="The memory that superseded it, if one did.")


class ListMemoriesOutput(BaseModel):
    org_id: str
    project_id: str
    memories: list[ListedMemory] = Field(description="Memories of the status asked for, newest first.")
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null on the last page.")
    since: str | None = Field(None, description="The window's start, resolved (UTC).")
    until: str | None = Field(None, description="The window's end, resolved (UTC, exclusive).")


def encode_cursor(created_at: datetime, memory_id: str) -> str:
    at = created_at.replace(tzinfo=UTC) if created_at.tzinfo is None else created_at.astimezone(UTC)
    raw = json.dumps([at.isoformat(), memory_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        at, memory_id = json.loads(base64.urlsafe_b64decode(padded.encode()).decode())
        moment = datetime.fromisoformat(at)
        if not isinstance(memory_id, str) or moment.tzinfo is None:
            raise ValueError(cursor)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise ToolFailure(
            "this cursor is not one this server gave; list again without it to start from the newest"
        ) from None
    return moment, memory_id


def list_memories(args: ListMemoriesInput, runtime: Runtime, caller: Caller) -> ListMemoriesOutput:
    scope = args.scope(runtime.settings)
    # agent_id here filters by author; what may be listed is the caller's to see (and the org's shelf).
    view = View(scope, caller.viewer)
    try:
        window = resolve(args.since, args.until, now=runtime.clock(), zone=zone_of(args.time_zone))
    except WindowError as exc:
        raise ToolFailure(str(exc)) from None
    before = decode_cursor(args.cursor) if args.cursor else None
    now = runtime.clock()  # one moment: what is left out as expired and what is listed so
    # One more than a page: whether another page follows.
    found = runtime.store.list_memories(
        view,
        limit=args.limit + 1,
        before=before,
        agent_id=args.agent_id,
        tag=args.tag,
        kind=args.kind,
        episode_id=args.episode_id,
        window=window,
        statuses=LISTED_STATUSES[args.status],
        # A window's history holds what expired too: past its time, not yet retracted (a trial saw a store
        # only the command line used list it nowhere, though `show` and `stats` said it expired).
        expired=args.status == "any",
        now=now,
    )
    page = found[: args.limit]
    last = page[-1] if page and len(found) > args.limit else None
    return ListMemoriesOutput(
        org_id=scope.org_id,
        project_id=scope.project_id,
        memories=[
            ListedMemory(
                id=memory.id,
                preview=memory.content[:PREVIEW_CHARS],
                kind=memory.kind,
                tags=list(memory.tags),
                agent_id=memory.agent_id,
                episode_id=memory.episode_id,
                created_at=iso(memory.created_at),
                protection_tier=memory.protection_tier,
                expires_at=iso(memory.expires_at) if memory.expires_at else None,
                visibility=memory.visibility,
                weight=round(memory.weight, 6),
                status=memory.status_at(now),
                replaced_by=memory.replaced_by,
            )
            for memory in page
        ],
        next_cursor=encode_cursor(last.created_at, last.id) if last is not None else None,
        since=iso(window.since) if window.since else None,
        until=iso(window.until) if window.until else None,
    )


async def handle(args: ListMemoriesInput, runtime: Runtime, caller: Caller) -> ListMemoriesOutput:
    return await anyio.to_thread.run_sync(list_memories, args, runtime, caller)
