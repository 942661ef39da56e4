"""What an agent (or a person at the command line) reads of a remember: one line for the memory, then
what the write changed, if anything. The structured content carries every field; the text leaves out the
empty ones (a new user's trial counted 650 characters of JSON a remember, mostly nulls, more than a
session's recall contexts)."""

from __future__ import annotations

from typing import Any

from tools.remember import RememberOutput
from tools.remember_many import RememberManyOutput


def readers(memory: Any) -> str:
    """Where a memory is kept and who reads it, in words."""
    if memory.visibility == "org":
        return f"for all of org {memory.org_id}"
    where = f"in {memory.org_id}/{memory.project_id}"
    return where if memory.visibility == "project" else f"{where}, read by its {memory.visibility} only"


_SAID = {"stored": "stored", "updated": "updated"}
# An org-wide memory's pairs with projects' memories are kept in those projects (a review: drift in the
# writer's own project did not list them).
_DRIFT_OF_THE_SHELF = " (drift lists the open pairs: those with a project's memory, that project's drift)"


def text_of(result: RememberOutput) -> str:
    """The memory stored (or found stored), and what consolidation or the update changed."""
    lines = [
        f"{_SAID.get(result.status, 'already stored')} {result.id} "
        f"({result.kind}, {result.protection_tier}) {readers(result)}"
        + (f", expires {result.expires_at}" if result.expires_at else "")
    ]
    if result.note:
        lines.append(result.note)
    found = result.consolidation
    if found is not None:
        # An explicit update's note names the memory it superseded: not said twice.
        said = result.note if result.note and result.note.startswith("explicit update: ") else ""
        changes = [
            (label, [i for i in ids if i not in said])
            # Not the similar memories kept beside it as distinct (`kept`, in the structured content): nothing
            # to act on, and most of a batch's text (a trial: 72% of a 200-item batch's 54,000 characters).
            for label, ids in (
                ("superseded", found.superseded),
                ("revised", found.revised),
                ("contradicts", found.contradicts),
            )
        ]
        listed = _DRIFT_OF_THE_SHELF if result.visibility == "org" else " (drift lists the open pairs)"
        for label, ids in changes:
            if ids:
                lines.append(f"{label}: {', '.join(ids)}" + (listed if label == "contradicts" else ""))
        if found.resolver and any(ids for _, ids in changes):
            lines.append(f"decided by {found.resolver}")
        for label, other in (
            ("absorbed into", found.absorbed_into),
            ("reworded into", found.reworded_into),
            ("a new version of", found.version_of),
        ):
            if other:
                lines.append(f"{label} {other}")
        if found.rerank_skipped:
            lines.append(f"rerank skipped: {found.rerank_skipped}")
        if found.model_skipped:
            lines.append(f"language model skipped: {found.model_skipped}")
    if result.redacted:
        lines.append(f"redacted before storing: {result.redacted}")
    return "\n".join(lines)


def batch_text_of(result: RememberManyOutput) -> str:
    """The batch's counts, then each item's text, numbered in the order given."""
    # A collapsed item is stored (superseded, for audit) by the later item it was folded into: said as part
    # of the stored, not beside them (a trial read "4 stored, 1 collapsed" as five items).
    folded = f" ({result.collapsed} of them folded into a later item)" if result.collapsed else ""
    head = f"{result.stored} stored{folded}, {result.duplicates} already stored"
    # Where they are kept, said once when the same for all (a trial read it on each of 200 lines).
    where = {readers(item) for item in result.results}
    same = where.pop() if len(where) == 1 else None
    if same:
        head += f", {same}"

    def said(item: RememberOutput) -> str:
        text = text_of(item)
        return text.replace(f" {same}", "", 1) if same else text

    items = (
        f"{number}. " + said(item).replace("\n", "\n   ") for number, item in enumerate(result.results, 1)
    )
    return "\n".join([head, *items])
