"""MCP resources: a memory by id, the store's stats and the drift view, as JSON.

Each is a URI template whose scope is an optional query (``memoria://stats`` is the default scope,
``memoria://stats?org_id=acme&project_id=web`` another), read through the same ``invoke`` path as the
tools, so the same validation and grant checks apply: a token reads only the scopes it is granted, and a
memory outside them reads as not found. The templates' bare forms (``memoria://stats``,
``memoria://drift``) are also listed as resources, so clients that only list resources can attach them.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types import Resource as MCPResource
from pydantic import BaseModel

from server.registry import FaultError, NotFoundError, ToolSpec, invoke
from server.state import AppState

JSON = "application/json"


@dataclass(frozen=True)
class ResourceSpec:
    uri_template: str
    name: str
    title: str
    description: str
    read: Callable[..., Awaitable[str]]
    listed_uri: str | None = None  # the bare URI to list as a resource, when it needs no parameter


def build_resources(specs: dict[str, ToolSpec], *, tokens_required: bool) -> list[ResourceSpec]:
    async def run(
        spec: ToolSpec, ctx: Context[AppState, Any], arguments: dict[str, Any], path: tuple[str, ...] = ()
    ) -> str:
        query = sorted(set(arguments) - set(path))  # ``path``: the parameters in the URI's path
        unknown = _unknown_parameters(ctx, query)
        if unknown:  # the template would drop them: a misspelt filter would list everything unfiltered
            raise MCPError(
                INVALID_PARAMS,
                f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: this "
                f"resource takes {', '.join(query)}",
            )
        sent = {name: value for name, value in arguments.items() if value is not None}
        try:
            result = await invoke(
                spec,
                ctx,
                sent,
                tokens_required=tokens_required,
                with_llm=False,
                retry="read the resource again",
                strict=False,  # a URI's query is text: "limit=2" means 2
            )
        except NotFoundError as exc:  # JSON-RPC invalid params (-32602), MCP's "resource not found"
            raise ResourceNotFoundError(str(exc)) from None
        except FaultError as exc:  # the server's own fault: internal error (-32603), with what failed
            raise ResourceError(str(exc)) from None
        except ToolError as exc:
            # What the request asked for cannot be served (a token's refusal, a bad argument): invalid params
            # (-32602), not the internal error the SDK gives any other failure (a team's trial read a refusal
            # as a server fault, which clients may retry).
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        assert isinstance(result, BaseModel)
        return result.model_dump_json(indent=2)

    async def memory(
        memory_id: str, ctx: Context[AppState, Any], org_id: str | None = None, project_id: str | None = None
    ) -> str:
        return await run(
            specs["show_memory"],
            ctx,
            {"memory_id": memory_id, "org_id": org_id, "project_id": project_id},
            path=("memory_id",),
        )

    async def memories(
        ctx: Context[AppState, Any],
        org_id: str | None = None,
        project_id: str | None = None,
        agent_id: str | None = None,
        tag: str | None = None,
        kind: str | None = None,
        episode_id: str | None = None,
        since: str | None = None,
        until: str | None = None,
        time_zone: str | None = None,
        status: str | None = None,
        cursor: str | None = None,
        limit: str | None = None,
    ) -> str:
        arguments = {
            "org_id": org_id,
            "project_id": project_id,
            "agent_id": agent_id,
            "tag": tag,
            "kind": kind,
            "episode_id": episode_id,
            "since": _spaced(since),
            "until": _spaced(until),
            "time_zone": time_zone,
            "status": status,
            "cursor": cursor,
            "limit": limit,
        }
        return await run(specs["list_memories"], ctx, arguments)

    async def stats(
        ctx: Context[AppState, Any], org_id: str | None = None, project_id: str | None = None
    ) -> str:
        return await run(specs["stats"], ctx, {"org_id": org_id, "project_id": project_id})

    async def drift(
        ctx: Context[AppState, Any],
        org_id: str | None = None,
        project_id: str | None = None,
        include_resolved: str | None = None,
        limit: str | None = None,
    ) -> str:
        # As the drift tool takes them (a trial: the resource took neither).
        arguments = {"org_id": org_id, "project_id": project_id, "include_resolved": include_resolved}
        return await run(specs["drift"], ctx, {**arguments, "limit": limit})

    return [
        ResourceSpec(
            "memoria://memory/{memory_id}{?org_id,project_id}",
            "memory",
            "A memory",
            "One memory in full: content, provenance, tier, status, feedback weight and its history, and its "
            "lineage (what it replaced, what replaced it).",
            memory,
        ),
        ResourceSpec(
            "memoria://memories{?org_id,project_id,agent_id,tag,kind,episode_id,since,until,time_zone,status,cursor,limit}",
            "memories",
            "Memories",
            "The scope's active memories, newest first, a page at a time (limit, 50 by default): filter by "
            "agent, tag, kind, episode and a window (since, until: an ISO date, month or time, or 'yesterday', 'last "
            "week', '3 days ago'; days and weeks of time_zone, else UTC); pass a page's next_cursor as cursor "
            "for the next; status=superseded, retracted or any lists a window's history too. No memory appears "
            "twice across pages, even while writes arrive.",
            memories,
            listed_uri="memoria://memories",
        ),
        ResourceSpec(
            "memoria://stats{?org_id,project_id}",
            "stats",
            "Memory stats",
            "What the scope's memory holds: memories by status, kind, tier and embedder, agents, episodes, "
            "weights moved by outcomes, sessions reported, open contradictions, and the active backends.",
            stats,
            listed_uri="memoria://stats",
        ),
        ResourceSpec(
            "memoria://drift{?org_id,project_id,include_resolved,limit}",
            "drift",
            "Drift",
            "Where beliefs changed or conflict: open contradiction pairs (include_resolved=true: settled ones "
            "too) and recent revisions and consolidations, with what replaced what and who decided; at most "
            "limit of each (50 by default).",
            drift,
            listed_uri="memoria://drift",
        ),
    ]


def _spaced(words: str | None) -> str | None:
    """A time in words as a form-encoded query wrote it ("last+week", "3+days+ago": "+" for a space, which
    the URI template leaves as it is; a new user's trial). A "+" between digits, an offset
    ("09:00:00+02:00"), stays."""
    if words is None:
        return None
    return re.sub(r"(?<=[A-Za-z0-9])\+(?=[A-Za-z])|(?<=[A-Za-z])\+(?=[0-9])", " ", words)


def _unknown_parameters(ctx: Context[AppState, Any], known: Sequence[str]) -> list[str]:
    """The query parameters of the URI read that its template does not name (a new user's trial:
    ``memoria://memories?tags=ops`` listed every memory, ``tags`` dropped), sorted."""
    params = getattr(getattr(ctx, "request_context", None), "params", None) or {}
    uri = params.get("uri") if isinstance(params, Mapping) else None
    if not isinstance(uri, str):
        return []
    return sorted(set(parse_qs(urlsplit(uri).query, keep_blank_values=True)) - set(known))


def listed(resources: list[ResourceSpec]) -> list[MCPResource]:
    """The bare forms of parameterless resources, for resources/list."""
    return [
        MCPResource(
            uri=spec.listed_uri,
            name=spec.name,
            title=spec.title,
            description=spec.description,
            mime_type=JSON,
        )
        for spec in resources
        if spec.listed_uri is not None
    ]
