"""Write work that must outlive a crash, written down before it runs: a process that dies first leaves it
for the next one to finish, instead of leaving half an operation behind.

Kinds of entry:

- **a hand-on** (``writing.behind``): the credits a superseded memory earned, carried to the memory that
  took its place after the caller was answered (the scope, the memory they go to, the memories they
  come from and whether their failures go too);
- **a consolidation owed** (``writing.service``): memories about to be inserted stamped as examined by
  consolidation, which runs right after their commit (one write instead of an insert and an update). A
  process killed between the two left a restatement beside the memory it restates, both active, and
  the stamp kept the sweep from ever looking at it again; an explicit update half done left the old text
  active beside the new. The entry names the memories and, for an explicit update, the memory they
  replace;
- **a supersede decided** and answered, committed behind the call;
- **a change of status or of tags** (a retraction, an expiry, a restore, an amend), whose lineage event
  is a commit of its own after it: a process killed between the two left a memory retracted that no
  event said was, or active again after a lineage that ended in its retraction;
- **an outcome report in flight**: its weights, weight events, credits and report row are four commits.

Each process appends to a file of its own in the store folder's ``.memoria-unfinished/``, which it holds
an exclusive ``flock`` on while it runs: a line when work begins, a line when it is done. A file whose
lock can be taken belongs to a process that is gone; what it began and never finished is an orphan,
which a starting server (and every maintenance round) runs again (both kinds are idempotent) and then
deletes the file. Files of the release that wrote hand-ons alone (``.memoria-hand-ons/``) are read too.
Lines are flushed to the operating system, not synced: a killed process loses nothing, a machine that
loses power may lose the last ones. Object stores have no folder, and Windows no ``flock``: there a
crash still loses the work in flight.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from storage.records import Scope

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: nothing is written down
    fcntl = None  # type: ignore[assignment]

UNFINISHED_DIR = ".memoria-unfinished"
LEGACY_DIRS = (".memoria-hand-ons",)  # where earlier releases wrote their hand-ons
# Once this many lines were written since the file was last empty, it is written again with only the
# entries still open (under steady load it may never be empty).
REWRITE_AFTER_LINES = 1_000
ABANDONED_AFTER_SECONDS = 60.0  # an ``.opening`` file this old and unlocked was left by a process that died

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HandOn:
    """One carry of credits: to ``heir_id`` from each of ``losers`` (memory id, whether its failures go)."""

    scope: Scope
    heir_id: str
    losers: tuple[tuple[str, bool], ...]


@dataclass(frozen=True)
class OwedConsolidation:
    """Memories of ``scope`` inserted (or about to be) stamped as examined, whose consolidation has not run
    yet; ``replaces``: the memory an explicit update writes them to replace."""

    scope: Scope
    memory_ids: tuple[str, ...]
    replaces: str | None = None


@dataclass(frozen=True)
class DecidedSupersede:
    """A supersede consolidation decided and answered, committed behind the call (``writing.service``):
    ``losers`` superseded by ``survivor`` as ``action`` by ``resolver``, on behalf of ``agent``/``session``.
    Finished as decided: a language model's decision is not taken again by the rules. Ids and names only,
    as every entry: its reason may quote the memory's words, which a purge must be able to erase."""

    scope: Scope
    losers: tuple[str, ...]
    survivor: str
    action: str
    resolver: str
    agent: str
    session: str


@dataclass(frozen=True)
class StatusChange:
    """A change of these memories' status (``action``: retract, expire, restore) or of one memory's tags and
    tier (amend) about to be committed, whose lineage event follows it (``writing.service``), on behalf of
    ``agent``/``session`` by ``resolver``, begun at ``began`` (ISO 8601, the service's clock). For an amend,
    ``outcome`` is a digest of the tags and tier it writes (``writing.unfinished.tags_digest``): the entry holds
    ids and names only, never a memory's words or tags, which a purge must be able to erase."""

    scope: Scope
    memory_ids: tuple[str, ...]
    action: str
    resolver: str
    agent: str
    session: str
    began: str
    outcome: str | None = None
    # A restore made for an explicit update back to an earlier text: the memory it then replaces (the
    # next start finishes that update once the restore is committed).
    replaces: str | None = None


