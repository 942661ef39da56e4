"""Retrieval logs are written in the background in batches, yet read back at once in this process."""

import threading

import pytest

from storage.write_behind import WriteBehind


class Sink:
    def __init__(self, fail: int = 0) -> None:
        self.batches: list[tuple[str, list]] = []
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, table, rows) -> None:
        with self.lock:
            if self.fail:
                self.fail -= 1
                raise RuntimeError("commit conflict")
            self.batches.append((table, list(rows)))


def test_rows_queued_together_are_written_as_one_batch_per_table_on_flush():
    sink = Sink()
    logs = WriteBehind(sink, interval=60)
    logs.add("retrievals", [{"id": 1}])
    logs.add("ab", [{"id": 1}, {"id": 2}])
    logs.add("retrievals", [{"id": 2}])
    assert logs.pending() == 4 and sink.batches == []
    logs.flush()
    assert sorted(sink.batches) == [("ab", [{"id": 1}, {"id": 2}]), ("retrievals", [{"id": 1}, {"id": 2}])]
    assert logs.pending() == 0
    logs.close()


def test_the_background_thread_writes_without_being_asked():
    sink = Sink()
    logs = WriteBehind(sink, interval=0.01)
    logs.add("retrievals", [{"id": 1}])
    for _ in range(500):
        if sink.batches:
            break
        threading.Event().wait(0.01)
    assert sink.batches == [("retrievals", [{"id": 1}])]
    logs.close()


def test_a_failed_write_keeps_its_rows_for_the_next_flush_and_says_so():
    sink = Sink(fail=1)
    logs = WriteBehind(sink, interval=60)
    logs.add("retrievals", [{"id": 1}])
    with pytest.raises(RuntimeError, match="commit conflict"):
        logs.flush()
    logs.add("retrievals", [{"id": 2}])
    logs.flush()
    assert sink.batches == [("retrievals", [{"id": 1}, {"id": 2}])]  # order kept
    logs.close()


def test_close_writes_what_is_left_and_later_rows_go_straight_through():
    sink = Sink()
    logs = WriteBehind(sink, interval=60)
    logs.add("retrievals", [{"id": 1}])
    logs.close()
    assert sink.batches == [("retrievals", [{"id": 1}])]
    logs.add("retrievals", [{"id": 2}])
    assert sink.batches[-1] == ("retrievals", [{"id": 2}])


class HeldSink(Sink):
    """A sink whose writes wait until released, so a test can look while a flush is writing."""

    def __init__(self, fail: int = 0) -> None:
        super().__init__(fail)
        self.writing, self.release = threading.Event(), threading.Event()

    def __call__(self, table, rows) -> None:
        self.writing.set()
        self.release.wait(5)
        super().__call__(table, rows)


def test_a_row_is_queued_until_its_write_committed_and_never_in_neither_place():
    sink = HeldSink()
    logs = WriteBehind(sink, interval=60)
    logs.add("retrievals", [{"id": 1, "session": "a"}, {"id": 2, "session": "b"}])
    assert logs.queued("retrievals", lambda row: row["session"] == "a") == [{"id": 1, "session": "a"}]
    flushing = threading.Thread(target=logs.flush)
    flushing.start()
    assert sink.writing.wait(5)
    logs.add("retrievals", [{"id": 3, "session": "a"}])  # queued while the flush writes
    assert [row["id"] for row in logs.queued("retrievals", lambda row: row["session"] == "a")] == [1, 3]
    assert sink.batches == []  # not in the table yet: still queued
    sink.release.set()
    flushing.join(5)
    assert sink.batches == [("retrievals", [{"id": 1, "session": "a"}, {"id": 2, "session": "b"}])]
    assert [row["id"] for row in logs.queued("retrievals", lambda row: True)] == [3]
    assert logs.queued("ab", lambda row: True) == []
    logs.close()


def test_rows_whose_write_failed_stay_queued_for_readers():
    sink = Sink(fail=1)
    logs = WriteBehind(sink, interval=60)
    logs.add("retrievals", [{"id": 1}])
    with pytest.raises(RuntimeError):
        logs.flush()
    assert logs.queued("retrievals", lambda row: True) == [{"id": 1}]
    logs.close()
    assert logs.queued("retrievals", lambda row: True) == []
