"""Time windows: what ``since`` and ``until`` say, resolved to UTC moments on the server's clock.

An expression names a span of time: an ISO-8601 date ("2026-11-24"), month ("2026-11") or time
("2026-11-24T09:30:00Z"), or a relative one ("today", "yesterday", "this week", "last week", "this
month", "last month", "this year", "last year", "3 days ago", "2 weeks ago", "an hour ago", "past 10
days", "past week", "last 3 months", "now"), or a day of the week ("monday": the latest Monday, today
included; "last monday": the latest before today). ``since`` takes the start of its span and ``until`` its end, so
``since="last week"`` starts on last week's Monday and ``until="2026-11"`` includes every day of November.
Days, weeks (from Monday), months and years are those of the caller's time zone when one is given, else
UTC; "N hours ago" and a time of day are moments. Anything else is refused with examples.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from retrieval.text import STOPWORDS, word_tokens
from storage.records import TimeWindow

EXAMPLES = '"2026-11-24", "2026-11", "yesterday", "last week", "3 days ago"'

_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_NUMBER = r"(\d{1,4}|a|an|one|two|three|four|five|six|seven)"
_UNIT = r"(minute|hour|day|week|month|year)s?"
_AGO = re.compile(rf"{_NUMBER} {_UNIT} ago")
_PAST = re.compile(rf"(?:last|past) {_NUMBER} {_UNIT}")
_PAST_ONE = re.compile(r"past (day|week|month|year)")  # "past week": the seven days up to now
_PERIOD = re.compile(r"(this|last) (week|month|year)")


# Time words a query may hold ("what did we decide last week about billing"), as ``span`` reads them.
_IN_QUERY = re.compile(
    rf"\b(today|yesterday|(?:this|last) (?:week|month|year)|{_NUMBER} {_UNIT} ago|(?:last|past) {_NUMBER} {_UNIT}"
    r"|\d{4}-\d{2}-\d{2}|\d{4}-\d{2})\b"
)
# After these a time expression is part of a longer one whose meaning it does not carry alone ("the last
# week of June", "a year ago last spring"); before these it bounds a window rather than naming one ("since
# last week", "before yesterday"): either way the query is left as it is.
_QUALIFIED = re.compile(r"\s*(?:of|before|after|in|on|from|since|until|last|next|ago)\b")
_BOUNDED = re.compile(
    r"(?:since|before|after|until|till|from|not|except|prior to|older than|newer than|earlier than"
    r"|later than|by)\s*$"
)


# What stands either side of a time expression that reads alone: a space, a quote, a bracket, or the
# punctuation that ends a clause (the first character is the one before it, the second the one after it).
_APART = re.compile(r"[\s\"'(]?[\s\"),.;:!?]?\Z")  # not "'" after: "today's standup" is no window

# Other words that date something: beside a time expression they leave unclear which one the window is.
_OTHER_DATES = re.compile(
    r"\b(?:(?:19|20)\d{2}|january|february|march|april|may|june|july|august|september|october|november"
    r"|december|monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|weekend|recently|ago)\b"
)


class WindowError(ValueError):
    """An expression this module cannot read, or a window that ends before it starts; the message says
    what works."""


def zone_of(name: str | None) -> tzinfo:
    """The time zone named (IANA, e.g. "Europe/Paris", in any case: "utc", "europe/paris"); UTC when none
    is."""
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    spelt = _zone_names().get(name.casefold())  # a new user's trial: "utc" was refused
    if spelt is not None:
        return ZoneInfo(spelt)
    raise WindowError(
        f'time zone {name!r} is unknown: give an IANA name such as "Europe/Paris" or "America/New_York"'
    ) from None


@lru_cache(maxsize=1)
def _zone_names() -> dict[str, str]:
    """Every IANA zone name this machine knows, by its case-folded spelling (read once)."""
    from zoneinfo import available_timezones

    return {zone.casefold(): zone for zone in available_timezones()}


def resolve(since: str | None, until: str | None, *, now: datetime, zone: tzinfo = UTC) -> TimeWindow:
    """The window ``since`` .. ``until`` (either may be None: open on that side) as UTC moments; the end
    is exclusive. ``WindowError`` when an expression cannot be read or the window is empty."""
    start = _named_span("since", since, now, zone)[0] if since else None
    end = _named_span("until", until, now, zone)[1] if until else None
    if start is not None and end is not None and start >= end:
        raise WindowError(
            f"since {since!r} ({_iso(start)}) is not before until {until!r} ({_iso(end)}): swap them, or "
            "widen the window"
        )
    return TimeWindow(start, end)


def _named_span(name: str, text: str, now: datetime, zone: tzinfo) -> tuple[datetime, datetime]:
    """``span``, its error naming the argument it reads (a trial: a recall's said neither)."""
    try:
        return span(text, now=now, zone=zone)
    except WindowError as exc:
        raise WindowError(f"`{name}` {exc}") from None


def time_words(query: str) -> str | None:
    """The one time expression ``query`` holds, when it holds exactly one that reads alone ("last week"
    in "what did we decide last week about billing"); None when it is ambiguous: none, several different
    ones, one a following word qualifies ("the last week of June"), or other words that date something
    beside it (a month, a weekday, a year: "last week, as said on November 6, 2023")."""
    found = _standalone_time(query)
    return None if found is None else found[0]


def without_time_words(query: str) -> tuple[str, str] | None:
    """``query`` with its one time expression that reads alone (``time_words``) taken out, and the words
    as written there: ("what did we decide?", "last week") for "what did we decide last week?". None when
    it holds no such expression, or nothing but stop words would be left. Memories are dated by when they
    happened, and rarely say "last week": a recall whose window those words name searches for the rest,
    or the words alone would leave every memory below the relevance floor (a new user's trial)."""
    found = _standalone_time(query)
    if found is None:
        return None
    text = " ".join(query.split())
    said = re.search(rf"\b{re.escape(found[1])}\b", text, re.IGNORECASE)
    if said is None:  # a letter whose lower case is longer ("İ") moved it: the query is left as it is
        return None
    rest = re.sub(r"\s+([?!.,;:])", r"\1", f"{text[: said.start()]} {text[said.end() :]}").strip()
    rest = " ".join(rest.split())
    if not any(word not in STOPWORDS for word in word_tokens(rest)):
        return None
    return rest, said.group(0)


def _standalone_time(query: str) -> tuple[str, str] | None:
    """``time_words``'s expression as ``span`` reads it, and as the (lower-cased) query says it."""
    text = " ".join(query.lower().split())
    found: dict[str, str] = {}
    rest = text
    for match in _IN_QUERY.finditer(text):
        if not _APART.match(text[match.start() - 1 : match.start()] + text[match.end() : match.end() + 1]):
            continue  # part of a name: "2026-11-24_add_users", "the yesterday-bug fix" (a review)
        if _QUALIFIED.match(text, match.end()) or _BOUNDED.search(text, 0, match.start()):
            return None
        words = said = match.group(0)
        rest = rest.replace(words, " ")
        if re.fullmatch(r"\d+ (?:minute|hour)s? ago|an? (?:minute|hour) ago", words):
            return None  # a moment, not a span: no window to search
        if _PERIOD.fullmatch(words) and words.startswith("last ") and text[: match.start()].endswith("the "):
            words = "past 1 " + words.split()[1]  # "in the last year": the twelve months up to now
        found.setdefault(words, said)
    if len(found) != 1 or _OTHER_DATES.search(rest):
        return None
    return next(iter(found.items()))


def span(text: str, *, now: datetime, zone: tzinfo = UTC) -> tuple[datetime, datetime]:
    """The span ``text`` names, [start, end) in UTC (a moment: start == end)."""
    try:
        return _span(text, now=now, zone=zone)
    except (OverflowError, ValueError) as exc:
        if isinstance(exc, WindowError):
            raise
        raise WindowError(
            f"{text!r} is outside the calendar this server reads; write one such as {EXAMPLES}"
        ) from None


def _span(text: str, *, now: datetime, zone: tzinfo) -> tuple[datetime, datetime]:
    value = " ".join(text.strip().lower().split())
    local_now = now.astimezone(zone)
    today = local_now.date()
    found = _absolute(value, zone, text)
    if found is not None:
        return found
    if value == "now":
        return now.astimezone(UTC), now.astimezone(UTC)
    if value in ("today", "yesterday"):
        day = today - timedelta(days=1 if value == "yesterday" else 0)
        return _days(day, 1, zone)
    if match := _PERIOD.fullmatch(value):
        return _period(match.group(2), today, -1 if match.group(1) == "last" else 0, zone)
    if match := _AGO.fullmatch(value):
        count, unit = _count(match.group(1)), match.group(2)
        if unit in ("minute", "hour"):
            moment = (now - timedelta(**{unit + "s": count})).astimezone(UTC)
            return moment, moment
        return _period(unit, today, -count, zone)
    if match := _PAST.fullmatch(value) or _PAST_ONE.fullmatch(value):
        count, unit = (
            (1, match.group(1)) if match.re is _PAST_ONE else (_count(match.group(1)), match.group(2))
        )
        return _back(now, count, unit, zone), now.astimezone(UTC)
    if match := re.fullmatch(rf"(?:(?:last|past) )?(\d{{5,}}) {_UNIT}(?: ago)?", value):
        raise WindowError(
            f"{text!r} counts {match.group(1)} {match.group(2)}s, more than the 9999 of a unit this server reads: "
            'give a date instead, such as "2020-01-01"'
        )
    if match := _WEEKDAY.fullmatch(value):
        # A day of the week (a trial's "since Monday" was refused): the latest such day, today included,
        # or before today with "last".
        back = (today.weekday() - _WEEKDAYS.index(match.group(2))) % 7
        if match.group(1) and back == 0:
            back = 7
        return _days(today - timedelta(days=back), 1, zone)
    named = re.fullmatch(r"([a-z]+)\.?(?:,? (\d{4}))?", value)
    if named and (month := _MONTH_NAMES.get(named.group(1))):
        # A month by name (a trial's "march"): say how a month is written, with the year it most likely
        # means (the latest such month not after today) when none is given.
        year = int(named.group(2)) if named.group(2) else today.year - (month > today.month)
        raise WindowError(
            f"{text!r} names a month by name, which this server does not read; write it as "
            f'"{year}-{month:02d}" (year and month), or a day of it such as "{year}-{month:02d}-01"'
        )
    raise WindowError(f"{text!r} is not a time this server reads; write one such as {EXAMPLES}")


_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY = re.compile(rf"(last )?({'|'.join(_WEEKDAYS)})")

_MONTH_NAMES = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}


