"""The reports behind contextual feedback weights: each memory's credits in the current reports and the
reporting sessions' queries, read for a recall's candidates and kept until a report changes them.

A recall asks for the weights of its candidates. Which memories of a scope any report credits is read once
per scope (one column) and kept up to date: most candidates were never credited, and their weight is known
without a read. The credits of the others are read once (one query for the memories not yet held) and the
sessions behind them once (their queries, embedded again when another embedder made them, only when first
needed); each candidate's reports are then replayed with their
closeness to the query (``retrieval.outcomes.contextual_weight``). When a report is made, by any process,
the next recall reads only the rows it wrote (by row version) and updates what it holds.

What is held is bounded: the least recently used memories and sessions are dropped past
``max_held_credits`` credits and ``max_held_queries`` queries, and a memory keeps its newest
``max_credits_per_memory`` credits. For a query, the newest ``max_reports_per_memory`` reports that
count for it (closeness above 0) are replayed: an older one has long been outweighed by the moving average.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from retrieval.models.embedders.base import Embedder
from retrieval.models.embedders.sentence_transformers import same_query_vectors
from retrieval.outcomes import (
    NAMED_ROLES,
    Closeness,
    CreditedReport,
    FeedbackStep,
    WeightPolicy,
    contextual_weight,
    with_credit,
)
from retrieval.text import cached_term_set, term_set
from storage.forgetting import WITHHELD
from storage.records import CreditedSession, MemoryRecord, ReportQueries, Scope

# From this closeness two queries may be one task said otherwise ("ship" for "deploy": closeness 0.67 with
# MiniLM, a review), and a rival must say the query's own word for a report to be set apart; below it they
# ask about two things (``set_apart``).
PARAPHRASE_CLOSENESS = 0.5
MAX_REPORTS_PER_MEMORY = 64
MAX_CREDITS_PER_MEMORY = 256
MAX_HELD_CREDITS = 500_000  # about 100 MB of credits at most
MAX_HELD_QUERIES = 40_000  # reported queries whose embeddings are held (1.5 KB each at 384 dimensions)
MAX_HELD_CREDITED = 500_000  # ids of credited memories held, over every scope (about 60 MB at most)
# A report rewrites its session's rows: past this many changed rows since the last read, dropping what
# is held costs less than applying the changes one by one.
MAX_CHANGES_APPLIED = 20_000


class FeedbackSource(Protocol):
    """What the index reads (``storage.store.MemoryStore`` implements it)."""

    def feedback_version(self) -> int: ...

    def credited_memories(self, scope: Scope) -> set[str]: ...

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
    far: int = 0  # its reports about tasks too far from this query to count for it (closeness 0)
    set_apart: int = 0  # of those, the reports that named it for a task it is set apart from (``set_apart``)


@dataclass
class _Session:
    """A reported session's queries, and their vectors by the running embedder once computed."""

    queries: ReportQueries | None
    vectors: np.ndarray | None = None
    embedded: bool = False
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = max(1, len(self.queries.queries) if self.queries is not None else 0)


def set_apart(
    asked: frozenset[str],
    reporting: str | None,
    said: frozenset[str],
    rival_says: Callable[[str], bool],
    *,
    paraphrase: bool = True,
) -> bool:
    """Whether a memory (its content terms ``said``) is about what set the ``reporting`` query apart from
    the one ``asked`` (content terms): the reporting query has a word this one lacks and the memory says
    it, while this one has a word the reporting one lacks, the memory says none of them, and a rival says
    it (``rival_says``, by root: another memory of the recall that shares at least as many of this query's
    words as the memory does). A memory named helpful for "how do I run the backend tests" ("Backend tests
    run with make test") is no answer to "how do I run the frontend tests", however close the two
    questions read (cosine 0.90 with MiniLM): a trial saw it lifted above the frontend's own memory, which
    matched the question better. Without such a rival the new word reads as the same task said otherwise
    ("ship" for "deploy", "page" for "on call"), even when some memory says it in passing ("We ship a
    release every second Friday"): a later trial saw the memory named helpful for "how do I deploy harbor
    to staging" lose its lift for "how do I ship harbor to staging", under a memory its session only
    showed. A rival is looked for only between queries that may read as a ``paraphrase`` of each other
    (``PARAPHRASE_CLOSENESS`` or closer): two that are less close ask about two things, and the word this one adds is
    its own task's whether or not a memory says it as the query does ("vpn for staging" against "deploy
    billing to staging", closeness 0.18 on the offline backend, and the VPN memory says "OpenVPN": a
    trial saw the billing deploy memory lifted over it)."""
    if reporting is None:
        return False
    mine, theirs, memory = _roots(asked), _roots(cached_term_set(reporting)), _roots(said)
    only_theirs, only_asked = theirs - mine, mine - theirs
    if not (memory & only_theirs) or memory & only_asked or not only_asked:
        return False
    return not paraphrase or any(map(rival_says, only_asked))


