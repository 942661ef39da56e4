"""Typed values that flow through the recall pipeline. Stages return new values; nothing is mutated."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from retrieval.outcomes import FeedbackStep
from storage.records import MemoryRecord, Scope, TimeWindow, View, Viewer
from storage.search_filter import tag_filter

if TYPE_CHECKING:
    from retrieval.models.llm.base import LanguageModel


@dataclass(frozen=True)
class RecallRequest:
    query: str
    scope: Scope
    top_k: int
    char_budget: int
    candidate_limit: int
    weighting_enabled: bool = True
    kinds: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    tags_all: bool = False  # memories with every tag of ``tags``, not any
    window: TimeWindow | None = None  # only memories of this time (since/until), before any ranking
    window_from: str | None = None  # where the window came from, or why the query's time words set none
    retrieval_id: str = ""
    agent_id: str | None = None  # who asks (an agent may have a reranker configuration of its own)
    now: datetime | None = None  # when it asks: memories' ages for decay (None: no decay)
    # The LLM this request may use (the client's, by MCP sampling, or Cohere chat); None when there is none.
    llm: LanguageModel | None = None
    # Whose private memories it may see (None: the store's operator, who sees every memory of the scope).
    viewer: Viewer | None = None
    # The IANA time zone the caller reads times in (its recall's ``time_zone``): the context's dates are
    # shown there, as its window's days are counted there. None: UTC.
    time_zone: str | None = None

    def asks_for(self, memory: MemoryRecord) -> bool:
        """Whether ``memory`` is of the kinds and has the tags the recall searched within (``tag_filter``, as
        the search itself reads them): what a stage that brings memories in beside the search's keeps to."""
        tagged = tag_filter(self.tags, self.tags_all)
        return (not self.kinds or memory.kind in self.kinds) and (tagged is None or tagged(memory))

    @property
    def reach(self) -> View:
        """What the recall may read: the scope as its viewer sees it, and the org's shelf."""
        return View(self.scope, self.viewer)


