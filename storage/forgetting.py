"""Purging memories: erasing their text from every table and every old version, as one operation a
journal entry makes recoverable after a crash."""

from __future__ import annotations

import json
import logging
import mmap
import secrets
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from lancedb.expr import Expr
from lancedb.index import FTS

from storage import filters, schema
from storage.lineage import Lineage
from storage.locking import retrying
from storage.manifests import Manifests
from storage.memories import Memories
from storage.records import LineageEvent, MemoryRecord, Scope
from storage.rows import (
    arrow_rows,
    ids_of_key,
    query_withheld,
    quoted_by,
    session_queries_withheld,
    telling_words,
    trace_of_row,
    with_trace,
)
from storage.scan import scan, scan_rows
from storage.tables import local_folder, masked

log = logging.getLogger(__name__)

# What a lineage reason or contradiction detail that names a purged memory says instead (it may have quoted it).
WITHHELD = "[withheld: the memory was purged]"

PURGE_JOURNAL = "pending_purge:"  # meta keys of purges begun and not yet finished


def interrupted_write(name: str) -> bool:
    """Whether a file of a table's folder is a write in progress: lance's local files are written as
    ``.tmp*`` and renamed when complete, object_store's staged uploads as ``<name>#<part>``; no
    committed file is named so."""
    return name.startswith(".tmp") or "#" in name


def holds_any(path: Path, needles: Sequence[bytes]) -> bool:
    """Whether the file at ``path`` contains one of ``needles`` (read mapped, not loaded: a compaction's
    file can be large). A file gone meanwhile holds nothing."""
    try:
        with path.open("rb") as file:
            if path.stat().st_size == 0:
                return False
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                return any(mapped.find(needle) != -1 for needle in needles)
    except (FileNotFoundError, ValueError):
        return False


@dataclass(frozen=True)
class PendingPurge:
    """A purge's journal entry: what to erase, and the lineage to record once it is erased."""

    key: str
    scope: Scope
    memory_ids: tuple[str, ...]
    at: datetime
    quoted_chars: int
    events: tuple[LineageEvent, ...]
    resolution: str
    # The erase committed (said in the entry right after it): from then on every memory of it reads purged,
    # so one active again was restored since, by another process, after the purging one died.
    erased: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {
                "org_id": self.scope.org_id,
                "project_id": self.scope.project_id,
                "memory_ids": list(self.memory_ids),
                "at": self.at.isoformat(),
                "quoted_chars": self.quoted_chars,
                "resolution": self.resolution,
                "events": [{**event.__dict__, "at": event.at.isoformat()} for event in self.events],
                **({"erased": True} if self.erased else {}),
            }
        )

    @classmethod
    def from_json(cls, key: str, text: str) -> PendingPurge:
        value = json.loads(text)
        return cls(
            key=key,
            scope=Scope(value["org_id"], value["project_id"]),
            memory_ids=tuple(value["memory_ids"]),
            at=datetime.fromisoformat(value["at"]),
            quoted_chars=int(value["quoted_chars"]),
            events=tuple(
                LineageEvent(**{**event, "at": datetime.fromisoformat(event["at"])})
                for event in value["events"]
            ),
            resolution=value["resolution"],
            erased=bool(value.get("erased", False)),
        )