@dataclass(frozen=True)
class ReportInFlight:
    """An outcome report about to write (``writing.outcomes.write_report``): the weights of ``affected``,
    their weight events, the session's credits, then its report row, each a commit of its own. A process
    killed between them left the report half applied (a review: its credits moved recall with no report
    saved, or the weights moved with nothing behind them); the next start completes the report from its
    credits, or takes its weights back (``writing.outcomes.finish_report``). Ids, names and numbers only:
    the report's note, free text, is not kept (a report completed after a crash is saved without it).
    ``first_reported_at``/``reported_at``: ISO 8601."""

    scope: Scope
    session_id: str
    revision: int
    outcome: str
    score: float
    first_reported_at: str
    reported_at: str
    memory_ids: tuple[str, ...]  # what the report credits (its row's)
    affected: tuple[str, ...]  # every memory whose weight it writes


Unfinished = HandOn | OwedConsolidation | DecidedSupersede | StatusChange | ReportInFlight
# A decided supersede's fields after its scope and losers, in order, as its journal line names them.
_SUPERSEDE_NAMES = ("survivor", "action", "resolver", "agent", "session")
# A status change's fields after its scope and memories, in order, as its journal line names them.
_STATUS_NAMES = ("action", "resolver", "agent", "session", "began")


class UnfinishedWrites:
    def __init__(self, folder: Path | None) -> None:
        """``folder``: the store's local folder (None: an object store, where nothing is written down)."""
        self._dir = folder / UNFINISHED_DIR if folder is not None and fcntl is not None else None
        self._legacy = [folder / name for name in LEGACY_DIRS] if self._dir is not None and folder else []
        self._file: IO[str] | None = None
        self._path: Path | None = None
        self._lock = threading.Lock()
        self._next = 0
        self._open: dict[int, str] = {}  # number -> its line, for the entries not done yet
        self._lines = 0  # written since the file was last empty

    def begin(self, entry: Unfinished) -> int | None:
        """Write down work about to begin; returns its number (None: nothing written)."""
        return self.begin_many([entry])[0]

    def begin_many(self, entries: Sequence[Unfinished]) -> list[int | None]:
        """Write down several works about to begin, in one write of the file; their numbers, in order. A
        group commit writes down the consolidation each of its new memories owes: one flush for the batch,
        not one each (each flush gives up the interpreter lock, and with thirty writes in flight the batch's
        leader waited to take it back after every one)."""
        if self._dir is None or not entries:
            return [None] * len(entries)
        with self._lock:
            file = self._own_file()
            numbers = list(range(self._next, self._next + len(entries)))
            self._next += len(entries)  # never used again, even if the write below fails part-way
            lines = [
                json.dumps({"n": number, **_fields(entry)})
                for number, entry in zip(numbers, entries, strict=True)
            ]
            file.write("".join(line + "\n" for line in lines))
            file.flush()
            self._open.update(zip(numbers, lines, strict=True))
            self._lines += len(entries)
            return list(numbers)

    def end(self, number: int | None) -> None:
        """The work ``number`` is done (or failed for good: it is not tried again)."""
        if number is None:
            return
        with self._lock:
            if self._file is None:  # closed meanwhile (a close that gave up waiting)
                return
            self._open.pop(number, None)
            if not self._open:  # nothing in flight: the file starts again empty
                # By its descriptor (appends go to the new end): ``truncate`` would also ask where the file
                # stands, one system call more on every remember, and each lets the interpreter go to
                # another thread. The buffer is empty (every write is flushed at once); flushing it first
                # costs nothing then, and keeps a line a failed flush left from landing after the cut.
                self._file.flush()
                os.ftruncate(self._file.fileno(), 0)
                self._lines = 0
            elif self._lines >= REWRITE_AFTER_LINES:  # it grew long: only what is open, in a new file
                self._replace_file()
            else:
                self._file.write(json.dumps({"done": number}) + "\n")
                self._lines += 1
            self._file.flush()

    def orphans(self) -> list[tuple[Path, list[Unfinished]]]:
        """The files of processes that are gone, with what they began and never finished (each file's lock
        let go once read: ``claimed`` holds them while their entries run)."""
        with self.claimed() as found:
            return found

    @contextmanager
    def claimed(self) -> Iterator[list[tuple[Path, list[Unfinished]]]]:
        """The orphans (``orphans``), each file held locked until the block ends: another server starting on
        the same store (or its maintenance round) skips them meanwhile, instead of running the same dead
        process's entries at once (a review: both would record the same supersede's lineage event)."""
        if self._dir is None:
            yield []
            return
        found, held = [], []
        paths = [
            path
            for folder in [self._dir, *self._legacy]
            if folder.is_dir()
            for path in folder.glob("*.jsonl")
        ]
        self._drop_abandoned_openings()
        try:
            for path in sorted(paths):
                if path == self._path:
                    continue
                try:
                    file = open(path, encoding="utf-8")  # noqa: SIM115 (held until the block ends)
                except FileNotFoundError:
                    continue  # another starting server took it
                held.append(file)
                try:
                    fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its process runs, or another server holds it
                try:
                    if os.fstat(file.fileno()).st_ino != os.stat(path).st_ino:
                        continue  # its running process put a new file in its place (``_replace_file``)
                except FileNotFoundError:
                    continue  # another server ran it and deleted it
                found.append((path, _unfinished(file.read().splitlines(), path)))
            yield found
        finally:
            for file in held:
                file.close()

    def _drop_abandoned_openings(self) -> None:
        """Delete the ``.opening`` files of processes that died before renaming one into place (a file of
        entries written again: the one it was to replace is still whole). One a live process holds, or
        made in the last minute (it locks it right after opening it), is left alone."""
        assert self._dir is not None
        if not self._dir.is_dir():
            return
        for path in self._dir.glob("*.opening"):
            try:
                if time.time() - path.stat().st_mtime < ABANDONED_AFTER_SECONDS:
                    continue
                with open(path, encoding="utf-8") as file:
                    try:
                        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue  # its process is renaming it
                    path.unlink(missing_ok=True)
            except FileNotFoundError:
                continue

    def discard(self, path: Path) -> None:
        """Delete an orphan file once what it held was begun again (in this process's own file)."""
        path.unlink(missing_ok=True)

    def close(self) -> None:
        """Close this process's file; deleted when nothing it began is left unfinished."""
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
            self._file, self._path = _locked_in_place(path, ()), path
        return self._file

    def _replace_file(self) -> None:
        """This process's file written again with only the entries still open: a new file, locked, renamed
        over the old one (truncated in place, a crash between emptying it and writing the open entries
        again would lose them), then the old one closed."""
        assert self._file is not None and self._path is not None
        old = self._file
        self._file = _locked_in_place(self._path, self._open.values())
        old.close()
        self._lines = len(self._open)


