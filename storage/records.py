"""Plain row types the rest of the project uses; no LanceDB or pyarrow here."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MemoryKind = Literal["fact", "episode", "artifact"]
MemoryStatus = Literal["active", "superseded", "retracted", "purged"]
ProtectionTier = Literal["standard", "immutable", "protected", "ephemeral"]
OutcomeLabel = Literal["success", "failure", "partial"]
RetrievalPurpose = Literal["recall", "explain"]
# Who may read a memory: everyone in its org, everyone in its project (the default), only the agent
# that wrote it, or only that agent in the session it was written in.
Visibility = Literal["org", "project", "agent", "session"]
VISIBILITIES: tuple[Visibility, ...] = ("org", "project", "agent", "session")
SHARED_VISIBILITIES: tuple[Visibility, ...] = ("org", "project")
# Org-visible memories belong to no project: they live on the org's shelf, a scope whose project is this
# (a project id a caller can never name: identifiers are never empty).
ORG_SHELF_PROJECT = ""
PURGED_PREVIEW = "[purged]"  # what a trace, a listing or a lineage shows of a memory a purge erased

MEMORY_KINDS: tuple[MemoryKind, ...] = ("fact", "episode", "artifact")
PROTECTION_TIERS: tuple[ProtectionTier, ...] = ("standard", "immutable", "protected", "ephemeral")
# Statuses whose rows still hold their content and vector (a purge erases both).
CONTENT_STATUSES: tuple[MemoryStatus, ...] = ("active", "superseded", "retracted")


@dataclass(frozen=True)
class Scope:
    """A tenant boundary: nothing is written across it, and only org-visible memories (kept on the org's
    shelf, ``org_shelf``) are read across projects."""

    org_id: str
    project_id: str

    @property
    def is_org_shelf(self) -> bool:
        return self.project_id == ORG_SHELF_PROJECT


def org_shelf(org_id: str) -> Scope:
    """Where the org-visible memories of ``org_id`` live, whichever project wrote them."""
    return Scope(org_id, ORG_SHELF_PROJECT)


@dataclass(frozen=True)
class Viewer:
    """Who reads: an agent's and a session's own memories are shown to that agent (in that session) only."""

    agent_id: str
    session_id: str

    @property
    def own_audiences(self) -> tuple[Audience, Audience]:
        """The private audiences it belongs to: its agent's, and its session's."""
        return Audience("agent", self.agent_id), Audience("session", self.agent_id, self.session_id)


# A reader of shared memories only (no agent is named "": identifiers are never empty): the HTML report.
SHARED_ONLY = Viewer("", "")


@dataclass(frozen=True)
class View:
    """What a reader in ``home`` may see: the home scope's project-visible memories, its own agent- and
    session-visible ones, and the org shelf. ``viewer`` None is the store's operator (every memory of the
    home scope, as a backup or an audit needs); ``with_org`` False leaves the shelf out; ``audience``
    narrows the view to the memories of one audience."""

    home: Scope
    viewer: Viewer | None = None
    with_org: bool = True
    audience: Audience | None = None  # only the memories of this audience (consolidation's reads)

    @property
    def scopes(self) -> tuple[Scope, ...]:
        if self.with_org and not self.home.is_org_shelf:
            return (self.home, org_shelf(self.home.org_id))
        return (self.home,)

    def sees(self, record: MemoryRecord) -> bool:
        return may_see(self.viewer, record) and (
            self.audience is None or audience_of(record) == self.audience
        )


# Where a read looks: one scope as it is (the write path, upkeep), or a reader's view.
Reach = Scope | View


def scopes_of(reach: Reach) -> tuple[Scope, ...]:
    return reach.scopes if isinstance(reach, View) else (reach,)


def may_see(viewer: Viewer | None, record: MemoryRecord) -> bool:
    """Whether ``viewer`` may read ``record`` (None, the operator, reads everything)."""
    return may_read(viewer, audience_of(record))


def may_read(viewer: Viewer | None, audience: Audience) -> bool:
    """Whether ``viewer`` may read the memories of ``audience``: shared ones, and its own private ones."""
    return viewer is None or not audience.private or audience in viewer.own_audiences


@dataclass(frozen=True)
class Audience:
    """Who reads a memory: its visibility, and for a private one its owner (the agent; for a session's,
    the session too). Memories of one audience may absorb, revise or contradict each other; consolidation
    never lets a private memory change what others read, or the reverse."""

    visibility: Visibility = "project"
    agent_id: str = ""
    session_id: str = ""

    @classmethod
    def of(cls, visibility: Visibility, agent_id: str, session_id: str) -> Audience:
        if visibility in SHARED_VISIBILITIES:
            return cls(visibility)
        return cls(visibility, agent_id, session_id if visibility == "session" else "")

    @property
    def private(self) -> bool:
        return self.visibility not in SHARED_VISIBILITIES


def audience_of(record: MemoryRecord) -> Audience:
    return Audience.of(record.visibility, record.agent_id, record.session_id)


def same_audience(record: MemoryRecord, other: MemoryRecord) -> bool:
    """Whether two memories are read by the same people (``Audience``)."""
    return audience_of(record) == audience_of(other)


@dataclass(frozen=True)
class MemoryRecord:
    """One stored memory, as read back (without its vector)."""

    id: str
    org_id: str
    project_id: str
    agent_id: str
    session_id: str
    episode_id: str | None
    kind: MemoryKind
    content: str
    content_hash: str
    tags: tuple[str, ...]
    protection_tier: ProtectionTier
    status: MemoryStatus
    replaced_by: str | None
    weight: float
    created_at: datetime
    updated_at: datetime
    embedder: str
    # 64-bit SimHash of the content (unsigned); None for memories stored before schema version 2.
    simhash: int | None = None
    expires_at: datetime | None = None  # ephemeral memories only
    version_of: str | None = None  # an artifact's previous version
    consolidated_at: datetime | None = None  # when consolidation last examined it
    visibility: Visibility = "project"

    @property
    def shared(self) -> bool:
        """Read by its whole project or org, not private to its agent or session."""
        return self.visibility in SHARED_VISIBILITIES

    def past_expiry(self, now: datetime) -> bool:
        """Active, and its time (the ephemeral tier) ran out by ``now``: not yet retracted by expiry."""
        return self.status == "active" and self.expires_at is not None and self.expires_at <= now

    def status_at(self, now: datetime) -> str:
        """Its status as its views show it at ``now``: "expired" when ``past_expiry`` (gone from recall and
        listings; the next maintenance round retracts it), else the stored one."""
        return "expired" if self.past_expiry(now) else self.status

    @property
    def scope(self) -> Scope:

        return Scope(self.org_id, self.project_id)


@dataclass(frozen=True)
class NewMemory:
    """A memory about to be written: the record plus its vector and full-text fields."""

    record: MemoryRecord
    # A float32 numpy row from the embedders (Arrow takes it whole, not value by value), or floats.
    vector: npt.NDArray[np.float32] | Sequence[float]
    search_text: str
    # The stored memory whose content ends ``search_text`` (the one before it in its episode), and how many
    # characters of it: a purge of that memory committed before this insert must not stay quoted in it.
    quotes: str | None = None
    quoted_chars: int = 0


@dataclass(frozen=True)
class SearchHit:
    """A memory found by one search leg: cosine similarity (vector leg) or BM25 (full-text leg). A vector
    hit from a scope copy asked for context also carries ``context``, the query's cosine with the memory's
    context vector (it and its episode neighbours; ``storage.scope_copy``)."""

    record: MemoryRecord
    score: float
    vector: npt.NDArray[np.float32] | None
    context: float | None = None


def semantic_score(cosine: float, context: float | None, context_share: float) -> float:
    """How well a memory matches a query by meaning, in [0, 1]: (1 - c) x cosine + c x the better of its
    cosine and its context cosine, floored at 0. Context can lift a memory that says little alone, never
    pull down one that says it plainly among unrelated neighbours (so it ranks as a memory without an
    episode would). The cosine alone when no context cosine is known (a scope LanceDB serves)."""
    cosine = max(0.0, cosine)
    if context is None or context_share <= 0.0:
        return cosine
    return (1.0 - context_share) * cosine + context_share * max(cosine, context)


@dataclass(frozen=True)
class AggregationRow:
    """What the aggregation job reads per active memory (``simhash`` is None for rows stored before it)."""

    id: str
    agent_id: str
    weight: float
    created_at: datetime
    simhash: int | None
    content: str


LineageAction = Literal[
    "supersede", "keep_both", "revise", "version", "reword", "retract", "purge", "restore", "expire", "amend"
]


@dataclass(frozen=True)
class LineageEvent:
    """One thing done to a memory: ``memory_id`` is acted on, ``related_id`` is the memory that replaced
    or revised it (or was kept beside it)."""

    event_id: str
    org_id: str
    project_id: str
    action: LineageAction
    memory_id: str
    related_id: str | None
    resolver: str
    reason: str
    agent_id: str
    session_id: str
    at: datetime

    @classmethod
    def new(
        cls,
        scope: Scope,
        action: LineageAction,
        memory_id: str,
        *,
        resolver: str,
        reason: str,
        agent_id: str,
        session_id: str,
        at: datetime,
        related_id: str | None = None,
    ) -> LineageEvent:
        """A new event with a fresh id."""
        return cls(
            "evt_" + secrets.token_hex(10),
            scope.org_id,
            scope.project_id,
            action,
            memory_id,
            related_id,
            resolver,
            reason,
            agent_id,
            session_id,
            at,
        )


@dataclass(frozen=True)
class ContradictionRecord:
    """Two memories that assert opposite things about one subject; open until one leaves the active set."""

    org_id: str
    project_id: str
    older_id: str
    newer_id: str
    kind: str
    detail: str
    similarity: float
    status: Literal["open", "resolved"]
    resolution: str | None
    detected_at: datetime
    resolved_at: datetime | None

    @property
    def scope(self) -> Scope:
        return Scope(self.org_id, self.project_id)

    @classmethod
    def detected(
        cls,
        scope: Scope,
        older_id: str,
        newer_id: str,
        *,
        kind: str,
        detail: str,
        similarity: float,
        at: datetime,
    ) -> ContradictionRecord:
        """A contradiction just found between two memories of ``scope``: open, unresolved."""
        return cls(
            org_id=scope.org_id,
            project_id=scope.project_id,
            older_id=older_id,
            newer_id=newer_id,
            kind=kind,
            detail=detail,
            similarity=similarity,
            status="open",
            resolution=None,
            detected_at=at,
            resolved_at=None,
        )


@dataclass(frozen=True)
class EpisodeMemberStub:
    """Just enough of an episode's member to choose siblings by time before reading whole records."""

    id: str
    episode_id: str
    created_at: datetime
    weight: float


