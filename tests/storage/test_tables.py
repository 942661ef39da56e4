"""Stored traces as a purge leaves them (``storage.tables.masked``)."""

from storage.records import PURGED_PREVIEW
from storage.tables import MODEL_WORDS_WITHHELD, masked


def trace(*candidates: dict) -> dict:
    return {
        "candidates": list(candidates),
        "stages": [
            {
                "events": [
                    {
                        "event": "SufficiencyJudged",
                        "sub_queries": ["when does BLUEFINCH ship"],
                        "iteration": 1,
                    },
                    {"event": "SubQueryRan", "query": "when does BLUEFINCH ship", "hits": 2},
                    {
                        "event": "LLMPassRan",
                        "reason": "the LLM did not answer with a JSON object: 'Drop the BLUEFINCH memory'",
                    },
                    {
                        "event": "RerankFellBack",
                        "reason": "bad answer: 'BLUEFINCH first'",
                        "transient": False,
                    },
                    {"event": "LLMPassRan", "reason": "dropped 1 of 3 candidates (3 shown)"},
                    {"event": "IterationSkipped", "reason": "not a JSON object: 'BLUEFINCH ships in March'"},
                ]
            }
        ],
    }


REASON = "left out by the language model's context selection: the BLUEFINCH memory is off topic"


def test_a_trace_that_held_a_purged_memory_keeps_no_word_a_language_model_wrote():
    held = trace(
        {"id": "gone", "preview": "BLUEFINCH ships in March", "exclusion_reason": REASON},
        {"id": "kept", "preview": "the checklist lives in ops/", "exclusion_reason": REASON},
    )
    masked(held, {"gone"})
    assert [c["preview"] for c in held["candidates"]] == [PURGED_PREVIEW, "the checklist lives in ops/"]
    assert {c["exclusion_reason"] for c in held["candidates"]} == {
        "left out by the language model's context selection" + MODEL_WORDS_WITHHELD
    }
    events = held["stages"][0]["events"]
    assert "BLUEFINCH" not in str(events)
    assert events[2]["reason"] == "the LLM did not answer with a JSON object" + MODEL_WORDS_WITHHELD
    assert events[4]["reason"] == "dropped 1 of 3 candidates (3 shown)"  # it quotes nothing: kept


def test_a_trace_that_held_no_purged_memory_is_left_as_it_was():
    other = trace({"id": "kept", "preview": "the checklist lives in ops/", "exclusion_reason": REASON})
    assert masked(other, {"gone"}) == trace(
        {"id": "kept", "preview": "the checklist lives in ops/", "exclusion_reason": REASON}
    )
