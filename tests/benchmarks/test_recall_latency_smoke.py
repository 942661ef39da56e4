"""The recall latency benchmark on a tiny conversation: it runs, counts the model's query embeddings and
writes its report."""

import json

from benchmarks import recall_latency
from benchmarks.locomo import load
from tests.benchmarks.sample import SAMPLE


def test_the_benchmark_times_every_recall_and_counts_query_embeddings(tmp_path, capsys):
    data = tmp_path / "sample.json"
    data.write_text(json.dumps([SAMPLE]))
    out = tmp_path / "latency.json"
    assert (
        recall_latency.main(["--data", str(data), "--conversations", SAMPLE["sample_id"], "--out", str(out)])
        == 0
    )
    run = json.loads(out.read_text())["runs"][SAMPLE["sample_id"]]
    questions = len(load(data)[0].scored_questions())
    assert run["recalls"] == 2 * questions and run["median_ms"] > 0
    # No report was made: nothing asks feedback weighting to embed, so a recall embeds its query at most once
    assert 0 <= run["query_embeddings"] <= run["recalls"]
    assert f"{run['recalls']} recalls" in capsys.readouterr().out


def test_the_counter_sits_under_every_wrapper_and_passes_calls_through():
    class Model:
        def embed_query(self, text):
            return [len(text), 0]

    class Wrapper:
        def __init__(self, inner):
            self.inner = inner

        def embed_query(self, text):
            return self.inner.embed_query(text)

    outer = Wrapper(Wrapper(Model()))
    counter = recall_latency.QueryCounter(outer)
    assert outer.embed_query("abc") == [3, 0] and outer.embed_query("ab") == [2, 0]
    assert counter.queries == 2
    alone = Model()
    assert recall_latency.QueryCounter(alone).queries == 0 and alone.embed_query("a") == [1, 0]


def test_recalls_beside_busy_threads_are_timed_and_the_threads_stop_with_the_run(tmp_path):
    import threading

    data = tmp_path / "sample.json"
    data.write_text(json.dumps([SAMPLE]))
    out = tmp_path / "latency.json"
    arguments = ["--data", str(data), "--conversations", SAMPLE["sample_id"], "--out", str(out)]
    assert recall_latency.main([*arguments, "--beside", "2", "--rounds", "1"]) == 0
    report = json.loads(out.read_text())
    assert report["beside"] == 2
    assert report["runs"][SAMPLE["sample_id"]]["recalls"] == len(load(data)[0].scored_questions())
    assert not any(thread.name.startswith("busy-") for thread in threading.enumerate())  # joined


def test_a_busy_thread_runs_until_told_to_stop():
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=recall_latency.busy, args=(stop,))
    thread.start()
    assert thread.is_alive()
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
