"""Maintenance rounds: the memories table is compacted beside the writes, never beside a purge."""

import threading
import time

import pytest

from storage.locking import COMPACTION_YIELD_SECONDS
from storage.manifests import Manifests
from storage.records import LineageEvent, WeightEvent
from storage.store import MemoryStore
from tests.storage.test_store import DIM, NOW, SCOPE, new


@pytest.fixture
def store(tmp_path) -> MemoryStore:
    opened = MemoryStore.open(str(tmp_path / "db"), vector_dim=DIM)
    yield opened
    opened.close()


class GatedTable:
    """The memories table, whose optimize says when it starts and then waits to be let go."""

    def __init__(self, table, failures: int = 0, preempted: int = 0) -> None:
        self._table = table
        self.started = threading.Event()
        self.release = threading.Event()
        self.failures = failures  # optimizes that lose to the writes first and raise (a commit conflict)
        self.preempted = preempted  # optimizes that lose and say so only in LanceDB's log: nothing changes
        # What a failure raises: an update preempted the compaction's commit.
        self.failure = (
            "Retryable commit conflict for version 12: This Rewrite transaction was preempted by concurrent "
            "transaction Update at version 13. Please retry."
        )
        self.calls: list[bool] = []  # per optimize: whether this thread held the write lock

    def optimize(self, **options):
        self.calls.append(self.lock_held())
        if self.failures:
            self.failures -= 1
            raise RuntimeError(self.failure)
        if self.preempted:
            self.preempted -= 1
            return None
        self.started.set()
        assert self.release.wait(30), "the test never let the compaction go"
        return self._table.optimize(**options)

    def lock_held(self) -> bool:
        return False

    def __getattr__(self, name):
        return getattr(self._table, name)


def gate_memories(store: MemoryStore, failures: int = 0, preempted: int = 0) -> GatedTable:
    gated = GatedTable(store._memories, failures, preempted)
    gated.lock_held = lambda: store._lock._depth > 0 and store._lock._thread_lock._is_owned()
    store._memories = gated
    return gated


def in_thread(work) -> tuple[threading.Thread, threading.Event]:
    done = threading.Event()

    def run() -> None:
        work()
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, done


def four_fragments(store: MemoryStore, text: str = "note") -> None:
    for index in range(4):
        store.insert_memory(new(f"m{index}", f"{text} {index}"))


def compaction_held(store: MemoryStore) -> tuple[GatedTable, threading.Thread, threading.Event]:
    """A maintenance round in a thread of its own, held inside the memories' compaction."""
    gated = gate_memories(store)
    maintenance, maintained = in_thread(lambda: store.maintain(min_fragments=2))
    assert gated.started.wait(10)
    return gated, maintenance, maintained


def test_a_remember_commits_while_the_memories_table_is_compacted(store):
    four_fragments(store)
    gated, maintenance, maintained = compaction_held(store)
    writer, written = in_thread(lambda: store.insert_memory(new("late", "written during the compaction")))
    try:
        assert written.wait(10)  # the insert did not wait for the compaction
        assert not maintained.is_set()
    finally:
        gated.release.set()
        writer.join()
        maintenance.join()
    assert gated.calls == [False]  # compacted once, without the write lock
    assert {m.id for m in store.list_memories(SCOPE, limit=10)} == {"m0", "m1", "m2", "m3", "late"}


@pytest.mark.parametrize(
    ("loss", "calls"),
    [
        ({"failures": 1}, [False, False]),  # lost once: the second try beside the writes commits
        ({"failures": 2}, [False, False, True]),  # lost twice: then under the write lock
        ({"preempted": 1}, [False, True]),  # committed nothing and said so only in the log: under the lock
    ],
    ids=["raised-once", "raised-twice", "only-logged"],
)
def test_a_compaction_that_lost_to_the_writes_is_tried_once_more_beside_them_then_under_the_write_lock(
    store, loss, calls
):
    four_fragments(store)
    gated = gate_memories(store, **loss)
    gated.release.set()
    report = store.maintain(min_fragments=2)
    assert gated.calls == calls  # per optimize, whether it held the write lock
    assert report["memories_v4"].startswith("compacted 4 -> 1 fragments")
    assert len(store.list_memories(SCOPE, limit=10)) == 4


