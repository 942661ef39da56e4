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
