"""stdio with JSON-RPC hygiene: a line that is not a valid JSON-RPC message gets an error reply, and the
server goes on serving.

The SDK's stdio transport hands a line it cannot read to the server as an exception, which logs it and
answers nothing: a client that sent a request with a bad parameter, or text with a lone surrogate, waits
for a reply that never comes. Here each such line is answered as JSON-RPC 2.0 says: -32700 (parse error,
id null) for text that is not JSON, -32600 (invalid request) with the request's id when one can be read.
A malformed response or notification from the client is logged, not answered (JSON-RPC never replies to
those).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger(__name__)

SHOWN = 80  # characters of a bad line quoted in the reply


def malformed_reply(exc: Exception) -> types.JSONRPCError | None:
    """The error reply to a line the transport could not read as a JSON-RPC message; None when none is
    due (a response or notification from the client)."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    raw = next(
        (e["input"] for e in errors if e["type"] == "json_invalid" and isinstance(e["input"], str)), None
    )
    if raw is not None and not raw.strip():
        return None  # a blank line between messages: nothing to answer
    if raw is not None:
        message = _parsed(raw)
        if not isinstance(message, dict):
            return _error(
                None,
                types.PARSE_ERROR,
                f"Parse error: the line is not valid JSON text ({_shown(raw)}). Send one JSON-RPC message "
                "per line, as UTF-8 JSON (no lone surrogates).",
            )
    else:
        message = next((e["input"] for e in errors if isinstance(e.get("input"), dict)), None)
    if not isinstance(message, dict):
        return _error(
            None,
            types.INVALID_REQUEST,
            "Invalid Request: a JSON-RPC message is an object with jsonrpc, method and, for a request, id.",
        )
    if "method" not in message and ("result" in message or "error" in message):
        log.warning("ignored a malformed JSON-RPC response from the client: %s", exc)
        return None
    request_id = message.get("id")
    if "id" not in message or not isinstance(request_id, str | int) or isinstance(request_id, bool):
        if "method" in message and "id" not in message:
            log.warning("ignored a malformed JSON-RPC notification: %s", exc)
            return None
        request_id = None
    # Of the union's members, the errors of the one the message meant to be.
    meant = "JSONRPCRequest" if request_id is not None and "method" in message else "JSONRPCNotification"
    problems = "; ".join(
        _problem(e) for e in errors if e["type"] != "json_invalid" and e["loc"][:1] == (meant,)
    )
    return _error(
        request_id,
        types.INVALID_REQUEST,
        f"Invalid Request: {problems or 'the text is not valid UTF-8 JSON'}. Send a JSON-RPC 2.0 object: "
        '{"jsonrpc": "2.0", "id": 1, "method": "...", "params": {...}} (params, when given, an object).',
    )


@asynccontextmanager
async def replying_to_malformed(
    read_stream: Any, write_stream: Any
) -> AsyncIterator[MemoryObjectReceiveStream[SessionMessage | Exception]]:
    """The messages of ``read_stream`` for the server to run on; a line that could not be read is
    answered on ``write_stream`` instead of reaching the server."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def forward() -> None:
        async with send:
            async for item in read_stream:
                if isinstance(item, Exception):
                    reply = malformed_reply(item)
                    log.warning("a malformed JSON-RPC line: %s", _shown(str(item)))
                    if reply is not None:
                        await write_stream.send(SessionMessage(reply))
                    continue
                await send.send(item)

    async with anyio.create_task_group() as group:
        group.start_soon(forward)
        try:
            yield receive
        finally:
            group.cancel_scope.cancel()


def _parsed(raw: str) -> Any:
    """``raw`` as Python's JSON reader sees it (it reads lone surrogates that strict UTF-8 JSON refuses);
    None if it cannot (not JSON, or nested too deep)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _problem(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"][1:]) or "the message"
    return f"{where}: {error['msg']}"


def _shown(text: str) -> str:
    return json.dumps(text[:SHOWN] + ("..." if len(text) > SHOWN else ""))


def _error(request_id: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
