"""The filler benchmark end to end on the offline backend: what each share of the best match shows."""

import json

import pytest

from benchmarks import filler


@pytest.mark.slow
def test_a_larger_share_shows_no_more_memories_and_every_answer_is_shown_or_missed(tmp_path, capsys):
    out = tmp_path / "filler.json"
    assert filler.main(["--out", str(out)]) == 0
    by_share = json.loads(out.read_text())["offline"]
    assert list(by_share) == ["0", "0.2", "0.25", "0.3", "0.4"]
    answers = sum(len(wanted) for wanted in filler.QUERIES.values())
    shown = [found["shown"] for found in by_share.values()]
    assert shown == sorted(shown, reverse=True)  # a larger share never lets more in
    for found in by_share.values():
        assert found["answers shown"] + found["answers missed"] == answers
        assert found["filler shown"] == found["shown"] - found["answers shown"]
        assert len(found["queries"]) == len(filler.QUERIES)
    # Without a share, every fact above the relevance floor may be shown: more than a quarter's share shows.
    assert by_share["0"]["filler shown"] > by_share["0.25"]["filler shown"]
    assert "nothing for unanswerable" in capsys.readouterr().out
