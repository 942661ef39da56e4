"""Write generations: a version read for real stays current while no write sequence ended since, and
readers ask the table again as soon as one did, whichever process ran it."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from storage.generations import REPORTS, WRITES, Generations, VersionWatch, still_current
from storage.records import NewMemory, Scope
from storage.store import MemoryStore
from tests.records import memory_record

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
SCOPE = Scope("o", "p")
DIM = 4


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Table:
    """A table's version, counting how often it is read."""

    def __init__(self) -> None:
        self.version = 1
        self.reads = 0

    def check(self) -> int:
        self.reads += 1
        return self.version


def new(memory_id: str, content: str) -> NewMemory:
    record = memory_record(memory_id, content=content, content_hash=memory_id, created_at=NOW)
    return NewMemory(record=record, vector=np.ones(DIM, dtype=np.float32), search_text=content)


@pytest.mark.parametrize(
    ("read_before", "now", "current"),
    [
        (4, 4, True),  # nothing began or ended
        (4, 5, True),  # a sequence began and has not ended: nothing it wrote is acknowledged yet
        (4, 6, False),  # a sequence ended
        (5, 5, True),  # the sequence under way then is still under way
        (5, 6, False),  # ... and has ended now
        (5, 7, False),  # its holder died and the next holder began: the count moved by two
    ],
)
def test_a_version_stays_current_until_a_sequence_ends(read_before, now, current):
    assert still_current(read_before, now) is current


def test_a_sequence_counts_odd_while_under_way_and_a_dead_holder_makes_the_next_count_two(tmp_path):
    generations = Generations(tmp_path / "generations")
    generations.begin(WRITES)
    assert (generations.read(WRITES), generations.read(REPORTS)) == (1, 0)
    generations.end(WRITES)
    assert generations.read(WRITES) == 2
    generations.begin(WRITES)  # this holder dies inside its sequence: it never ends it
    generations.begin(WRITES)
    assert generations.read(WRITES) == 5
    generations.end(WRITES)
    assert generations.read(WRITES) == 6


def test_every_opening_of_the_file_sees_the_same_counts(tmp_path):
    """Each process maps the file on its own: a count made through one mapping is read through another."""
    first, second = Generations(tmp_path / "generations"), Generations(tmp_path / "generations")
    first.begin(REPORTS)
    first.end(REPORTS)
    assert second.read(REPORTS) == 2
    second.begin(REPORTS)
    assert first.read(REPORTS) == 3


def test_a_reader_asks_the_table_again_only_after_a_sequence_ended(tmp_path):
    generations, table, clock = Generations(tmp_path / "generations"), Table(), Clock()
    watch = VersionWatch(table.check, generations, WRITES, lambda: False, clock=clock)
    assert [watch.current() for _ in range(3)] == [1, 1, 1]
    assert table.reads == 1
    generations.begin(WRITES)
    table.version = 2  # committed inside the sequence: not acknowledged before it ends
    assert watch.current() == 1 and table.reads == 1
    generations.end(WRITES)
    assert watch.current() == 2 and table.reads == 2
    assert watch.current() == 2 and table.reads == 2


def test_the_holder_of_the_lock_always_reads_the_table(tmp_path):
    """A sequence must see its own commits before it ends."""
    generations, table = Generations(tmp_path / "generations"), Table()
    holding = [False]
    watch = VersionWatch(table.check, generations, WRITES, lambda: holding[0], clock=Clock())
    watch.current()
    holding[0] = True
    generations.begin(WRITES)
    table.version = 2
    assert watch.current() == 2 and table.reads == 2


def test_a_version_is_trusted_for_a_second_at_most(tmp_path):
    """A writer of an earlier release counts no generation: its writes show within a second."""
    generations, table, clock = Generations(tmp_path / "generations"), Table(), Clock()
    watch = VersionWatch(table.check, generations, WRITES, lambda: False, clock=clock)
    watch.current()
    table.version = 2
    clock.now += 0.9
    assert watch.current() == 1
    clock.now += 0.2
    assert watch.current() == 2 and table.reads == 2


