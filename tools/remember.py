"""remember: store what the agent learned, verbatim, with its provenance; identical content is stored once.
The writing itself is the write service's (``writing.service``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

from retrieval.text import counted
from storage.records import MemoryKind, MemoryRecord, View, Visibility
from tools.amend import amended, kept_expiry, made_lasting
from tools.common import (
    Caller,
    Identifier,
    Runtime,
    ScopeArgs,
    Tag,
    ToolFailure,
    expired_by,
    iso,
    view_for,
)
from tools.empty_recall_notes import held_elsewhere
from tools.memory_views import replacements
from tools.times import ExpiresAt, OccurredAt
from writing.consolidation.report import ConsolidationReport
from writing.drafts import Draft, Prepared, WriteRefused, WriteResult, expiry_under, stored_content


class MemoryFields(BaseModel):
    """What one memory is made of: ``remember``'s arguments and each item of ``remember_many``."""

    model_config = ConfigDict(strict=True)  # as ScopeArgs: JSON types as the schema says

    content: str = Field(
        min_length=1,
        max_length=1_000_000,
        description="Verbatim.",
    )
    kind: Literal["fact", "episode", "artifact"] = Field(
        "fact",
        description="episode: a summary; artifact: code, config, a document.",
    )
    tags: list[Tag] = Field(default_factory=list, max_length=1_000, description="Labels to filter recall by.")
    episode_id: Identifier | None = Field(None, description="One task or conversation.")
    protection_tier: Literal["standard", "immutable", "protected", "ephemeral"] = Field(
        "standard",
        description="immutable: never superseded; protected: only by a revision; ephemeral: expires.",
    )
    occurred_at: OccurredAt = Field(
        None,
        description="When it happened (ISO 8601; UTC if no offset).",
    )
    expires_at: ExpiresAt = Field(
        None,
        description="Until when it holds (ISO 8601).",
    )

    # NUL characters the content arrived with: removed before it is stored, and said in the result.
    _nuls_removed: int = PrivateAttr(0)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # Checked by the model, so that blank content is an argument error before any handler runs.
        return not_blank(value)

    @model_validator(mode="wrap")
    @classmethod
    def _count_nuls(cls, data: object, handler: ValidatorFunctionWrapHandler) -> MemoryFields:
        fields = handler(data)
        if isinstance(data, dict) and isinstance(data.get("content"), str):
            fields._nuls_removed = data["content"].count("\x00")
        return fields

    def cleaning_note(self) -> str | None:
        """What was taken out of the content before storing it, or None."""
        if not self._nuls_removed:
            return None
        return (
            f"{counted(self._nuls_removed, 'NUL character')} removed from the content (none is ever stored)"
        )


class RememberInput(ScopeArgs, MemoryFields):
    agent_id: Identifier | None = Field(None, description="Default: the client's name.")
    session_id: Identifier | None = Field(None, description="Default: one per connection.")
    replaces: Identifier | None = Field(
        None,
        description="A memory this corrects (kept for audit).",
    )
    visibility: Visibility | None = Field(None, description="Who reads it. Default project.")


def not_blank(content: str) -> str:
    return stored_content(content)


class ConsolidationSummary(BaseModel):
    """What writing this memory changed in the store, and who decided (an LLM or the rules)."""

    resolver: str | None = None
    superseded: list[str] = Field(default_factory=list, description="Existing memories this one absorbed.")
    kept: list[str] = Field(default_factory=list, description="Similar memories kept as genuinely distinct.")
    revised: list[str] = Field(
        default_factory=list, description="Older beliefs this one revised (superseded)."
    )
    contradicts: list[str] = Field(
        default_factory=list, description="Older memories it contradicts without revising them (see drift)."
    )
    version_of: str | None = Field(None, description="For an artifact: its previous version.")
    absorbed_into: str | None = Field(None, description="This memory was itself absorbed by another.")
    reworded_into: str | None = Field(None, description="The group was replaced by a reworded memory.")
    rerank_scores: dict[str, float] = Field(
        default_factory=dict,
        description="With MEMORIA_CONSOLIDATION_RERANK: each close memory's reranker score against this one "
        "(those below MEMORIA_CONSOLIDATION_RERANK_MIN_SCORE were left alone).",
    )
    rerank_skipped: str | None = Field(None, description="Why the rerank step did not run, when it failed.")
    model_skipped: str | None = Field(
        None, description="Why the language model did not decide where it was asked; the rules decided."
    )

    @classmethod
    def of(cls, report: ConsolidationReport) -> ConsolidationSummary:
        return cls(**{name: getattr(report, name) for name in cls.model_fields})


