"""What one purge costs in a long-running store, and that the purged text leaves every file.

    python -m benchmarks.purge [--memories 10000] [--purges 5]

A store on the offline backend is filled with ``--memories`` distinct memories (``remember_many``, 200 a
call) and ``--purges`` more, each holding a unique token and quoted by a recall's trace; a maintenance
round compacts them together, as in a store that has served for a while. Then each of those is purged
through the forget handler. A purge rewrites the rows of the fragments that held the memory and the traces
quoting it (``Forgetting._vacate``), drops the tables' old versions and rebuilds the full-text index, all
under the write lock. Reported: each purge's seconds and their median, a recall's seconds right after the
last purge (the scope copy reads the rewritten rows again), and the files of the store still holding any
purged token (must be none).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.reporting import RESULTS, offline_settings, write_json

BATCH = 200


def run(memories: int, purges: int) -> dict[str, Any]:
    from server.state import build_runtime
    from tests.forensics import files_holding
    from tools.common import Caller
    from tools.forget import ForgetInput, forget
    from tools.recall import RecallInput, recall
    from tools.remember import RememberInput, remember
    from tools.remember_many import BatchItem, RememberManyInput, remember_many

    caller = Caller("benchmark", "purge")
    with tempfile.TemporaryDirectory(prefix="memoria-purge-") as tmp:
        settings = offline_settings(Path(tmp) / "store")
        runtime = build_runtime(settings)
        try:
            for start in range(0, memories, BATCH):
                items = [
                    BatchItem(
                        content=f"Service {n} listens on port {n} in zone {n % 17}, owned by team-{n % 53}"
                    )
                    for n in range(start, min(start + BATCH, memories))
                ]
                remember_many(RememberManyInput(items=items), runtime, caller)
            tokens = [f"zq7purged{index:03d}x" for index in range(purges)]
            secrets = [
                remember(RememberInput(content=f"The vault token {index} is {token}"), runtime, caller).id
                for index, token in enumerate(tokens)
            ]
            for index in range(purges):  # traces that quote them
                recall(RecallInput(query=f"vault token {index}"), runtime, caller)
            runtime.store.maintain(min_fragments=2)  # the memories among the others in compacted fragments
            seconds = []
            for secret in secrets:
                started = time.perf_counter()
                forget(ForgetInput(memory_id=secret, mode="purge"), runtime, caller)
                seconds.append(time.perf_counter() - started)
            started = time.perf_counter()
            recall(RecallInput(query="service port zone"), runtime, caller)
            recall_after = time.perf_counter() - started
        finally:
            runtime.close()
        holding = sorted(
            {path for token in tokens for path in files_holding(Path(settings.db_uri), token.encode())}
        )
    return {
        "memories": memories,
        "purge_seconds": [round(value, 3) for value in seconds],
        "purge_median_seconds": round(statistics.median(seconds), 3),
        "recall_after_seconds": round(recall_after, 3),
        "files_holding_purged_text": holding,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000, help="memories in the store before purging")
    parser.add_argument("--purges", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "purge.json")
    args = parser.parse_args(argv)
    report = run(args.memories, args.purges)
    print(
        f"{report['memories']:,} memories: purge {report['purge_median_seconds']:.2f} s median "
        f"({', '.join(f'{s:.2f}' for s in report['purge_seconds'])}); a recall after it "
        f"{report['recall_after_seconds']:.3f} s; files still holding purged text: "
        f"{len(report['files_holding_purged_text'])}"
    )
    write_json(args.out, report)
    return 1 if report["files_holding_purged_text"] else 0


if __name__ == "__main__":
    sys.exit(main())
