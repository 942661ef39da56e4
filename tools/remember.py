"""remember: store what the agent learned, verbatim, with its provenance; identical content is stored once."""

from __future__ import annotations

from typing import Literal

import anyio
from pydantic import BaseModel, Field, field_validator

from retrieval.corroboration import ClusterMember
from retrieval.simhash import simhash
from retrieval.text import content_hash
from storage.records import MemoryKind, MemoryRecord, NewMemory
from tools.common import Caller, Identifier, Runtime, ScopeArgs, Tag, ToolFailure, iso, memory_id_for


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

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty or whitespace only: pass the text to remember")
        return value


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
    note: str | None = None


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
        created_at=now,
        updated_at=now,
        embedder=runtime.models.embedder.name,
        simhash=simhash(args.content),
    )


def with_vectors(records: list[MemoryRecord], runtime: Runtime) -> list[NewMemory]:
    """Embed in one batch and attach the full-text field (content plus tags)."""
    vectors = runtime.models.embedder.embed_documents([record.content for record in records])
    return [
        NewMemory(
            record,
            tuple(float(x) for x in vector),
            record.content if not record.tags else record.content + "\n" + " ".join(record.tags),
        )
        for record, vector in zip(records, vectors, strict=True)
    ]


def remember(args: RememberInput, runtime: Runtime, caller: Caller) -> RememberOutput:
    check_limits(args, runtime)
    record = new_record(args, runtime, caller)
    existing = runtime.store.get_memory(record.id, record.scope)
    if existing is None:  # embed only what is new
        stored, created = runtime.store.insert_memory(with_vectors([record], runtime)[0])
    else:
        stored, created = existing, False
    note = None
    if created:
        runtime.corroboration.observe(stored.scope, cluster_member(stored))
    elif stored.status != "active":
        note = f"an identical memory exists with status {stored.status!r}" + (
            f" (replaced by {stored.replaced_by})" if stored.replaced_by else ""
        )
    elif runtime.store.add_attestation(stored, record.agent_id, record.session_id, record.created_at):
        # Another agent reached the same conclusion: stored once, counted as corroboration.
        runtime.corroboration.attest(stored.scope, stored.id, record.agent_id)
        note = f"already stored by {stored.agent_id}; recorded {record.agent_id} as corroborating it"
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
        note=note,
    )


def cluster_member(record: MemoryRecord) -> ClusterMember:
    fingerprint = record.simhash if record.simhash is not None else simhash(record.content)
    return ClusterMember(record.id, record.agent_id, record.weight, record.created_at, fingerprint)


async def handle(args: RememberInput, runtime: Runtime, caller: Caller) -> RememberOutput:
    return await anyio.to_thread.run_sync(remember, args, runtime, caller)
