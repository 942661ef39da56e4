"""What a write hands on behind its call (writing.behind): run in order by one thread, waited for by
``settle``, finished by ``close``, and a failure logged without stopping the jobs after it."""

import threading

import pytest

from writing.behind import HandOnQueue

TIMEOUT = 30.0


def test_jobs_run_in_the_order_they_were_handed_on_and_settle_waits_for_them():
    behind = HandOnQueue("test-hand-on")
    gate = threading.Event()
    ran: list[int] = []
    behind.submit(lambda: (gate.wait(TIMEOUT), ran.append(1)))
    behind.submit(lambda: ran.append(2))
    assert not behind.settle(0.05) and ran == []
    gate.set()
    assert behind.settle(TIMEOUT) and ran == [1, 2]
    behind.close()


def test_a_failing_job_is_logged_and_the_next_one_still_runs(caplog):
    behind = HandOnQueue("test-hand-on")
    ran: list[str] = []

    def failing() -> None:
        raise OSError("disk full")

    behind.submit(failing)
    behind.submit(lambda: ran.append("after"))
    assert behind.settle(TIMEOUT) and ran == ["after"]
    assert "test-hand-on: a hand-on failed" in caplog.text
    behind.close()


def test_close_runs_what_is_queued_and_later_jobs_run_in_their_callers_thread():
    behind = HandOnQueue("test-hand-on")
    gate = threading.Event()
    ran: list[str] = []
    behind.submit(lambda: gate.wait(TIMEOUT))
    behind.submit(lambda: ran.append("queued"))
    threading.Timer(0.05, gate.set).start()
    behind.close()
    assert ran == ["queued"]
    behind.submit(lambda: ran.append(threading.current_thread().name))
    assert ran == ["queued", threading.current_thread().name]
    assert behind.settle(0)  # nothing of its own is left to wait for


def test_settle_with_nothing_handed_on_returns_at_once():
    assert HandOnQueue("test-hand-on").settle(0)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_job_that_raises_past_exception_is_counted_and_the_jobs_after_it_still_run():
    behind = HandOnQueue("test-hand-on")
    gate = threading.Event()
    ran: list[str] = []

    def interrupted() -> None:
        gate.wait(TIMEOUT)
        raise KeyboardInterrupt  # ends the thread that ran it

    behind.submit(interrupted)
    first = behind._thread
    behind.submit(lambda: ran.append("queued behind it"))
    gate.set()
    first.join(TIMEOUT)  # its exception reported within this test
    assert behind.settle(TIMEOUT) and ran == ["queued behind it"]
    behind.submit(lambda: ran.append("later"))
    assert behind.settle(TIMEOUT) and ran == ["queued behind it", "later"]
    behind.close()


def test_wait_below_waits_until_the_queue_is_short_enough():
    behind = HandOnQueue("test-hand-on")
    gate = threading.Event()
    for _ in range(3):
        behind.submit(lambda: gate.wait(TIMEOUT))
    assert not behind.wait_below(3, timeout=0.05)  # three queued or running
    assert behind.wait_below(4, timeout=0)
    gate.set()
    assert behind.wait_below(1, timeout=TIMEOUT)
    behind.close()
