"""Where each memory's row is: its stable row id in the memories table, so that a status change (a
supersede, a retraction, a consolidation stamp) finds its rows without scanning the table.

An UPDATE filtered on ``id`` reads every column of every fragment its index does not cover yet: between
two maintenance rounds, one more fragment per write. Measured with LanceDB 0.40 (a 1,000-row table and
150 single-row appends, each followed by an update): by ``id`` 31.7 ms, by ``_rowid`` 7.7 ms; in the
server a restated memory's supersede cost 33 ms of its 84 ms write that way.

The memories table has stable row ids (migration 4): an update keeps a row's id, compaction keeps it,
and no memory row is ever deleted (a purge blanks it), so a row id, once known, stays right. Row ids are
learned from the rows the scope copies read (``_rowid`` beside each row) and from the table's own
appends: LanceDB numbers appended rows consecutively from the table's next row id, which is its row count
when no row was ever deleted. An update by row id is always also filtered on ``id``: a wrong row id
changes no row, the update reports fewer rows than asked, and the store updates those rows by id and
forgets what it knew of them (``StoreTables._update_rows``). So what is kept here only decides how fast
an update is, never which rows it changes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence


class RowIds:
    """Memory id -> stable row id, for the memories this process has read or appended. At about 100
    bytes an entry: 10 MB at 100,000 memories."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._of: dict[str, int] = {}

    def learn(self, row_ids: Mapping[str, int]) -> None:
        with self._lock:
            self._of.update(row_ids)

    def appended(self, memory_ids: Sequence[str], first: int) -> None:
        """``memory_ids`` were appended in this order by one commit, numbered from ``first``."""
        self.learn({memory_id: first + offset for offset, memory_id in enumerate(memory_ids)})

    def known(self, memory_ids: Iterable[str]) -> dict[str, int]:
        """The row ids known for ``memory_ids`` (those not known are left out)."""
        with self._lock:
            return {memory_id: self._of[memory_id] for memory_id in memory_ids if memory_id in self._of}

    def forget(self, memory_ids: Iterable[str]) -> None:
        with self._lock:
            for memory_id in memory_ids:
                self._of.pop(memory_id, None)

    def __len__(self) -> int:
        return len(self._of)
