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
