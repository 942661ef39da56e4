"""A newest manifest a crash of the machine left empty or cut short: the store opens on the version before,
says so, and keeps the broken file aside. (A SIGKILL of the process cannot do this - Lance renames a
manifest into place whole - so these tests break the file the way a power cut does.)"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from storage import recovery, schema
from storage.records import NewMemory, Scope
from storage.recovery import QUARANTINE_DIR, VERSION_HINT, manifest_problem, version_of
from storage.store import MemoryStore, StoreError
from tests.records import memory_record

DIM = 4
SCOPE = Scope("o", "p")


def remembered(store: MemoryStore, *contents: str) -> None:
    """One commit per memory, so each is its own table version."""
    for content in contents:
        record = memory_record(content, org_id=SCOPE.org_id, project_id=SCOPE.project_id, content=content)
        store.insert_memory(NewMemory(record, tuple(np.ones(DIM) / 2), content))


def stored_ids(db: Path) -> list[str]:
    with MemoryStore.open(str(db), vector_dim=DIM) as store:
        return sorted(store.get_memories(["a", "b", "c", "d"], SCOPE))


def manifests(db: Path, table: str = schema.MEMORIES) -> dict[int, Path]:
    """Version -> manifest file of ``table``."""
    folder = db / f"{table}.lance" / "_versions"
    return {version_of(p.name): p for p in folder.iterdir() if version_of(p.name) is not None}


def newest(db: Path, table: str = schema.MEMORIES) -> tuple[int, Path]:
    return max(manifests(db, table).items())


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A store whose memories table's newest version holds a, b and c; the one before, a and b."""
    path = tmp_path / "db"
    with MemoryStore.open(str(path), vector_dim=DIM) as store:
        remembered(store, "a", "b", "c")
    return path


def cut(path: Path, keep: int) -> bytes:
    """Truncate the file to its first ``keep`` bytes; returns what it held."""
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    return data


BREAKAGES = {
    "empty": lambda data: b"",
    "half": lambda data: data[: len(data) // 2],
    "without its last byte": lambda data: data[:-1],
    "zero-filled at full length": lambda data: bytes(len(data)),
    "a few bytes": lambda data: data[:7],
}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_broken_newest_manifest_is_detected(db, breakage):
    _, path = newest(db)
    path.write_bytes(BREAKAGES[breakage](path.read_bytes()))
    assert manifest_problem(path) is not None


def test_every_manifest_a_real_store_writes_reads_as_whole(db):
    checked = 0
    for table_dir in db.glob("*.lance"):
        for path in manifests(db, table_dir.name.removesuffix(".lance")).values():
            assert manifest_problem(path) is None, path
            checked += 1
    assert checked >= 10  # every table has at least its creation


@pytest.mark.parametrize("breakage", ["empty", "half"])
def test_the_store_opens_on_the_version_before_a_broken_newest_manifest(db, breakage, caplog):
    version, path = newest(db)
    path.write_bytes(BREAKAGES[breakage](path.read_bytes()))
    with (
        caplog.at_level(logging.WARNING, logger="storage.recovery"),
        MemoryStore.open(str(db), vector_dim=DIM) as store,
    ):
        assert store.table_version() == version - 1
        assert sorted(store.get_memories(["a", "b", "c"], SCOPE)) == ["a", "b"]  # c was the cut write
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = warning.getMessage()
    assert message.startswith(f"{schema.MEMORIES}: the newest manifest (version {version}) was ")
    assert f"starting on version {version - 1}" in message
    assert str(db / QUARANTINE_DIR / schema.MEMORIES) in message


def test_the_broken_manifest_is_kept_aside_not_deleted_with_the_version_hint_that_named_it(db):
    version, path = newest(db)
    hint = path.parent / VERSION_HINT
    assert hint.read_text() == f'{{"version":{version}}}'
    half = cut(path, 100)[:100]
    MemoryStore.open(str(db), vector_dim=DIM).close()
    aside = db / QUARANTINE_DIR / schema.MEMORIES
    assert (aside / path.name).read_bytes() == half
    assert (aside / VERSION_HINT).read_text() == f'{{"version":{version}}}'
    assert not path.exists() and not hint.exists()


def test_writes_go_on_after_a_recovery_and_a_second_crash_on_the_same_version_keeps_both_files(db):
    version, path = newest(db)
    cut(path, 0)
    with MemoryStore.open(str(db), vector_dim=DIM) as store:
        remembered(store, "d")  # commits the version number the lost write had
    assert newest(db)[0] == version
    assert stored_ids(db) == ["a", "b", "d"]
    cut(newest(db)[1], 10)
    assert stored_ids(db) == ["a", "b"]
    aside = db / QUARANTINE_DIR / schema.MEMORIES
    assert sorted(p.name for p in aside.iterdir() if p.name.startswith(path.name)) == [
        path.name,
        f"{path.name}.2",
    ]


def test_several_broken_newest_manifests_are_all_set_aside(db, caplog):
    version, _ = newest(db)
    found = manifests(db)
    cut(found[version], 0)
    cut(found[version - 1], 50)
    with caplog.at_level(logging.WARNING, logger="storage.recovery"):
        assert stored_ids(db) == ["a"]
    [message] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"the newest 2 manifests were broken (version {version}: empty; version {version - 1}: cut" in (
        message
    )
    assert f"starting on version {version - 2}" in message


def test_every_table_is_checked(db, caplog):
    version, path = newest(db, schema.OUTCOMES)
    cut(path, 0)
    with caplog.at_level(logging.WARNING, logger="storage.recovery"):
        MemoryStore.open(str(db), vector_dim=DIM).close()
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [schema.OUTCOMES]
    assert newest(db, schema.OUTCOMES)[0] == version - 1


def test_a_healthy_store_is_left_untouched(db, caplog):
    before = {p: p.read_bytes() for p in db.rglob("_versions/*")}
    with caplog.at_level(logging.WARNING, logger="storage.recovery"):
        assert stored_ids(db) == ["a", "b", "c"]
    assert caplog.records == []
    assert not (db / QUARANTINE_DIR).exists()
    assert {p: p.read_bytes() for p in before} == before


def test_a_table_with_no_whole_manifest_left_is_refused_with_advice_and_nothing_is_moved(db):
    for path in manifests(db, schema.META).values():
        cut(path, 0)
    with pytest.raises(StoreError, match=r"every manifest of table 'meta'.*Restore the store folder"):
        MemoryStore.open(str(db), vector_dim=DIM)
    assert all(p.exists() for p in manifests(db, schema.META).values())
    assert not (db / QUARANTINE_DIR).exists()


def test_a_broken_older_manifest_is_not_recovery_s_business(db):
    version, _ = newest(db)
    cut(manifests(db)[version - 1], 0)  # only time travel to that version would notice
    assert recovery.recover_store(db) == []


def test_manifest_names_of_both_lance_naming_schemes_give_their_version():
    assert version_of("18446744073709551603.manifest") == 12  # V2: u64::MAX - 12, 20 digits
    assert version_of("12.manifest") == 12  # V1
    assert version_of(VERSION_HINT) is None
    assert version_of(".tmpAbC123") is None  # a commit's temporary file