# How long a time of day names, by the length of what is written of it: hh:mm, hh:mm:ss, fractions.
_PRECISION = {5: timedelta(minutes=1), 8: timedelta(seconds=1)} | {
    9 + digits: timedelta(microseconds=10 ** (6 - min(digits, 6))) for digits in range(1, 10)
}


def _absolute(value: str, zone: tzinfo, text: str) -> tuple[datetime, datetime] | None:
    """An ISO-8601 month, date or time (a date or time in the basic form too, "20261124", as ``occurred_at``
    takes it: a trial's ``--since 20261124`` was refused); None when ``value`` (``text`` as written,
    lowercased) is not one."""
    if match := re.fullmatch(r"(\d{4})(\d{2})(\d{2})(t.*)?", value):  # the basic form, as the extended
        value = f"{match.group(1)}-{match.group(2)}-{match.group(3)}" + (
            "t" + re.sub(r"^t(\d{2}):?(\d{2})(?::?(\d{2}))?", _colons, match.group(4))
            if match.group(4)
            else ""
        )
    try:
        if re.fullmatch(r"\d{4}-\d{2}", value):
            year, month = int(value[:4]), int(value[5:])
            first = date(year, month, 1)
            return _local(first, zone), _local(_month_shift(first, 1), zone)
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            return _days(date.fromisoformat(value), 1, zone)
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}.*", value):
            moment = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=zone)
            moment = moment.astimezone(UTC)
            # A time names its last written unit, as a date names its day: "10:00" the minute, "10:00:30"
            # the second, so ``until`` holds a memory of that very time (a trial's "until 10:00" left out
            # the memory of 10:00).
            written = len(re.sub(r"(?:z|[+-]\d{2}(?::?\d{2})?)$", "", value[11:]))
            return moment, moment + _PRECISION.get(written, timedelta(microseconds=1))
    except ValueError:
        raise WindowError(
            f"{text.strip()!r} is not a valid date or time; write one such as {EXAMPLES}"
        ) from None
    return None


