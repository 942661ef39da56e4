"""Group commit: concurrent callers share commits, each gets its own results or the commit's error."""

import threading
import time

import pytest

from storage.group_commit import GroupCommit


class FirstCommitHeld:
    """A commit function whose first commit waits until it is released: calls made meanwhile queue."""

    def __init__(self, commit) -> None:
        self._commit = commit
        self.batches: list[list] = []
        self.started, self.release = threading.Event(), threading.Event()

    def __call__(self, items):
        self.batches.append(list(items))
        if len(self.batches) == 1:
            self.started.set()
            self.release.wait(5)
        return self._commit(items)


def queued_behind_the_first(group, held, call, lead, followers) -> None:
    """``call(lead)`` starts a commit that waits; every ``call(follower)`` queues behind it; then it goes."""
    leader = threading.Thread(target=call, args=(lead,))
    leader.start()
    assert held.started.wait(5)
    threads = [threading.Thread(target=call, args=(item,)) for item in followers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while len(group._pending) < len(followers) and time.monotonic() < deadline:  # all queued
        time.sleep(0.01)
    held.release.set()
    for thread in [leader, *threads]:
        thread.join(5)


def test_a_lone_call_is_committed_at_once_with_its_results_in_order():
    group = GroupCommit(lambda items: [item * 2 for item in items])
    assert group.run([1, 2, 3]) == [2, 4, 6]
    assert (group.stats.commits, group.stats.items) == (1, 3)


def test_calls_that_arrive_while_a_commit_is_in_flight_share_the_next_commit():
    held = FirstCommitHeld(lambda items: [f"done {item}" for item in items])
    group = GroupCommit(held)
    results = {}

    def call(item):
        results[item] = group.run([item])

    queued_behind_the_first(group, held, call, 0, range(1, 11))
    batches = held.batches
    assert batches[0] == [0] and sorted(batches[1]) == list(range(1, 11)) and len(batches) == 2
    assert results == {n: [f"done {n}"] for n in range(11)}


def test_every_caller_of_a_failed_commit_gets_its_error_and_the_next_commit_still_runs():
    calls = []

    def commit(items):
        calls.append(list(items))
        if len(calls) == 1:
            raise OSError("disk full")
        return list(items)

    group = GroupCommit(commit)
    with pytest.raises(OSError, match="disk full"):
        group.run(["a"])
    assert group.run(["b"]) == ["b"]


def test_a_bad_item_fails_only_its_own_caller_not_the_others_of_its_batch():
    def commit(items):
        if "poison" in items:
            raise ValueError("cannot store poison")
        return [f"stored {item}" for item in items]

    held = FirstCommitHeld(commit)
    group = GroupCommit(held)
    outcomes = {}

    def call(item):
        try:
            outcomes[item] = group.run([item])
        except ValueError as exc:
            outcomes[item] = str(exc)

    queued_behind_the_first(group, held, call, "lead", ("a", "poison", "b"))
    batches = held.batches
    # The shared commit of the three failed; each was then committed alone.
    assert sorted(batches[1]) == ["a", "b", "poison"] and sorted(map(tuple, batches[2:])) == [
        ("a",),
        ("b",),
        ("poison",),
    ]
    assert outcomes == {
        "lead": ["stored lead"],
        "a": ["stored a"],
        "b": ["stored b"],
        "poison": "cannot store poison",
    }


def test_a_commit_takes_no_more_than_its_limit_and_the_rest_follow():
    held = FirstCommitHeld(list)
    group = GroupCommit(held, max_items=3)
    queued_behind_the_first(group, held, lambda item: group.run([item]), "lead", range(5))
    sizes = [len(batch) for batch in held.batches]
    assert sizes == [1, 3, 2]  # the five queued calls: three, then the two left
