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
_REPORTED_KEY = "memoria.reported_session_id"
_PREVIOUS_KEY = "memoria.previous_session_id"


def resolve_caller(
    ctx: Context[Any, Any], state: AppState, grant: Grant | None = None, *, begins_task: bool = False
) -> Caller:
    """With a bearer token the agent is the token's principal; otherwise the client's self-declared name.
    ``begins_task``: the call begins a task (a recall, a remember), so after a report of the connection's
    session it begins the next session."""
    session = ctx.request_context.session
    if grant is not None:  # the session is in the principal's namespace, as explicit ones are
        key, connection = _connection_session(
            session, state, _client_of(session, state, grant), begins_task=begins_task
        )
        previous = _previous_session(session, state, key)
        return Caller(
            agent_id=grant.principal,
            session_id=own_session(grant.principal, connection),
            previous_session=own_session(grant.principal, previous) if previous else None,
            # Org-visible memories are read in every project of the org: changing them takes a grant on all.
            may_change_org=lambda org_id: grant.allows("writes", Scope(org_id, ANY)),
            remote=True,
        )
    agent_id = _client_name(session)
    key, connection = _connection_session(session, state, agent_id, begins_task=begins_task)
    return Caller(
        agent_id=agent_id, session_id=connection, previous_session=_previous_session(session, state, key)
    )


def _previous_session(session: Any, state: AppState, key: str | None) -> str | None:
    """The connection's session before its current one (reported, then ended by a task), if any."""
    if key is not None:
        return state.previous_session(key)
    connection = getattr(session, "_connection", None)
    return connection.state.get(_PREVIOUS_KEY) if connection is not None else None


def end_session(ctx: Context[Any, Any], state: AppState, reported: str, grant: Grant | None = None) -> None:
    """Session ``reported`` was reported: if it is the connection's default session (named or not), the
    connection's next call of another tool begins a new one (a report again still replaces this one), so
    the connection's next task is not reported over it."""
    key, session_id = _connection_session(
        ctx.request_context.session, state, _client_of(ctx.request_context.session, state, grant), hold=True
    )
    if reported != (own_session(grant.principal, session_id) if grant is not None else session_id):
        return  # another session was reported: the connection's own goes on
    if key is not None:
        state.session_reported(key, session_id)
    else:  # a handshake-era connection keeps its session on the connection itself
        connection = ctx.request_context.session._connection
        connection.state[_REPORTED_KEY] = session_id


def _client_of(session: Any, state: AppState, grant: Grant | None) -> str:
    """Whose default session a call without a connection of its own (a 2026-era request) continues: the
    client's name, and with a token the principal's with it. Two clients of one token (two editor
    windows, each naming itself) keep two sessions, so one's session-private notes and report are not
    the other's (a new user's trial); two clients that give the same name share one, as nothing in
    such a request tells them apart (a ``session_id`` does)."""
    name = _client_name(session)
    return name if grant is None else state.client_key(grant.principal, name)


def _client_name(session: Any) -> str:
    params = session.client_params
    # The client names itself: keep it to one clean line before it becomes provenance.
    name = (
        " ".join(single_line(params.client_info.name).split()) if params and params.client_info.name else ""
    )
    return name[:128] or UNKNOWN_AGENT


def _connection_session(
    session: Any, state: AppState, agent_id: str, *, begins_task: bool = False, hold: bool = False
) -> tuple[str | None, str]:
    """The connection's key in ``state`` (None: held on the connection) and its default session."""
    # The SDK keeps per-connection state on the session's private Connection; there is no public handle.
    connection = getattr(session, "_connection", None)
    if connection is not None and connection.session_id:  # streamable HTTP with a session header
        key = f"http:{connection.session_id}"  # the transport's own connection id
        first = f"ses_http_{connection.session_id}"[:128]
        return key, state.session_for(key, first, begins_task=begins_task, hold=hold)
    if connection is not None and connection.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        # Handshake-era connections live as long as the client is connected: one id per connection.
        held = connection.state
        reported = held.get(_REPORTED_KEY)
        if begins_task and reported is not None and reported == held.get(_SESSION_KEY):
            held[_PREVIOUS_KEY] = reported
            held[_SESSION_KEY] = new_session_id()  # reported: this task begins the next session
        return None, held.setdefault(_SESSION_KEY, new_session_id())
    # 2026-era requests each arrive on a fresh per-request connection; stdio and in-process clients get
    # one lifespan each, so one id per (lifespan, client) is one id per connection for them.
    key = f"client:{agent_id}"
    return key, state.session_for(key, begins_task=begins_task)