@functools.lru_cache(maxsize=8192)  # a recall's memories and queries, read for each of their credits
def _roots(terms: frozenset[str]) -> frozenset[str]:
    """Content terms compared by their first six letters once a light stem's ends agree ("applied" ->
    "appli" is "apply", "named" -> "nam" is "name"): "redelivered" and "redelivery" are one word here."""
    roots = set()
    for term in terms:
        if term.endswith("i"):
            term = term[:-1] + "y"
        roots.add(term.rstrip("e")[:6] or term)
    return frozenset(roots)


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
        max_credits_per_memory: int = MAX_CREDITS_PER_MEMORY,
        max_held_credits: int = MAX_HELD_CREDITS,
        max_held_queries: int = MAX_HELD_QUERIES,
        max_held_credited: int = MAX_HELD_CREDITED,
    ) -> None:
        self._source = source
        self._embedder = embedder
        self.closeness = closeness
        self.policy = policy
        self._max_reports = max_reports_per_memory
        self._max_credits = max(max_credits_per_memory, max_reports_per_memory)
        self._max_held_credits = max_held_credits
        self._max_held_queries = max_held_queries
        self._version: int | None = None
        self._credits: OrderedDict[tuple[Scope, str], list[CreditedSession]] = OrderedDict()
        self._sessions: OrderedDict[tuple[Scope, str], _Session] = OrderedDict()
        # Per scope, the memories some report credits (None: too many to hold, every candidate is read).
        self._credited: OrderedDict[Scope, set[str] | None] = OrderedDict()
        self._held_credited = 0
        self._max_held_credited = max_held_credited
        self._held_credits = 0
        self._held_queries = 0
        self._pinned: tuple[str, int] | None = None  # (recall, the table version it saw)
        self._lock = threading.Lock()
        self._catching = threading.Lock()  # held by the one thread reading what reports changed
        self.reads = 0  # credit and session reads from the store (tests read this)

    def weights(
        self,
        scope: Scope,
        query_vector: np.ndarray | Callable[[], np.ndarray] | None,
        memories: Sequence[MemoryRecord],
        *,
        recall_id: str | None = None,
        query_text: str | None = None,
        rivals: Sequence[MemoryRecord] = (),
    ) -> dict[str, ContextWeight]:
        """Each memory's weight for the query whose embedding is ``query_vector`` (or what calling it
        returns: the query is embedded only when a report of a session with queries counts for one of
        ``memories``, so a recall in a scope without such credit embeds nothing here). Calls with the same
        ``recall_id`` check the table version once (the stages of one recall see one version). With the
        query's ``query_text``, a report that named a memory does not count for it when it says what set
        the reporting query apart from this one (``set_apart``) while another of ``memories`` or
        ``rivals`` (the recall's other candidates) says what sets this one apart."""
        seen = self._catch_up(recall_id)
        credits = self._credits_of(scope, [memory.id for memory in memories], seen)
        entries = self._sessions_of(
            scope, list(dict.fromkeys(c.session_id for found in credits.values() for c in found)), seen
        )
        sessions = {session_id: self._vectors(entry) for session_id, entry in entries.items()}
        asked = term_set(query_text) if query_text else None

        @functools.cache  # the query's vector, embedded once when first asked for
        def query() -> np.ndarray | None:
            found = query_vector() if callable(query_vector) else query_vector
            return None if found is None else np.asarray(found, dtype=np.float32)

        cosines: dict[str, np.ndarray | None] = {}  # per session: each of its queries' cosine with this one
        closeness: dict[tuple[str, int | None, bool], float] = {}

        def closeness_of(credited: CreditedSession) -> float:
            key = (credited.session_id, credited.credit.query_index, credited.credit.role not in NAMED_ROLES)
            if key not in closeness:
                vectors = sessions.get(credited.session_id)
                if credited.session_id not in cosines:
                    cosines[credited.session_id] = (
                        None if vectors is None or not len(vectors) or query() is None else vectors @ query()
                    )
                closeness[key] = self._closeness(credited, vectors, cosines[credited.session_id])
            return closeness[key]

        def compared(credited: CreditedSession) -> bool:
            """Whether the report's closeness came from comparing its session's queries with this one (a
            session with no recorded query counts everywhere, so its named memories take only the global
            weight's step: one report made without recalling must not pin or bury a memory for every task)."""
            vectors = sessions.get(credited.session_id)
            return vectors is not None and len(vectors) > 0

        def reporting_query(credited: CreditedSession) -> str | None:
            """The query of the session whose closeness counts for this credit (the one that showed the
            memory; for a memory the agent named, the closest of the session's queries)."""
            entry = entries.get(credited.session_id)
            texts = entry.queries.queries if entry is not None and entry.queries is not None else ()
            index = credited.credit.query_index
            if index is None or index >= len(texts):
                found = cosines.get(credited.session_id)
                index = int(np.argmax(found)) if found is not None and len(found) == len(texts) else None
            return texts[index] if index is not None and texts and texts[index] != WITHHELD else None

        asked_roots = _roots(asked) if asked is not None else frozenset()

        def shared(memory: MemoryRecord) -> int:
            """How many of this query's words (by root) ``memory`` says."""
            return len(_roots(cached_term_set(memory.content)) & asked_roots)

        @functools.cache
        def best_saying() -> dict[str, int]:
            """For each root of this query, the most of the query's words a memory of the recall (weighed
            here or a rival) shares among those that say it."""
            best: dict[str, int] = {}
            for other in {m.id: m for m in (*memories, *rivals)}.values():
                count = shared(other)
                for root in _roots(cached_term_set(other.content)) & asked_roots:
                    best[root] = max(best.get(root, 0), count)
            return best

        def rival_says(memory: MemoryRecord) -> Callable[[str], bool]:
            # A memory that says a root this memory does not (``set_apart`` checks that first) is another.
            own = shared(memory)
            return lambda root: best_saying().get(root, -1) >= own

        weights = {}
        for memory in memories:
            scored, set_aside = [], 0
            for credited in credits.get(memory.id, []):
                found = closeness_of(credited)  # (the session's cosines, which reporting_query reads)
                # The agent's word that a memory helped with one task does not lift it for a task set apart
                # from it, nor, then, its word that the memory misled there (a review: one older misleading
                # report then buried a memory four later reports named helpful). A misleading report alone
                # stands for the task said otherwise: a memory wrong about what it says is no better an
                # answer to a neighbour (a trial saw one come first again for a reworded question). A
                # context's small shares are left as they are (set apart too, the session-only arm of the
                # feedback experiment lost 0.014 of related R@5 offline, docs/feedback.md).
                if (
                    found > 0.0
                    and asked is not None
                    and credited.credit.role == "helpful"
                    and set_apart(
                        asked,
                        reporting_query(credited),
                        cached_term_set(memory.content),
                        rival_says(memory),
                        paraphrase=found >= PARAPHRASE_CLOSENESS,
                    )
                ):
                    found, set_aside = 0.0, set_aside + 1
                scored.append((credited, found))
            if set_aside:
                set_aside += sum(c.credit.role == "misleading" and found > 0.0 for c, found in scored)
                scored = [(c, 0.0 if c.credit.role == "misleading" else found) for c, found in scored]
            # Of the reports counted far below, those set apart here (their queries were compared).
            apart = set_aside if set_aside and query() is not None else 0
            close = [
                CreditedReport(c.session_id, c.credit, found, by_query=compared(c))
                for c, found in scored
                if found > 0.0
            ]
            # Reports whose queries were compared with this one and found too far (not those with no query
            # to compare, nor any when this query has no vector: then nothing was compared).
            far = sum(1 for c, found in scored if found <= 0.0 and compared(c) and query() is not None)
            counted = close[-self._max_reports :]
            if not counted:
                weights[memory.id] = ContextWeight(1.0, memory.weight, (), far, apart)
                continue
            weight, steps = contextual_weight(counted, self.policy, protection_tier=memory.protection_tier)
            weights[memory.id] = ContextWeight(weight, memory.weight, steps, far, apart)
        return weights

    def _closeness(
        self, credited: CreditedSession, vectors: np.ndarray | None, cosines: np.ndarray | None
    ) -> float:
        """How much one report counts for this query: its session's query that showed the memory (the
        closest of the session's queries for a memory the agent named) against this query, whose cosines
        with the session's queries are ``cosines``."""
        if vectors is None or not len(vectors):
            # No query of the session is known: an agent's explicit word counts everywhere; a report made
            # before per-memory credit (which moved every memory shown) nowhere in particular.
            return 1.0 if credited.credit.role in NAMED_ROLES else 0.0
        if cosines is None:
            return 0.0
        index = credited.credit.query_index
        cosine = cosines[index] if index is not None and index < len(cosines) else cosines.max()
        return self.closeness(float(cosine))

    # -- what is held, and catching up ----------------------------------------------------------------

    def _credits_of(
        self, scope: Scope, memory_ids: Sequence[str], seen: int
    ) -> dict[str, list[CreditedSession]]:
        """The credits of ``memory_ids``: held, or read and held when what is held is of version ``seen``
        (the version caught up to just before: rows read after it are at least that new, and a report
        landing in between is applied again, idempotently, by the next catch-up)."""
        credited = self._credited_in(scope, seen)
        found: dict[str, list[CreditedSession]] = {}
        missing = []
        with self._lock:
            for memory_id in dict.fromkeys(memory_ids):
                held = self._credits.get((scope, memory_id))
                if held is None and credited is not None and memory_id not in credited:
                    found[memory_id] = []  # no report credits it: nothing to read
                elif held is None:
                    missing.append(memory_id)
                else:
                    self._credits.move_to_end((scope, memory_id))
                    found[memory_id] = held
        if missing:
            read = {
                m: credits[-self._max_credits :]
                for m, credits in self._source.credits_for(scope, missing).items()
            }
            self.reads += 1
            with self._lock:
                if seen == self._version:  # else the next call catches up and reads them again
                    for memory_id, credits in read.items():
                        self._hold_credits((scope, memory_id), credits)
                    self._evict()
            found.update(read)
        return found

    def _credited_in(self, scope: Scope, seen: int) -> set[str] | None:
        """The memories of ``scope`` some report credits: held, or read (and held when what is held is of
        version ``seen``, as for credits). None when the scope has too many to hold."""
        with self._lock:
            if scope in self._credited:
                self._credited.move_to_end(scope)
                return self._credited[scope]
        read: set[str] | None = self._source.credited_memories(scope)
        self.reads += 1
        if read is not None and len(read) > self._max_held_credited:
            read = None
        with self._lock:
            if seen == self._version and scope not in self._credited:
                self._credited[scope] = read
                self._held_credited += len(read) if read is not None else 0
                self._evict()
        return read

    def _sessions_of(self, scope: Scope, session_ids: Sequence[str], seen: int) -> dict[str, _Session]:
        held: dict[str, _Session] = {}
        missing = []
        with self._lock:
            for session_id in session_ids:
                entry = self._sessions.get((scope, session_id))
                if entry is None:
                    missing.append(session_id)
                else:
                    self._sessions.move_to_end((scope, session_id))
                    held[session_id] = entry
        if missing:
            read = self._source.report_queries(scope, missing)
            self.reads += 1
            fresh = {session_id: _Session(read.get(session_id)) for session_id in missing}
            with self._lock:
                if seen == self._version:  # a report since may have replaced one of these
                    for session_id, entry in fresh.items():
                        self._hold_session((scope, session_id), entry)
                    self._evict()
            held.update(fresh)
        return held

    def _vectors(self, entry: _Session) -> np.ndarray | None:
        """The session's query vectors by the running embedder: as stored when it made them, else
        embedded again once (reports made by the CLI on the offline backend, or before a model change, and
        the offline backend's always: ``same_query_vectors``)."""
        if entry.embedded:
            return entry.vectors
        queries = entry.queries
        vectors: np.ndarray | None = None
        if queries is not None and queries.queries:
            stored = queries.vectors
            as_stored = (
                same_query_vectors(queries.embedder, self._embedder.name)
                and stored is not None
                and stored.shape == (len(queries.queries), self._embedder.dimension)
            )
            # A query a purge withheld counts for no query: zeros (its stored vector is zeroed since
            # 2026-12-02, kept before; made again from the text, it would be the placeholder's).
            vectors = np.vstack(
                [
                    np.zeros(self._embedder.dimension, dtype=np.float32)
                    if query == WITHHELD
                    else stored[index]
                    if as_stored and stored is not None
                    else self._embedder.embed_query(query)
                    for index, query in enumerate(queries.queries)
                ]
            )
        entry.vectors, entry.embedded = vectors, True
        return vectors

    def _catch_up(self, recall_id: str | None) -> int:
        """Apply the rows reports wrote since what is held was read (or drop it all, past a limit);
        returns the table version caught up to (one check per recall: the stages of one recall see one)."""
        with self._lock:
            if recall_id is not None and self._pinned is not None and self._pinned[0] == recall_id:
                return self._pinned[1]
        version = self._source.feedback_version()
        with self._lock:
            held = self._version
            if recall_id is not None:
                self._pinned = (recall_id, version)
            if held == version:
                return version
            if held is None:
                self._version = version
                return version
        # One catch-up at a time: when a report lands, every recall in flight finds the version changed,
        # and each reading the changes (30 at once under load) kept LanceDB busy for the write that
        # waited behind them. The others wait here and find the work done.
        with self._catching:
            with self._lock:
                caught_up = self._version
            assert caught_up is not None
            if caught_up >= version:
                # Another thread caught up meanwhile, to this recall's version or past it.
                if recall_id is not None:
                    with self._lock:
                        self._pinned = (recall_id, caught_up)
                return caught_up
            # Behind this recall's version (nobody caught up, or another thread did to an older one: a
            # report landed after its read began): read what changed since what is held. Returning the
            # older version would hide from this recall a report that committed before it began.
            credits, sessions = self._source.feedback_changed_since(caught_up)
            self.reads += 1
            return self._apply(version, credits, sessions)

    def _apply(
        self,
        version: int,
        credits: list[tuple[Scope, CreditedSession]],
        sessions: list[tuple[Scope, ReportQueries]],
    ) -> int:
        with self._lock:
            if len(credits) + len(sessions) > MAX_CHANGES_APPLIED:
                self._credits.clear()
                self._sessions.clear()
                self._credited.clear()
                self._held_credits = self._held_queries = self._held_credited = 0
            else:
                for scope, credited in credits:
                    known = self._credited.get(scope)
                    key = (scope, credited.credit.memory_id)
                    if (
                        known is not None
                        and credited.credit.share > 0
                        and credited.credit.memory_id not in known
                    ):
                        known.add(credited.credit.memory_id)  # a share set to 0 may stay: it is only read
                        self._held_credited += 1
                        # No report credited it before: the rows applied here are all its credits, so
                        # they are held at once (else the next recall that finds it would read them
                        # again from the table, under load a scan per report that credits new memories).
                        self._hold_credits(key, self._credits.get(key, []))
                    if key in self._credits:
                        replaced = with_credit(self._credits[key], credited.session_id, credited)
                        self._hold_credits(key, replaced[-self._max_credits :])
                for scope, queries in sessions:  # embedded when first needed, not here
                    self._hold_session((scope, queries.session_id), _Session(queries))
                self._evict()
            self._version = version
        return version

    def _hold_credits(self, key: tuple[Scope, str], credits: list[CreditedSession]) -> None:
        old = self._credits.get(key)
        self._held_credits += len(credits) - (len(old) if old is not None else 0)
        self._credits[key] = credits
        self._credits.move_to_end(key)

    def _hold_session(self, key: tuple[Scope, str], entry: _Session) -> None:
        old = self._sessions.get(key)
        self._held_queries += entry.size - (old.size if old is not None else 0)
        self._sessions[key] = entry
        self._sessions.move_to_end(key)

    def _evict(self) -> None:
        while self._held_credits > self._max_held_credits and self._credits:
            _, dropped = self._credits.popitem(last=False)
            self._held_credits -= len(dropped)
        while self._held_queries > self._max_held_queries and self._sessions:
            _, entry = self._sessions.popitem(last=False)
            self._held_queries -= entry.size
        while self._held_credited > self._max_held_credited and self._credited:
            _, ids = self._credited.popitem(last=False)
            self._held_credited -= len(ids) if ids is not None else 0
