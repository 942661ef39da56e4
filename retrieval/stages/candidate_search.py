"""Stage: candidate search. Embedding similarity (of each memory and of its context in its episode) and
BM25 full-text, from the scope copies or LanceDB, fused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from retrieval.models.embedders.base import Embedder
from retrieval.stages.attribution import all_named_agents, without_agents
from retrieval.stages.fusion import fuse
from retrieval.text import fulltext_query
from retrieval.trace import (
    CandidatesFused,
    QueryEmbeddedWithoutAgents,
    SearchLegRan,
    SearchLegSkipped,
    StageOutput,
    TraceEvent,
)
from retrieval.types import Candidate, RecallRequest
from storage.records import Reach, SearchHit, TimeWindow


class CandidateSource(Protocol):
    """What the stage needs from the store (``storage.store.MemoryStore`` implements it)."""

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
        """``stored``: every memory whose text is stored (retracted, superseded, expired too), not only the
        active ones: a purge by query erases them all."""
        ...

    def context_scores(
        self, reach: Reach, vector: np.ndarray, memory_ids: Sequence[str], *, embedder: str
    ) -> dict[str, float]:
        """The query's cosine with the context vector of each memory the store can tell (the rest: none)."""
        ...

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
    ) -> list[SearchHit]: ...

    def fulltext_scores(self, reach: Reach, text: str, memory_ids: Sequence[str]) -> dict[str, float]:
        """The BM25 score of each of ``memory_ids`` on the scale of ``fulltext_search``'s hits, for those the
        store can tell (the rest: none)."""
        ...

    def fulltext_engine(self, reach: Reach) -> str:
        """What answers ``reach``'s full-text searches (for the trace)."""
        ...

    def fulltext_ceiling(self, reach: Reach, text: str) -> float | None:
        """The BM25 score of a full match of ``text`` in ``reach`` (None: unknown; the floor then reads
        the relative scores ranking reads)."""
        ...


class CandidateSearchStage:
    name = "candidate_search"

    def __init__(
        self,
        source: CandidateSource,
        embedder: Embedder,
        *,
        vector_weight: float,
        context_share: float = 0.0,
        use_vector: bool = True,
        use_fulltext: bool = True,
    ) -> None:
        self._source = source
        self._embedder = embedder
        self._context_share = context_share
        self._vector_weight = vector_weight if use_fulltext else 1.0
        self._use_vector = use_vector
        self._use_fulltext = use_fulltext
        if not use_vector and use_fulltext:
            self._vector_weight = 0.0

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        fused, events = self.search(
            request.reach,
            request.query,
            leg_limit=request.candidate_limit,
            limit=request.candidate_limit,
            kinds=list(request.kinds) or None,
            tags=list(request.tags) or None,
            window=request.window,
            all_tags=request.tags_all,
            names_to_fulltext=True,
        )
        return StageOutput(fused, events)

    def search(
        self,
        reach: Reach,
        query: str,
        *,
        leg_limit: int,
        limit: int,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        window: TimeWindow | None = None,
        all_tags: bool = False,
        names_to_fulltext: bool = False,
        context_share: float | None = None,
        stored: bool = False,
    ) -> tuple[tuple[Candidate, ...], tuple[TraceEvent, ...]]:
        """Both legs (``leg_limit`` hits each), fused; the best ``limit`` candidates and the trace events.
        The full-text leg runs first. With ``names_to_fulltext`` (a recall, whose attribution stage weighs
        who wrote what) the vector leg embeds the query without the names of the full-text hits' authors
        that it names (``without_agents``), which the full-text leg has matched already.
        ``context_share``: c for this search (None: the stage's); forget by query judges a memory by what
        it says itself, and passes 0. ``stored``: search every memory whose text is stored, not only the
        active ones (a purge by query)."""
        share = self._context_share if context_share is None else context_share
        query_vector: np.ndarray | None = None
        vector_hits: list[SearchHit] = []
        fulltext_hits: list[SearchHit] = []
        ceiling: float | None = None
        fulltext_events: list[TraceEvent] = []
        if self._use_fulltext:
            words = fulltext_query(query)
            fulltext_hits = self._source.fulltext_search(
                reach,
                words,
                limit=leg_limit,
                kinds=kinds,
                tags=tags,
                window=window,
                all_tags=all_tags,
                stored=stored,
            )
            ceiling = self._source.fulltext_ceiling(reach, words) if fulltext_hits else None
            engine = self._source.fulltext_engine(reach)
            fulltext_events.append(SearchLegRan("fulltext", engine, len(fulltext_hits), leg_limit))
        else:
            fulltext_events.append(SearchLegSkipped("fulltext", "disabled by configuration"))
        events: list[TraceEvent] = []
        if self._use_vector:
            authors = {hit.record.agent_id for hit in fulltext_hits}
            named = all_named_agents(query, authors) if names_to_fulltext else ()
            embedded = without_agents(query, named) if named else query
            if embedded != query:
                events.append(QueryEmbeddedWithoutAgents(named, embedded))
            query_vector = self._embedder.embed_query(embedded)
            vector_hits = self._source.vector_search(
                reach,
                query_vector,
                embedder=self._embedder.name,
                limit=leg_limit,
                kinds=kinds,
                tags=tags,
                window=window,
                all_tags=all_tags,
                context_share=share,
                stored=stored,
            )
            events.append(SearchLegRan("vector", self._embedder.name, len(vector_hits), leg_limit))
        else:
            events.append(SearchLegSkipped("vector", "disabled by configuration"))
            share = 0.0  # no query vector: no cosine, nor any context
        events.extend(fulltext_events)
        contexts: dict[str, float] = {}
        if share > 0.0 and query_vector is not None:
            # The full-text hits the vector leg did not find need their context cosine for the same scale.
            known = {hit.record.id for hit in vector_hits if hit.context is not None}
            unknown = [hit.record.id for hit in fulltext_hits if hit.record.id not in known]
            if unknown:
                contexts = self._source.context_scores(
                    reach, query_vector, unknown, embedder=self._embedder.name
                )
        keywords: dict[str, float] = {}
        if fulltext_hits:
            # The vector hits the full-text leg did not return (below its best ``leg_limit``, or matching no
            # term) are fused on their own BM25, as the full-text hits are on their own cosine: a memory
            # the model finds first and whose words rank 70th is not scored as if it shared none.
            returned = {hit.record.id for hit in fulltext_hits}
            missing = [hit.record.id for hit in vector_hits if hit.record.id not in returned]
            if missing:
                keywords = self._source.fulltext_scores(reach, words, missing)
        fused, seen = fuse(
            vector_hits,
            fulltext_hits,
            query_vector=query_vector,
            embedder_name=self._embedder.name,
            vector_weight=self._vector_weight,
            limit=limit,
            fulltext_ceiling=ceiling,
            context_share=share,
            contexts=contexts,
            keywords=keywords,
        )
        events.append(
            CandidatesFused(
                "weighted-sum",
                self._vector_weight,
                round(1.0 - self._vector_weight, 6),
                seen,
                len(fused),
                "best match",
                "full match" if ceiling else "best match",
                context_share=share,
            )
        )
        return fused, tuple(events)
