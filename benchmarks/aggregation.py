"""Aggregation benchmark: one pass of the aggregation job (SimHash clusters with the block search,
corroboration, contradictions) over a scope of N memories read from LanceDB.

    python -m benchmarks.aggregation                  # 10,000 and 100,000 memories
    python -m benchmarks.aggregation --sizes 10000 --repeats 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import generate, store_corpus
from benchmarks.reporting import RESULTS, offline_settings, write_json


def load_scope(db: Path, size: int) -> Any:
    """A store whose one scope holds ``size`` synthetic memories from several agents."""
    from server.state import build_runtime

    settings = offline_settings(db, aggregation_max_rows=size)
    runtime = build_runtime(settings)
    store_corpus(runtime, generate(size, orgs=1, projects=1))
    runtime.store.maintain(min_fragments=2)
    return runtime


def measure(size: int, repeats: int) -> dict[str, Any]:
    from retrieval.aggregation import ScopeIndex, cluster_members
    from retrieval.contradictions import ContradictionInput, detect_contradictions
    from storage.records import Scope

    with tempfile.TemporaryDirectory(prefix="memoria-aggregation-") as tmp:
        print(f"loading {size:,} memories ...", file=sys.stderr)
        runtime = load_scope(Path(tmp) / "db", size)
        scope = Scope("org-0", "project-0")
        try:
            passes = []
            for _ in range(repeats):
                result = runtime.corroboration.run_pass(scope)
                passes.append(result.elapsed_ms)
            started = time.perf_counter()
            rows = runtime.store.aggregation_rows(scope, size)
            read_ms = (time.perf_counter() - started) * 1000
            members = cluster_members(rows)
            started = time.perf_counter()
            index = ScopeIndex.build(members, runtime.store.attesters(scope))
            clusters = index.clusters()
            cluster_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            contradictions = detect_contradictions(
                [ContradictionInput(r.id, r.content, r.created_at) for r in rows]
            )
            contradiction_ms = (time.perf_counter() - started) * 1000
        finally:
            runtime.close()
    return {
        "memories": size,
        "pass_median_ms": statistics.median(passes),
        "passes_ms": passes,
        "read_ms": read_ms,
        "cluster_ms": cluster_ms,
        "contradictions_ms": contradiction_ms,
        "rows": result.rows,
        "clusters": len(clusters),
        "corroborated_clusters": result.corroborated_count,
        "contradictions": len(contradictions),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "aggregation.json")
    args = parser.parse_args(argv)
    reports = [measure(size, args.repeats) for size in args.sizes]
    print(
        f"\n{'memories':>10} {'pass median ms':>15} {'read ms':>9} {'cluster ms':>11} {'contradict ms':>14} {'clusters':>9} {'corroborated':>13} {'contradictions':>15}"
    )
    for r in reports:
        print(
            f"{r['memories']:>10,} {r['pass_median_ms']:>15.0f} {r['read_ms']:>9.0f} {r['cluster_ms']:>11.0f} "
            f"{r['contradictions_ms']:>14.0f} {r['clusters']:>9,} {r['corroborated_clusters']:>13,} {r['contradictions']:>15,}"
        )
    write_json(args.out, reports)
    return 0


if __name__ == "__main__":
    sys.exit(main())
