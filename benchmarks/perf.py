"""Performance benchmark, one command: stores of 10,000 and 100,000 synthetic memories (and 1,000,000 with
--million), each built and measured in its own process, then a table and the issue's bars, pass or fail.

    python -m benchmarks.perf                          # 10k and 100k
    python -m benchmarks.perf --million                # adds 1M (long: the import alone is minutes)
    python -m benchmarks.perf --sizes 2000 --queries 10 --handshakes 1   # a quick look

Per size, on the offline backend (hashed vectors + LanceDB BM25) unless said otherwise:
- import: the synthetic corpus (9 scopes, 4 agents, episodes of 8, 10% near-duplicates) embedded and
  written in batches of 5,000, stamped as consolidated on the way in (memories/s);
- `remember_many` through an MCP client, 100 items a call, on top of the loaded store (memories/s);
- background maintenance once (compaction, index refresh) and warming the scope copies (seconds);
- one aggregation pass over every scope: clusters, contradictions, consolidation sweep (seconds);
- `recall` through an MCP client, all stages on: median and p95;
- `recall` with a cross-encoder shaped like the default (MiniLM-L6: 6 layers, 384 wide, random weights,
  a tokenizer trained on the corpus), for its relative cost;
- `remember` one at a time through an MCP client: median and p95;
- a numpy brute-force top-20 scan over every vector of the store, and each recall figure as a ratio to it;
- peak resident memory of the process that did all of the above.
Once: process start -> `tools/list` answered, over stdio, with sentence-transformers installed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from benchmarks.corpus import generate, queries, store_corpus
from benchmarks.reporting import RESULTS, offline_settings, write_json

IMPORT_BATCH = 5_000


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


def numpy_scan(runtime: Any, query_count: int) -> dict[str, float]:
    """Brute-force cosine top-20 over every vector in the store: the memory-bandwidth floor, with numpy's
    BLAS on every core (the server keeps it on one thread in this process: ``storage.products``)."""
    from threadpoolctl import threadpool_limits

    table = runtime.store._memories.to_arrow()
    matrix = np.stack(table.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    embedder = runtime.models.embedder
    vectors = [embedder.embed_query(q) for q, _, _ in queries(query_count)]
    times = []
    with threadpool_limits(limits=os.cpu_count() or 1, user_api="blas"):
        for vector in vectors:
            started = time.perf_counter()
            scores = matrix @ vector
            top = np.argpartition(-scores, 20)[:20]
            top[np.argsort(-scores[top])]
            times.append((time.perf_counter() - started) * 1000)
    return summary(times)


def import_memories(runtime: Any, count: int) -> tuple[float, int]:
    """Write ``count`` synthetic memories as a bulk import into a running server does, while the
    server's maintenance runs beside it on its own thread and timer (compaction, index folds; rows not
    folded in yet stay searchable). Returns the seconds until the last memory was committed, and how
    many maintenance rounds ran meanwhile."""
    from server.upkeep import maintenance_round

    corpus = generate(count)
    done = threading.Event()
    rounds = 0

    def maintain() -> None:
        nonlocal rounds
        while not done.wait(runtime.settings.maintenance_interval_seconds):
            maintenance_round(runtime)
            rounds += 1

    maintainer = threading.Thread(target=maintain, name="benchmark-maintenance")
    started = time.perf_counter()
    maintainer.start()
    try:
        store_corpus(runtime, corpus, examined_at=runtime.clock(), batch=IMPORT_BATCH, maintain_every=None)
        elapsed = time.perf_counter() - started
    finally:
        done.set()
        maintainer.join()  # a round in progress finishes before the measurements go on
    return elapsed, rounds


def timed(function: Any, *args: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - started


async def tool_calls(runtime: Any, query_count: int, remember_count: int, batches: int) -> dict[str, Any]:
    from mcp import Client

    from server.app import build_server
    from storage.records import Scope

    server = build_server(runtime.settings, runtime_factory=lambda _settings: runtime)
    recalls: list[float] = []
    retrievals: list[tuple[str, Scope]] = []
    async with Client(server) as client:
        # The server's first aggregation pass starts with it; the figures below are of the steady state
        # between passes (the pass itself is timed separately, and comes once a minute).
        passes = runtime.aggregation_passes
        while runtime.aggregation_passes == passes:
            await anyio.sleep(0.1)
        for index, (query, org, project) in enumerate(queries(query_count + 3)):
            arguments = {"query": query, "org_id": org, "project_id": project, "top_k": 10}
            started = time.perf_counter()
            result = await client.call_tool("recall", arguments)
            elapsed = (time.perf_counter() - started) * 1000
            assert not result.is_error, result.content
            if index >= 3:  # the first calls warm the MCP session
                recalls.append(elapsed)
                retrievals.append((result.structured_content["retrieval_id"], Scope(org, project)))
        # New memories shaped like the store's (a tenth of them near-duplicates), in scopes it has.
        fresh = generate(remember_count + 3 + batches * 100, seed=99)
        remembers: list[float] = []
        for index, memory in enumerate(fresh[: remember_count + 3]):
            arguments = {"content": memory.content, "org_id": memory.org_id, "project_id": memory.project_id}
            started = time.perf_counter()
            result = await client.call_tool("remember", arguments)
            if index >= 3:
                remembers.append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content
        batch_seconds = 0.0
        for batch in range(batches):
            start = remember_count + 3 + batch * 100
            items = [{"content": memory.content} for memory in fresh[start : start + 100]]
            arguments = {"items": items, "org_id": "org-2", "project_id": "project-2"}
            started = time.perf_counter()
            result = await client.call_tool("remember_many", arguments)
            batch_seconds += time.perf_counter() - started
            assert not result.is_error, result.content
    stages: dict[str, list[float]] = {}
    for retrieval_id, scope in retrievals:
        trace = json.loads(runtime.store.get_retrieval(retrieval_id, scope).trace_json)
        for stage in trace["stages"]:
            stages.setdefault(stage["name"], []).append(stage["elapsed_ms"])
    return {
        "recall": summary(recalls),
        "remember": summary(remembers),
        "remember_many_per_second": batches * 100 / batch_seconds if batches else None,
        "stages_median_ms": {name: statistics.median(values) for name, values in stages.items()},
    }


def cross_encoder_recalls(db: Path, model: Path, query_count: int, cache: dict[str, Any]) -> dict[str, Any]:
    from server.state import build_runtime
    from tools.common import Caller
    from tools.recall import RecallInput, recall

    runtime = build_runtime(offline_settings(db, reranker="cross-encoder", rerank_model=str(model), **cache))
    try:
        assert runtime.models.reranker is not None, runtime.models.reranker_info
        runtime.store.cache.warm(runtime.store.scopes())
        times = []
        for index, (query, org, project) in enumerate(queries(query_count + 2, seed=23)):
            started = time.perf_counter()
            recall(
                RecallInput(query=query, org_id=org, project_id=project, top_k=10), runtime, Caller("b", "s")
            )
            if index >= 2:
                times.append((time.perf_counter() - started) * 1000)
        return {**summary(times), "pairs_per_recall": 10 * runtime.settings.rerank.multiplier}
    finally:
        runtime.close()


def measure_size(
    size: int, query_count: int, remembers: int, batches: int, model: Path | None, cache: dict[str, Any]
) -> dict:
    from server.state import build_runtime
    from server.upkeep import aggregation_pass

    with tempfile.TemporaryDirectory(prefix="memoria-perf-") as tmp:
        db = Path(tmp) / "db"
        # Background maintenance on its default cadence, as a server runs it.
        runtime = build_runtime(offline_settings(db, maintenance_interval_seconds=30, **cache))
        try:
            print(f"[{size:,}] importing ...", file=sys.stderr)
            import_seconds, maintenance_rounds = import_memories(runtime, size)
            _, maintain_seconds = timed(lambda: runtime.store.maintain(min_fragments=2))
            warmed, warm_seconds = timed(lambda: runtime.store.cache.warm(runtime.store.scopes()))
            print(f"[{size:,}] aggregation pass ...", file=sys.stderr)
            aggregation, aggregation_seconds = timed(aggregation_pass, runtime)
            print(f"[{size:,}] tool calls ...", file=sys.stderr)
            calls = anyio.run(tool_calls, runtime, query_count, remembers, batches)
            scan = numpy_scan(runtime, query_count)
        finally:
            runtime.close()
        cross = None
        if model is not None:
            print(f"[{size:,}] recalls with a MiniLM-L6-shaped cross-encoder ...", file=sys.stderr)
            cross = cross_encoder_recalls(db, model, max(10, query_count // 3), cache)
    return {
        "memories": size,
        "cache_total_rows": runtime.settings.cache.total_rows,
        "cache_scope_rows": runtime.settings.cache.scope_rows,
        "import_per_second": size / import_seconds,
        "import_seconds": import_seconds,
        "import_maintenance_rounds": maintenance_rounds,
        "maintenance_seconds": maintain_seconds,
        "warm_seconds": warm_seconds,
        "scopes_warmed": warmed,
        "aggregation_seconds": aggregation_seconds,
        "aggregation_scopes": aggregation.scopes,
        **calls,
        "recall_cross_encoder": cross,
        "numpy_scan": scan,
        "recall_over_scan": calls["recall"]["median_ms"] / scan["median_ms"],
        "recall_p95_over_p50": calls["recall"]["p95_ms"] / calls["recall"]["median_ms"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def build_cross_encoder(root: Path) -> Path:
    """Random weights in MiniLM-L6's shape, with a tokenizer trained on the corpus (so words stay whole,
    as with a real 30k vocabulary): the cost of a real one, not its judgement."""
    from tests.tiny_models import build_tiny_models

    sentences = [m.content for m in generate(3_000, seed=3)] + [q for q, _, _ in queries(300)]
    models = build_tiny_models(
        root,
        sentences=sentences,
        vocab_size=8_000,
        hidden_size=384,
        layers=6,
        heads=12,
        intermediate_size=1_536,
        max_positions=512,
    )
    return models["cross_encoder"]


def bars(report: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(bar, measured, met) for every bar the measured sizes speak to."""
    by_size = {row["memories"]: row for row in report["sizes"]}

    def at_most(bar: str, value: float, shown: str, limit: float) -> tuple[str, str, bool]:
        return (bar, shown.format(value), value <= limit)

    checks: list[tuple[str, str, bool]] = []
    if 100_000 in by_size:
        row = by_size[100_000]
        checks += [
            at_most("recall p50 <= 3x scan at 100k", row["recall_over_scan"], "{:.2f}x", 3),
            at_most("remember p50 <= 15 ms at 100k", row["remember"]["median_ms"], "{:.1f} ms", 15),
            at_most("aggregation 100k <= 5 s", row["aggregation_seconds"], "{:.2f} s", 5),
        ]
    if 1_000_000 in by_size:
        row = by_size[1_000_000]
        checks += [
            at_most("recall p50 <= 0.5x scan at 1M", row["recall_over_scan"], "{:.2f}x", 0.5),
            at_most("aggregation 1M <= 60 s", row["aggregation_seconds"], "{:.1f} s", 60),
        ]
    for size, row in sorted(by_size.items()):
        checks.append(at_most(f"recall p95 <= 2x p50 at {size:,}", row["recall_p95_over_p50"], "{:.2f}x", 2))
        rate = row["import_per_second"]
        checks.append((f"import >= 5,000/s at {size:,}", f"{rate:,.0f}/s", rate >= 5_000))
    if report["handshake_to_tools_list"]:
        median = report["handshake_to_tools_list"]["median_ms"]
        checks.append(at_most("tools/list <= 1 s after process start", median, "{:.0f} ms", 1_000))
    return checks


