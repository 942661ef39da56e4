"""The purge benchmark end to end on a small store: each purge timed, and no file left holding the text."""

import json

import pytest

from benchmarks import purge


@pytest.mark.slow
def test_the_benchmark_times_each_purge_and_finds_no_file_holding_a_purged_text(tmp_path, capsys):
    out = tmp_path / "purge.json"
    assert purge.main(["--memories", "450", "--purges", "2", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["memories"] == 450 and len(report["purge_seconds"]) == 2
    assert report["purge_median_seconds"] > 0 and report["recall_after_seconds"] > 0
    assert report["files_holding_purged_text"] == []
    assert "450 memories: purge " in capsys.readouterr().out