@pytest.mark.parametrize(
    "error",
    [
        "Commit conflict for version 4217: Failed to commit the transaction after 20 retries.",
        "Too many concurrent writers. Attempted 5 times, but failed on retry_timeout of 30.000 seconds.",
    ],
)
def test_a_compaction_lance_gave_up_committing_goes_under_the_write_lock_at_once(store, error):
    # Lost to the appends themselves, which a second try beside them would lose too (Lance's own errors).
    four_fragments(store)
    gated = gate_memories(store, failures=1)
    gated.failure = f"lance error: {error}"
    gated.release.set()
    report = store.maintain(min_fragments=2)
    assert gated.calls == [False, True]
    assert report["memories_v4"].startswith("compacted 4 -> 1 fragments")


def test_work_behind_the_calls_waits_for_a_compaction_beside_the_writes_and_a_callers_write_does_not(store):
    # An update of a row the compaction rewrites would preempt its commit; nobody waits for work behind
    # the calls (a supersede committed after its remember answered), so it lets the compaction commit.
    four_fragments(store)
    gated, maintenance, maintained = compaction_held(store)

    def behind() -> None:
        with store.behind_the_calls(), store.exclusive():
            pass

    def caller() -> None:
        with store.exclusive():
            pass

    background, background_done = in_thread(behind)
    calling, caller_done = in_thread(caller)
    try:
        assert caller_done.wait(10)  # a caller's write sequence takes the lock at once
        assert not background_done.wait(0.3)  # the work behind the calls waits for the compaction
    finally:
        gated.release.set()
        maintenance.join()
        background.join()
        calling.join()
    assert background_done.is_set() and maintained.is_set()
    assert gated.calls == [False]  # the compaction was not preempted: once, beside the writes


def test_a_compaction_that_committed_only_some_groups_has_the_files_of_the_others_deleted(store, tmp_path):
    # LanceDB commits the groups no write touched and leaves the rewritten file of the others ("leaving 1
    # rewritten fragment(s) in place for GC"): fewer fragments, as after a whole compaction, and a file no
    # version names.
    four_fragments(store)
    gated = gate_memories(store)
    data = tmp_path / "db" / "memories_v4.lance" / "data"
    left = data / "0101-left-by-a-group-that-lost.lance"
    real = gated.optimize

    def optimize_leaving_a_file(**options):
        real(**options)
        if len(gated.calls) == 1:
            left.write_bytes(b"rows of a rewritten fragment")

    gated.optimize = optimize_leaving_a_file
    gated.release.set()
    store.maintain(min_fragments=2)
    assert gated.calls == [False]  # no second compaction: the file it left is deleted under the write lock
    assert not left.exists()
    assert len(store.list_memories(SCOPE, limit=10)) == 4


def test_the_report_tables_are_compacted_under_the_reports_lock_and_remembers_go_on(store):
    # Reports write those tables under the reports' lock, which their compaction holds; the write lock
    # is not needed for them, so a remember commits while they are compacted.
    for number in range(4):
        store.add_weight_events([WeightEvent(f"m{number}", "acme", "web", "s1", 1.0, 1.15, 1, NOW)])
    gated = GatedTable(store._weight_events)
    locks = {"write": store._lock, "reports": store._reports_lock}
    gated.lock_held = lambda: {
        name for name, lock in locks.items() if lock._depth and lock._thread_lock._is_owned()
    }
    store._weight_events = gated
    maintenance, maintained = in_thread(lambda: store.maintain(min_fragments=2))
    assert gated.started.wait(10)
    writer, written = in_thread(lambda: store.insert_memory(new("late", "written during the compaction")))
    try:
        assert written.wait(10)
        assert not maintained.is_set()
    finally:
        gated.release.set()
        writer.join()
        maintenance.join()
    assert gated.calls == [{"reports"}]
    assert len(store.weight_events(SCOPE, "m0")) == 1


def test_an_error_other_than_a_conflict_is_not_retried_under_the_lock(store):
    four_fragments(store)
    gated = gate_memories(store)

    def broken(**options):
        gated.calls.append(gated.lock_held())
        raise ValueError("disk full")

    gated.optimize = broken
    with pytest.raises(ValueError, match="disk full"):
        store.maintain(min_fragments=2)
    assert gated.calls == [False]


