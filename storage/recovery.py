"""Starting again after a crash of the machine cut a commit off: set aside a broken newest manifest.

A LanceDB table keeps one manifest per version in ``<table>.lance/_versions/``. Lance writes each one to
a temporary file and renames it into place, so other processes never see a partial manifest, but local
writes are not fsynced: after a power cut or a kernel panic the rename can survive while the data did
not, leaving the newest manifest empty or cut short. Lance then refuses to open the table ("Invalid
range 0..0 for object of size 0 bytes", "file size is too small"), and the server would not start.

Nothing brings that write back (its manifest is gone, and without an fsync its data files may be too),
so the store goes back to the last manifest that is whole: ``recover_store`` moves the broken newest ones
(never deletes them) to ``<store>/.memoria-quarantine/<table>/`` and says so in a WARNING. Lance finds a
table's newest version by listing ``_versions`` (the ``latest_version_hint.json`` is only a hint; a
stale or broken one is ignored), so once they are out of the folder the table opens on the version
before; the hint, when it names a version that is gone, is moved aside too and Lance writes a new one
with the next commit. Only local stores are checked: an object store writes a manifest in one PUT,
whole or not at all, and the other processes sharing it are not ours to move files under.

A manifest is whole when it ends with Lance's footer (the manifest block's offset, the format version
and the magic ``LANC``) and the manifest block it points at lies within the file. This is checked from
the bytes, never by asking Lance to open the table: an open can fail for other reasons (a permission,
a missing data file), and going back a version then would drop acknowledged writes.
"""

from __future__ import annotations

import json
import logging
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

QUARANTINE_DIR = ".memoria-quarantine"
VERSIONS_DIR = "_versions"
VERSION_HINT = "latest_version_hint.json"
MANIFEST_SUFFIX = ".manifest"
FOOTER = struct.Struct("<QHH4s")  # manifest block offset, major and minor format version, magic
MAGIC = b"LANC"
BLOCK_LENGTH = struct.Struct("<I")  # the manifest block starts with its length
U64_MAX = 2**64 - 1
V2_NAME_DIGITS = 20  # V2 names: u64::MAX - version, zero-padded to 20 digits (the newest sorts first)


class UnrecoverableTable(RuntimeError):
    """Every manifest of a table is broken: there is no version to go back to."""


@dataclass(frozen=True)
class Recovery:
    """What ``recover_table`` set aside: the broken versions (newest first), the version the table
    now opens on, and where the files went."""

    table: str
    broken: tuple[tuple[int, str], ...]  # (version, what was wrong with its manifest)
    restored_version: int
    moved_to: Path


def recover_store(store_path: Path) -> list[Recovery]:
    """Check every table of the local store at ``store_path`` (each ``*.lance`` folder, so tables of
    any schema version) and set aside broken newest manifests; returns what was recovered."""
    if not store_path.is_dir():
        return []
    recovered = []
    for table_dir in sorted(store_path.glob("*.lance")):
        found = recover_table(table_dir, store_path / QUARANTINE_DIR)
        if found is not None:
            recovered.append(found)
    return recovered


def recover_table(table_dir: Path, quarantine_root: Path) -> Recovery | None:
    """Move this table's broken newest manifests (and a version hint that names another version than the
    one it goes back to) to ``quarantine_root/<table>/``; None when the newest manifest is whole (then
    nothing is touched)."""
    versions_dir = table_dir / VERSIONS_DIR
    manifests = sorted(_manifests(versions_dir), reverse=True)  # newest first
    broken: list[tuple[int, Path, str]] = []
    restored: int | None = None
    for version, path in manifests:
        problem = manifest_problem(path)
        if problem is None:
            restored = version
            break
        broken.append((version, path, problem))
    if not broken:
        return None
    table = table_dir.name.removesuffix(".lance")
    if restored is None:
        raise UnrecoverableTable(
            f"every manifest of table {table!r} in {versions_dir} is broken ({broken[-1][2]} for version "
            f"{broken[-1][0]}), so there is no earlier version to start on. Restore the store folder from "
            "a backup, or move the table folder aside to start it empty."
        )
    target = quarantine_root / table
    target.mkdir(parents=True, exist_ok=True)
    moved = [_move_aside(path, target) for _, path, _ in broken]
    hint = versions_dir / VERSION_HINT
    if hint.exists() and _hinted_version(hint) != restored:
        moved.append(_move_aside(hint, target))
    recovery = Recovery(
        table=table,
        broken=tuple((version, problem) for version, _, problem in broken),
        restored_version=restored,
        moved_to=target,
    )
    log.warning(describe(recovery, moved))
    return recovery


