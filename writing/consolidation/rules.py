"""Deterministic consolidation rules (pure): token Jaccard, what each protection tier allows, and the
near-exact restatement rule (newest survives)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from retrieval.stages.corroboration import UnionFind
from retrieval.text import negated, set_jaccard, term_set
from storage.records import MemoryRecord

__all__ = ["set_jaccard", "term_set"]  # shared with assembly's near-duplicate folding (retrieval.text)


def token_jaccard(left: str, right: str) -> float:
    """Jaccard over stemmed content words (1.0 for two texts with no content words)."""
    return set_jaccard(term_set(left), term_set(right))


def may_be_superseded(memory: MemoryRecord, *, by_revision: bool) -> bool:
    """immutable: never; protected: only by an explicit revision; standard and ephemeral: yes."""
    if memory.protection_tier == "immutable":
        return False
    if memory.protection_tier == "protected":
        return by_revision
    return True


@dataclass(frozen=True)
class Resolution:
    """What to do with a group of similar memories, and who decided."""

    action: Literal["supersede", "keep_both"]
    survivor_id: str | None
    loser_ids: tuple[str, ...]
    resolver: str
    reason: str
    reworded: str | None = None


def newest(memories: Sequence[MemoryRecord]) -> MemoryRecord:
    """The survivor of a group of restatements: the newest, but never an ephemeral memory over a lasting
    one (it would expire and take the fact with it)."""
    return max(memories, key=lambda m: (m.protection_tier != "ephemeral", m.created_at, m.id))


def may_absorb(survivor: MemoryRecord, loser: MemoryRecord, *, by_revision: bool = False) -> bool:
    """Whether ``survivor`` may supersede ``loser``: the loser's tier allows it, and an ephemeral memory
    never replaces a lasting one."""
    if survivor.protection_tier == "ephemeral" and loser.protection_tier != "ephemeral":
        return False
    return may_be_superseded(loser, by_revision=by_revision)


def near_exact_resolutions(members: Sequence[MemoryRecord], threshold: float) -> list[Resolution]:
    """Group members whose texts are near-exact restatements (Jaccard >= ``threshold``, both negating or
    neither: "is not weekly" does not restate "is weekly"); in each group the newest survives and absorbs the rest it
    may; every other pair is kept as genuinely distinct."""
    sets = UnionFind()
    terms = {member.id: term_set(member.content) for member in members}
    negates = {member.id: negated(member.content) for member in members}
    for member in members:
        sets.add(member.id)
    for index, left in enumerate(members):
        for right in members[index + 1 :]:
            if (
                negates[left.id] == negates[right.id]
                and set_jaccard(terms[left.id], terms[right.id]) >= threshold
            ):
                sets.union(left.id, right.id)
    by_id = {member.id: member for member in members}
    resolutions = []
    groups = list(sets.groups().values())
    for ids in groups:
        group = [by_id[i] for i in ids]
        if len(group) < 2:
            continue
        survivor = newest(group)
        losers = tuple(sorted(m.id for m in group if m.id != survivor.id and may_absorb(survivor, m)))
        if losers:
            resolutions.append(
                Resolution(
                    "supersede",
                    survivor.id,
                    losers,
                    "rules:near-exact",
                    f"restates it (token Jaccard >= {threshold})",
                )
            )
    if len(groups) > 1:
        representatives = tuple(sorted(newest([by_id[i] for i in ids]).id for ids in groups))
        resolutions.append(
            Resolution(
                "keep_both", None, representatives, "rules:distinct", f"token Jaccard below {threshold}"
            )
        )
    return resolutions


def collapse_batch(
    records: Sequence[MemoryRecord], threshold: float, *, across_agents: bool = False
) -> list[tuple[MemoryRecord, MemoryRecord]]:
    """Intra-batch near-duplicates: (loser, survivor) pairs, the last written of each group surviving.
    Tiers are respected (``may_absorb``), and items of different agents collapse only ``across_agents``
    (otherwise they are corroboration)."""
    pairs = []
    survivors: list[MemoryRecord] = []
    terms = {record.id: term_set(record.content) for record in records}
    negates = {record.id: negated(record.content) for record in records}
    for record in reversed(records):  # later items win
        match = next(
            (
                kept
                for kept in survivors
                if kept.kind == record.kind
                and (across_agents or kept.agent_id == record.agent_id)
                and may_absorb(kept, record)
                and negates[kept.id] == negates[record.id]
                and set_jaccard(terms[kept.id], terms[record.id]) >= threshold
            ),
            None,
        )
        if match is None:
            survivors.append(record)
        else:
            pairs.append((record, match))
    return list(reversed(pairs))