def _locked_in_place(path: Path, lines: Iterable[str]) -> IO[str]:
    """A file at ``path`` holding ``lines``, exclusively locked before it takes that name: written and
    locked under a name ``orphans`` does not look at, then renamed (the lock goes with the file), so a
    starting server never sees it unlocked, nor half written."""
    opening = path.with_suffix(".opening")
    # Appending: after a truncation (``end``) the next line goes at the start, not where the last one ended.
    file = open(opening, "a", encoding="utf-8")  # noqa: SIM115 (held while the process runs)
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        file.writelines(line + "\n" for line in lines)
        file.flush()
        os.rename(opening, path)
    except BaseException:
        file.close()
        opening.unlink(missing_ok=True)
        raise
    return file


def _fields(entry: Unfinished) -> dict[str, object]:
    where = {"org": entry.scope.org_id, "project": entry.scope.project_id}
    if isinstance(entry, StatusChange):
        return {
            "kind": "status",
            **where,
            "memories": list(entry.memory_ids),
            **{name: getattr(entry, name) for name in _STATUS_NAMES},
            "outcome": entry.outcome,
            "replaces": entry.replaces,
        }
    if isinstance(entry, DecidedSupersede):
        return {
            "kind": "supersede",
            **where,
            "losers": list(entry.losers),
            **{name: getattr(entry, name) for name in _SUPERSEDE_NAMES},
        }
    if isinstance(entry, ReportInFlight):
        return {
            "kind": "report",
            **where,
            "session": entry.session_id,
            "revision": entry.revision,
            "outcome": entry.outcome,
            "score": entry.score,
            "first": entry.first_reported_at,
            "at": entry.reported_at,
            "memories": list(entry.memory_ids),
            "affected": list(entry.affected),
        }
    if isinstance(entry, HandOn):
        return {
            "kind": "hand_on",
            **where,
            "heir": entry.heir_id,
            "losers": [[memory_id, blame] for memory_id, blame in entry.losers],
        }
    return {"kind": "consolidation", **where, "memories": list(entry.memory_ids), "replaces": entry.replaces}