@dataclass(frozen=True)
class EpisodeRecord:
    id: str
    org_id: str
    project_id: str
    title: str | None
    agent_id: str
    session_id: str
    started_at: datetime
    last_seen_at: datetime


@dataclass(frozen=True)
class RetrievalRecord:
    """What one recall (or explain) did: the context it built and the full trace, for explain and outcomes."""

    retrieval_id: str
    org_id: str
    project_id: str
    session_id: str
    agent_id: str
    query: str
    purpose: RetrievalPurpose
    created_at: datetime
    top_k: int
    char_budget: int
    context_ids: tuple[str, ...]
    trace_json: str


@dataclass(frozen=True)
class AbLogRow:
    """One candidate of one retrieval, with the columns of the feedback A/B log. ``relevance_score`` is
    the raw relevance: the vector similarity when the vector leg found the memory, else its keyword (BM25)
    score (``relevance_kind`` says which; rows logged before schema 6 hold the boosted score there and no
    kind). ``boosted_score`` is what feedback multiplies (relevance after rerank, attribution and
    instruction factors, plus the corroboration boost, times decay); ``rerank_score`` the reranker's.
    ``feedback_weight`` is the memory's global EMA weight at recall time; ``context_weight`` the weight
    the ranking applied (the reports of sessions whose queries were close to this one);
    ``weighted_score`` is boosted_score times the applied weight (boosted_score alone when weighting is
    off). An episode sibling (``source`` "sibling") has no ranks."""

    retrieval_id: str
    session_id: str
    org_id: str
    project_id: str
    query_text: str
    observation_id: str
    relevance_score: float
    feedback_weight: float
    weighted_score: float
    unweighted_rank: int | None
    weighted_rank: int | None
    weighting_enabled: bool
    created_at: datetime
    context_weight: float | None = None
    boosted_score: float = 0.0
    rerank_score: float | None = None
    relevance_kind: str | None = None
    source: str | None = None


