"""What a bad argument's message says: each problem named with its field, bound and value, then what to
do. Shared by the tools (``server.registry``) and the CLI (``console.commands``), and free of the MCP SDK so
that a command does not pay for importing it."""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError


def friendly_validation_message(
    tool: str,
    exc: ValidationError,
    *,
    retry: str | None = None,
    limits: Mapping[str, Mapping[str, int]] | None = None,
) -> str:
    """What is wrong with each argument, then what to do: ``retry`` (default "call <tool> again"); an
    empty ``retry`` leaves the advice out, for callers that say it in their own words. ``limits``: the
    bounds the server enforces per argument (``Settings.schema_limits``), said instead of the input
    model's hard caps where the server's are narrower."""
    problems = "; ".join(_describe(error, limits or {}) for error in exc.errors())
    then = f"call {tool} again" if retry is None else retry
    return f"{problems}. Fix the arguments and {then}." if then else f"{problems}."


def _describe(error: Any, limits: Mapping[str, Mapping[str, int]]) -> str:
    field = ".".join(str(part) for part in error["loc"]) or "arguments"
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = _show(error.get("input"))
    enforced = limits.get(field, {})
    if kind in {"greater_than_equal", "less_than_equal"} and {"minimum", "maximum"} <= enforced.keys():
        # The narrower of the server's bound and the model's cap, on the side the value broke.
        low, high = enforced["minimum"], enforced["maximum"]
        if kind == "less_than_equal":
            high = min(high, ctx.get("le", high))
        else:
            low = max(low, ctx.get("ge", low))
        return f"`{field}` must be between {low:,} and {high:,}, but got {value}"
    if kind == "string_too_long" and "maxLength" in enforced:
        ctx = {
            **ctx,
            "max_length": min(int(ctx.get("max_length", enforced["maxLength"])), enforced["maxLength"]),
        }
    if kind == "missing":
        return f"`{field}` is required"
    if kind == "string_too_short":
        return f"`{field}` must not be empty"
    if kind == "string_too_long":
        return (
            f"`{field}` is {len(error['input']):,} characters; at most {ctx.get('max_length'):,} are allowed"
        )
    if kind == "too_short":
        least = ctx.get("min_length", 1)
        return f"`{field}` needs at least {least} {'entry' if least == 1 else 'entries'}, but has {ctx.get('actual_length', 0)}"
    if kind == "too_long":
        return (
            f"`{field}` has {ctx.get('actual_length')} entries; at most {ctx.get('max_length')} are allowed"
        )
    if kind in {"greater_than_equal", "greater_than", "less_than_equal", "less_than"}:
        bound = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[
            kind
        ]
        limit = next(iter(ctx.values()), "?")
        return f"`{field}` must be {bound} {limit}, but got {value}"
    if kind in {"int_parsing", "int_type", "int_from_float"}:
        return f"`{field}` must be a whole number, but got {value}"
    if kind in {
        "datetime_parsing",
        "datetime_from_date_parsing",
        "datetime_type",
        "date_parsing",
        "date_type",
    }:
        # Well formed, but the day does not exist (a trial read "must be ISO 8601").
        if no_such_day(error.get("input")):
            return f"`{field}` is {value}, a day that does not exist: pass a real date, e.g. 2026-11-30"
        return (
            f"`{field}` must be an ISO 8601 date or time, e.g. 2026-11-24 or 2026-11-24T15:30:00Z (UTC when it "
            f"has no offset), but got {value}"
        )
    if kind in {"bool_parsing", "bool_type"}:
        return f"`{field}` must be true or false, but got {value}"
    if kind in {"float_parsing", "float_type"}:
        return f"`{field}` must be a number, but got {value}"
    if kind in {"string_type"}:
        return f"`{field}` must be a string, but got {value}"
    if kind in {"list_type"}:
        return f"`{field}` must be a list, but got {value}"
    if kind == "literal_error":
        return f"`{field}` must be one of {ctx.get('expected')}, but got {value}"
    if kind == "value_error":
        if not error["loc"]:  # a check across arguments: its message names them
            return str(ctx.get("error", error["msg"]))
        return f"`{field}` {ctx.get('error', error['msg'])!s}"
    if kind == "extra_forbidden":
        return f"`{field}` is not an argument of this tool"
    return f"`{field}`: {error['msg']} (got {value})"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_DAY = re.compile(r"\s*(\d{4})-(\d{2})-(\d{2})(?:[T ].*)?\s*")


def no_such_day(value: object) -> bool:
    """Whether ``value`` is an ISO 8601 date (or a time on it) whose day its month lacks ("2026-11-31",
    "2026-02-30") or whose month is no month."""
    found = _DAY.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        return False
    year, month, day = (int(part) for part in found.groups())
    if not 1 <= month <= 12:
        return True
    return not 1 <= day <= calendar.monthrange(year, month)[1]
