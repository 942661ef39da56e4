"""The LoCoMo-format reader and the consolidation benchmark, on a tiny conversation made here (the real
data never enters the test suite)."""

import json
from datetime import datetime

import pytest

from benchmarks import consolidation
from benchmarks.locomo import load, normalise_evidence, parse_session_date, recall_at_k
from tests.benchmarks.sample import SAMPLE


def test_malformed_evidence_ids_are_split_normalised_and_unknown_ones_dropped(tmp_path):
    assert normalise_evidence(["D8:6; D9:17", "D:11:26", "D8:6"]) == ["D8:6", "D9:17", "D11:26"]
    path = tmp_path / "sample.json"
    path.write_text(json.dumps([SAMPLE]))
    (conversation,) = load(path)
    assert [q.evidence for q in conversation.questions] == [("D1:3",), ("D2:2",), ("D2:3",), ()]
    assert len(conversation.scored_questions()) == 3  # the adversarial one is left out
    assert conversation.turns[0].when == datetime(2023, 5, 8, 13, 56)
    assert conversation.turns[4].image_caption == "a photo of a blue bowl"
    assert parse_session_date("someday") is None


def test_recall_at_k_counts_evidence_covered_by_the_first_k_memories():
    returned = [{"D1:1"}, {"D1:2", "D1:3"}, {"D2:1"}]
    assert recall_at_k(returned, ["D1:3", "D2:1"], 2) == 0.5
    assert recall_at_k(returned, ["D1:3", "D2:1"], 3) == 1.0


def test_rewording_is_light_and_deterministic():
    text = "Ana: I'm adopting a rescue dog named Pixel next week!"
    assert consolidation.reword(text, "D1:1") == consolidation.reword(text, "D1:1")
    changed = [consolidation.reword(text, f"D1:{i}") for i in range(40)]
    assert any(c != text for c in changed) and any(c == text for c in changed)


@pytest.mark.slow
def test_the_consolidation_benchmark_reports_every_scenario(tmp_path, capsys):
    data, out = tmp_path / "sample.json", tmp_path / "out.json"
    data.write_text(json.dumps([SAMPLE]))
    assert consolidation.main(["--data", str(data), "--out", str(out)]) == 0
    rows = {row["scenario"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"once", "two agents", "two agents, merged", "one agent twice"}
    assert rows["once"]["writes"] == rows["once"]["active"] == 6
    for name in ("two agents", "two agents, merged", "one agent twice"):
        row = rows[name]
        assert row["writes"] == 12
        assert row["stored"] + row["exact duplicates"] == 12
        assert row["active"] + row["superseded"] == row["stored"]
        assert row["questions"] == 3 and 0.0 <= row["recall@5"] <= 1.0
    assert rows["two agents"]["superseded"] == 0  # different agents: corroboration, kept
    assert rows["one agent twice"]["superseded"] > 0
    assert rows["one agent twice"]["wrong merges"] == 0
    assert "two agents, merged" in capsys.readouterr().out
