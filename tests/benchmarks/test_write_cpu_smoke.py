"""The write CPU benchmark runs end to end on a few writes: every step of a remember is timed, and both
servers (memoria and the SDK's no-op) answer with remembers in flight (no timing is asserted)."""

import json

import pytest

from benchmarks import write_cpu


@pytest.mark.slow
def test_a_short_run_times_every_step_and_both_servers(tmp_path, capsys):
    out = tmp_path / "write_cpu.json"
    args = ["--stored", "20", "--timed", "5", "--in-flight", "4", "--in-flight-writes", "12"]
    assert write_cpu.main([*args, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    inside = report["in_process"]
    assert inside["missing"] == []
    assert set(inside["steps"]) == {label for *_, label in write_cpu.STEPS}
    assert inside["steps"]["consolidation, whole"]["calls_per_remember"] == 1.0
    # the process's CPU counts the writing thread's and LanceDB's threads' besides
    assert inside["process_ms_per_remember"] >= inside["ms_per_remember"] > 0
    for name in ("memoria", "sdk_only"):
        assert report[name]["writes"] == 12 and report[name]["in_flight"] == 4
    assert "ms of CPU a call" in capsys.readouterr().out


def test_a_step_renamed_since_shows_as_missing_and_nothing_stays_wrapped(monkeypatch):
    from writing.service import WriteService

    before = WriteService.embedded
    steps = (*write_cpu.STEPS, ("writing.service", "WriteService", "_renamed_since", "a step gone"))
    monkeypatch.setattr(write_cpu, "STEPS", steps)
    undo, missing = write_cpu.install({})
    assert WriteService.embedded is not before
    undo()
    assert missing == ["writing.service.WriteService._renamed_since"]
    assert WriteService.embedded is before


def test_no_writes_in_flight_runs_the_in_process_part_only(tmp_path, capsys):
    out = tmp_path / "write_cpu.json"
    assert (
        write_cpu.main(["--stored", "5", "--timed", "3", "--in-flight-writes", "0", "--out", str(out)]) == 0
    )
    report = json.loads(out.read_text())
    assert set(report) == {"in_process"} and report["in_process"]["timed"] == 3
    assert "ms of CPU a call" not in capsys.readouterr().out
