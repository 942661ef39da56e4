"""What a text costs the local embedder on onnxruntime, alone and in batches, one command:

    python -m benchmarks.model_batches --embedding-model FOLDER [--data locomo.json] [--texts 320]

A batch is padded to its longest text, so every shorter text of it pays for the padding. The group
commit embeds the remembers in flight together, ``remember_many`` and imports embed up to 32 at a time,
and a cross-encoder scores its candidates 32 pairs at a time. Measured here, in ms a text: one text at a
time; batches of 32 in the order the texts came (how the embedder batched before 2026-11-29); and
through the embedder, which batches texts of similar length (``retrieval.models.onnx_models.
in_length_batches``). Also the smallest cosine between the vectors of the last two: batching must not
change a vector. Texts are LoCoMo turns with ``--data`` (as the quality benchmark remembers them,
"[date] speaker: text"), else the synthetic notes of ``benchmarks.writes``. (The batches in arrival order
get no passage prompt: for a model that declares one, such as the e5 models, the cosine measures that.)
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.reporting import RESULTS, write_json

BATCH = 32


def texts_of(data: Path | None, count: int) -> list[str]:
    if data is None:
        from benchmarks.writes import sentence

        rng = random.Random(7)
        return [sentence(rng, number) for number in range(count)]
    from benchmarks.locomo import load

    texts = [
        f"[{turn.when}] {turn.speaker}: {turn.said}"
        for conversation in load(data)
        for turns in conversation.sessions().values()
        for turn in turns
    ]
    return texts[:count]


def ms_a_text(texts: list[str], embed: Callable[[list[str]], Any], size: int, rounds: int) -> float:
    """The median over ``rounds`` of the time to embed ``texts`` in chunks of ``size``, per text."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for start in range(0, len(texts), size):
            embed(texts[start : start + size])
        times.append((time.perf_counter() - started) * 1000 / len(texts))
    return statistics.median(times)


def measure(folder: Path, texts: list[str], rounds: int) -> dict[str, float]:
    from retrieval.models.embedders.sentence_transformers import SentenceTransformerEmbedder
    from retrieval.models.onnx_models import OnnxTransformer, pooled, pooling

    embedder = SentenceTransformerEmbedder(str(folder), backend="onnx", allow_downloads=False)
    embedder.warm_up()  # exports the folder's ONNX model if it has none
    if embedder.backend != "onnxruntime":
        raise SystemExit(f"{folder} does not run on onnxruntime here: {embedder.backend_note}")
    onnx, mode = OnnxTransformer(folder, "encoder"), pooling(folder)  # the same export, batched as it comes

    def in_arrival_order(batch: list[str]) -> np.ndarray:
        states, mask = onnx.encode(batch)
        vectors = np.asarray(pooled(states, mask, mode), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    embedder.embed_documents(texts[:BATCH])  # warm
    arrival = np.vstack(
        [in_arrival_order(texts[start : start + BATCH]) for start in range(0, len(texts), BATCH)]
    )
    by_length = embedder.embed_documents(texts)
    return {
        "texts": len(texts),
        "one_at_a_time_ms": round(ms_a_text(texts, embedder.embed_documents, 1, rounds), 2),
        "batches_in_arrival_order_ms": round(ms_a_text(texts, in_arrival_order, BATCH, rounds), 2),
        "batches_by_length_ms": round(ms_a_text(texts, embedder.embed_documents, len(texts), rounds), 2),
        "min_cosine": round(float((arrival * by_length).sum(axis=1).min()), 6),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedding-model", type=Path, required=True, help="a sentence-transformers folder")
    parser.add_argument("--data", type=Path, help="LoCoMo json: embed its turns (default: synthetic notes)")
    parser.add_argument("--texts", type=int, default=320)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "model_batches.json")
    args = parser.parse_args(argv)
    if args.texts < 1 or args.rounds < 1:
        parser.error("--texts and --rounds must be 1 or more")
    report = measure(args.embedding_model, texts_of(args.data, args.texts), args.rounds)
    print(
        f"{report['texts']} texts, ms a text: one at a time {report['one_at_a_time_ms']}, batches of {BATCH} in "
        f"arrival order {report['batches_in_arrival_order_ms']}, batches by length "
        f"{report['batches_by_length_ms']}; smallest cosine between the two batchings {report['min_cosine']}"
    )
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
