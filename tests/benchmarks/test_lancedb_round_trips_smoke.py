"""The round-trip benchmark end to end, a few calls per run: every call timed, and the appends it
compares are the two paths (through ``Table.add``, and the store's native append), and so are the reads
(through LanceDB's query builder, and the store's one round trip)."""

import json

from benchmarks import lancedb_round_trips


def test_the_benchmark_times_each_call_beside_each_number_of_busy_threads(tmp_path, capsys):
    out = tmp_path / "round_trips.json"
    assert lancedb_round_trips.main(["--busy", "0", "1", "--calls", "3", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert list(report) == ["0", "1"]
    for medians in report.values():
        assert list(medians) == [
            "Table.add",
            "Appenders.add",
            "schema",
            "version",
            "count_rows",
            "version (strong)",
            "version (manifests)",
            "version (probe)",
            "scan (builder)",
            "scan",
        ]
        assert all(value > 0 for value in medians.values())
    printed = capsys.readouterr()
    assert "direct / Table.add" in printed.out
    assert "no native append" not in printed.err  # the installed LanceDB takes the direct path