def test_a_purge_waits_for_a_compaction_in_flight_and_no_compaction_starts_during_a_purge(store):
    four_fragments(store, "secret number")
    gated, maintenance, _ = compaction_held(store)
    purger, purged = in_thread(lambda: store.purge(SCOPE, ["m1"], NOW))
    try:
        # The purge began (it holds the write lock) but erases nothing while the compaction runs: one that
        # read the text before the erase could commit it again into a file of its own.
        assert not purged.wait(0.5)
        assert store.get_memory("m1", SCOPE).content == "secret number 1"
    finally:
        gated.release.set()
        maintenance.join()
        purger.join()
    assert purged.is_set()
    assert store.get_memory("m1", SCOPE).status == "purged"

    # The other way round: a compaction waits while a purge holds the compaction lock.
    gated.started.clear()
    with store._compaction_lock.hold():
        maintenance, maintained = in_thread(lambda: store.maintain(min_fragments=1))
        assert not gated.started.wait(0.5)
    maintenance.join()
    assert gated.started.is_set() and maintained.is_set()


def test_writes_racing_real_compactions_lose_nothing_and_the_indexes_answer_as_a_full_scan(store, tmp_path):
    """Real LanceDB commits on both sides: inserts, status UPDATEs and weight merges in one thread while
    maintenance compacts (and folds rows into the indexes, and cleans up) in another, round after round."""
    for index in range(30):
        store.insert_memory(new(f"m{index}", f"note {index}"))
    statuses = dict.fromkeys((f"m{index}" for index in range(30)), "active")
    weights: dict[str, float] = {}
    inserted = [f"m{index}" for index in range(30)]
    writing_done, errors = threading.Event(), []

    def write() -> None:
        try:
            for step in range(120):
                target = f"m{step % 30}"
                if step % 3 == 0:
                    inserted.append(f"n{step}")
                    store.insert_memory(new(f"n{step}", f"a note written at step {step}"))
                elif step % 3 == 1:
                    statuses[target] = "retracted" if statuses[target] == "active" else "active"
                    store._update_rows([target], {"status": statuses[target], "updated_at": NOW})
                else:
                    weights[target] = 1.0 + step / 1_000
                    store.set_weights({target: weights[target]}, NOW)
        except Exception as exc:  # reported below: the test fails on it
            errors.append(exc)
        finally:
            writing_done.set()

    rounds = 0

    def maintain() -> None:
        nonlocal rounds
        try:
            while not writing_done.is_set():
                store.maintain(min_fragments=2)
                rounds += 1
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write), threading.Thread(target=maintain)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert rounds >= 2, rounds

    table = store._memories
    rows = table.to_arrow().select(["id", "status", "weight"]).to_pylist()
    assert sorted(row["id"] for row in rows) == sorted(inserted)  # each written once, none lost
    by_id = {row["id"]: row for row in rows}
    assert {m: by_id[m]["status"] for m in statuses} == statuses  # the last status written, each
    assert {m: by_id[m]["weight"] for m in weights} == weights
    # The bitmap index on status (and the id index) answer as a scan of every row does.
    store.maintain(min_fragments=1)  # fold what the last writes left out of the indexes
    active = {row["id"] for row in rows if row["status"] == "active"}
    found = table.search().where("status = 'active'").select(["id"]).limit(None).to_arrow()
    assert set(found.column("id").to_pylist()) == active
    for memory_id in ("m0", "m1", "n3", inserted[-1]):
        assert store.get_memory(memory_id, SCOPE).status == by_id[memory_id]["status"]
    # A compaction an update preempted left its files; its run under the write lock cleared them.
    folder = tmp_path / "db" / "memories_v4.lance"
    manifests = Manifests(folder)
    assert [path.name for path in (folder / "data").iterdir() if not manifests.name(path.name)] == []


def test_files_left_are_those_no_version_names_and_a_first_look_reads_the_newest_version_only(tmp_path):

    import lancedb

    from storage.upkeep import TableFiles, files_left_since

    table = lancedb.connect(str(tmp_path)).create_table("t", data=[{"x": 0}])
    folder = tmp_path / "t.lance"
    before = TableFiles.listed(folder)
    table.add([{"x": 1}])  # a second fragment: its file is named by the newest version
    table.delete("x = 1")  # now only by the version before
    orphan = folder / "data" / "0110-left-by-a-compaction.lance"
    orphan.write_bytes(b"rows")
    assert files_left_since(folder, before) == [orphan.name]
    quick = files_left_since(folder, before, every_version=False)
    assert (
        orphan.name in quick and len(quick) == 2
    )  # the deleted fragment's file too: named by an older version
    assert files_left_since(folder, TableFiles.listed(folder)) == []  # nothing written since


