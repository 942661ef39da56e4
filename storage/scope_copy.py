"""One scope's in-process copy (``storage.scope_cache`` keeps them current): its records, a matrix of
their vectors and the masks a vector search needs, its episodes, and a BM25 index when the cache has an
analyzer."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from storage.lexical_index import LexicalIndex
from storage.records import Audience, EpisodeRecord, MemoryRecord, Viewer, audience_of

Row = tuple[MemoryRecord, "np.ndarray | None", "str | None"]  # record, vector, search text


@dataclass
class ScopeCopy:
    """Every memory of one scope (any status), with a growable matrix of their vectors."""

    dimension: int
    records: dict[str, MemoryRecord] = field(default_factory=dict)
    row_of: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    vectors: np.ndarray = field(init=False)
    has_vector: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    active: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    embedder_code: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    expires: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))  # epoch s, inf
    embedders: dict[str, int] = field(default_factory=dict)
    kind_code: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    kinds: dict[str, int] = field(default_factory=dict)
    # Who may read each row: -1 for a shared memory, else the code of its private audience in
    # ``audiences``, so that a viewer's rows (or one audience's) are one vectorised test.
    audience_code: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    audiences: dict[Audience, int] = field(default_factory=dict)
    episodes: dict[str, set[str]] = field(default_factory=dict)  # episode id -> member ids (any status)
    lexical: LexicalIndex | None = None  # BM25 over the search text, when the cache has an analyzer
    # The scope's episode records. An episode is created, or re-titled, only in the commit before one of
    # its memories is written or purged, so a memory of an unknown episode, or an episode-kind memory,
    # marks its episode stale, and a stale one is read again when asked for (mark counters: a read
    # clears only the marks it saw).
    episode_records: dict[str, EpisodeRecord] = field(default_factory=dict)
    stale_episodes: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.vectors = np.zeros((0, self.dimension), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.ids)

    def put(self, record: MemoryRecord, vector: np.ndarray | None, text: str | None = None) -> None:
        """Add or replace ``record`` (``text``: its search text; None keeps the indexed one)."""
        row = self.row_of.get(record.id)
        if row is None:
            row = len(self.ids)
            self._grow(row + 1)
            self.ids.append(record.id)
            self.row_of[record.id] = row
        previous = self.records.get(record.id)
        if previous is not None and previous.episode_id and previous.episode_id != record.episode_id:
            self.episodes.get(previous.episode_id, set()).discard(record.id)
        if record.episode_id:
            self.episodes.setdefault(record.episode_id, set()).add(record.id)
            if record.kind == "episode" or record.episode_id not in self.episode_records:
                self.stale_episodes[record.episode_id] = self.stale_episodes.get(record.episode_id, 0) + 1
        self.records[record.id] = record
        if vector is not None and len(vector) == self.dimension:
            self.vectors[row] = vector
            self.has_vector[row] = True
        else:
            self.vectors[row] = 0.0
            self.has_vector[row] = False
        self.active[row] = record.status == "active"
        self.embedder_code[row] = self.embedders.setdefault(record.embedder, len(self.embedders))
        self.kind_code[row] = self.kinds.setdefault(record.kind, len(self.kinds))
        audience = audience_of(record)
        self.audience_code[row] = (
            self.audiences.setdefault(audience, len(self.audiences)) if audience.private else -1
        )
        self.expires[row] = record.expires_at.timestamp() if record.expires_at is not None else np.inf
        if self.lexical is not None and text is not None:
            self.lexical.set(row, text)

    def _grow(self, rows: int) -> None:
        capacity = self.vectors.shape[0]
        if rows <= capacity:
            return
        new_capacity = max(rows, capacity * 2, 64)

        def grown(array: np.ndarray, fill: Any) -> np.ndarray:
            bigger = np.full((new_capacity, *array.shape[1:]), fill, dtype=array.dtype)
            bigger[: len(array)] = array
            return bigger

        self.vectors = grown(self.vectors, 0.0)
        self.has_vector = grown(self.has_vector, False)
        self.active = grown(self.active, False)
        self.embedder_code = grown(self.embedder_code, -1)
        self.kind_code = grown(self.kind_code, -1)
        self.audience_code = grown(self.audience_code, -1)
        self.expires = grown(self.expires, np.inf)

    def _eligible(
        self,
        count: int,
        now: datetime,
        kinds: Sequence[str] | None,
        keep: Callable[[MemoryRecord], bool] | None,
        viewer: Viewer | None = None,
        audience: Audience | None = None,
    ) -> np.ndarray:
        """Rows that are active, unexpired, of one of ``kinds`` (if given), that ``viewer`` may read (if
        given), of ``audience`` (if given) and that pass ``keep``."""
        mask = self.active[:count] & (self.expires[:count] > now.timestamp())
        readers = self.audience_code[:count]
        if viewer is not None:
            own = [self.audiences[key] for key in viewer.own_audiences if key in self.audiences]
            mask &= (readers == -1) | _one_of(readers, own)
        if audience is not None:  # -2: an audience with no memory here
            mask &= readers == (self.audiences.get(audience, -2) if audience.private else -1)
        if kinds:
            codes = [self.kinds[kind] for kind in kinds if kind in self.kinds]
            mask &= _one_of(self.kind_code[:count], codes)
        if keep is not None:
            mask &= np.asarray([keep(self.records[memory_id]) for memory_id in self.ids], dtype=bool)
        return mask

    def best_matching(
        self,
        text: str,
        *,
        limit: int,
        now: datetime,
        kinds: Sequence[str] | None = None,
        keep: Callable[[MemoryRecord], bool] | None = None,
        viewer: Viewer | None = None,
        audience: Audience | None = None,
    ) -> list[tuple[MemoryRecord, float, np.ndarray | None]]:
        """Active, unexpired memories (of ``kinds``, that ``viewer`` may read, passing ``keep``) by BM25 over
        their search text."""
        count = len(self.ids)
        if self.lexical is None or count == 0:
            return []
        found = self.lexical.search(text, self._eligible(count, now, kinds, keep, viewer, audience), limit)
        return [
            (self.records[self.ids[row]], score, self.vectors[row].copy() if self.has_vector[row] else None)
            for row, score in found
        ]

    def fulltext_ceiling(self, text: str) -> float | None:
        """What a full match of ``text`` would score here (``LexicalIndex.ceiling``); None without an index."""
        return self.lexical.ceiling(text) if self.lexical is not None else None

    def nearest(
        self,
        vector: np.ndarray,
        *,
        embedder: str,
        limit: int,
        now: datetime,
        kinds: Sequence[str] | None = None,
        keep: Callable[[MemoryRecord], bool] | None = None,
        viewer: Viewer | None = None,
        audience: Audience | None = None,
    ) -> list[tuple[MemoryRecord, float, np.ndarray]]:
        """Active, unexpired memories embedded by ``embedder``, of one of ``kinds`` (if given), that
        ``viewer`` may read (if given) and passing ``keep``, by cosine similarity."""
        code = self.embedders.get(embedder)
        count = len(self.ids)
        if code is None or count == 0 or limit <= 0:
            return []
        mask = (
            self._eligible(count, now, kinds, keep, viewer, audience)
            & self.has_vector[:count]
            & (self.embedder_code[:count] == code)
        )
        eligible = int(mask.sum())
        if eligible == 0:
            return []
        # One product over the whole matrix (no copy of the eligible rows), then the ineligible set aside.
        scores = np.where(mask, self.vectors[:count] @ np.asarray(vector, dtype=np.float32), -np.inf)
        take = min(limit, eligible)
        best = np.argpartition(-scores, take - 1)[:take] if take < count else np.arange(count)
        best = best[np.isfinite(scores[best])]
        best = best[np.lexsort((best, -scores[best]))]
        return [(self.records[self.ids[row]], float(scores[row]), self.vectors[row].copy()) for row in best]

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

    def vector_of(self, memory_id: str) -> np.ndarray | None:
        row = self.row_of.get(memory_id)
        return self.vectors[row].copy() if row is not None and self.has_vector[row] else None


def by_id(copy: ScopeCopy, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]:
    """The records of these ids that the copy has (an id it lacks does not exist in the scope)."""
    return {i: copy.records[i] for i in memory_ids if i in copy.records}


def episode_members(copy: ScopeCopy, episode_ids: Sequence[str]) -> list[MemoryRecord]:
    """The active members of these episodes."""
    members = (copy.records[i] for e in dict.fromkeys(episode_ids) for i in copy.episodes.get(e, ()))
    return [record for record in members if record.status == "active"]


def _one_of(values: np.ndarray, codes: Sequence[int]) -> np.ndarray:
    """``values`` equal to any of ``codes``, a handful at most (a viewer's audiences, a search's kinds):
    one comparison each, several times faster than ``np.isin`` on so few."""
    mask = np.zeros(len(values), dtype=bool)
    for code in codes:
        mask |= values == code
    return mask