@dataclass(frozen=True)
class Candidate:
    """One memory under consideration, with its score at every stage so far.

    Ranges: ``vector_score`` is cosine similarity in [-1, 1], ``context_score`` the query's cosine with the
    memory's context vector (it and its episode neighbours; None when not computed); ``fulltext_score`` is
    raw BM25 (>= 0);
    ``fused_score``, ``rerank_score`` and ``relevance_score`` are in [0, 1] (relevance is the rerank score,
    or the fused one, times ``attribution_factor`` and ``instruction_factor``); ``corroboration_boost`` is
    log2(1 + corroborating agents) x 0.1 (>= 0); ``feedback_weight`` is the weight feedback applies for
    this query (neutral 1.0): the reports of sessions whose queries were close to this one, replayed;
    ``global_weight`` is the memory's EMA weight over every report; ``decay_factor`` fades a memory by
    age (``retrieval.stages.decay``); ``weighted_score`` = (relevance + boost) x decay_factor x feedback_weight
    when weighting is on. An episode sibling's ``weighted_score`` is its
    source's, discounted by ``score_propagation_alpha``. ``neighbourhood_bonus`` is what the direct
    matches around it in its episode lend it (``retrieval.stages.neighbourhood``); ``answer_type_bonus``
    is what a match is lent for stating what the question asks for, a time, a place or a quantity
    (``retrieval.stages.answer_type``); ``final_score`` is ``weighted_score`` plus both. Ranks are 0-based,
    as in the A/B log.
    """

    memory: MemoryRecord
    found_by: tuple[str, ...] = ()
    queries: tuple[str, ...] = ()
    vector_score: float | None = None
    context_score: float | None = None
    fulltext_score: float | None = None
    fused_score: float = 0.0
    # The fused score with BM25 read against a full match of the query instead of the best match found:
    # absolute, what the relevance floor compares (None: the index keeps no term statistics).
    fused_absolute: float | None = None
    rerank_score: float | None = None
    attribution_factor: float = 1.0  # 1 - author_discount when the query names another agent
    instruction_signals: tuple[str, ...] = ()  # why its text reads as instructions to the model, if it does
    instruction_factor: float = 1.0  # instruction_demotion for such a memory
    relevance_score: float = 0.0
    corroboration_boost: float = 0.0
    corroborating_agents: tuple[str, ...] = ()
    cluster_canonical: str | None = None
    decay_factor: float = 1.0  # 0.5 ^ (age / its tier's half-life); 1.0 when its tier does not fade
    feedback_weight: float = 1.0
    global_weight: float = 1.0
    # The reports that moved feedback_weight most (at most FEEDBACK_STEPS_SHOWN), and how many moved it.
    feedback_steps: tuple[FeedbackStep, ...] = ()
    feedback_reports: int = 0
    feedback_far: int = 0  # reports about tasks too far from the query to count for it
    feedback_set_apart: int = 0  # of those, reports that named it for a task the query is set apart from
    weighted_score: float = 0.0
    unweighted_rank: int | None = None
    weighted_rank: int | None = None
    source: Literal["direct", "sibling"] = "direct"
    sibling_of: str | None = None
    # The candidate whose newer value it is: a memory that disputes a direct match and that the search did
    # not find, joined at the contradiction marks and scored as that match (``contradiction_marks``).
    newer_value_of: str | None = None
    # weight x the best weighted score of a direct match within a few turns of it in its episode
    neighbourhood_bonus: float = 0.0
    neighbourhood_of: str | None = None  # that direct match
    # answer_type_weight x its weighted score, when the question asks for what its text states
    answer_type_bonus: float = 0.0
    contradicted_by: tuple[str, ...] = ()  # newer memories that contradict it, unresolved
    # What those of them the caller may read say, (id, text): the context quotes one that is not in it
    # (``retrieval.stages.contradiction_marks``).
    disputers_said: tuple[tuple[str, str], ...] = ()
    # Those of them written before it: a correction that gave up the value it states again
    # ("DISPUTED by earlier ...", not "newer").
    disputers_earlier: tuple[str, ...] = ()
    in_context: bool = False
    context_position: int | None = None  # its [n] in the context block
    # The characters of its text the context shows when it was cut there (never fitting whole); None: all.
    shown_chars: int | None = None
    exclusion_reason: str | None = None
    # Why an LLM pass at assembly (retrieval.stages.llm_passes) took it out of the context.
    dropped: str | None = None

    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def floor_score(self) -> float:
        """The relevance the floor compares: the lower of ``relevance_score`` (what ranks it; recall shows it
        after age decay, boosts and weights) and the same with the fused part read on the absolute scale
        (``absolute_share``). The absolute scale keeps a weak best match out (read against the best match
        found, it would count as a full one); the lower of the two keeps out a memory that a much better
        match leaves below the floor as shown (a new user read "5 memories matched above the relevance
        floor (0.1)" over scores of 0.093)."""
        return self.relevance_score * self.absolute_share

    @property
    def absolute_share(self) -> float:
        """``min(1, fused_absolute / fused_score)``: what the fused score keeps read on the absolute scale;
        1 when a reranker scored the candidate or there is no absolute reading."""
        if self.rerank_score is not None or self.fused_absolute is None or self.fused_score <= 0.0:
            return 1.0
        return min(1.0, self.fused_absolute / self.fused_score)

    @property
    def boosted_score(self) -> float:
        """Relevance with the corroboration boost, faded by age (``decay_factor``): what feedback weights."""
        return (self.relevance_score + self.corroboration_boost) * self.decay_factor

    @property
    def final_score(self) -> float:
        """What ranks it: the weighted score, with what its episode's neighbouring matches lend it and what
        stating the kind of answer the question asks for lends it."""
        return self.weighted_score + self.neighbourhood_bonus + self.answer_type_bonus

    def revised(self, **changes: Any) -> Candidate:
        """A copy with ``changes``, as ``dataclasses.replace`` makes it, at about a tenth of its cost: the
        stages revise each candidate they score (some 170 copies a recall), and ``replace`` runs the
        33-field ``__init__`` for each (11 us a copy against 1.4 here). Candidate has no ``__post_init__``
        to skip; a name that is not a field is refused, as ``replace`` refuses it."""
        unknown = changes.keys() - _CANDIDATE_FIELDS
        if unknown:
            raise TypeError(f"Candidate has no field {', '.join(sorted(unknown))}")
        copy = object.__new__(Candidate)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        return copy

    @classmethod
    def of(cls, memory: MemoryRecord, **scores: Any) -> Candidate:
        """A new candidate for ``memory`` with ``scores`` (fields) and every other field at its default, as
        ``Candidate(memory=..., ...)`` makes it, at the cost of ``revised``: fusion makes one for every
        memory it keeps (60 a recall), and the 40-field ``__init__`` was a twentieth of a recall's time."""
        unknown = scores.keys() - _CANDIDATE_FIELDS
        if unknown:
            raise TypeError(f"Candidate has no field {', '.join(sorted(unknown))}")
        made = object.__new__(cls)
        made.__dict__["memory"] = memory  # (the fields in their order, as ``__init__`` sets them)
        made.__dict__.update(_CANDIDATE_DEFAULTS)
        made.__dict__.update(scores)
        return made


_CANDIDATE_FIELDS = frozenset(field.name for field in fields(Candidate))
# Every field but the memory has a plain default (no factory): a new candidate starts from a copy of these.
_CANDIDATE_DEFAULTS = {field.name: field.default for field in fields(Candidate) if field.name != "memory"}
if any(default is MISSING for default in _CANDIDATE_DEFAULTS.values()):
    raise TypeError("Candidate.of copies plain defaults: a field with a default factory needs it made there")
