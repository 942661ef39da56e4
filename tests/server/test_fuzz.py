"""Every tool's arguments fuzzed through one MCP client, and every size limit checked at and just past it.

The fuzzer sends fully valid calls, valid calls with one argument broken (a wrong type, a value out of
range, an empty or blank string, control characters, a string or list just past its limit, a missing
required argument, an unknown argument) and plain garbage (NaN, infinities, huge numbers, lone
surrogates, deep nesting). Whatever it sends, the server keeps answering, a success matches the tool's
output model, an error is a tool error that names the argument or says what to do (no traceback, no
pydantic dump, no "X failed" from a crashed handler), and a rejected call writes nothing at all: every
table keeps its version and nothing waits in the write-behind queue. (Nor does a call that only looks:
drift, lineage, explain_ranking of a past retrieval, forget's dry run. A recall and an explain_ranking
of a new query log the retrieval, for explain and outcomes.)

CI sends 400 calls; ``MEMORIA_LONG_TESTS=1`` sends 10,000. The test checks that they were all sent.
"""

from __future__ import annotations

import math
import time
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import lancedb
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp_types import CallToolResult, Implementation

from retrieval.outcomes import score_contradicts
from server.app import build_server, tool_specs
from tests.helpers import TIMEOUT, TOOL_NAMES, make_runtime, scaled, settings_for
from tools.common import Runtime

SPECS = {spec.name: spec for spec in tool_specs()}
CALLS = scaled(400, 10_000)

# What a rejected call's message must never show: a traceback, the SDK's crash text, a raw pydantic dump.
RAW = ("Traceback", "Internal error", "validation error for", "errors.pydantic.dev", "[type=", "input_value=")
# Lookups of an id that is not in the scope asked about: the message says so (and in which scope).
NOT_FOUND = ("no memory ", "no retrieval ", "no recall of session ")


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,  # the same calls every run: a failure reproduces
        database=None,  # nothing written into the checkout
        deadline=None,
        print_blob=False,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )


# ---------------------------------------------------------------------------------------------- strategies


UNSAFE = ("Cc", "Cs", "Co", "Cn", "Zl", "Zp")  # refused in identifiers and tags (tools/common.py)
INJECTIONS = [
    "x' OR '1'='1",
    "alice' OR '1'='1",
    "'; DROP TABLE memories_v4; --",
    "' UNION SELECT * FROM outcomes --",
    "'",
    '"',
    "''",
    "\\",
    "\\'",
    "%",
    "_",
    "%_%",
    "*",
    ";--",
    "/* */",
    "NULL",
    "None",
    "true",
    "0",
    "-1",
    "1e999",
    "${jndi:ldap://x}",
    "{{7*7}}",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "ünïcödé",
    "ｆｕｌｌｗｉｄｔｈ",
    "𝔐𝔞𝔱𝔥",
    "😀 emoji",
    "\U00020000\U0002a6d6 plane two",
    "zero\u200bwidth",
    "\u202eright-to-left",
    "עברית",
    "中文",
]
WORDS = [
    "deploy",
    "postgres",
    "tuesday",
    "billing",
    "migration",
    "flag",
    "staging",
    "cache",
    "timeout",
    "retry",
]


def visible(text: str) -> str:
    """``text`` without control and format characters: what remember requires some of."""
    return "".join(char for char in text if unicodedata.category(char) not in ("Cc", "Cf"))


sentence = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
any_text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1, max_size=80)
free_text = st.one_of(
    sentence,
    st.tuples(sentence, st.sampled_from(INJECTIONS)).map(" ".join),
    st.sampled_from(INJECTIONS),
    any_text,
).filter(lambda text: bool(visible(text).strip()))  # text of control characters only is refused
printable = st.characters(exclude_categories=UNSAFE)
identifier = st.one_of(
    st.sampled_from(INJECTIONS),
    st.text(alphabet=printable, min_size=1, max_size=40),
    st.just("i" * 128),
).filter(lambda text: bool(text.strip()))
tag = st.one_of(st.sampled_from(["db", "ci", "x' OR '1'='1", "%", "_"]), identifier).filter(
    lambda text: "|" not in text and len(text) <= 64
)
tags = st.lists(tag, max_size=4)
scope_part = st.sampled_from(["fuzz", "x' OR '1'='1", "%", "ünï"])
episode = st.sampled_from(["ep-1", "ep' OR '1'='1", "ép"])
kinds = st.lists(st.sampled_from(["fact", "episode", "artifact"]), max_size=3)
# From 1970 on (earlier dates are placeholders remember refuses), a day in: the offsets stay after it in UTC.
past = st.datetimes(
    min_value=datetime(1970, 1, 2),
    max_value=datetime(2025, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(timedelta(hours=-12))]),
).map(datetime.isoformat)
naive_past = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2025, 1, 1)).map(
    datetime.isoformat
)
SCOPED = {"org_id": scope_part, "project_id": scope_part}


