"""The write path probe of ``benchmarks.load --trace-writes``: it times the write service's steps and the
store's locks in a process, says which step it could not find, and undoes itself."""

import json

import pytest

from benchmarks import load, write_probe
from benchmarks.reporting import offline_settings
from server.state import build_runtime
from storage.locking import WriteLock
from storage.records import Scope
from writing.drafts import Draft
from writing.service import WriteService


@pytest.fixture
def runtime(tmp_path):
    built = build_runtime(offline_settings(tmp_path / "db"))
    yield built
    built.close()


def remember(runtime, content: str) -> None:
    draft = Draft(content=content, scope=Scope("acme", "web"), agent_id="agent", session_id="s1")
    runtime.writer.remember(runtime.writer.prepare(draft), llm=None)


def test_the_steps_and_the_write_lock_are_timed_until_it_is_undone(runtime, tmp_path):
    original_remember, original_hold = vars(WriteService)["remember"], vars(WriteLock)["hold"]
    probe = tmp_path / "write-path.json"
    undo = write_probe.install(probe)
    try:
        remember(runtime, "The billing service deploys from the main branch every Tuesday")
        remember(runtime, "The staging database is reset every Sunday night")
    finally:
        undo()
    assert vars(WriteService)["remember"] is original_remember
    assert vars(WriteLock)["hold"] is original_hold
    remember(runtime, "Written after the probe was undone: not timed")
    summary = write_probe.summarise(probe)
    assert summary["missing"] == []
    assert summary["steps"]["remember (write service)"]["n"] == 2
    assert summary["steps"]["consolidation"]["n"] == 2
    held = [name for name in summary["steps"] if name.startswith("lock ") and name.endswith(": held")]
    assert held and all(summary["steps"][name]["n"] > 0 for name in held)
    # Each hold named by the calls that took the lock, not by the lock's own entry points.
    holders = [
        name for name in summary["holds_by_caller"] if name.startswith("hold of memoria-write.lock by ")
    ]
    assert any(name.endswith("_insert_batch") for name in holders), holders
    assert not any(name.endswith(("exclusive", "_sequence", "hold")) for name in holders), holders
    assert set(json.loads(probe.read_text())) == {"timings", "missing"}


def test_a_step_that_is_no_longer_there_is_named_instead_of_silently_not_timed(tmp_path, monkeypatch):
    steps = (*write_probe.STEPS, ("writing.service", "WriteService", "_renamed_since", "a step gone"))
    monkeypatch.setattr(write_probe, "STEPS", steps)
    probe = tmp_path / "write-path.json"
    write_probe.install(probe)()
    assert write_probe.summarise(probe)["missing"] == ["writing.service.WriteService._renamed_since"]


def test_percentiles_and_long_holds_are_summarised_from_the_file(tmp_path):
    probe = tmp_path / "write-path.json"
    timings = {
        "remember (write service)": [float(ms) for ms in range(1, 21)],  # 1..20 ms
        "long hold of memoria-write.lock: report_outcome > set_weights": [90.0, 110.0],
        "long hold of memoria-write.lock: insert_many > _insert_batch": [300.0],
    }
    probe.write_text(json.dumps({"timings": timings, "missing": []}))
    summary = write_probe.summarise(probe)
    # 20 values, ranked as the load's own percentiles (benchmarks.perf.percentile): the median at index
    # round(0.5 x 19) = 10 (11 ms), p95 at round(0.95 x 19) = 18 (19 ms); total 210 ms.
    assert summary["steps"]["remember (write service)"] == {
        "n": 20,
        "p50_ms": 11.0,
        "p95_ms": 19.0,
        "total_s": 0.21,
    }
    assert list(summary["long_holds"]) == [  # most time first: 300 ms, then 200 ms
        "long hold of memoria-write.lock: insert_many > _insert_batch",
        "long hold of memoria-write.lock: report_outcome > set_weights",
    ]


@pytest.mark.slow
def test_a_traced_load_run_reports_where_the_servers_write_time_went():
    # A second of warm-up: the probe is installed once the server has imported what it times. Seed 0:
    # the first client's first call and the third's third are remembers (benchmarks.load.Client), so
    # a slow machine that answers each client a few calls still times some. Six seconds: in two CI runs
    # beside the rest of the suite, three timed no remember at all (stops 83 and 89).
    assert load.Client("client-00", 0).next_call()[0] == "remember"
    report = load.run_load(clients=3, seconds=6, memories=200, seed=0, trace_writes=True, warm_up=1.0)
    assert report["errors"] == 0, report["error_examples"]
    traced = report["write_path"]
    assert traced["missing"] == []
    assert traced["steps"]["remember (write service)"]["n"] > 0
    assert traced["steps"]["lock memoria-write.lock: held"]["n"] > 0
    assert "write path (server, whole run)" in load.render(report)
