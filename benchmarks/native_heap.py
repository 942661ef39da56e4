"""Where a writing server's memory went: plain LanceDB, maintenance rounds, and glibc's mmap threshold.

    python -m benchmarks.native_heap                      # 40 rounds of 100 appends + optimize, per threshold
    python -m benchmarks.native_heap --rounds 20 --thresholds-kb 0 64 1024

A table shaped like the memories table (an id with a B-tree index, a full-text indexed text, a vector)
takes single-row appends; every ``--appends`` of them, one ``optimize`` (compaction, index update and
clean-up of old versions), as the server's maintenance round does. Each threshold runs in a process of
its own, which first sets glibc's mmap threshold as ``memoria serve`` does (``server.serve.tune_malloc``;
0: glibc's sliding threshold, the library default) and holds LanceDB's two caches to 8 MB each so that
they fill in the first rounds and are not what grows. Reported: resident memory after the warm-up
rounds and at the end, and its growth per round and per append in between (after ``malloc_trim``, so
only memory the allocator cannot give back counts).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks.caches import rss_mb
from benchmarks.reporting import RESULTS, measured_apart, write_json
from server.serve import M_MMAP_THRESHOLD, glibc, tune_malloc

WARM_ROUNDS = 10
DIM = 384
WORDS = [
    "deploy",
    "billing",
    "staging",
    "database",
    "cache",
    "runbook",
    "token",
    "index",
    "schema",
    "queue",
    "worker",
    "lease",
]


def measure(threshold_kb: int, rounds: int, appends: int) -> dict[str, Any]:
    """In this process: ``rounds`` of ``appends`` single-row appends and an optimize."""
    tuned = tune_malloc(0, threshold_kb)  # first, as `memoria serve` does, before LanceDB loads
    libc = glibc()
    assert libc is not None  # main() runs this on glibc only

    import lancedb
    import numpy as np
    import pyarrow as pa
    from lancedb.index import FTS, BTree

    rng = np.random.default_rng(7)

    def rows(first: int, count: int) -> pa.Table:
        return pa.table(
            {
                "id": [f"m{first + i}" for i in range(count)],
                "search_text": [" ".join(rng.choice(WORDS, 12)) for _ in range(count)],
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(rng.random(count * DIM, dtype=np.float32)), DIM
                ),
            }
        )

    samples: list[float] = []
    warm = float("nan")
    with tempfile.TemporaryDirectory(prefix="memoria-heap-") as folder:
        session = lancedb.Session(index_cache_size_bytes=8 << 20, metadata_cache_size_bytes=8 << 20)
        db = lancedb.connect(folder, read_consistency_interval=timedelta(0), session=session)
        table = db.create_table("memories", rows(0, 10))
        table.create_index("id", config=BTree())
        table.create_index("search_text", config=FTS(with_position=False))
        written = 10
        for round_number in range(1, rounds + 1):
            for _ in range(appends):
                table.add(rows(written, 1))
                written += 1
            table.optimize(cleanup_older_than=timedelta(0))
            libc.malloc_trim(0)
            samples.append(rss_mb())
            if round_number == WARM_ROUNDS:
                warm = samples[-1]
    end = samples[-1]
    measured = rounds - WARM_ROUNDS
    return {
        "mmap_threshold_kb": threshold_kb,
        "applied": threshold_kb == 0 or (M_MMAP_THRESHOLD, threshold_kb * 1024) in tuned,
        "rss_after_warmup_mb": round(warm, 1),
        "rss_end_mb": round(end, 1),
        "growth_mb_per_round": round((end - warm) / measured, 3),
        "growth_kb_per_append": round((end - warm) * 1024 / (measured * appends), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--appends", type=int, default=100)
    parser.add_argument("--thresholds-kb", type=int, nargs="+", default=[0, 64])
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "native_heap.json")
    args = parser.parse_args(argv)
    if args.rounds <= WARM_ROUNDS:
        parser.error(f"--rounds must be more than the {WARM_ROUNDS} warm-up rounds")
    if glibc() is None:
        print("this benchmark measures glibc's allocator: run it on Linux with glibc", file=sys.stderr)
        return 2
    if args.measure is not None:  # one threshold, in a process of its own (mallopt is process-wide)
        print(json.dumps(measure(args.measure, args.rounds, args.appends)))
        return 0
    results = []
    for threshold in args.thresholds_kb:
        row = measured_apart(
            "benchmarks.native_heap",
            "--measure",
            str(threshold),
            "--rounds",
            str(args.rounds),
            "--appends",
            str(args.appends),
        )
        results.append(row)
        label = "glibc's sliding threshold" if threshold == 0 else f"mmap threshold {threshold} KB"
        print(
            f"{label}: RSS {row['rss_after_warmup_mb']:,.0f} -> {row['rss_end_mb']:,.0f} MB over rounds "
            f"{WARM_ROUNDS + 1}-{args.rounds}: {row['growth_mb_per_round']} MB a round, "
            f"{row['growth_kb_per_append']} KB an append",
            file=sys.stderr,
        )
    write_json(args.out, {"rounds": args.rounds, "appends": args.appends, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
