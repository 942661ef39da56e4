"""Times as the tools read them: ISO 8601 text only (never a Unix timestamp), UTC when no offset is given,
and an expiry's date alone as the whole of that day."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema


def _aware_utc(value: datetime | None) -> datetime | None:
    """A timestamp without an offset is taken as UTC; every stored time is UTC."""
    if value is None:
        return None
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+05:00 is in year 0 in UTC: a ValueError names the field
        raise ValueError(
            f"is {value.isoformat()}, which is outside the years 1 to 9999 in UTC: pass a real date"
        ) from None


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_BASIC_DATE = re.compile(r"(\d{4})(\d{2})(\d{2})")
_BASIC_TIME = re.compile(r"\d{8}T\d{2}(?:\d{2}(?:\d{2}(?:[.,]\d+)?)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?")


def _iso_text(value: Any) -> Any:
    """Only ISO 8601 text is a time here. Pydantic's lax datetime reads a number, or text of digits, as
    Unix seconds (or milliseconds): "20261101" became 1970-08-23 and "86400" slipped past the check that
    refuses placeholder dates before 1970. A basic-format date ("20261101") or time ("20261101T093000Z")
    is read as the one it names."""
    if isinstance(value, str) and _BASIC_TIME.fullmatch(value.strip()):
        try:
            return datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f'is {value!r}, which names no real date or time: pass one such as "2026-11-24T09:30:00Z"'
            ) from None
    if isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER.fullmatch(value.strip())):
        if isinstance(value, str) and (basic := _BASIC_DATE.fullmatch(value.strip())):
            return "-".join(basic.groups())
        raise ValueError(
            f"is {value!r}, a number, which is not read as a time here (Unix timestamps are not taken): "
            'pass an ISO 8601 date or time such as "2026-11-24" or "2026-11-24T09:30:00Z"'
        )
    return value


# Not strict: JSON has no datetime, so the ISO 8601 text is what arrives (and only that: ``_iso_text``).
# (its schema says text, as ExpiresAt's: a date alone, which it takes, is no "date-time", and a client that
# checks a call against the schema refused one; a trial)
OccurredAt = Annotated[
    datetime | None,
    Field(strict=False),
    BeforeValidator(_iso_text),
    AfterValidator(_aware_utc),
    WithJsonSchema({"type": "string"}),
]

_DATE_ONLY = re.compile(r"\s*(\d{4})-?(\d{2})-?(\d{2})\s*")


def _until_text(value: Any) -> Any:
    """An expiry as ISO 8601 text (``_iso_text``); a date alone names the whole day, so a memory true "until
    Friday 2026-12-11" expires at the end of it: the next day's start, UTC."""
    if isinstance(value, str) and (day := _DATE_ONLY.fullmatch(value)):
        try:
            year, month, date = (int(part) for part in day.groups())
            return datetime(year, month, date) + timedelta(days=1)
        except (ValueError, OverflowError):
            raise ValueError(
                f'is {value!r}, which names no real date: pass one such as "2026-12-11"'
            ) from None
    return _iso_text(value)


# When a memory stops being true: a time, or a date (through the end of that day, UTC).
# (its schema says text: a date alone is no "date-time")
ExpiresAt = Annotated[
    datetime | None,
    Field(strict=False),
    BeforeValidator(_until_text),
    AfterValidator(_aware_utc),
    WithJsonSchema({"type": "string"}),
]
