"""A recall's time window: the one it searches (from since/until, or the query's own time words) and how
an empty result names it."""

from __future__ import annotations

from retrieval.time_window import WindowError, resolve, time_words, zone_of
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


def searched_window(window: dict[str, str | None] | None) -> str:
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
    return span + (f" ({window['from']})" if window.get("from") and window["from"] != "since/until" else "")
