"""Reading a table's version manifests for the data files they name (the search for left files)."""

from __future__ import annotations

from pathlib import Path


class Manifests:
    """A table's version manifests, read newest first and only as far as needed: a data file some
    version holds is named in its manifest, and most are named in the newest."""

    def __init__(
        self, table: Path, *, newest: int | None = None, leaving_out: frozenset[str] = frozenset()
    ) -> None:
        """``newest``: read only that many of the newest manifests (what most files are named in).
        ``leaving_out``: the names of manifests not to read (those a listing found earlier)."""
        found: list[tuple[float, Path]] = []
        for path in (table / "_versions").glob("*.manifest"):
            if path.name in leaving_out:
                continue
            try:
                found.append((path.stat().st_mtime, path))
            except FileNotFoundError:  # a version the clean-up dropped meanwhile
                continue
        self._unread = [path for _, path in sorted(found)]  # newest last: popped first
        if newest is not None:
            self._unread = self._unread[len(self._unread) - newest :]
        self._read: list[bytes] = []

    def name(self, file_name: str) -> bool:
        needle = file_name.encode()
        if any(needle in manifest for manifest in self._read):
            return True
        while self._unread:
            try:
                manifest = self._unread.pop().read_bytes()
            except FileNotFoundError:
                continue
            self._read.append(manifest)
            if needle in manifest:
                return True
        return False
