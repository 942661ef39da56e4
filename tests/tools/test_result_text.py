"""What an agent reads of forget, report_outcome and lineage: plain lines that say what happened and what
to do next (the structured content carries every field)."""

from tools.report_outcome import ReportOutcomeOutput, WeightUpdate
from tools.result_text import outcome_text


def report(*updates: WeightUpdate) -> ReportOutcomeOutput:
    return ReportOutcomeOutput(
        session_id="ses_1",
        outcome="failure",
        score=0.0,
        status="applied",
        revision=1,
        detail="2 memories credited.",
        updated=list(updates),
    )


def test_a_report_naming_a_memory_misleading_says_how_to_stop_every_task_reading_it():
    """A trial: a memory named misleading three times still came first for a question put otherwise (its
    reports too far from that question to count), and nothing told the agent how to fix it for good."""
    text = outcome_text(
        report(
            WeightUpdate(id="mem_bad", role="misleading", share=1.0, weight_before=1.0, weight_after=0.85),
            WeightUpdate(id="mem_ok", role="context", share=0.5, weight_before=1.0, weight_after=0.95),
        )
    )
    assert text.splitlines()[1:] == [
        "Global weights:",
        "- mem_bad (misleading, share 1): 1.000 -> 0.850",
        "- mem_ok (context, share 0.5): 1.000 -> 0.950",
        "Named misleading: mem_bad. Recall ranks them lower for tasks like this one; other tasks still read "
        "them. If what one says is wrong, remember the right text with replaces=<its id>, or forget it.",
    ]


def test_a_report_naming_nothing_misleading_adds_no_advice():
    text = outcome_text(
        report(WeightUpdate(id="mem_ok", role="helpful", share=1.0, weight_before=1.0, weight_after=1.15))
    )
    assert "misleading" not in text
