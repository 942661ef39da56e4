"""Corroboration: the same conclusion reached independently by several agents ranks a little higher.

Near-duplicate clusters (SimHash, Hamming <= 3) name a canonical member (the highest weight) and the
rest corroborating. The corroboration score counts distinct agents other than the canonical's author,
including agents that stored an exact duplicate (kept once, recorded as an attestation); one agent
repeating itself corroborates nothing. Every member of a cluster gets
``boost = log2(1 + corroborationScore) x 0.1`` (at most 0.3, ``MAX_BOOST``) after rerank and
before feedback weighting; memories in no cluster get +0.0.

"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from retrieval.trace import CorroborationApplied, StageOutput
from retrieval.types import Candidate, RecallRequest
from storage.records import Reach

BOOST_FACTOR = 0.1
# Eight corroborating agents earn +0.300, where log2(9) x 0.1 would be 0.317: the boost is capped there,
# which also keeps a crowd of agents from outweighing relevance.
MAX_BOOST = 0.3


@dataclass(frozen=True)
class ClusterMember:
    id: str
    agent_id: str
    weight: float
    created_at: datetime
    simhash: int
    # Whether its text negates (``retrieval.text.negated``): a near-duplicate fingerprint of the opposite
    # claim ("never pages" / "pages") is no corroboration.
    negates: bool = False
    # Its words in their order (``retrieval.text.wording``; 0: unknown): where a cluster holds memories
    # that contradict each other, those worded alike are on one side (``ScopeIndex._sides``).
    wording: int = 0
    # Its text, read only beside a near-duplicate fingerprint's (``retrieval.stages.assembly.
    # states_otherwise``): one that names another host, owner or number ("runs on host ash.internal" /
    # "... oak.internal") is another claim, no corroboration.
    content: str = ""


@dataclass(frozen=True)
class MemoryCluster:
    """A cluster of near-duplicate observations: the canonical member, the corroborating ones, and the
    corroboration score."""

    canonical: ClusterMember
    corroborating: tuple[ClusterMember, ...]
    corroboration_score: int
    corroborating_agents: tuple[str, ...]

    @property
    def members(self) -> tuple[ClusterMember, ...]:
        return (self.canonical, *self.corroborating)

    def stated_besides(self, agent_id: str) -> tuple[str, ...]:
        """The agents who stated what the cluster says, but ``agent_id`` (the author of the member shown:
        not always the canonical's, whose author a trial found missing from "also stated by")."""
        return tuple(sorted({self.canonical.agent_id, *self.corroborating_agents} - {agent_id}))

    @property
    def boost(self) -> float:
        return corroboration_boost(self.corroboration_score)


def corroboration_boost(score: int) -> float:
    """log2(1 + score) x 0.1, capped at 0.3: 1 -> +0.100, 2 -> +0.158, 4 -> +0.232, 8 -> +0.300; 0 -> +0.0."""
    return min(MAX_BOOST, math.log2(1 + score) * BOOST_FACTOR) if score > 0 else 0.0


def canonical_member(members: Iterable[ClusterMember]) -> ClusterMember:
    """Highest weight; ties go to the earliest stored, then the smallest id (stable across passes)."""
    return min(members, key=lambda member: (-member.weight, member.created_at, member.id))


def make_cluster(
    members: Sequence[ClusterMember], attesters: Mapping[str, Collection[str]]
) -> MemoryCluster | None:
    """A cluster from near-duplicate ``members``; None when nobody but the canonical's author is involved."""
    canonical = canonical_member(members)
    agents = {member.agent_id for member in members}
    for member in members:
        agents.update(attesters.get(member.id, ()))
    others = tuple(sorted(agents - {canonical.agent_id}))
    if len(members) < 2 and not others:
        return None
    corroborating = tuple(
        sorted((m for m in members if m.id != canonical.id), key=lambda m: (m.created_at, m.id))
    )
    return MemoryCluster(canonical, corroborating, len(others), others)


class UnionFind:
    """Disjoint sets that also keep each set's members, so one changed set can be revisited alone."""

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}
        self._members: dict[str, list[str]] = {}

    @classmethod
    def from_labels(cls, items: Sequence[str], labels: Sequence[int]) -> UnionFind:
        """Sets given as a component label per item (labels index into ``items``)."""
        sets = cls()
        for item, label in zip(items, labels, strict=True):
            root = items[label]
            sets._parent[item] = root
            sets._members.setdefault(root, []).append(item)
        return sets

    def add(self, item: str) -> None:
        if item not in self._parent:
            self._parent[item] = item
            self._members[item] = [item]

    def find(self, item: str) -> str:
        root = item
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[item] != root:  # path compression
            self._parent[item], item = root, self._parent[item]
        return root

    def union(self, left: str, right: str) -> str:
        """Join the two sets; returns the root of the joined set."""
        left_root, right_root = self.find(left), self.find(right)
        if left_root == right_root:
            return left_root
        keep, merge = sorted((left_root, right_root))
        self._parent[merge] = keep
        self._members[keep].extend(self._members.pop(merge))
        return keep

    def is_root(self, item: str) -> bool:
        return item in self._members

    def members_of(self, root: str) -> list[str]:
        return self._members[root]

    def groups(self) -> dict[str, list[str]]:
        return {root: list(members) for root, members in self._members.items()}


def rank_with_corroboration(
    candidates: Sequence[Candidate], clusters_by_member: Mapping[str, MemoryCluster]
) -> tuple[Candidate, ...]:
    """Boost cluster members and sort by relevance + boost; the input sequence is never mutated."""
    boosted = []
    for candidate in candidates:
        cluster = clusters_by_member.get(candidate.id)
        if cluster is None:
            boosted.append(
                candidate.revised(corroboration_boost=0.0, corroborating_agents=(), cluster_canonical=None)
            )
        else:
            boosted.append(
                candidate.revised(
                    corroboration_boost=cluster.boost,
                    corroborating_agents=cluster.stated_besides(candidate.memory.agent_id),
                    cluster_canonical=cluster.canonical.id,
                )
            )
    return tuple(sorted(boosted, key=lambda candidate: (-candidate.boosted_score, candidate.id)))


class ClusterProvider(Protocol):
    def clusters_for(self, reach: Reach, memory_ids: Sequence[str]) -> Mapping[str, MemoryCluster]: ...


class CorroborationStage:
    name = "corroboration"

    def __init__(self, provider: ClusterProvider) -> None:
        self._provider = provider

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        clusters = self._provider.clusters_for(request.reach, [candidate.id for candidate in candidates])
        ranked = rank_with_corroboration(candidates, clusters)
        boosted = sum(1 for candidate in ranked if candidate.corroboration_boost > 0)
        return StageOutput(
            ranked,
            (
                CorroborationApplied(
                    boosted, len({c.cluster_canonical for c in ranked if c.cluster_canonical})
                ),
            ),
        )
