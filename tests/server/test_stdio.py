"""The real console entry point in a subprocess, spoken to over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation

from tests.helpers import TIMEOUT, TOOL_NAMES, call, http_server, make_runtime, settings_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def server_env(db: Path, **extra: str) -> dict[str, str]:
    # The default "auto" backends with downloads off: exercises the real loading code and its fallback.
    return {"MEMORIA_DB_URI": str(db), "MEMORIA_ALLOW_MODEL_DOWNLOADS": "0", "HF_HUB_OFFLINE": "1", **extra}


def raw_server(db: Path, **options: Any) -> subprocess.Popen[str]:
    """`python -m server` on stdio, spoken to line by line."""
    return subprocess.Popen(
        [sys.executable, "-m", "server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**server_env(db), "PATH": "/usr/bin:/bin"},
        **options,
    )


async def test_full_flow_over_stdio_on_the_offline_backend(tmp_path):
    stderr_path = tmp_path / "stderr.log"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "server", "serve"], env=server_env(tmp_path / "db")
    )
    with open(stderr_path, "w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog),
            client_info=Implementation(name="stdio-agent", version="1"),
            read_timeout_seconds=TIMEOUT,
        ) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOL_NAMES

            version = await call(client, "remember", {"content": "The staging database runs postgres 16"})
            port = await call(
                client, "remember", {"content": "Staging runs the postgres 16 database on port 5432"}
            )
            await call(client, "remember", {"content": "Lunch is at noon"})
            assert version["agent_id"] == "stdio-agent"
            query = {"query": "which postgres version does the staging database run?", "top_k": 1}

            first = await call(client, "recall", query)
            assert [m["id"] for m in first["memories"]] == [version["id"]]
            report = await call(
                client, "report_outcome", {"outcome": "failure", "misleading_ids": [version["id"]]}
            )
            assert report["updated"] == [
                {
                    "id": version["id"],
                    "role": "misleading",
                    "share": 1.0,
                    "weight_before": 1.0,
                    "weight_after": 0.85,
                }
            ]

            second = await call(client, "recall", query)
            assert [m["id"] for m in second["memories"]] == [port["id"]]
            explained = await call(client, "explain_ranking", {"retrieval_id": second["retrieval_id"]})
            demoted = next(c for c in explained["candidates"] if c["id"] == version["id"])
            assert (demoted["unweighted_rank"], demoted["weighted_rank"], demoted["rank_delta"]) == (0, 1, -1)
            # named misleading, the same query: the named step to the floor (its global weight: 0.85)
            assert demoted["scores"]["feedback_weight"] == pytest.approx(0.25)
            assert demoted["scores"]["global_weight"] == pytest.approx(0.85)
            assert explained["backends"]["embedder"].startswith("hashed-v1:384 (offline fallback:")
            assert explained["backends"]["reranker"].startswith("none (offline fallback:")
    stderr = stderr_path.read_text()
    assert stderr.count("embedder 'sentence-transformers/all-MiniLM-L6-v2' is unavailable") == 1
    assert stderr.count("reranker 'cross-encoder/ms-marco-MiniLM-L6-v2' is unavailable") == 1
    # The folder MEMORIA_DB_URI names did not exist: served, and said once, in case the path is a typo.
    assert stderr.count(f"no store at {tmp_path / 'db'} yet: making a new, empty one there") == 1


async def test_streamable_http_transport_serves_the_same_tools(tmp_path):
    log, stdout = tmp_path / "server.log", tmp_path / "stdout"
    with http_server(server_env(tmp_path / "db"), log_path=log, stdout_path=stdout) as url:
        async with Client(url, client_info=Implementation(name="http-agent", version="1")) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOL_NAMES
            stored = await call(client, "remember", {"content": "served over streamable HTTP"})
            recalled = await call(client, "recall", {"query": "streamable HTTP"})
    assert stored["agent_id"] == "http-agent"
    assert [m["id"] for m in recalled["memories"]] == [stored["id"]]
    # Every log line on stderr, uvicorn's access log included; nothing on stdout.
    assert '"POST /mcp HTTP/1.1" 200' in log.read_text()
    assert stdout.read_bytes() == b""


# The handshake a raw client sends first.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def test_stdout_carries_nothing_but_protocol_messages(tmp_path):
    requests = [
        INITIALIZE,
        INITIALIZED,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": "raw stdio"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "recall", "arguments": {"query": "raw stdio"}},
        },
    ]
    process = raw_server(tmp_path / "db")
    responses = {}
    assert process.stdin and process.stdout
    try:
        for request in requests:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            if "id" not in request:
                continue
            while request["id"] not in responses:
                line = process.stdout.readline()
                assert line, f"server exited early: {process.stderr.read() if process.stderr else ''}"
                message = json.loads(line)  # any non-JSON line on stdout fails here
                assert message["jsonrpc"] == "2.0"
                if "id" in message:
                    responses[message["id"]] = message
    finally:
        process.stdin.close()
        process.wait(timeout=TIMEOUT)
        if process.stderr:
            process.stderr.close()
        process.stdout.close()
    assert responses[1]["result"]["serverInfo"]["name"] == "memoria"
    assert {t["name"] for t in responses[2]["result"]["tools"]} == TOOL_NAMES
    assert responses[3]["result"]["structuredContent"]["status"] == "stored"
    assert responses[4]["result"]["structuredContent"]["memories"][0]["content"] == "raw stdio"


def test_a_malformed_line_gets_a_json_rpc_error_and_the_server_keeps_serving(tmp_path):
    lines = [
        json.dumps(INITIALIZE),
        json.dumps(INITIALIZED),
        "",  # blank lines between messages: no reply
        "   ",
        "{not json",  # -> parse error, id null
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": "x"}',  # params not an object
        '{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"a": "\\ud800"}}',  # a lone surrogate
        "[" * 5_000 + "]" * 5_000,  # nested too deep
        '"just a string"',
        '{"jsonrpc": "2.0", "method": "notifications/progress", "params": 7}',  # a notification: no reply
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),  # still served
    ]
    process = subprocess.Popen(
        [sys.executable, "-m", "server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**server_env(tmp_path / "db", MEMORIA_EMBEDDER="hashed"), "PATH": "/usr/bin:/bin"},
    )
    assert process.stdin and process.stdout
    replies = []
    try:
        for line in lines:
            process.stdin.write(line + "\n")
        process.stdin.flush()
        while not any(reply.get("id") == 4 for reply in replies):
            line = process.stdout.readline()
            assert line, "the server stopped answering"
            replies.append(json.loads(line))
    finally:
        process.stdin.close()
        process.wait(timeout=TIMEOUT)
        process.stdout.close()
    errors = [(reply["id"], reply["error"]["code"]) for reply in replies if "error" in reply]
    assert errors == [(None, -32700), (2, -32600), (3, -32600), (None, -32700), (None, -32600)]
    assert (
        "params" in replies[2]["error"]["message"]
        and "Send a JSON-RPC 2.0 object" in replies[2]["error"]["message"]
    )
    assert replies[-1]["id"] == 4 and replies[-1]["result"]["tools"]


@pytest.mark.parametrize("pipe", ["closed", "left open"])
def test_ctrl_c_stops_a_serving_server_with_one_line_and_the_memory_it_stored_kept(tmp_path, pipe):
    """Ctrl-C is how the README stops a server: one log line, ended by the signal (the shell says 130), no
    traceback, and what it stored before is there for the next start. In a terminal the client gets it
    too and its pipe closes; a client that keeps the pipe open leaves the server's stdin reader waiting,
    which the stop does not wait for."""
    import signal

    from server.serve import INTERRUPT_GRACE_SECONDS

    # Started as a terminal starts it: SIGINT at its default.
    process = raw_server(tmp_path / "db", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert process.stdin and process.stdout and process.stderr
    remember = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"content": "kept across ctrl-c"}},
    }
    for request in (INITIALIZE, INITIALIZED, remember):
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        if "id" in request:
            while json.loads(process.stdout.readline()).get("id") != request["id"]:
                pass
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    if pipe == "closed":
        process.stdin.close()
    try:
        code = process.wait(timeout=INTERRUPT_GRACE_SECONDS + 10)
        stderr = process.stderr.read()
    finally:
        process.kill()
        for stream in (process.stdin, process.stdout, process.stderr):
            stream.close()
    assert code == -signal.SIGINT  # ended by the signal, as an interrupted program is (the shell says 130)
    assert time.monotonic() - started < INTERRUPT_GRACE_SECONDS  # stopped, not given up on
    assert "Traceback" not in stderr and "still stopping" not in stderr
    assert "memoria stopped (interrupted)" in stderr
    runtime = make_runtime(settings_for(tmp_path / "db"))
    try:
        assert runtime.store.count_memories() == 1
    finally:
        runtime.close()


# -- the wire's own threads (server.stdio.wire) ---------------------------------------------------------


async def test_the_wire_reads_and_writes_while_every_worker_thread_is_taken():
    """Tool calls run on anyio's worker threads; the SDK's stdio read and wrote through them too, so with
    every token taken (a burst of slow calls) the next line, a ping or a cancellation, waited for one of
    those calls to end. The wire's threads need no token."""
    import os

    import anyio
    import anyio.to_thread

    from server.stdio import WireLines, WireWriter

    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    limiter = anyio.to_thread.current_default_thread_limiter()
    borrowers = [object() for _ in range(int(limiter.total_tokens))]
    for borrower in borrowers:
        await limiter.acquire_on_behalf_of(borrower)
    try:
        lines, replies = WireLines(read_in), WireWriter(write_out)
        os.write(write_in, b'{"id": 1}\n{"id": 2}\n{"id"')
        with anyio.fail_after(5):
            assert [await anext(lines), await anext(lines)] == ['{"id": 1}\n', '{"id": 2}\n']
            os.write(write_in, b': 3, "text": "caf\xc3\xa9"}\n')  # a line and a character across two reads
            assert await anext(lines) == '{"id": 3, "text": "café"}\n'
            await replies.write('{"id": 1, "result": "é"}\n')
            await replies.flush()
            assert os.read(read_out, 100) == '{"id": 1, "result": "é"}\n'.encode()
    finally:
        for borrower in borrowers:
            limiter.release_on_behalf_of(borrower)
        assert replies.close()
        for fd in (read_in, write_in, read_out, write_out):
            os.close(fd)


