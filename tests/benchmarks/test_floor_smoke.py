"""The floor benchmark end to end on a tiny conversation: what each candidate floor would cut."""

import json

import pytest

from benchmarks import floor
from tests.benchmarks.sample import SAMPLE


@pytest.mark.slow
def test_the_benchmark_reports_the_rules_floor_and_what_each_candidate_floor_cuts(tmp_path, capsys):
    data = tmp_path / "sample.json"
    data.write_text(json.dumps([SAMPLE]))
    out = tmp_path / "floor.json"
    assert floor.main(["--data", str(data), "--out", str(out)]) == 0
    found = json.loads(out.read_text())["offline"]
    assert found["evidence"]["n"] > 0 and found["off-topic best"]["n"] == len(floor.OFF_TOPIC)
    # The rule: the evidence's 1st percentile, rounded down to 0.05.
    assert found["floor"] == int(found["evidence"]["p1"] * 20) / 20
    cuts = found["by floor"]
    assert list(cuts) == ["0.05", "0.10", "0.15", "0.20"]
    evidence_cut = [cuts[key]["evidence below"] for key in cuts]
    off_topic_cut = [cuts[key]["off-topic best below"] for key in cuts]
    assert evidence_cut == sorted(evidence_cut) and off_topic_cut == sorted(
        off_topic_cut
    )  # a higher floor cuts more
    assert all(0.0 <= share <= 1.0 for share in evidence_cut + off_topic_cut)
    # The rule's own floor cuts what the candidate of the same value does.
    assert cuts[f"{found['floor']:.2f}"]["evidence below"] == found["evidence below floor"]
    assert (
        cuts[f"{found['floor']:.2f}"]["off-topic best below"] == found["off-topic best"]["share below floor"]
    )
    assert "off-topic queries answered with nothing" in capsys.readouterr().out
