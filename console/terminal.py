"""Output for people at a terminal: aligned tables, short texts, and a progress bar on stderr.

Pure rendering (strings in, strings out) except ``ProgressBar``, which writes to the stream it is given
(stderr): nothing here prints to stdout, which is the protocol stream of a stdio server. The commands in
``console/commands.py`` print what these functions return.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from retrieval.text import clip, shown_safely

LAST_COLUMN_LINES = 4  # the last column wraps onto at most this many lines, then is cut
LAST_COLUMN_MIN = 24  # on a narrow screen the table runs wider rather than squeeze the text below this


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, width: int | None = None) -> str:
    """An aligned plain-text table; the last column (the memory's text, or why it ranked there) takes
    what room is left, wraps onto up to ``LAST_COLUMN_LINES`` lines under itself, and is cut after."""
    if not rows:
        return ""
    width = width or screen_width()
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(headers[i]), *(len(row[i]) for row in cells)) for i in range(len(headers))]
    fixed = sum(widths[:-1]) + 2 * (len(widths) - 1)
    widths[-1] = max(len(headers[-1]), min(widths[-1], max(LAST_COLUMN_MIN, width - fixed)))
    numeric = [all(_is_number(row[i]) for row in rows) for i in range(len(headers))]

    def lines(values: Sequence[str]) -> list[str]:
        parts = [
            value.rjust(widths[i]) if numeric[i] else value.ljust(widths[i])
            for i, value in enumerate(values[:-1])
        ]
        wrapped = [values[-1].rjust(widths[-1])] if numeric[-1] else _wrapped(values[-1], widths[-1])
        first = "  ".join([*parts, wrapped[0]]).rstrip()
        indent = " " * (fixed if parts else 0)
        return [first, *(indent + more for more in wrapped[1:])]

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([*lines(headers), rule, *(line for row in cells for line in lines(row))])


def _wrapped(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters (broken at spaces where it can), at most
    ``LAST_COLUMN_LINES`` of them, the last cut with an ellipsis when more was left."""
    if len(text) <= width:
        return [text]
    found = textwrap.wrap(text, width, break_on_hyphens=False) or [""]
    if len(found) <= LAST_COLUMN_LINES:
        return found
    kept = found[: LAST_COLUMN_LINES - 1]
    rest = " ".join(found[LAST_COLUMN_LINES - 1 :])
    return [*kept, clip(rest, width)]


def screen_width() -> int:
    """The terminal's width; output piped elsewhere is not cut."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else 10_000


def key_values(pairs: Sequence[tuple[str, Any]]) -> str:
    """``label: value`` lines with the values aligned."""
    if not pairs:
        return ""
    label_width = max(len(label) for label, _ in pairs)
    return "\n".join(f"{label.ljust(label_width)}  {_cell(value)}" for label, value in pairs)


def counts(values: dict[str, int]) -> str:
    """``{"active": 3, "retracted": 1}`` as ``active 3, retracted 1``."""
    return ", ".join(f"{key} {value:,}" for key, value in values.items()) or "none"


def printable(text: str) -> str:
    """``text`` safe to print to a terminal: control characters (an escape sequence would recolour or
    move the cursor, a bell rings) and bidirectional or tag characters written as ``<U+001B>``. Memories
    are written by agents; what they hold must not drive the reader's terminal."""
    return shown_safely(text)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return printable(" ".join(str(value).split()))


def _is_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) or value is None


class ProgressBar:
    """A ``tools.common.Progress`` drawn on ``stream`` (stderr): nothing for work that ends within
    ``delay`` seconds, then a bar (or a count, when the total is unknown) redrawn at most ten times a
    second; a stream that is not a terminal gets one line per step and quarter instead of redraws."""

    def __init__(self, stream: TextIO, *, delay: float = 1.0, clock: Any = time.monotonic) -> None:
        self._stream = stream
        self._delay = delay
        self._clock = clock
        self._started = clock()
        self._label = ""
        self._last_draw = 0.0
        self._drawn = False
        self._quarter = -1
        self._tty = bool(getattr(stream, "isatty", lambda: False)())

    def __call__(self, label: str, done: int, total: int | None) -> None:
        now = self._clock()
        if label != self._label:  # a new step: its own second of grace, its own rate
            self.finish()
            self._label, self._quarter, self._started = label, -1, now
        if now - self._started < self._delay:
            return
        finished = total is not None and done >= total
        if self._tty:
            if finished or now - self._last_draw >= 0.1:
                self._write("\r" + self.render(label, done, total, now - self._started))
                self._last_draw, self._drawn = now, True
            return
        quarter = 4 * done // total if total else -1
        if quarter > self._quarter or (total is None and now - self._last_draw >= 5):
            self._write(self.render(label, done, total, now - self._started) + "\n")
            self._quarter, self._last_draw = quarter, now

    def _write(self, text: str) -> None:
        """``text`` on the bar's stream, after what the command printed so far: with both streams sent to
        one file (``2>&1``) a line of progress then never lands inside a line of output (a trial read
        "... else LanceDB'sopening the store..."), as it did when standard output was flushed later."""
        if self._stream is not sys.stdout and sys.stdout is not None and not sys.stdout.closed:
            sys.stdout.flush()
        self._stream.write(text)
        self._stream.flush()

    def finish(self) -> None:
        """End the current bar's line (call when the work is done)."""
        if self._drawn:
            self._write("\n")
            self._drawn = False

    @staticmethod
    def render(label: str, done: int, total: int | None, elapsed: float, width: int = 30) -> str:
        if total is None or total <= 0:
            return f"{label}: {done:,} so far ({elapsed:.0f} s)" if done else f"{label}… ({elapsed:.0f} s)"
        share = min(1.0, done / total)
        filled = round(width * share)
        rate = done / elapsed if elapsed > 0 else 0.0
        left = f", {(total - done) / rate:.0f} s left" if rate > 0 and done < total else ""
        return f"{label} [{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} {share:4.0%}{left}"


@contextlib.contextmanager
def ticking(progress: Any, label: str) -> Iterator[None]:
    """Report ``label`` as work of unknown length while the block runs (a call that reports nothing
    itself: opening the store, loading models, compacting), so a bar that waits a second still appears."""
    done = threading.Event()

    def tick() -> None:
        while not done.wait(0.25):
            progress(label, 0, None)

    ticker = threading.Thread(target=tick, name="memoria-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
