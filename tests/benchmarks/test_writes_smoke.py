"""The write benchmark runs end to end on a few writes: every phase reports its figures, and each
restatement supersedes the memory it restates (no speed is asserted; its CPU reading is checked against
what this process computed)."""

import json
import os
import random
import time

import pytest

from benchmarks import writes

pytestmark = pytest.mark.slow


def test_a_short_write_run_reports_every_phase_and_each_restatement_supersedes(tmp_path, capsys):
    out = tmp_path / "writes.json"
    args = ["--writes", "20", "--concurrent-writes", "12", "--in-flight", "4", "--restatements", "6"]
    assert writes.main([*args, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["endurance"]["writes"] == 20
    assert report["concurrency"]["writes"] == 12
    restating = report["restatements"]
    assert restating["writes"] == 6
    assert restating["one_at_a_time"]["in_flight"] == 1 and restating["in_flight"]["in_flight"] == 4
    assert restating["one_at_a_time"]["superseded"] == restating["in_flight"]["superseded"] == 6
    assert "restatements: 6 remembers restating earlier ones" in capsys.readouterr().out


def test_no_endurance_writes_measures_the_concurrency_alone(tmp_path, capsys):
    out = tmp_path / "writes.json"
    args = ["--writes", "0", "--concurrent-writes", "8", "--in-flight", "4", "--restatements", "0"]
    assert writes.main([*args, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["endurance"] is None and "restatements" not in report
    assert report["concurrency"]["writes"] == 8 and report["concurrency"]["in_flight"] == 4
    printed = capsys.readouterr().out
    assert "endurance" not in printed and "concurrency: " in printed


def test_a_restated_note_keeps_its_words_and_changes_its_wording():
    content = writes.sentence(random.Random(3), 17)
    again = writes.restated(content)
    assert again != content and again.split(" (")[0] == content.split(" (")[0]


def test_the_servers_cpu_is_read_as_the_seconds_a_process_computed():
    before, started, computed = writes.cpu_seconds(os.getpid()), time.perf_counter(), time.thread_time()
    while time.thread_time() - computed < 0.3:  # this thread computes 0.3 s, however busy the machine
        sum(range(1_000))
    used, wall = writes.cpu_seconds(os.getpid()) - before, time.perf_counter() - started
    assert 0.25 <= used <= wall * (os.cpu_count() or 1) + 0.05


def test_repeated_endurance_runs_report_each_run_and_their_medians(tmp_path, capsys):
    out = tmp_path / "writes.json"
    args = ["--writes", "10", "--concurrent-writes", "0", "--restatements", "0", "--repeats", "3"]
    assert writes.main([*args, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [run["writes"] for run in report["endurance_runs"]] == [10, 10, 10]
    growth = sorted(run["rss_growth_kb_per_write"] for run in report["endurance_runs"])
    assert report["endurance_median"]["rss_growth_kb_per_write"] == round(growth[1], 3)
    # Ten writes reach no window of writes 2,100-2,400: no ratio, and none made up.
    assert report["endurance_median"]["late_over_first"] is None
    assert "median of 3 endurance runs" in capsys.readouterr().out


def test_the_median_of_endurance_runs_is_taken_figure_by_figure():
    runs = [
        {
            "rss_growth_kb_per_write": 30.0,
            "rate_first_300": 100.0,
            "rate_2100_2400": 60.0,
            "late_over_first": 0.6,
        },
        {
            "rss_growth_kb_per_write": 28.0,
            "rate_first_300": 80.0,
            "rate_2100_2400": 64.0,
            "late_over_first": 0.8,
        },
        {
            "rss_growth_kb_per_write": 29.0,
            "rate_first_300": 90.0,
            "rate_2100_2400": None,
            "late_over_first": None,
        },
    ]
    assert writes.endurance_median(runs) == {
        "runs": 3,
        "rss_growth_kb_per_write": 29.0,
        "rate_first_300": 90.0,
        "rate_2100_2400": 62.0,  # the two runs that reached the window
        "late_over_first": 0.7,
    }
