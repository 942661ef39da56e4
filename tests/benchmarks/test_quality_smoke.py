"""The quality benchmark end to end on a tiny conversation, and its scoring by hand."""

import json
import math

import pytest

from benchmarks import quality
from benchmarks.bm25 import BM25
from benchmarks.locomo import ndcg_at_k, reciprocal_rank
from tests.benchmarks.sample import SAMPLE


def test_bm25_matches_the_formula_by_hand():
    index = BM25(["red fox", "red red dog", "blue cat"])
    # N 3; "red" in 2 documents: idf = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6); average length 7/3.
    idf = math.log(1.6)
    norm_fox = 1.2 * (1 - 0.75 + 0.75 * 2 / (7 / 3))
    norm_dog = 1.2 * (1 - 0.75 + 0.75 * 3 / (7 / 3))
    fox, dog, cat = index.scores("red")
    assert fox == pytest.approx(idf * 1 * 2.2 / (1 + norm_fox))
    assert dog == pytest.approx(idf * 2 * 2.2 / (2 + norm_dog))
    assert cat == 0.0
    assert index.rank("red", 5) == [1, 0]  # two "red" outweigh the shorter document; no zero scores


def test_ndcg_and_mrr_by_hand():
    returned = [{"x"}, {"D1"}, {"y"}, {"D2"}]
    # gains at ranks 2 and 4: 1/log2(3) + 1/log2(5); ideal: 1 + 1/log2(3).
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(returned, ["D1", "D2"], 10) == pytest.approx(expected)
    assert ndcg_at_k(returned, ["D1", "D2"], 2) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert reciprocal_rank(returned, ["D2"]) == 0.25
    assert reciprocal_rank(returned, ["nowhere"]) == 0.0


@pytest.mark.slow
def test_the_benchmark_runs_every_variant_the_baseline_and_the_feedback_experiment(tmp_path, capsys):
    data = tmp_path / "sample.json"
    data.write_text(json.dumps([SAMPLE]))
    out = tmp_path / "quality.json"
    assert quality.main(["--data", str(data), "--out", str(out), "--holdout", "conv-test"]) == 0
    report = json.loads(out.read_text())["runs"]["offline"]
    assert report["questions"] == 3 and report["backend"].startswith("embedder hashed-v1")
    assert list(report["variants"]) == [v.name for v in quality.variants("default")]
    for summary in report["variants"].values():
        assert summary["overall"]["questions"] == 3
    full = report["variants"]["full pipeline"]
    # Six turns and top_k 20: every evidence turn is returned, somewhere.
    assert full["overall"]["R@20"] == 1.0 and 0.0 < full["overall"]["MRR"] <= 1.0
    assert set(full["by_category"]) == {"multi-hop", "single-hop"}
    assert full["holdout"]["questions"] == 3 and full["tuning"]["questions"] == 0
    assert report["bm25"]["overall"]["questions"] == 3
    # Training: questions 1 and 3; test: question 2, whose evidence no training question shares.
    arms = report["feedback"]["arms"]
    assert list(arms) == ["before", quality.CEILING, *(arm.name for arm in quality.FEEDBACK_ARMS)]
    for name, summary in arms.items():
        assert (
            summary["all"]["unrelated"]["questions"] == 1
            and summary["holdout"]["unrelated"]["questions"] == 1
        )
        assert summary["all"].get("seen", {}).get("questions") == (None if name == quality.CEILING else 2)
    table = capsys.readouterr().out
    assert "BM25 (k1 1.2, b 0.75)" in table and "- episode expansion" in table
    assert "feedback: unrelated (holdout)" in table and "helpful_ids x5" in table


def test_test_questions_are_related_when_they_share_evidence_with_a_training_question():
    from benchmarks.locomo import Question

    questions = [
        Question("a?", ("D1:1",), 4),
        Question("b?", ("D1:1", "D2:2"), 4),
        Question("c?", ("D3:3",), 4),
        Question("d?", ("D4:4",), 4),
    ]
    train, test, groups = quality.split_questions(questions)
    assert [q.question for q in train] == ["a?", "c?"] and [q.question for q in test] == ["b?", "d?"]
    assert groups == ["related", "unrelated"]


def test_the_hook_arm_names_what_the_answer_used_and_nothing_when_no_evidence_was_recalled():
    from types import SimpleNamespace

    from benchmarks.locomo import Question

    question = Question("When did Caroline go to the support group?", ("D1:3",), 2, answer="7 May 2023")
    returned = [
        SimpleNamespace(id="m1", content="[8 May 2023] I went to the support group on 7 May 2023", score=0.8),
        SimpleNamespace(id="m2", content="The 2023 pride parade was great", score=0.7),
        SimpleNamespace(id="m3", content="Back on 7 May 2023 I painted a lake", score=0.1),
    ]
    # Neither "7" (too short) nor "2023" (a year alone) is a value: nothing is named from "7 May 2023".
    assert quality.used_by_answer(returned, question, answered=True) == []
    question = Question("Which port does Caroline's app use?", ("D1:3",), 1, answer="port 8080")
    returned[2].content = "My app listens on 8080 now"
    # m3 holds the answer's 8080 but scored 0.1, below a quarter of the best (0.8): filler, never named.
    returned[0].content = "The app moved from 3000 to 8080 last week"
    assert quality.used_by_answer(returned, question, answered=True) == ["m1"]
    assert quality.used_by_answer(returned, question, answered=False) == []
