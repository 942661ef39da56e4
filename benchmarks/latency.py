"""Latency benchmark: MCP handshake time, recall through the whole tool path at N memories on the offline
backend (with per-stage medians and the ratio to a numpy brute-force scan of the same vectors), and
single remember calls. Prints a table and writes JSON.

    python -m benchmarks.latency                 # 10,000 memories, 60 recalls, 5 handshakes
    python -m benchmarks.latency --memories 1000 --queries 20 --handshakes 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from benchmarks.corpus import generate, queries
from benchmarks.reporting import RESULTS, offline_settings, write_json


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(values), "p95_ms": percentile(values, 0.95), "n": len(values)}


async def measure_handshakes(count: int, db: Path) -> list[float]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {"MEMORIA_DB_URI": str(db), "MEMORIA_ALLOW_MODEL_DOWNLOADS": "0", "HF_HUB_OFFLINE": "1"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "server", "serve"], env=env)
    times = []
    for _ in range(count):
        started = time.perf_counter()
        with open(os.devnull, "w") as quiet:
            from mcp.client.stdio import stdio_client

            async with Client(stdio_client(params, errlog=quiet)) as client:
                await client.list_tools()
                times.append((time.perf_counter() - started) * 1000)
    return times


def build_store(db: Path, memories: int) -> tuple[Any, float]:
    from server.state import build_runtime
    from tools.common import Caller
    from tools.remember import RememberInput, new_record, with_vectors

    runtime = build_runtime(offline_settings(db))
    started = time.perf_counter()
    corpus = generate(memories)
    for start in range(0, len(corpus), 2_000):
        batch = corpus[start : start + 2_000]
        records = [
            new_record(
                RememberInput(
                    content=m.content,
                    tags=list(m.tags),
                    episode_id=m.episode_id,
                    org_id=m.org_id,
                    project_id=m.project_id,
                ),
                runtime,
                Caller(m.agent_id, m.session_id),
            )
            for m in batch
        ]
        runtime.store.insert_many(with_vectors(records, runtime))
        # Stored as an import that consolidated on the way in: the server's background sweep has nothing
        # left to examine, so the timings below are of a settled store, not of a sweep running beside them.
        runtime.store.mark_consolidated([record.id for record in records], runtime.clock())
    runtime.store.maintain(min_fragments=2)  # what background maintenance does as the store grows
    return runtime, time.perf_counter() - started


async def measure_tool_calls(runtime: Any, query_count: int, remember_count: int) -> dict[str, Any]:
    from mcp import Client

    from server.app import build_server
    from storage.records import Scope

    server = build_server(runtime.settings, runtime_factory=lambda _settings: runtime)
    recall_times: list[float] = []
    stage_times: dict[str, list[float]] = {}
    retrievals: list[tuple[str, Any]] = []

    async with Client(server) as client:
        asked = queries(query_count + 3)
        for index, (query, org, project) in enumerate(asked):
            started = time.perf_counter()
            result = await client.call_tool(
                "recall", {"query": query, "org_id": org, "project_id": project, "top_k": 10}
            )
            elapsed = (time.perf_counter() - started) * 1000
            assert not result.is_error, result.content
            if index >= 3:  # warm-up
                recall_times.append(elapsed)
                retrievals.append((result.structured_content["retrieval_id"], Scope(org, project)))
        remember_times = []
        for index in range(remember_count):
            started = time.perf_counter()
            result = await client.call_tool(
                "remember", {"content": f"benchmark memory {index}: the cache ttl is {index} seconds"}
            )
            remember_times.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content
    for retrieval_id, scope in retrievals:
        trace = json.loads(runtime.store.get_retrieval(retrieval_id, scope).trace_json)
        for stage in trace["stages"]:
            stage_times.setdefault(stage["name"], []).append(stage["elapsed_ms"])
    return {
        "recall": summary(recall_times),
        "remember": summary(remember_times[3:] if len(remember_times) > 3 else remember_times),
        "stages_median_ms": {name: statistics.median(values) for name, values in stage_times.items()},
    }


def numpy_scan(runtime: Any, query_count: int) -> dict[str, float]:
    """Brute-force cosine top-20 over every vector in the store: the memory-bandwidth floor."""
    table = runtime.store._memories.to_arrow()
    matrix = np.stack(table.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    embedder = runtime.models.embedder
    vectors = [embedder.embed_query(q) for q, _, _ in queries(query_count)]
    times = []
    for vector in vectors:
        started = time.perf_counter()
        scores = matrix @ vector
        top = np.argpartition(-scores, 20)[:20]
        top[np.argsort(-scores[top])]
        times.append((time.perf_counter() - started) * 1000)
    return summary(times)


def run(memories: int, query_count: int, handshakes: int, remembers: int = 50) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memoria-bench-") as tmp:
        print(f"handshake: starting the stdio server {handshakes} times ...", file=sys.stderr)
        handshake = (
            anyio.run(measure_handshakes, handshakes, Path(tmp) / "handshake-db") if handshakes else []
        )
        print(f"loading {memories:,} synthetic memories ...", file=sys.stderr)
        runtime, load_seconds = build_store(Path(tmp) / "db", memories)
        try:
            print(
                f"timing {query_count} recalls and {remembers} remembers through an MCP client ...",
                file=sys.stderr,
            )
            calls = anyio.run(measure_tool_calls, runtime, query_count, remembers)
            scan = numpy_scan(runtime, query_count)
        finally:
            runtime.close()
    report = {
        "memories": memories,
        "backend": "offline (hashed vectors + LanceDB BM25, no reranker)",
        "handshake_to_tools_list": summary(handshake) if handshake else None,
        "bulk_load_seconds": load_seconds,
        **calls,
        "numpy_scan": scan,
        "recall_over_scan": calls["recall"]["median_ms"] / scan["median_ms"],
    }
    return report


def print_table(report: dict[str, Any]) -> None:
    rows = []
    if report["handshake_to_tools_list"]:
        h = report["handshake_to_tools_list"]
        rows.append(("process start -> tools/list answered (stdio)", h["median_ms"], h["p95_ms"], h["n"]))
    for key, label in (
        ("recall", "recall (MCP tool call, all stages)"),
        ("remember", "remember, one at a time (MCP tool call)"),
        ("numpy_scan", "numpy brute-force top-20 scan"),
    ):
        rows.append((label, report[key]["median_ms"], report[key]["p95_ms"], report[key]["n"]))
    print(f"\nmemoria latency at {report['memories']:,} memories - {report['backend']}")
    print(f"{'measure':<48} {'median ms':>10} {'p95 ms':>10} {'n':>5}")
    for label, median, p95, n in rows:
        print(f"{label:<48} {median:>10.2f} {p95:>10.2f} {n:>5}")
    print(
        "recall stage medians (ms): "
        + ", ".join(f"{k} {v:.2f}" for k, v in report["stages_median_ms"].items())
    )
    print(
        f"recall median / numpy scan median: {report['recall_over_scan']:.1f}x; bulk load {report['bulk_load_seconds']:.1f} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--handshakes", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "latency.json")
    args = parser.parse_args(argv)
    report = run(args.memories, args.queries, args.handshakes)
    print_table(report)
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
