"""Maintenance rounds as a store grows, one command: what each round's compaction costs per table.

    python -m benchmarks.maintenance                                  # 10,000 memories, 20 rounds
    python -m benchmarks.maintenance --memories 100000 --rounds 10
    python -m benchmarks.maintenance --set MEMORIA_COMPACTION_MIN_FRAGMENTS=32     # try a setting

In this process, on the offline backend: a store preloaded with ``--memories`` synthetic memories and
``--recalls`` recalls (their retrieval records and A/B rows, through the recall tool as a server writes
them), then ``--rounds`` rounds of ``--remembers`` remembers and ``--round-recalls`` recalls, each followed
by the server's maintenance round (``server.upkeep.maintenance_round``). Reported per round: the round's
time, each table's optimize (compaction, index update, clean-up), the memories table's fragments, and
the median remember and recall of the round. A round that costs the same at the last round as at the
first is flat: it does not grow with the table or with the recalls served.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import generate, queries, store_corpus
from benchmarks.reporting import RESULTS, add_settings_argument, offline_settings, settings_of, write_json
from storage import schema

TABLES = (schema.MEMORIES, schema.RETRIEVALS, schema.AB_LOGS, schema.LINEAGE)


def recall_many(runtime: Any, count: int, seed: int) -> list[float]:
    from tools.common import Caller
    from tools.recall import RecallInput, recall

    latencies = []
    for index, (query, org, project) in enumerate(queries(count, seed=seed)):
        started = time.perf_counter()
        recall(
            RecallInput(query=query, org_id=org, project_id=project, top_k=10),
            runtime,
            Caller("benchmark", f"ses_maint_{seed}_{index // 10}"),
        )
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def remember_many(runtime: Any, count: int, seed: int) -> list[float]:
    from tools.common import Caller
    from tools.remember import RememberInput, remember

    latencies = []
    for memory in generate(count, seed=seed):
        started = time.perf_counter()
        remember(
            RememberInput(content=memory.content, org_id=memory.org_id, project_id=memory.project_id),
            runtime,
            Caller("benchmark", f"ses_maint_{seed}"),
        )
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def run(db: Path, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    from server.state import build_runtime
    from server.upkeep import maintenance_round
    from storage.upkeep import fragment_count

    runtime = build_runtime(offline_settings(db, env))
    try:
        started = time.perf_counter()
        store_corpus(runtime, generate(args.memories), examined_at=runtime.clock())
        recall_many(runtime, args.recalls, seed=1)
        runtime.store.flush_logs()
        maintenance_round(runtime)
        print(f"preloaded in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        rounds = []
        for number in range(1, args.rounds + 1):
            remembers = remember_many(runtime, args.remembers, seed=100 + number)
            recalls = recall_many(runtime, args.round_recalls, seed=100 + number)
            runtime.store.flush_logs()
            began = time.perf_counter()
            compacted = maintenance_round(runtime)  # what the round did, per table it compacted
            seconds = time.perf_counter() - began
            # Each table's last optimize, whole, as the store keeps it.
            timings = runtime.store._optimize_took
            optimized = {name: round(timings[name] * 1000, 1) for name in TABLES if name in compacted}
            row = {
                "round": number,
                "round_ms": round(seconds * 1000, 1),
                "optimize_ms": optimized,
                "memories": runtime.store._memories.count_rows(),
                "retrievals": runtime.store._retrievals.count_rows(),
                "memory_fragments": fragment_count(runtime.store._memories),
                "retrieval_fragments": fragment_count(runtime.store._retrievals),
                "remember_median_ms": round(statistics.median(remembers), 2),
                "recall_median_ms": round(statistics.median(recalls), 2),
            }
            rounds.append(row)
            tables = ", ".join(f"{name} {ms:.0f}" for name, ms in optimized.items())
            print(
                f"round {number:>3}: {row['round_ms']:>7.0f} ms ({tables}); {row['memories']:,} memories in "
                f"{row['memory_fragments']} fragments, {row['retrievals']:,} retrieval records in "
                f"{row['retrieval_fragments']}; remember {row['remember_median_ms']} ms, recall "
                f"{row['recall_median_ms']} ms",
                file=sys.stderr,
            )
    finally:
        runtime.close()
    later = rounds[1:] or rounds
    half = max(1, len(later) // 2)
    return {
        "settings": env,
        "memories": args.memories,
        "recalls": args.recalls,
        "rounds": rounds,
        "round_median_ms": {
            "first_half": statistics.median(r["round_ms"] for r in later[:half]),
            "second_half": statistics.median(r["round_ms"] for r in later[half:] or later),
        },
        # Over the rounds that compacted the table (a table is compacted once its appends piled up).
        "optimize_median_ms": {
            name: statistics.median(timed)
            if (timed := [r["optimize_ms"][name] for r in later if name in r["optimize_ms"]])
            else None
            for name in TABLES
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--recalls", type=int, default=2_000, help="recalls before the first round")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--remembers", type=int, default=100, help="remembers a round")
    parser.add_argument("--round-recalls", type=int, default=300, help="recalls a round")
    parser.add_argument("--out", type=Path, default=RESULTS / "maintenance.json")
    add_settings_argument(parser)
    args = parser.parse_args(argv)
    env = settings_of(parser, args.set)
    with tempfile.TemporaryDirectory(prefix="memoria-maintenance-") as tmp:
        report = run(Path(tmp) / "store", args, env)
    halves = report["round_median_ms"]
    print(
        f"rounds after the first, median: {halves['first_half']:.0f} ms in the first half, "
        f"{halves['second_half']:.0f} ms in the second; per table: "
        + ", ".join(
            f"{name} {ms:.0f} ms" for name, ms in report["optimize_median_ms"].items() if ms is not None
        )
    )
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