def _entry(fields: dict[str, object]) -> Unfinished:
    scope = Scope(str(fields["org"]), str(fields["project"]))
    if fields.get("kind", "hand_on") == "hand_on":  # lines without a kind: the hand-ons of earlier releases
        losers = fields["losers"]
        if not isinstance(losers, list):
            raise TypeError("losers is not a list")
        return HandOn(
            scope, str(fields["heir"]), tuple((str(memory_id), bool(blame)) for memory_id, blame in losers)
        )
    if fields["kind"] == "supersede":
        losers = fields["losers"]
        if not isinstance(losers, list):
            raise TypeError("losers is not a list")
        return DecidedSupersede(
            scope, tuple(str(memory_id) for memory_id in losers), *(str(fields[n]) for n in _SUPERSEDE_NAMES)
        )
    if fields["kind"] not in ("consolidation", "status", "report"):
        raise ValueError(f"unknown kind {fields['kind']!r}")
    memories = fields["memories"]
    if not isinstance(memories, list):
        raise TypeError("memories is not a list")
    if fields["kind"] == "report":
        affected, revision, score = fields["affected"], fields["revision"], fields["score"]
        if (
            not isinstance(affected, list)
            or not isinstance(revision, int)
            or not isinstance(score, int | float)
        ):
            raise TypeError("a report's affected, revision or score is not what it should be")
        return ReportInFlight(
            scope,
            str(fields["session"]),
            revision,
            str(fields["outcome"]),
            float(score),
            str(fields["first"]),
            str(fields["at"]),
            tuple(str(memory_id) for memory_id in memories),
            tuple(str(memory_id) for memory_id in affected),
        )
    if fields["kind"] == "status":
        outcome = fields.get("outcome")
        action, resolver, agent, session, began = (str(fields[name]) for name in _STATUS_NAMES)
        return StatusChange(
            scope,
            tuple(str(memory_id) for memory_id in memories),
            action,
            resolver,
            agent,
            session,
            began,
            None if outcome is None else str(outcome),
            None if fields.get("replaces") is None else str(fields["replaces"]),
        )
    replaces = fields.get("replaces")
    return OwedConsolidation(
        scope, tuple(str(memory_id) for memory_id in memories), None if replaces is None else str(replaces)
    )


def _unfinished(lines: Sequence[str], path: Path) -> list[Unfinished]:
    begun: dict[int, Unfinished] = {}
    for line in lines:
        try:
            fields = json.loads(line)
            if "done" in fields:
                begun.pop(int(fields["done"]), None)
            else:
                begun[int(fields.get("n", fields.get("hand_on")))] = _entry(fields)
        except (ValueError, KeyError, TypeError):  # a line cut short by the crash: nothing to run
            log.warning("%s: skipped a line that is not an entry: %r", path.name, line[:200])
    return list(begun.values())
