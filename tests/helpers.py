"""Building runtimes and servers for tests, and calling tools through a real MCP client."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from typing import Any

import anyio
from mcp import Client
from mcp_types import Implementation

from retrieval.models.embedders.base import Embedder
from retrieval.models.embedders.hashed import HashedEmbedder
from retrieval.models.providers import BackendInfo, Models
from retrieval.models.rerankers.base import Reranker
from retrieval.text import index_terms, with_other_forms
from server.app import build_server
from server.config import Settings
from server.state import assemble_runtime
from storage.store import MemoryStore
from tools.common import Runtime

TIMEOUT = 60
# The long versions of the reliability tests (10,000 fuzzed calls, 100 crashes, 4 x 500 writes) run with
# MEMORIA_LONG_TESTS=1; CI runs the short versions.
LONG_TESTS = os.environ.get("MEMORIA_LONG_TESTS") == "1"


def scaled(short: int, long: int) -> int:
    """``long`` in an opt-in long run, else ``short``."""
    return long if LONG_TESTS else short


TOOL_NAMES = {
    "remember",
    "remember_many",
    "recall",
    "report_outcome",
    "explain_ranking",
    "forget",
    "drift",
    "lineage",
}
# The seeds' order of recall stages, as the pipeline must run and trace them.
ALL_STAGES = [
    "gate",
    "candidate_search",
    "rerank",
    "attribution",
    "min_score",
    "iterative",
    "instructions",
    "corroboration",
    "decay",
    "feedback",
    "episode_expansion",
    "neighbourhood",
    "answer_type",
    "contradictions",
    "assembly",
]


def settings_for(db_path: Any, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "db_uri": str(db_path),
        "embedder": "hashed",
        "reranker": "none",
        "allow_model_downloads": False,
        "maintenance_interval_seconds": 3600,
    }
    values.update(overrides)
    return Settings.from_env({}, **values)


@contextmanager
def killed_after(script: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """Run ``script`` (``python -c``) with ``args`` in the test's folder, hand over the process to read its
    output (``stdout``; ``stderr`` says why it stopped short), then kill it (kill -9) whatever happened."""
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
    )
    try:
        yield process
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(TIMEOUT)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        process.stderr.close()


def make_runtime(
    settings: Settings, *, embedder: Embedder | None = None, reranker: Reranker | None = None
) -> Runtime:
    store = MemoryStore.open(
        settings.db_uri,
        vector_dim=embedder.dimension if embedder else settings.vector.dim,
        analyzer=index_terms,
        lancedb_query=with_other_forms,
    )
    embedder = embedder or HashedEmbedder(store.vector_dim)
    models = Models(
        embedder=embedder,
        reranker=reranker,
        embedder_info=BackendInfo("embedder", embedder.name, embedder.name),
        reranker_info=BackendInfo(
            "reranker", reranker.name if reranker else "none", reranker.name if reranker else "none"
        ),
    )
    return assemble_runtime(settings, store, models)


# The runtimes each test server built, so that a test can wait for what its writes hand on behind the call.
_BUILT: weakref.WeakKeyDictionary[Any, list[Runtime]] = weakref.WeakKeyDictionary()


def server_with(settings: Settings, **runtime_parts: Any) -> Any:
    built: list[Runtime] = []

    def factory(configured: Settings) -> Runtime:
        runtime = make_runtime(configured, **runtime_parts)
        built.append(runtime)
        return runtime

    server = build_server(settings, runtime_factory=factory)
    _BUILT[server] = built
    return server


async def handed_on(server: Any) -> None:
    """Wait until the credits that superseded memories earned are carried to the memories that took their
    place (``writing.behind``: after the remember that superseded them was answered)."""
    for runtime in _BUILT[server]:
        assert await anyio.to_thread.run_sync(runtime.writer.settle, TIMEOUT), "hand-ons still running"


@asynccontextmanager
async def connected(server: Any, agent: str = "test-agent", **client_options: Any) -> AsyncIterator[Client]:
    with anyio.fail_after(TIMEOUT):
        async with Client(
            server, client_info=Implementation(name=agent, version="1.0"), **client_options
        ) as client:
            yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(TIMEOUT):
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool} failed: {result.content[0].text if result.content else result}"
    assert result.structured_content is not None
    return result.structured_content


async def call_error(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    with anyio.fail_after(TIMEOUT):
        result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    return result.content[0].text


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def background_process(
    args: list[str], env: dict[str, str], port: int, log_path: Any = None, stdout_path: Any = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``args`` until the block ends, entering it once the process accepts connections on ``port``;
    its output goes to ``log_path`` (default: a temporary file), quoted if it dies before it is up; its
    stdout alone to ``stdout_path`` if given."""
    with (
        open(log_path, "w+b") if log_path else tempfile.TemporaryFile() as output,
        open(stdout_path, "wb") if stdout_path else nullcontext(output) as stdout,
    ):
        process = subprocess.Popen(args, env={"PATH": os.defpath, **env}, stdout=stdout, stderr=output)
        try:
            deadline = time.monotonic() + TIMEOUT
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        output.seek(0)
                        raise AssertionError(
                            f"{args} did not start:\n{output.read().decode()[-3000:]}"
                        ) from None
                    time.sleep(0.1)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def http_server(
    env: dict[str, str],
    *,
    bind: str = "127.0.0.1",
    port: int | None = None,
    log_path: Any = None,
    stdout_path: Any = None,
) -> Iterator[str]:
    """The real console entry point serving streamable HTTP on ``port`` (default: a free one) of ``bind``;
    yields its loopback URL. Its stdout and stderr go to ``log_path`` if given (its stdout to
    ``stdout_path`` instead, if given)."""
    port = port or free_port()
    command = [sys.executable, "-m", "server", "serve", "--http", f"{bind}:{port}"]
    with background_process(command, env, port, log_path, stdout_path):
        yield f"http://127.0.0.1:{port}/mcp"