class RememberOutput(BaseModel):
    id: str = Field(description="The memory's id (the existing one for a duplicate).")
    status: Literal["stored", "duplicate", "updated"]
    duplicate_of: str | None = Field(
        None, description="For a duplicate: the id of the memory already stored."
    )
    kind: MemoryKind
    agent_id: str
    session_id: str
    episode_id: str | None
    org_id: str
    project_id: str
    created_at: str
    protection_tier: str
    visibility: Visibility = Field(
        "project", description="Who may read it: its org, its project, only its agent, or only its session."
    )
    expires_at: str | None = None
    note: str | None = None
    consolidation: ConsolidationSummary | None = None
    redacted: str | None = Field(
        None,
        description="Secrets found in the content or tags and replaced by [REDACTED:<kind>] before anything "
        "was embedded or stored: kinds and counts, never the values.",
    )


def draft_of(args: RememberInput, runtime: Runtime, caller: Caller) -> Draft:
    return Draft(
        content=args.content,
        scope=args.scope(runtime.settings),
        agent_id=args.agent_id or caller.agent_id,
        session_id=args.session_id or caller.session_id,
        kind=args.kind,
        tags=tuple(args.tags),
        episode_id=args.episode_id,
        protection_tier=args.protection_tier,
        occurred_at=args.occurred_at,
        visibility=args.visibility or "project",
        expires_at=args.expires_at,
    )


# What an update keeps unless it says otherwise.
INHERITED = ("kind", "tags", "episode_id", "protection_tier", "visibility")


def replaced_memory(runtime: Runtime, view: View, memory_id: str, caller: Caller) -> MemoryRecord:
    """The memory an explicit update names: active and one the caller may read, else a tool error."""
    scope = view.home
    old = runtime.store.get_memory(memory_id, view)
    if old is None:
        raise ToolFailure(
            f"no memory {memory_id} in org {scope.org_id!r} / project {scope.project_id!r}"
            f"{held_elsewhere(runtime, caller, memory_id, scope)}; nothing was stored. Pass replaces= the id of a "
            "memory from a recall result in this project"
        )
    if old.status != "active":
        raise ToolFailure(
            f"{memory_id} is {old.status}, not active; nothing was stored{_update_advice(runtime, view, old)}"
        )
    if old.expires_at is not None and old.past_expiry(runtime.clock()):
        raise ToolFailure(
            f"{memory_id} expired at {iso(old.expires_at)} ({expired_by(old)}) and is no longer "
            "recalled; nothing was stored. Remember the new text without replaces (its own text remembered "
            "again restores it)"
        )
    if old.protection_tier == "immutable":
        raise ToolFailure(
            f"{memory_id} is immutable and is never replaced; nothing was stored. Remember the correction "
            "without replaces, or forget the memory first"
        )
    return old


def _update_advice(runtime: Runtime, view: View, old: MemoryRecord) -> str:
    """What to update instead of ``old``, which is no longer active: the memory that stands in its place
    at the end of its chain of replacements, or, when that chain ends in a memory retracted or purged
    since (an update of it would be refused in turn), to remember the new text without replaces."""
    current = old
    for _, current in replacements(runtime.store, view, old):
        if current.status == "active" and not current.past_expiry(runtime.clock()):
            if current.id == old.replaced_by:
                return f". Update {current.id}, which replaced it"
            return f". Update {current.id}, which stands in its place now (through {old.replaced_by})"
    if current is old:  # retracted or purged: nothing stands in its place
        return ". Remember the new text without replaces" + (
            " (its own text remembered again restores it)" if old.status == "retracted" else ""
        )
    return (
        f". Nothing stands in its place: {current.id}, the last memory to replace it, is "
        f"{current.status_at(runtime.clock())}; remember the new text without replaces"
    )


def inherited(draft: Draft, old: MemoryRecord, given: set[str]) -> Draft:
    """An update keeps the replaced memory's kind, tags, episode, tier, visibility and date unless the
    caller gave them. It cannot change who reads the memory: the replaced memory would vanish for readers who
    cannot see its replacement (or the reverse)."""
    kept = {name: getattr(old, name) for name in INHERITED if name not in given}
    if draft.agent_id != old.agent_id and kept.get("protection_tier") in ("protected", "immutable"):
        kept["protection_tier"] = "standard"  # another agent's word never takes a tier it was not given
    updated = replace(draft, **kept)
    # A correction of what happened then is of that time: a memory dated when it happened (occurred_at
    # before it was written) hands its date on unless given one (a trial's corrected incident jumped to
    # today and out of its window). One dated when written is corrected now: consolidation then reads
    # the correction as newer than what was said since (a review). Not an ephemeral one: it lasts its own
    # time from now, not what is left of the old one's.
    if "occurred_at" not in given and updated.protection_tier != "ephemeral" and dated_back(old):
        updated = replace(updated, occurred_at=old.created_at)
    # A correction of something true until a time is true until then too, unless it says otherwise: an expiry
    # given (``expires_at``), not the one an ephemeral tier counts from when it happened.
    if "expires_at" not in given and old.protection_tier != "ephemeral":
        updated = replace(updated, expires_at=expiry_under(old, updated.protection_tier))
    if updated.visibility != old.visibility:
        raise ToolFailure(
            f"{old.id} has visibility {old.visibility!r} and an update keeps who reads a memory; nothing was "
            f"stored. Leave visibility out (or pass {old.visibility!r}), or remember the text as a new memory "
            "without replaces"
        )
    return updated