def still_shown(arguments: dict[str, Any]) -> bool:
    """Not an ephemeral memory dated in the past: every ``past`` date is older than its time to live, and
    such a memory is refused (recall would never show it)."""
    return not (arguments.get("protection_tier") == "ephemeral" and "occurred_at" in arguments)


item = st.fixed_dictionaries(
    {"content": free_text},
    optional={
        "kind": st.sampled_from(["fact", "episode", "artifact"]),
        "tags": tags,
        "episode_id": episode,
        "protection_tier": st.sampled_from(["standard", "immutable", "protected", "ephemeral"]),
        "occurred_at": past | naive_past,
        "agent_id": identifier,
    },
).filter(still_shown)

# Broken values by kind of argument; each must be refused with a message naming the argument.
TOO_LONG_IDENTIFIER = "i" * 129
NOT_TEXT = [42, 3.5, True, [], ["x"], {"a": 1}]
BAD_OPTIONAL_TEXT = [*NOT_TEXT, ""]
BAD_TEXT = [*BAD_OPTIONAL_TEXT, None]
BAD_IDENTIFIER = [
    *NOT_TEXT,
    "",
    "   ",
    "a\nb",
    "tab\there",
    "nul\x00",
    "line\u2028break",
    "next\x85line",
    "private\U0010fffd",
    TOO_LONG_IDENTIFIER,
]
# Text that looks like JSON ("null", "[1, 2]") is a name like any other: it reaches the model verbatim.
BAD_OPTIONAL_IDENTIFIER = BAD_IDENTIFIER
BAD_BOOL = ["maybe", 2, -1, 0.5, [], {"a": 1}]
BAD_TAGS = [
    "db",
    '"db"',
    42,
    {"a": 1},
    ["a|b"],
    [""],
    ["   "],
    ["t" * 65],
    [1],
    [None],
    ["a\nb"],
    ["t"] * 1_001,
]
BAD_KINDS = ["fact", ["memo"], [1], [None], {"a": 1}]


def bad_int(low: int, high: int, *, optional: bool = False) -> list[Any]:
    return [low - 1, high + 1, -(10**30), 10**30, "ten", 3.5, [], {"a": 1}, *([] if optional else [None])]


def literal(first: str) -> list[Any]:
    return [first.upper(), "nonsense", "", 1, None, [], {"a": 1}]


