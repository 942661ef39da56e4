"""A scope copy's episodes (``storage.scope_copy``): the episode records it holds, which of them are stale,
and the active members of episodes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from storage.records import EpisodeRecord, MemoryRecord


class _Members(Protocol):
    records: dict[str, MemoryRecord]
    episodes: dict[str, set[str]]


class EpisodeBook:
    """The episode records of a scope copy. An episode is created, or re-titled, only in the commit before
    one of its memories is written or purged, so a memory of an unknown episode, or an episode-kind memory,
    marks its episode stale (``ScopeCopy.put``), and a stale one is read again when asked for (mark
    counters: a read clears only the marks it saw)."""

    episode_records: dict[str, EpisodeRecord]
    stale_episodes: dict[str, int]  # episode id -> mark
    episodes: dict[str, set[str]]  # episode id -> member ids (any status): the copy's

    def load_episodes(self, episodes: Iterable[EpisodeRecord]) -> None:
        """The scope's episodes, read after its memories (so at least as new): what they cover is fresh."""
        for episode in episodes:
            self.episode_records[episode.id] = episode
            self.stale_episodes.pop(episode.id, None)

    def episodes_for(self, episode_ids: Sequence[str]) -> tuple[dict[str, EpisodeRecord], dict[str, int]]:
        """The known, fresh episodes among ``episode_ids``, and the stale ones (id -> mark) to read again.
        An id neither known nor stale belongs to no memory of the scope."""
        fresh: dict[str, EpisodeRecord] = {}
        stale: dict[str, int] = {}
        for episode_id in dict.fromkeys(episode_ids):
            if episode_id in self.stale_episodes:
                stale[episode_id] = self.stale_episodes[episode_id]
            elif episode_id in self.episode_records:
                fresh[episode_id] = self.episode_records[episode_id]
        return fresh, stale

    def stale_marks(self, limit: int, *, first: Mapping[str, int]) -> dict[str, int]:
        """``first`` (stale episodes a read needs), then other stale episodes of the scope up to ``limit``
        in all, with their marks: what one read of the episodes table brings up to date."""
        marks = dict(first)
        for episode_id, mark in self.stale_episodes.items():
            if len(marks) >= limit:
                break
            marks.setdefault(episode_id, mark)
        return marks

    def episode_known(self, episode_id: str) -> tuple[bool, str | None] | None:
        """(exists, title) as far as the copy can tell: a fresh record, or no memory of the scope in that
        episode (then it was never written with one); None when only the table can say (stale)."""
        if episode_id in self.stale_episodes:
            return None
        record = self.episode_records.get(episode_id)
        if record is not None:
            return True, record.title
        return (False, None) if episode_id not in self.episodes else None

    def refresh_episodes(self, marks: Mapping[str, int], read: Mapping[str, EpisodeRecord]) -> None:
        """Apply episodes read again; a mark set since they were read keeps its episode stale."""
        for episode_id, mark in marks.items():
            if self.stale_episodes.get(episode_id) != mark:
                continue  # marked again since: this read may be older than the change; read next time
            if episode_id in read:
                self.episode_records[episode_id] = read[episode_id]
            del self.stale_episodes[episode_id]


def episode_members(copy: _Members, episode_ids: Sequence[str]) -> list[MemoryRecord]:
    """The active members of these episodes."""
    members = (copy.records[i] for e in dict.fromkeys(episode_ids) for i in copy.episodes.get(e, ()))
    return [record for record in members if record.status == "active"]
