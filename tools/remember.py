"""remember: store what the agent learned, verbatim, with its provenance; identical content is stored once."""

from __future__ import annotations

import logging
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

import anyio
from pydantic import BaseModel, Field, field_validator

from retrieval.consolidation.report import Actor, ConsolidationReport
from retrieval.corroboration import ClusterMember
from retrieval.redaction import Redacted, redact
from retrieval.text import content_hash, document_text, searchable_text
from storage.records import LineageEvent, MemoryKind, MemoryRecord, NewMemory, Scope

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from storage.store import MemoryStore

from tools.common import (
    Caller,
    Identifier,
    OccurredAt,
    Runtime,
    ScopeArgs,
    Tag,
    ToolFailure,
    iso,
    memory_id_for,
)

log = logging.getLogger(__name__)

FUTURE_SLACK = timedelta(minutes=5)  # clocks of different machines disagree a little


class RememberInput(ScopeArgs):
    content: str = Field(
        min_length=1,
        max_length=1_000_000,
        description="What to remember, verbatim: one durable fact, decision, fix or observation "
        "(limit MEMORIA_MAX_CONTENT_CHARS, 20,000 characters by default).",
    )
    kind: Literal["fact", "episode", "artifact"] = Field(
        "fact",
        description="fact: a durable statement; episode: a summary of what happened; artifact: code, config or a document.",
    )
    tags: list[Tag] = Field(
        default_factory=list, max_length=1_000, description="Short labels to filter recall by."
    )
    agent_id: Identifier | None = Field(None, description="Who learned this. Default: the MCP client's name.")
    session_id: Identifier | None = Field(
        None, description="The working session. Default: one per client connection."
    )
    episode_id: Identifier | None = Field(
        None, description="Groups memories from the same episode (task, conversation)."
    )
    protection_tier: Literal["standard", "immutable", "protected", "ephemeral"] = Field(
        "standard",
        description="standard; immutable: never superseded; protected: superseded only by an explicit revision; "
        "ephemeral: may expire.",
    )
    occurred_at: OccurredAt = Field(
        None,
        description="When this was learned or happened, ISO 8601 (UTC if no offset). Default: now. "
        "Pass it when importing history, so dates and recency are right.",
    )

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return not_blank(value)


def not_blank(content: str) -> str:
    """The content to store: NUL characters removed (they never reach storage); refused when nothing
    visible is left once control and format characters are set aside."""
    if not content.strip():
        raise ValueError("is empty or whitespace only: pass the text to remember")
    cleaned = content.replace("\x00", "")
    visible = "".join(char for char in cleaned if unicodedata.category(char) not in ("Cc", "Cf"))
    if not visible.strip():
        raise ValueError(
            "holds only control characters (no visible text once they are removed): pass the text to remember"
        )
    return cleaned


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

    @classmethod
    def of(cls, report: ConsolidationReport) -> ConsolidationSummary:
        return cls(**{name: getattr(report, name) for name in cls.model_fields})


class RememberOutput(BaseModel):
    id: str = Field(description="The memory's id (the existing one for a duplicate).")
    status: Literal["stored", "duplicate"]
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
    expires_at: str | None = None
    note: str | None = None
    consolidation: ConsolidationSummary | None = None
    redacted: str | None = Field(
        None,
        description="Secrets found in the content or tags and replaced by [REDACTED:<kind>] before anything "
        "was embedded or stored: kinds and counts, never the values.",
    )


def without_secrets(args: RememberInput) -> tuple[RememberInput, str | None]:
    """``args`` with every secret in its content and tags replaced (``retrieval.redaction``), and a
    summary of what was replaced (None: nothing)."""
    content = redact(args.content)
    tags = [redact(tag) for tag in args.tags]
    found: Counter[str] = Counter()
    for result in (content, *tags):
        found.update(dict(result.found))
    if not found:
        return args, None
    summary = Redacted(content.text, tuple(found.items())).summary()
    log.warning("replaced secrets in a memory before storing it: %s", summary)
    return args.model_copy(update={"content": content.text, "tags": [tag.text for tag in tags]}), summary


def check_limits(args: RememberInput, runtime: Runtime) -> None:
    settings = runtime.settings
    if len(args.content) > settings.max_content_chars:
        raise ToolFailure(
            f"content is {len(args.content):,} characters; the limit is {settings.max_content_chars:,}. "
            "Store one fact per memory, or split the text into smaller memories."
        )
    if len(args.tags) > settings.max_tags:
        raise ToolFailure(f"tags has {len(args.tags)} entries; at most {settings.max_tags} are allowed")


