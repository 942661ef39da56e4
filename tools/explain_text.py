"""What an agent reads of an explanation (``explain_ranking``'s text content): the memories of the context
in ranked order with the scores that placed them and the reports that moved them, the first ones left out,
the notes and the stages' times. The structured content carries every field."""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval.text import counted

if TYPE_CHECKING:
    from tools.explain_ranking import CandidateExplanation, ExplainRankingOutput


LEFT_OUT_SHOWN = 10  # memories left out of the context that the text lists (the structured content has all)


def _backend(described: str) -> str:
    """A backend as the text names it: a fallback's reason, hundreds of characters on every call (a trial),
    is left to the structured content."""
    active, fallback, _ = described.partition(" (offline fallback: ")
    return f"{active} (offline fallback: `backends` says why)" if fallback else described


def text_of(out: ExplainRankingOutput) -> str:
    """What an agent reads of an explanation: one line per memory in the context, in the order recall
    ranked them, with the scores that placed it and the reports that moved it, then the first memories
    left out and why, the notes and the stages' times. The structured content carries every score of every
    stage; the text is what answers "why did this rank there", in a fraction of its size."""
    weighting = "on" if out.weighting_enabled else "off (A/B control)"
    backends = ", ".join(f"{name} {_backend(value)}" for name, value in out.backends.items())
    lines = [
        f"Ranking of retrieval {out.retrieval_id} for {out.query!r} ({out.created_at}; feedback weighting "
        f"{weighting}; {backends})."
    ]
    if out.gated:
        lines.append(f"The gate skipped retrieval: {out.gated}.")
    within = searched_within(out)
    if within:
        lines.append(f"Searched only{within}.")
    placed = [c for c in out.candidates if c.in_context]
    left = [c for c in out.candidates if not c.in_context]
    floor = relevance_floor(out)
    if floor is not None and any(c.scores.floor is not None for c in out.candidates):
        # The floor reads its own scale, not the relevance the final multiplies: a trial read recall's "it
        # matches the query at 0.25 (floor 0.15)" and found only "relevance 0.528" here.
        lines.append(
            f'The relevance floor is {floor:g}, on the scale of each match\'s "matches the query at" (not its '
            "relevance): below it a memory never enters the context."
        )
    lines += [_candidate_line(c, out.weighting_enabled) for c in placed]
    if left:
        shown = left[:LEFT_OUT_SHOWN]
        more = len(left) - len(shown)
        lines.append(
            f"Left out ({len(left)}"
            + (f"; the first {len(shown)} here, every one in the structured content" if more else "")
            + "):"
        )
        lines += [_candidate_line(c, out.weighting_enabled) for c in shown]
    floored = sum(1 for s in out.stages for e in s.events if e.get("event") == "BelowThreshold")
    if floored:
        lines.append(
            f"{floored} found below the relevance floor: not candidates (the min_score stage's events)."
        )
    lines += [f"Note: {note}" for note in out.notes]
    lines.append("Stages (ms): " + ", ".join(f"{s.stage} {s.elapsed_ms:.1f}" for s in out.stages) + ".")
    return "\n".join(lines)


def relevance_floor(out: ExplainRankingOutput) -> float | None:
    """The relevance floor the recall applied (its min_score stage's event), None when it had none."""
    return next(
        (
            e["floor"]
            for s in out.stages
            for e in s.events
            if e.get("event") == "FloorApplied" and e.get("floor")
        ),
        None,
    )


def searched_within(out: ExplainRankingOutput) -> str:
    """The window, tags and kinds the recall searched within ("" for all of memory), as its note says them."""
    from tools.recall_window import filters_searched, searched_window

    filters = out.filters or {}
    among = filters_searched(filters.get("tags"), bool(filters.get("tags_all")), filters.get("kinds"))
    return searched_window(out.window) + (f" {among[0]}" if among else "")


def _candidate_line(c: CandidateExplanation, weighted: bool = True) -> str:
    """``weighted``: whether feedback weighting applied (the org's ``feedback_weighting_disabled`` off); when
    it did not, the weight is said beside the arithmetic, not in it (a trial read "final 0.814 = relevance
    0.814 x weight 0.250")."""
    s = c.scores
    lent = "".join(
        f" + {name} {value:.3f}"
        for name, value in (("neighbour", s.neighbourhood), ("answer type", s.answer_type))
        if value
    )
    if c.source == "sibling":
        # Episode expansion scored it: alpha x the final of the memory that brought it x min(1, weight) x
        # attribution (retrieval.stages.expansion), in place of relevance x weight (a trial read "relevance
        # 0.000 x weight 1.000 + neighbour 0.170" as a final of 0.594 and could not see where it came from).
        inherited = s.final - s.neighbourhood - s.answer_type
        own = f"; its own relevance {s.relevance:.3f}" if s.relevance else ""
        attribution = f" x attribution {s.attribution:.3f}" if s.attribution != 1.0 else ""
        weight = f" x min(1, weight {s.feedback_weight:.3f})" if weighted else ""
        score = (
            f"final {s.final:.3f} = {inherited:.3f} from its episode's {c.brought_by} (alpha x that memory's "
            f"final{weight}{attribution}{own}){lent}"
        )
    else:
        score = f"relevance {s.relevance:.3f}"
        if s.corroboration_boost:  # (relevance + boost) x decay x weight: the sum is what is multiplied
            score = f"({score} + corroboration {s.corroboration_boost:.3f})"
        score = f"final {s.final:.3f} = {score}"
        if s.decay != 1.0:
            score += f" x decay {s.decay:.3f}"
        score += f" x weight {s.feedback_weight:.3f}{lent}" if weighted else lent
    if not weighted and s.feedback_weight != 1.0:
        score += f" (its weight here, {s.feedback_weight:.3f}, not applied: feedback weighting is off)"
    if c.rank_delta:
        score += f" (feedback moved it {'up' if c.rank_delta > 0 else 'down'} {abs(c.rank_delta)})"
    matched = (
        f" · matches the query at {s.floor:.3f}" if s.floor is not None and c.source != "sibling" else ""
    )
    disputed = f" · DISPUTED by {', '.join(c.contradicted_by)}" if c.contradicted_by else ""
    line = f"[{c.rank + 1}] {c.id} · {score}{matched} · {c.reason}{disputed} · {c.preview!r}"
    if c.status_now:  # changed since the recall: what an agent would act on is no longer this memory
        replaced = c.replaced_by_now
        line += f"\n    now {c.status_now}" + (
            f": replaced by {replaced.id} ({replaced.preview!r}; {replaced.action}, {replaced.resolver})"
            if replaced
            else ""
        )
    moves = [
        f"{m.session_id} {m.role} (closeness {m.closeness:.2f}): {m.weight_before:.3f} -> {m.weight_after:.3f}"
        for m in c.feedback.moves
    ]
    if moves:
        line += "\n    reports: " + "; ".join(moves)
    if c.feedback.far:  # reported on, for other tasks: why they did not move it here
        far, apart = c.feedback.far, c.feedback.set_apart
        why = []
        if apart:
            why.append(
                f"{counted(apart, 'report')} naming it for a close task set apart from this one by a word "
                "that a memory matching this query as well says"
            )
        if far > apart:
            why.append(f"{counted(far - apart, 'report')} about tasks too far from this query")
        line += (
            f"\n    {'; '.join(why)}: not counted here "
            f"(they moved only its global weight, {s.global_weight:.3f})"
        )
    return line
