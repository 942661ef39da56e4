"""What a search of a scope keeps besides activity (kinds, tags, time, readers, memories held by a commit on
its way), for LanceDB's filter and for a scope copy's search alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from storage.records import Audience, MemoryRecord, Reach, TimeWindow, View, Viewer


def tag_filter(tags: Sequence[str] | None, every: bool = False) -> Callable[[MemoryRecord], bool] | None:
    """What keeps memories with any of ``tags`` (all: ``every``), in any case; None for no tags."""
    if not tags:
        return None
    wanted = {tag.lower() for tag in tags}  # in any case, as ``storage.filters.any_tag`` reads them
    if every:
        return lambda record: wanted.issubset(tag.lower() for tag in record.tags)
    return lambda record: not wanted.isdisjoint(tag.lower() for tag in record.tags)


def _kept(
    tags: Sequence[str] | None, window: TimeWindow | None, all_tags: bool = False
) -> Callable[[MemoryRecord], bool] | None:
    """What a scope copy's search keeps: memories with any of ``tags`` (all: ``all_tags``), in ``window``."""
    tagged = tag_filter(tags, all_tags)
    if window is None or (window.since is None and window.until is None):
        return tagged
    if tagged is None:
        return lambda record: window.holds(record.created_at)
    return lambda record: tagged(record) and window.holds(record.created_at)


@dataclass(frozen=True)
class SearchFilter:
    """What a read keeps of a scope besides its activity: memories of these kinds, with any of these tags
    (all of them with ``all_tags``), of ``window``'s time, that ``viewer`` may see, of ``audience``, and
    none of the ``held`` ones (superseded by a commit still on its way, ``storage.pending``)."""

    kinds: Sequence[str] | None = None
    tags: Sequence[str] | None = None
    window: TimeWindow | None = None
    all_tags: bool = False
    view: View | None = None  # whose reading it is (None: a plain scope's read, which keeps every memory)
    held: frozenset[str] = frozenset()
    stored: bool = False  # every memory whose text is stored (a purge's look), not the active ones only

    @classmethod
    def of(
        cls,
        reach: Reach,
        kinds: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        window: TimeWindow | None = None,
        all_tags: bool = False,
        *,
        held: Iterable[str] = (),
        stored: bool = False,
    ) -> SearchFilter:
        view = reach if isinstance(reach, View) else None
        return cls(kinds, tags, window, all_tags, view, frozenset(held), stored)

    @property
    def viewer(self) -> Viewer | None:
        return self.view.viewer if self.view is not None else None

    @property
    def audience(self) -> Audience | None:
        return self.view.audience if self.view is not None else None

    def sees(self, record: MemoryRecord) -> bool:
        """Whether the reader may see ``record`` and it is not held (the rest of the filter is the caller's
        to apply)."""
        return record.id not in self.held and (self.view is None or self.view.sees(record))

    def for_copy(self) -> dict[str, Any]:
        """The arguments of a scope copy's search."""
        return {
            "kinds": self.kinds,
            "keep": _kept(self.tags, self.window, self.all_tags),
            "viewer": self.viewer,
            "audience": self.audience,
            "exclude": self.held,
            "stored": self.stored,
        }
