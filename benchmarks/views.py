"""What the commands for people cost at scale, one command:

    python -m benchmarks.views                       # 100,000 memories
    python -m benchmarks.views --memories 5000       # a quick look

On the offline backend, a synthetic store (benchmarks.corpus: 9 scopes, 4 agents) with recalls and
outcome reports in one scope, so the report has feedback data; then, each timed:
- `stats` of that scope and `build_report` + `render_report` for it (median of 3 runs each, the first
  run of each in a fresh process state separately: it builds the scope's in-memory copy);
- `export_store` of the whole store to a file, and `import_file` of that file into an empty store (the same
  embedder, so no re-embedding), with rows/s, and whether a second export of the imported store is
  identical (the lossless check, at scale);
- `reembed --all` of the report's scope (memories/s).
Writes benchmarks/results/views.json and prints a table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from benchmarks.corpus import generate, queries, store_corpus
from benchmarks.reporting import RESULTS, offline_settings, write_json
from console.terminal import ProgressBar

SCOPE_ORG, SCOPE_PROJECT = "org-0", "project-0"


def timed(function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - started


def feedback_history(runtime: Any, recalls: int, progress: ProgressBar) -> None:
    """Recalls in the report's scope, each in its own session, half reported a success, half a failure."""
    from tools.common import Caller
    from tools.recall import RecallInput, recall
    from tools.report_outcome import ReportOutcomeInput, report_outcome

    asked = [q for q, _, _ in queries(recalls, seed=29)]
    for index, query in enumerate(asked):
        session = f"ses-bench-{index}"
        caller = Caller("bench-agent", session)
        recall(RecallInput(query=query, org_id=SCOPE_ORG, project_id=SCOPE_PROJECT), runtime, caller)
        outcome: Literal["success", "failure"] = "success" if index % 2 == 0 else "failure"
        report_outcome(
            ReportOutcomeInput(
                outcome=outcome, org_id=SCOPE_ORG, project_id=SCOPE_PROJECT, session_id=session
            ),
            runtime,
            caller,
        )
        progress("recalls and outcome reports", index + 1, len(asked))
    progress.finish()


def run(memories: int, recalls: int) -> dict[str, Any]:
    from console.report import build_report
    from console.report_page import render_report
    from console.transfer import export_store, import_file, reembed
    from server.state import build_runtime
    from storage.records import Scope
    from tools.stats import StatsInput, stats

    progress = ProgressBar(sys.stderr)
    scope = Scope(SCOPE_ORG, SCOPE_PROJECT)
    with tempfile.TemporaryDirectory(prefix="memoria-views-") as tmp:
        folder = Path(tmp)
        runtime = build_runtime(offline_settings(folder / "a"))
        try:
            corpus = generate(memories)
            print(f"writing {memories:,} synthetic memories ...", file=sys.stderr)
            store_corpus(runtime, corpus, examined_at=runtime.clock())
            runtime.store.maintain(min_fragments=2)
            feedback_history(runtime, recalls, progress)
            in_scope = sum(1 for m in corpus if (m.org_id, m.project_id) == (SCOPE_ORG, SCOPE_PROJECT))

            from tools.common import Caller

            caller = Caller("bench", "bench")
            stats_runs = [
                timed(stats, StatsInput(org_id=SCOPE_ORG, project_id=SCOPE_PROJECT), runtime, caller)[1]
            ]
            stats_runs += [
                timed(stats, StatsInput(org_id=SCOPE_ORG, project_id=SCOPE_PROJECT), runtime, caller)[1]
                for _ in range(2)
            ]
            report_runs, render_runs, page_bytes = [], [], 0
            for _ in range(3):
                data, seconds = timed(build_report, runtime, scope)
                page, render_seconds = timed(render_report, data)
                report_runs.append(seconds)
                render_runs.append(render_seconds)
                page_bytes = len(page.encode())

            export_path = folder / "export.jsonl"
            print("exporting ...", file=sys.stderr)
            with export_path.open("w", encoding="utf-8") as out:
                exported, export_seconds = timed(export_store, runtime, out, progress=progress)
            progress.finish()
            rows = sum(count.written for count in exported.tables.values())
            reembedded, reembed_seconds = timed(
                reembed, runtime, scope=scope, all_memories=True, progress=progress
            )
            progress.finish()
        finally:
            runtime.close()

        target = build_runtime(offline_settings(folder / "b"))
        try:
            print("importing into an empty store ...", file=sys.stderr)
            imported, import_seconds = timed(import_file, target, export_path, progress=progress)
            progress.finish()
            again_path = folder / "again.jsonl"
            with again_path.open("w", encoding="utf-8") as out:
                export_store(target, out)
        finally:
            target.close()
        # The re-embedding above rewrote the source's vectors after the export (the same embedder, so
        # the same values); the export was taken before it, and the comparison is with that export.
        identical = export_path.read_text().splitlines()[1:] == again_path.read_text().splitlines()[1:]
        export_mb = export_path.stat().st_size / 1e6
    return {
        "memories": memories,
        "memories_in_report_scope": in_scope,
        "recalls_with_outcomes": recalls,
        "stats_first_s": stats_runs[0],
        "stats_median_s": statistics.median(stats_runs),
        "report_first_s": report_runs[0],
        "report_median_s": statistics.median(report_runs),
        "render_median_s": statistics.median(render_runs),
        "page_bytes": page_bytes,
        "export_rows": rows,
        "export_seconds": export_seconds,
        "export_rows_per_s": rows / export_seconds,
        "export_mb": export_mb,
        "import_seconds": import_seconds,
        "import_rows_per_s": rows / import_seconds,
        "imported_written": sum(count.written for count in imported.tables.values()),
        "lossless": identical,
        "reembed_memories": reembedded.reembedded,
        "reembed_seconds": reembed_seconds,
        "reembed_per_s": reembedded.reembedded / reembed_seconds if reembed_seconds else 0.0,
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"memoria commands at scale - {result['memories']:,} memories, offline backend "
        f"({result['memories_in_report_scope']:,} in the report's scope, {result['recalls_with_outcomes']} recalls "
        "with outcome reports)",
        f"  stats (one scope)        first {result['stats_first_s']:.2f} s, median {result['stats_median_s']:.2f} s",
        f"  report build             first {result['report_first_s']:.2f} s, median {result['report_median_s']:.2f} s",
        f"  report render            median {result['render_median_s'] * 1000:.0f} ms, page {result['page_bytes'] / 1e3:.0f} KB",
        f"  export (whole store)     {result['export_rows']:,} rows in {result['export_seconds']:.1f} s "
        f"({result['export_rows_per_s']:,.0f} rows/s, {result['export_mb']:.0f} MB)",
        f"  import (empty store)     {result['imported_written']:,} rows in {result['import_seconds']:.1f} s "
        f"({result['import_rows_per_s']:,.0f} rows/s); export again identical: {result['lossless']}",
        f"  reembed --all (scope)    {result['reembed_memories']:,} memories in {result['reembed_seconds']:.1f} s "
        f"({result['reembed_per_s']:,.0f}/s)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.views", description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument("--out", type=Path, default=RESULTS / "views.json")
    args = parser.parse_args(argv)
    result = run(args.memories, args.recalls)
    write_json(args.out, result)
    print(render(result))
    return 0 if result["lossless"] else 1


if __name__ == "__main__":
    sys.exit(main())
