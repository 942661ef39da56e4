"""Stage: episode co-occurrence expansion. Memories from the same episodes as the retrieved ones
join the candidates, scored ``alpha x`` the score of the memory that brought them (never above it):
``sibling = score_propagation_alpha x source_final x min(1, sibling_weight)``. Each source brings at most
``max_siblings`` siblings, nearest to it in time first (neighbouring turns of a conversation); a memory
that matched the query only weakly is lifted to its sibling score when that is higher. When the query
names an agent, a sibling by another agent keeps ``1 - author_discount`` of its score (attribution)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from retrieval.feedback_index import FeedbackIndex
from retrieval.models.embedders.base import Embedder
from retrieval.stages.attribution import author_factor, named_agents
from retrieval.trace import SiblingsAdded, StageOutput
from retrieval.types import Candidate, RecallRequest
from storage.records import EpisodeMemberStub, EpisodeRecord, MemoryRecord, Reach


class EpisodeSource(Protocol):
    """What expansion and assembly need from the store (``storage.store.MemoryStore`` implements it)."""

    def episode_member_stubs(self, reach: Reach, episode_ids: Sequence[str]) -> list[EpisodeMemberStub]: ...

    def get_memories(self, memory_ids: Sequence[str], reach: Reach) -> dict[str, MemoryRecord]: ...

    def get_episodes(self, reach: Reach, episode_ids: Sequence[str]) -> dict[str, EpisodeRecord]: ...


def ranked(candidates: list[Candidate]) -> tuple[Candidate, ...]:
    """Final order; on a tie a direct match comes before any sibling."""
    return tuple(sorted(candidates, key=lambda c: (-c.final_score, c.source == "sibling", c.id)))


def within_source(bonus: float, candidate: Candidate, finals: Mapping[str, float], own: float) -> float:
    """``bonus`` as a candidate may keep it: a sibling whose own score is ``own`` never ends above the
    memory that brought it (its final score in ``finals``; a tie ranks the sibling after it)."""
    source_final = finals.get(candidate.sibling_of or "") if candidate.source == "sibling" else None
    return bonus if source_final is None else max(0.0, min(bonus, source_final - own))


def sources_of(candidates: Sequence[Candidate], count: int) -> list[Candidate]:
    """The direct matches that may bring siblings: the first ``count`` (those that can reach the context)."""
    return [candidate for candidate in candidates if candidate.source == "direct"][:count]


def nearest_members(
    sources: Sequence[Candidate], stubs: Sequence[EpisodeMemberStub], max_siblings: int
) -> list[str]:
    """For each source, the ids of up to ``max_siblings`` other members of its episode nearest in time."""
    anchors = {source.id for source in sources}
    by_episode: dict[str, list[EpisodeMemberStub]] = {}
    for stub in stubs:
        if stub.id not in anchors:
            by_episode.setdefault(stub.episode_id, []).append(stub)
    chosen: dict[str, None] = {}
    for source in sources:
        pool = by_episode.get(source.memory.episode_id or "", [])
        moment = source.memory.created_at
        for stub in sorted(pool, key=lambda s: (abs((s.created_at - moment).total_seconds()), s.id))[
            :max_siblings
        ]:
            chosen[stub.id] = None
    return list(chosen)


def expand(
    candidates: tuple[Candidate, ...],
    members: Sequence[MemoryRecord],
    *,
    sources: int,
    alpha: float,
    max_siblings: int,
    named: tuple[str, ...] = (),
    author_discount: float = 0.0,
    weights: Mapping[str, float] | None = None,
    weighting_enabled: bool = True,
) -> tuple[tuple[Candidate, ...], int, int]:
    """Pure: add siblings of the first ``sources`` direct candidates. A weaker direct match from the same
    episode is lifted to its sibling score when that is higher. ``weights``: each member's feedback
    weight for this query (default: its global weight), applied only when ``weighting_enabled`` (an org's
    A/B control keeps the unweighted order). Returns (candidates, sources used, siblings)."""
    chosen = [c for c in sources_of(candidates, sources) if c.memory.episode_id]
    anchors = {candidate.id for candidate in chosen}
    by_id = {candidate.id: candidate for candidate in candidates}
    by_episode: dict[str, list[MemoryRecord]] = {}
    for member in members:
        if member.episode_id is not None and member.id not in anchors and member.status == "active":
            by_episode.setdefault(member.episode_id, []).append(member)
    siblings: dict[str, Candidate] = {}
    used = 0
    for source in chosen:
        pool = by_episode.get(source.memory.episode_id or "", [])
        nearest = sorted(
            pool, key=lambda m: (abs((m.created_at - source.memory.created_at).total_seconds()), m.id)
        )
        for member in nearest[:max_siblings]:
            factor = author_factor(member.agent_id, named, author_discount)
            weight = (weights or {}).get(member.id, member.weight)
            score = alpha * source.final_score * (min(1.0, weight) if weighting_enabled else 1.0) * factor
            best_so_far = siblings.get(member.id) or by_id.get(member.id)
            if best_so_far is not None and best_so_far.final_score >= score:
                continue
            base = by_id.get(member.id) or Candidate.of(
                member, feedback_weight=weight, global_weight=member.weight
            )
            siblings[member.id] = base.revised(
                source="sibling", sibling_of=source.id, weighted_score=score, attribution_factor=factor
            )
        used += 1 if pool else 0
    merged = [siblings.get(candidate.id, candidate) for candidate in candidates]
    merged.extend(sibling for memory_id, sibling in siblings.items() if memory_id not in by_id)
    return ranked(merged), used, len(siblings)


class EpisodeExpansionStage:
    name = "episode_expansion"

    def __init__(
        self,
        source: EpisodeSource,
        *,
        alpha: float,
        max_siblings: int = 3,
        author_discount: float = 0.0,
        feedback: FeedbackIndex | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        """With a ``feedback`` index (and the ``embedder`` for the query) a sibling's weight is its
        weight for this query, as feedback weighting applies it to direct matches."""
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"score_propagation_alpha must be between 0 and 1 (exclusive), but got {alpha}")
        self._source = source
        self._alpha = alpha
        self._max_siblings = max_siblings
        self._author_discount = author_discount
        self._feedback = feedback
        self._embedder = embedder

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        sources = [c for c in sources_of(candidates, request.top_k) if c.memory.episode_id]
        episode_ids = list(dict.fromkeys(c.memory.episode_id for c in sources if c.memory.episode_id))
        if not episode_ids or self._max_siblings == 0:
            return StageOutput(candidates, (SiblingsAdded(0, 0, self._alpha),))
        # Choose by time from light rows, then read only the chosen memories: one long episode cannot
        # crowd out the others, and whole records are read only for what may join.
        stubs = self._source.episode_member_stubs(request.reach, episode_ids)
        if request.window is not None:  # a recall within a window: its siblings are of that time too
            stubs = [stub for stub in stubs if request.window.holds(stub.created_at)]
        records = self._source.get_memories(
            nearest_members(sources, stubs, self._max_siblings), request.reach
        )
        # Of the kinds and tags the recall asked for too (a trial: kinds=["artifact"] brought an episode's
        # facts and its summary beside its config).
        members = [memory for memory in records.values() if request.asks_for(memory)]
        authors = [c.memory.agent_id for c in candidates] + [m.agent_id for m in members]
        named = named_agents(request.query, authors) if self._author_discount else ()
        weights = None
        if self._feedback is not None and members:
            embedder = self._embedder
            query_vector = None if embedder is None else lambda: embedder.embed_query(request.query)
            weights = {
                memory_id: found.weight
                for memory_id, found in self._feedback.weights(
                    request.scope,
                    query_vector,
                    members,
                    recall_id=request.retrieval_id or None,
                    query_text=request.query,
                    rivals=[c.memory for c in candidates],
                ).items()
            }
        expanded, used, added = expand(
            candidates,
            members,
            sources=request.top_k,
            alpha=self._alpha,
            max_siblings=self._max_siblings,
            named=named,
            author_discount=self._author_discount,
            weights=weights,
            weighting_enabled=request.weighting_enabled,
        )
        return StageOutput(expanded, (SiblingsAdded(used, added, self._alpha),))
