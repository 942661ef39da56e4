"""Group commit: concurrent callers share commits, each gets its own results or the commit's error."""

import threading
import time

import pytest

from storage.group_commit import GroupCommit


def test_a_lone_call_is_committed_at_once_with_its_results_in_order():
    group = GroupCommit(lambda items: [item * 2 for item in items])
    assert group.run([1, 2, 3]) == [2, 4, 6]
    assert (group.stats.commits, group.stats.items) == (1, 3)


def test_calls_that_arrive_while_a_commit_is_in_flight_share_the_next_commit():
    first_started, release = threading.Event(), threading.Event()
    batches = []

    def commit(items):
        batches.append(list(items))
        if len(batches) == 1:
            first_started.set()
            release.wait(5)
        return [f"done {item}" for item in items]

    group = GroupCommit(commit)
    results = {}

    def call(item):
        results[item] = group.run([item])

    leader = threading.Thread(target=call, args=(0,))
    leader.start()
    assert first_started.wait(5)
    followers = [threading.Thread(target=call, args=(n,)) for n in range(1, 11)]
    for thread in followers:
        thread.start()
    deadline = time.monotonic() + 5
    while len(group._pending) < 10 and time.monotonic() < deadline:  # all ten queued behind the commit
        time.sleep(0.01)
    release.set()
    for thread in [leader, *followers]:
        thread.join(5)
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
    first_started, release = threading.Event(), threading.Event()
    batches = []

    def commit(items):
        batches.append(list(items))
        if len(batches) == 1:
            first_started.set()
            release.wait(5)
        if "poison" in items:
            raise ValueError("cannot store poison")
        return [f"stored {item}" for item in items]

    group = GroupCommit(commit)
    outcomes = {}

    def call(item):
        try:
            outcomes[item] = group.run([item])
        except ValueError as exc:
            outcomes[item] = str(exc)

    leader = threading.Thread(target=call, args=("lead",))
    leader.start()
    assert first_started.wait(5)
    followers = [threading.Thread(target=call, args=(item,)) for item in ("a", "poison", "b")]
    for thread in followers:
        thread.start()
    deadline = time.monotonic() + 5
    while len(group._pending) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    for thread in [leader, *followers]:
        thread.join(5)
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
    first_started, release = threading.Event(), threading.Event()
    sizes = []

    def commit(items):
        sizes.append(len(items))
        if len(sizes) == 1:
            first_started.set()
            release.wait(5)
        return list(items)

    group = GroupCommit(commit, max_items=3)
    leader = threading.Thread(target=group.run, args=(["lead"],))
    leader.start()
    assert first_started.wait(5)
    followers = [threading.Thread(target=group.run, args=([n],)) for n in range(5)]
    for thread in followers:
        thread.start()
    deadline = time.monotonic() + 5
    while len(group._pending) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    for thread in [leader, *followers]:
        thread.join(5)
    assert sizes == [1, 3, 2]  # the five queued calls: three, then the two left
