"""Write conflicts are retried with backoff, on every path that commits: a fake connection whose tables
answer each write with commit conflicts before letting it through."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import lancedb
import numpy as np
import pytest

from storage import schema
from storage.appenders import Appenders
from storage.locking import (
    BACKGROUND_YIELD_SECONDS,
    LOCK_FILE_NAME,
    CompactionsBeside,
    WriteLock,
    retrying,
)
from storage.records import (
    ContradictionRecord,
    NewMemory,
    OutcomeRecord,
    RetrievalRecord,
    Scope,
    WeightEvent,
)
from storage.store import MemoryStore
from tests.records import memory_record

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
SCOPE = Scope("o", "p")
DIM = 4
CONFLICT = "lance error: Retryable commit conflict for version 7: preempted by a concurrent transaction. Please retry."


class Conflicts:
    """Raises ``per_write`` commit conflicts before each write goes through; counts them by (table, write)."""

    def __init__(self, per_write: int) -> None:
        self.per_write = per_write
        self.raised: Counter[tuple[str, str]] = Counter()
        self._streak: Counter[tuple[str, str]] = Counter()

    def check(self, table: str, write: str) -> None:
        key = (table, write)
        if self._streak[key] < self.per_write:
            self._streak[key] += 1
            self.raised[key] += 1
            raise RuntimeError(CONFLICT)
        self._streak[key] = 0


class ConflictingMerge:
    """A merge-insert builder whose ``execute`` conflicts first."""

    def __init__(self, builder: Any, table: str, conflicts: Conflicts) -> None:
        self._builder, self._table, self._conflicts = builder, table, conflicts

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._conflicts.check(self._table, "merge_insert")
        return self._builder.execute(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        step = getattr(self._builder, name)
        return lambda *args, **kwargs: ConflictingMerge(step(*args, **kwargs), self._table, self._conflicts)


class ConflictingTable:
    WRITES = ("add", "update", "delete", "create_index", "optimize")

    def __init__(self, table: Any, conflicts: Conflicts) -> None:
        self._table, self._conflicts = table, conflicts

    def merge_insert(self, *args: Any, **kwargs: Any) -> ConflictingMerge:
        return ConflictingMerge(self._table.merge_insert(*args, **kwargs), self._table.name, self._conflicts)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._table, name)
        if name not in self.WRITES:
            return attribute

        def write(*args: Any, **kwargs: Any) -> Any:
            self._conflicts.check(self._table.name, name)
            return attribute(*args, **kwargs)

        return write


class ConflictingConnection:
    def __init__(self, db: Any, conflicts: Conflicts) -> None:
        self._db, self._conflicts = db, conflicts

    def open_table(self, name: str) -> ConflictingTable:
        return ConflictingTable(self._db.open_table(name), self._conflicts)


def conflicting_store(tmp_path, conflicts: Conflicts) -> MemoryStore:
    """A real store whose every table (the append handles' too) answers each write with conflicts first."""
    path = tmp_path / "db"
    MemoryStore.open(str(path), vector_dim=DIM).close()  # created and migrated without conflicts

    def connection(**options: Any) -> ConflictingConnection:
        return ConflictingConnection(lancedb.connect(str(path), **options), conflicts)

    return MemoryStore(
        connection(read_consistency_interval=timedelta(0)),
        str(path),
        {"schema_version": str(schema.SCHEMA_VERSION), "vector_dim": str(DIM)},
        WriteLock(path / LOCK_FILE_NAME),
        appenders=Appenders(connection()),
    )


def memory(memory_id: str, **fields: Any) -> NewMemory:
    record = memory_record(memory_id, org_id=SCOPE.org_id, project_id=SCOPE.project_id, **fields)
    return NewMemory(record, tuple(np.full(DIM, 0.5)), record.content)


@pytest.mark.slow
def test_every_write_path_of_the_store_retries_commit_conflicts(tmp_path):
    conflicts = Conflicts(per_write=2)
    store = conflicting_store(tmp_path, conflicts)
    try:
        store.insert_many([memory("a", episode_id="ep"), memory("b", kind="episode", episode_id="ep")])
        store.mark_consolidated(["a"], NOW)
        store.set_weights({"a": 1.15}, NOW)
        store.add_weight_events([WeightEvent("a", "o", "p", "s1", 1.0, 1.15, 1, NOW)])
        store.put_outcome(OutcomeRecord("s1", "o", "p", "success", 1.0, None, ("a",), NOW, NOW, 1))
        pair = ContradictionRecord("o", "p", "a", "b", "negation", "d", 0.9, "open", None, NOW, None)
        store.put_contradictions([pair])
        trace = json.dumps({"candidates": [{"id": "b", "preview": "b"}]})
        store.record_retrieval(
            RetrievalRecord("r1", "o", "p", "s1", "agent", "q", "recall", NOW, 5, 100, ("b",), trace)
        )
        store.resolve_contradictions(SCOPE, ["b"], "retracted", NOW)
        assert store.purge(SCOPE, ["b"], NOW) == ["b"]  # titles, rows, traces, old versions, FTS index

        assert store.get_memory("a", SCOPE).weight == 1.15
        assert store.get_memory("b", SCOPE).status == "purged"
        assert store.get_outcome(SCOPE, "s1").revision == 1
        assert store.contradictions(SCOPE, status="resolved")[0].older_id == "a"
        assert "[purged]" in store.get_retrieval("r1", SCOPE).trace_json
        assert [event.weight_after for event in store.weight_events(SCOPE, "a")] == [1.15]
    finally:
        store.close()
    assert set(conflicts.raised) >= {
        (schema.EPISODES, "add"),
        (schema.MEMORIES, "add"),
        (schema.MEMORIES, "update"),
        (schema.MEMORIES, "merge_insert"),
        (schema.WEIGHT_EVENTS, "add"),
        (schema.OUTCOMES, "merge_insert"),
        (schema.CONTRADICTIONS, "merge_insert"),
        (schema.RETRIEVALS, "add"),
        (schema.RETRIEVALS, "merge_insert"),
        (schema.EPISODES, "merge_insert"),  # a purge rewrites an episode whole (its title withheld)
        (schema.MEMORIES, "optimize"),
        (schema.MEMORIES, "create_index"),
    }


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def failing(times: int, error: Exception):
    calls = []

    def operation() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "committed"

    return operation, calls


def test_a_conflict_is_retried_with_jittered_exponential_backoff():
    sleeps = Sleeps()
    operation, calls = failing(4, RuntimeError(CONFLICT))
    assert retrying(operation, base_delay=0.02, sleep=sleeps) == "committed"
    assert len(calls) == 5
    # attempt k waits 0.02 x 2^(k-1), jittered by x0.5 to x1.5
    for attempt, delay in enumerate(sleeps.delays, start=1):
        assert 0.01 * 2 ** (attempt - 1) <= delay <= 0.03 * 2 ** (attempt - 1)


def test_conflicts_that_outlast_the_attempts_are_raised():
    operation, calls = failing(100, RuntimeError(CONFLICT))
    with pytest.raises(RuntimeError, match="commit conflict"):
        retrying(operation, attempts=3, sleep=Sleeps())
    assert len(calls) == 3


def test_other_errors_are_raised_at_once():
    sleeps = Sleeps()
    operation, calls = failing(1, ValueError("Field 'x' does not exist"))
    with pytest.raises(ValueError):
        retrying(operation, sleep=sleeps)
    assert len(calls) == 1 and sleeps.delays == []


@pytest.mark.parametrize("local", [True, False], ids=["local file", "object store"])
def test_appends_hold_the_logs_lock_together_and_a_scrub_waits_for_them_all(tmp_path, local):
    """Two threads append under the logs lock at once (neither waits for the other); a scrub
    (exclusive) waits until both are done, and an append waits while the scrub runs."""
    import threading

    from storage.locking import LogsLock

    lock = LogsLock(tmp_path / ".logs.lock" if local else None)
    both_in = threading.Barrier(3, timeout=10)
    leave = threading.Event()
    events: list[str] = []

    def append(name: str) -> None:
        with lock.shared():
            both_in.wait()  # only passes if both appends hold the lock at once
            leave.wait(10)
            events.append(f"{name} out")

    appends = [threading.Thread(target=append, args=(n,)) for n in ("a", "b")]
    for thread in appends:
        thread.start()
    both_in.wait()

    def scrub() -> None:
        with lock.exclusive():
            events.append("scrub in")
            scrubbing.set()
            finish.wait(10)
            events.append("scrub out")

    scrubbing, finish = threading.Event(), threading.Event()
    scrubber = threading.Thread(target=scrub)
    scrubber.start()
    assert not scrubbing.wait(0.3)  # the appends still hold it
    leave.set()
    for thread in appends:
        thread.join(10)
    assert scrubbing.wait(10)

    def late_append() -> None:
        with lock.shared():
            events.append("late in")

    late = threading.Thread(target=late_append)
    late.start()
    late.join(0.3)
    assert late.is_alive()  # an append waits for the scrub
    finish.set()
    scrubber.join(10)
    late.join(10)
    assert sorted(events[:2]) == ["a out", "b out"]
    assert events[2:] == ["scrub in", "scrub out", "late in"]


def test_work_behind_the_calls_lets_a_caller_waiting_for_the_lock_go_first(tmp_path, monkeypatch):
    import threading
    import time

    import storage.locking

    monkeypatch.setattr(
        storage.locking, "BACKGROUND_YIELD_SECONDS", 30.0
    )  # waits for the caller, however slow
    lock = WriteLock(tmp_path / LOCK_FILE_NAME)
    order: list[str] = []
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with lock.hold():
            held.set()
            assert release.wait(30)

    def taker(name: str, background: bool) -> None:
        with lock.hold(background=background):
            order.append(name)

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    assert held.wait(30)
    threads.append(threading.Thread(target=taker, args=("caller", False)))
    threads[1].start()
    while lock._callers_waiting != 1:  # the caller waits for the lock
        time.sleep(0.001)
    threads.append(threading.Thread(target=taker, args=("behind", True)))
    threads[2].start()
    time.sleep(0.05)  # and so does the work behind the calls, behind it (or it is not there yet: the same)
    release.set()
    for thread in threads:
        thread.join(30)
    lock.close()
    assert order == ["caller", "behind"]
    assert lock._callers_waiting == 0


def test_work_behind_the_calls_that_holds_the_lock_already_takes_it_again_at_once(tmp_path):
    import time

    lock = WriteLock(tmp_path / LOCK_FILE_NAME)
    with lock.hold(background=True):
        lock._callers_waiting += 1  # as a caller waiting behind this holder counts itself
        try:
            started = time.perf_counter()
            with lock.hold(background=True):  # re-entered: yields to no one, or it would wait for itself
                pass
            assert time.perf_counter() - started < BACKGROUND_YIELD_SECONDS / 2
        finally:
            lock._callers_waiting -= 1
    lock.close()


def test_work_behind_the_calls_waits_for_callers_a_bounded_time(tmp_path):
    import time

    lock = WriteLock(tmp_path / LOCK_FILE_NAME)
    lock._callers_waiting = 1  # a caller that never gets its turn (as if it were stuck on the file lock)
    started = time.perf_counter()
    with lock.hold(background=True):
        pass
    waited = time.perf_counter() - started
    lock.close()
    assert BACKGROUND_YIELD_SECONDS <= waited < BACKGROUND_YIELD_SECONDS + 5


def test_a_wait_for_compactions_beside_the_writes_ends_when_the_last_one_ends_or_at_its_bound():
    import threading
    import time

    beside = CompactionsBeside()
    assert beside.wait_out(0)  # none running: at once
    with beside.running(), beside.running():  # two tables' compactions, say
        assert not beside.wait_out(0.05)  # bounded: False once the time is up
    assert beside.wait_out(0)

    ended = threading.Event()

    def compact() -> None:
        with beside.running():
            ended.wait(10)

    thread = threading.Thread(target=compact)
    thread.start()
    while beside.wait_out(0):  # until the compaction runs
        time.sleep(0.001)
    threading.Timer(0.1, ended.set).start()
    started = time.perf_counter()
    assert beside.wait_out(10)
    assert 0.05 < time.perf_counter() - started < 5  # woken as it ended, not at the bound
    thread.join()


def test_a_thread_inside_a_write_sequence_does_not_wait_for_compactions_beside_the_writes(tmp_path):
    # It holds the write lock: waiting there would hold up every write (and a compaction that needs the
    # lock to finish would wait for it).
    import time

    store = MemoryStore.open(str(tmp_path / "db"), vector_dim=4)
    try:
        with store.behind_the_calls(), store.exclusive(), store._compactions_beside.running():
            started = time.perf_counter()
            with store.exclusive():  # re-entered
                store.after_compactions_beside()
            assert time.perf_counter() - started < 1
    finally:
        store.close()