def test_files_left_are_looked_for_in_the_versions_committed_since_the_listing_only(tmp_path):
    # A version is committed after the files it names: one listed before a file was written cannot name
    # it, and is not read (a busy table keeps hundreds, each manifest carrying every row's versions).
    import lancedb

    from storage.upkeep import TableFiles, files_left_since

    table = lancedb.connect(str(tmp_path)).create_table("t", data=[{"x": 0}])
    folder = tmp_path / "t.lance"
    before = TableFiles.listed(folder)
    orphan = folder / "data" / "0110-left-by-a-compaction.lance"
    orphan.write_bytes(b"rows")
    # Were the versions listed before read, this one would name the orphan.
    listed = next((folder / "_versions").iterdir())
    listed.write_bytes(listed.read_bytes() + orphan.name.encode())
    assert files_left_since(folder, before) == [orphan.name]
    table.add([{"x": 1}])
    (newest,) = [path for path in (folder / "_versions").iterdir() if path.name not in before.versions]
    newest.write_bytes(newest.read_bytes() + orphan.name.encode())
    assert files_left_since(folder, before) == []  # named by a version committed since the listing


def test_an_append_committed_while_the_table_is_listed_leaves_no_file_taken_for_left(tmp_path, monkeypatch):
    # An append that commits between the two listings: its file must not count as written since the
    # listing while its version counts as listed before (it would then be deleted as named by no version
    # read). Listing the versions first makes a file missing from the listing newer than every version in it.
    import lancedb

    import storage.upkeep
    from storage.upkeep import TableFiles, files_left_since

    table = lancedb.connect(str(tmp_path)).create_table("t", data=[{"x": 0}])
    folder = tmp_path / "t.lance"
    listed = storage.upkeep._names
    calls = []

    def an_append_after_the_first_listing(where):
        names = listed(where)
        calls.append(where.name)
        if len(calls) == 1:
            table.add([{"x": 1}])
        return names

    monkeypatch.setattr(storage.upkeep, "_names", an_append_after_the_first_listing)
    before = TableFiles.listed(folder)
    monkeypatch.setattr(storage.upkeep, "_names", listed)
    assert len(calls) == 2
    assert files_left_since(folder, before) == []


def test_only_the_memories_compaction_holds_back_work_behind_the_calls(store):
    # A status change or a weight preempts the memories' compaction; another table's compaction beside
    # the writes (here the lineage's) holds nothing back.
    for number in range(4):
        store.add_lineage(
            [
                LineageEvent(
                    f"evt_{number}", "acme", "web", "supersede", "m2", "m1", "rules", "why", "a", "s1", NOW
                )
            ]
        )
    gated = GatedTable(store._lineage)
    store._lineage = gated
    maintenance, maintained = in_thread(lambda: store.maintain(min_fragments=2))
    assert gated.started.wait(10)

    def behind() -> None:
        with store.behind_the_calls(), store.exclusive():
            pass

    background, background_done = in_thread(behind)
    try:
        assert background_done.wait(COMPACTION_YIELD_SECONDS / 2)  # not held back for the wait's bound
        assert not maintained.is_set()  # the lineage's compaction was still running
    finally:
        gated.release.set()
        maintenance.join()
        background.join()
    assert gated.calls == [False]


def test_a_compaction_waiting_for_a_purge_holds_back_no_work_behind_the_calls(store):
    # A purge holds the compaction lock from start to end; a maintenance round waiting for it compacts
    # nothing yet, so the work behind the calls does not wait for it.
    four_fragments(store)
    with store._compaction_lock.hold():  # as a purge holds it
        maintenance, maintained = in_thread(lambda: store.maintain(min_fragments=2))
        time.sleep(0.3)  # the round is waiting for the compaction lock by now
        assert not maintained.is_set()

        def behind() -> None:
            with store.behind_the_calls(), store.exclusive():
                pass

        background, background_done = in_thread(behind)
        assert background_done.wait(COMPACTION_YIELD_SECONDS / 2)
        background.join()
    maintenance.join()
    assert maintained.is_set()
    assert len(store.list_memories(SCOPE, limit=10)) == 4


def test_between_rounds_each_table_s_newest_version_is_noted_a_second_apart_at_least(store, tmp_path):
    from datetime import timedelta

    from storage import schema
    from storage.versions import newest_on_disk

    keep = timedelta(seconds=5)
    store.sight_versions(keep)
    seen = store._superseded._seen
    assert set(seen) == set(store.tables())
    first = seen[schema.MEMORIES][-1][1]
    assert first == newest_on_disk(tmp_path / "db" / f"{schema.MEMORIES}.lance")
    store.insert_memory(new("m9", "written between two looks"))
    store.sight_versions(keep)  # less than a second later: not noted
    assert [version for _, version in seen[schema.MEMORIES]] == [first]
    time.sleep(1.05)
    store.sight_versions(keep)
    assert [version for _, version in seen[schema.MEMORIES]] == [first, first + 1]


