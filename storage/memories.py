"""Memories and their episodes: reading memories by id, inserting them (coalesced into group commits),
restoring a forgotten one, and the status changes consolidation makes (supersede, retract, reactivate)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from storage import filters
from storage.group_commit import GroupCommit
from storage.locking import retrying
from storage.pending import overlaid
from storage.records import (
    EpisodeRecord,
    MemoryRecord,
    NewMemory,
    ProtectionTier,
    Reach,
    Scope,
    View,
    written_by,
)
from storage.rows import MEMORY_COLUMNS, arrow_rows, episode_from_row, memory_from_row, memory_to_row
from storage.scope_copy import by_id
from storage.tables import StoreError, StoreTables

# The most stale episodes one read of a scope's episodes brings up to date (an IN list of ids). Measured on
# a scope of 765 episodes: a read of 1 or 10 ids takes 7 ms, of 100 ids 11 ms, of 1,000 ids 44 ms.
STALE_EPISODES_READ = 100


class Memories(StoreTables):
    """The memories table read and written record by record, and the episodes its memories belong to."""

    _inserts: GroupCommit[NewMemory, tuple[MemoryRecord, bool]]  # coalesces concurrent inserts

    def get_memory(self, memory_id: str, reach: Reach | None = None) -> MemoryRecord | None:
        """The memory with this id (in ``reach``, and only if its viewer may see it; None: anywhere)."""
        if reach is None:

            def anywhere(ids: list[str]) -> dict[str, MemoryRecord]:
                rows = self._select(
                    self._memories, filters.one_of("id", ids), MEMORY_COLUMNS, limit=2 * len(ids)
                )
                return {row["id"]: memory_from_row(row) for row in rows}

            return self._as_held([memory_id], anywhere).get(memory_id)
        return self.get_memories([memory_id], reach).get(memory_id)

    def get_memories(self, memory_ids: Iterable[str], reach: Reach) -> dict[str, MemoryRecord]:
        """The memories of ``reach`` with these ids (those its viewer may see), as this process will have
        them: a supersede decided and still being committed reads as done (``storage.pending``)."""
        return self._as_held(list(memory_ids), lambda ids: self._committed(ids, reach))

    def _as_held(
        self, memory_ids: list[str], read: Callable[[list[str]], dict[str, MemoryRecord]]
    ) -> dict[str, MemoryRecord]:
        """``read``'s records overlaid with the supersedes held (``storage.pending``). What is held is looked
        at before and after the read: a memory held throughout reads superseded; one whose hold was released
        while its row was being read is read again, since the commit may have landed after its row was read
        (it would read active) and a later write may have changed it since (an explicit update back to it:
        the hold must not be applied to that)."""
        before = self._pending.held()
        found = read(memory_ids)
        if not before:
            return found
        after = self._pending.held()
        released = [
            memory_id
            for memory_id, record in found.items()
            if memory_id in before and memory_id not in after and record.status == "active"
        ]
        if released:  # the rows now say what the commit did (its release came after it)
            found |= read(released)
        return {memory_id: overlaid(record, after) for memory_id, record in found.items()}

    def _committed(self, memory_ids: Iterable[str], reach: Reach) -> dict[str, MemoryRecord]:
        """``get_memories`` as the rows say: what a write that decides on a memory's status reads."""
        found = self._by_id(reach, memory_ids, self._memories_in)
        if isinstance(reach, View):
            found = {i: record for i, record in found.items() if reach.sees(record)}
        return found

    def _inactive_of(self, reach: Reach, memory_ids: Sequence[str]) -> set[str]:
        """Those of ``memory_ids`` stored in ``reach`` that are no longer active, as the rows say now."""
        return {i for i, record in self._committed(memory_ids, reach).items() if record.status != "active"}

    def hold_superseded(self, loser_ids: Sequence[str], survivor_id: str) -> list[str]:
        """Read these memories as superseded by ``survivor_id`` in this process until
        ``release_superseded``, while the write service commits it (``storage.pending``); returns those
        held."""
        return self._pending.hold(loser_ids, survivor_id)

    def release_superseded(self, loser_ids: Sequence[str], survivor_id: str) -> None:
        self._pending.release(loser_ids, survivor_id)

    def hidden_from(self, memory_ids: Iterable[str], view: View) -> set[str]:
        """Those of ``memory_ids`` that are memories of ``view``'s scopes its viewer may not see (another
        agent's or session's private ones)."""
        ids = list(memory_ids)
        return set(self.get_memories(ids, replace(view, viewer=None))) - set(self.get_memories(ids, view))

    def _memories_in(self, scope: Scope, ids: list[str]) -> dict[str, MemoryRecord]:
        if not ids:
            return {}
        with self._cache.reading(scope) as copy:
            if copy is not None:
                return by_id(copy, ids)
        condition = filters.all_of(filters.one_of("id", ids), filters.scope_is(scope))
        rows = self._select(self._memories, condition, MEMORY_COLUMNS, limit=len(ids) * 2)
        found: dict[str, MemoryRecord] = {}
        for row in rows:
            found.setdefault(row["id"], memory_from_row(row))
        return found

    def insert_memory(self, new: NewMemory) -> tuple[MemoryRecord, bool]:
        """Store ``new`` unless its id already exists; returns (the stored record, whether it was created)."""
        return self.insert_many([new])[0]

    def insert_many(
        self, news: Sequence[NewMemory], *, retry: bool = False
    ) -> list[tuple[MemoryRecord, bool]]:
        """Bulk ``insert_memory``: one append for every new id; existing ids (and repeats) come back as
        (existing record, False). Results are in input order. Inserts made by several threads at once
        are coalesced into one commit (``storage.group_commit``); each returns once its rows are in."""
        if not news:
            return []
        for new in news:
            if len(new.vector) != self._vector_dim:
                raise StoreError(
                    f"vector has {len(new.vector)} dimensions but this store holds {self._vector_dim}-d vectors"
                )
        if retry:  # one caller's insert again, after the commit it shared failed: rows it wrote are its own
            return self._insert_batch(list(news), retry=True)
        return self._inserts.run(news)

    def _insert_batch(self, news: list[NewMemory], *, retry: bool = False) -> list[tuple[MemoryRecord, bool]]:
        """One commit for the new ids of ``news`` (the coalesced inserts of every waiting caller); ``retry``:
        one caller's alone, after the commit it shared failed."""
        by_scope: dict[Scope, list[str]] = {}
        for new in news:
            by_scope.setdefault(new.record.scope, []).append(new.record.id)
        # Copies of the batch's scopes answer which ids exist: a table lookup scans every row no index
        # covers yet (a bulk import's own rows), 0.1 ms an id at 1M rows. Missing copies are read here,
        # before the write lock (no other writer waits for the read), as start-up warms them.
        self._cache.warm(by_scope)
        with self.exclusive():
            existing: dict[str, MemoryRecord] = {}
            ids = []  # those no scope copy can answer for: looked up in the table
            for scope, scope_ids in by_scope.items():
                # A scope warming left out (the copies' budget was full) may still displace idle copies
                # when it is the batch's only scope, as any read of it would. Ids are scope-qualified
                # hashes: one the up-to-date copy lacks is new.
                with self._cache.reading(scope, build=len(by_scope) == 1) as copy:
                    if copy is not None:
                        existing |= by_id(copy, scope_ids)
                    else:
                        ids += list(dict.fromkeys(scope_ids))
            for start in range(0, len(ids), 1_000):
                chunk = ids[start : start + 1_000]
                rows = self._select(
                    self._memories, filters.one_of("id", chunk), MEMORY_COLUMNS, limit=len(chunk) * 2
                )
                for row in rows:
                    existing.setdefault(row["id"], memory_from_row(row))
            fresh: dict[str, NewMemory] = {}
            for new in news:
                if new.record.id not in existing:
                    fresh.setdefault(new.record.id, new)
            self._unquote_purged(fresh)
            if fresh:
                # Episodes first: if the memory append then fails, a retry finds the episode and adds the memory.
                created = self._record_episodes([new.record for new in fresh.values()])
                rows = [memory_to_row(new) for new in fresh.values()]
                if self._lock.spans_processes:
                    after = self._append(self._memories, rows)
                    # No memory row is ever deleted, so the table's next stable row id was its row count
                    # before this append: the appended rows are numbered from it, in order
                    # (``storage.row_ids``). Known when this process made every commit since it last
                    # counted (``RowCount``), else counted on the appending handle, current through its
                    # own commit.
                    first = self._row_count.appended(after, len(rows))
                    if first is None:
                        counted = self._appenders.rows(self._memories.name)
                        self._row_count.counted(after, counted)
                        first = counted - len(rows)
                    self._row_ids.appended([row["id"] for row in rows], first)
                else:  # replicas on an object store: insert-if-absent in one commit, so no id twice
                    data = arrow_rows(rows, self._schema(self._memories))
                    merged = retrying(
                        lambda: self._memories.merge_insert("id").when_not_matched_insert_all().execute(data)
                    )
                    after = merged.version
                    if merged.num_inserted_rows < len(fresh):
                        self._take_replicas_rows(fresh, existing, after)
                self._cache.advance(
                    after - 1,
                    after,
                    episodes=created,
                    inserted=[
                        (new.record, np.asarray(new.vector, dtype=np.float32), new.search_text)
                        for new in fresh.values()
                    ],
                )
        results = []
        created_once: set[str] = set()
        for new in news:
            record_id = new.record.id
            if record_id in existing:
                # Retrying a caller alone after the shared commit failed (``storage.group_commit``), a row that
                # commit wrote before failing is this write's own: its caller created it, and owes its
                # consolidation; told otherwise, it would take the memory for another writer's.
                ours = retry and record_id not in created_once and written_by(existing[record_id], new.record)
                created_once.add(record_id)
                results.append((existing[record_id], ours))
            elif record_id in created_once:
                results.append((fresh[record_id].record, False))
            else:
                created_once.add(record_id)
                results.append((fresh[record_id].record, True))
        return results

    def _unquote_purged(self, fresh: dict[str, NewMemory]) -> None:
        """Under the write lock: a memory purged since a new one's search text quoted it (the quote was read
        before the lock, the purge's scrub of quotes ran before this insert) is left out of that text."""
        quoting: dict[Scope, set[str]] = {}
        for new in fresh.values():
            if new.quotes is not None:
                quoting.setdefault(new.record.scope, set()).add(new.quotes)
        gone: set[str] = set()
        for scope, quoted in quoting.items():
            current = self._committed(list(quoted), scope)
            gone |= {
                memory_id for memory_id in quoted if memory_id in current and not current[memory_id].content
            }
        for record_id, new in fresh.items():
            if new.quotes in gone:
                text = new.search_text[: len(new.search_text) - new.quoted_chars]
                fresh[record_id] = replace(new, search_text=text, quotes=None, quoted_chars=0)

    def _take_replicas_rows(
        self, fresh: dict[str, NewMemory], existing: dict[str, MemoryRecord], version: int
    ) -> None:
        """Another replica inserted some of ``fresh``'s ids between this batch's look-up and its commit (at
        ``version``): the id being the table's primary key (migration 8), LanceDB replayed the insert
        against its rows and skipped those ids. Their rows move from ``fresh`` to ``existing``, so that
        their callers are told the memory was there already, as they would have been a moment later. A row
        this commit created is ours, and so is one an earlier attempt of this batch committed before an
        error made ``retrying`` run it again (same session, same creation time)."""
        rows = self._select(
            self._memories,
            filters.one_of("id", list(fresh)),
            [*MEMORY_COLUMNS, "_row_created_at_version"],
            limit=len(fresh) * 2,
        )
        for row in rows:
            ours = fresh.get(row["id"])
            if ours is None or row["_row_created_at_version"] == version:
                continue
            stored = memory_from_row(row)
            if not written_by(stored, ours.record):
                existing[stored.id] = stored
                del fresh[stored.id]

    def restore_memory(self, new: NewMemory) -> MemoryRecord | None:
        """Write ``new`` over a retracted (possibly purged) row with the same id: the memory is live again
        (examined by consolidation as ``new.record.consolidated_at`` says). None, and nothing written, when
        the row is no longer forgotten: another write restated it meanwhile."""
        with self.exclusive():
            current = self._committed([new.record.id], new.record.scope).get(new.record.id)
            if current is None or current.status not in ("retracted", "purged"):
                return None
            restored = {new.record.id: new}
            self._unquote_purged(restored)  # the memory before it, purged since its text was read
            row = {**memory_to_row(restored[new.record.id]), "purged_at": None}
            self._merge_update(arrow_rows([row], self._schema(self._memories)))
        return new.record

    def memory_vectors(self, memory_ids: Sequence[str], reach: Reach) -> dict[str, np.ndarray]:
        """The stored vectors of these memories of ``reach`` (ids of memories it lacks are left out)."""
        return self._by_id(reach, memory_ids, self._vectors_in)

    def _vectors_in(self, scope: Scope, ids: list[str]) -> dict[str, np.ndarray]:
        if not ids:
            return {}
        with self._cache.reading(scope) as copy:
            if copy is not None:
                vectors = {i: copy.vector_of(i) for i in ids}
                return {i: v for i, v in vectors.items() if v is not None}
        condition = filters.all_of(filters.one_of("id", ids), filters.scope_is(scope))
        rows = self._select(self._memories, condition, ["id", "vector"], limit=len(ids) * 2)
        return {
            row["id"]: np.asarray(row["vector"], dtype=np.float32)
            for row in rows
            if row["vector"] is not None
        }

    def count_memories(self) -> int:

        return int(self._memories.count_rows())

    # ------------------------------------------------------------------ status changes

    def supersede(
        self, scope: Scope, loser_ids: Sequence[str], survivor_id: str, at: datetime, *, decided: bool = False
    ) -> list[str]:
        """Mark the still-active ``loser_ids`` superseded by ``survivor_id``; returns the ids that changed.
        Nothing changes when the survivor is no longer active: two consolidations running at once (two
        restatements remembered together) may each pick the other memory to keep, and the second must
        not supersede the first's survivor, which would leave neither active. ``decided``: a supersede
        decided while the survivor was active and committed after it (``storage.pending``): a survivor
        superseded since (revised, restated again) still takes them, so the chain reads as it was decided,
        unless its chain leads back to one of them; one retracted or purged since does not."""
        return self._set_status(scope, loser_ids, "superseded", at, replaced_by=survivor_id, decided=decided)

    def reactivate(self, scope: Scope, memory_id: str, at: datetime) -> MemoryRecord | None:
        """Make a superseded memory active again (an explicit update back to its text); returns it as it is
        now, or None when it is not superseded (any more)."""
        with self.exclusive():
            current = self._committed([memory_id], scope).get(memory_id)
            if current is None or current.status != "superseded":
                return None
            self._update_rows([memory_id], {"status": "active", "replaced_by": None, "updated_at": at})
            return self.get_memory(memory_id, scope)

    def retract(self, scope: Scope, memory_ids: Sequence[str], at: datetime) -> list[str]:
        """Retract the active ones of these memories; returns the ids whose status changed."""
        self.settle_supersedes(memory_ids)
        return self._set_status(scope, memory_ids, "retracted", at, replaced_by=None)

    def settle_supersedes(self, memory_ids: Sequence[str]) -> None:
        """Wait for the supersedes still being committed that involve these memories (``storage.pending``),
        before a write that would change what they decide: a restatement forgotten right after it was
        remembered must not leave the memory it restated active again. Not inside a write sequence, which
        the commit waits for."""
        if self._pending and not getattr(self._writing, "depth", 0):
            self._pending.settle(memory_ids)

    def retract_expired(self, scope: Scope, memory_ids: Sequence[str], at: datetime) -> list[str]:
        """Retract those of these memories that are active and past their ``expires_at`` at ``at``, as read
        under the write lock (one a remember restored since the caller looked has a new expiry and stays);
        returns the ids that changed."""
        with self.exclusive():
            current = self._committed(memory_ids, scope)
            changing = [memory.id for memory in current.values() if memory.past_expiry(at)]
            if changing:
                self._update_rows(changing, {"status": "retracted", "replaced_by": None, "updated_at": at})
        return changing

    def _set_status(
        self,
        scope: Scope,
        memory_ids: Sequence[str],
        status: str,
        at: datetime,
        *,
        replaced_by: str | None,
        decided: bool = False,
    ) -> list[str]:
        with self.exclusive():
            current = self._committed([*memory_ids, *([replaced_by] if replaced_by else [])], scope)
            if replaced_by in current and current[replaced_by].status != "active":
                survivor = current[replaced_by]
                if not (decided and survivor.status == "superseded"):
                    return []  # never replaced by a memory that is itself no longer active
                if self._chain_reaches(scope, survivor, set(memory_ids)):
                    return []  # it would close a loop: none of them would stand
            # Only active memories leave the active set (a superseded one is not retracted over, etc.).
            changing = [i for i in memory_ids if i in current and current[i].status == "active"]
            if changing:
                self._update_rows(changing, {"status": status, "replaced_by": replaced_by, "updated_at": at})
        return changing

    def _chain_reaches(self, scope: Scope, memory: MemoryRecord, targets: set[str]) -> bool:
        """Whether ``memory``'s chain of ``replaced_by`` (as committed) reaches one of ``targets``."""
        seen = {memory.id}
        while memory.replaced_by is not None and memory.replaced_by not in seen:
            if memory.replaced_by in targets:
                return True
            seen.add(memory.replaced_by)
            found = self._committed([memory.replaced_by], scope).get(memory.replaced_by)
            if found is None:
                return False
            memory = found
        return False

    def mark_consolidated(self, memory_ids: Sequence[str], at: datetime | None) -> None:
        """Stamp these memories as examined by consolidation at ``at`` (None: not examined)."""
        if memory_ids:
            self._update_rows(list(memory_ids), {"consolidated_at": at})

    def set_version_of(self, memory_id: str, previous_id: str | None) -> None:  # None: a version of none
        version_of = pa.array([previous_id], type=pa.string())
        self._merge_update(pa.table({"id": [memory_id], "version_of": version_of}))

    def set_tags(
        self,
        memory_id: str,
        tags: Sequence[str],
        search_text: str,
        at: datetime,
        *,
        tier: tuple[ProtectionTier, datetime | None] | None = None,
    ) -> None:
        """Give a memory these tags, with the search text that indexes them (a memory that took others'
        place keeps their tags: ``writing.inheritance.Inheritance.inherit``), and with ``tier`` this
        protection tier and expiry (an identical memory stated again: ``WriteService.take_restated``)."""
        values: dict[str, Any] = {"tags": list(tags), "search_text": search_text, "updated_at": at}
        if tier is not None:
            values |= {"protection_tier": tier[0], "expires_at": tier[1]}
        if tags:  # an UPDATE found by row id, not a merge that joins the whole table on id (4x slower)
            self._update_rows([memory_id], values, texts={memory_id: search_text})
        else:  # (LanceDB cannot write an empty list as an UPDATE's literal)
            self._merge_update(pa.Table.from_pylist([{"id": memory_id, **values}]))

    def replaced_by(self, scope: Scope, memory_ids: Sequence[str]) -> list[MemoryRecord]:
        """The memories of ``scope`` that these memories replaced (their ``replaced_by``), as committed: a
        scan of the table (no index covers the column), for the recovery of an unfinished write only."""
        if not memory_ids:
            return []
        condition = filters.all_of(filters.scope_is(scope), filters.one_of("replaced_by", list(memory_ids)))
        return [
            memory_from_row(row)
            for row in self._select(self._memories, condition, MEMORY_COLUMNS, limit=None)
        ]

    def unconsolidated(self, scope: Scope, limit: int) -> list[MemoryRecord]:
        """Active memories the consolidation sweep has not examined yet, oldest first."""
        condition = filters.all_of(filters.scope_is(scope), filters.equals("status", "active"))
        rows = self._select(self._memories, condition, ["id", "created_at", "consolidated_at"], limit=None)
        pending = sorted((row["created_at"], row["id"]) for row in rows if row["consolidated_at"] is None)
        found = self.get_memories([memory_id for _, memory_id in pending[:limit]], scope)
        return sorted(found.values(), key=lambda record: (record.created_at, record.id))

    def expired(self, now: datetime) -> list[MemoryRecord]:
        """Active memories whose ``expires_at`` has passed (the ephemeral tier's, or one given), in every
        scope."""
        condition = filters.all_of(
            filters.equals("status", "active"), filters.at_or_before("expires_at", now)
        )
        rows = self._select(self._memories, condition, MEMORY_COLUMNS, limit=None)
        return [memory for memory in map(memory_from_row, rows) if memory.past_expiry(now)]

    # ------------------------------------------------------------------ episodes

    def get_episodes(self, reach: Reach, episode_ids: Sequence[str]) -> dict[str, EpisodeRecord]:
        return self._by_id(reach, episode_ids, self._episodes_in)

    def _episodes_in(self, scope: Scope, episode_ids: list[str]) -> dict[str, EpisodeRecord]:
        if not episode_ids:
            return {}
        with self._cache.reading(scope) as copy:
            if copy is None:
                return self._read_episodes(scope, list(episode_ids))
            fresh, stale = copy.episodes_for(episode_ids)
            if stale:
                # Other episodes the copy holds stale, up to a bound, in the same read: after another
                # process's bulk write each recall would otherwise read only the few episodes it shows,
                # one LanceDB read (7 ms) a recall until every episode was read once.
                stale = copy.stale_marks(STALE_EPISODES_READ, first=stale)
        if stale:  # read again outside the cache's lock, applied under it
            read = self._read_episodes(scope, list(stale))
            with self._cache.updating(scope) as copy:
                if copy is not None:
                    copy.refresh_episodes(stale, read)
            fresh |= {episode_id: read[episode_id] for episode_id in episode_ids if episode_id in read}
        return fresh

    def scope_episodes(self, scope: Scope) -> list[EpisodeRecord]:
        """Every episode of ``scope`` (the scope cache reads them with the scope's memories)."""
        return [
            episode_from_row(row) for row in self._select(self._episodes, filters.scope_is(scope), None, None)
        ]

    def _read_episodes(self, scope: Scope, episode_ids: list[str]) -> dict[str, EpisodeRecord]:
        condition = filters.all_of(filters.scope_is(scope), filters.one_of("id", episode_ids))
        rows = self._select(self._episodes, condition, None, limit=len(episode_ids) * 2)
        return {row["id"]: episode_from_row(row) for row in rows}

    def _record_episodes(self, records: Sequence[MemoryRecord]) -> list[EpisodeRecord]:
        """Create the episodes these new memories belong to, and title them from an episode-kind memory that
        everyone who reads the episode may read (a private memory's first line never titles an episode
        that other readers' contexts show). Returns the episodes it created, as written."""
        firsts: dict[tuple[str, str, str], MemoryRecord] = {}
        titles: dict[tuple[str, str, str], str] = {}
        for record in records:
            if record.episode_id is None:
                continue
            key = (record.org_id, record.project_id, record.episode_id)
            firsts.setdefault(key, record)
            if record.kind == "episode" and record.shared:
                titles.setdefault(key, _episode_title(record))
        if not firsts:
            return []
        existing: dict[tuple[str, str, str], str | None] = {}
        unknown: set[str] = set()  # episodes only the table can say about
        by_scope: dict[Scope, list[tuple[str, str, str]]] = {}
        for key in firsts:
            by_scope.setdefault(Scope(key[0], key[1]), []).append(key)
        for scope, keys in by_scope.items():
            with self._cache.reading(scope, build=False) as copy:
                for key in keys:
                    known = copy.episode_known(key[2]) if copy is not None else None
                    if known is None:
                        unknown.add(key[2])
                    elif known[0]:
                        existing[key] = known[1]
        episode_ids = sorted(unknown)
        for start in range(0, len(episode_ids), 1_000):
            chunk = episode_ids[start : start + 1_000]
            for row in self._select(
                self._episodes, filters.one_of("id", chunk), ["id", "org_id", "project_id", "title"], None
            ):
                existing[(row["org_id"], row["project_id"], row["id"])] = row["title"]
        # An episode begun by a private memory names no agent or session: its header is shown to readers
        # of the episode's shared memories too.
        missing = [
            {
                "id": record.episode_id,
                "org_id": record.org_id,
                "project_id": record.project_id,
                "title": titles.get(key),
                "agent_id": record.agent_id if record.shared else "",
                "session_id": record.session_id if record.shared else "",
                "started_at": record.created_at,
                "last_seen_at": record.created_at,
            }
            for key, record in firsts.items()
            if key not in existing
        ]
        self._append(self._episodes, missing)
        for key, title in titles.items():
            if key in existing and existing[key] is None:
                org_id, project_id, episode_id = key
                condition = filters.all_of(
                    filters.equals("id", episode_id), filters.scope_is(Scope(org_id, project_id))
                )
                retrying(partial(self._episodes.update, where=condition, values={"title": title}))
        return [episode_from_row(row) for row in missing]


def _episode_title(record: MemoryRecord) -> str:
    first_line = record.content.strip().splitlines()[0] if record.content.strip() else ""
    return first_line[:500]  # shown cut at a word (a trial read "pool size to 5" for 50: cut here at 120)
