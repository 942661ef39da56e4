"""Store and search latency, memoria beside another MCP memory server, in one run on the same data.

    python -m benchmarks.peer --data ../shared/data/locomo/locomo-dev.json --conversations conv-43 \\
        --embedding-model FOLDER [--peer-command "memory server" --peer-env KEY=VALUE ...]

Both servers are started over stdio by an MCP client, on fresh stores, with the same embedding model
where the peer can be pointed at it. Every turn of the conversations is stored one call at a time
("[date] speaker: text"), then every question is searched for ten results; each call is timed from the
client, the MCP round trip included. Reported per server and operation: mean, median and p95 in ms.
The peer is expected to offer ``store_memory(content)`` and ``retrieve_memory(query, n_results)`` (the
tools of mcp-memory-service before 12.x); other names can be given with --peer-store / --peer-search
(12.x: ``--peer-store memory_store:content --peer-search memory_search:query``, with
``--peer-env MCP_SEMANTIC_DEDUP_ENABLED=false`` so that it stores every turn, as memoria does). A reply
that reports an error, flagged or not (12.x answers an unknown tool with ``{"error": ...}``), stops the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from benchmarks.locomo import load
from benchmarks.reporting import RESULTS, write_json


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "mean_ms": round(statistics.fmean(values), 2),
        "median_ms": round(statistics.median(values), 2),
        "p95_ms": round(percentile(values, 0.95), 2),
        "n": len(values),
    }


async def measure(
    command: Sequence[str],
    env: dict[str, str],
    store: tuple[str, str, dict[str, Any]],
    search: tuple[str, str, dict[str, Any]],
    documents: list[str],
    queries: list[str],
) -> dict[str, Any]:
    """Store every document, then search every query, one call at a time; the latencies."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=list(command[1:]), env={**os.environ, **env})
    store_tool, store_field, store_extra = store
    search_tool, search_field, search_extra = search
    stored: list[float] = []
    searched: list[float] = []
    with open(os.devnull, "w") as quiet:
        async with Client(stdio_client(params, errlog=quiet)) as client:
            await client.list_tools()
            # Warm: models loaded, the store open, the first call paid for.
            await call(client, store_tool, {store_field: "warming up the store", **store_extra})
            await call(client, search_tool, {search_field: "warming up", **search_extra})
            for document in documents:
                started = time.perf_counter()
                await call(client, store_tool, {store_field: document, **store_extra})
                stored.append((time.perf_counter() - started) * 1000)
            for query in queries:
                started = time.perf_counter()
                await call(client, search_tool, {search_field: query, **search_extra})
                searched.append((time.perf_counter() - started) * 1000)
    return {"store": summary(stored), "search": summary(searched)}


async def call(client: Any, tool: str, arguments: dict[str, Any]) -> None:
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text if result.content and hasattr(result.content[0], "text") else ""
    if result.is_error or reports_error(result.structured_content, text):
        raise RuntimeError(f"{tool} failed: {text or result}")


def reports_error(structured: Any, text: str) -> bool:
    """Whether a reply not flagged as an error says it is one: ``{"error": ...}`` as its structured content
    or as its text (timing such replies would measure nothing)."""
    if isinstance(structured, dict) and "error" in structured:
        return True
    try:
        parsed = json.loads(text)
    except ValueError:
        return False
    return isinstance(parsed, dict) and "error" in parsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="a file in LoCoMo's format")
    parser.add_argument("--conversations", nargs="*", default=["conv-43"])
    parser.add_argument("--embedding-model", type=Path, help="a local sentence-transformers model folder")
    parser.add_argument("--peer-command", help="the peer server's stdio command, e.g. 'memory server'")
    parser.add_argument("--peer-env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--peer-store", default="store_memory:content", metavar="TOOL:FIELD")
    parser.add_argument("--peer-search", default="retrieve_memory:query", metavar="TOOL:FIELD")
    parser.add_argument("--out", type=Path, default=RESULTS / "peer.json")
    args = parser.parse_args(argv)

    conversations = load(args.data, args.conversations)
    documents = [
        f"[{turn.when:%d %B %Y}] {turn.speaker}: {turn.said}" if turn.when else f"{turn.speaker}: {turn.said}"
        for conversation in conversations
        for turn in conversation.turns
    ]
    queries = [q.question for conversation in conversations for q in conversation.scored_questions()]
    runs: dict[str, Any] = {"documents": len(documents), "queries": len(queries)}
    with tempfile.TemporaryDirectory(prefix="memoria-peer-") as tmp:
        env = {
            "MEMORIA_DB_URI": str(Path(tmp) / "memoria"),
            "MEMORIA_RERANKER": "none",
            "MEMORIA_LLM": "none",
            "MEMORIA_ALLOW_MODEL_DOWNLOADS": "false",
            "HF_HUB_OFFLINE": "1",
        }
        if args.embedding_model is not None:
            env |= {
                "MEMORIA_EMBEDDER": "sentence-transformers",
                "MEMORIA_EMBEDDING_MODEL": str(args.embedding_model.resolve()),
            }
        runs["memoria"] = anyio.run(
            measure,
            [sys.executable, "-m", "server", "serve"],
            env,
            ("remember", "content", {}),
            ("recall", "query", {"top_k": 10}),
            documents,
            queries,
        )
        if args.peer_command:
            store_tool, store_field = args.peer_store.split(":", 1)
            search_tool, search_field = args.peer_search.split(":", 1)
            peer_env = dict(item.split("=", 1) for item in args.peer_env)
            peer_env.setdefault("MCP_MEMORY_SQLITE_PATH", str(Path(tmp) / "peer" / "memory.db"))
            (Path(tmp) / "peer").mkdir()
            runs["peer"] = anyio.run(
                measure,
                shlex.split(args.peer_command),
                peer_env,
                (store_tool, store_field, {}),
                (search_tool, search_field, {"n_results": 10}),
                documents,
                queries,
            )
    for name in ("memoria", "peer"):
        if name in runs:
            run = runs[name]
            print(
                f"{name:<8} store mean {run['store']['mean_ms']:.1f} ms, median {run['store']['median_ms']:.1f}, "
                f"p95 {run['store']['p95_ms']:.1f}; search mean {run['search']['mean_ms']:.1f} ms, median "
                f"{run['search']['median_ms']:.1f}, p95 {run['search']['p95_ms']:.1f} "
                f"({runs['documents']} stores, {runs['queries']} searches)"
            )
    write_json(args.out, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
