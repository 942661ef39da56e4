"""Supersedes decided and not committed yet (storage.pending): held, read as done, released."""

import threading

from storage.pending import PendingSupersedes, overlaid
from tests.records import memory_record


def record(memory_id: str, status: str = "active"):
    return memory_record(memory_id, status=status)


def test_a_held_memory_reads_as_superseded_until_released():
    pending = PendingSupersedes()
    assert not pending
    assert pending.hold(["mem_a", "mem_b", "mem_a"], "mem_c") == ["mem_a", "mem_b"]
    held = pending.held()
    assert pending and held == {"mem_a": "mem_c", "mem_b": "mem_c"}
    read = overlaid(record("mem_a"), held)
    assert (read.status, read.replaced_by) == ("superseded", "mem_c")
    assert overlaid(record("mem_a", "retracted"), held).status == "retracted"  # only active ones
    assert overlaid(record("mem_c"), held).status == "active"
    pending.release(["mem_a", "mem_b"], "mem_c")
    assert not pending and overlaid(record("mem_a"), pending.held()).status == "active"
    assert held == {"mem_a": "mem_c", "mem_b": "mem_c"}  # a reader's snapshot stays as it was taken


def test_two_restatements_that_pick_each_other_keep_the_first_decided():
    pending = PendingSupersedes()
    assert pending.hold(["mem_a"], "mem_b") == ["mem_a"]
    assert pending.hold(["mem_b"], "mem_a") == []  # its survivor is on its way out
    assert pending.hold(["mem_a"], "mem_d") == []  # held already
    assert pending.hold(["mem_b"], "mem_c") == ["mem_b"]  # a chain: committed in the order held


def test_settle_waits_for_the_supersedes_held_when_it_began_only():
    pending = PendingSupersedes()
    pending.hold(["mem_a"], "mem_b")
    assert pending.settle(["mem_x"], timeout=0)
    assert not pending.settle(["mem_a"], timeout=0.05)
    assert not pending.settle(["mem_b"], timeout=0.05)  # the survivor's lineage is written with it too
    assert not pending.settle(None, timeout=0.05)

    def later() -> None:
        pending.hold(["mem_c"], "mem_d")  # held after the reader began: a stream never keeps it waiting
        pending.release(["mem_a"], "mem_b")

    threading.Timer(0.05, later).start()
    assert pending.settle(None, timeout=5)
    assert "mem_c" in pending.held()