async def test_a_reply_to_a_client_that_went_away_fails_the_next_flush():
    """As the SDK's writer did: the server's transport ends instead of queueing replies for no one."""
    import os

    import anyio

    from server.stdio import WireWriter

    read_out, write_out = os.pipe()
    os.close(read_out)
    replies = WireWriter(write_out)
    try:
        with anyio.fail_after(5), pytest.raises(BrokenPipeError):
            while True:
                await replies.write("{}\n")
                await replies.flush()
                await anyio.sleep(0.01)
    finally:
        replies.close()
        os.close(write_out)


def in_a_thread_of_its_own(main, seconds: float = 10.0) -> None:
    """``anyio.run(main)`` in a thread, failing the test if it has not ended within ``seconds`` (a wait
    that cannot be cancelled would otherwise hang the suite)."""
    import threading

    import anyio

    errors: list[BaseException] = []

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "still waiting: the wait could not be cancelled or never ended"
    if errors:
        raise errors[0]


def test_a_flush_held_back_by_a_client_that_stopped_reading_can_be_cancelled():
    """Past the backlog a flush waits for the writer; a server stopping meanwhile (its task group
    cancelled) must not hang there while the client keeps its end open without reading."""
    import os

    import anyio

    from server.stdio import WRITE_BACKLOG_BYTES, WireWriter

    read_out, write_out = os.pipe()  # never read: the writer blocks once the pipe's buffer is full
    held: list[WireWriter] = []

    async def flush_past_the_backlog() -> None:
        replies = WireWriter(write_out)
        held.append(replies)
        await replies.write("x" * (WRITE_BACKLOG_BYTES + 1) + "\n")
        with anyio.move_on_after(0.3) as waited:
            await replies.flush()
        assert waited.cancelled_caught

    try:
        in_a_thread_of_its_own(flush_past_the_backlog)
    finally:
        os.close(read_out)  # the writer's blocked write fails, and its thread ends
        assert held and held[0].close()
        os.close(write_out)


