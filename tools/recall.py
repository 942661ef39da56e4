"""recall: run the retrieval pipeline and return a ready-to-paste context block plus the memories in it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field, PrivateAttr, field_validator

from retrieval.text import counted, has_visible_text
from retrieval.trace import window_to_dict
from retrieval.types import RecallRequest
from storage.records import Scope, TimeWindow, Viewer
from tools.common import (
    Caller,
    Identifier,
    Runtime,
    ScopeArgs,
    Tag,
    TimeText,
    ToolFailure,
    WithoutSecrets,
    ZoneText,
    new_retrieval_id,
    view_for,
)
from tools.empty_recall_notes import empty_recall_note
from tools.memory_views import lineage_text, replaced_chains
from tools.recall_notes import NOTHING_MATCHED, recall_note, unsearched_note
from tools.recall_window import filters_searched, searched_window, shown_zone, time_window, topic_of
from tools.recalled import RecalledMemory, recalled
from writing.journal import record_retrieval

if TYPE_CHECKING:
    from retrieval.models.llm.base import LanguageModel
    from retrieval.pipeline import RecallResult

log = logging.getLogger(__name__)


class RecallInput(ScopeArgs):
    query: Annotated[str, WithoutSecrets] = Field(
        min_length=1,
        max_length=100_000,
        description="The task, question or error at hand, in plain words.",
    )
    top_k: int | None = Field(
        None,
        ge=1,
        le=1_000,
        description="Matched memories, at most. Default: MEMORIA_TOP_K_FACTS (10).",
    )
    char_budget: int = Field(
        16_000,
        ge=1,
        le=10_000_000,
        description="Max context length, in characters.",
    )
    session_id: Identifier | None = Field(
        None,
        description="Default: one per connection.",
    )
    agent_id: Identifier | None = Field(None, description="Default: the client's name.")
    tags: list[Tag] | None = Field(None, max_length=100, description="Any of these tags.")
    tags_all: bool = Field(False, description="Need all tags.")
    kinds: list[Literal["fact", "episode", "artifact"]] | None = Field(None, description="Only these kinds.")
    include_lineage: bool = Field(False, description="Also what each superseded.")
    # No A/B log rows for this recall (docs/tools.md); no description, for the tool list's bytes.
    skip_ab_log: bool = False
    since: TimeText | None = Field(None, description='From this time on, e.g. "2026-11-24", "last week".')
    until: TimeText | None = Field(None, description="Before this time ends.")
    time_zone: ZoneText | None = Field(None, description='IANA, e.g. "Europe/Paris". Default: UTC.')

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty or whitespace only: describe what you need to know")
        if not has_visible_text(value):
            # as remember refuses such content: nothing in it could match a memory
            raise ValueError(
                "holds only control or blank characters: describe what you need to know in words"
            )
        return value


class RecallOutput(BaseModel):
    retrieval_id: str = Field(
        description="Pass to explain_ranking to see why each memory ranked where it did."
    )
    context: str = Field(
        description="Paste into the prompt; empty when nothing relevant was found or nothing fit (see note)."
    )
    memories: list[RecalledMemory] = Field(description="The memories in the context, in context order.")
    session_id: str
    gated: bool = Field(False, description="True when the query needed no memory and retrieval was skipped.")
    gate_reason: str | None = None
    note: str | None = Field(
        None,
        description="Set when fewer than top_k memories were placed: only memories above the relevance floor "
        "are returned, never filler far below the best match; says how many were left out as filler and how "
        "many did not fit in char_budget (raise it to see them).",
    )
    warnings: list[str] = Field(default_factory=list)
    window: dict[str, str | None] | None = Field(
        None, description="The time window searched: {since, until} (UTC, until exclusive), and from what."
    )
    # What an empty recall searched within and how to widen it (``filters_searched``), for the text the agent
    # reads (text_of); not in the structured output (the note says it there).
    _among: tuple[str, str] | None = PrivateAttr(None)
    _now: datetime | None = PrivateAttr(None)  # the server's clock when it recalled
    _unsearched: str | None = PrivateAttr(None)  # memories its vector search skipped (in the note too)
    _history: str | None = PrivateAttr(None)  # what its window held that was superseded (in the note too)
    _budget: int = PrivateAttr(0)  # its char_budget: include_lineage's history fits what the context left


def check_bounds(runtime: Runtime, query: str, top_k: int | None, char_budget: int) -> int:
    """Check the configurable limits; returns the effective top_k."""
    settings = runtime.settings
    if len(query) > settings.max_query_chars:
        raise ToolFailure(
            f"query is {len(query):,} characters; the limit is {settings.max_query_chars:,}. "
            "Ask about one thing in a sentence or two."
        )
    effective_top_k = settings.top_k_facts if top_k is None else top_k
    if effective_top_k > settings.max_top_k:
        raise ToolFailure(
            f"`top_k` must be between 1 and {settings.max_top_k}, but got {effective_top_k}: pass a value in "
            "that range (the server's MEMORIA_MAX_TOP_K)"
        )
    if not settings.min_char_budget <= char_budget <= settings.max_char_budget:
        raise ToolFailure(
            f"`char_budget` must be between {settings.min_char_budget:,} and {settings.max_char_budget:,}, "
            f"but got {char_budget:,}: pass a value in that range"
        )
    return effective_top_k


def build_request(
    runtime: Runtime,
    scope: Scope,
    query: str,
    top_k: int,
    char_budget: int,
    kinds: Sequence[str] | None,
    tags: Sequence[str] | None,
    llm: LanguageModel | None = None,
    *,
    agent_id: str | None = None,
    tags_all: bool = False,
    window: TimeWindow | None = None,
    window_from: str | None = None,
    viewer: Viewer | None = None,
    time_zone: str | None = None,
) -> RecallRequest:
    settings = runtime.settings
    return RecallRequest(
        query=query,
        scope=scope,
        top_k=top_k,
        char_budget=char_budget,
        candidate_limit=top_k * settings.rerank.multiplier,
        weighting_enabled=settings.feedback_weighting_enabled(scope.org_id),
        kinds=tuple(dict.fromkeys(kinds or ())),
        tags=tuple(dict.fromkeys(tags or ())),
        tags_all=tags_all,
        window=window,
        window_from=window_from,
        retrieval_id=new_retrieval_id(),
        agent_id=agent_id,
        now=runtime.clock(),
        llm=llm,
        viewer=viewer,
        time_zone=time_zone,
    )


def recall(args: RecallInput, runtime: Runtime, caller: Caller) -> RecallOutput:
    top_k = check_bounds(runtime, args.query, args.top_k, args.char_budget)
    view = view_for(args, runtime, caller)
    window, window_from = time_window(runtime, view, args.query, args.since, args.until, args.time_zone)
    # The query's own time words ("what did we decide last week?") say when, not what: under a window that
    # they name they are spent on it; without one they are left out only if nothing matched with them.
    topic = topic_of(runtime, args.query, window, args.time_zone)

    def run(query: str) -> tuple[RecallRequest, RecallResult]:
        request = build_request(
            runtime,
            view.home,
            query,
            top_k,
            args.char_budget,
            args.kinds,
            args.tags,
            caller.llm,
            agent_id=args.agent_id or caller.agent_id,
            tags_all=args.tags_all,
            window=window,
            window_from=window_from,
            viewer=view.viewer,
            time_zone=shown_zone(args.time_zone),
        )
        with runtime.store.one_version():
            return request, runtime.pipeline.run(request)

    untimed = None  # the time words a recall without a window searched again without
    if topic is not None and window is not None:
        request, result = run(topic[0])
    else:
        request, result = run(args.query)
        if topic is not None and not result.gated and not result.in_context:
            request, result = run(topic[0])
            untimed = topic[1]
    session_id = args.session_id or caller.session_id
    _, warnings = record_retrieval(
        runtime.store,
        runtime.clock,
        request,
        result,
        session_id=session_id,
        agent_id=args.agent_id or caller.agent_id,
        purpose="recall",
        ab_log=not args.skip_ab_log,
    )
    replaced = (
        replaced_chains(runtime.store, request.reach, [c.id for c in result.in_context])
        if args.include_lineage
        else {}
    )
    memories = recalled(result.in_context, replaced if args.include_lineage else None)

    note = None if result.gated else recall_note(result, top_k)
    nothing = note is not None and note.startswith(NOTHING_MATCHED)
    among = filters_searched(args.tags, args.tags_all, args.kinds) if nothing else None
    if among:
        note = f"{note} {among[0]}: {among[1]}"
    history = None
    if nothing and note is not None:
        note, history = empty_recall_note(
            runtime, view, request.window, note, scope_too=not among, name_projects=not caller.remote
        )
    if untimed is not None:
        how = (
            f"no memory matched with the time words {untimed!r}, so they were left out (memories are dated "
            f"by when they happened): pass since/until={untimed!r} to keep to that time"
        )
        # First when it found something; after "nothing relevant was found" when it did not either.
        note = f"{how}. {note}" if note and result.in_context else f"{note}. {how}" if note else how
    skipped = None if result.gated else unsearched_note(runtime, request, args)
    note = f"{note}. {skipped}" if note and skipped else note or skipped
    out = RecallOutput(
        retrieval_id=request.retrieval_id,
        context=result.context,
        memories=memories,
        session_id=session_id,
        gated=result.gated is not None,
        gate_reason=result.gated,
        note=note,
        warnings=warnings,
        window=window_to_dict(request.window, request.window_from),
    )
    out._among = among
    out._unsearched = skipped
    out._history = history
    out._budget = args.char_budget
    out._now = request.now
    return out


def text_of(out: RecallOutput) -> str:
    """What the agent reads of a recall: the context block (it names the retrieval and each memory's id,
    for report_outcome and explain_ranking), and the note when fewer than top_k matched. The memories
    list is in the structured content only, so no memory's text is sent twice."""
    if out.gated:
        return f"No memory needed ({out.gate_reason or 'nothing to look up'}); retrieval {out.retrieval_id}."
    found = f"Nothing relevant was found{searched_window(out.window, out._now)}"
    if out._among:  # within tags or kinds: which, and how to search them all
        empty = f"{found} {out._among[0]} (retrieval {out.retrieval_id}): {out._among[1]}."
    else:
        empty = f"{found} (retrieval {out.retrieval_id})."
    if out.note and not out.note.startswith(NOTHING_MATCHED):  # matched, but none placed: say why
        empty = f"{out.note[0].upper()}{out.note[1:]} (retrieval {out.retrieval_id})."
    history = lineage_text(out.memories, out._budget - len(out.context) - 2) if out.memories else None
    parts = [out.context.rstrip() or empty, *filter(None, [history])]
    if out.note and out.context:
        parts.append(out.note)
    elif out._unsearched or out._history:  # an empty context says what its search could not see
        parts += [f"{said[0].upper()}{said[1:]}." for said in (out._history, out._unsearched) if said]
    replaced = sum(1 for memory in out.memories if memory.replaces)
    if replaced and history is None:  # asked for, and no room for even its count (a trial read nothing)
        parts.append(
            f"History (include_lineage): no room in char_budget for what {counted(replaced, 'memory')} "
            f"replaced; read `memories[].replaces`, or raise char_budget."
        )
    parts += [f"Warning: {warning}" for warning in out.warnings]
    return "\n\n".join(parts)


async def handle(args: RecallInput, runtime: Runtime, caller: Caller) -> RecallOutput:
    return await runtime.lanes.run("read", recall, args, runtime, caller)