def describe(recovery: Recovery, moved: list[Path]) -> str:
    """The WARNING a recovery logs: which table, which versions and why, where it starts, where the
    files went."""
    broken = recovery.broken
    if len(broken) == 1:
        what = f"the newest manifest (version {broken[0][0]}) was {broken[0][1]} (a write cut off by a crash)"
        lost = "the write it recorded"
    else:
        details = "; ".join(f"version {version}: {problem}" for version, problem in broken)
        what = f"the newest {len(broken)} manifests were broken ({details}; writes cut off by a crash)"
        lost = "the writes they recorded"
    return (
        f"{recovery.table}: {what}; starting on version {recovery.restored_version}, without {lost}; "
        f"moved {', '.join(path.name for path in moved)} to {recovery.moved_to}"
    )


def manifest_problem(path: Path) -> str | None:
    """What makes the manifest at ``path`` unreadable (None: it is whole). Reads only the footer and
    the block length it points at: a big table's manifest can be megabytes."""
    try:
        with path.open("rb") as manifest:
            size = manifest.seek(0, 2)
            if size == 0:
                return "empty"
            if size < FOOTER.size:
                return f"cut short ({size} bytes)"
            manifest.seek(size - FOOTER.size)
            offset, _major, _minor, magic = FOOTER.unpack(manifest.read(FOOTER.size))
            if magic != MAGIC:
                return f"cut short or overwritten ({size} bytes, no manifest footer at its end)"
            body_end = size - FOOTER.size
            if offset + BLOCK_LENGTH.size > body_end:
                return f"cut short ({size} bytes; its footer points past the end)"
            manifest.seek(offset)
            (length,) = BLOCK_LENGTH.unpack(manifest.read(BLOCK_LENGTH.size))
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if offset + BLOCK_LENGTH.size + length > body_end:
        return f"cut short ({size} bytes; its manifest block runs past the end)"
    return None


def version_of(file_name: str) -> int | None:
    """The version a manifest file name stands for, in either of Lance's naming schemes (V2: 20 digits,
    ``u64::MAX - version``; V1: the version itself); None for any other file."""
    stem = file_name.removesuffix(MANIFEST_SUFFIX)
    if stem == file_name or not stem.isdigit():
        return None
    number = int(stem)
    return U64_MAX - number if len(stem) == V2_NAME_DIGITS else number


def _manifests(versions_dir: Path) -> list[tuple[int, Path]]:
    if not versions_dir.is_dir():
        return []
    found = []
    for path in versions_dir.iterdir():
        version = version_of(path.name)
        if version is not None and path.is_file():
            found.append((version, path))
    return found


def _hinted_version(hint: Path) -> int | None:
    """The version ``latest_version_hint.json`` names ({"version": N}); None when it names none."""
    try:
        value = json.loads(hint.read_text())
    except (OSError, ValueError):
        return None
    version = value.get("version") if isinstance(value, dict) else None
    return version if isinstance(version, int) else None


def _move_aside(path: Path, folder: Path) -> Path:
    """Move ``path`` into ``folder`` under a name not taken yet (a second crash may break the same
    version number again); returns where it went."""
    target = folder / path.name
    copy = 2
    while target.exists():
        target = folder / f"{path.name}.{copy}"
        copy += 1
    shutil.move(str(path), str(target))
    return target