def new_record(args: RememberInput, runtime: Runtime, caller: Caller) -> MemoryRecord:
    """The record ``args`` would store (its id is deterministic, so it may already exist)."""
    scope = args.scope(runtime.settings)
    digest = content_hash(args.content)
    now = runtime.clock()
    when = now if args.occurred_at is None else args.occurred_at
    if when > now + FUTURE_SLACK:
        raise ToolFailure(
            f"occurred_at {iso(when)} is in the future (now is {iso(now)}): pass when it was learned or "
            "happened, or leave it out for now"
        )
    return MemoryRecord(
        id=memory_id_for(scope, digest),
        org_id=scope.org_id,
        project_id=scope.project_id,
        agent_id=args.agent_id or caller.agent_id,
        session_id=args.session_id or caller.session_id,
        episode_id=args.episode_id,
        kind=args.kind,
        content=args.content,
        content_hash=digest,
        tags=tuple(dict.fromkeys(args.tags)),
        protection_tier=args.protection_tier,
        status="active",
        replaced_by=None,
        weight=1.0,
        created_at=when,
        updated_at=now,
        embedder=runtime.models.embedder.name,
        simhash=fingerprint(args.content),
        expires_at=now + timedelta(seconds=runtime.settings.ephemeral_ttl_seconds)
        if args.protection_tier == "ephemeral"
        else None,
    )


def preceding_contents(records: list[MemoryRecord], store: MemoryStore) -> dict[str, str]:
    """For each record in an episode, the content of the memory just before it in that episode: the
    previous record of the batch, or for the first of an episode the latest stored member not newer
    than it. Record id -> that content."""
    preceding: dict[str, str] = {}
    first: dict[str, MemoryRecord] = {}
    last: dict[str, str] = {}
    for record in records:
        if record.episode_id is None:
            continue
        if record.episode_id in last:
            preceding[record.id] = last[record.episode_id]
        else:
            first[record.episode_id] = record
        last[record.episode_id] = record.content
    if not first:
        return preceding
    scope = records[0].scope
    batch = {record.id for record in records}
    before: dict[str, str] = {}  # record id -> id of the stored memory before it
    stubs = store.episode_member_stubs(scope, list(first))
    for episode_id, record in first.items():
        earlier = [
            s
            for s in stubs
            if s.episode_id == episode_id and s.id not in batch and s.created_at <= record.created_at
        ]
        if earlier:
            before[record.id] = max(earlier, key=lambda s: (s.created_at, s.id)).id
    if before:
        found = store.get_memories(list(set(before.values())), scope)
        preceding |= {rid: found[mid].content for rid, mid in before.items() if mid in found}
    return preceding


def with_vectors(
    records: list[MemoryRecord], runtime: Runtime, preceding: dict[str, str] | None = None
) -> list[NewMemory]:
    """Embed in one batch and attach the full-text field (content, tags, author, date, the memory before
    it in its episode: ``preceding`` maps record id -> that content)."""
    embedder = runtime.models.embedder
    vectors = embedder.embed_documents(
        [document_text(record.content, record.agent_id, embedder.name) for record in records]
    )
    return [
        NewMemory(
            record,
            vector,  # a float32 row of the embedder's batch
            searchable_text(
                record.content,
                record.tags,
                record.agent_id,
                record.created_at,
                (preceding or {}).get(record.id),
            ),
        )
        for record, vector in zip(records, vectors, strict=True)
    ]


def remember(args: RememberInput, runtime: Runtime, caller: Caller) -> RememberOutput:
    # One freshness check for the request's reads; every write sequence in it checks again under the lock.
    with runtime.store.one_version():
        return _remember(args, runtime, caller)


def _remember(args: RememberInput, runtime: Runtime, caller: Caller) -> RememberOutput:
    args, redacted = without_secrets(args)
    check_limits(args, runtime)
    record = new_record(args, runtime, caller)
    store = runtime.store
    existing = store.get_memory(record.id, record.scope)
    actor = Actor(record.agent_id, record.session_id)
    note = None
    consolidation: ConsolidationReport | None = None
    if existing is None or existing.status in ("retracted", "purged"):
        record = examined_as_written(record, runtime)
        new = with_vectors([record], runtime, preceding_contents([record], store))[0]  # only what is new
        if existing is None:
            stored, created = store.insert_memory(new)
        else:  # stated again after a retraction or purge: it is live again, with lineage
            stored, created = store.restore_memory(new), True
            store.add_lineage([restore_event(stored, actor, runtime.clock())])
            note = f"restored: an identical memory had been {existing.status}"
        if created:
            runtime.corroboration.observe(stored.scope, cluster_member(stored))
            with unmarked_on_failure(store, [stored.id]):
                consolidation = runtime.consolidation.on_write(
                    stored, as_array(new.vector), llm=caller.llm, actor=actor, mark=False
                )
    else:
        stored, created = existing, False
        if stored.status == "superseded":
            head = current_version(store, stored)
            note = f"an identical memory was superseded; the current memory is {head.id}"
        elif stored.consolidated_at is None and stored.agent_id == record.agent_id:
            # A retried call (or the next round of one) finishes the consolidation the first one began.
            vectors = store.memory_vectors([stored.id], stored.scope)
            if stored.id in vectors:
                consolidation = runtime.consolidation.on_write(
                    stored, vectors[stored.id], llm=caller.llm, actor=actor
                )
        elif store.add_attestation(stored, record.agent_id, record.session_id, record.created_at):
            # Another agent reached the same conclusion: stored once, counted as corroboration.
            runtime.corroboration.attest(stored.scope, stored.id, record.agent_id)
            note = f"already stored by {stored.agent_id}; recorded {record.agent_id} as corroborating it"
    if consolidation is not None:
        track_consolidation(runtime, stored.scope, consolidation, stored.id)
    return output_for(
        stored,
        created=created,
        note=note,
        consolidation=ConsolidationSummary.of(consolidation) if consolidation is not None else None,
        redacted=redacted,
    )


