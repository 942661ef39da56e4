"""Stage: contradiction marks. A memory with an unresolved newer contradiction (the same subject, an
opposite claim, neither revised) is marked, so the context and the caller can see it is disputed. The marks
carry what each disputing memory says (those the caller may read, active): the context quotes a disputer that
is not in it beside the memory it disputes. A second trial recalled "The catalog-service caches product
lookups in Memcached on cache-01..." first, marked "DISPUTED by newer mem_...", with the memory that said
Memcached was given up ranked out of the context: the agent read the stale fact and only an id. A newer value
the search did not find joins the match it disputes (``ContradictionStage._joined``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from retrieval.stages.instructions import instruction_signals
from retrieval.trace import ContradictionsMarked, StageOutput
from retrieval.types import Candidate, RecallRequest
from storage.records import MemoryRecord, Reach


class ContradictionSource(Protocol):
    def newer_contradictions(self, reach: Reach, memory_ids: Sequence[str]) -> dict[str, list[str]]: ...

    def get_memories(self, memory_ids: Sequence[str], reach: Reach) -> dict[str, MemoryRecord]: ...


# How many times a joined newer value is followed to the one that disputes it in turn (a value stated again
# and again: the newest of a chain, not the one after the match).
JOIN_HOPS = 4


class ContradictionStage:
    name = "contradictions"

    def __init__(self, source: ContradictionSource) -> None:
        self._source = source

    def __call__(self, request: RecallRequest, candidates: tuple[Candidate, ...]) -> StageOutput:
        newer = (
            self._source.newer_contradictions(request.reach, [c.id for c in candidates]) if candidates else {}
        )
        quoted, written = self._disputers(request, candidates, newer)
        marked = tuple(self._marked(candidate, newer, quoted, written) for candidate in candidates)
        joined = self._joined(request, marked, quoted)
        # Each joined one in score order, after those that score the same: the order ranks are read in.
        for candidate in joined:
            at = next((i for i, c in enumerate(marked) if c.final_score < candidate.final_score), len(marked))
            marked = (*marked[:at], candidate, *marked[at:])
        return StageOutput(
            marked,
            (ContradictionsMarked(sum(1 for c in marked if c.contradicted_by), joined=len(joined)),),
        )

    @staticmethod
    def _marked(
        candidate: Candidate,
        newer: dict[str, list[str]],
        quoted: dict[str, MemoryRecord],
        written: dict[str, datetime],
    ) -> Candidate:
        """``candidate`` with its open contradictions: the newer memories' ids, what those quoted say
        (``_disputers``), and which were written before it."""
        if candidate.id not in newer:
            return candidate
        others = newer[candidate.id]
        return candidate.revised(
            contradicted_by=tuple(others),
            disputers_said=tuple((other, quoted[other].content) for other in others if other in quoted),
            disputers_earlier=tuple(
                other for other in others if other in written and written[other] < candidate.memory.created_at
            ),
        )

    def _disputers(
        self, request: RecallRequest, candidates: Sequence[Candidate], newer: dict[str, list[str]]
    ) -> tuple[dict[str, MemoryRecord], dict[str, datetime]]:
        """The disputing memories of ``newer`` that are quoted, and when each the caller may read was written
        (a disputer written before the memory it disputes is marked "earlier"). A candidate's own record, else
        read (one read for all of them) within the caller's view, so another agent's private memory is neither
        quoted nor revealed. Not quoted: one no longer active (retracted, superseded since) or past its
        expiry, and one whose text reads as instructions to the model (recall demotes such a memory; quoted,
        it would ride in on any memory it disputes, a review found). The mark still names them."""
        wanted = {other for others in newer.values() for other in others}
        if not wanted:
            return {}, {}
        records = {c.id: c.memory for c in candidates if c.id in wanted}
        missing = wanted - set(records)
        if missing:
            records |= self._source.get_memories(sorted(missing), request.reach)
        return _quoted(records, request), {
            memory_id: record.created_at for memory_id, record in records.items()
        }

    def _joined(
        self, request: RecallRequest, marked: Sequence[Candidate], quoted: dict[str, MemoryRecord]
    ) -> list[Candidate]:
        """The newest value of each disputed direct match that the search did not find: the latest of its
        newer disputers the caller may read (quoted) within the recall's kinds, tags and window, followed to
        the one that disputes that in turn (``JOIN_HOPS`` at most), scored as the match (``_newer_value``).
        An overview question over a service whose port, replicas and timeout were each stated fifteen times
        found 45 values competing for the search's hits: the current value was often no candidate, and the
        context showed an older one, quoting it. A disputer is joined once, for the best match it disputes;
        none when a newer value of the match, or of the one joined, is a candidate already."""
        present = {candidate.id for candidate in marked}
        chosen: dict[str, Candidate] = {}  # joined id -> the match it was joined for
        by_score = sorted(
            (c for c in marked if c.source == "direct" and c.contradicted_by), key=lambda c: -c.final_score
        )
        for candidate in by_score:
            later = [
                record
                for other in candidate.contradicted_by
                if (record := quoted.get(other)) is not None
                and record.created_at > candidate.memory.created_at
                and _asked_for(request, record)
            ]
            if not later or any(record.id in present for record in later):
                continue  # nothing newer to show, or a newer value is a candidate already
            newest = max(later, key=lambda record: (record.created_at, record.id))
            if newest.id not in chosen:
                chosen[newest.id] = candidate
        if not chosen:
            return []
        records = {memory_id: quoted[memory_id] for memory_id in chosen}
        # Each hop reads what disputes the values joined so far; the last read (no value moved, or the hops
        # spent) is what marks them.
        for hop in range(JOIN_HOPS + 1):
            onward = self._source.newer_contradictions(request.reach, sorted(records))
            if hop == JOIN_HOPS:
                break
            ahead = {other for others in onward.values() for other in others} - set(records) - present
            read = _quoted(self._source.get_memories(sorted(ahead), request.reach), request) if ahead else {}
            moved = False
            for memory_id, record in list(records.items()):
                if present.intersection(onward.get(memory_id, ())):
                    # a newer value of it is a candidate already: that one stands for the match (a review:
                    # a value between the two was joined with the match's score, and the current one cut)
                    del records[memory_id], chosen[memory_id]
                    continue
                later = [
                    other
                    for other_id in onward.get(memory_id, [])
                    if (other := read.get(other_id)) is not None
                    and other.created_at > record.created_at
                    and _asked_for(request, other)
                ]
                if later:
                    newest = max(later, key=lambda other: (other.created_at, other.id))
                    if newest.id not in records and newest.id not in chosen:
                        chosen[newest.id] = chosen.pop(memory_id)
                        del records[memory_id]
                        records[newest.id] = newest
                        moved = True
            if not moved:
                break
        last = {memory_id: onward[memory_id] for memory_id in records if memory_id in onward}
        also_quoted, written = self._disputers(request, [], last)
        return [
            self._marked(
                _newer_value(record, chosen[memory_id], weighting=request.weighting_enabled),
                last,
                also_quoted,
                written,
            )
            for memory_id, record in records.items()
        ]


def _asked_for(request: RecallRequest, memory: MemoryRecord) -> bool:
    """Whether ``memory`` is of what the recall searched within: its kinds, tags and time window (a review: a
    newer value tagged otherwise, or written after the window asked about, took a filtered recall's place)."""
    return request.asks_for(memory) and (request.window is None or request.window.holds(memory.created_at))


def _quoted(records: dict[str, MemoryRecord], request: RecallRequest) -> dict[str, MemoryRecord]:
    """Those of ``records`` a context may quote: active now and not reading as instructions to the model."""
    now = request.now or datetime.now(UTC)
    return {
        memory_id: record
        for memory_id, record in records.items()
        if record.status_at(now) == "active" and not instruction_signals(record.content)
    }


def _newer_value(record: MemoryRecord, match: Candidate, *, weighting: bool) -> Candidate:
    """``record`` as a candidate joined for ``match``, whose newer value it is: scored as it (its fused and
    relevance scores, its age's fade, and what stating the kind of answer asked for lent it, in the same
    share), times its own weight of reports when weighting is on (the memory's global weight: the search did
    not find it, so no query's closeness is replayed for it), with no corroboration or episode loan of its
    own. Assembly takes it before the match at the top_k cut whatever the two score (``close_disputers``),
    unless the reports raised the match and lowered it (``standing_disputers``: a review saw three sessions'
    reports overruled)."""
    weight = record.weight if weighting else 1.0
    weighted = match.relevance_score * match.decay_factor * weight
    share = match.answer_type_bonus / match.weighted_score if match.weighted_score > 0 else 0.0
    return Candidate.of(
        record,
        queries=match.queries,
        fused_score=match.fused_score,
        fused_absolute=match.fused_absolute,
        attribution_factor=match.attribution_factor,
        relevance_score=match.relevance_score,
        decay_factor=match.decay_factor,
        feedback_weight=weight,
        global_weight=record.weight,
        weighted_score=weighted,
        answer_type_bonus=weighted * share,
        newer_value_of=match.id,
    )
