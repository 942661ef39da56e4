"""A recall's time window: the one it searches (from since/until, or the query's own time words) and how
an empty result names it, with the tags and kinds it searched within."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from retrieval.time_window import WindowError, resolve, time_words, without_time_words, zone_of
from storage.records import Reach, TimeWindow
from tools.common import Runtime, ToolFailure


def time_window(
    runtime: Runtime, scope: Reach, query: str, since: str | None, until: str | None, time_zone: str | None
) -> tuple[TimeWindow | None, str | None]:
    """The recall's time window on the server's clock, and where it came from: ``since``/``until``, else
    (with MEMORIA_QUERY_TIME_WORDS) the one unambiguous time expression of the query, unless no memory
    of the scope is of that time (then the words were about something else, and the recall is left
    whole: the reason is traced). A tool error quotes what could not be read, with examples that work."""
    try:
        zone = zone_of(time_zone)  # checked even when unused: a mistyped zone is said, not ignored
        if since or until:
            return resolve(since, until, now=runtime.clock(), zone=zone), "since/until"
    except WindowError as exc:
        raise ToolFailure(str(exc)) from None
    words = time_words(query) if runtime.settings.query_time_words else None
    if words is None:
        return None, None
    try:
        window = resolve(words, words, now=runtime.clock(), zone=zone)
    except WindowError as exc:  # the query's words are not a window after all: the recall goes on whole
        return None, f"the query's words {words!r}: not a window ({exc})"
    if not runtime.store.holds_memories_in(scope, window):
        return None, f"the query's words {words!r}: no memory is of that time, so none was left out"
    return window, f"the query's words {words!r}"


def topic_of(
    runtime: Runtime, query: str, window: TimeWindow | None, time_zone: str | None
) -> tuple[str, str] | None:
    """``query`` without its time words and the words (``without_time_words``), when they say when rather
    than what: always when no window applies (the recall leaves them out only if nothing matched with
    them), and under a window only when they name that very window (a review: "the 2026-10 release notes"
    searched with since/until of November lost its month)."""
    topic = without_time_words(query)
    if topic is None or window is None:
        return topic
    try:
        named = resolve(topic[1], topic[1], now=runtime.clock(), zone=zone_of(time_zone))
    except WindowError:
        return None
    return topic if named == window else None


def shown_zone(time_zone: str | None) -> str | None:
    """The IANA name the context shows dates in (``time_zone`` as its canonical spelling: "europe/paris"
    is "Europe/Paris"); None for UTC or none (``time_window`` has refused a zone it cannot read)."""
    if not time_zone:
        return None
    zone = zone_of(time_zone)
    return None if zone is UTC or str(zone) in _UTC_NAMES else str(zone)


_UTC_NAMES = {
    "UTC", "Etc/UTC", "UCT", "Etc/UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu", "GMT", "Etc/GMT",
    "GMT0", "Etc/GMT0", "GMT+0", "Etc/GMT+0", "GMT-0", "Etc/GMT-0", "Greenwich", "Etc/Greenwich",
}  # fmt: skip


def searched_window(window: dict[str, str | None] | None, now: datetime | None = None) -> str:
    """The time window a recall searched, as words to follow "found" (" between ... and ... (from the
    query's words 'last week')"); "" when it searched all time. An empty result must say it looked only
    there, above all when the window came from the query's own words."""
    if window is None or not (window.get("since") or window.get("until")):
        return ""
    since, until = window.get("since"), window.get("until")
    span = (
        f" between {since} and {until}"
        if since and until
        else f" from {since} on"
        if since
        else f" before {until}"
    )
    later = ""
    if since and datetime.fromisoformat(since) > (
        now or datetime.now(UTC)
    ):  # ``now``: the server's clock  # a trial's "since 2027-01-01"
        later = ", which starts in the future: no memory is dated after now"
    return (
        span
        + (f" ({window['from']})" if window.get("from") and window["from"] != "since/until" else "")
        + later
    )


def filters_searched(
    tags: Sequence[str] | None, tags_all: bool, kinds: Sequence[str] | None
) -> tuple[str, str] | None:
    """The tags and kinds a recall searched within ("among the memories tagged `a` or `b`"), and how to
    search every memory instead; None without such filters."""
    limits, names = [], []
    if tags:
        limits.append("tagged " + (" and " if tags_all else " or ").join(f"`{tag}`" for tag in tags))
        names.append("`tags`")
    if kinds:
        limits.append("of kind " + " or ".join(f"`{kind}`" for kind in kinds))
        names.append("`kinds`")
    if not limits:
        return None
    return (
        f"among the memories {' and '.join(limits)}",
        f"recall without {' and '.join(names)} to search them all",
    )
