"""The scope cache's lock: readers together, a writer alone, a waiting writer ahead of new readers."""

import threading
import time

import pytest

from storage.shared_lock import SharedLock

WAIT = 5.0


def in_thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_readers_hold_it_at_once():
    lock = SharedLock()
    both_inside = threading.Barrier(2, timeout=WAIT)

    def read() -> None:
        with lock.read():
            both_inside.wait()  # breaks (and the test fails) unless the other reader is inside too

    threads = [in_thread(read), in_thread(read)]
    for thread in threads:
        thread.join(WAIT)
    assert not both_inside.broken


def test_a_writer_waits_for_the_readers_and_holds_new_readers_back():
    lock = SharedLock()
    order: list[str] = []
    reading, release_reader = threading.Event(), threading.Event()

    def first_reader() -> None:
        with lock.read():
            reading.set()
            release_reader.wait(WAIT)
            order.append("first reader leaves")

    def writer() -> None:
        with lock.write():
            order.append("writer")

    def late_reader() -> None:
        with lock.read():
            order.append("late reader")

    threads = [in_thread(first_reader)]
    assert reading.wait(WAIT)
    threads.append(in_thread(writer))
    deadline = time.monotonic() + WAIT
    while lock._waiting_writers == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    threads.append(in_thread(late_reader))
    time.sleep(0.05)  # the late reader would be inside by now if a waiting writer did not hold it back
    assert order == []
    release_reader.set()
    for thread in threads:
        thread.join(WAIT)
    assert order == ["first reader leaves", "writer", "late reader"]


def test_a_reader_reads_again_while_a_writer_waits():
    lock = SharedLock()
    inside, done = threading.Event(), threading.Event()

    def reader() -> None:
        with lock.read():
            inside.set()
            deadline = time.monotonic() + WAIT
            while lock._waiting_writers == 0 and time.monotonic() < deadline:
                time.sleep(0.001)
            with lock.read():  # waiting here for the writer would wait for itself
                done.set()

    def writer() -> None:
        with lock.write():
            pass

    threads = [in_thread(reader)]
    assert inside.wait(WAIT)
    threads.append(in_thread(writer))
    for thread in threads:
        thread.join(WAIT)
    assert done.is_set()
    assert not any(thread.is_alive() for thread in threads)


def test_a_writer_may_write_and_read_again_and_a_reader_may_not_write():
    lock = SharedLock()
    with lock.write(), lock.write(), lock.read():
        assert lock.reads_here()
    assert not lock.reads_here()
    with lock.read(), pytest.raises(RuntimeError, match="cannot take it exclusively"), lock.write():
        pass
    with lock.write():  # nothing was left held
        pass
