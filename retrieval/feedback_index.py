"""The reports behind contextual feedback weights: each memory's credits in the current reports and the
reporting sessions' query vectors, read for a recall's candidates and kept until a report changes them.

A recall asks for the weights of its candidates. Their credits are read once (one indexed query for the
memories not yet held) and the sessions behind them once (their query vectors, embedded again when
another embedder made them); each candidate's reports are then replayed with their closeness to the
query (``retrieval.outcomes.contextual_weight``). When a report is made, by any process, the next recall
reads only the rows it wrote (by row version) and updates what it holds. What is held is bounded: the
least recently used memories and sessions are dropped, and at most ``max_reports_per_memory`` reports
per memory (its newest) count for a query: an older one has long been outweighed by the moving average.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from retrieval.embedders.base import Embedder
from retrieval.outcomes import Closeness, CreditedReport, FeedbackStep, WeightPolicy, contextual_weight
from storage.records import CreditedSession, MemoryRecord, ReportQueries, Scope

MAX_REPORTS_PER_MEMORY = 64
MAX_MEMORIES = 50_000  # memories whose credits are held (about 200 bytes per credit)
MAX_SESSIONS = 10_000  # reported sessions whose query vectors are held (one vector per distinct query)
# A report rewrites its session's rows: past this many changed rows since the last read, dropping what
# is held costs less than applying the changes one by one.
MAX_CHANGES_APPLIED = 20_000


class FeedbackSource(Protocol):
    """What the index reads (``storage.store.MemoryStore`` implements it)."""

    def feedback_version(self) -> int: ...

    def credits_for(
        self, scope: Scope, memory_ids: Sequence[str] | None = None, *, session_id: str | None = None
    ) -> dict[str, list[CreditedSession]]: ...

    def report_queries(self, scope: Scope, session_ids: Sequence[str]) -> dict[str, ReportQueries]: ...

    def feedback_changed_since(
        self, version: int
    ) -> tuple[list[tuple[Scope, CreditedSession]], list[tuple[Scope, ReportQueries]]]: ...


@dataclass(frozen=True)
class ContextWeight:
    """A memory's weight for one query, its global weight, and the reports that moved it."""

    weight: float
    global_weight: float
    steps: tuple[FeedbackStep, ...]