def test_a_flush_past_the_backlog_needs_no_worker_thread_while_the_tools_hold_them_all():
    """A tool that asks the client's model (sampling) holds a worker thread until its request is written:
    a flush that took a worker thread to wait for room could wait for ever behind such tools."""
    import os
    import threading

    import anyio
    import anyio.to_thread

    from server.stdio import WRITE_BACKLOG_BYTES, WireWriter

    read_out, write_out = os.pipe()
    drained: list[int] = []

    def client() -> None:  # reads slowly at first, then everything
        while chunk := os.read(read_out, 1 << 16):
            drained.append(len(chunk))

    async def flush_with_every_token_taken() -> None:
        limiter = anyio.to_thread.current_default_thread_limiter()
        borrowers = [object() for _ in range(int(limiter.total_tokens))]
        for borrower in borrowers:
            await limiter.acquire_on_behalf_of(borrower)
        replies = WireWriter(write_out)
        try:
            await replies.write("y" * (WRITE_BACKLOG_BYTES + 1) + "\n")
            reader.start()
            with anyio.fail_after(5):
                await replies.flush()
        finally:
            for borrower in borrowers:
                limiter.release_on_behalf_of(borrower)
            assert replies.close()

    reader = threading.Thread(target=client, daemon=True)
    try:
        in_a_thread_of_its_own(flush_with_every_token_taken)
    finally:
        os.close(write_out)  # the client reads what the pipe still holds, then the end of it
        if reader.ident is not None:  # (started)
            reader.join(timeout=10)
        os.close(read_out)
    # (read once the client is done: a flush returns when the pipe took the last bytes, not when they were read)
    assert not reader.is_alive() and sum(drained) >= WRITE_BACKLOG_BYTES


