"""The embedding-batch benchmark end to end on the tiny test model: every way of batching timed, and
batching by length leaves the vectors as they were."""

import json

import pytest

from benchmarks import model_batches


@pytest.mark.slow
def test_the_benchmark_times_each_batching_and_finds_the_same_vectors(tiny_models, tmp_path, capsys):
    out = tmp_path / "model_batches.json"
    argv = [
        "--embedding-model",
        str(tiny_models["embedder"]),
        "--texts",
        "40",
        "--rounds",
        "1",
        "--out",
        str(out),
    ]
    assert model_batches.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["texts"] == 40
    assert all(
        report[key] > 0 for key in ("one_at_a_time_ms", "batches_in_arrival_order_ms", "batches_by_length_ms")
    )
    assert report["min_cosine"] >= 0.9999
    assert "batches by length" in capsys.readouterr().out


def test_texts_are_timed_in_chunks_of_the_batch_size_asked():
    sizes: list[int] = []
    model_batches.ms_a_text([f"text {n}" for n in range(70)], lambda chunk: sizes.append(len(chunk)), 32, 2)
    assert sizes == [32, 32, 6, 32, 32, 6]