def examined_as_written(record: MemoryRecord, runtime: Runtime) -> MemoryRecord:
    """``record`` stamped as examined by consolidation, which runs right after it is inserted: one
    write instead of an insert and then an update (the update was most of a remember's time)."""
    if not runtime.consolidation.policy.enabled:
        return record
    return replace(record, consolidated_at=runtime.clock())


@contextmanager
def unmarked_on_failure(store: MemoryStore, memory_ids: Sequence[str]) -> Iterator[None]:
    """If consolidation fails after memories went in stamped as examined, take the stamp off again, so a
    retried call (or the background sweep) examines them. A process killed in between leaves them
    stamped: they are stored and recalled all the same, only not checked against their neighbours."""
    try:
        yield
    except BaseException:
        if memory_ids:
            try:
                store.mark_consolidated(memory_ids, None)
            except Exception:
                log.warning("could not clear the consolidation stamp of %s", memory_ids, exc_info=True)
        raise


def track_consolidation(
    runtime: Runtime, scope: Scope, report: ConsolidationReport, written_id: str | None = None
) -> None:
    """Tell this process's cluster cache what consolidation changed: reworded memories join it, memories
    that left the active set stop counting, absorbed authors count as corroborating their survivor."""
    if report.created:
        for memory in runtime.store.get_memories(report.created, scope).values():
            runtime.corroboration.observe(scope, cluster_member(memory))
    for memory_id, agent_id in report.attested:
        runtime.corroboration.attest(scope, memory_id, agent_id)
    gone = [*report.superseded, *report.revised]
    if written_id is not None and report.absorbed_into:
        gone.append(written_id)
    if gone:
        runtime.corroboration.retire(scope, gone)


def output_for(
    stored: MemoryRecord,
    *,
    created: bool,
    note: str | None,
    consolidation: ConsolidationSummary | None,
    redacted: str | None = None,
) -> RememberOutput:
    return RememberOutput(
        org_id=stored.org_id,
        project_id=stored.project_id,
        id=stored.id,
        status="stored" if created else "duplicate",
        duplicate_of=None if created else stored.id,
        kind=stored.kind,
        agent_id=stored.agent_id,
        session_id=stored.session_id,
        episode_id=stored.episode_id,
        created_at=iso(stored.created_at),
        protection_tier=stored.protection_tier,
        expires_at=iso(stored.expires_at) if stored.expires_at else None,
        note=note,
        consolidation=consolidation,
        redacted=redacted,
    )


def current_version(store: MemoryStore, memory: MemoryRecord) -> MemoryRecord:
    """Follow ``replaced_by`` to the memory that is authoritative now."""
    seen = {memory.id}
    while memory.replaced_by and memory.replaced_by not in seen:
        following = store.get_memory(memory.replaced_by, memory.scope)
        if following is None:
            break
        seen.add(following.id)
        memory = following
    return memory


def restore_event(memory: MemoryRecord, actor: Actor, at: datetime) -> LineageEvent:
    return LineageEvent.new(
        memory.scope,
        "restore",
        memory.id,
        resolver="remember",
        reason="the same content was remembered again",
        agent_id=actor.agent_id,
        session_id=actor.session_id,
        at=at,
    )


def cluster_member(record: MemoryRecord) -> ClusterMember:
    value = record.simhash if record.simhash is not None else fingerprint(record.content)
    return ClusterMember(record.id, record.agent_id, record.weight, record.created_at, value)


# numpy (SimHash and vectors) is imported on the first write, not when the server starts: the MCP
# handshake must not wait for it.
def fingerprint(content: str) -> int:
    from retrieval.simhash import simhash

    return simhash(content)


def as_array(vector: npt.NDArray[np.float32] | Sequence[float]) -> npt.NDArray[np.float32]:
    import numpy as np

    return np.asarray(vector, dtype=np.float32)


async def handle(args: RememberInput, runtime: Runtime, caller: Caller) -> RememberOutput:
    return await anyio.to_thread.run_sync(remember, args, runtime, caller)
