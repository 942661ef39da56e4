"""The write service's side of the journal of unfinished writes (``storage.unfinished``): what a write is
about to do is written down before it is committed, and ended once all of it is in, so that a process
killed in between leaves it to the next start (``writing.recovery``). Writing an entry down is best effort:
the write goes on all the same, and only a crash before it ends would then lose it."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING

from storage.records import Scope
from storage.unfinished import OwedConsolidation, StatusChange, Unfinished, UnfinishedWrites
from writing.consolidation.report import Actor

if TYPE_CHECKING:
    from storage.store import MemoryStore

log = logging.getLogger(__name__)


class WriteJournal:
    """This process's journal of unfinished writes, as the write service keeps it. ``entries``: the file it
    writes to (shared with consolidation, ``server.state``)."""

    def __init__(self, entries: UnfinishedWrites, clock: Callable[[], datetime]) -> None:
        self.entries = entries
        self._clock = clock

    def write_down(self, entry: Unfinished, what: str) -> int | None:
        """Begin ``entry``; its number (None: not written, which is logged as ``what``)."""
        try:
            return self.entries.begin(entry)
        except Exception:
            log.warning("could not write down %s", what, exc_info=True)
            return None

    def done(self, number: int | None) -> None:
        """End the entry ``number`` (a failure is logged: the next start runs it again, which is idempotent)."""
        try:
            self.entries.end(number)
        except Exception:
            log.warning("could not write down that entry %s ran", number, exc_info=True)

    def owe(self, owed: OwedConsolidation) -> int | None:
        """Write down that these memories' consolidation is owed, before their stamped rows are committed."""
        return self.write_down(owed, f"the consolidation owed by {list(owed.memory_ids)}")

    def owe_many(self, owed: Sequence[OwedConsolidation]) -> list[int | None]:
        """``owe`` for each of a group commit's new memories, written down at once (None for each where the
        write failed, which is logged)."""
        try:
            return self.entries.begin_many(owed)
        except Exception:
            memory_ids = [memory_id for entry in owed for memory_id in entry.memory_ids]
            log.warning("could not write down the consolidation owed by %s", memory_ids, exc_info=True)
            return [None] * len(owed)

    def change(
        self,
        scope: Scope,
        memory_ids: Sequence[str],
        action: str,
        resolver: str,
        actor: Actor,
        outcome: str | None = None,
        replaces: str | None = None,
    ) -> StatusChange:
        """A change of status or tags about to begin now, on behalf of ``actor`` (``StatusChange``)."""
        return StatusChange(
            scope,
            tuple(memory_ids),
            action,
            resolver,
            actor.agent_id,
            actor.session_id,
            self._clock().isoformat(),
            outcome,
            replaces,
        )

    def begin_change(self, change: StatusChange) -> int | None:
        """Write down a change of status or tags about to be committed; its number."""
        return self.write_down(change, f"the {change.action} of {list(change.memory_ids)}")

    @contextmanager
    def changing(self, change: StatusChange) -> Iterator[None]:
        """Write down ``change``, a change of status (or of tags and tier) whose lineage event is a commit of
        its own after it, for the length of the block: a process killed between the two leaves it to the
        next start, which records what was committed (``writing.recovery``). A block that raises leaves it
        written down too: the change may be committed already (its lineage is what failed)."""
        number = self.begin_change(change)
        yield
        self.done(number)

    def close(self) -> None:
        self.entries.close()


def tags_digest(tags: Sequence[str], tier: str, expires_at: datetime | None = None) -> str:
    """A digest of a memory's tags, protection tier and expiry: what an amend's journal entry holds of them
    (a purge must be able to erase the tags themselves)."""
    parts = [tier, *tags]
    if expires_at is not None:
        parts.append("\x1e" + expires_at.isoformat())
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:32]


@contextmanager
def unmarked_on_failure(store: MemoryStore, memory_ids: Sequence[str]) -> Iterator[None]:
    """If consolidation fails after memories went in stamped as examined, take the stamp off again, so a
    retried call (or the background sweep) examines them. A process killed in between leaves them
    stamped, and their consolidation written down as owed: the next start does it
    (``WriteService.recover_unfinished``)."""
    try:
        yield
    except BaseException:
        if memory_ids:
            try:
                store.mark_consolidated(memory_ids, None)
            except Exception:
                log.warning("could not clear the consolidation stamp of %s", memory_ids, exc_info=True)
        raise
