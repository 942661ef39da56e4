"""Where each memory's row is: its stable row id in the memories table, so that a status change (a
supersede, a retraction, a consolidation stamp) finds its rows without scanning the table.

An UPDATE filtered on ``id`` reads every column of every fragment its index does not cover yet: between
two maintenance rounds, one more fragment per write. Measured with LanceDB 0.40 (a 1,000-row table and
150 single-row appends, each followed by an update): by ``id`` 31.7 ms, by ``_rowid`` 7.7 ms; in
process, a restated memory's supersede spent 33-46 ms of its 84-124 ms in that UPDATE.

The memories table has stable row ids (migration 4): an update keeps a row's id, compaction keeps it,
and no memory row is ever deleted (a purge blanks it), so a row id, once known, stays right. Row ids are
learned from the rows the scope copies read (``_rowid`` beside each row) and from the table's own
appends: LanceDB numbers appended rows consecutively from the table's next row id, which is its row count
when no row was ever deleted. An update by row id is always also filtered on ``id``: a wrong row id
changes no row and the update counts fewer rows than asked; the store then forgets the row ids of that
update's memories and updates them all again by id (``StoreTables._update_rows``). So what is kept here
decides only how fast an update is, never which rows it changes.

At most ``capacity`` row ids are kept, the least recently used going first: the store passes its scope
copies' budget, so the map holds about as many memories as the copies can (143 bytes an entry, measured:
57 MB at the default 400,000, beside the copies' 7 KB a memory).

Where an append's rows start is the table's row count before it. ``RowCount`` follows that count through
this process's own commits, so an append learns it without asking the table (``count_rows``: a round
trip into LanceDB made under the write lock, which under load cost as much as half an append:
``benchmarks/lancedb_round_trips.py``). It knows the count only while every commit since it was counted
is one of this process's, version after version; a commit it did not see (another process's write, an
import, a compaction) leaves a gap in the versions, and the next append counts the table again, as after
an update that changed no row (it proves nothing) or found a row id wrong (the count may be).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence


class RowIds:
    """Memory id -> stable row id, for the memories this process read or appended most recently."""

    def __init__(self, capacity: int) -> None:
        self._capacity = max(0, capacity)
        self._lock = threading.Lock()
        self._of: OrderedDict[str, int] = OrderedDict()

    def learn(self, row_ids: Mapping[str, int]) -> None:
        if not self._capacity:
            return
        with self._lock:
            for memory_id, row_id in row_ids.items():
                self._of[memory_id] = row_id
                self._of.move_to_end(memory_id)
            while len(self._of) > self._capacity:
                self._of.popitem(last=False)

    def appended(self, memory_ids: Sequence[str], first: int) -> None:
        """``memory_ids`` were appended in this order by one commit, numbered from ``first``."""
        self.learn({memory_id: first + offset for offset, memory_id in enumerate(memory_ids)})

    def known(self, memory_ids: Iterable[str]) -> dict[str, int]:
        """The row ids known for ``memory_ids`` (those not known are left out)."""
        found = {}
        with self._lock:
            for memory_id in memory_ids:
                row_id = self._of.get(memory_id)
                if row_id is not None:
                    self._of.move_to_end(memory_id)
                    found[memory_id] = row_id
        return found

    def forget(self, memory_ids: Iterable[str]) -> None:
        with self._lock:
            for memory_id in memory_ids:
                self._of.pop(memory_id, None)

    def __len__(self) -> int:
        return len(self._of)


class RowCount:
    """The memories table's row count at the version this process's last commit made, while known."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at: tuple[int, int] | None = None  # (version, rows at that version)

    def appended(self, version: int, rows: int) -> int | None:
        """This process appended ``rows`` rows in a commit that made ``version``: the table's row count
        before it when known (the count was known at ``version - 1``, the commit's parent), else None
        (the caller counts the table, ``counted``)."""
        with self._lock:
            at = self._at
            if at is None or at[0] != version - 1:
                self._at = None
                return None
            self._at = (version, at[1] + rows)
            return at[1]

    def changed(self, version: int, rows: int) -> None:
        """This process made ``version`` with a commit that changed ``rows`` rows and added none (an UPDATE,
        a merge of existing rows). One that changed none proves nothing: the count is forgotten."""
        with self._lock:
            at = self._at
            self._at = (version, at[1]) if rows and at is not None and at[0] == version - 1 else None

    def forget(self) -> None:
        """The count may be wrong (an update found a row id wrong) or a commit's effect is not known: the
        next append counts the table."""
        with self._lock:
            self._at = None

    def counted(self, version: int, rows: int) -> None:
        """The table held ``rows`` rows at ``version`` (counted at that version)."""
        with self._lock:
            self._at = (version, rows)