def _colons(time: re.Match[str]) -> str:
    """A basic-form time of day ("0930", "093015") as the extended form writes it."""
    return ":".join(part for part in time.groups() if part)


def _count(word: str) -> int:
    count = _NUMBERS.get(word) or int(word)
    if count < 1:
        raise WindowError(f'{word!r} is not a count of at least one; write e.g. "3 days ago"')
    return count


def _period(unit: str, today: date, shift: int, zone: tzinfo) -> tuple[datetime, datetime]:
    """The calendar day, week (from Monday), month or year holding ``today``, moved by ``shift`` of them."""
    if unit == "day":
        return _days(today + timedelta(days=shift), 1, zone)
    if unit == "week":
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=shift)
        return _days(monday, 7, zone)
    if unit == "month":
        first = _month_shift(today.replace(day=1), shift)
        return _local(first, zone), _local(_month_shift(first, 1), zone)
    first = date(today.year + shift, 1, 1)
    return _local(first, zone), _local(date(first.year + 1, 1, 1), zone)


def _back(now: datetime, count: int, unit: str, zone: tzinfo) -> datetime:
    """``count`` units before ``now`` (months and years by the calendar, in ``zone``)."""
    if unit in ("minute", "hour", "day", "week"):
        return (now - timedelta(**{unit + "s": count})).astimezone(UTC)
    local = now.astimezone(zone)
    months = count if unit == "month" else 12 * count
    moved = _month_shift(local.date().replace(day=1), -months)
    day = min(local.day, _month_length(moved))
    return datetime.combine(moved.replace(day=day), local.timetz()).astimezone(UTC)


def _days(first: date, days: int, zone: tzinfo) -> tuple[datetime, datetime]:
    return _local(first, zone), _local(first + timedelta(days=days), zone)


def _local(day: date, zone: tzinfo) -> datetime:
    """Midnight starting ``day`` in ``zone``, as UTC."""
    return datetime.combine(day, time(), tzinfo=zone).astimezone(UTC)


def _month_shift(first: date, months: int) -> date:
    index = first.year * 12 + first.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _month_length(first: date) -> int:
    return (_month_shift(first, 1) - first).days


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
