"""stdio with JSON-RPC hygiene: a line that is not a valid JSON-RPC message gets an error reply, and the
server goes on serving; and the wire's two descriptors served by a thread each (``wire``).

The SDK's stdio transport hands a line it cannot read to the server as an exception, which logs it and
answers nothing: a client that sent a request with a bad parameter, or text with a lone surrogate, waits
for a reply that never comes. Here each such line is answered as JSON-RPC 2.0 says: -32700 (parse error,
id null) for text that is not JSON, -32600 (invalid request) with the request's id when one can be read.
A malformed response or notification from the client is logged, not answered (JSON-RPC never replies to
those).
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
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


# -- the wire: fd 0 and 1, a thread each ---------------------------------------------------------------
#
# The SDK's stdio transport reads and writes through anyio.wrap_file: every line read, and every reply
# written and flushed, is a hop to a worker thread and back (three a request), each taking a token of the
# worker threads the tools run on. Under 30 remembers in flight those hops were a queue of their own: a
# reply spent longer between its tool's return and the wire than in the write engine (benchmarks/writes.py:
# 142 -> 169 writes a second with the wire's own threads). And with every token taken by tool calls (a
# burst of 40 slow ones), the next line, a ping or a cancellation, waited for one of them to end.

READ_CHUNK = 1 << 16
# Read ahead of the server, at most this much (a client that floods it waits in its pipe, as before).
READ_AHEAD_BYTES = 8 << 20
# Replies queued for the writer thread before the server waits for it (a client that stops reading).
WRITE_BACKLOG_BYTES = 8 << 20
# How long a stopping server waits for its last replies to reach the client: the writer's drain at exit,
# and a flush held back by a full backlog once the client has closed its input.
DRAIN_SECONDS = 5.0


class WireLines:
    """The lines of file descriptor ``fd``, read by a thread of its own and handed to the event loop a batch
    at a time: what the SDK's stdio transport iterates over (``async for line in ...``). ``on_end`` is
    called on the event loop as soon as the client has closed its end (lines may still wait to be taken)."""

    def __init__(self, fd: int, on_end: Callable[[], None] | None = None) -> None:
        self._fd = fd
        self._on_end = on_end
        self._loop = asyncio.get_running_loop()
        # (lines, their size in bytes); None once the client closed its end
        self._batches: asyncio.Queue[tuple[list[str], int] | None] = asyncio.Queue()
        self._taking: list[str] = []  # the batch being taken, last line first
        self._room = threading.Condition()
        self._ahead = 0  # bytes handed to the loop and not yet taken by the server
        self._thread = threading.Thread(target=self._read, name="memoria-stdin", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        # The line being read, in pieces: joined once, when its newline arrives (a line of many reads is
        # not copied again at each read, nor searched again from its start).
        pieces: list[bytes] = []
        while True:
            chunk: bytes | None
            try:
                chunk = os.read(self._fd, READ_CHUNK)
            except BlockingIOError:  # a descriptor handed over in non-blocking mode: wait for input
                chunk = None if _wait_until(self._fd, readable=True) else b""
            except OSError:
                chunk = b""
            if chunk is None:
                continue
            if not chunk:  # the client closed its end: what is left is the last line
                if self._on_end is not None:
                    # Said at once, not when the server has taken every line: a flush held back by a client
                    # that stopped reading may be what keeps the server from taking them (``WireWriter``).
                    with suppress(RuntimeError):
                        self._loop.call_soon_threadsafe(self._on_end)
                rest = b"".join(pieces)
                if not rest or self._hand(([_text(rest)], len(rest))):
                    self._hand(None)
                return
            cut = chunk.rfind(b"\n")
            if cut < 0:
                pieces.append(chunk)
                continue
            whole = b"".join([*pieces, chunk[:cut]])
            pieces = [chunk[cut + 1 :]] if cut + 1 < len(chunk) else []
            if not self._hand(([_text(line) + "\n" for line in whole.split(b"\n")], len(whole))):
                return

    def _hand(self, batch: tuple[list[str], int] | None) -> bool:
        """Give the event loop ``batch`` (None: the end) once what it holds unread is under the read-ahead
        bound; False when the loop is gone (the server stopped)."""
        with self._room:
            while self._ahead > READ_AHEAD_BYTES:
                self._room.wait()
            self._ahead += batch[1] if batch is not None else 0
        try:
            self._loop.call_soon_threadsafe(self._batches.put_nowait, batch)
        except RuntimeError:
            return False
        return True

    def __aiter__(self) -> WireLines:
        return self

    async def __anext__(self) -> str:
        while not self._taking:
            batch = await self._batches.get()
            if batch is None:
                self._batches.put_nowait(None)  # the end, for any later reader too
                raise StopAsyncIteration
            lines, size = batch
            with self._room:
                self._ahead -= size
                self._room.notify()
            self._taking = lines[::-1]
        return self._taking.pop()


def _text(line: bytes) -> str:
    # As the SDK's reader decodes: UTF-8, an undecodable byte replaced by U+FFFD (inside a JSON string the
    # message is then read with that character in its place; elsewhere it is refused as invalid JSON).
    return line.decode("utf-8", errors="replace")


def _wait_until(fd: int, *, readable: bool) -> bool:
    """Until ``fd`` (non-blocking) can be read from or written to again (or has hung up); False when it
    cannot be waited on (closed). ``poll``: ``select`` refuses descriptors numbered 1024 and up, which a
    process holding many files hands out."""
    import select

    poller = select.poll()
    try:
        poller.register(fd, select.POLLIN if readable else select.POLLOUT)
        poller.poll()
    except (OSError, ValueError):
        return False
    return True


class WireWriter:
    """Replies for file descriptor ``fd``, written by a thread of its own in the order flushed: what the
    SDK's stdio transport writes to (``await write(line)``, then ``await flush()``). A failed write (the
    client went away) is raised by the next flush, as the SDK's own writer raised it.

    Past ``WRITE_BACKLOG_BYTES`` of replies not yet written (a client that stopped reading), a flush waits
    on the event loop until the writer makes room: it takes none of the worker threads the tools run on (a
    tool that asks the client's model, by sampling, waits for its request to be written), and it can be
    cancelled. Once the client has closed its input (``input_ended``), a flush waits ``DRAIN_SECONDS`` at
    most, then fails as a write to a client that went away does: the server then stops instead of waiting
    for a client that neither reads nor closes its end."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._loop = asyncio.get_running_loop()
        self._unflushed: list[str] = []
        self._condition = threading.Condition()
        self._queued: list[bytes] = []
        self._backlog = 0  # bytes flushed and not yet written
        self._error: OSError | None = None
        self._closing = False
        self._room: list[asyncio.Future[None]] = []  # flushes waiting for room (on the event loop)
        self._input_ended_at: float | None = None
        self._thread = threading.Thread(target=self._write, name="memoria-stdout", daemon=True)
        self._thread.start()

    async def write(self, text: str) -> None:
        self._unflushed.append(text)

    async def flush(self) -> None:
        data = "".join(self._unflushed).encode("utf-8")
        self._unflushed.clear()
        with self._condition:
            if self._error is not None:
                raise self._error
            self._queued.append(data)
            self._backlog += len(data)
            self._condition.notify_all()
        while True:
            with self._condition:
                if self._error is not None:
                    raise self._error
                if self._backlog <= WRITE_BACKLOG_BYTES or self._closing:
                    return
                left = None
                if self._input_ended_at is not None:
                    left = self._input_ended_at + DRAIN_SECONDS - time.monotonic()
                    if left <= 0:
                        raise BrokenPipeError(
                            errno.EPIPE,
                            f"the client closed its input and read no reply for {DRAIN_SECONDS:g} s",
                        )
                room: asyncio.Future[None] = self._loop.create_future()
                self._room.append(room)
            try:
                async with asyncio.timeout(left):
                    await room
            except TimeoutError:
                pass  # the deadline is looked at again above
            finally:
                with self._condition:
                    if room in self._room:
                        self._room.remove(room)

    def input_ended(self) -> None:
        """The client closed its input (called on the event loop): a flush held back by the backlog waits
        ``DRAIN_SECONDS`` at most from now."""
        if self._input_ended_at is None:
            self._input_ended_at = time.monotonic()
            with self._condition:
                waiting, self._room = self._room, []
            _release(waiting)

    def _make_room(self) -> None:
        """Under the condition, on the writer's thread: wake the flushes waiting for room."""
        waiting, self._room = self._room, []
        if waiting:
            with suppress(RuntimeError):  # the event loop is gone: no one waits any more
                self._loop.call_soon_threadsafe(_release, waiting)

    def _write(self) -> None:
        while True:
            with self._condition:
                while not self._queued and not self._closing:
                    self._condition.wait()
                if not self._queued:
                    return
                data = b"".join(self._queued)
                self._queued.clear()
            try:
                view = memoryview(data)
                while view:
                    try:
                        view = view[os.write(self._fd, view) :]
                    except BlockingIOError:  # handed over in non-blocking mode: the client reads slowly
                        if not _wait_until(self._fd, readable=False):
                            raise BrokenPipeError(
                                errno.EPIPE, "the client's end can no longer be written to"
                            ) from None
            except OSError as exc:
                with self._condition:
                    self._error = exc
                    self._queued.clear()
                    self._backlog = 0
                    self._condition.notify_all()
                    self._make_room()
                return
            with self._condition:
                self._backlog -= len(data)
                self._condition.notify_all()
                if self._backlog <= WRITE_BACKLOG_BYTES:
                    self._make_room()

    def close(self, timeout: float = DRAIN_SECONDS) -> bool:
        """Write what was flushed, then stop the thread; False if it did not finish within ``timeout`` (a
        client that stopped reading)."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()
            self._make_room()
        self._thread.join(timeout)
        return not self._thread.is_alive()


def _release(waiting: list[asyncio.Future[None]]) -> None:
    for room in waiting:
        if not room.done():
            room.set_result(None)


def _flush_quietly(stream: Any) -> None:
    """Flush ``stream`` (sys.stdout or sys.stderr, None when its descriptor was closed at start-up); a
    failure (stderr's reader gone) leaves it be: the wire is moved or put back all the same."""
    if stream is None:
        return
    with suppress(OSError, ValueError):
        stream.flush()


@asynccontextmanager
async def wire() -> AsyncIterator[tuple[WireLines, WireWriter] | None]:
    """The process's stdin and stdout for the protocol, each served by a thread (``WireLines``,
    ``WireWriter``). While serving, fd 0 reads the null device and fd 1 writes to stderr (to the null
    device when stderr is closed), as the SDK's own transport arranges: a handler's or a library's stray
    output never reaches the client as a broken message. Both are put back on exit. None where the
    descriptors cannot be moved (not POSIX, or not open): the SDK's transport serves them then."""
    if os.name != "posix":
        yield None
        return
    import fcntl

    for stream in (sys.stdout, sys.stderr):
        _flush_quietly(stream)
    try:
        wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        yield None
        return
    try:
        wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        os.close(wire_in)
        yield None
        return
    try:
        _move_off_the_wire()
        writer = WireWriter(wire_out)
        try:
            lines = WireLines(wire_in, on_end=writer.input_ended)
        except BaseException:
            writer.close()
            raise
    except BaseException:
        _put_back(wire_in, wire_out)
        os.close(wire_out)
        os.close(wire_in)
        raise
    try:
        yield lines, writer
    finally:
        drained = writer.close()
        _flush_quietly(sys.stdout)
        _put_back(wire_in, wire_out)
        # The reader thread may still be blocked reading ``wire_in`` (a client that keeps its pipe open):
        # it is never closed under it. ``wire_out`` is, once its thread has written everything.
        if drained:
            os.close(wire_out)
        else:
            log.warning("a client stopped reading: replies still queued when the server stopped were dropped")


def _put_back(wire_in: int, wire_out: int) -> None:
    """fd 0 and 1 the wire's descriptors again, as they were before ``wire()``."""
    os.dup2(wire_out, 1)
    os.dup2(wire_in, 0)


def _move_off_the_wire() -> None:
    """fd 0 to the null device, fd 1 to stderr (or the null device when fd 2 is not open: a descriptor the
    process opened since may hold its number)."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        os.dup2(null, 0)
        stderr_open = sys.stderr is not None
        if stderr_open:
            try:
                os.fstat(2)
            except OSError:
                stderr_open = False
        os.dup2(2 if stderr_open else null, 1)
    finally:
        os.close(null)