def test_once_the_client_closed_its_input_a_flush_it_does_not_read_fails_after_the_drain_time(monkeypatch):
    """A client that closed stdin and neither reads nor closes stdout: the server's last flush gives up
    after DRAIN_SECONDS, as a write to a client that went away fails, and the server can stop."""
    import os
    import time

    import pytest as _pytest

    import server.stdio as stdio

    monkeypatch.setattr(stdio, "DRAIN_SECONDS", 0.3)
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()  # never read
    held: list[stdio.WireWriter] = []

    async def serve_until_the_input_ends() -> None:
        replies = stdio.WireWriter(write_out)
        held.append(replies)
        stdio.WireLines(read_in, on_end=replies.input_ended)
        # The client sends a line and closes its input; the server, its writer held back, never takes
        # the line (the reply to a malformed line waits for that writer too).
        os.write(write_in, b'{"id": 1}\n')
        os.close(write_in)
        await replies.write("z" * (stdio.WRITE_BACKLOG_BYTES + 1) + "\n")
        began = time.monotonic()
        with _pytest.raises(BrokenPipeError, match="closed its input"):
            await replies.flush()
        assert 0.2 < time.monotonic() - began < 3

    try:
        in_a_thread_of_its_own(serve_until_the_input_ends)
    finally:
        os.close(read_out)
        assert held and held[0].close()
        os.close(write_out)
        os.close(read_in)


