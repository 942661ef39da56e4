"""Feedback arithmetic (pure): outcome scores, the EMA weight policy, per-memory credit, and the weight a
memory carries for one query.

An outcome score s in [0, 1] (failure 0, partial 0.5, success 1) sets a target weight lo + s x (hi - lo);
a report moves a memory ``share`` x alpha of the way towards it:
    weight_after = weight_before + share x alpha x (target - weight_before)
With the defaults (alpha 0.2, lo 0.25, hi 1.75) a full step takes 1.0 to 1.15 on success and to 0.85 on
failure; a partial keeps 1.0. Weights start at 1.0 and stay within [lo, hi].

Credit: the memories an agent names move fully (helpful towards 1, misleading towards 0); the other
memories of the session's contexts move by a share of their position in the context, and a memory that
scored below the relevance floor there never moves.

The global weight (stored with the memory) replays every report's credits in order. The contextual
weight a recall applies replays the same credits with each step scaled by how close the reporting
session's query is to the current query: feedback about "deploy the billing service" moves deploy
questions, not every question. There, a memory the agent named moves by ``named_alpha`` (1.0) instead of
alpha: a named helpful memory reaches hi (1.75) for a query as close as the reporting one after one
report, and a named misleading one lo (0.25). Measured on LoCoMo (benchmarks/quality.py's feedback
experiment), alpha 0.2 for named memories left recall of the questions reported on almost unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from storage.records import CreditedSession, MemoryCredit

OUTCOME_SCORES = {"failure": 0.0, "partial": 0.5, "success": 1.0}
NAMED_ROLES = frozenset({"helpful", "misleading"})  # credit roles of the memories an agent named
INITIAL_WEIGHT = 1.0


@dataclass(frozen=True)
class WeightPolicy:
    """``alpha``: how far a report moves a weight towards its target (the global weight's EMA, for every weight).
    ``named_alpha``: the same for a memory the agent named helpful or misleading, in the weight a recall
    applies for its query (the global weight keeps ``alpha``): the agent said which memory served this
    kind of task, so one report takes it most of the way for queries close to that session's."""

    alpha: float = 0.2
    low: float = 0.25
    high: float = 1.75
    named_alpha: float = 1.0
    # How far reports naming no memory take a memory of their contexts however often they repeat, as a
    # share of its reach (``reach``): twenty successful sessions that named nothing took the memory shown
    # first, an outdated one, to 1.74, the bound of the agent's own word (a new user's trial), and it then
    # outranked the right memory of a neighbouring task.
    context_reach: float = 0.5

    def target(self, score: float) -> float:
        return self.low + score * (self.high - self.low)

    def step(self, weight: float, score: float, share: float = 1.0, *, named: bool = False) -> float:
        """``weight`` after a report that moves it ``share`` of a full step towards ``score``'s target
        (a step of ``named_alpha`` with ``named``, else ``alpha``)."""
        alpha = self.named_alpha if named else self.alpha
        moved = weight + share * alpha * (self.target(score) - weight)
        return min(self.high, max(self.low, moved))

    def reach(self, score: float, share: float) -> float:
        """How far a report takes a weight, however often it is repeated: ``share`` of the way from the
        initial weight to ``score``'s target."""
        return INITIAL_WEIGHT + share * (self.target(score) - INITIAL_WEIGHT)

    def replay(self, scores: Iterable[float], start: float = INITIAL_WEIGHT) -> float:
        """The weight after full steps towards ``scores`` in order: what a serial replay gives."""
        return self.replay_credits(((1.0, score) for score in scores), start)

    def replay_credits(self, steps: Iterable[tuple[float, float]], start: float = INITIAL_WEIGHT) -> float:
        """The weight after ``steps`` ((share, score) pairs) in order."""
        weight = start
        for share, score in steps:
            weight = self.step(weight, score, share)
        return weight


def effective_score(outcome: str, score: float | None) -> float:
    """An explicit score overrides the label."""
    return float(score) if score is not None else OUTCOME_SCORES[outcome]


def score_contradicts(outcome: str, score: float | None) -> str | None:
    """Why ``score`` contradicts the ``outcome`` label, or None. The score sets the weights and the label
    is what the report keeps and says: a success scored below partial, a failure above it, or a partial
    scored as a full failure or success would be kept as one thing and applied as another."""
    partial = OUTCOME_SCORES["partial"]
    if outcome == "partial" and score in (OUTCOME_SCORES["failure"], OUTCOME_SCORES["success"]):
        means = "failure" if score == OUTCOME_SCORES["failure"] else "success"
        return (
            f"outcome 'partial' and `score` {score:g} disagree: a score of {score:g} is a full {means}. Send "
            f"outcome {means!r}, or a score between 0 and 1 for a partial"
        )
    if (
        score is None
        or outcome == "partial"
        or (score >= partial if outcome == "success" else score <= partial)
    ):
        return None
    side, means = ("below", "a failure") if score < partial else ("above", "a success")
    return (
        f"outcome {outcome!r} and `score` {score:g} disagree: a score {side} {partial:g} reads as {means}. "
        "Send the outcome the score means (or partial), or leave the score out"
    )


# -- credit ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShownMemory:
    """A memory as one recall showed it. ``score``: its score in that context before feedback weighting (a
    direct match's relevance plus corroboration boost; an episode sibling's propagated score), which the
    filler floor reads. ``shown``: the score the recall ranked it by (its final score: after feedback
    weighting and what its neighbours and its answer type lent it), which gives its place: the rank by
    score the agent was given. None: ranked by ``score``."""

    memory_id: str
    score: float
    shown: float | None = None

    @property
    def ranked_by(self) -> float:
        return self.score if self.shown is None else self.shown


@dataclass(frozen=True)
class ShownContext:
    """What one recall of the session put into its context, under which query."""

    query: str
    memories: tuple[ShownMemory, ...]


@dataclass(frozen=True)
class CreditPolicy:
    """How a session's outcome is shared among the memories it was shown.

    ``relative_floor`` and ``absolute_floor``: a memory that scored below that fraction of its
    context's best score, or below that score, is filler and never moves. ``failure_share``: an
    unnamed memory's share of a failure (a failed task may have lacked a memory rather than been misled
    by the ones shown, so blame is spread thinner than praise). ``unnamed_share``: when the agent named
    the memories that helped or misled, the others move by this fraction of their share.
    """

    relative_floor: float = 0.25
    absolute_floor: float = 0.05
    failure_share: float = 0.5
    unnamed_share: float = 0.25

    @staticmethod
    def position_share(rank: int) -> float:
        """The DCG discount 1 / log2(2 + rank), ``rank`` counted from 0 (recall's result counts from 1):
        1.0 for the best-scored memory of a context, 0.63 for the second, 0.39 for the fifth, 0.29 for the
        tenth."""
        return 1.0 / math.log2(2 + rank)

    def above_floor(self, score: float, best: float) -> bool:
        return score >= self.absolute_floor and score >= self.relative_floor * best


def assign_credit(
    contexts: Sequence[ShownContext],
    *,
    session_score: float,
    helpful: Sequence[str] = (),
    misleading: Sequence[str] = (),
    used: Sequence[str] = (),
    policy: CreditPolicy = CreditPolicy(),
) -> tuple[MemoryCredit, ...]:
    """Each memory's credit for one session's report: named memories first (a full step each, for the
    session's queries as a whole: no ``query_index``), then the memories of the session's contexts by
    their best position in any of them (``query_index`` is that context's index). A memory's position is
    its rank by the score the recall showed it with (ties in the context's order): a memory that earlier
    reports moved down the context takes the share of the place it was read at, not of the place its
    relevance alone would have given it (a memory named misleading would otherwise win the largest share
    of every later success it ranked below others in). A memory below the floor (its relevance before
    feedback against its context's best) in every context it was in gets no credit. ``used``: memories of
    the contexts (above the floor) that the session-end hook saw the agent use, not named by it: each moves
    a whole share towards success under the query that showed it best, at the step of a context's memory
    (not the agent's word: the hook infers it, and repeated use is what takes it further)."""
    shown: dict[str, tuple[float, int]] = {}  # memory id -> (best position share, context index)
    for index, context in enumerate(contexts):
        ranked = sorted(context.memories, key=lambda memory: -memory.ranked_by)
        best = max((memory.score for memory in context.memories), default=0.0)
        for rank, memory in enumerate(ranked):
            if not policy.above_floor(memory.score, best):
                continue
            share = policy.position_share(rank)
            if memory.memory_id not in shown or share > shown[memory.memory_id][0]:
                shown[memory.memory_id] = (share, index)

    # A named memory has no query of its own (None): the agent named it for the session's task, so its
    # report counts for a query as close as the closest of the session's queries, whichever recall of
    # the session showed it (or none did).
    credits = [MemoryCredit(m, "helpful", 1.0, 1.0, None) for m in dict.fromkeys(helpful)]
    credits += [MemoryCredit(m, "misleading", 1.0, 0.0, None) for m in dict.fromkeys(misleading)]
    named = {credit.memory_id for credit in credits}
    seen_used = [m for m in dict.fromkeys(used) if m in shown and m not in named]
    credits += [MemoryCredit(m, "used", 1.0, OUTCOME_SCORES["success"], shown[m][1]) for m in seen_used]
    factor = (policy.unnamed_share if named else 1.0) * (
        policy.failure_share if session_score < OUTCOME_SCORES["partial"] else 1.0
    )
    others = sorted(
        (
            (memory_id, share, index)
            for memory_id, (share, index) in shown.items()
            if memory_id not in named and memory_id not in seen_used
        ),
        key=lambda entry: (-entry[1], entry[2], entry[0]),
    )
    credits += [
        MemoryCredit(memory_id, "context", round(share * factor, 6), session_score, index)
        for memory_id, share, index in others
        if share * factor > 0
    ]
    return tuple(credits)


# -- the weight for one query -----------------------------------------------------------------------


@dataclass(frozen=True)
class Closeness:
    """How much a report counts for the current query, from the cosine between the two queries'
    embeddings: nothing at or below ``start``, fully from ``full``, linear between."""

    start: float
    full: float

    def __post_init__(self) -> None:
        if not -1.0 <= self.start < self.full <= 1.0:
            raise ValueError(
                f"feedback closeness needs -1 <= start < full <= 1, but got start {self.start}, full {self.full}"
            )

    def __call__(self, cosine: float) -> float:
        return min(1.0, max(0.0, (cosine - self.start) / (self.full - self.start)))


# Measured on LoCoMo question pairs that share no evidence turn (benchmarks/quality.py's data): their
# cosine's 95th percentile is where a report starts to count, and it counts fully where almost no such
# pair reaches (hashed vectors: 95th 0.32, 99.9th 0.63; all-MiniLM-L6-v2: 95th 0.66, 99.9th 0.87).
LEXICAL_CLOSENESS = Closeness(0.30, 0.60)
SEMANTIC_CLOSENESS = Closeness(0.65, 0.90)


def closeness_for(configured: tuple[float, float] | None, embedder_name: str) -> Closeness:
    """The configured closeness, or the one measured for this kind of embedder."""
    if configured is not None:
        return Closeness(*configured)
    return LEXICAL_CLOSENESS if embedder_name.startswith("hashed-") else SEMANTIC_CLOSENESS


@dataclass(frozen=True)
class FeedbackStep:
    """One report's move of one memory, as a recall applied it: which session, the memory's role and
    share there, how close that session's query was to this one, and the weight before and after."""

    session_id: str
    role: str
    outcome_score: float
    share: float
    closeness: float
    weight_before: float
    weight_after: float

    @property
    def moved(self) -> float:
        return self.weight_after - self.weight_before


@dataclass(frozen=True)
class CreditedReport:
    """One memory's credit in one session's report, and how close that session's query is to the
    query being ranked (1.0 for a memory named with no query of the session to compare)."""

    session_id: str
    credit: MemoryCredit
    closeness: float
    # Closeness from comparing the session's queries with this one; False for a session that recorded no
    # query (its report counts for every query, and its named memories take the global weight's step only).
    by_query: bool = True


def contextual_weight(
    reports: Iterable[CreditedReport], policy: WeightPolicy, *, protection_tier: str = "standard"
) -> tuple[float, tuple[FeedbackStep, ...]]:
    """The weight for the current query: the reports replayed in order, each step scaled by its
    closeness; and the steps that moved it.

    A report counts as far as its query is close, however often it is repeated: a step never takes the
    weight past the report's reach (its share times its closeness of the way to its target), so five
    successful sessions of one task lift a memory for a query half as close to half the full lift, as one
    does, instead of most of the way; and a memory shown low in a context, however many times, rises no
    further than its share.

    The agent's word outweighs a context's: once a report named the memory (helpful or misleading) for a
    query this close, a later session's context moves it only the way the agent judged it (further down
    after misleading, further up after helpful) until a report names it again. A memory named misleading
    that stays in the contexts of sessions that went well (shown below the memory that served them, and
    named by nobody) stays down instead of climbing back over the memory the agent relied on; its step is
    listed, with the weight held.

    Agents that disagree are weighed against each other: a named report takes the part of its step that the
    named reports so far and itself that agree with it make of them all (each counted by its closeness), so
    one report against four takes a fifth of its step, and
    two opposite reports leave the weight where they met, in either order (a trial: four sessions named a
    memory helpful, a fifth misleading, and it fell to the floor, below the outdated memory it had beaten)."""
    weight = INITIAL_WEIGHT
    steps = []
    judged = 0.0  # the latest named credit: +1 helpful, -1 misleading, 0 none
    said = {"helpful": 0.0, "misleading": 0.0}  # the named reports so far, by their closeness
    for report in reports:
        share = report.credit.share * report.closeness
        if share <= 0.0:
            continue
        named = report.by_query and report.credit.role in NAMED_ROLES
        step = share
        if named:
            agreeing = said[report.credit.role]
            disagreeing = sum(said.values()) - agreeing
            step = share * (report.closeness + agreeing) / (report.closeness + agreeing + disagreeing)
            said[report.credit.role] += report.closeness
        after = policy.step(weight, report.credit.score, step, named=named)
        # Never past the report's reach (a context's, unnamed: ``context_reach`` of it); a weight already
        # beyond it stays where it is.
        reach = policy.reach(
            report.credit.score, share * (policy.context_reach if report.credit.role == "context" else 1.0)
        )
        after = min(max(after, min(weight, reach)), max(weight, reach))
        if report.credit.role in NAMED_ROLES:
            judged = 1.0 if report.credit.role == "helpful" else -1.0
        elif judged * (after - weight) < 0:  # a context's share against the agent's word: held
            after = weight
        steps.append(
            FeedbackStep(
                report.session_id,
                report.credit.role,
                report.credit.score,
                report.credit.share,
                report.closeness,
                weight,
                after,
            )
        )
        weight = after
    if protection_tier == "immutable":
        weight = max(weight, INITIAL_WEIGHT)  # immutable memories are never decayed
    return weight, tuple(steps)


def with_credit(
    credits: Iterable[CreditedSession], session_id: str, changed: CreditedSession | None
) -> list[CreditedSession]:
    """A memory's credits, in replay order, with ``session_id``'s credit replaced by ``changed`` (None,
    or a share of 0: removed). Reports replace their session's rows, so every reader applies one this way."""
    kept = [credited for credited in credits if credited.session_id != session_id]
    if changed is not None and changed.credit.share > 0:
        kept.append(changed)
        kept.sort(key=lambda credited: credited.replay_key)
    return kept
