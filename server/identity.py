"""Who is calling: the agent (the MCP client's name from the handshake) and the session (one id per
client connection), used as defaults when a tool call does not name them."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from retrieval.text import single_line
from server.auth import ANY, Grant, own_session
from server.state import AppState, new_session_id
from storage.records import Scope
from tools.common import Caller

UNKNOWN_AGENT = "unknown-agent"
_SESSION_KEY = "memoria.session_id"


def resolve_caller(ctx: Context[Any, Any], state: AppState, grant: Grant | None = None) -> Caller:
    """With a bearer token the agent is the token's principal; otherwise the client's self-declared name."""
    session = ctx.request_context.session
    if grant is not None:  # the session is in the principal's namespace, as explicit ones are
        connection = _connection_session(session, state, grant.principal)
        return Caller(
            agent_id=grant.principal,
            session_id=own_session(grant.principal, connection),
            # Org-visible memories are read in every project of the org: changing them takes a grant on all.
            may_change_org=lambda org_id: grant.allows("writes", Scope(org_id, ANY)),
        )
    params = session.client_params
    # The client names itself: keep it to one clean line before it becomes provenance.
    name = (
        " ".join(single_line(params.client_info.name).split()) if params and params.client_info.name else ""
    )
    agent_id = name[:128] or UNKNOWN_AGENT
    return Caller(agent_id=agent_id, session_id=_connection_session(session, state, agent_id))


def _connection_session(session: Any, state: AppState, agent_id: str) -> str:
    # The SDK keeps per-connection state on the session's private Connection; there is no public handle.
    connection = getattr(session, "_connection", None)
    if connection is None:
        return state.session_for(agent_id)
    if connection.session_id:  # streamable HTTP with a session header: the transport's own connection id
        return f"ses_http_{connection.session_id}"[:128]
    if connection.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        # Handshake-era connections live as long as the client is connected: one id per connection.
        return connection.state.setdefault(_SESSION_KEY, new_session_id())
    # 2026-era requests each arrive on a fresh per-request connection; stdio and in-process clients get
    # one lifespan each, so one id per (lifespan, client) is one id per connection for them.
    return state.session_for(agent_id)
