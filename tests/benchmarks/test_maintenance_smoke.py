"""The maintenance benchmark end to end on a small store: each round times the tables it compacted."""

import json

from benchmarks import maintenance


def test_each_round_reports_the_tables_it_compacted_and_the_store_growing(tmp_path, capsys):
    out = tmp_path / "maintenance.json"
    argv = [
        "--memories",
        "300",
        "--recalls",
        "40",
        "--rounds",
        "3",
        "--remembers",
        "20",
        "--round-recalls",
        "30",
    ]
    assert maintenance.main([*argv, "--set", "MEMORIA_COMPACTION_MIN_FRAGMENTS=2", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    rounds = report["rounds"]
    assert [r["round"] for r in rounds] == [1, 2, 3]
    assert [r["memories"] for r in rounds] == [320, 340, 360]  # 20 new memories a round
    assert [r["retrievals"] for r in rounds] == [70, 100, 130]  # 30 recalls a round, each recorded
    # Two fragments or more since the last round: every round compacts the memories and the records.
    assert all({"memories_v4", "retrievals"} <= set(r["optimize_ms"]) for r in rounds)
    assert all(ms > 0 for r in rounds for ms in r["optimize_ms"].values())
    assert report["optimize_median_ms"]["memories_v4"] > 0
    assert "rounds after the first, median" in capsys.readouterr().out
