"""Recall latency on a conversation whose speakers are the memories' authors, and how many query
embeddings it takes.

    python -m benchmarks.recall_latency --data ../shared/data/locomo/locomo-dev.json [--conversations conv-43] \\
        [--embedding-model FOLDER] [--rounds 2] [--beside 1]

The turns are remembered as ``benchmarks.quality`` remembers them (one memory per turn, its speaker the
author, one episode per session); then every question is recalled ``--rounds`` times through the recall
handler, in process, after a warm-up of 20. LoCoMo's questions name a speaker, so a recall's vector leg
embeds its query without that name while feedback weighting would compare the query as said: this counts
the embedder's query embeddings (the model's own calls, below the server's memo of recent queries).
Reported: median, p95 and mean in ms, and query embeddings per recall. ``benchmarks.peer`` times the MCP
round trip beside another server instead, with one author for every turn.

``--beside N``: the timed recalls run beside N threads that run Python without pause, as a busy server's other
requests do. Each time a recall lets the interpreter go (a file read, a call into LanceDB, a NumPy operation
over more than 500 values) it then waits for its turn back, up to the switch interval (5 ms) per busy thread:
what a recall costs under load beyond its own processor time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.locomo import load
from benchmarks.quality import ask, base_settings, model_settings, remember_conversation
from benchmarks.reporting import RESULTS, write_json

WARM_UP = 20


class QueryCounter:
    """Counts the query embeddings of the model at the bottom of an embedder's wrappers."""

    def __init__(self, embedder: Any) -> None:
        model = embedder
        while getattr(model, "inner", None) is not None:  # the wrappers' chain down to the model
            model = model.inner
        self.queries = 0
        embed_query = model.embed_query

        def counted(text: str) -> Any:
            self.queries += 1
            return embed_query(text)

        model.embed_query = counted  # this instance's calls only; every wrapper above passes through


def busy(stop: threading.Event) -> None:
    """Run Python until ``stop`` is set (a request of another client, to the interpreter)."""
    total = 0
    while not stop.is_set():
        for value in range(2_000):
            total += value


def measure(conversation: Any, settings: Any, rounds: int, beside: int = 0) -> dict[str, Any]:
    from server.state import build_runtime

    runtime = build_runtime(settings)
    try:
        remember_conversation(conversation, runtime)
        counted = QueryCounter(runtime.models.embedder)
        questions = conversation.scored_questions()
        for index, question in enumerate(questions[:WARM_UP]):
            ask(runtime, conversation, question, f"warm-{index}")
        counted.queries = 0
        times = []
        stop = threading.Event()
        others = [
            threading.Thread(target=busy, args=(stop,), daemon=True, name=f"busy-{n}") for n in range(beside)
        ]
        for other in others:
            other.start()
        try:
            for round_number in range(rounds):
                for index, question in enumerate(questions):
                    started = time.perf_counter()
                    ask(runtime, conversation, question, f"latency-{round_number}-{index}")
                    times.append((time.perf_counter() - started) * 1000.0)
        finally:
            stop.set()
            for other in others:
                other.join()
        times.sort()
        return {
            "recalls": len(times),
            "median_ms": round(statistics.median(times), 2),
            "p95_ms": round(times[min(len(times) - 1, int(0.95 * len(times)))], 2),
            "mean_ms": round(statistics.mean(times), 2),
            "query_embeddings": counted.queries,
            "embeddings_per_recall": round(counted.queries / max(1, len(times)), 3),
        }
    finally:
        runtime.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="a file in LoCoMo's format")
    parser.add_argument("--conversations", nargs="*", default=["conv-43"])
    parser.add_argument("--embedding-model", type=Path, help="a local sentence-transformers model folder")
    parser.add_argument("--rounds", type=int, default=2, help="times each question is recalled")
    parser.add_argument(
        "--beside",
        type=int,
        default=0,
        help="threads running Python beside the timed recalls (a busy server)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "recall_latency.json")
    args = parser.parse_args(argv)
    use_models = args.embedding_model is not None
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="memoria-latency-") as tmp:
        for conversation in load(args.data, args.conversations):
            settings = base_settings(
                Path(tmp) / conversation.sample_id,
                use_models,
                model_settings(args.embedding_model) if use_models else None,
            )
            found = measure(conversation, settings, args.rounds, args.beside)
            report[conversation.sample_id] = found
            print(
                f"{conversation.sample_id}: {found['recalls']} recalls, median {found['median_ms']} ms, "
                f"p95 {found['p95_ms']} ms, mean {found['mean_ms']} ms; {found['query_embeddings']} query "
                f"embeddings ({found['embeddings_per_recall']} a recall)",
                file=sys.stdout,
            )
    write_json(
        args.out,
        {"embedding_model": str(args.embedding_model or "offline"), "beside": args.beside, "runs": report},
    )
    print(f"wrote {args.out}", file=sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