async def test_long_lines_read_in_many_pieces_and_a_non_blocking_descriptor_are_read_whole():
    """A line longer than many reads is joined once, whole; a descriptor handed over in non-blocking mode
    is waited on, not taken for the end of the input."""
    import os

    import anyio

    from server.stdio import READ_CHUNK, WireLines

    read_in, write_in = os.pipe()
    os.set_blocking(read_in, False)
    lines = WireLines(read_in)
    long_line = '{"text": "' + "w" * (5 * READ_CHUNK + 7) + '"}'

    def client() -> None:
        time.sleep(0.2)  # the reader finds nothing to read first
        data = (long_line + "\n" + '{"id": 2}\n').encode()
        for start in range(0, len(data), 10_000):
            os.write(write_in, data[start : start + 10_000])
        os.close(write_in)

    import threading

    threading.Thread(target=client, daemon=True).start()
    with anyio.fail_after(10):
        assert [line async for line in lines] == [long_line + "\n", '{"id": 2}\n']
    os.close(read_in)


async def test_a_non_blocking_descriptor_numbered_past_1023_is_read_and_written():
    """A process holding many files hands the wire a high descriptor: waiting on it must not fail (select
    refuses 1024 and up), or the reader dies without an end and the writer drops replies unsaid."""
    import fcntl
    import os
    import resource

    import anyio

    from server.stdio import WireLines, WireWriter

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= 1100:
        pytest.skip(f"this process may open {soft} files: no descriptor past 1023 to test")
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    high_in = fcntl.fcntl(read_in, fcntl.F_DUPFD_CLOEXEC, 1050)
    high_out = fcntl.fcntl(write_out, fcntl.F_DUPFD_CLOEXEC, 1050)
    for fd in (high_in, high_out):
        os.set_blocking(fd, False)
    lines, replies = WireLines(high_in), WireWriter(high_out)
    try:
        with anyio.fail_after(10):
            os.write(write_in, b'{"id": 1}\n')
            assert await anext(lines) == '{"id": 1}\n'  # the reader waited on the descriptor first
            reply = "r" * 300_000 + "\n"  # more than the pipe holds: the writer waits for room
            await replies.write(reply)
            await replies.flush()
            received = b""
            while len(received) < len(reply):
                received += await anyio.to_thread.run_sync(os.read, read_out, 1 << 16)
            assert received == reply.encode()
    finally:
        assert replies.close()
        os.close(write_in)
        for fd in (read_in, read_out, write_out, high_out):
            os.close(fd)


def test_the_wire_serves_a_process_started_with_stderr_closed():
    """With fd 2 closed at start-up Python has no sys.stderr: the wire still serves, and a stray print goes
    to the null device rather than to whatever descriptor took fd 2's number."""
    import os

    script = """
import anyio
from server.stdio import wire

async def main():
    async with wire() as (lines, replies):
        print("stray", flush=True)
        async for line in lines:
            await replies.write("echo " + line)
            await replies.flush()

anyio.run(main)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=b"a\nb\n",
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
        preexec_fn=lambda: os.close(2),
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, b"echo a\necho b\n")


def test_the_wire_sends_every_flushed_reply_before_it_stops_and_keeps_stray_output_off_it():
    """In a process of its own (it moves fd 0 and 1): a stray print while serving goes to stderr; the
    last line needs no newline; every reply flushed reaches the client before the wire is put back, and
    after it stdout is the process's own again."""
    script = """
import anyio
from server.stdio import wire

async def main():
    async with wire() as (lines, replies):
        print("stray", flush=True)
        async for line in lines:
            for _ in range(200):  # more than one write of the pipe
                await replies.write(line.strip().upper() + "\\n")
            await replies.flush()
    print("after")

anyio.run(main)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        input="a\nb\nc",
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "A\n" * 200 + "B\n" * 200 + "C\n" * 200 + "after\n"
    assert "stray" in done.stderr