CreditRole = Literal["helpful", "misleading", "context", "used"]  # used: the session-end hook saw it used


@dataclass(frozen=True)
class MemoryCredit:
    """How one memory moves with one session's report: ``share`` of a full feedback step towards the
    outcome ``score`` (helpful memories towards 1, misleading ones towards 0, the rest of the session's
    contexts towards the session's score). ``query_index`` names the report's query under which the
    session was shown it; None for a memory the agent named (helpful or misleading), whose report counts
    as close as the closest of the session's queries."""

    memory_id: str
    role: CreditRole
    share: float
    score: float
    query_index: int | None = None


@dataclass(frozen=True)
class CreditedSession:
    """One memory's credit in one session's current report, as weights replay it: in the order sessions
    first reported (``first_reported_at``, then ``session_id``)."""

    session_id: str
    first_reported_at: datetime
    revision: int
    credit: MemoryCredit

    @property
    def replay_key(self) -> tuple[datetime, str]:
        return (self.first_reported_at, self.session_id)


@dataclass(frozen=True)
class TimeWindow:
    """Memories whose time (when it happened, if the writer said, else when it was written: their
    ``created_at``) is at or after ``since`` and before ``until``; None leaves that side open."""

    since: datetime | None = None
    until: datetime | None = None

    def holds(self, moment: datetime) -> bool:
        return (self.since is None or moment >= self.since) and (self.until is None or moment < self.until)


