import json

import numpy as np
import pytest

from retrieval.trace import FloorApplied, RecallTrace, StageRecord, parse_trace, ranks_without_feedback
from retrieval.types import Candidate
from tests.records import memory_record


def trace_of(candidate: Candidate, floor: float = 0.15) -> RecallTrace:
    return RecallTrace(
        retrieval_id="ret_1",
        query="où est le café ?",
        backends={"embedder": "hashed"},
        weighting_enabled=True,
        top_k=5,
        char_budget=4000,
        stages=(StageRecord("threshold", 0.25, (FloorApplied(floor, 1),)),),
        candidates=(candidate,),
    )


def test_a_trace_reads_back_as_written_with_text_kept_unescaped():
    memory = memory_record("mem_a", content="le café est au 2ᵉ étage")
    candidate = Candidate(memory=memory, relevance_score=0.5, weighted_score=0.5, neighbourhood_bonus=0.25)
    text = trace_of(candidate).to_json()
    assert "café" in text  # unescaped: a purge's substring search finds the text as stored
    document = parse_trace(text)
    assert document["query"] == "où est le café ?"
    assert document["stages"][0]["events"] == [{"event": "FloorApplied", "floor": 0.15, "dropped": 1}]
    [entry] = document["candidates"]
    assert (entry["id"], entry["preview"], entry["scores"]["final"]) == (
        "mem_a",
        "le café est au 2ᵉ étage",
        0.75,
    )
    assert document == json.loads(text)  # the standard reader agrees


def test_numpy_scores_are_written_as_numbers_and_nan_as_null():
    memory = memory_record("mem_a")
    candidate = Candidate(memory=memory, relevance_score=np.float64(0.5), weighted_score=float("nan"))
    document = parse_trace(trace_of(candidate, floor=np.float32(0.25)).to_json())
    assert document["stages"][0]["events"][0]["floor"] == 0.25
    [entry] = document["candidates"]
    assert entry["scores"]["relevance"] == 0.5
    assert entry["scores"]["final"] is None


def test_a_trace_written_by_the_standard_encoder_with_nan_still_reads():
    old = json.dumps({"candidates": [{"id": "mem_a", "scores": {"final": float("nan")}}]})
    assert "NaN" in old
    [entry] = parse_trace(old)["candidates"]
    assert np.isnan(entry["scores"]["final"])


def test_a_trace_that_is_not_an_object_is_refused():
    with pytest.raises(ValueError, match="JSON object"):
        parse_trace("[1, 2]")


def test_a_window_is_shown_to_the_second():
    """A trial: "past 7 days" showed its start with microseconds."""
    from datetime import UTC, datetime

    from retrieval.trace import window_to_dict
    from storage.records import TimeWindow

    window = TimeWindow(since=datetime(2026, 11, 24, 21, 32, 45, 203366, tzinfo=UTC), until=None)
    assert window_to_dict(window, "past 7 days") == {
        "since": "2026-11-24T21:32:45Z",
        "until": None,
        "from": "past 7 days",
    }


def traced(final: float, weight: float, neighbourhood: float | None = None, **fields) -> dict:
    return {"scores": {"final": final, "feedback_weight": weight, "neighbourhood": neighbourhood}, **fields}


def test_without_feedback_each_memory_keeps_its_own_score_less_its_weight():
    # In the final order: a 1.0 at weight 1.0 -> 1.0; b 0.9 at 1.5 -> 0.6; c 0.8 at 1.0 with 0.1 lent by
    # a neighbour -> 0.8. Without the weights: a, c, b. The weights lifted b one place and lowered c one.
    entries = [traced(1.0, 1.0), traced(0.9, 1.5), traced(0.8, 1.0, neighbourhood=0.1)]
    assert ranks_without_feedback(entries, weighting_enabled=True) == [0, 2, 1]


def test_a_lift_after_the_weights_is_kept_and_a_neighbour_s_loan_is_not_divided():
    # d: relevance 0.5 at weight 1.0, the answer type lends 0.7 x 0.5: final 0.85. e: relevance 0.45 at
    # weight 1.2: final 0.54. The feedback stage ranked e above d (0.54 > 0.5), but the answer type put d
    # first; without the weights d stays first (0.85 > 0.45): the weights moved neither in the final order.
    assert ranks_without_feedback([traced(0.85, 1.0), traced(0.54, 1.2)], weighting_enabled=True) == [0, 1]
    # g: 1.0 at weight 1.0. f: final 0.8 at weight 0.5, 0.3 of it lent by a neighbour: (0.8 - 0.3) / 0.5
    # + 0.3 = 1.3 without the weight, above g's 1.0: the weight moved f down one.
    assert ranks_without_feedback([traced(1.0, 1.0), traced(0.8, 0.5, 0.3)], weighting_enabled=True) == [1, 0]


def test_a_neighbour_s_loan_is_replayed_without_the_lender_s_weight_or_its_own_cap():
    # h: 0.85 at weight 1.0. k: relevance 0.3 at weight 0.8 (0.24), lent 0.5 x 1.5 (its neighbour l's
    # weighted score, l at weight 1.5) x min(1, 0.8) = 0.6: final 0.84. Without the weights: 0.3 + 0.5 x 1.0
    # = 0.8, still below h (the loan kept as lent would give 0.3 + 0.6 = 0.9, above it). l: 1.5 at weight
    # 1.5 -> 1.0, first either way.
    entries = [
        traced(1.5, 1.5, id="l"),
        traced(0.85, 1.0, id="h"),
        traced(0.84, 0.8, 0.6, id="k", neighbourhood_of="l"),
    ]
    assert ranks_without_feedback(entries, weighting_enabled=True) == [0, 1, 2]


def test_a_sibling_moves_with_its_source_and_its_own_weight_above_one_lifted_nothing():
    # s: 1.0 at weight 1.0; its sibling t, alpha 0.5 x 1.0 x min(1, 1.5): 0.5; u: 0.4 at 1.0. Feedback moved
    # nothing: t's weight above 1 never lifted it (a review found it read as lifted one place, u as lowered).
    entries = [
        traced(1.0, 1.0, id="s"),
        traced(0.5, 1.5, id="t", source="sibling", sibling_of="s"),
        traced(0.4, 1.0, id="u"),
    ]
    assert ranks_without_feedback(entries, weighting_enabled=True) == [0, 1, 2]
    # v: 1.2 at weight 1.5 (0.8 without); its sibling w, 0.5 x 1.2 x min(1, 0.9) = 0.54 -> 0.5 x 0.8 = 0.4
    # without, below x's 0.45: the weights lifted w with its source, one place above x.
    entries = [
        traced(1.2, 1.5, id="v"),
        traced(0.54, 0.9, id="w", source="sibling", sibling_of="v"),
        traced(0.45, 1.0, id="x"),
    ]
    assert ranks_without_feedback(entries, weighting_enabled=True) == [0, 2, 1]


def test_without_weighting_the_order_is_its_own():
    entries = [traced(1.0, 1.0), traced(0.9, 1.5)]
    assert ranks_without_feedback(entries, weighting_enabled=False) == [0, 1]
