"""What an agent reads of forget, report_outcome and lineage: plain lines that say what happened and what
to do next (the structured content carries every field)."""

import math

from tools.forget import ForgetOutput
from tools.report_outcome import ReportOutcomeOutput, WeightUpdate
from tools.result_text import forget_text, outcome_text


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
        "Global weights (the logged baseline; explain_ranking shows the weight a recall applies):",
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


def test_a_report_lists_the_named_memories_and_the_largest_context_moves_and_counts_the_rest():
    """A trial: after a recall of top_k 100 the report read back 101 lines, one per memory of the context."""
    helpful = WeightUpdate(id="mem_used", role="helpful", share=1.0, weight_before=1.0, weight_after=1.15)
    # 1 / log2(1 + rank) for ranks 1..30: the first share 1, the tenth 0.289065 (the largest left unlisted)
    context = [
        WeightUpdate(
            id=f"mem_{rank:02d}",
            role="context",
            share=round(1 / math.log2(1 + rank), 6),
            weight_before=1.0,
            weight_after=1.0 + 0.15 * 0.25 / math.log2(1 + rank),
        )
        for rank in range(30, 0, -1)  # listed in any order: the largest shares are shown
    ]
    lines = outcome_text(report(*context, helpful)).splitlines()
    assert lines[1:3] == [
        "Global weights (the logged baseline; explain_ranking shows the weight a recall applies):",
        "- mem_used (helpful, share 1): 1.000 -> 1.150",
    ]
    assert [line.split()[1] for line in lines[3:12]] == [f"mem_{rank:02d}" for rank in range(1, 10)]
    assert lines[12:] == [
        "21 more memories of the contexts moved by smaller shares (at most 0.289065): the structured content's "
        "`updated` lists every one."
    ]


def test_memories_credited_without_a_move_are_counted_as_more_only_after_a_list_of_moves():
    """A new user's trial: a replaced report that moved no weight read back "12 more credited without a
    change of their global weight." with nothing listed before it."""
    still = [
        WeightUpdate(id=f"mem_{n}", role="context", share=0.5, weight_before=1.15, weight_after=1.15)
        for n in range(12)
    ]
    assert outcome_text(report(*still)).splitlines()[1:] == [
        "12 memories credited; none of their global weights changed."
    ]
    assert outcome_text(report(still[0])).splitlines()[1:] == [
        "1 memory credited; its global weight did not change."
    ]
    moved = WeightUpdate(id="mem_up", role="helpful", share=1.0, weight_before=1.0, weight_after=1.15)
    assert outcome_text(report(moved, *still[:2])).splitlines()[1:] == [
        "Global weights (the logged baseline; explain_ranking shows the weight a recall applies):",
        "- mem_up (helpful, share 1): 1.000 -> 1.150",
        "2 more memories credited without a change of their global weight.",
    ]


def test_a_dry_run_that_would_take_nothing_says_so_and_why():
    """A trial read "Dry run: 0 memories would be retracted" above a note that no memory had the tag."""
    out = ForgetOutput(
        mode="retract",
        dry_run=True,
        forgotten=[],
        note="nothing was forgotten: no active memory has the tag 'x'",
    )
    assert (
        forget_text(out)
        == "Dry run: nothing would be retracted.\nnothing was forgotten: no active memory has the tag 'x'"
    )


def test_a_forget_that_took_nothing_says_so_once():
    """A trial read "Nothing was retracted." above "nothing was forgotten: ..."."""
    note = "nothing was forgotten: no active memory matches the query closely enough"
    out = ForgetOutput(mode="retract", dry_run=False, forgotten=[], note=note)
    assert forget_text(out) == "Nothing was forgotten: no active memory matches the query closely enough"
    other = ForgetOutput(mode="purge", dry_run=False, forgotten=[], note="the memory is protected")
    assert forget_text(other) == "Nothing was purged.\nthe memory is protected"
