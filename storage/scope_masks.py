"""The masks a scope copy's searches start from (``storage.scope_copy``), kept between searches until a row
of the copy changes: the rows a reader may read, each valid at any time between the same two expiries as
the time it was made for, and the rows with a vector of an embedder.

Why keep them: each NumPy operation over more than 500 values lets the interpreter go to another thread
and, on a busy server, waits for its turn back (up to the switch interval, 5 ms, per busy thread). Masks
rebuilt for every search made about twenty such waits a scope for each recall, for rows unchanged since
the recall before (``benchmarks.load``, ``benchmarks.recall_latency --beside``)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

# A copy keeps the masks of a few readers at a time: viewers come and go.
MAX_MASKS = 16


class KeptMasks:
    """Masks by key, each with the times [at, until) it holds for; read-only, so that no caller changes a
    mask every later search reads (a caller narrows it into a new one)."""

    def __init__(self) -> None:
        self._kept: dict[Hashable, tuple[float, float, np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, key: Hashable, at: float = 0.0) -> np.ndarray | None:
        """The mask kept under ``key`` if it holds at time ``at`` (epoch seconds), else None."""
        kept = self._kept.get(key)
        return kept[2] if kept is not None and kept[0] <= at < kept[1] else None

    def keep(self, key: Hashable, mask: np.ndarray, at: float = -np.inf, until: float = np.inf) -> np.ndarray:
        """Keep ``mask`` under ``key`` for the times [``at``, ``until``); returns it, read-only."""
        mask.flags.writeable = False
        if len(self._kept) >= MAX_MASKS:
            self._kept.clear()
        self._kept[key] = (at, until, mask)
        return mask

    def clear(self) -> None:
        """A row changed: every mask is stale."""
        self._kept.clear()


def one_of(values: np.ndarray, codes: Sequence[int]) -> np.ndarray:
    """``values`` equal to any of ``codes``, a handful at most (a viewer's audiences, a search's kinds):
    one comparison each, several times faster than ``np.isin`` on so few."""
    mask = np.zeros(len(values), dtype=bool)
    for code in codes:
        mask |= values == code
    return mask
