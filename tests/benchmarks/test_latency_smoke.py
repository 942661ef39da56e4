"""The latency benchmark runs end to end on a tiny store (figures are not asserted: this is not a timed test)."""

import pytest

from benchmarks import latency
from benchmarks.corpus import generate, queries
from tests.helpers import ALL_STAGES


def test_corpus_is_deterministic_and_has_near_duplicates():
    first, second = generate(300), generate(300)
    assert first == second
    assert len({m.org_id for m in first}) == 3
    assert any("(confirmed)" in m.content or "due to" in m.content or "Our " in m.content for m in first)
    assert len(queries(5)) == 5


@pytest.mark.slow
def test_latency_benchmark_produces_a_complete_report(tmp_path, capsys):
    assert (
        latency.main(
            ["--memories", "300", "--queries", "5", "--handshakes", "1", "--out", str(tmp_path / "r.json")]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "recall (MCP tool call, all stages)" in out and "numpy brute-force" in out
    import json

    report = json.loads((tmp_path / "r.json").read_text())
    assert report["recall"]["n"] == 5 and report["recall_over_scan"] > 0
    assert set(report["stages_median_ms"]) == set(ALL_STAGES)
