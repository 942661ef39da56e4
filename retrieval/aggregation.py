"""The aggregation job: near-duplicate clusters, contradictions and corroboration per scope.

A pass reads a scope's newest active memories (up to ``max_rows``), clusters them by SimHash with the
block search, detects contradictions, and returns ``{clusters, contradictions, corroboratedCount,
elapsedMs}``. The clusters are cached in-process until the next pass; memories remembered by this
process join their clusters at once (a few dictionary lookups), writes by other processes at the next
pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Protocol

import numpy as np

from retrieval.contradictions import (
    DEFAULT_OPPOSITIONS,
    Contradiction,
    ContradictionInput,
    detect_contradictions,
)
from retrieval.simhash import (
    BLOCK_BITS,
    BLOCKS,
    MAX_DISTANCE,
    connected_components,
    hamming,
    near_duplicate_pair_arrays,
    simhash,
)
from retrieval.stages.assembly import states_otherwise
from retrieval.stages.corroboration import ClusterMember, MemoryCluster, UnionFind, make_cluster
from retrieval.text import negated, wording
from storage.records import AggregationRow, Reach, Scope, scopes_of

log = logging.getLogger(__name__)


class AggregationSource(Protocol):
    """What a pass needs from the store (``storage.store.MemoryStore`` implements it)."""

    def scopes(self) -> list[Scope]: ...

    def aggregation_rows(self, scope: Scope, limit: int) -> list[AggregationRow]: ...

    def attesters(self, scope: Scope) -> dict[str, set[str]]: ...

    def open_contradiction_pairs(self, scope: Scope) -> list[tuple[str, str]]: ...


@dataclass(frozen=True)
class AggregationResult:
    scope: Scope
    clusters: tuple[MemoryCluster, ...]
    contradictions: tuple[Contradiction, ...]
    corroborated_count: int
    elapsed_ms: float
    rows: int
    finished_at: datetime | None = None


def _blocks(fingerprint: int) -> list[int]:
    return [(fingerprint >> (block * BLOCK_BITS)) & 0xFFFF for block in range(BLOCKS)]


class _BlockTables:
    """For each 16-bit block: which members have which value. Sorted arrays for the members a pass
    loaded, a dictionary for the ones added since."""

    def __init__(self, ids: Sequence[str], fingerprints: np.ndarray) -> None:
        self._ids = np.asarray(ids, dtype=object)
        self._sorted: list[tuple[np.ndarray, np.ndarray]] = []
        for block in range(BLOCKS):
            keys = ((fingerprints >> np.uint64(block * BLOCK_BITS)) & np.uint64(0xFFFF)).astype(np.int64)
            order = np.argsort(keys, kind="stable")
            self._sorted.append((keys[order], order))
        self._added: list[dict[int, list[str]]] = [defaultdict(list) for _ in range(BLOCKS)]

    def candidates(self, fingerprint: int) -> set[str]:
        found: set[str] = set()
        for block, value in enumerate(_blocks(fingerprint)):
            keys, order = self._sorted[block]
            low, high = np.searchsorted(keys, value, "left"), np.searchsorted(keys, value, "right")
            found.update(self._ids[order[low:high]].tolist())
            found.update(self._added[block].get(value, ()))
        return found

    def add(self, memory_id: str, fingerprint: int) -> None:
        for block, value in enumerate(_blocks(fingerprint)):
            self._added[block][value].append(memory_id)


def cluster_members(rows: Sequence[AggregationRow]) -> list[ClusterMember]:
    """Rows stored before fingerprints existed get theirs computed from their content."""
    return [
        ClusterMember(
            row.id,
            row.agent_id,
            row.weight,
            row.created_at,
            row.simhash if row.simhash is not None else simhash(row.content),
            # Read uncached: a pass over a whole scope would churn the cache kept for a write's neighbours,
            # and this pass does not empty it after a purge that ran meanwhile (a review).
            negated.__wrapped__(row.content),
            wording(row.content),
            row.content,
        )
        for row in rows
    ]


class ScopeIndex:
    """One scope's members, block tables for incremental near-duplicate lookups, and union-find. Clusters
    are recomputed only for the sets a change touched, so a write costs the next recall almost nothing."""

    def __init__(
        self,
        members: Sequence[ClusterMember] = (),
        attesters: Mapping[str, set[str]] | None = None,
        max_distance: int = MAX_DISTANCE,
        apart: Iterable[tuple[str, str]] = (),
    ) -> None:
        """``apart``: pairs of memories that contradict each other (the store's open contradictions).
        "Alice reports to Bob" and "Bob reports to Alice" have the same words, so their fingerprints
        join them (and every restatement of either); two agents saying them corroborate nothing: such a
        set's clusters are its sides (``_sides``)."""
        self.max_distance = max_distance
        self.members: dict[str, ClusterMember] = {member.id: member for member in members}
        self._apart: dict[str, set[str]] = defaultdict(set)
        for left_id, right_id in apart:
            self._apart[left_id].add(right_id)
            self._apart[right_id].add(left_id)
        self.attesters: dict[str, set[str]] = defaultdict(set)
        for memory_id, agents in (attesters or {}).items():
            if memory_id in self.members:
                self.attesters[memory_id].update(agents)
        ids = [member.id for member in members]
        fingerprints = np.asarray([member.simhash for member in members], dtype=np.uint64)
        left, right = near_duplicate_pair_arrays(fingerprints, max_distance)
        negates = np.asarray([member.negates for member in members], dtype=bool)
        alike = negates[left] == negates[right] if len(left) else np.zeros(0, dtype=bool)
        left, right = left[alike], right[alike]  # a claim and its negation corroborate nothing
        # nor two that state other values or names (read only for these pairs: a pass reads every row)
        same = np.asarray(
            [
                not states_otherwise(members[i].content, members[j].content)
                for i, j in zip(left.tolist(), right.tolist(), strict=True)
            ],
            dtype=bool,
        )
        left, right = (left[same], right[same]) if len(left) else (left, right)
        labels = connected_components(len(ids), left, right)
        self._blocks = _BlockTables(ids, fingerprints)
        self._union = UnionFind.from_labels(ids, labels.tolist())
        self._by_member: dict[str, MemoryCluster] = {}
        # Only sets with more than one member, or with attestations, can be clusters.
        sizes = np.bincount(labels, minlength=len(ids)) if len(ids) else np.zeros(0, dtype=np.int64)
        self._dirty: set[str] = {ids[label] for label in np.flatnonzero(sizes > 1).tolist()}
        self._dirty.update(self._union.find(memory_id) for memory_id in self.attesters)

    @classmethod
    def build(
        cls,
        members: Sequence[ClusterMember],
        attesters: Mapping[str, set[str]],
        max_distance: int = MAX_DISTANCE,
        apart: Iterable[tuple[str, str]] = (),
    ) -> ScopeIndex:
        return cls(members, attesters, max_distance, apart)

    def add(self, member: ClusterMember) -> None:
        """A new memory joins the index and any cluster it is a near-duplicate of."""
        if member.id in self.members:
            return
        neighbours = {
            other
            for other in self._blocks.candidates(member.simhash)
            if other in self.members
            and self.members[other].negates == member.negates
            and hamming(self.members[other].simhash, member.simhash) <= self.max_distance
            and not states_otherwise(self.members[other].content, member.content)
        }
        self.members[member.id] = member
        self._blocks.add(member.id, member.simhash)
        self._union.add(member.id)
        root = member.id
        for other in neighbours:
            root = self._union.union(member.id, other)
        self._dirty.add(root)

    def keep_apart(self, left_id: str, right_id: str) -> None:
        """Two memories found to contradict each other: they are on two sides of any set that joins them."""
        self._apart[left_id].add(right_id)
        self._apart[right_id].add(left_id)
        for memory_id in (left_id, right_id):
            if memory_id in self.members:
                self._dirty.add(self._union.find(memory_id))

    def retire(self, memory_ids: Sequence[str]) -> None:
        """Memories that left the active set (superseded, retracted) stop counting at once, and so do their
        contradictions (the store closes them)."""
        for memory_id in memory_ids:
            if self.members.pop(memory_id, None) is not None:
                self._by_member.pop(memory_id, None)
                self._dirty.add(self._union.find(memory_id))
            for other in self._apart.pop(memory_id, ()):
                partners = self._apart.get(other)
                if partners is not None:
                    partners.discard(memory_id)
                    if not partners:
                        del self._apart[other]

    def attest(self, memory_id: str, agent_id: str) -> None:
        if memory_id in self.members and agent_id not in self.attesters[memory_id]:
            self.attesters[memory_id].add(agent_id)
            self._dirty.add(self._union.find(memory_id))

    def set_weight(self, memory_id: str, weight: float) -> None:
        member = self.members.get(memory_id)
        if member is not None and member.weight != weight:
            self.members[memory_id] = replace(member, weight=weight)
            self._dirty.add(self._union.find(memory_id))

    def _sides(self, ids: Sequence[str]) -> list[list[str]]:
        """The clusters of one set of near-duplicates: the whole set, or when it holds memories recorded as
        contradicting each other, its sides. Memories worded alike (the same words in the same order:
        restatements that differ in case or punctuation) go together, and a group contradicts another when
        one of its memories is recorded as contradicting one of the other's: the write path compares a new
        memory with a few neighbours only, so a reversal is recorded against some of a claim's
        restatements, not all. In the order a canonical member is chosen, each group joins the first side
        it does not contradict, else starts one. A rewording recorded against nothing joins the first side
        (no text is kept here to tell which it agrees with)."""
        if not any(memory_id in self._apart for memory_id in ids):
            return [list(ids)] if ids else []
        members = sorted(
            (self.members[memory_id] for memory_id in ids),
            key=lambda member: (-member.weight, member.created_at, member.id),
        )
        by_wording: dict[object, list[list[str]]] = {}  # each member alone when its wording is unknown
        for member in members:
            alike = by_wording.setdefault(member.wording or member.id, [])
            against = self._apart.get(member.id, set())
            joined = next((group for group in alike if against.isdisjoint(group)), None)
            if joined is None:
                alike.append([member.id])
            else:
                joined.append(member.id)
        sides: list[tuple[list[str], set[str]]] = []  # each side's ids, and what they contradict
        for group in (group for alike in by_wording.values() for group in alike):
            contradicted = {other for memory_id in group for other in self._apart.get(memory_id, ())}
            for side, against in sides:
                if not (against & set(group)) and not (contradicted & set(side)):
                    side.extend(group)
                    against |= contradicted
                    break
            else:
                sides.append((list(group), contradicted))
        return [side for side, _ in sides]

    def clusters_by_member(self) -> Mapping[str, MemoryCluster]:
        """A read-only view of member -> cluster, updated in place by later changes (not thread-safe: the
        service reads it under its lock)."""
        for root in self._dirty:
            if not self._union.is_root(root):  # merged into another set, which is dirty too
                continue
            ids = [i for i in self._union.members_of(root) if i in self.members]
            for side in self._sides(ids):
                cluster = make_cluster([self.members[i] for i in side], self.attesters)
                for memory_id in side:
                    if cluster is None:
                        self._by_member.pop(memory_id, None)
                    else:
                        self._by_member[memory_id] = cluster
        self._dirty.clear()
        return MappingProxyType(self._by_member)

    def clusters(self) -> tuple[MemoryCluster, ...]:
        unique = {cluster.canonical.id: cluster for cluster in self.clusters_by_member().values()}
        return tuple(sorted(unique.values(), key=lambda c: (-c.corroboration_score, c.canonical.id)))


class CorroborationService:
    """Per-scope cluster cache, refreshed by aggregation passes and updated by this process's writes."""

    def __init__(
        self,
        source: AggregationSource,
        *,
        max_rows: int = 10_000,
        max_distance: int = MAX_DISTANCE,
        oppositions: Sequence[tuple[str, str]] = DEFAULT_OPPOSITIONS,
    ) -> None:
        self._source = source
        self._max_rows = max_rows
        self._max_distance = max_distance
        self._oppositions = tuple(oppositions)
        self._indexes: dict[Scope, ScopeIndex] = {}
        self._results: dict[Scope, AggregationResult] = {}
        # Changes made while a pass builds a scope's new index, replayed onto it when it is swapped in.
        self._journal: dict[Scope, list[tuple[str, tuple[object, ...]]]] = {}
        # One pass per scope at a time, so a pass working from an older snapshot never replaces a newer index.
        self._pass_locks: dict[Scope, threading.Lock] = {}
        self._lock = threading.Lock()

    def run_pass(self, scope: Scope) -> AggregationResult:
        with self._pass_lock(scope):
            return self._run_pass(scope)

    def _pass_lock(self, scope: Scope) -> threading.Lock:
        with self._lock:
            return self._pass_locks.setdefault(scope, threading.Lock())

    def _run_pass(self, scope: Scope) -> AggregationResult:
        started = time.perf_counter()
        with self._lock:
            self._journal[scope] = []
        try:
            rows = self._source.aggregation_rows(scope, self._max_rows)
            # Negations and swapped parts are judged on the write path, against a memory's neighbours: over
            # a whole scope their look tokenises every row (1.9 s for 20,000 synthetic memories, against
            # 0.04 s without). What it found is in the store's open contradictions.
            contradictions = detect_contradictions(
                [ContradictionInput(row.id, row.content, row.created_at) for row in rows],
                self._oppositions,
                negations=False,
            )
            apart = [
                *self._source.open_contradiction_pairs(scope),
                *((found.older_id, found.newer_id) for found in contradictions),
            ]
            index = ScopeIndex.build(
                cluster_members(rows), self._source.attesters(scope), self._max_distance, apart
            )
        except BaseException:
            with self._lock:
                self._journal.pop(scope, None)
            raise
        clusters = index.clusters()
        result = AggregationResult(
            scope=scope,
            clusters=clusters,
            contradictions=tuple(contradictions),
            corroborated_count=sum(1 for cluster in clusters if cluster.corroboration_score > 0),
            elapsed_ms=(time.perf_counter() - started) * 1000,
            rows=len(rows),
            finished_at=datetime.now(UTC),
        )
        with self._lock:
            for operation, arguments in self._journal.pop(scope, []):
                getattr(index, operation)(*arguments)
            self._indexes[scope] = index
            self._results[scope] = result
        return result

    def _apply(self, scope: Scope, operation: str, *arguments: object) -> None:
        """Apply a change to the scope's live index, and journal it for a pass in progress. Caller holds the lock."""
        index = self._indexes.get(scope)
        if index is not None:
            getattr(index, operation)(*arguments)
        if scope in self._journal:
            self._journal[scope].append((operation, arguments))

    def run_all(self) -> list[AggregationResult]:
        return [self.run_pass(scope) for scope in self._source.scopes()]

    def clusters_for(self, reach: Reach, memory_ids: Sequence[str]) -> dict[str, MemoryCluster]:
        """The clusters of these memories, in each scope ``reach`` reads."""
        found: dict[str, MemoryCluster] = {}
        for scope in scopes_of(reach):
            found |= self._clusters_in(scope, [i for i in memory_ids if i not in found])
        return found

    def _clusters_in(self, scope: Scope, memory_ids: Sequence[str]) -> dict[str, MemoryCluster]:
        """The clusters of these memories (looked up under the lock: other threads update the index)."""
        if not memory_ids:
            return {}
        with self._lock:
            index = self._indexes.get(scope)
            if index is not None:
                return _lookup(index, memory_ids)
        with self._pass_lock(scope):  # the first recall in a scope this process has not aggregated yet
            with self._lock:
                built = scope in self._indexes
            if not built:
                self._run_pass(scope)
        with self._lock:
            return _lookup(self._indexes[scope], memory_ids)

    def last_result(self, scope: Scope) -> AggregationResult | None:
        with self._lock:
            return self._results.get(scope)

    def observe(self, scope: Scope, member: ClusterMember) -> None:
        with self._lock:
            self._apply(scope, "add", member)

    def attest(self, scope: Scope, memory_id: str, agent_id: str) -> None:
        with self._lock:
            self._apply(scope, "attest", memory_id, agent_id)

    def keep_apart(self, scope: Scope, left_id: str, right_id: str) -> None:
        """Two memories of ``scope`` found to contradict each other corroborate nothing, even as
        near-duplicates (``ScopeIndex.keep_apart``)."""
        with self._lock:
            self._apply(scope, "keep_apart", left_id, right_id)

    def retire(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        with self._lock:
            self._apply(scope, "retire", list(memory_ids))

    def set_weights(self, scope: Scope, weights: Mapping[str, float]) -> None:
        with self._lock:
            for memory_id, weight in weights.items():
                self._apply(scope, "set_weight", memory_id, weight)


def _lookup(index: ScopeIndex, memory_ids: Sequence[str]) -> dict[str, MemoryCluster]:
    by_member = index.clusters_by_member()
    return {memory_id: by_member[memory_id] for memory_id in memory_ids if memory_id in by_member}