def test_without_generations_every_read_asks_the_table():
    table = Table()
    watch = VersionWatch(table.check, None, WRITES, lambda: False)
    watch.current()
    watch.current()
    assert table.reads == 2


def test_a_memory_another_process_remembered_is_read_at_once_and_idle_reads_check_nothing(tmp_path):
    """Two stores on one folder stand for two processes: each maps the generations file and takes the
    write lock's file on its own."""
    uri = str(tmp_path / "db")
    reader, writer = MemoryStore.open(uri, vector_dim=DIM), MemoryStore.open(uri, vector_dim=DIM)
    try:
        reader.insert_memory(new("m1", "the staging database resets on Sundays"))
        assert reader.get_memory("m1", SCOPE) is not None
        checks = reader._memories_version.checks
        for _ in range(5):
            reader.get_memory("m1", SCOPE)
        assert reader._memories_version.checks == checks  # nothing ended: no manifest read
        writer.insert_memory(new("m2", "billing deploys go out on Tuesdays"))
        found = reader.get_memory("m2", SCOPE)
        assert found is not None and found.content == "billing deploys go out on Tuesdays"
        assert reader._memories_version.checks == checks + 1
    finally:
        reader.close()
        writer.close()


def test_a_local_store_reads_versions_from_the_manifests_without_asking_lancedb(tmp_path, monkeypatch):
    """On a folder, the store's watch reads a version for real by listing the table's manifests: the
    version is the table's own, and another process's commit shows at once."""
    from lancedb.table import LanceTable

    uri = str(tmp_path / "db")
    reader, writer = MemoryStore.open(uri, vector_dim=DIM), MemoryStore.open(uri, vector_dim=DIM)
    try:
        writer.insert_memory(new("m1", "the staging database resets on Sundays"))
        expected = reader.table_version()
        with monkeypatch.context() as patched:

            def refused(_: object) -> int:
                raise AssertionError("the version was asked of LanceDB")

            patched.setattr(LanceTable, "version", property(refused))
            assert reader.latest_version() == expected
        writer.insert_memory(new("m2", "billing deploys go out on Tuesdays"))
        expected = reader.table_version()
        with monkeypatch.context() as patched:
            patched.setattr(LanceTable, "version", property(refused))
            assert reader.latest_version() == expected == reader._memories_version.current()
    finally:
        reader.close()
        writer.close()


def test_a_table_whose_folder_shows_no_manifest_is_asked_its_version(tmp_path):
    store = MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM)

    class Elsewhere:  # a table whose folder this store cannot list
        name = "not-in-this-folder"
        version = 7

    try:
        assert store._newest_version_of(Elsewhere())() == 7
    finally:
        store.close()


def test_readers_that_find_a_read_under_way_wait_for_it_instead_of_reading_too(tmp_path):
    """After a sequence ends, the recalls in flight need a new version: one read of the table serves them."""
    import threading

    generations = Generations(tmp_path / "generations")
    reading, release = threading.Event(), threading.Event()
    table = Table()

    def slow_check() -> int:
        reading.set()
        release.wait(10)
        return table.check()

    watch = VersionWatch(slow_check, generations, WRITES, lambda: False)
    got: list[int] = []
    first = threading.Thread(target=lambda: got.append(watch.current()))
    first.start()
    assert reading.wait(10)
    others = [threading.Thread(target=lambda: got.append(watch.current())) for _ in range(3)]
    for thread in others:
        thread.start()
    release.set()
    for thread in [first, *others]:
        thread.join(10)
    assert got == [1, 1, 1, 1] and table.reads == 1


def test_a_reader_does_not_wait_for_a_read_that_began_before_a_sequence_ended(tmp_path):
    """A read under way that began before a sequence ended may miss its commit: a later reader reads again."""
    import threading

    generations = Generations(tmp_path / "generations")
    reading, release = threading.Event(), threading.Event()
    table = Table()

    def check() -> int:
        if threading.current_thread().name == "early":
            reading.set()
            release.wait(10)
            return 1
        return table.check()

    watch = VersionWatch(check, generations, WRITES, lambda: False)
    early = threading.Thread(target=watch.current, name="early")
    early.start()
    assert reading.wait(10)
    generations.begin(WRITES)
    table.version = 2
    generations.end(WRITES)
    assert watch.current() == 2  # did not wait for the early read (release is never set before this)
    release.set()
    early.join(10)


