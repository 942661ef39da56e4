"""One scope's in-process copy (``storage.scope_cache`` keeps them current): its records, a matrix of
their vectors and the masks a vector search needs, its episodes (with each memory's neighbours in its
episode, for context vectors), and a BM25 index when the cache has an analyzer."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from storage.lexical_index import LexicalIndex
from storage.products import matrix_product, row_dots
from storage.records import Audience, EpisodeRecord, MemoryRecord, Viewer, audience_of
from storage.scope_episodes import EpisodeBook
from storage.scope_masks import KeptMasks, one_of

# Products primed for a group commit's new memories that may wait for their ``nearest`` (``ScopeCopy.prime``):
# each is taken by the next write's consolidation; one never taken (a write whose consolidation failed)
# must not hold a column of the matrix's height for good.
MAX_PRIMED = 64

Row = tuple[MemoryRecord, "np.ndarray | None", "str | None"]  # record, vector, search text


@dataclass
class ScopeCopy(EpisodeBook):
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
    written: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))  # created_at, epoch s
    embedders: dict[str, int] = field(default_factory=dict)
    kind_code: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    kinds: dict[str, int] = field(default_factory=dict)
    # Who may read each row: -1 for a shared memory, else the code of its private audience in
    # ``audiences``, so that a viewer's rows (or one audience's) are one vectorised test.
    audience_code: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    audiences: dict[Audience, int] = field(default_factory=dict)
    episodes: dict[str, set[str]] = field(default_factory=dict)  # episode id -> member ids (any status)
    replaced: dict[str, set[str]] = field(default_factory=dict)  # memory id -> ids of those it replaced
    lexical: LexicalIndex | None = None  # BM25 over the search text, when the cache has an analyzer
    # The scope's episode records, fresh or stale (``EpisodeBook``).
    episode_records: dict[str, EpisodeRecord] = field(default_factory=dict)
    stale_episodes: dict[str, int] = field(default_factory=dict)
    # A memory's context vector is its vector plus those of its neighbours right before and after it in
    # its chain: the memories of its episode, in time order, that are active and have a vector of the same
    # embedder and the same readers (shared, or one private audience). Every reader of a memory so reads
    # its context whole, and a private memory never stands between shared ones (nor changes what others
    # see ranked). Episode summaries (kind "episode") are in no chain. A query's context cosines follow
    # from its plain cosines without a second matrix: context(i) = (s_i + s_prev + s_next) /
    # |v_i + v_prev + v_next|, the norm from the dot products kept here (``_context_cosines``).
    prev_row: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))  # -1: none
    next_row: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    self_dot: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))  # v_i . v_i
    dot_prev: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))  # v_i . v_prev
    dot_next: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))  # v_i . v_next
    dot_around: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))  # v_prev . v_next
    chain_of: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))  # -1: in none
    chain_time: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))  # epoch s
    # A chain's code by (episode, readers, embedder); each chain's rows in time order.
    _chain_codes: dict[tuple[str, int, int], int] = field(default_factory=dict)
    _chains: dict[int, list[int]] = field(default_factory=dict)
    # The products of the matrix with the vectors of a group commit's new memories, made at once
    # (``prime``) and taken by the ``nearest`` each of them asks next (its consolidation's neighbours): one
    # pass over the matrix for the batch instead of one a write. By the vector's bytes: (rows then, the
    # rewrites then, the cosines). A product made before a row's vector was replaced is not used.
    _primed: dict[bytes, tuple[int, int, np.ndarray]] = field(default_factory=dict)
    _rewrites: int = 0  # vectors of rows already in the copy replaced by another (``put``)
    # Rows with a vector, per embedder code: when one embedder's count is every row, no search by it skips
    # a row (``without_vector_of`` answers without a pass over the masks, on every recall).
    _embedded_rows: dict[int, int] = field(default_factory=dict)
    _masks: KeptMasks = field(default_factory=KeptMasks)  # searches' masks until a row changes
    primed_taken: int = 0  # products ``nearest`` took from ``prime`` (tests read it)

    def __post_init__(self) -> None:
        self.vectors = np.zeros((0, self.dimension), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def primed_waiting(self) -> int:
        """Products primed (``prime``) that no ``nearest`` has taken yet."""
        return len(self._primed)

    def put(
        self, record: MemoryRecord, vector: np.ndarray | None, text: str | None = None, *, link: bool = True
    ) -> None:
        """Add or replace ``record`` (``text``: its search text; None keeps the indexed one). ``link``: mend
        its chain now (``load`` links every row at once instead)."""
        self._masks.clear()
        row = self.row_of.get(record.id)
        if row is None:
            row = len(self.ids)
            self._grow(row + 1)
            self.ids.append(record.id)
            self.row_of[record.id] = row
        elif self._primed and (vector is None or not np.array_equal(self.vectors[row], vector)):
            self._rewrites += 1  # a product primed before now is stale for this row
        previous = self.records.get(record.id)
        if previous is not None and previous.episode_id and previous.episode_id != record.episode_id:
            self.episodes.get(previous.episode_id, set()).discard(record.id)
        if previous is not None and previous.replaced_by and previous.replaced_by != record.replaced_by:
            self.replaced.get(previous.replaced_by, set()).discard(record.id)
        if record.replaced_by:
            self.replaced.setdefault(record.replaced_by, set()).add(record.id)
        if record.episode_id:
            self.episodes.setdefault(record.episode_id, set()).add(record.id)
            if record.kind == "episode" or record.episode_id not in self.episode_records:
                self.stale_episodes[record.episode_id] = self.stale_episodes.get(record.episode_id, 0) + 1
        self.records[record.id] = record
        had = int(self.embedder_code[row]) if self.has_vector[row] else None  # the vector as it was
        code = self.embedders.setdefault(record.embedder, len(self.embedders))
        if vector is not None and len(vector) == self.dimension:
            self.vectors[row] = vector
            self.has_vector[row] = True
        else:
            self.vectors[row] = 0.0
            self.has_vector[row] = False
        if had is not None:
            self._embedded_rows[had] -= 1
        if self.has_vector[row]:
            self._embedded_rows[code] = self._embedded_rows.get(code, 0) + 1
        self.active[row] = record.status == "active"
        self.written[row] = record.created_at.timestamp()
        self.embedder_code[row] = code
        self.kind_code[row] = self.kinds.setdefault(record.kind, len(self.kinds))
        audience = audience_of(record)
        self.audience_code[row] = (
            self.audiences.setdefault(audience, len(self.audiences)) if audience.private else -1
        )
        self.expires[row] = record.expires_at.timestamp() if record.expires_at is not None else np.inf
        if self.lexical is not None and text is not None:
            self.lexical.set(row, text)
        if link:
            self._relink(row, record)

    def load(self, rows: Iterable[Row]) -> None:
        """Put many rows (a copy's first read), then link every chain at once: a bisection and a few dot
        products per row would double the time a copy takes to build, under the cache's write lock."""
        for record, vector, text in rows:
            self.put(record, vector, text, link=False)
        self._link_all()

    def _chain_key(self, row: int, record: MemoryRecord) -> tuple[str, int, int] | None:
        if (
            not record.episode_id
            or record.kind == "episode"
            or not (self.active[row] and self.has_vector[row])
        ):
            return None
        return record.episode_id, int(self.audience_code[row]), int(self.embedder_code[row])

    def _in_time_order(self, row: int) -> tuple[float, int]:
        return float(self.chain_time[row]), row

    def _relink(self, row: int, record: MemoryRecord) -> None:
        """Take ``row`` out of its chain and put it back where it now belongs (if it belongs to one),
        mending its old and new neighbours' links and dot products."""
        touched = {row}
        old = int(self.chain_of[row])
        if old >= 0:
            chain = self._chains[old]
            at = bisect_left(chain, self._in_time_order(row), key=self._in_time_order)
            del chain[at]
            before = chain[at - 1] if at > 0 else -1
            after = chain[at] if at < len(chain) else -1
            self._join(before, after)
            touched |= {before, after}
            if not chain:
                del self._chains[old]
        self.chain_of[row] = -1
        self.prev_row[row] = self.next_row[row] = -1
        key = self._chain_key(row, record)
        if key is not None:
            code = self._chain_codes.setdefault(key, len(self._chain_codes))
            self.chain_of[row] = code
            self.chain_time[row] = record.created_at.timestamp()  # at one moment: in the order written
            chain = self._chains.setdefault(code, [])
            at = bisect_left(chain, self._in_time_order(row), key=self._in_time_order)
            chain.insert(at, row)
            before = chain[at - 1] if at > 0 else -1
            after = chain[at + 1] if at + 1 < len(chain) else -1
            self._join(before, row)
            self._join(row, after)
            touched |= {before, after}
        vector = self.vectors[row]
        self.self_dot[row] = float(vector @ vector)
        for mended in touched - {-1}:
            self._mend_dots(mended)

    def _link_all(self) -> None:
        """Every row's chain, neighbours and dot products, from scratch (vectorised)."""
        count = len(self.ids)
        self._chain_codes.clear()
        self._chains.clear()
        codes = np.full(count, -1, dtype=np.int32)
        times = np.zeros(count, dtype=np.float64)
        for row, memory_id in enumerate(self.ids):
            record = self.records[memory_id]
            key = self._chain_key(row, record)
            if key is not None:
                codes[row] = self._chain_codes.setdefault(key, len(self._chain_codes))
                times[row] = record.created_at.timestamp()
        linked = np.flatnonzero(codes >= 0)
        order = linked[np.lexsort((linked, times[linked], codes[linked]))]
        same = codes[order[1:]] == codes[order[:-1]]
        before = np.full(count, -1, dtype=np.int32)
        after = np.full(count, -1, dtype=np.int32)
        after[order[:-1][same]] = order[1:][same]
        before[order[1:][same]] = order[:-1][same]
        self.chain_of[:count], self.chain_time[:count] = codes, times
        self.prev_row[:count], self.next_row[:count] = before, after
        self.self_dot[:count] = row_dots(self.vectors, np.arange(count), np.arange(count))
        self.dot_prev[:count] = row_dots(self.vectors, np.arange(count), before)
        self.dot_next[:count] = row_dots(self.vectors, np.arange(count), after)
        self.dot_around[:count] = row_dots(self.vectors, before, after)
        for group in np.split(order, np.flatnonzero(~same) + 1):
            if len(group):
                self._chains[int(codes[group[0]])] = group.tolist()

    def _join(self, before: int, after: int) -> None:
        if before >= 0:
            self.next_row[before] = after
        if after >= 0:
            self.prev_row[after] = before

    def _mend_dots(self, row: int) -> None:
        before, after = int(self.prev_row[row]), int(self.next_row[row])
        vector = self.vectors[row]
        self.dot_prev[row] = float(vector @ self.vectors[before]) if before >= 0 else 0.0
        self.dot_next[row] = float(vector @ self.vectors[after]) if after >= 0 else 0.0
        both = before >= 0 and after >= 0
        self.dot_around[row] = float(self.vectors[before] @ self.vectors[after]) if both else 0.0

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
        self.written = grown(self.written, 0.0)
        self.prev_row = grown(self.prev_row, -1)
        self.next_row = grown(self.next_row, -1)
        self.self_dot = grown(self.self_dot, 0.0)
        self.dot_prev = grown(self.dot_prev, 0.0)
        self.dot_next = grown(self.dot_next, 0.0)
        self.dot_around = grown(self.dot_around, 0.0)
        self.chain_of = grown(self.chain_of, -1)
        self.chain_time = grown(self.chain_time, 0.0)

    def _eligible(
        self,
        count: int,
        now: datetime,
        kinds: Sequence[str] | None,
        keep: Callable[[MemoryRecord], bool] | None,
        viewer: Viewer | None = None,
        audience: Audience | None = None,
        exclude: Collection[str] = (),
        stored: bool = False,
    ) -> np.ndarray:
        """Rows that are active, unexpired (with ``stored``: whose text is stored, ``_readable``), of one of
        ``kinds`` (if given), that ``viewer`` may read (if given), of ``audience`` (if given), that pass
        ``keep`` and are not of ``exclude``."""
        return self._narrowed(self._readable(count, now, viewer, audience, exclude, stored), kinds, keep)

    def _readable(
        self,
        count: int,
        now: datetime,
        viewer: Viewer | None,
        audience: Audience | None,
        exclude: Collection[str] = (),
        stored: bool = False,
    ) -> np.ndarray:
        """Rows that are active, unexpired, that ``viewer`` may read, of ``audience`` (if given) and not of
        ``exclude`` (memory ids: a few, each found by its row). With ``stored`` (a purge's look), every row
        whose text is still stored instead of the active, unexpired ones: retracted, superseded or past
        its expiry too, not purged. Read-only: a caller narrows it into a new mask."""
        own = None if viewer is None else self._own_codes(viewer)
        wanted = None if audience is None else self._audience_code_of(audience)
        if stored:
            purged = (self.records[memory_id].status == "purged" for memory_id in self.ids[:count])
            mask = self._for_readers(~np.fromiter(purged, dtype=bool, count=count), own, wanted)
        else:
            mask = self._readable_now(count, now.timestamp(), own, wanted)
        rows = [row for row in map(self.row_of.get, exclude) if row is not None and row < count]
        if rows:
            mask = mask.copy()
            mask[rows] = False
        return mask

    def _readable_now(
        self, count: int, at: float, own: tuple[int, ...] | None, wanted: int | None
    ) -> np.ndarray:
        """The rows active and unexpired at ``at`` (epoch seconds) for ``_for_readers(own, wanted)``: from
        ``_masks`` while no row changed and ``at`` falls between the same two expiries, else made and kept."""
        key = ("readable", count, own, wanted)
        kept = self._masks.get(key, at)
        if kept is not None:
            return kept
        expires = self.expires[:count]
        unexpired = expires > at
        mask = self._for_readers(self.active[:count] & unexpired, own, wanted)
        since, until = expires[~unexpired].max(initial=-np.inf), expires[unexpired].min(initial=np.inf)
        return self._masks.keep(key, mask, float(since), float(until))

    def _for_readers(self, mask: np.ndarray, own: tuple[int, ...] | None, wanted: int | None) -> np.ndarray:
        """``mask`` narrowed to what a viewer of audience codes ``own`` may read, of audience code ``wanted``."""
        readers = self.audience_code[: len(mask)]
        if own is not None:
            mask = mask & ((readers == -1) | one_of(readers, own))
        if wanted is not None:
            mask = mask & (readers == wanted)
        return mask

    def _own_codes(self, viewer: Viewer) -> tuple[int, ...]:
        return tuple(self.audiences[key] for key in viewer.own_audiences if key in self.audiences)

    def _audience_code_of(self, audience: Audience) -> int:
        """-1 for the shared memories, -2 for a private audience with no memory here."""
        return self.audiences.get(audience, -2) if audience.private else -1

    def _narrowed(
        self, mask: np.ndarray, kinds: Sequence[str] | None, keep: Callable[[MemoryRecord], bool] | None
    ) -> np.ndarray:
        """The rows of ``mask`` of one of ``kinds`` (if given) that pass ``keep`` (if given). ``keep`` (tags,
        a time window) is Python: it is asked of the rows still in, not of the whole scope."""
        if kinds:
            codes = [self.kinds[kind] for kind in kinds if kind in self.kinds]
            mask = mask & one_of(self.kind_code[: len(mask)], codes)
        if keep is not None:
            mask = mask.copy()
            for row in np.flatnonzero(mask):
                mask[row] = keep(self.records[self.ids[row]])
        return mask

    def _embedded_by(self, count: int, code: int) -> np.ndarray:
        """The first ``count`` rows with a vector from the embedder of ``code`` (what ``nearest`` searches);
        read-only."""
        key = ("embedded", count, code)
        kept = self._masks.get(key)
        if kept is not None:
            return kept
        return self._masks.keep(key, self.has_vector[:count] & (self.embedder_code[:count] == code))

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
        exclude: Collection[str] = (),
        stored: bool = False,
    ) -> list[tuple[MemoryRecord, float, np.ndarray | None]]:
        """Active, unexpired memories (of ``kinds``, ``viewer``'s, passing ``keep``, not ``exclude``d) by BM25,
        ties latest written first (``written``)."""
        count = len(self.ids)
        if self.lexical is None or count == 0:
            return []
        eligible = self._eligible(count, now, kinds, keep, viewer, audience, exclude, stored)
        found = self.lexical.search(text, eligible, limit, written=self.written[:count])
        return [
            (self.records[self.ids[row]], score, self.vectors[row].copy() if self.has_vector[row] else None)
            for row, score in found
        ]

    def fulltext_ceiling(self, text: str) -> float | None:
        """What a full match of ``text`` would score here (``LexicalIndex.ceiling``); None without an index."""
        return self.lexical.ceiling(text) if self.lexical is not None else None

    def without_vector_of(
        self,
        embedder: str,
        *,
        now: datetime,
        kinds: Sequence[str] | None = None,
        keep: Callable[[MemoryRecord], bool] | None = None,
        viewer: Viewer | None = None,
        audience: Audience | None = None,
        exclude: Collection[str] = (),
        stored: bool = False,
    ) -> int:
        """How many of the memories ``nearest`` would look at (the same filters) it skips: no vector of
        ``embedder`` (another model's, the offline fallback's, one waiting to be re-embedded)."""
        count = len(self.ids)
        code = self.embedders.get(embedder)
        if count == 0 or (code is not None and self._embedded_rows.get(code, 0) == count):
            return 0  # every row has a vector of ``embedder``: whatever the filters, none is skipped
        mask = self._readable(count, now, viewer, audience, exclude, stored)
        if code is not None:
            mask = mask & ~self._embedded_by(count, code)
        return int(self._narrowed(mask, kinds, keep).sum())

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
        context_share: float = 0.0,
        exclude: Collection[str] = (),
        stored: bool = False,
    ) -> list[tuple[MemoryRecord, float, np.ndarray, float | None]]:
        """Active, unexpired memories embedded by ``embedder``, of one of ``kinds`` (if given), that ``viewer``
        may read (if given), passing ``keep`` and not of ``exclude``: (record, cosine, vector, context cosine).
        By cosine similarity; with a ``context_share`` c > 0, by ``semantic_score`` with the cosine of the
        memory's context vector (``context_cosines``), which each hit then carries (else None)."""
        code = self.embedders.get(embedder)
        count = len(self.ids)
        if code is None or count == 0 or limit <= 0:
            return []
        mask = self._readable(count, now, viewer, audience, exclude, stored) & self._embedded_by(count, code)
        mask = self._narrowed(mask, kinds, keep)
        eligible = int(mask.sum())
        if eligible == 0:
            return []
        # One product over the whole matrix (no copy of the eligible rows), then the ineligible set aside.
        cosines = self._cosines(np.asarray(vector, dtype=np.float32), count)
        contexts: np.ndarray | None = None
        ranking = cosines
        if context_share > 0.0:
            contexts = self._context_cosines(cosines, now)
            own = np.maximum(cosines, 0.0)  # as storage.records.semantic_score, vectorised
            ranking = (1.0 - context_share) * own + context_share * np.maximum(contexts, own)
        scores = np.where(mask, ranking, -np.inf)
        take = min(limit, eligible)
        best = np.argpartition(-scores, take - 1)[:take] if take < count else np.arange(count)
        best = best[np.isfinite(scores[best])]
        best = best[np.lexsort((best, -scores[best]))]
        return [
            (
                self.records[self.ids[row]],
                float(cosines[row]),
                self.vectors[row].copy(),
                float(contexts[row]) if contexts is not None else None,
            )
            for row in best
        ]

    def prime(self, vectors: Sequence[np.ndarray]) -> None:
        """The matrix's products with ``vectors`` (a group commit's new memories), made in one pass for the
        ``nearest`` each of them asks next. A product not taken is dropped once ``MAX_PRIMED`` wait."""
        count = len(self.ids)
        queries = [np.asarray(v, dtype=np.float32) for v in vectors if len(v) == self.dimension][:MAX_PRIMED]
        if count == 0 or len(queries) < 2:
            return
        products = matrix_product(self.vectors[:count], np.stack(queries).T)
        if len(self._primed) + len(queries) > MAX_PRIMED:
            self._primed.clear()
        for column, query in enumerate(queries):
            self._primed[query.tobytes()] = (count, self._rewrites, np.ascontiguousarray(products[:, column]))

    def _cosines(self, query: np.ndarray, count: int) -> np.ndarray:
        """The first ``count`` rows' cosines with ``query``: primed for it (``prime``), with those added since."""
        primed = self._primed.pop(query.tobytes(), None) if self._primed else None
        if primed is not None:
            rows, rewrites, cosines = primed
            if rewrites == self._rewrites and rows <= count:
                self.primed_taken += 1
                if rows == count:
                    return cosines
                return np.concatenate((cosines, matrix_product(self.vectors[rows:count], query)))
        return matrix_product(self.vectors[:count], query)

    def context_cosines(
        self, vector: np.ndarray, memory_ids: Iterable[str], *, embedder: str, now: datetime
    ) -> dict[str, float]:
        """The cosine of ``vector`` with the context vector of each of ``memory_ids`` held with a vector of
        ``embedder``: its vector plus its chain neighbours' (in no chain, or theirs expired: its own)."""
        code = self.embedders.get(embedder)
        if code is None:
            return {}
        count = len(self.ids)
        rows = [self.row_of[i] for i in memory_ids if i in self.row_of]
        rows = [row for row in rows if self.has_vector[row] and self.embedder_code[row] == code]
        if not rows:
            return {}
        query = np.asarray(vector, dtype=np.float32)
        picked = np.asarray(rows, dtype=np.int64)
        around = np.concatenate([picked, self.prev_row[picked], self.next_row[picked]])
        around = np.unique(around[around >= 0])
        cosines = np.zeros(count, dtype=np.float32)
        cosines[around] = self.vectors[around] @ query
        contexts = self._context_cosines(cosines, now, picked)
        return {self.ids[row]: float(context) for row, context in zip(rows, contexts, strict=True)}

    def _context_cosines(
        self, cosines: np.ndarray, now: datetime, rows: np.ndarray | None = None
    ) -> np.ndarray:
        """The context cosines of ``rows`` (every row when None) from every row's plain cosine with the
        query. A chain holds only active memories of one audience and embedder, so whoever may read a
        memory may read its neighbours: a neighbour lends unless it has expired since it was linked."""
        count = len(cosines)
        lending = self.expires[:count] > now.timestamp()
        picked = slice(0, count) if rows is None else rows
        before, after = self.prev_row[picked], self.next_row[picked]
        # -1 (no neighbour) reads the last row: masked out by the test beside it.
        lend_before = (lending[before] & (before >= 0)).astype(np.float32)
        lend_after = (lending[after] & (after >= 0)).astype(np.float32)
        together = cosines[picked] + lend_before * cosines[before] + lend_after * cosines[after]
        norm_squared = (
            self.self_dot[picked]
            + lend_before * (self.self_dot[before] + 2.0 * self.dot_prev[picked])
            + lend_after * (self.self_dot[after] + 2.0 * self.dot_next[picked])
            + 2.0 * lend_before * lend_after * self.dot_around[picked]
        )
        return np.asarray(together / np.sqrt(np.maximum(norm_squared, 1e-12)), dtype=np.float32)

    def vector_of(self, memory_id: str) -> np.ndarray | None:
        row = self.row_of.get(memory_id)
        return self.vectors[row].copy() if row is not None and self.has_vector[row] else None


def by_id(copy: ScopeCopy, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]:
    """The records of these ids that the copy has (an id it lacks does not exist in the scope)."""
    return {i: copy.records[i] for i in memory_ids if i in copy.records}
