"""Searching the active memories a reader may see: nearest vectors, full-text (BM25) matches, paged
listings and episode members, each answered by the scope's copy when it holds one, else by LanceDB;
and the reads the scope copies are built from."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import reduce
from typing import Any

import numpy as np
from lancedb.expr import Expr

from storage import filters
from storage.pending import overlaid, replaced_through
from storage.records import (
    CONTENT_STATUSES,
    EpisodeMemberStub,
    MemoryRecord,
    MemoryStatus,
    Reach,
    Scope,
    SearchHit,
    TimeWindow,
    semantic_score,
)
from storage.rows import MEMORY_COLUMNS, memory_from_row, vector_of_row
from storage.scan import scan, utc
from storage.scope_copy import Row, ScopeCopy
from storage.scope_episodes import episode_members
from storage.search_filter import SearchFilter, tag_filter
from storage.tables import StoreTables

VECTOR_SEARCH_EF = 100  # HNSW candidate list: recall about 0.99 at 1M in the measurements


class MemorySearch(StoreTables):
    """Searches and listings of active memories, and the scope copies' reads of the memories table
    (``storage.scope_cache.CacheReader``)."""

    _lancedb_query: Callable[[str], str] | None  # a query as LanceDB's full-text index is asked it

    def vector_search(
        self,
        reach: Reach,
        vector: np.ndarray,
        *,
        embedder: str,
        limit: int,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        window: TimeWindow | None = None,
        all_tags: bool = False,
        context_share: float = 0.0,
        stored: bool = False,
    ) -> list[SearchHit]:
        """Active memories in ``reach`` embedded by ``embedder`` (of these kinds, with any of these tags,
        or all of them with ``all_tags``, in this time window), nearest first; score = cosine similarity.
        With a ``context_share``, nearest by ``semantic_score`` where a scope copy has the memory's
        context (a scope LanceDB serves ranks by cosine: its hits carry no context). With ``stored`` (a
        purge's look), every memory whose text is still stored: retracted, superseded and expired too."""
        where = SearchFilter.of(
            reach, kinds, tags, window, all_tags, held=self._pending.held(), stored=stored
        )
        hits = [
            hit
            for scope in self._scopes(reach)
            for hit in self._vector_search_in(scope, vector, embedder, limit, where, context_share)
        ]
        ranked = sorted(
            hits, key=lambda hit: (-semantic_score(hit.score, hit.context, context_share), -hit.score)
        )
        return ranked[:limit]

    def skipped_by_vector_search(
        self,
        reach: Reach,
        *,
        embedder: str,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        window: TimeWindow | None = None,
        all_tags: bool = False,
    ) -> int:
        """How many memories of ``reach`` that ``vector_search`` would look at have no vector of ``embedder``
        (only the full-text leg finds them), in the scopes a copy serves (a scope LanceDB serves: not
        counted, as reading it would cost a scan)."""
        where = SearchFilter.of(reach, kinds, tags, window, all_tags, held=self._pending.held())
        skipped = 0
        for scope in self._scopes(reach):
            with self._cache.reading(scope, build=False) as copy:
                if copy is not None:
                    skipped += copy.without_vector_of(embedder, now=datetime.now(UTC), **where.for_copy())
        return skipped

    def context_scores(
        self, reach: Reach, vector: np.ndarray, memory_ids: Sequence[str], *, embedder: str
    ) -> dict[str, float]:
        """The query's cosine with the context vector of each of ``memory_ids`` held by a scope copy (it
        and its neighbours in its chain, ``storage.scope_copy``); a memory no copy holds is left out."""
        found: dict[str, float] = {}
        for scope in self._scopes(reach):
            with self._cache.reading(scope, build=False) as copy:
                if copy is not None:
                    found |= copy.context_cosines(
                        vector,
                        [memory_id for memory_id in memory_ids if memory_id not in found],
                        embedder=embedder,
                        now=datetime.now(UTC),
                    )
        return found

    def prime_nearest(self, scope: Scope, vectors: Sequence[np.ndarray]) -> None:
        """Make the products of ``scope``'s copy with a group commit's new vectors at once, for the
        consolidations about to search with each (``ScopeCopy.prime``); nothing for a scope LanceDB serves."""
        with self._cache.reading(scope, build=False) as copy:
            if copy is not None:
                copy.prime(vectors)

    def _vector_search_in(
        self,
        scope: Scope,
        vector: np.ndarray,
        embedder: str,
        limit: int,
        where: SearchFilter,
        context_share: float = 0.0,
    ) -> list[SearchHit]:
        with self._cache.reading(scope) as copy:
            if copy is not None:
                nearest = copy.nearest(
                    vector,
                    embedder=embedder,
                    limit=limit,
                    now=datetime.now(UTC),
                    context_share=context_share,
                    **where.for_copy(),
                )
                return [
                    SearchHit(record, score, stored, context) for record, score, stored, context in nearest
                ]
        condition = filters.all_of(self._active_in(scope, where), filters.equals("embedder", embedder))
        query = (
            self._memories.search(np.asarray(vector, dtype=np.float32), vector_column_name="vector")
            .distance_type("cosine")
            .ef(VECTOR_SEARCH_EF)  # used once maintenance has built the ANN index
            .where(condition, prefilter=True)
            .select([*MEMORY_COLUMNS, "vector", "_distance"])
            .limit(limit)
        )
        hits = [
            SearchHit(memory_from_row(row), 1.0 - float(row["_distance"]), vector_of_row(row))
            for row in query.to_arrow().to_pylist()
        ]
        return _live(hits, where)

    def fulltext_search(
        self,
        reach: Reach,
        text: str,
        *,
        limit: int,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        window: TimeWindow | None = None,
        all_tags: bool = False,
        stored: bool = False,
    ) -> list[SearchHit]:
        """Active memories in ``reach`` matching ``text`` (BM25 over content and tags), best first. Each
        scope of a view has a BM25 index of its own: hits are put on the scale of ``fulltext_ceiling``
        (what a full match scores in the first scope whose index knows the query's terms), so that the
        indexes' scores compare. ``stored``: as ``vector_search``'s."""
        if not text.strip():
            return []
        where = SearchFilter.of(
            reach, kinds, tags, window, all_tags, held=self._pending.held(), stored=stored
        )
        scopes = self._scopes(reach)
        found = {scope: self._fulltext_search_in(scope, text, limit, where) for scope in scopes}
        if len(scopes) == 1:
            return found[scopes[0]]
        ceilings = {scope: self._ceiling_in(scope, text) for scope in scopes}
        scale = next((ceiling for ceiling in ceilings.values() if ceiling), None)
        hits: list[SearchHit] = []
        for scope, scope_hits in found.items():
            ceiling = ceilings[scope]
            if scale and ceiling and ceiling != scale:
                scope_hits = [replace(hit, score=hit.score * scale / ceiling) for hit in scope_hits]
            hits += scope_hits
        return _best(hits, limit)

    def _fulltext_search_in(
        self, scope: Scope, text: str, limit: int, where: SearchFilter
    ) -> list[SearchHit]:
        if self._cache.searches_text:
            with self._cache.reading(scope) as copy:
                if copy is not None:
                    found = copy.best_matching(text, limit=limit, now=datetime.now(UTC), **where.for_copy())
                    return [SearchHit(record, score, vector) for record, score, vector in found]
        elif self._cache.serves(scope):
            # Only ids and scores from the index (queried outside the cache's lock); records and vectors
            # come from the copy (a row committed after it caught up is left for the next search).
            scored = self._fulltext_rows(scope, text, ["id"], limit, where)
            with self._cache.reading(scope) as copy:
                if copy is not None:
                    return _live(
                        [
                            SearchHit(
                                copy.records[row["id"]], float(row["_score"]), copy.vector_of(row["id"])
                            )
                            for row in scored
                            if row["id"] in copy.records and where.sees(copy.records[row["id"]])
                        ],
                        where,
                    )
        rows = self._fulltext_rows(scope, text, [*MEMORY_COLUMNS, "vector"], limit, where)
        return _live(
            [SearchHit(memory_from_row(row), float(row["_score"]), vector_of_row(row)) for row in rows], where
        )

    def _fulltext_rows(
        self, scope: Scope, text: str, columns: list[str], limit: int, where: SearchFilter
    ) -> list[dict[str, Any]]:
        """LanceDB's BM25 index: the best ``limit`` active memories of ``scope``, these columns and _score.
        The query is asked as the store's ``lancedb_query`` rewrites it, if it has one."""
        if self._lancedb_query is not None:
            text = self._lancedb_query(text)
        query = self._memories.search(text, query_type="fts", fts_columns="search_text")
        query = query.where(self._active_in(scope, where), prefilter=True)
        return query.select([*columns, "_score"]).limit(limit).to_arrow().to_pylist()

    def replaced_memories(
        self, scope: Scope, memory_ids: Sequence[str], *, most: int = 64
    ) -> dict[str, list[MemoryRecord]]:
        """For each of ``memory_ids`` that replaced others, what it replaced (``replaced_through``), any
        status, from the scope's copy. A scope without one (larger than the copies hold) answers nothing:
        no index covers ``replaced_by``, and consolidation asks on every write."""
        held = self._pending.held()
        with self._cache.reading(scope) as copy:
            if copy is None:
                return {}
            chains = {
                memory_id: replaced_through(copy.replaced, held, memory_id, most) for memory_id in memory_ids
            }
            return {
                memory_id: [copy.records[other] for other in chain if other in copy.records]
                for memory_id, chain in chains.items()
                if chain
            }

    def holds_memories_in(
        self, reach: Reach, window: TimeWindow | None, statuses: Sequence[MemoryStatus] = ("active",)
    ) -> bool:
        """Whether some memory of ``reach`` (of ``statuses``, that its viewer may see) is of ``window``'s
        time (None: of any time)."""
        where = SearchFilter.of(reach, window=window, held=self._pending.held())
        return any(self._holds_memories_in(scope, window, where, statuses) for scope in self._scopes(reach))

    def _holds_memories_in(
        self, scope: Scope, window: TimeWindow | None, where: SearchFilter, statuses: Sequence[MemoryStatus]
    ) -> bool:
        with self._cache.reading(scope) as copy:
            if copy is not None:
                return any(
                    record.status in statuses
                    and (window is None or window.holds(record.created_at))
                    and where.sees(record)
                    for record in copy.records.values()
                )
        return bool(scan(self._memories, self._active_in(scope, where, statuses), ["id"], limit=1).num_rows)

    def fulltext_scores(self, reach: Reach, text: str, memory_ids: Sequence[str]) -> dict[str, float]:
        """The BM25 score of each of ``memory_ids`` for ``text``, on the scale of ``fulltext_search``'s
        hits, from the scope copies that hold them; a memory no copy holds with an index is left out (LanceDB's
        index scores only what it returns), and so is one ``reach``'s viewer may not see, or a purge holds."""
        if not text.strip() or not memory_ids or not self._cache.searches_text:
            return {}
        where = SearchFilter.of(reach, held=self._pending.held())
        scopes = self._scopes(reach)
        scale = self.fulltext_ceiling(reach, text) if len(scopes) > 1 else None
        found: dict[str, float] = {}
        for scope in scopes:
            wanted = [memory_id for memory_id in memory_ids if memory_id not in found]
            if not wanted or not self._cache.holds(scope):
                continue
            with self._cache.reading(scope, build=False) as copy:
                if copy is None:
                    continue
                records = copy.records
                seen = [
                    memory_id
                    for memory_id in wanted
                    if memory_id in records and where.sees(records[memory_id])
                ]
                scores = keyword_scores(copy, text, seen)
                ceiling = copy.fulltext_ceiling(text) if scale else None
            if scale and ceiling and ceiling != scale:
                scores = {memory_id: score * scale / ceiling for memory_id, score in scores.items()}
            found |= scores
        return found

    def fulltext_ceiling(self, reach: Reach, text: str) -> float | None:
        """The score a memory matching all of ``text`` would get in the full-text index (the sum of its
        terms' idf), so that BM25 scores read as absolute relevance: of ``reach``'s home scope, or for a
        view whose home index knows none of the terms, of the first of its scopes that does (the scale
        ``fulltext_search`` puts a view's hits on). None when LanceDB's index answers (it does not expose
        term statistics: scores are then relative to the best)."""
        ceilings = [self._ceiling_in(scope, text) for scope in self._scopes(reach)]
        return next((ceiling for ceiling in ceilings if ceiling), ceilings[0])

    def _ceiling_in(self, scope: Scope, text: str) -> float | None:
        if not text.strip() or not (self._cache.searches_text and self._cache.holds(scope)):
            return None
        with self._cache.reading(scope) as copy:
            return copy.fulltext_ceiling(text) if copy is not None else None

    def fulltext_engine(self, reach: Reach) -> str:
        """``copy-bm25`` when the home scope's copy answers its full-text searches, else ``lancedb-bm25``."""
        scope = self._scopes(reach)[0]
        return "copy-bm25" if self._cache.searches_text and self._cache.holds(scope) else "lancedb-bm25"

    def list_memories(
        self,
        reach: Reach,
        *,
        limit: int,
        before: tuple[datetime, str] | None = None,
        agent_id: str | None = None,
        tag: str | None = None,
        kind: str | None = None,
        window: TimeWindow | None = None,
        episode_id: str | None = None,
        statuses: Sequence[MemoryStatus] = ("active",),
        expired: bool = False,
        now: datetime | None = None,
    ) -> list[MemoryRecord]:
        """One page of the scope's active, unexpired memories (of ``window``'s time, if given), newest
        first (by ``created_at``, then id, descending): the ``limit`` that come after ``before`` (the last
        one of the previous page) in that order. A memory written after the listing began comes before the
        first page, so no page repeats one. An active memory past its expiry is left out, as recall leaves
        it out until maintenance retracts it, unless ``expired``; ``statuses`` other than active are for a
        purge, which erases the text of inactive memories too, and for the listing of a scope's history. A
        memory whose supersede is still being committed (``storage.pending``) is listed as it will be:
        superseded, when ``statuses`` lists those (a new user's trial saw it missing from a listing of every
        status), else left out."""
        held = self._pending.held()
        where = SearchFilter.of(
            reach,
            [kind] if kind else None,
            [tag] if tag else None,
            window,
            held=() if "superseded" in statuses else held,
        )

        now = now or datetime.now(UTC)  # (the caller's clock, which labels what expired)
        tagged = tag_filter([tag] if tag else None)

        def wanted(record: MemoryRecord) -> bool:
            at = utc(record.created_at)
            return (
                record.status in statuses
                and (expired or not record.past_expiry(now))
                and where.sees(record)
                and (agent_id is None or record.agent_id == agent_id)
                and (tagged is None or tagged(record))
                and (kind is None or record.kind == kind)
                and (episode_id is None or record.episode_id == episode_id)
                and (window is None or window.holds(at))
                and (before is None or (at, record.id) < (before[0], before[1]))
            )

        def page(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
            found = sorted(
                (record for record in (overlaid(row, held) for row in records) if wanted(record)),
                key=lambda record: (utc(record.created_at), record.id),
                reverse=True,
            )
            return found[:limit]

        def scope_page(scope: Scope) -> list[MemoryRecord]:
            if tuple(statuses) == ("active",):  # a scope copy holds the active memories only
                # A copy the server warmed or a recall built, never one built for a listing: a one-off
                # `memoria list` spent 3.5 of its 6 s on the copy of a 36,000-memory scope (its vectors,
                # its full-text index), to page 5 memories the table gives in 1.4 s.
                with self._cache.reading(scope, build=False) as copy:
                    if copy is not None:
                        return page(copy.records.values())
            # A held memory's row still reads active: read those too when listing the superseded.
            read = (
                (*statuses, "active")
                if held and "superseded" in statuses and "active" not in statuses
                else statuses
            )
            condition = filters.all_of(
                self._active_in(scope, where, read),
                filters.equals("agent_id", agent_id) if agent_id is not None else None,
                filters.equals("episode_id", episode_id) if episode_id is not None else None,
                filters.at_or_before("created_at", before[0]) if before is not None else None,
            )
            rows = self._select(self._memories, condition, MEMORY_COLUMNS, limit=None)
            return page({row["id"]: memory_from_row(row) for row in rows}.values())

        return page(record for scope in self._scopes(reach) for record in scope_page(scope))

    def episode_member_stubs(self, reach: Reach, episode_ids: Sequence[str]) -> list[EpisodeMemberStub]:
        """Every active member of these episodes (that ``reach``'s viewer may see): id, episode, time and
        weight (no content or vector)."""
        if not episode_ids:
            return []
        where = SearchFilter.of(reach, held=self._pending.held())
        return [stub for scope in self._scopes(reach) for stub in self._stubs_in(scope, episode_ids, where)]

    def _stubs_in(
        self, scope: Scope, episode_ids: Sequence[str], where: SearchFilter
    ) -> list[EpisodeMemberStub]:
        with self._cache.reading(scope) as copy:
            if copy is not None:
                return [
                    EpisodeMemberStub(r.id, r.episode_id or "", r.created_at, r.weight)
                    for r in episode_members(copy, episode_ids)
                    if where.sees(r)
                ]
        condition = filters.all_of(
            self._active_in(scope, where), filters.one_of("episode_id", list(episode_ids))
        )
        rows = self._select(
            self._memories, condition, ["id", "episode_id", "created_at", "weight"], limit=None
        )
        unique = {
            row["id"]: EpisodeMemberStub(
                row["id"], row["episode_id"], utc(row["created_at"]), float(row["weight"])
            )
            for row in rows
        }
        return list(unique.values())

    @staticmethod
    def _active_in(scope: Scope, where: SearchFilter, statuses: Sequence[MemoryStatus] = ("active",)) -> Expr:
        """The active memories (or those of ``statuses``, or for ``where.stored`` every one whose text is
        stored) of ``scope`` that ``where`` keeps, as a LanceDB filter."""
        kinds, tags, window = where.kinds, where.tags, where.window
        if where.stored:
            statuses = CONTENT_STATUSES
        return filters.all_of(
            filters.scope_is(scope),
            filters.equals("status", statuses[0])
            if len(statuses) == 1
            else filters.one_of("status", statuses),
            filters.none_of("id", where.held) if where.held else None,
            filters.visible_to(where.viewer) if where.viewer is not None else None,
            filters.of_audience(where.audience) if where.audience is not None else None,
            filters.one_of("kind", kinds) if kinds else None,
            (filters.every_tag(tags) if where.all_tags else filters.any_tag(tags)) if tags else None,
            filters.at_or_after("created_at", window.since) if window and window.since else None,
            filters.earlier_than("created_at", window.until) if window and window.until else None,
        )

    # ------------------------------------------------------------------ the scope cache's reads

    def table_version(self) -> int:
        """The memories table's newest version, read from the table."""
        return int(self._memories.version)

    def latest_version(self) -> int:
        """The memories table's newest version as the scope copies take it: read from the table only when a
        write sequence ended since the last read (``storage.generations``)."""
        return self._memories_version.current()

    def scope_size_above(self, scope: Scope, limit: int) -> bool:
        return scan(self._memories, filters.scope_is(scope), ["id"], limit + 1).num_rows > limit

    def scope_rows(self, scope: Scope) -> list[Row]:
        return self._rows_with_vectors(filters.scope_is(scope))

    def rows_changed_since(self, version: int, scopes: Sequence[Scope]) -> list[Row]:
        return self._rows_with_vectors(
            filters.all_of(
                filters.newer_than_version(version),
                reduce(lambda left, right: left | right, (filters.scope_is(scope) for scope in scopes)),
            )
        )

    def _rows_with_vectors(self, condition: Expr) -> list[Row]:
        """Records, vectors and search texts; the vectors come out of Arrow as one numpy block, not Python
        lists."""
        table = scan(self._memories, condition, [*MEMORY_COLUMNS, "vector", "search_text"], with_row_id=True)
        if table.num_rows == 0:
            return []
        self._row_ids.learn(
            dict(zip(table.column("id").to_pylist(), table.column("_rowid").to_pylist(), strict=True))
        )
        table = table.drop_columns(["_rowid"])
        column = table.column("vector").combine_chunks()
        flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        block = np.zeros((table.num_rows, self._vector_dim), dtype=np.float32)
        present = ~np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        block[present] = flat.reshape(-1, self._vector_dim)
        texts = table.column("search_text").to_pylist()
        records = [memory_from_row(row) for row in table.drop_columns(["vector", "search_text"]).to_pylist()]
        return [
            (record, block[index] if present[index] else None, texts[index])
            for index, record in enumerate(records)
        ]


def _best(hits: list[SearchHit], limit: int) -> list[SearchHit]:
    """The ``limit`` best of the hits of one or several scopes (a view's home scope and org shelf)."""
    return sorted(hits, key=lambda hit: -hit.score)[:limit]


def _live(hits: list[SearchHit], where: SearchFilter) -> list[SearchHit]:
    """Search results without duplicate ids and without ephemeral memories past their expiry (the
    maintenance job retracts those, but a search between its rounds must not return them), unless the
    search looks at every memory whose text is stored (``where.stored``)."""
    if where.stored:
        return _dedupe(hits)
    now = datetime.now(UTC)
    return [hit for hit in _dedupe(hits) if hit.record.expires_at is None or hit.record.expires_at > now]


def _dedupe(hits: list[SearchHit]) -> list[SearchHit]:
    seen: set[str] = set()
    unique = []
    for hit in hits:
        if hit.record.id not in seen:
            seen.add(hit.record.id)
            unique.append(hit)
    return unique


def keyword_scores(copy: ScopeCopy, text: str, memory_ids: Sequence[str]) -> dict[str, float]:
    """The BM25 score of each of ``memory_ids`` ``copy`` holds, as its ``best_matching`` scores it (0.0:
    no term matches); nothing when the copy has no index."""
    if copy.lexical is None:
        return {}
    held = [memory_id for memory_id in memory_ids if memory_id in copy.row_of]
    scores = copy.lexical.scores_of(text, [copy.row_of[memory_id] for memory_id in held])
    return dict(zip(held, scores, strict=True))