class Forgetting(Memories, Lineage):
    """Purges, and the finishing at start-up of a purge a stopped process left half done."""

    def purge(
        self,
        scope: Scope,
        memory_ids: Sequence[str],
        at: datetime,
        *,
        quoted_chars: int = 0,
        events: Sequence[LineageEvent] = (),
        resolution: str = "purged",
    ) -> list[str]:
        """Erase content, tags and vector of these memories (the rows stay, status purged, for lineage), scrub
        their text from recorded traces, episode titles and the search text of the other members of their
        episodes (which quote up to ``quoted_chars`` of the memory before them), withhold the notes of the
        reports that named them and the queries that asked for them in their words (the reports' under the
        reports' lock, before the journal and again after the erase; a crash between leaves at most a report
        made meanwhile to a later purge of the same memory, or to none), record ``events`` (its
        lineage) and close its open contradictions with ``resolution``, then drop every older version of
        the tables and rebuild the full-text index, so the text is gone from the store's files.

        One recoverable operation: a journal entry naming the memories (never their text) is written
        first and removed last; a process killed in between leaves it, and the next opening of the store
        finishes the purge before anything is served (``finish_pending_purges``). Until then a memory
        already erased reads as purged everywhere (explain_ranking masks what a trace still quotes)."""
        self.settle_supersedes(memory_ids)
        # The memories' telling words, kept in this process only (the journal never holds text): what tells
        # the queries that asked for them, before and after the erase.
        words = {i: telling_words(m.content) for i, m in self.get_memories(memory_ids, scope).items()}
        with self.reporting():
            self._scrub_reports(scope, words)
        with self.exclusive():
            current = self.get_memories(memory_ids, scope)
            ids = [i for i in memory_ids if i in current]
            if not ids:
                return []
            journal = PendingPurge(
                key=f"{PURGE_JOURNAL}{secrets.token_hex(8)}",
                scope=scope,
                memory_ids=tuple(ids),
                at=at,
                quoted_chars=quoted_chars,
                events=tuple(events),
                resolution=resolution,
            )
            retrying(lambda: self._meta.add([{"key": journal.key, "value": journal.to_json()}]))
            self._finish_purge(journal, words=words)
        with self.reporting():  # what a report that read before the purge began wrote while it waited
            self._scrub_reports(scope, words)
        return ids

    def finish_pending_purges(self, *, running: bool = False) -> int:
        """Finish every purge a killed process left half done (at start-up, before serving; ``running``: in a
        running server's maintenance round, where the write lock spans processes: a purge holds it from
        its journal entry to its end, so one found under it is a dead process's, which is not so of an
        object store's replicas); how many."""
        if running and not self._lock.spans_processes:
            return 0
        if not self._pending_purges():  # the usual case, without waiting for the write lock
            return 0
        with self.exclusive():
            # Read again under the lock: a purge another process was finishing when we looked is done
            # now, and its memory may since have been remembered again (and must not be erased).
            pending = self._pending_purges()
            for journal in pending:
                log.warning(
                    "finishing a purge a stopped process left half done (%d memories)",
                    len(journal.memory_ids),
                )
                self._finish_purge(journal, recovering=True)
        return len(pending)

    def _pending_purges(self) -> list[PendingPurge]:
        rows = scan_rows(self._meta, filters.contains("key", PURGE_JOURNAL), None)
        return [
            PendingPurge.from_json(r["key"], r["value"]) for r in rows if r["key"].startswith(PURGE_JOURNAL)
        ]

    def _finish_purge(
        self, journal: PendingPurge, *, recovering: bool = False, words: dict[str, set[str]] | None = None
    ) -> None:
        """Every step of a purge after its quotes, each safe to run again (a purge the journal says was
        begun is finished the same way whatever step a crash interrupted). No compaction runs meanwhile
        (maintenance compacts the memories without the write lock, ``Upkeep._optimize_beside_writes``):
        one that read a memory's text before the erase could commit it into a new file after, or leave
        it in a file of its own that the clean-up below would take for an interrupted write's, or delete
        while the compaction still meant to commit it."""
        with self.exclusive(), self._compaction_lock.hold():  # in that order, as every holder of both
            self._finish_purge_steps(journal, recovering=recovering, words=words)

    def _finish_purge_steps(
        self, journal: PendingPurge, *, recovering: bool = False, words: dict[str, set[str]] | None = None
    ) -> None:
        """``words``: the memories' telling words, read before the purge began (a recovery reads them from
        the memories' text while it is still there: after the erase, none)."""
        scope, ids, at = journal.scope, list(journal.memory_ids), journal.at
        current = self.get_memories(ids, scope)
        if words is None:
            words = {i: telling_words(m.content) for i, m in current.items() if m.content}
        # Finishing a dead process's purge whose erase had committed: a memory active again was restored since
        # (its text remembered again by another process, and acknowledged); that write stands.
        again = set()
        if recovering and journal.erased:
            again = {i for i, m in current.items() if m.status == "active"}
        if again:
            log.warning("%d memories of an unfinished purge were written again since; they stay", len(again))
            ids = [i for i in ids if i not in again]
            current = {i: m for i, m in current.items() if i not in again}
            journal = replace(journal, events=tuple(e for e in journal.events if e.memory_id not in again))
        if not ids:
            retrying(partial(self._meta.delete, filters.equals("key", journal.key)))
            return
        # The quotes of a memory in its neighbours' search text go while its text is still there to find
        # them by (a memory already erased had its quotes scrubbed before); then the memory itself; then
        # whatever read it meanwhile (traces).
        self._scrub_quotes(scope, [m for m in current.values() if m.content], journal.quoted_chars)
        # So do the queries that asked for them in their words (the reports' copies went before: ``purge``).
        self._scrub_queries(self._asked_for(scope, words, ids))
        # Episode titles first: a scope copy re-reads an episode when one of its memories changes, so
        # the episode must already be as it will stay when the memory's commit lands.
        for record in current.values():
            if record.kind == "episode" and record.episode_id:
                where = self._in_scope(scope, id=record.episode_id)
                self._rewrite(
                    self._episodes, ["org_id", "project_id", "id"], where, lambda row: {**row, "title": None}
                )
        erased = {
            "content": "",
            "content_hash": "",
            "search_text": "",
            "tags": [],
            "tags_key": "||",
            "simhash": None,
            "vector": [0.0] * self._vector_dim,
            "status": "purged",
            "purged_at": at,
            "updated_at": at,
        }
        self._rewrite(self._memories, ["id"], filters.one_of("id", ids), lambda row: {**row, **erased})
        if not journal.erased:  # said in the entry: a memory active after this was restored since
            journal = replace(journal, erased=True)
            where = filters.equals("key", journal.key)
            retrying(partial(self._meta.update, where=where, values={"value": journal.to_json()}))
        self._scrub_traces(scope, ids)
        # Those recorded meanwhile (another process's).
        self._scrub_queries(self._asked_for(scope, words, ids))
        self._scrub_lineage(scope, ids)
        if journal.events:
            self.add_lineage_once(journal.events)
        self.resolve_contradictions(scope, ids, journal.resolution, at)
        self._drop_old_versions()  # the text is gone from old versions too before the journal goes
        self._drop_interrupted_writes(ids)  # (after: fewer versions left to name the files kept)
        retrying(partial(self._meta.delete, filters.equals("key", journal.key)))

    def _scrub_quotes(self, scope: Scope, purged: Sequence[MemoryRecord], quoted_chars: int) -> None:
        quoted = [r for r in purged if r.episode_id and r.content] if quoted_chars > 0 else []
        if not quoted:
            return
        episodes = list({r.episode_id for r in quoted if r.episode_id})
        condition = filters.all_of(filters.scope_is(scope), filters.one_of("episode_id", episodes))
        gone = {r.id for r in purged}
        all_quotes = [r.content[:quoted_chars] for r in quoted]
        changed: dict[str, str] = {}
        for row in self._select(self._memories, condition, ["id", "search_text"], limit=None):
            if row["id"] in gone:
                continue
            text = row["search_text"]
            for quote in all_quotes:
                text = text.replace(quote, "")
            if text != row["search_text"]:
                changed[row["id"]] = text
        if changed:
            self._rewrite(
                self._memories,
                ["id"],
                filters.one_of("id", list(changed)),
                lambda row: {**row, "search_text": changed[row["id"]]},
            )

    def _asked_for(
        self, scope: Scope, words: dict[str, set[str]], memory_ids: Sequence[str] = ()
    ) -> dict[str, tuple[str, str]]:
        """The recalls that returned one of the memories of ``words`` (id -> its telling words,
        ``telling_words``) and asked for it in those words ("BLUEFINCH" found the memory of codename
        BLUEFINCH): retrieval id -> (session, query). With ``memory_ids`` (a purge's, some perhaps erased
        already, with no words left), also those that returned one of them and whose query a purge withheld
        already."""
        ids = list(dict.fromkeys([*words, *memory_ids]))
        if not any(words.values()) and not memory_ids:
            return {}
        self._logs.flush()
        quoting = filters.any_of(*(filters.quotes(memory_id) for memory_id in ids))
        columns = ["retrieval_id", "session_id", "query", "trace_ids"]
        asked = {}
        for row in self._select(
            self._retrievals, filters.all_of(_recalled_in(scope), quoting), columns, limit=None
        ):
            shown = ids_of_key(row["trace_ids"]) if row["trace_ids"] else set(ids)
            said = telling_words(row["query"])
            # One withheld already by a purge of these memories that a crash stopped before their A/B rows
            # (a trial: "finished" at the next start, the rows kept the query): its A/B rows go too.
            if (memory_ids and row["query"] == WITHHELD) or any(said & words[i] for i in shown if i in words):
                asked[row["retrieval_id"]] = (row["session_id"], row["query"])
        return asked

    def _scrub_queries(self, asked: dict[str, tuple[str, str]]) -> None:
        """Withhold these recalls' queries in their records, traces and A/B rows."""
        if not asked:
            return
        withheld = partial(query_withheld, withheld=WITHHELD)
        telling = [retrieval for retrieval, (_, query) in asked.items() if query != WITHHELD]
        with self._logs_lock.exclusive():
            if telling:
                self._rewrite(
                    self._retrievals, ["retrieval_id"], filters.one_of("retrieval_id", telling), withheld
                )
            # (every asked recall's A/B rows that still hold a query: those of a record withheld before too)
            self._rewrite(
                self._ab_logs,
                ["retrieval_id", "observation_id"],
                filters.all_of(
                    filters.one_of("retrieval_id", list(asked)), filters.differs("query_text", WITHHELD)
                ),
                lambda row: {**row, "query_text": WITHHELD},
            )

    def _scrub_reports(self, scope: Scope, words: dict[str, set[str]]) -> None:
        """Withhold what the reports keep of the memories' words, under the reports' lock (a purge takes it
        before the write lock, in the order every holder of both takes them, and again after the erase for
        a report that read before the purge and wrote while it waited): the note of every report that
        named one of them ("the BLUEFINCH codename answered it"), and the queries of the sessions that
        asked for them in their words (``_asked_for``); then drop the report tables' older versions, also
        when a crashed attempt withheld them already."""
        where = _recalled_in(scope)
        gone = set(words)
        naming = [
            row
            for row in self._select(self._outcomes, where, ["session_id", "note", "memory_ids"], limit=None)
            if row["note"] and gone & set(row["memory_ids"] or ())
        ]
        # The sessions that asked for them: a recall's record says so before the erase; a report's credits
        # say a session was shown them (a report that read the records before they were withheld).
        asked = {session for session, _ in self._asked_for(scope, words).values()}
        named = filters.all_of(where, filters.one_of("memory_id", sorted(gone)))
        asked |= {
            row["session_id"] for row in self._select(self._feedback, named, ["session_id"], limit=None)
        }
        told = set().union(*words.values())

        def of_sessions(ids: Sequence[str]) -> Expr:  # the session rows (not the credits) of these sessions
            return filters.all_of(where, filters.one_of("session_id", ids), filters.equals("memory_id", ""))

        columns = ["session_id", "queries", "query_vectors"]
        rows = (
            self._select(self._feedback, of_sessions(sorted(asked)), columns, limit=None)
            if asked and told
            else []
        )
        # A session row to rewrite: one whose rewrite changes it (a query in their words, or the vector of one
        # withheld still kept).
        withhold = partial(session_queries_withheld, told=told, withheld=WITHHELD)
        quoted = sorted({row["session_id"] for row in rows if withhold(row) != row})
        if not naming and not quoted:
            return
        noting = [row["session_id"] for row in naming if row["note"] != WITHHELD]
        if noting:
            self._rewrite(
                self._outcomes,
                ["org_id", "project_id", "session_id"],
                filters.all_of(where, filters.one_of("session_id", noting)),
                lambda row: {**row, "note": WITHHELD},
            )
        if quoted:
            self._rewrite(
                self._feedback,
                ["org_id", "project_id", "session_id", "memory_id", "revision"],
                of_sessions(quoted),
                withhold,
            )
        self._drop_old_versions_of((self._outcomes, self._feedback))

    def _scrub_traces(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        """Mask the memories' previews in every recorded trace. The records this process has queued are
        written first (masked, since the memories are purged by now); records other processes append
        meanwhile wait for the scrub, or mask themselves (``LogsLock``)."""
        self._logs.flush()
        gone = set(memory_ids)
        with self._logs_lock.exclusive():
            for memory_id in memory_ids:
                condition = filters.all_of(_recalled_in(scope), filters.quotes(memory_id))
                self._rewrite(self._retrievals, ["retrieval_id"], condition, partial(_scrubbed, gone=gone))

    def _scrub_lineage(self, scope: Scope, memory_ids: Sequence[str]) -> None:
        """Withhold the reasons of the lineage events and the details of the contradictions that name one of
        the memories: they may quote its words ("revised by 'now uses xylophonedb'", a value then another,
        a language model's free-text reason), which a mask of the quoted parts alone would not all catch."""
        self._logs.flush()  # deferred lineage events are in the table first
        where = filters.all_of(
            filters.equals("org_id", scope.org_id), filters.equals("project_id", scope.project_id)
        )
        pairs = ["org_id", "project_id", "older_id", "newer_id"]
        tables = (
            (self._lineage, ["event_id"], "reason", ("memory_id", "related_id")),
            (self._contradictions, pairs, "detail", ("older_id", "newer_id")),
        )
        with self._logs_lock.exclusive():  # lineage is appended under it (shared), as traces are
            for table, key, text, naming in tables:
                named = filters.any_of(*(filters.one_of(column, memory_ids) for column in naming))
                quoting = filters.all_of(
                    where, named, filters.differs(text, WITHHELD), filters.differs(text, "")
                )
                self._rewrite(table, key, quoting, partial(_withheld, column=text))

    def _vacate(self, table: Any, key: list[str], rewritten: Expr, fragments: Sequence[int]) -> None:
        """Move every other row of ``fragments`` (those holding the ``rewritten`` rows) into new fragments,
        before those rows are rewritten (erased, scrubbed): LanceDB rewrites a row by marking its old place
        deleted, and its compaction leaves a fragment with few deleted rows as it is, so the old text would
        stay in the fragment's file (a purge among 40 memories left it there). Vacated, the fragment holds
        only rows the rewrite deletes, so it leaves the table and the clean-up of old versions deletes its
        file. Safe to run again: the moved rows are unchanged."""
        others = scan(table, filters.all_of(filters.in_fragments(fragments), ~rewritten), None)
        if others.num_rows:
            merged = retrying(partial(table.merge_insert(key).when_matched_update_all().execute, others))
            if table is self._memories:  # the scope copies catch up from the table at their next read
                self._row_count.changed(merged.version, merged.num_updated_rows)

    def _rewrite(
        self, table: Any, key: list[str], where: Expr, change: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> None:
        """Rewrite the rows ``where`` selects with ``change``, every column of them: written with only some
        of its columns, a row keeps its old data file for the rest, old values included (a scrubbed
        trace stayed in its file so). Their fragments are vacated first (``_vacate``)."""
        rows = scan(table, where, [*table.schema.names, "_rowaddr"]).to_pylist()
        if not rows:
            return
        fragments = sorted({row.pop("_rowaddr") >> 32 for row in rows})  # a row's address: fragment, offset
        self._vacate(table, key, where, fragments)
        update = arrow_rows([change(row) for row in rows], table.schema)
        if table is self._memories:
            self._merge_update(update)  # with what the scope copies need to know
        else:
            retrying(partial(table.merge_insert(key).when_matched_update_all().execute, update))

    def _drop_interrupted_writes(self, memory_ids: Sequence[str]) -> None:
        """Delete the files of interrupted writes that hold a purged memory's id, in the tables that hold
        memory text (a local store). A write killed half way leaves its rows in a ``.tmp*`` (or staged
        ``#``) file, or in a data file its commit never named; LanceDB's clean-up of old versions reads
        neither (it deletes only files some version named), so such a file quoting a purged memory keeps
        its text. Every row about a memory carries its id, so a file without a purged id is left alone.
        The caller holds the write lock and the compaction lock (memories, episodes, and their
        compaction) and this holds the logs lock (traces, A/B rows, lineage, and the compaction of the
        logs): no write of these tables is in flight in any process, so no such file belongs to a write
        still to commit."""
        folder = local_folder(self.uri)
        if folder is None or not memory_ids:
            return  # an object store: an interrupted upload leaves no object behind
        needles = [memory_id.encode() for memory_id in memory_ids]
        with self._logs_lock.exclusive():
            for name in (
                schema.MEMORIES,
                schema.EPISODES,
                schema.LINEAGE,
                schema.RETRIEVALS,
                schema.AB_LOGS,
            ):
                table = folder / f"{name}.lance"
                manifests = Manifests(table)
                for path in table.rglob("*"):
                    if not path.is_file():
                        continue
                    orphan = interrupted_write(path.name) or (
                        path.parent == table / "data" and not manifests.name(path.name)
                    )
                    if orphan and holds_any(path, needles):
                        path.unlink(missing_ok=True)

    def _drop_old_versions_of(self, tables: Sequence[Any]) -> None:
        """Every version of ``tables`` but their newest dropped, with the files only older ones held."""
        for table in tables:
            with warnings.catch_warnings():
                # "removes every version except the latest": exactly what a purge needs.
                warnings.simplefilter("ignore", UserWarning)
                retrying(partial(table.optimize, cleanup_older_than=timedelta(0)))

    def _drop_old_versions(self) -> None:
        self._drop_old_versions_of(
            (
                self._memories,
                self._retrievals,
                self._episodes,
                self._lineage,
                self._contradictions,
                self._ab_logs,
            )
        )
        # The inverted index still holds the purged words; build it again from the current rows.
        retrying(
            partial(self._memories.create_index, "search_text", config=FTS(with_position=False), replace=True)
        )
        self._drop_old_versions_of((self._memories,))


def _recalled_in(scope: Scope) -> Expr:
    """The rows of the recalls and reports that may have shown a memory of ``scope``: an org-visible
    memory (the org's shelf) was recalled from any project of its org."""
    return filters.equals("org_id", scope.org_id) if scope.is_org_shelf else filters.scope_is(scope)


def _scrubbed(row: dict[str, Any], *, gone: set[str]) -> dict[str, Any]:
    """A retrieval row with the purged memories masked in its trace."""
    trace = json.dumps(masked(json.loads(trace_of_row(row)), gone))
    quoted = ids_of_key(row["trace_ids"]) if row["trace_ids"] else quoted_by(trace)
    return with_trace(row, trace, quoted)


def _withheld(row: dict[str, Any], *, column: str) -> dict[str, Any]:
    return {**row, column: WITHHELD}
