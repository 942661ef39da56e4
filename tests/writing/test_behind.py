"""What a write hands on behind its call (writing.behind): run in order by one thread, waited for by
``settle``, finished by ``close``, and a failure logged without stopping the jobs after it."""

import threading

from writing.behind import Behind

TIMEOUT = 30.0


def test_jobs_run_in_the_order_they_were_handed_on_and_settle_waits_for_them():
    behind = Behind("test-hand-on")
    gate = threading.Event()
    ran: list[int] = []
    behind.submit(lambda: (gate.wait(TIMEOUT), ran.append(1)))
    behind.submit(lambda: ran.append(2))
    assert not behind.settle(0.05) and ran == []
    gate.set()
    assert behind.settle(TIMEOUT) and ran == [1, 2]
    behind.close()


def test_a_failing_job_is_logged_and_the_next_one_still_runs(caplog):
    behind = Behind("test-hand-on")
    ran: list[str] = []

    def failing() -> None:
        raise OSError("disk full")

    behind.submit(failing)
    behind.submit(lambda: ran.append("after"))
    assert behind.settle(TIMEOUT) and ran == ["after"]
    assert "could not hand on what the superseded memories earned" in caplog.text
    behind.close()


def test_close_runs_what_is_queued_and_later_jobs_run_in_their_callers_thread():
    behind = Behind("test-hand-on")
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
    assert Behind("test-hand-on").settle(0)
