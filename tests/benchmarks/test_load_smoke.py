"""The HTTP load benchmark runs end to end with a few clients for a moment: every call is answered without
an error and the report has the figures it prints (no timing is asserted)."""

import pytest

from benchmarks import load

pytestmark = pytest.mark.slow


def test_a_short_load_run_answers_every_call_without_error():
    report = load.run_load(clients=4, seconds=3, memories=300)
    assert report["errors"] == 0, report["error_examples"]
    assert report["calls"] == report["overall"]["n"] > 0
    assert report["by_tool"]["recall"]["n"] > 0
    assert set(report["overall"]) == {"n", "p50_ms", "p95_ms", "p99_ms"}
    text = load.render(report)
    assert text.startswith("4 clients for 3 s on 300 memories") and "errors: 0" in text
