"""What LanceDB's session caches cost and buy: recall latency and resident memory per cache size.

    python -m benchmarks.caches                          # 50,000 memories; caches of 8, 64, 512, 4096 MB
    python -m benchmarks.caches --memories 20000 --sizes-mb 16 64

The scope copies answer most recalls from memory; this measures the path they do not cover (scopes too
big for a copy), where LanceDB's index and metadata caches (``MEMORIA_LANCEDB_INDEX_CACHE_MB``,
``MEMORIA_LANCEDB_METADATA_CACHE_MB``) decide what is read again from disk. One synthetic store (the
perf benchmark's corpus, compacted and indexed); then, for each size in a process of its own, a runtime
with the copies off (``MEMORIA_CACHE_SCOPE_ROWS=0``) and both caches at that size answers the same
recalls through the tool's handler (warm-up first): median and p95 latency, and the process's resident
memory after them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import generate, queries, store_corpus
from benchmarks.reporting import RESULTS, measured_apart, offline_settings, write_json

WARM = 20


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def build(db: Path, count: int) -> None:
    from server.state import build_runtime

    runtime = build_runtime(offline_settings(db))
    try:
        store_corpus(runtime, generate(count), examined_at=runtime.clock(), maintain_every=None)
        runtime.store.maintain(min_fragments=2)
    finally:
        runtime.close()


def measure(db: Path, size_mb: int, recalls: int) -> dict[str, Any]:
    """In this process: recalls with the copies off and both caches at ``size_mb``."""
    from server.state import build_runtime
    from tools.common import Caller
    from tools.recall import RecallInput, recall

    settings = offline_settings(
        db, cache_scope_rows=0, lancedb_index_cache_mb=size_mb, lancedb_metadata_cache_mb=size_mb
    )
    runtime = build_runtime(settings)
    latencies: list[float] = []
    try:
        for index, (query, org, project) in enumerate(queries(recalls + WARM)):
            started = time.perf_counter()
            recall(
                RecallInput(query=query, org_id=org, project_id=project, top_k=10),
                runtime,
                Caller("benchmark", f"ses_cache_{index}"),
            )
            if index >= WARM:
                latencies.append((time.perf_counter() - started) * 1000)
    finally:
        runtime.close()
    ordered = sorted(latencies)
    return {
        "cache_mb": size_mb,
        "recall_median_ms": round(statistics.median(ordered), 2),
        "recall_p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "rss_mb": round(rss_mb(), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=50_000)
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[8, 64, 512, 4096])
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument("--measure", nargs=2, metavar=("DB", "MB"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "caches.json")
    args = parser.parse_args(argv)
    if args.measure:  # one size, in a process of its own (its resident memory is its own)
        print(json.dumps(measure(Path(args.measure[0]), int(args.measure[1]), args.recalls)))
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="memoria-caches-") as tmp:
        db = Path(tmp) / "store"
        started = time.perf_counter()
        build(db, args.memories)
        print(f"built {args.memories:,} memories in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        for size in args.sizes_mb:
            row = measured_apart(
                "benchmarks.caches", "--measure", str(db), str(size), "--recalls", str(args.recalls)
            )
            results.append(row)
            print(
                f"caches {size:>5} MB: recall median {row['recall_median_ms']} ms, p95 {row['recall_p95_ms']} ms, "
                f"RSS {row['rss_mb']:,.0f} MB",
                file=sys.stderr,
            )
    write_json(args.out, {"memories": args.memories, "recalls": args.recalls, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
