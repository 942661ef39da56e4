"""The credits still being handed on, written down before they are carried (``writing.behind``): a process
that dies first leaves them for the next one to carry, instead of losing them.

Each process appends to a file of its own in the store folder's ``.memoria-hand-ons/``, which it holds an
exclusive ``flock`` on while it runs: a line when a carry is handed on (the scope, the memory it goes to,
the memories it comes from and whether their failures go too), a line when it has run. A file whose lock
can be taken belongs to a process that is gone; what it handed on and never finished is an orphan, which
a starting server carries again (carrying is idempotent) and then deletes the file. Lines are flushed to
the operating system, not synced: a killed process loses nothing, a machine that loses power may lose the
last ones. Object stores have no folder, and Windows no ``flock``: there a crash loses the carries in
flight, as before.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from storage.records import Scope

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: nothing is written down
    fcntl = None  # type: ignore[assignment]

HAND_ONS_DIR = ".memoria-hand-ons"
# Once this many lines were written since the file was last empty, it is written again with only the
# carries still open (under steady load it may never be empty).
REWRITE_AFTER_LINES = 1_000

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HandOn:
    """One carry of credits: to ``heir_id`` from each of ``losers`` (memory id, whether its failures go)."""

    scope: Scope
    heir_id: str
    losers: tuple[tuple[str, bool], ...]


class HandOnJournal:
    def __init__(self, folder: Path | None) -> None:
        """``folder``: the store's local folder (None: an object store, where nothing is written down)."""
        self._dir = folder / HAND_ONS_DIR if folder is not None and fcntl is not None else None
        self._file: IO[str] | None = None
        self._path: Path | None = None
        self._lock = threading.Lock()
        self._next = 0
        self._open: dict[int, str] = {}  # number -> its line, for the carries not yet run
        self._lines = 0  # written since the file was last empty

    def begin(self, hand_on: HandOn) -> int | None:
        """Write down a carry about to be handed on; returns its number (None: nothing written)."""
        if self._dir is None:
            return None
        with self._lock:
            file = self._own_file()
            number = self._next
            self._next += 1
            line = json.dumps(
                {
                    "hand_on": number,
                    "org": hand_on.scope.org_id,
                    "project": hand_on.scope.project_id,
                    "heir": hand_on.heir_id,
                    "losers": [[memory_id, blame] for memory_id, blame in hand_on.losers],
                }
            )
            file.write(line + "\n")
            file.flush()
            self._open[number] = line
            self._lines += 1
            return number

    def end(self, number: int | None) -> None:
        """The carry ``number`` has run (or failed for good: it is not tried again)."""
        if number is None:
            return
        with self._lock:
            if self._file is None:  # closed meanwhile (a close that gave up waiting)
                return
            self._open.pop(number, None)
            if not self._open or self._lines >= REWRITE_AFTER_LINES:
                # Nothing in flight: the file starts again empty; or it grew long: only what is open.
                self._file.truncate(0)
                self._file.writelines(line + "\n" for line in self._open.values())
                self._lines = len(self._open)
            else:
                self._file.write(json.dumps({"done": number}) + "\n")
                self._lines += 1
            self._file.flush()

    def orphans(self) -> list[tuple[Path, list[HandOn]]]:
        """The files of processes that are gone, with what they handed on and never finished."""
        if self._dir is None or not self._dir.is_dir():
            return []
        found = []
        for path in sorted(self._dir.glob("*.jsonl")):
            if path == self._path:
                continue
            try:
                with open(path, encoding="utf-8") as file:
                    try:
                        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue  # its process runs
                    found.append((path, _unfinished(file.read().splitlines(), path)))
            except FileNotFoundError:
                continue  # another starting server took it
        return found

    def discard(self, path: Path) -> None:
        """Delete an orphan file once what it held is handed on again (in this process's own file)."""
        path.unlink(missing_ok=True)

    def close(self) -> None:
        """Close this process's file; deleted when nothing it handed on is left unfinished."""
        with self._lock:
            if self._file is None:
                return
            self._file.close()
            self._file = None
            if not self._open and self._path is not None:
                self._path.unlink(missing_ok=True)

    def _own_file(self) -> IO[str]:
        if self._file is None:
            assert self._dir is not None
            self._dir.mkdir(exist_ok=True)
            path = self._dir / f"{os.getpid()}-{secrets.token_hex(4)}.jsonl"
            # Locked under a name ``orphans`` does not look at, then given its own: a starting server never
            # sees it unlocked (the lock goes with the file through the rename).
            opening = path.with_suffix(".opening")
            file = open(opening, "a", encoding="utf-8")  # noqa: SIM115 (held while the process runs)
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.rename(opening, path)
            except BaseException:
                file.close()
                opening.unlink(missing_ok=True)
                raise
            self._file, self._path = file, path
        return self._file


def _unfinished(lines: Sequence[str], path: Path) -> list[HandOn]:
    begun: dict[int, HandOn] = {}
    for line in lines:
        try:
            entry = json.loads(line)
            if "done" in entry:
                begun.pop(int(entry["done"]), None)
            else:
                begun[int(entry["hand_on"])] = HandOn(
                    Scope(str(entry["org"]), str(entry["project"])),
                    str(entry["heir"]),
                    tuple((str(memory_id), bool(blame)) for memory_id, blame in entry["losers"]),
                )
        except (ValueError, KeyError, TypeError):  # a line cut short by the crash: nothing to carry
            log.warning("%s: skipped a line that is not a hand-on: %r", path.name, line[:200])
    return list(begun.values())
