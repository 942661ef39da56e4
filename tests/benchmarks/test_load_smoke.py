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
    assert text.startswith("4 clients (closed loop) for 3 s on 300 memories") and "errors: 0" in text


def calls_due(clients: int, seconds: float, rate: float, seed: int = 5) -> int:
    """The calls an open-loop run makes: each client's seeded gaps, replayed without a server."""
    due = 0
    for number in range(clients):
        me = load.Client(f"client-{number:02d}", seed + number)
        moment = me.rng.expovariate(rate / clients)
        while moment < seconds:
            me.next_call()
            due += 1
            moment += me.rng.expovariate(rate / clients)
    return due


def test_an_open_loop_run_sends_every_call_when_due_and_answers_them_all():
    report = load.run_load(clients=4, seconds=3, memories=300, rate=8)
    assert report["errors"] == 0, report["error_examples"]
    assert report["rate"] == 8
    assert report["calls"] == report["overall"]["n"] == calls_due(4, 3, 8)
    assert load.render(report).startswith("4 clients (open loop, 8 calls a second due) for 3 s")