class FeedbackIndex:
    """Contextual feedback weights for recalls."""

    def __init__(
        self,
        source: FeedbackSource,
        embedder: Embedder,
        *,
        closeness: Closeness,
        policy: WeightPolicy,
        max_reports_per_memory: int = MAX_REPORTS_PER_MEMORY,
        max_memories: int = MAX_MEMORIES,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self._source = source
        self._embedder = embedder
        self.closeness = closeness
        self.policy = policy
        self._max_reports = max_reports_per_memory
        self._max_memories = max_memories
        self._max_sessions = max_sessions
        self._version: int | None = None
        self._credits: OrderedDict[tuple[Scope, str], list[CreditedSession]] = OrderedDict()
        # Per session: its queries' vectors by the running embedder (None: it has no queries).
        self._sessions: OrderedDict[tuple[Scope, str], np.ndarray | None] = OrderedDict()
        self._lock = threading.Lock()
        self.reads = 0  # credit and session reads from the store (tests read this)

    def weights(
        self, scope: Scope, query_vector: np.ndarray | None, memories: Sequence[MemoryRecord]
    ) -> dict[str, ContextWeight]:
        """Each memory's weight for the query whose embedding is ``query_vector``."""
        credits = self._credits_of(scope, [memory.id for memory in memories])
        sessions = self._vectors_of(
            scope, list(dict.fromkeys(c.session_id for found in credits.values() for c in found))
        )
        query = None if query_vector is None else np.asarray(query_vector, dtype=np.float32)
        cosines: dict[str, np.ndarray | None] = {}  # per session: each of its queries' cosine with this one
        closeness: dict[tuple[str, int | None, bool], float] = {}

        def closeness_of(credited: CreditedSession) -> float:
            key = (credited.session_id, credited.credit.query_index, credited.credit.role == "context")
            if key not in closeness:
                if credited.session_id not in cosines:
                    vectors = sessions.get(credited.session_id)
                    cosines[credited.session_id] = (
                        None if vectors is None or query is None or not len(vectors) else vectors @ query
                    )
                closeness[key] = self._closeness(credited, sessions.get(credited.session_id), cosines[credited.session_id])
            return closeness[key]

        weights = {}
        for memory in memories:
            found = credits.get(memory.id, [])
            if not found:
                weights[memory.id] = ContextWeight(1.0, memory.weight, ())
                continue
            reports = [
                CreditedReport(c.session_id, c.credit, closeness_of(c)) for c in found[-self._max_reports :]
            ]
            weight, steps = contextual_weight(reports, self.policy, protection_tier=memory.protection_tier)
            weights[memory.id] = ContextWeight(weight, memory.weight, steps)
        return weights

    def _closeness(
        self, credited: CreditedSession, vectors: np.ndarray | None, cosines: np.ndarray | None
    ) -> float:
        """How much one report counts for this query: its session's query that showed the memory (every
        query of the session for a memory named without being shown) against this query, whose cosines
        with the session's queries are ``cosines``."""
        if vectors is None or not len(vectors):
            # No query of the session is known: an agent's explicit word counts everywhere; a report made
            # before per-memory credit (which moved every memory shown) nowhere in particular.
            return 1.0 if credited.credit.role != "context" else 0.0
        if cosines is None:
            return 0.0
        index = credited.credit.query_index
        return self.closeness(float(cosines[index] if index is not None and index < len(cosines) else cosines.max()))

    # -- what is held, and catching up ----------------------------------------------------------------

    def _credits_of(self, scope: Scope, memory_ids: Sequence[str]) -> dict[str, list[CreditedSession]]:
        self._catch_up()
        found: dict[str, list[CreditedSession]] = {}
        missing = []
        with self._lock:
            for memory_id in dict.fromkeys(memory_ids):
                held = self._credits.get((scope, memory_id))
                if held is None:
                    missing.append(memory_id)
                else:
                    self._credits.move_to_end((scope, memory_id))
                    found[memory_id] = held
        if missing:
            version = self._source.feedback_version()
            read = self._source.credits_for(scope, missing)
            self.reads += 1
            with self._lock:
                if version == self._version:  # else the next call catches up and reads them again
                    for memory_id, credits in read.items():
                        self._credits[(scope, memory_id)] = credits
                    while len(self._credits) > self._max_memories:
                        self._credits.popitem(last=False)
            found.update(read)
        return found

    def _vectors_of(self, scope: Scope, session_ids: Sequence[str]) -> dict[str, np.ndarray | None]:
        found: dict[str, np.ndarray | None] = {}
        missing = []
        with self._lock:
            for session_id in session_ids:
                if (scope, session_id) in self._sessions:
                    self._sessions.move_to_end((scope, session_id))
                    found[session_id] = self._sessions[(scope, session_id)]
                else:
                    missing.append(session_id)
        if missing:
            read = self._source.report_queries(scope, missing)
            self.reads += 1
            vectors = {session_id: self._vectors(read.get(session_id)) for session_id in missing}
            with self._lock:
                for session_id, held in vectors.items():
                    self._sessions[(scope, session_id)] = held
                while len(self._sessions) > self._max_sessions:
                    self._sessions.popitem(last=False)
            found.update(vectors)
        return found

    def _vectors(self, queries: ReportQueries | None) -> np.ndarray | None:
        """The session's query vectors by the running embedder: as stored when it made them, else
        embedded again (reports made by the CLI on the offline backend, or before a model change)."""
        if queries is None or not queries.queries:
            return None
        stored = queries.vectors
        if (
            queries.embedder == self._embedder.name
            and stored is not None
            and stored.shape == (len(queries.queries), self._embedder.dimension)
        ):
            return stored
        return np.vstack([self._embedder.embed_query(query) for query in queries.queries])

    def _catch_up(self) -> None:
        """Apply the rows reports wrote since what is held was read (or drop it all, past a limit)."""
        version = self._source.feedback_version()
        with self._lock:
            held = self._version
            if held == version:
                return
            if held is None:
                self._version = version
                return
        credits, sessions = self._source.feedback_changed_since(held)
        self.reads += 1
        vectors = {(scope, queries.session_id): self._vectors(queries) for scope, queries in sessions}
        with self._lock:
            if self._version != held:  # another thread caught up meanwhile
                return
            if len(credits) + len(sessions) > MAX_CHANGES_APPLIED:
                self._credits.clear()
                self._sessions.clear()
            else:
                for scope, credited in credits:
                    key = (scope, credited.credit.memory_id)
                    if key in self._credits:
                        self._credits[key] = _with(self._credits[key], credited)
                for key, held_vectors in vectors.items():  # new reports are the likeliest to be asked for
                    self._sessions[key] = held_vectors
                    self._sessions.move_to_end(key)
                while len(self._sessions) > self._max_sessions:
                    self._sessions.popitem(last=False)
            self._version = version


def _with(credits: list[CreditedSession], changed: CreditedSession) -> list[CreditedSession]:
    """A memory's credits with one session's credit replaced (share 0: removed), in replay order."""
    kept = [credited for credited in credits if credited.session_id != changed.session_id]
    if changed.credit.share > 0:
        kept.append(changed)
        kept.sort(key=lambda credited: credited.replay_key)
    return kept
