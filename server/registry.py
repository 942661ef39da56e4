"""Registering a tool from its pydantic input and output models.

The wrapper's signature has one parameter per field of the input model, each optional and loosely
typed for the SDK; the schema clients see is the model's own (its defaults and required arguments), so
the model stays the single source of it. The arguments the client actually sent (read from the request,
so an unknown or a missing argument is seen too) are validated by the model here: a bad, unknown or
missing argument gets an error that names the field, the bound and the value, instead of a raw pydantic
dump or a silently ignored key.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ValidationError, WrapValidator

from retrieval.models.llm.base import ClientInputNeeded
from retrieval.models.model_files import short_reason
from server.arguments import friendly_validation_message
from server.auth import authorize, current_grant
from server.identity import end_session, resolve_caller
from server.llm_bridge import SamplingLedger, input_required, recorded_ledger
from server.state import AppState
from tools.common import Caller, NotFound, Runtime, ServerFault, ToolFailure

log = logging.getLogger(__name__)


class NotFoundError(ToolError):
    """A tool error for something the caller named that it may not read here (``tools.common.NotFound``):
    a resource read turns it into "resource not found" (``server.resources``)."""


class FaultError(ToolError):
    """A tool error for the server's fault (a store or model fault, a failed start), not for what the caller
    asked: a resource read says "internal error" for it, and "invalid params" for any other tool error (a
    refusal, a bad argument)."""


Handler = Callable[[Any, Runtime, Caller], Awaitable[BaseModel]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    handler: Handler
    effect: Literal["reads", "writes", "erases"]  # erases: may delete what it names (forget)
    uses_llm: bool = False  # may ask the request's LLM (sampling needs the input-required flow)
    # Reports a session: when it is the connection's own, the connection's next task begins a new one.
    ends_session: bool = False
    # Begins a task (recall, remember): after a report of the connection's session, a new session.
    begins_task: bool = False
    # The text an agent reads of a result (the structured content carries the whole output); None: JSON.
    text_of: Callable[[Any], str] | None = None
    # The result's fields the output schema lists (None: all): those an agent acts on, not the echoes of
    # its own arguments. The structured content still carries every field.
    output_fields: tuple[str, ...] | None = None

    @property
    def annotations(self) -> ToolAnnotations:
        """MCP hints from ``effect``: every tool is closed-world; writing tools are idempotent (ids are
        content hashes, outcome reports replay)."""
        if self.effect == "reads":
            return ToolAnnotations(read_only_hint=True, open_world_hint=False)
        return ToolAnnotations(
            read_only_hint=False,
            destructive_hint=self.effect == "erases",
            idempotent_hint=True,
            open_world_hint=False,
        )


def build_tool(
    spec: ToolSpec, *, tokens_required: bool = False, limits: Mapping[str, Mapping[str, int]] | None = None
) -> Tool:
    """The SDK tool for ``spec``. With ``tokens_required`` (HTTP auth configured), an HTTP request that
    arrives without a grant is refused rather than served unrestricted (fail closed)."""

    async def call(
        ctx: Context[AppState, Any], **arguments: Any
    ) -> BaseModel | InputRequiredResult | CallToolResult:
        result = await invoke(spec, ctx, sent_arguments(ctx, arguments), tokens_required=tokens_required)
        if spec.text_of is None or not isinstance(result, spec.output_model):  # (input required: as it is)
            return result
        # Said once: the text for the agent, the data for the client (not the same memories twice).
        return CallToolResult(
            content=[TextContent(type="text", text=spec.text_of(result))],
            structured_content=result.model_dump(mode="json", by_alias=True),
        )

    call.__name__ = spec.name
    call.__doc__ = spec.description
    returns = spec.output_model | InputRequiredResult if spec.uses_llm else spec.output_model
    call.__signature__ = _signature(spec.input_model, returns)  # type: ignore[attr-defined]
    call.__annotations__ = {
        **{name: parameter.annotation for name, parameter in call.__signature__.parameters.items()},  # type: ignore[attr-defined]
        "return": call.__signature__.return_annotation,  # type: ignore[attr-defined]
    }
    tool = Tool.from_function(
        call, name=spec.name, title=spec.title, description=spec.description, annotations=spec.annotations
    )
    if tool.fn_metadata.output_schema is not None:
        tool.fn_metadata.output_schema = compact_schema(tool.fn_metadata.output_schema, spec.output_fields)
    required = [name for name, field in spec.input_model.model_fields.items() if field.is_required()]
    # The tool's own title names it: the SDK's generated "<tool>Arguments" title is left out.
    tool.parameters = {
        **{key: value for key, value in tool.parameters.items() if key != "title"},
        "properties": with_limits(model_properties(spec.input_model), limits or {}),
        **({"required": required} if required else {}),
    }
    return tool


def compact_schema(schema: dict[str, Any], fields: Sequence[str] | None = None) -> dict[str, Any]:
    """An output schema an agent can afford to load every session: the result's top-level fields with
    their JSON types, without descriptions, nested definitions or the list of fields always present (the
    tool's description says what comes back; a client still checks the structured content against it).
    The full models' schemas were three fifths of tools/list."""
    definitions = schema.get("$defs", {})

    def types_of(field: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in field:
            return types_of(definitions.get(field["$ref"].rsplit("/", 1)[-1], {}))
        if "type" in field:
            return {"type": field["type"]}
        members = [types_of(member) for member in field.get("anyOf", [])]
        found = [member["type"] for member in members if "type" in member]
        if members and len(found) == len(members):
            flat = [t for group in found for t in (group if isinstance(group, list) else [group])]
            return {"type": list(dict.fromkeys(flat))}
        return {}

    return {
        "type": "object",
        "properties": {
            name: types_of(field)
            for name, field in schema.get("properties", {}).items()
            if fields is None or name in fields
        },
    }


async def invoke(
    spec: ToolSpec,
    ctx: Context[AppState, Any],
    arguments: dict[str, Any],
    *,
    tokens_required: bool,
    with_llm: bool = True,
    retry: str | None = None,
    strict: bool = True,
) -> BaseModel | InputRequiredResult:
    """Run ``spec``'s handler on ``arguments`` as a tool call does: validated by its input model, checked
    against the request's grant, for the calling client; every failure becomes a ToolError that says what
    to do. Prompts and resources run tools through here too (``with_llm=False``: no sampling round trips;
    ``retry``: what a bad argument's message tells the reader to do, see friendly_validation_message;
    ``strict=False``: arguments that arrive as text, a resource URI's query or a prompt's arguments, are
    read as the types they spell)."""
    state: AppState = ctx.request_context.lifespan_context
    try:
        # None: the models' own strictness (strict, but JSON's text for a datetime); False: lax throughout.
        args = spec.input_model.model_validate(
            whole_numbers(spec.input_model, arguments), strict=None if strict else False
        )
    except ValidationError as exc:
        # Bounds are said as this server enforces them (its settings), not the models' hard caps.
        limits = state.settings.schema_limits(spec.name)
        raise ToolError(friendly_validation_message(spec.name, exc, retry=retry, limits=limits)) from None
    ledger = SamplingLedger()
    try:
        grant = current_grant()
        if grant is None and tokens_required and ctx.request_context.request is not None:
            raise ToolFailure("this server requires a bearer token for every HTTP request; send one")
        if grant is not None:
            then = retry if retry is not None else f"call {spec.name} again"  # "": a prompt's, nothing said
            args = authorize(args, spec.effect, grant, state.settings, then)
        caller = resolve_caller(ctx, state, grant, begins_task=spec.begins_task)
        # Registered before the call's first wait, in the order the calls arrived: a read waits for the
        # writes of its client's session sent before it (``server.ordering``); the connection's session,
        # whatever session an argument names (a remember that names one and a recall that does not are
        # still one client's calls, in order).
        key = f"{caller.agent_id}\x00{caller.session_id}"
        written = state.writes_in_flight.begin(key) if spec.effect != "reads" else None
        try:
            if written is None:
                await state.writes_in_flight.settled(key)
            runtime = await state.runtime()
            if spec.uses_llm and with_llm:
                ledger = recorded_ledger(ctx)
                caller = replace(caller, llm=state.llms.for_request(ctx, ledger))
            result = await spec.handler(args, runtime, caller)
        finally:
            if written is not None:
                state.writes_in_flight.end(key, written)
        if spec.ends_session and isinstance(result, spec.output_model):
            # The connection's next task is a session of its own (when its own session was reported).
            end_session(ctx, state, result.session_id, grant)  # type: ignore[attr-defined]
        return result
    except ClientInputNeeded as needed:  # 2026-07-28: ask the client, then the call is retried
        return input_required(needed, ledger)
    except NotFound as exc:
        raise NotFoundError(str(exc)) from None
    except ServerFault as exc:
        raise FaultError(str(exc)) from None
    except ToolFailure as exc:
        raise ToolError(str(exc)) from None
    except Exception as exc:  # a store or model fault: say what failed instead of a bare "error"
        log.exception("%s failed", spec.name)
        raise FaultError(
            f"{spec.name} failed: {short_reason(exc)}. Nothing was changed by this call if it did not "
            "complete; retrying is safe. If it keeps failing, check the server's stderr log."
        ) from None


def sent_arguments(ctx: Context[AppState, Any], parsed: dict[str, Any]) -> dict[str, Any]:
    """The arguments the client sent: the SDK's parsed value for each known one it sent (strings that
    hold JSON lists already decoded), and unknown ones as sent, for the model to refuse by name."""
    params = ctx.request_context.params
    raw = params.get("arguments") if params is not None else None
    if not isinstance(raw, dict):  # no raw request to compare with: what the SDK parsed
        return {name: value for name, value in parsed.items() if value is not None}
    return {name: parsed.get(name, value) for name, value in raw.items()}


def whole_numbers(input_model: type[BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with a number that has no fraction given as one where a whole number goes (``"top_k":
    5.0``): JSON Schema's "integer" is any number without one, and some clients send every number as a
    float (a trial saw 5.0 refused). 5.5 stays, for the model to refuse."""
    fields = input_model.model_fields
    return {
        name: int(value)
        if isinstance(value, float)
        and value.is_integer()
        and name in fields
        and plain_type(fields[name].annotation) is int
        else value
        for name, value in arguments.items()
    }


def plain_type(annotation: Any) -> Any:
    """The one type an annotation names under ``Annotated`` and ``| None`` (``int`` of ``Annotated[int, ...]
    | None``); a union of several, as it is."""
    if get_origin(annotation) in (Union, UnionType):
        members = [member for member in get_args(annotation) if member is not type(None)]
        return plain_type(members[0]) if len(members) == 1 else annotation
    if get_origin(annotation) is Annotated:
        return plain_type(get_args(annotation)[0])
    return annotation


def _pass_through(value: Any, _handler: Any) -> Any:

    return value


def _inline_refs(schema: Any, definitions: dict[str, Any]) -> Any:
    """Replace ``{"$ref": "#/$defs/X"}`` with X's schema: each parameter's schema must stand alone."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(definitions[ref.removeprefix("#/$defs/")], definitions)
        return {key: _inline_refs(value, definitions) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_inline_refs(value, definitions) for value in schema]
    return schema


def model_properties(input_model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema properties, each standing alone (references inlined) and said briefly:
    no generated titles, an optional value as its type (not "or null": it is left out, though null is
    accepted), no null defaults. Every agent loads these in every session."""
    full = input_model.model_json_schema()
    inlined = _inline_refs(full["properties"], full.get("$defs", {}))
    return {name: _brief(field) for name, field in inlined.items()}


def with_limits(properties: dict[str, Any], limits: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """The bounds the server enforces (from its settings: ``schema_limits``) written into the schema in
    place of the models' outer bounds, so that a client sees the limit it will meet: a field name maps to
    keywords (maxLength, maxItems, minimum, maximum), applied to the field and to the same field inside a
    batch's items."""
    out: dict[str, Any] = {}
    for name, field in properties.items():
        field = dict(field)
        if name in limits:
            field.update(limits[name])
        if isinstance(field.get("items"), dict) and isinstance(field["items"].get("properties"), dict):
            field["items"] = {
                **field["items"],
                "properties": with_limits(field["items"]["properties"], limits),
            }
        out[name] = field
    return out


def _brief(field: dict[str, Any]) -> dict[str, Any]:
    field = {key: value for key, value in field.items() if key != "title"}
    if field.get("default", 0) is None:
        del field["default"]
    members = field.get("anyOf")
    if members and len(members) == 2 and {"type": "null"} in members:
        [value] = [member for member in members if member != {"type": "null"}]
        if isinstance(value.get("type"), str):  # a plain optional value: its type (omit it to leave it unset)
            field = {**{key: v for key, v in field.items() if key != "anyOf"}, **_brief(value)}
    for key in ("items", "additionalProperties"):
        if isinstance(field.get(key), dict):
            field[key] = _brief(field[key])
    if isinstance(field.get("properties"), dict):  # a batch item's fields, said as briefly
        field["properties"] = {name: _brief(value) for name, value in field["properties"].items()}
    return field


def _signature(input_model: type[BaseModel], output_model: Any) -> inspect.Signature:
    """One optional parameter per field, so the model, not the SDK, reports a missing one."""
    parameters = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    for name, field in input_model.model_fields.items():
        # The SDK json-decodes string arguments of non-`str` parameters (for clients that send lists as JSON
        # text); text must reach the model verbatim ("null" is an org name, not None), so text parameters
        # are typed `str` and passed through.
        annotation: Any = (
            Annotated[str, WrapValidator(_pass_through)] if plain_type(field.annotation) is str else Any
        )
        parameters.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=None)
        )
    return inspect.Signature(parameters, return_annotation=output_model)