@dataclass
class Pools:
    """Ids the fuzzer looks up (the scope each lives in), seeded before it starts."""

    memories: list[tuple[dict[str, str], str]] = field(default_factory=list)
    retrievals: list[tuple[dict[str, str], str]] = field(default_factory=list)

    def memory(self) -> st.SearchStrategy[dict[str, Any]]:
        unknown = st.fixed_dictionaries(
            {"memory_id": st.sampled_from(["mem_000000000000000000000000", *INJECTIONS[:6]])},
            optional=SCOPED,
        )
        known = st.sampled_from(self.memories).map(lambda pair: {**pair[0], "memory_id": pair[1]})
        return st.one_of(known, unknown)

    def retrieval(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.sampled_from(self.retrievals).map(lambda pair: {**pair[0], "retrieval_id": pair[1]})


@dataclass(frozen=True)
class ToolFuzz:
    valid: st.SearchStrategy[dict[str, Any]]  # calls the tool accepts (lookups may find nothing)
    broken: dict[str, list[Any]]  # argument -> values it refuses
    required: tuple[str, ...] = ()
    lookup: bool = False  # a valid call may name an id this scope does not hold


def score_agrees_with_outcome(arguments: dict[str, Any]) -> bool:
    """A report whose score is on its label's side of partial (the others are refused as contradictions)."""
    return score_contradicts(arguments["outcome"], arguments.get("score")) is None


def with_fields(
    base: st.SearchStrategy[dict[str, Any]], **optional: Any
) -> st.SearchStrategy[dict[str, Any]]:
    extra = st.fixed_dictionaries({}, optional=optional)
    return st.tuples(base, extra).map(lambda pair: {**pair[0], **pair[1]})


def tool_fuzz(pools: Pools) -> dict[str, ToolFuzz]:
    scope_broken = {"org_id": BAD_OPTIONAL_IDENTIFIER, "project_id": BAD_OPTIONAL_IDENTIFIER}
    recall_like = {
        "top_k": st.integers(1, 100),
        "char_budget": st.integers(200, 200_000),
        "tags": tags,
        "kinds": kinds,
        **SCOPED,
    }
    return {
        "remember": ToolFuzz(
            st.fixed_dictionaries(
                {"content": free_text},
                optional={
                    "kind": st.sampled_from(["fact", "episode", "artifact"]),
                    "tags": tags,
                    "agent_id": identifier,
                    "session_id": identifier,
                    "episode_id": episode,
                    "protection_tier": st.sampled_from(["standard", "immutable", "protected", "ephemeral"]),
                    "occurred_at": past | naive_past,
                    **SCOPED,
                },
            ).filter(still_shown),
            {
                "content": [*BAD_TEXT, "   ", "\n\t ", "x" * 20_001, "x" * 1_000_001],
                "kind": literal("fact"),
                "tags": [*BAD_TAGS, [f"t{i}" for i in range(33)]],
                "agent_id": BAD_OPTIONAL_IDENTIFIER,
                "session_id": BAD_OPTIONAL_IDENTIFIER,
                "episode_id": BAD_OPTIONAL_IDENTIFIER,
                "protection_tier": literal("standard"),
                "occurred_at": [
                    "yesterday",
                    "2020-13-01",
                    "2999-01-01T00:00:00Z",
                    "0001-01-01T00:00:00Z",
                    "1970-01-01T00:00:00Z",
                    "0001-01-01T00:00:00+05:00",
                    "9999-12-31T23:59:59-14:00",
                    1e20,
                    [],
                    {"a": 1},
                ],
                **scope_broken,
            },
            required=("content",),
        ),
        "remember_many": ToolFuzz(
            st.fixed_dictionaries(
                {"items": st.lists(item, min_size=1, max_size=4)},
                optional={"agent_id": identifier, "session_id": identifier, **SCOPED},
            ),
            {
                "items": [
                    [],
                    "x",
                    42,
                    None,
                    ["just text"],
                    [{}],
                    [{"content": ""}],
                    [{"content": "   "}],
                    [{"content": "ok"}, {"content": "x", "kind": "note"}],
                    [{"content": "x", "tags": ["a|b"]}],
                    [{"content": "x", "tag": ["db"]}],
                    [{"content": "x" * 20_001}],
                    [{"content": "x", "episode_id": ""}],
                    [{"content": "x", "occurred_at": "0001-01-01T00:00:00+05:00"}],
                    [{"content": "x", "occurred_at": "2999-01-01T00:00:00Z"}],
                    [{"content": f"item {i}"} for i in range(201)],
                ],
                "agent_id": BAD_OPTIONAL_IDENTIFIER,
                "session_id": BAD_OPTIONAL_IDENTIFIER,
                **scope_broken,
            },
            required=("items",),
        ),
        "recall": ToolFuzz(
            st.fixed_dictionaries(
                {"query": free_text},
                optional={
                    **recall_like,
                    "session_id": identifier,
                    "agent_id": identifier,
                    "include_lineage": st.booleans(),
                },
            ),
            {
                "query": [*BAD_TEXT, "   ", "\n\t ", "q" * 4_001, "q" * 100_001],
                "top_k": [*bad_int(1, 1_000, optional=True), 101],
                "char_budget": [*bad_int(1, 10_000_000), 199, 200_001],
                "tags": [*BAD_TAGS[:-1], ["t"] * 101],
                "kinds": BAD_KINDS,
                "session_id": BAD_OPTIONAL_IDENTIFIER,
                "agent_id": BAD_OPTIONAL_IDENTIFIER,
                "include_lineage": BAD_BOOL,
                **scope_broken,
            },
            required=("query",),
        ),
        "report_outcome": ToolFuzz(
            st.fixed_dictionaries(
                {"outcome": st.sampled_from(["success", "failure", "partial"])},
                optional={
                    "score": st.floats(0.0, 1.0),
                    "session_id": identifier,
                    "note": free_text,
                    **SCOPED,
                },
            ).filter(score_agrees_with_outcome),
            {
                "outcome": literal("success"),
                "score": [-0.1, 1.5, -1e308, 1e308, "high", [], {"a": 1}],
                "session_id": BAD_OPTIONAL_IDENTIFIER,
                "note": [*NOT_TEXT, "n" * 4_001],  # an empty note is no note
                **scope_broken,
            },
            required=("outcome",),
            lookup=True,  # a session named by id that never recalled in the scope is refused
        ),
        "explain_ranking": ToolFuzz(
            st.one_of(
                with_fields(pools.retrieval(), memory_id=st.sampled_from([m for _, m in pools.memories])),
                st.fixed_dictionaries({"query": free_text}, optional=recall_like),
            ),
            {
                "retrieval_id": BAD_OPTIONAL_IDENTIFIER,
                "query": [*BAD_OPTIONAL_TEXT, "q" * 100_001],
                "memory_id": BAD_OPTIONAL_IDENTIFIER,
                "top_k": bad_int(1, 1_000, optional=True),
                "char_budget": bad_int(1, 10_000_000),
                "tags": [*BAD_TAGS[:-1], ["t"] * 101],
                "kinds": BAD_KINDS,
                **scope_broken,
            },
            lookup=True,
        ),
        "forget": ToolFuzz(
            st.one_of(
                pools.memory(),
                # max_memories goes with a query only (beside an id or a tag it is refused: a team's trial)
                st.fixed_dictionaries(
                    {"query": free_text}, optional={**SCOPED, "max_memories": st.integers(1, 20)}
                ),
            ).flatmap(
                lambda target: st.fixed_dictionaries(
                    {},
                    optional={
                        "reason": free_text,
                        "dry_run": st.booleans(),
                        "mode": st.sampled_from(["retract", "purge"]),
                    },
                ).map(lambda rest: purges_are_dry_runs({**target, **rest}))
            ),
            {
                "memory_id": BAD_OPTIONAL_IDENTIFIER,
                "query": [*BAD_OPTIONAL_TEXT, "q" * 4_001],
                "tag": BAD_OPTIONAL_IDENTIFIER,
                "mode": literal("retract"),
                "max_memories": bad_int(1, 20),
                "reason": [*NOT_TEXT, "r" * 501],
                "dry_run": BAD_BOOL,
                **scope_broken,
            },
            lookup=True,
        ),
        "drift": ToolFuzz(
            st.fixed_dictionaries(
                {}, optional={"include_resolved": st.booleans(), "limit": st.integers(1, 500), **SCOPED}
            ),
            {"include_resolved": BAD_BOOL, "limit": bad_int(1, 500), **scope_broken},
        ),
        "lineage": ToolFuzz(
            pools.memory(),
            {"memory_id": BAD_IDENTIFIER, **scope_broken},
            required=("memory_id",),
            lookup=True,
        ),
    }


def purges_are_dry_runs(arguments: dict[str, Any]) -> dict[str, Any]:
    """A real purge rewrites the tables and rebuilds the full-text index (hundreds of ms): fuzzed purges
    only look (forget's own tests purge for real)."""
    if arguments.get("mode") == "purge":
        return {**arguments, "dry_run": True}
    return arguments


def deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


GARBAGE = [
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    -0.0,
    2**63,
    2**64,
    -(2**63),
    "null",
    "\ud800",
    "lone \udfff low",
    "a\ud83d",
    "\x00" * 10,
    "".join(chr(code) for code in range(32)),
    "x" * 100_000,
    deep(30),
    {"$ref": "#"},
    {"nested": {"deeper": [1, 2, {"x": None}]}},
]


@dataclass(frozen=True)
class FuzzCall:
    tool: str
    arguments: dict[str, Any]
    kind: str  # valid | broken | missing | unknown | garbage
    argument: str | None = None  # the one broken, missing, unknown or garbled


def fuzz_calls(fuzz: dict[str, ToolFuzz]) -> st.SearchStrategy[FuzzCall]:
    @st.composite
    def one(draw: st.DrawFn) -> FuzzCall:
        tool = draw(st.sampled_from(sorted(fuzz)))
        spec = fuzz[tool]
        arguments = draw(spec.valid)
        kind = draw(
            st.sampled_from(["valid", "valid", "broken", "broken", "broken", "missing", "unknown", "garbage"])
        )
        if kind == "broken":
            argument = draw(st.sampled_from(sorted(spec.broken)))
            return FuzzCall(
                tool, {**arguments, argument: draw(st.sampled_from(spec.broken[argument]))}, kind, argument
            )
        if kind == "missing" and spec.required:
            argument = draw(st.sampled_from(spec.required))
            return FuzzCall(tool, {k: v for k, v in arguments.items() if k != argument}, kind, argument)
        if kind == "unknown":
            names = ["bogus", "tag", "org", "limit_", "__proto__", "x' OR '1'='1"]
            known = SPECS[tool].input_model.model_fields
            argument = draw(st.sampled_from([name for name in names if name not in known]))
            return FuzzCall(tool, {**arguments, argument: draw(st.sampled_from(GARBAGE[:9]))}, kind, argument)
        if kind == "garbage":
            argument = draw(st.sampled_from(sorted(SPECS[tool].input_model.model_fields)))
            return FuzzCall(tool, {**arguments, argument: draw(st.sampled_from(GARBAGE))}, kind, argument)
        return FuzzCall(tool, arguments, "valid")

    return one()


# ---------------------------------------------------------------------------------------------- harness


class StoreWrites:
    """Whether anything was written: every table's version, and the write-behind queue of recall logs."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        db = lancedb.connect(runtime.store.uri, read_consistency_interval=timedelta(0))
        self._tables = [db.open_table(name) for name in db.list_tables().tables]

    def versions(self) -> dict[str, int]:
        """After writing out what earlier calls queued (a recall's logs are written behind it, and so are the
        credits a restatement's predecessor earned)."""
        assert self._runtime.writer.settle(TIMEOUT), "hand-ons still running"
        self._runtime.store._logs.flush()
        return {table.name: table.version for table in self._tables}

    def assert_none_since(self, before: dict[str, int], what: str) -> None:
        assert self._runtime.store._logs.pending() == 0, f"{what} queued log rows"
        after = {table.name: table.version for table in self._tables}
        assert after == before, f"{what} wrote to {[n for n in after if after[n] != before[n]]}"


@dataclass
class Fuzzer:
    portal: BlockingPortal
    client: Client
    runtime: Runtime
    writes: StoreWrites
    calls: int = 0

    def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        self.calls += 1
        return self.portal.call(self._call, tool, arguments)

    async def _call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        with anyio.fail_after(TIMEOUT):
            return await self.client.call_tool(tool, arguments)

    def still_answers(self) -> bool:
        tools = {tool.name for tool in self.portal.call(self.client.list_tools).tools}
        return tools == TOOL_NAMES and not self.call("drift", {}).is_error


@contextmanager
def fuzzer(path: Path, **overrides: Any) -> Iterator[Fuzzer]:
    """One server and one client for a whole fuzz run (a portal runs the client's event loop)."""
    built: list[Runtime] = []

    def factory(settings: Any) -> Runtime:
        built.append(make_runtime(settings))
        return built[0]

    # No background aggregation pass after the first: it writes contradictions whenever it runs. No
    # maintenance round either (it compacts, a version per table), not even after many appends.
    settings_ = settings_for(
        path, aggregation_interval_seconds=86_400, compaction_after_appends=0, **overrides
    )
    server = build_server(settings_, runtime_factory=factory)
    client = Client(server, client_info=Implementation(name="fuzzer", version="1.0"))
    with start_blocking_portal("asyncio") as portal, portal.wrap_async_context_manager(client) as connected:
        first = portal.call(connected.call_tool, "drift", {})
        assert not first.is_error, first.content
        runtime = built[0]
        deadline = time.monotonic() + TIMEOUT
        while runtime.aggregation_passes < 1:  # the start-up pass, on the empty store
            assert time.monotonic() < deadline, "the start-up aggregation pass did not finish"
            time.sleep(0.01)
        yield Fuzzer(portal, connected, runtime, StoreWrites(runtime))


def message_of(result: CallToolResult) -> str:
    return result.content[0].text if result.content else ""


def assert_clear_error(tool: str, text: str) -> str:
    """The message of a tool error, checked: not a crash, not a dump, and it names an argument of the
    tool or says what to do. Returns it without the SDK's prefix."""
    prefix = f"Error executing tool {tool}: "
    assert text.startswith(prefix), f"{tool} crashed: {text!r}"  # the bare form is an unexpected exception
    message = text.removeprefix(prefix)
    assert f"{tool} failed:" not in message, f"{tool}'s handler raised: {message}"
    assert not any(marker in message for marker in RAW), f"{tool}: not a clear message: {message}"
    arguments = SPECS[tool].input_model.model_fields
    assert (
        any(name in message for name in arguments)
        or message.startswith(NOT_FOUND)
        or any(hint in message for hint in ("pass ", "call ", "retry"))
    ), f"{tool}: the message names no argument and says nothing to do: {message}"
    return message


def check(fuzz: Fuzzer, lookups: set[str], call: FuzzCall) -> None:
    before = fuzz.writes.versions()
    result = fuzz.call(call.tool, call.arguments)  # the next call shows the session still answers
    shown = f"{call.kind} {call.tool}({_short(call.arguments)})"
    if not result.is_error:
        assert call.kind not in ("broken", "missing", "unknown"), (
            f"accepted {shown}: {result.structured_content}"
        )
        assert result.structured_content is not None, shown
        SPECS[call.tool].output_model.model_validate(result.structured_content)
        if only_looks(call):
            fuzz.writes.assert_none_since(before, f"the answered {shown}")
        return
    message = assert_clear_error(call.tool, message_of(result))
    fuzz.writes.assert_none_since(before, f"the rejected {shown}")
    if call.kind == "valid":
        assert call.tool in lookups and message.startswith(NOT_FOUND), f"refused {shown}: {message}"
    if call.kind in ("broken", "missing") and call.argument is not None:
        named = call.argument in message or (call.argument == "items" and "item " in message)
        assert named, f"{shown}: the message does not name {call.argument}: {message}"
    if call.kind == "unknown":
        assert f"`{call.argument}` is not an argument of this tool" in message, f"{shown}: {message}"


def only_looks(call: FuzzCall) -> bool:
    arguments = call.arguments
    return (
        call.tool in ("drift", "lineage")
        or (call.tool == "forget" and arguments.get("dry_run") is True)
        or (call.tool == "explain_ranking" and "query" not in arguments)
    )


def _short(arguments: dict[str, Any]) -> str:
    text = repr(arguments)
    return text if len(text) <= 300 else text[:297] + "..."


def seed(fuzz: Fuzzer) -> Pools:
    """A few memories and one recall in three scopes, for the lookups to find."""
    pools = Pools()
    for org, project in (("fuzz", "fuzz"), ("x' OR '1'='1", "%"), ("ünï", "fuzz")):
        scope = {"org_id": org, "project_id": project}
        for text in ("we deploy on tuesday", "postgres billing migration", "the staging flag is enabled"):
            result = fuzz.call("remember", {"content": text, **scope})
            assert not result.is_error, message_of(result)
            assert result.structured_content is not None
            pools.memories.append((scope, result.structured_content["id"]))
        result = fuzz.call("recall", {"query": "deploy postgres staging", **scope})
        assert result.structured_content is not None
        pools.retrievals.append((scope, result.structured_content["retrieval_id"]))
    return pools


@pytest.mark.slow
def test_fuzzed_arguments_never_crash_the_server_and_rejected_calls_write_nothing(tmp_path):
    with fuzzer(tmp_path / "store") as fuzz:
        fuzz_by_tool = tool_fuzz(seed(fuzz))
        lookups = {tool for tool, spec in fuzz_by_tool.items() if spec.lookup}
        seeded = fuzz.calls

        @fuzz_settings(CALLS)
        @given(call=fuzz_calls(fuzz_by_tool))
        def one_call(call: FuzzCall) -> None:
            check(fuzz, lookups, call)

        one_call()
        fuzzed = fuzz.calls - seeded
        assert fuzz.still_answers()
    assert fuzzed >= CALLS, fuzzed


# ---------------------------------------------------------------------------------------------- size limits

LOREM = "lorem ipsum dolor sit amet "  # 27 characters


def exactly(length: int, unit: str = LOREM) -> str:
    return (unit * (length // len(unit) + 1))[:length]


LIMITS = [
    # (server settings, tool, accepted at the limit, refused just past it, the message)
    (
        {},
        "remember",
        {"content": exactly(20_000)},
        {"content": exactly(20_001)},
        "content is 20,001 characters; the limit is 20,000",
    ),
    (
        {"max_content_chars": 1_000_000},
        "remember",
        {"content": exactly(1_000_000)},
        {"content": exactly(1_000_001)},
        "`content` is 1,000,001 characters; at most 1,000,000 are allowed",
    ),
    (
        {},
        "recall",
        {"query": exactly(4_000)},
        {"query": exactly(4_001)},
        "query is 4,001 characters; the limit is 4,000",
    ),
    (
        {"max_query_chars": 100_000},
        "recall",
        {"query": exactly(100_000)},
        {"query": exactly(100_001)},
        "`query` is 100,001 characters; at most 100,000 are allowed",
    ),
    (
        {},
        "explain_ranking",
        {"query": exactly(4_000)},
        {"query": exactly(4_001)},
        "query is 4,001 characters; the limit is 4,000",
    ),
    (
        {"max_query_chars": 100_000},
        "explain_ranking",
        {"query": exactly(100_000)},
        {"query": exactly(100_001)},
        "`query` is 100,001 characters; at most 100,000 are allowed",
    ),
    (
        {},
        "forget",
        {"query": exactly(4_000), "dry_run": True},
        {"query": exactly(4_001), "dry_run": True},
        "`query` is 4,001 characters; at most 4,000 are allowed",
    ),
    (
        {},
        "remember",
        {"content": "tagged", "tags": [f"t{i}" for i in range(32)]},
        {"content": "tagged", "tags": [f"t{i}" for i in range(33)]},
        "`tags` has 33 entries; at most 32 are allowed: keep",
    ),
    (
        {"max_tags": 1_000},
        "remember",
        {"content": "tagged", "tags": [f"t{i}" for i in range(1_000)]},
        {"content": "tagged", "tags": [f"t{i}" for i in range(1_001)]},
        "`tags` has 1001 entries; at most 1000 are allowed",
    ),
    (
        {},
        "remember",
        {"content": "tagged", "tags": ["t" * 64]},
        {"content": "tagged", "tags": ["t" * 65]},
        "`tags.0` is 65 characters; at most 64 are allowed",
    ),
    (
        {},
        "recall",
        {"query": "tagged", "tags": [f"t{i}" for i in range(100)]},
        {"query": "tagged", "tags": [f"t{i}" for i in range(101)]},
        "`tags` has 101 entries; at most 100 are allowed",
    ),
    (
        {},
        "recall",
        {"query": "deploy", "char_budget": 200},
        {"query": "deploy", "char_budget": 199},
        "`char_budget` must be between 200 and 200,000, but got 199",
    ),
    (
        {},
        "recall",
        {"query": "deploy", "char_budget": 200_000},
        {"query": "deploy", "char_budget": 200_001},
        "`char_budget` must be between 200 and 200,000, but got 200,001",
    ),
    (
        # A server bound past the model's cap: the cap is said, never a bound no value can reach.
        {"max_char_budget": 20_000_000},
        "recall",
        {"query": "deploy", "char_budget": 10_000_000},
        {"query": "deploy", "char_budget": 15_000_000},
        "`char_budget` must be between 200 and 10,000,000, but got 15000000",
    ),
    (
        {"max_char_budget": 10_000_000},
        "recall",
        {"query": "deploy", "char_budget": 10_000_000},
        {"query": "deploy", "char_budget": 10_000_001},
        "`char_budget` must be between 200 and 10,000,000, but got 10000001",
    ),
    (
        {},
        "recall",
        {"query": "deploy", "top_k": 100},
        {"query": "deploy", "top_k": 101},
        "`top_k` must be between 1 and 100, but got 101",
    ),
    (
        {},
        "recall",
        {"query": "deploy", "top_k": 1},
        {"query": "deploy", "top_k": 0},
        "`top_k` must be between 1 and 100, but got 0",
    ),
    (
        {"max_top_k": 1_000},
        "recall",
        {"query": "deploy", "top_k": 1_000},
        {"query": "deploy", "top_k": 1_001},
        "`top_k` must be between 1 and 1,000, but got 1001",
    ),
    (
        {},
        "remember_many",
        {"items": [{"content": f"batch item number {i}"} for i in range(200)]},
        {"items": [{"content": f"batch item number {i}"} for i in range(201)]},
        "`items` has 201 entries; at most 200 are allowed",
    ),
    (
        {},
        "remember_many",
        {"items": [{"content": "the only batch item"}]},
        {"items": []},
        "`items` needs at least 1 entry, but has 0",
    ),
    (
        {},
        "remember",
        {"content": "scoped", "org_id": "o" * 128},
        {"content": "scoped", "org_id": "o" * 129},
        "`org_id` is 129 characters; at most 128 are allowed",
    ),
    (
        {},
        "report_outcome",
        {"outcome": "success", "note": "n" * 4_000},
        {"outcome": "success", "note": "n" * 4_001},
        "`note` is 4,001 characters; at most 4,000 are allowed",
    ),
    (
        {},
        "forget",
        {"query": "deploy", "max_memories": 20, "dry_run": True},
        {"query": "deploy", "max_memories": 21, "dry_run": True},
        "`max_memories` must be <= 20, but got 21",
    ),
    (
        {},
        "forget",
        {"query": "deploy", "reason": "r" * 500, "dry_run": True},
        {"query": "deploy", "reason": "r" * 501, "dry_run": True},
        "`reason` is 501 characters; at most 500 are allowed",
    ),
    ({}, "drift", {"limit": 500}, {"limit": 501}, "`limit` must be <= 500, but got 501"),
]


@pytest.mark.parametrize(
    "overrides, tool, at_limit, past_limit, message",
    LIMITS,
    ids=[f"{case[1]}-{case[4][:40]}" for case in LIMITS],
)
def test_each_size_limit_refuses_just_past_it_saying_the_limit_and_accepts_it(
    tmp_path, overrides, tool, at_limit, past_limit, message
):
    with fuzzer(tmp_path / "store", **overrides) as fuzz:
        fuzz.call("remember", {"content": "we deploy on tuesday, tagged t0"})
        before = fuzz.writes.versions()
        refused = fuzz.call(tool, past_limit)
        assert refused.is_error and message in message_of(refused), message_of(refused)
        fuzz.writes.assert_none_since(before, f"{tool} past its limit")
        accepted = fuzz.call(tool, at_limit)
        assert not accepted.is_error, message_of(accepted)
        SPECS[tool].output_model.model_validate(accepted.structured_content)


# ---------------------------------------------------------------------------------------------- found by fuzzing


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-14:00"])
def test_a_time_outside_the_utc_calendar_is_refused_naming_occurred_at(tmp_path, moment):
    # Both parse, but in UTC they fall in year 0 or 10000: converting them raised OverflowError, which the
    # SDK reported as a bare "Error executing tool remember".
    with fuzzer(tmp_path / "store") as fuzz:
        before = fuzz.writes.versions()
        single = fuzz.call("remember", {"content": "an old fact", "occurred_at": moment})
        batch = fuzz.call("remember_many", {"items": [{"content": "an old fact", "occurred_at": moment}]})
        fuzz.writes.assert_none_since(before, "a remember with an impossible time")
    assert f"`occurred_at` is {moment}, which is outside the years 1 to 9999 in UTC" in message_of(single)
    assert f"`items.0.occurred_at` is {moment}" in message_of(batch)


@pytest.mark.parametrize(
    "items, message",
    [
        # A misspelt key was dropped: the memory was stored without its tags.
        ([{"content": "tagged fact", "tag": ["db"]}], "`items.1.tag` is not an argument of this tool"),
        # A blank item passed the batch's model and failed inside the handler ("remember_many failed:
        # ValidationError ... retrying is safe").
        ([{"content": " \n\t"}], "`items.1.content` is empty or whitespace only: pass the text to remember"),
    ],
)
def test_a_bad_item_in_a_batch_is_refused_naming_it_and_nothing_is_stored(tmp_path, items, message):
    with fuzzer(tmp_path / "store") as fuzz:
        before = fuzz.writes.versions()
        refused = fuzz.call("remember_many", {"items": [{"content": "a good item"}, *items]})
        fuzz.writes.assert_none_since(before, "a batch with a bad item")
    assert refused.is_error and message in message_of(refused), message_of(refused)