def print_report(report: dict[str, Any]) -> None:
    sizes = report["sizes"]
    header = f"{'measure':<52}" + "".join(f"{row['memories']:>16,}" for row in sizes)
    print(f"\nmemoria performance - offline backend unless noted; {report['machine']}")
    print(header)

    def line(label: str, cell: Any) -> None:
        print(f"{label:<52}" + "".join(f"{cell(row):>16}" for row in sizes))

    line(
        "scope copies: rows per scope / in all (settings)",
        lambda r: f"{r['cache_scope_rows'] // 1000}k / {r['cache_total_rows'] // 1000}k",
    )
    line("import, memories/s", lambda r: f"{r['import_per_second']:,.0f}")
    line("remember_many (MCP, 100 a call), memories/s", lambda r: f"{r['remember_many_per_second']:,.0f}")
    line("maintenance after import, s", lambda r: f"{r['maintenance_seconds']:.1f}")
    line("warming the scope copies, s", lambda r: f"{r['warm_seconds']:.2f}")
    line("aggregation pass, every scope, s", lambda r: f"{r['aggregation_seconds']:.2f}")
    line(
        "recall (MCP, all stages) p50 / p95, ms",
        lambda r: f"{r['recall']['median_ms']:.1f} / {r['recall']['p95_ms']:.1f}",
    )
    line(
        "recall + MiniLM-L6-shaped cross-encoder p50, ms",
        lambda r: f"{r['recall_cross_encoder']['median_ms']:.0f}" if r["recall_cross_encoder"] else "-",
    )
    line(
        "remember (MCP) p50 / p95, ms",
        lambda r: f"{r['remember']['median_ms']:.1f} / {r['remember']['p95_ms']:.1f}",
    )
    line("numpy brute-force top-20 scan p50, ms", lambda r: f"{r['numpy_scan']['median_ms']:.2f}")
    line("recall p50 / scan p50", lambda r: f"{r['recall_over_scan']:.2f}x")
    line(
        "recall+cross-encoder p50 / scan p50",
        lambda r: (
            f"{r['recall_cross_encoder']['median_ms'] / r['numpy_scan']['median_ms']:.1f}x"
            if r["recall_cross_encoder"]
            else "-"
        ),
    )
    line("recall p95 / p50", lambda r: f"{r['recall_p95_over_p50']:.2f}x")
    line("peak resident memory, MB", lambda r: f"{r['peak_rss_mb']:,.0f}")
    if report["handshake_to_tools_list"]:
        h = report["handshake_to_tools_list"]
        print(
            f"process start -> tools/list answered (stdio): median {h['median_ms']:.0f} ms, p95 {h['p95_ms']:.0f} ms"
        )
    for size in sizes:
        print(
            f"recall stage medians at {size['memories']:,} (ms): "
            + ", ".join(f"{k} {v:.2f}" for k, v in size["stages_median_ms"].items())
        )
    print("\nbars:")
    for bar, measured, met in bars(report):
        print(f"  {'PASS' if met else 'FAIL'}  {bar:<44} {measured}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--million", action="store_true", help="also measure 1,000,000 memories")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--remembers", type=int, default=40)
    parser.add_argument("--batches", type=int, default=10, help="remember_many calls of 100 items")
    parser.add_argument("--handshakes", type=int, default=5)
    parser.add_argument("--no-cross-encoder", action="store_true")
    parser.add_argument(
        "--cache-total-rows",
        type=int,
        help="MEMORIA_CACHE_TOTAL_ROWS for the measured servers (default: the server's default)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "perf.json")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child is not None:  # one size, in a process of its own (so its peak memory is its own)
        cache = {"cache_total_rows": args.cache_total_rows} if args.cache_total_rows is not None else {}
        result = measure_size(args.child, args.queries, args.remembers, args.batches, args.model, cache)
        write_json(args.out, result)
        return 0

    sizes = sorted(set(args.sizes + ([1_000_000] if args.million else [])))
    with tempfile.TemporaryDirectory(prefix="memoria-perf-") as tmp:
        model = None if args.no_cross_encoder else build_cross_encoder(Path(tmp) / "models")
        handshake = (
            anyio.run(measure_handshakes, args.handshakes, Path(tmp) / "hs") if args.handshakes else []
        )
        rows = []
        for size in sizes:
            out = Path(tmp) / f"size-{size}.json"
            command = [sys.executable, "-m", "benchmarks.perf", "--child", str(size), "--out", str(out)]
            command += ["--queries", str(args.queries), "--remembers", str(args.remembers)]
            command += ["--batches", str(args.batches)]
            if args.cache_total_rows is not None:
                command += ["--cache-total-rows", str(args.cache_total_rows)]
            if model is not None:
                command += ["--model", str(model)]
            subprocess.run(command, check=True)
            rows.append(json.loads(out.read_text()))
    report = {
        "machine": f"{_cores()} cores",
        "handshake_to_tools_list": summary(handshake) if handshake else None,
        "sizes": rows,
    }
    report["bars"] = [{"bar": bar, "measured": measured, "met": met} for bar, measured, met in bars(report)]
    print_report(report)
    write_json(args.out, report)
    return 0


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main())