def dated_back(memory: MemoryRecord) -> bool:
    """Whether ``memory`` was dated before it was written (its occurred_at), read from when consolidation
    first examined it (as it was written)."""
    examined = memory.consolidated_at
    return examined is not None and memory.created_at < examined - timedelta(minutes=1)


def check_visibility(draft: Draft, caller: Caller, tool: str) -> None:
    """An org-visible memory is read by the whole org: only a caller that may change the org writes one."""
    if draft.visibility == "org":
        caller.check_org_change(draft.scope.org_id, "an org-visible memory", tool)


def prepare(runtime: Runtime, draft: Draft) -> Prepared:
    """The record ``draft`` would store; what the write service refuses is a tool error."""
    try:
        return runtime.writer.prepare(draft)
    except WriteRefused as exc:
        raise ToolFailure(str(exc)) from None


def output_of(result: WriteResult, fields: MemoryFields | None = None) -> RememberOutput:
    """The tool's result for ``result``; ``fields``: the arguments it was written from, whose cleaning the
    note adds."""
    stored = result.memory
    collapsed = None
    if result.absorbed_into is not None:
        summary: ConsolidationSummary | None = ConsolidationSummary(
            resolver="rules:intra-batch", absorbed_into=result.absorbed_into
        )
        collapsed = (
            f"stored as superseded by {result.absorbed_into}: a later item of this batch says all it says"
        )
    else:
        summary = ConsolidationSummary.of(result.consolidation) if result.consolidation is not None else None
    return RememberOutput(
        org_id=stored.org_id,
        project_id=stored.project_id,
        id=stored.id,
        status="stored" if result.created else "duplicate",
        duplicate_of=None if result.created else stored.id,
        kind=stored.kind,
        agent_id=stored.agent_id,
        session_id=stored.session_id,
        episode_id=stored.episode_id,
        created_at=iso(stored.created_at),
        protection_tier=stored.protection_tier,
        visibility=stored.visibility,
        expires_at=iso(stored.expires_at) if stored.expires_at else None,
        note="; ".join(filter(None, [collapsed, result.note, fields.cleaning_note() if fields else None]))
        or None,
        consolidation=summary,
        redacted=result.redacted,
    )


def remember(args: RememberInput, runtime: Runtime, caller: Caller) -> RememberOutput:
    draft = draft_of(args, runtime, caller)
    old = None
    if args.replaces is not None:
        old = replaced_memory(runtime, view_for(args, runtime, caller), args.replaces, caller)
        draft = inherited(draft, old, args.model_fields_set)
    check_visibility(draft, caller, "remember")
    prepared = prepare(runtime, draft)
    given = args.model_fields_set
    try:
        # The same text: only its tags, tier or expiry change.
        if (
            old is not None
            and prepared.record.id == old.id
            and {"tags", "protection_tier", "expires_at"} & given
        ):
            return amended(runtime, old, prepared, args)
        written = runtime.writer.remember(prepared, llm=caller.llm, replaces=old, by_person=caller.person)
        out = output_of(written, args)
        if old is None and (lasting := made_lasting(runtime, out, prepared, args)) is not None:
            return lasting
        kept_expiry(out, prepared, args)
    except WriteRefused as exc:
        raise ToolFailure(str(exc)) from None
    if (
        old is not None
        and old.protection_tier == "ephemeral"
        and out.expires_at is not None  # not when the text was stored already, as a lasting memory
        and "protection_tier" not in args.model_fields_set
    ):
        # A correction of a temporary state ("the runner pool is back") is often lasting: say it expires too.
        kept = f"kept the ephemeral tier of {old.id}: it expires at {out.expires_at} unless remembered with another protection_tier"
        out.note = f"{out.note}; {kept}" if out.note else kept
    return out


async def handle(args: RememberInput, runtime: Runtime, caller: Caller) -> RememberOutput:
    return await anyio.to_thread.run_sync(remember, args, runtime, caller)