def test_the_holder_reads_its_own_commit_while_other_threads_trust_the_older_version(tmp_path):
    """Inside a sequence, a commit the scope copy did not apply (here: a row changed behind its back, as a
    compaction's version makes ``advance`` refuse) is read by the holder at once, even with other threads
    reading the version meanwhile."""
    import threading

    from lancedb.expr import col, lit

    uri = str(tmp_path / "db")
    store = MemoryStore.open(uri, vector_dim=DIM)
    try:
        store.insert_memory(new("m1", "the staging database resets on Sundays"))
        assert store.get_memory("m1", SCOPE).status == "active"
        with store.exclusive():
            store._memories.update(where=col("id") == lit("m1"), values={"status": "retracted"})
            other = threading.Thread(target=lambda: store.get_memory("m1", SCOPE))
            other.start()
            other.join(10)
            assert store.get_memory("m1", SCOPE).status == "retracted"
    finally:
        store.close()


def test_opening_a_store_counts_a_write_sequence_for_the_processes_already_serving(tmp_path):
    uri = str(tmp_path / "db")
    serving = MemoryStore.open(uri, vector_dim=DIM)
    try:
        before = serving._generations.read(WRITES)
        MemoryStore.open(uri, vector_dim=DIM).close()
        assert serving._generations.read(WRITES) == before + 2
    finally:
        serving.close()


def test_a_store_whose_generations_file_cannot_be_written_reads_every_version_from_the_table(
    tmp_path, caplog
):
    uri = tmp_path / "db"
    uri.mkdir()
    (uri / ".memoria-generations").mkdir()  # a path no user can open as a file, root included
    store = MemoryStore.open(str(uri), vector_dim=DIM)
    try:
        assert store._generations is None
        assert "cannot write" in caplog.text
        store.insert_memory(new("m1", "the staging database resets on Sundays"))
        checks = store._memories_version.checks
        store.get_memory("m1", SCOPE)
        store.get_memory("m1", SCOPE)
        assert store._memories_version.checks == checks + 2
    finally:
        store.close()


def test_a_process_killed_inside_its_sequence_leaves_its_commit_to_the_next_holder_and_no_duplicate(tmp_path):
    """A writer process commits a memory inside its sequence and is killed before it ends (kill -9): the
    count stays odd, nothing was acknowledged, and the next holder counts two, reads the table for real
    (so it finds the row and does not insert it again), and readers see the memory once it ended."""
    import os
    import signal
    import subprocess
    import sys
    import textwrap

    uri = str(tmp_path / "db")
    store = MemoryStore.open(uri, vector_dim=DIM)
    try:
        assert store.get_memory("m1", SCOPE) is None
        script = textwrap.dedent(
            f"""
            import os, signal
            from tests.storage.test_generations import new
            from storage.rows import memory_to_row
            from storage.store import MemoryStore
            store = MemoryStore.open({uri!r}, vector_dim={DIM})
            with store.exclusive():
                store._append(store._memories, [memory_to_row(new("m1", "the staging database resets on Sundays"))])
                os.kill(os.getpid(), signal.SIGKILL)
            """
        )
        done = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd(), timeout=120)
        assert done.returncode == -signal.SIGKILL
        before = store._generations.read(WRITES)
        assert before % 2 == 1  # left inside its sequence
        store.insert_memory(new("m1", "the staging database resets on Sundays"))
        assert store._generations.read(WRITES) == before + 3  # two as it began, one as it ended
        rows = store._memories.search().where("id = 'm1'").select(["id"]).to_arrow()
        assert rows.num_rows == 1
        found = store.get_memory("m1", SCOPE)
        assert found is not None and found.content == "the staging database resets on Sundays"
    finally:
        store.close()
