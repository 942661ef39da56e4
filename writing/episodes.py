"""A memory's episode as its search text quotes it: the turn before it (``retrieval.text.searchable_text``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from storage.records import Audience, MemoryRecord, View, audience_of

if TYPE_CHECKING:
    from storage.store import MemoryStore


@dataclass(frozen=True)
class Quote:
    """The memory before a new one in its episode, as its search text quotes it: the content, and the stored
    memory it is of (None: the batch's previous record)."""

    content: str
    of: str | None = None


def preceding_contents(store: MemoryStore, records: Sequence[MemoryRecord]) -> dict[str, Quote]:
    """For each record in an episode, the content of the memory just before it in that episode and
    read by the same people (its search text holds that content, which must not reach other readers):
    the previous such record of the batch, or for the first the latest such stored member not newer
    than it. Record id -> that content (and the stored memory it is of, for the insert to check that
    no purge took it meanwhile)."""
    preceding: dict[str, Quote] = {}
    first: dict[tuple[str, Audience], MemoryRecord] = {}
    last: dict[tuple[str, Audience], str] = {}
    for record in records:
        if record.episode_id is None:
            continue
        key = (record.episode_id, audience_of(record))
        if key in last:
            preceding[record.id] = Quote(last[key])
        else:
            first[key] = record
        last[key] = record.content
    if not first:
        return preceding
    scope = records[0].scope
    batch = {record.id for record in records}
    by_audience: dict[Audience, dict[str, MemoryRecord]] = {}  # audience -> episode -> its first record
    for (episode_id, audience), record in first.items():
        by_audience.setdefault(audience, {})[episode_id] = record
    before: dict[str, str] = {}  # record id -> id of the stored memory before it
    for audience, firsts in by_audience.items():
        stubs = store.episode_member_stubs(View(scope, with_org=False, audience=audience), list(firsts))
        for episode_id, record in firsts.items():
            earlier = [
                s
                for s in stubs
                if s.episode_id == episode_id and s.id not in batch and s.created_at <= record.created_at
            ]
            if earlier:
                before[record.id] = max(earlier, key=lambda s: (s.created_at, s.id)).id
    if before:
        found = store.get_memories(list(set(before.values())), scope)
        preceding |= {rid: Quote(found[mid].content, mid) for rid, mid in before.items() if mid in found}
    return preceding
