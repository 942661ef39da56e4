"""What one text costs the local embedder on onnxruntime when its worker threads spin or sleep, one command:

    python -m benchmarks.model_threads --embedding-model FOLDER [--data locomo.json] [--texts 300]

onnxruntime's worker threads spin while they wait for work by default; memoria's sessions wait asleep
(``retrieval.models.onnx_models.OnnxTransformer``), because in a server they share the cores with the
request threads and LanceDB's. Measured here, one text at a time, in ms (mean, median, p95) and in process
CPU a text: the session as memoria opens it, and the same model with onnxruntime's default; on a quiet
machine, then beside one busy process (what a maintenance round's compaction or another request is to
the embedding). Rounds alternate between the two sessions, so that a change of the machine's speed falls
on both. Texts as ``benchmarks.model_batches`` reads them.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.model_batches import texts_of
from benchmarks.reporting import RESULTS, write_json


def _busy(stop: Any) -> None:
    while not stop.is_set():
        sum(number * number for number in range(10_000))


def _spinning(folder: Path) -> Any:
    """The model's session as onnxruntime opens it by default (its workers spin), fed like memoria's."""
    from retrieval.models.onnx_models import SPINNING, OnnxTransformer

    model = OnnxTransformer(folder, "encoder")
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry(SPINNING, "1")
    model._session = onnxruntime.InferenceSession(
        str(folder / "onnx" / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    return model


def one_at_a_time(model: Any, texts: list[str]) -> tuple[list[float], float]:
    """Each text's time in ms, and the process CPU a text in ms."""
    times = []
    cpu = time.process_time()
    for text in texts:
        started = time.perf_counter()
        model.encode([text])
        times.append((time.perf_counter() - started) * 1000)
    return times, (time.process_time() - cpu) * 1000 / len(texts)


def summary(times: list[float], cpu: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "mean_ms": round(statistics.mean(ordered), 2),
        "median_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "cpu_ms": round(statistics.mean(cpu), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedding-model", type=Path, required=True, help="a local model folder")
    parser.add_argument("--data", type=Path, help="a file in LoCoMo's format (else synthetic notes)")
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "model_threads.json")
    args = parser.parse_args(argv)

    from retrieval.models.onnx_models import OnnxTransformer

    folder = args.embedding_model.resolve()
    texts = texts_of(args.data, args.texts)
    models = {"asleep (memoria)": OnnxTransformer(folder, "encoder"), "spinning (default)": _spinning(folder)}
    for model in models.values():
        one_at_a_time(model, texts[:20])  # warm
    results: dict[str, Any] = {"texts": len(texts), "rounds": args.rounds}
    for busy in (False, True):
        stop = multiprocessing.Event()
        other = multiprocessing.Process(target=_busy, args=(stop,)) if busy else None
        if other is not None:
            other.start()
            time.sleep(0.5)
        times: dict[str, list[float]] = {name: [] for name in models}
        cpu: dict[str, list[float]] = {name: [] for name in models}
        try:
            for _ in range(args.rounds):
                for name, model in models.items():
                    took, cpu_a_text = one_at_a_time(model, texts)
                    times[name] += took
                    cpu[name].append(cpu_a_text)
        finally:
            if other is not None:
                stop.set()
                other.join()
        where = "beside a busy process" if busy else "quiet"
        results[where] = {name: summary(times[name], cpu[name]) for name in models}
        for name, found in results[where].items():
            print(
                f"{where:22s} {name:19s} mean {found['mean_ms']:6.2f} ms, median {found['median_ms']:6.2f}, "
                f"p95 {found['p95_ms']:6.2f}; process CPU {found['cpu_ms']:6.2f} ms a text"
            )
    write_json(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
