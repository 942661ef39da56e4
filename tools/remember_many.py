"""remember_many: store several memories in one call (one embedding batch, one append). Near-duplicates
within the batch collapse: the last one written survives and the others are kept as superseded by it,
with lineage; then each new memory is consolidated against the store as ``remember`` does
(``writing.service``)."""

from __future__ import annotations

from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from storage.records import Visibility
from tools.amend import made_lasting
from tools.common import Caller, Identifier, Runtime, ScopeArgs, ToolFailure
from tools.remember import (
    MemoryFields,
    RememberInput,
    RememberOutput,
    check_visibility,
    draft_of,
    output_of,
    prepare,
)
from writing.drafts import WriteRefused


def _described_on_remember(schema: dict[str, Any]) -> None:
    """An item's fields are remember's arguments, described once in remember's schema: the tool list an
    agent loads every session carries the descriptions once."""
    for name, field in schema.get("properties", {}).items():
        if name != "agent_id":
            field.pop("description", None)


class BatchItem(MemoryFields):
    # A misspelt key ("tag", "kinds") is refused, not dropped: the memory would be stored without it.
    model_config = ConfigDict(extra="forbid", json_schema_extra=_described_on_remember)

    agent_id: Identifier | None = Field(None, description="This item's agent, if not the batch's.")


MAX_ITEMS = 200  # memories one remember_many call takes


class RememberManyInput(ScopeArgs):
    items: list[BatchItem] = Field(min_length=1, max_length=MAX_ITEMS, description="In the order learned.")
    agent_id: Identifier | None = Field(None, description="Default: the client's name.")
    session_id: Identifier | None = Field(None, description="Default: one per connection.")
    visibility: Visibility | None = None  # as remember's (default project)


class RememberManyOutput(BaseModel):
    results: list[RememberOutput] = Field(description="One per item, in order.")
    stored: int
    duplicates: int
    collapsed: int = Field(description="Items that were near-duplicates of a later item in the same batch.")


def remember_many(args: RememberManyInput, runtime: Runtime, caller: Caller) -> RememberManyOutput:
    drafts = [
        draft_of(
            RememberInput(
                **item.model_dump(exclude={"agent_id"}),
                agent_id=item.agent_id or args.agent_id,
                session_id=args.session_id,
                visibility=args.visibility or "project",
                org_id=args.org_id,
                project_id=args.project_id,
            ),
            runtime,
            caller,
        )
        for item in args.items
    ]
    check_visibility(drafts[0], caller, "remember_many")
    prepared = []
    for index, draft in enumerate(drafts):
        try:  # every item is checked before anything is written: a refused batch stores nothing
            prepared.append(prepare(runtime, draft))
        except ToolFailure as exc:
            # Counted from 1, as the results are numbered, with its place in `items` (a trial read "item 0").
            raise ToolFailure(f"item {index + 1} (`items.{index}`): {exc}") from None
    written = runtime.writer.remember_many(prepared, llm=caller.llm)
    results = [output_of(result, item) for result, item in zip(written, args.items, strict=True)]
    for index, (out, ready, item) in enumerate(zip(results, prepared, args.items, strict=True)):
        try:  # an ephemeral memory stated again as lasting, as remember makes it (a review)
            results[index] = made_lasting(runtime, out, ready, item) or out
        except WriteRefused as exc:  # forgotten meanwhile: the item stays as written
            out.note = f"{out.note}; {exc}" if out.note else str(exc)
    return RememberManyOutput(
        results=results,
        stored=sum(1 for r in results if r.status == "stored"),
        duplicates=sum(1 for r in results if r.status == "duplicate"),
        collapsed=sum(
            1
            for r in results
            if r.consolidation
            and r.consolidation.absorbed_into
            and r.consolidation.resolver == "rules:intra-batch"
        ),
    )


async def handle(args: RememberManyInput, runtime: Runtime, caller: Caller) -> RememberManyOutput:
    return await anyio.to_thread.run_sync(remember_many, args, runtime, caller)
