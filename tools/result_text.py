"""What an agent reads of forget, report_outcome and lineage: a few plain lines (a new user's trial read
their results as raw JSON, while the other tools answer in words). The structured content carries every
field; these say what happened and what to do next."""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval.text import counted, listed

if TYPE_CHECKING:
    from tools.forget import ForgetOutput
    from tools.lineage import LineageOutput
    from tools.memory_views import EventView, MemoryBrief
    from tools.report_outcome import ReportOutcomeOutput

SHOWN = 80  # characters of a memory's preview on a line
LISTED_MOVES = 10  # weights a report's text lists: the memories named, then the context's largest shares


def _brief(memory: MemoryBrief) -> str:
    preview = memory.preview if len(memory.preview) <= SHOWN else memory.preview[: SHOWN - 1] + "…"
    return f"{memory.id} ({memory.status}, {memory.agent_id}, {memory.created_at[:10]}): {preview!r}"


def _event(event: EventView) -> str:
    related = f" -> {event.related_id}" if event.related_id else ""
    return f"{event.at[:19]} {event.action} {event.memory_id}{related} by {event.by_agent} ({event.resolver}; {event.reason})"


def forget_text(out: ForgetOutput) -> str:
    verb = {"retract": "retracted", "purge": "purged"}.get(out.mode, out.mode)
    count = len(out.forgotten)
    if out.dry_run and count:
        head = f"Dry run: {counted(count, 'memory')} would be {verb}; nothing was changed."
    elif out.dry_run:  # the note says why nothing would go (a trial read "0 memories would be retracted")
        head = f"Dry run: nothing would be {verb}."
    elif count:
        head = f"{counted(count, 'memory')} {verb}."
    else:
        head = f"Nothing was {verb}."
    note = out.note
    if not count and not out.dry_run and note and note.startswith("nothing was forgotten"):
        head, note = f"{note[0].upper()}{note[1:]}", None  # said once (a trial read it twice)
    relevance = {match.id: match.relevance for match in out.matches}
    lines = [head]
    for memory in out.forgotten:
        close = f" [relevance {relevance[memory.id]:.2f}]" if memory.id in relevance else ""
        lines.append(f"- {_brief(memory)}{close}")
    if note:
        lines.append(note)
    if out.dry_run and count and "dry_run=false" not in (note or ""):  # said once (a trial read it twice)
        lines.append("Call forget again with dry_run=false to do it.")
    return "\n".join(lines)


def outcome_text(out: ReportOutcomeOutput) -> str:
    # (the session named once: the detail's own "session <id> reported:" is the head's; a trial counted 900
    # characters of a report's text that every report repeats)
    detail = out.detail.removeprefix(f"session {out.session_id} reported: ")
    joint = ": " if detail != out.detail else ". "
    lines = [f"Session {out.session_id}: {out.outcome} (score {out.score:g}), {out.status}{joint}{detail}"]
    moved = [u for u in out.updated if abs(u.weight_after - u.weight_before) > 1e-9]
    # The memories the agent named, then the context's largest moves: a trial's report after a recall of
    # top_k 100 read back 101 lines, one per memory of the context (the structured content lists them all).
    named = [u for u in moved if u.role in ("helpful", "misleading")]
    rest = sorted((u for u in moved if u.role not in ("helpful", "misleading")), key=lambda u: -u.share)
    shown = named + rest[: max(0, LISTED_MOVES - len(named))]
    if moved:
        # (each a step, or a share of one, of its moving average over every report: the logged baseline)
        lines.append(
            "Global weights (the logged baseline; explain_ranking shows the weight a recall applies):"
        )
        lines += [
            f"- {u.id} ({u.role}, share {u.share:g}): {u.weight_before:.3f} -> {u.weight_after:.3f}"
            for u in shown
        ]
    if len(shown) < len(moved):
        left = [u for u in moved if u not in shown]
        lines.append(
            f"{counted(len(left), 'more memory')} of the contexts moved by smaller shares (at most "
            f"{max(u.share for u in left):g}): the structured content's `updated` lists every one."
        )
    if len(moved) < len(out.updated):
        still = len(out.updated) - len(moved)
        # (after a list of weights "more"; alone, what was credited: a replaced report often moves none)
        lines.append(
            f"{counted(still, 'more memory')} credited without a change of {'its' if still == 1 else 'their'} "
            "global weight."
            if moved
            else f"{counted(still, 'memory')} credited; {'its' if still == 1 else 'none of their'} global "
            f"weight{'' if still == 1 else 's'} {'did not change' if still == 1 else 'changed'}."
        )
    misled = misleading_advice(out, "remember the right text with replaces=<its id>, or forget it")
    return "\n".join([*lines, *([misled] if misled else [])])


def misleading_advice(out: ReportOutcomeOutput, fix: str) -> str | None:
    """What to do about the memories a report named misleading: ranking lowers them for tasks close to this
    one only (a trial: named misleading three times, one still came first for a question put otherwise)."""
    misled = [u.id for u in out.updated if u.role == "misleading"]
    if not misled:
        return None
    return (
        f"Named misleading: {listed(misled)}. Recall ranks them lower for tasks like this one; other tasks "
        f"still read them. If what one says is wrong, {fix}."
    )


def lineage_text(out: LineageOutput) -> str:
    lines = [f"Memory {_brief(out.memory)}"]
    if out.current.id != out.memory.id:
        # The end of its chain may itself be out of the active set (the note says so): it stands for nothing
        # then (a trial read "stands in its place" beside the note's "nothing stands in its place").
        stands = out.current.status == "active"
        lines.append(
            f"{'Stands in its place now' if stands else 'Last to replace it'}: {_brief(out.current)}"
        )
    for title, steps in (("Replaced by, in order:", out.replaced_by_chain), ("It replaced:", out.replaces)):
        if steps:
            lines.append(title)
            lines += [f"- {_brief(step.memory)} [{_event(step.how)}]" for step in steps]
    if out.versions:
        lines.append("Earlier versions, newest first:")
        lines += [f"- {_brief(version)}" for version in out.versions]
    if out.events:
        lines.append("Events, oldest first:")
        lines += [f"- {_event(event)}" for event in out.events]
    if out.note:
        lines.append(out.note)
    return "\n".join(lines)