@dataclass(frozen=True)
class SessionFeedback:
    """A session's rows in the credit table: the memories they credit (share above 0) and the revision
    of the report that wrote them last (None: no row)."""

    credited: tuple[str, ...]
    revision: int | None


@dataclass(frozen=True)
class ReportQueries:
    """A reported session's recall queries and their embeddings (one row per query; None when the
    report has none), made by ``embedder``."""

    session_id: str
    queries: tuple[str, ...]
    vectors: npt.NDArray[np.float32] | None
    embedder: str | None


@dataclass(frozen=True)
class OutcomeRecord:
    """The current report for one session; a corrected report replaces it and keeps its place in order.

    ``credits`` say how far each memory moves; ``queries`` are the session's recall queries
    (``query_vectors`` their embeddings by ``query_embedder``), so that a report moves a memory for
    tasks like the session's and not for every task. A report made before per-memory credit existed
    has no ``credits``: every memory of ``memory_ids`` then moves fully with the session's score."""

    session_id: str
    org_id: str
    project_id: str
    outcome: OutcomeLabel
    score: float
    note: str | None
    memory_ids: tuple[str, ...]
    first_reported_at: datetime
    reported_at: datetime
    revision: int
    credits: tuple[MemoryCredit, ...] = ()
    queries: tuple[str, ...] = ()
    query_vectors: tuple[tuple[float, ...], ...] = ()
    query_embedder: str | None = None

    def own_credits(self) -> set[MemoryCredit]:
        """The credits the report gave, without those carried since to memories that took the place of
        ones it credited (``writing.inheritance.Inheritance.inherit``), which are not among its ``memory_ids``."""
        return {credit for credit in self.credits if credit.memory_id in self.memory_ids}

    def memory_credits(self) -> tuple[MemoryCredit, ...]:
        if self.credits:
            return self.credits
        return tuple(MemoryCredit(memory_id, "context", 1.0, self.score) for memory_id in self.memory_ids)


@dataclass(frozen=True)
class WeightEvent:
    """An audit row: one memory's weight moved by one session's report."""

    memory_id: str
    org_id: str
    project_id: str
    session_id: str
    weight_before: float
    weight_after: float
    revision: int
    at: datetime


@dataclass(frozen=True)
class StoreInfo:
    """What the store says about itself."""

    uri: str
    schema_version: int
    vector_dim: int
    memory_count: int
    tables: dict[str, int] = field(default_factory=dict)


def stored_in(memories: Iterable[MemoryRecord]) -> dict[Scope, list[MemoryRecord]]:
    """Memories grouped by the scope they are stored in (a view's project scope, or its org's shelf)."""
    grouped: dict[Scope, list[MemoryRecord]] = {}
    for memory in memories:
        grouped.setdefault(memory.scope, []).append(memory)
    return grouped


def written_by(stored: MemoryRecord, record: MemoryRecord) -> bool:
    """``stored`` is the row the write of ``record`` committed, not another write of the same content: same
    session, same creation time (a write's retry after its commit landed, or a replica's replay of it)."""
    return (stored.session_id, stored.created_at) == (record.session_id, record.created_at)