def test_once_the_rounds_began_the_writes_version_checks_note_the_newest_version_too(store, tmp_path):
    from datetime import timedelta

    from storage import schema

    seen = store._superseded._seen
    store.insert_memory(new("m8", "written before the maintenance thread looked"))
    assert schema.MEMORIES not in seen  # no spacing set yet: the version checks note nothing
    store.sight_versions(timedelta(seconds=5))
    first = seen[schema.MEMORIES][-1][1]
    store.insert_memory(new("m9", "written at once"))
    time.sleep(1.05)
    store.insert_memory(new("m10", "written a second later"))  # its version check sees m9's version
    assert [version for _, version in seen[schema.MEMORIES]] == [first, first + 1]


class SlowAfterCleanUp:
    """The memories table, whose optimize takes three seconds more after LanceDB's own (as a slow index
    update after the clean-up would)."""

    def __init__(self, table) -> None:
        self._table = table

    def optimize(self, **options):
        done = self._table.optimize(**options)
        time.sleep(3.0)
        return done

    def __getattr__(self, name):
        return getattr(self._table, name)


def test_the_next_margin_counts_only_the_time_before_the_clean_up_read_its_clock(store, tmp_path):
    """Versions committed over four seconds and sighted as they came; a round told to keep those replaced
    a second ago, whose optimize goes on three seconds after its clean-up. Timed whole, the call would make
    the next margin 1 + 2 x 3 s and more; dated by the oldest version the clean-up kept, it is the time
    before the clean-up read its clock (the compaction's, and up to a gap between two versions), well under
    the seconds that followed."""
    from datetime import timedelta

    from storage import schema
    from storage.versions import oldest_kept

    keep = timedelta(seconds=1)
    for number in range(8):
        store.insert_memory(new(f"m{number}", f"memory number {number}"))
        store.sight_versions(keep)
        time.sleep(0.55)
    store._optimize_seconds[schema.MEMORIES] = [0.0]  # a margin of a second for this round
    store._memories = SlowAfterCleanUp(store._memories)
    started = time.perf_counter()
    store.maintain(min_fragments=2, keep_replaced_for=keep)
    took = time.perf_counter() - started
    kept = oldest_kept(tmp_path / "db" / f"{schema.MEMORIES}.lance")
    assert kept is not None and kept[0] > 2  # the clean-up dropped the first versions by age
    assert store._optimize_seconds[schema.MEMORIES][-1] < 2.0 < 3.0 <= took
    assert {m.id for m in store.list_memories(SCOPE, limit=10)} == {f"m{number}" for number in range(8)}


def test_a_round_whose_clean_up_dropped_nothing_leaves_the_margin_as_it_was(store, tmp_path):
    """A cut-off is known, but with the margin (1 + 2 x 2 s) no version is that old: the clean-up drops
    none, and nothing dates its clock. Timed whole, this round (three seconds after its clean-up, as
    reading thousands of kept versions would take) widened the next margin to 1 + 2 x 3 s: the next
    cut-off kept more versions, the next round read more and took longer, and under steady writes the
    versions piled up by one a write (2026-12-06)."""
    from datetime import timedelta

    from storage import schema
    from storage.versions import kept_before

    keep = timedelta(seconds=0.5)
    store.insert_memory(new("m0", "memory number 0"))
    store.sight_versions(keep)
    time.sleep(1.1)
    for number in range(1, 4):
        store.insert_memory(new(f"m{number}", f"memory number {number}"))
    store.sight_versions(keep)  # a newer version, a second later: the cut-off falls at the first sighting
    time.sleep(1.1)
    store.insert_memory(new("m4", "memory number 4"))  # the round's own sighting: newer again
    # m4's version check saw m3's version again, and a run of sightings of one version keeps its latest:
    # that sighting settles keep later.
    time.sleep(0.6)
    store._optimize_seconds[schema.MEMORIES] = [2.0]
    folder = tmp_path / "db" / f"{schema.MEMORIES}.lance"
    before = kept_before(folder)
    store._memories = SlowAfterCleanUp(store._memories)
    store.maintain(min_fragments=2, keep_replaced_for=keep)
    after = kept_before(folder)
    assert before is not None and after is not None and after[0] == before[0]  # nothing dropped
    assert store._optimize_seconds[schema.MEMORIES] == [2.0]  # the margin stays as it was
