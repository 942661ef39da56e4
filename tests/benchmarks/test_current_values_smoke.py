"""The current-values benchmark end to end on the offline backend, through a real `memoria serve`."""

import json

import pytest

from benchmarks import current_values


def test_the_workload_states_each_thing_again_with_another_value_and_the_steady_facts_once():
    facts, steady, values = current_values.workload(services=2, restatements=4, seed=1)
    assert len(facts) == 2 * 6 + 2 * 3 * 4
    for said in values.values():
        assert len(said) == len(set(said)) == 4  # every restatement another value
    assert sorted(text for texts in steady.values() for text in texts) == sorted(facts[:12])


@pytest.mark.slow
def test_the_current_value_is_placed_first_and_older_ones_do_not_fill_the_context(tmp_path, capsys):
    out = tmp_path / "current_values.json"
    assert current_values.main(["--services", "2", "--restatements", "12", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    values = report["value_questions"]
    assert values["n"] == 6
    assert values["current_shown"] == values["current_first"] == 1.0
    assert values["older_values_shown_mean"] <= 1.0  # the value it replaced, not eleven
    assert report["overview_questions"]["steady_facts_shown_mean"] >= 5
    assert "value questions (6)" in capsys.readouterr().out
