"""Write work written down first (storage.unfinished): credits being handed on and consolidations owed, a
process's own file, what a process that is gone left unfinished, and nothing on an object store."""

import fcntl
from pathlib import Path

import pytest

from storage.records import Scope
from storage.unfinished import (
    UNFINISHED_DIR,
    DecidedSupersede,
    HandOn,
    OwedConsolidation,
    StatusChange,
    UnfinishedWrites,
)

SCOPE = Scope("acme", "web")


def died(journal: UnfinishedWrites) -> None:
    """Its process dies: the lock goes with it, the file stays."""
    journal._file.close()
    journal._file = None


def test_what_a_stopped_process_handed_on_and_never_finished_is_found_by_the_next(tmp_path):
    gone = UnfinishedWrites(tmp_path)
    first = gone.begin(HandOn(SCOPE, "mem_b", (("mem_a", True),)))
    second = gone.begin(HandOn(SCOPE, "mem_d", (("mem_c", False), ("mem_e", True))))
    gone.end(first)
    died(gone)

    starting = UnfinishedWrites(tmp_path)
    [(path, unfinished)] = starting.orphans()
    assert second is not None and unfinished == [HandOn(SCOPE, "mem_d", (("mem_c", False), ("mem_e", True)))]
    starting.discard(path)
    assert starting.orphans() == []


def test_a_running_processs_file_is_not_an_orphan_and_its_own_file_goes_when_all_ran(tmp_path):
    running = UnfinishedWrites(tmp_path)
    number = running.begin(HandOn(SCOPE, "mem_b", (("mem_a", True),)))
    assert UnfinishedWrites(tmp_path).orphans() == []  # locked by its process
    running.end(number)
    running.close()
    assert list((tmp_path / UNFINISHED_DIR).iterdir()) == []


def test_a_file_left_with_carries_unfinished_is_kept_at_close(tmp_path):
    running = UnfinishedWrites(tmp_path)
    running.begin(HandOn(SCOPE, "mem_b", (("mem_a", True),)))
    running.close()  # a close that gave up on a carry: left for the next start
    [(_, unfinished)] = UnfinishedWrites(tmp_path).orphans()
    assert [hand_on.heir_id for hand_on in unfinished] == ["mem_b"]


def left_by_a_dead_process(tmp_path, lines: str, folder: str = UNFINISHED_DIR) -> None:
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "123-dead.jsonl").write_text(lines)


def test_a_line_cut_short_by_the_crash_is_skipped(tmp_path, caplog):
    left_by_a_dead_process(
        tmp_path,
        '{"hand_on": 0, "org": "acme", "project": "web", "heir": "mem_b", "losers": [["mem_a", true]]}\n'
        '{"hand_on": 1, "org": "acme", "pro',
    )
    [(_, unfinished)] = UnfinishedWrites(tmp_path).orphans()
    assert [hand_on.heir_id for hand_on in unfinished] == ["mem_b"]
    assert "skipped a line that is not an entry" in caplog.text


def test_an_object_store_writes_nothing_down(tmp_path):
    journal = UnfinishedWrites(None)
    assert journal.begin(HandOn(SCOPE, "mem_b", (("mem_a", True),))) is None
    assert journal.orphans() == []
    journal.close()


def test_a_file_locked_by_another_holder_is_left_alone(tmp_path):
    folder = tmp_path / UNFINISHED_DIR
    folder.mkdir()
    held = open(folder / "999-live.jsonl", "a+")  # noqa: SIM115
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert UnfinishedWrites(tmp_path).orphans() == []
    finally:
        held.close()


def test_a_file_is_locked_before_a_starting_server_can_see_it(tmp_path):
    journal = UnfinishedWrites(tmp_path)
    journal.begin(HandOn(SCOPE, "mem_b", (("mem_a", True),)))
    [own] = (tmp_path / UNFINISHED_DIR).iterdir()
    assert own.suffix == ".jsonl"  # renamed once locked: the name orphans() reads never stood unlocked
    assert UnfinishedWrites(tmp_path).orphans() == []
    journal.close()


def test_a_carry_that_ends_after_a_close_that_gave_up_is_not_an_error(tmp_path):
    journal = UnfinishedWrites(tmp_path)
    number = journal.begin(HandOn(SCOPE, "mem_b", (("mem_a", True),)))
    journal.close()
    journal.end(number)  # the carry finished after all: nothing to write it in


def test_a_long_file_is_written_again_with_only_the_carries_still_open(tmp_path, monkeypatch):
    import storage.unfinished as unfinished

    monkeypatch.setattr(unfinished, "REWRITE_AFTER_LINES", 6)
    journal = UnfinishedWrites(tmp_path)
    held = journal.begin(HandOn(SCOPE, "mem_held", (("mem_a", True),)))  # never ends: the file never empties
    for index in range(4):
        journal.end(journal.begin(HandOn(SCOPE, f"mem_{index}", (("mem_a", True),))))
    [own] = (tmp_path / UNFINISHED_DIR).iterdir()
    assert len(own.read_text().splitlines()) < 6
    died(journal)
    [(_, unfinished)] = UnfinishedWrites(tmp_path).orphans()
    assert held is not None and [hand_on.heir_id for hand_on in unfinished] == ["mem_held"]


def test_a_process_killed_while_its_long_file_is_written_again_loses_nothing_open(tmp_path, monkeypatch):
    """The file written again goes in place by a rename: a kill -9 before it (the new file written, not yet
    renamed) leaves the old file whole, never an emptied one."""
    import storage.unfinished as unfinished

    monkeypatch.setattr(unfinished, "REWRITE_AFTER_LINES", 3)
    journal = UnfinishedWrites(tmp_path)
    journal.begin(HandOn(SCOPE, "mem_held", (("mem_a", True),)))  # never ends
    killed = []

    def killed_before_the_rename(source, target):
        killed.append(Path(target).read_text())
        raise KeyboardInterrupt  # the process stops here, as a kill -9 would stop it

    monkeypatch.setattr(unfinished.os, "rename", killed_before_the_rename)
    begun = journal.begin(HandOn(SCOPE, "mem_1", (("mem_a", True),)))
    journal.begin(HandOn(SCOPE, "mem_2", (("mem_a", True),)))
    with pytest.raises(KeyboardInterrupt):
        journal.end(begun)  # the file has 3 lines: written again, with the two still open
    monkeypatch.undo()
    assert killed and "mem_held" in killed[0]  # what the path held at the moment of the kill
    died(journal)
    [(_, unfinished_entries)] = UnfinishedWrites(tmp_path).orphans()
    assert {hand_on.heir_id for hand_on in unfinished_entries} >= {"mem_held", "mem_2"}


def test_consolidations_owed_and_hand_ons_come_back_as_they_were_written(tmp_path):
    gone = UnfinishedWrites(tmp_path)
    gone.begin(OwedConsolidation(SCOPE, ("mem_n",)))
    done = gone.begin(OwedConsolidation(SCOPE, ("mem_x", "mem_y")))
    gone.begin(OwedConsolidation(SCOPE, ("mem_new",), replaces="mem_old"))
    gone.begin(HandOn(SCOPE, "mem_b", (("mem_a", True),)))
    gone.end(done)
    died(gone)
    [(_, unfinished)] = UnfinishedWrites(tmp_path).orphans()
    assert unfinished == [
        OwedConsolidation(SCOPE, ("mem_n",)),
        OwedConsolidation(SCOPE, ("mem_new",), replaces="mem_old"),
        HandOn(SCOPE, "mem_b", (("mem_a", True),)),
    ]


def test_a_batch_written_down_at_once_is_numbered_in_order_and_ends_one_by_one(tmp_path):
    gone = UnfinishedWrites(tmp_path)
    before = gone.begin(HandOn(SCOPE, "mem_b", (("mem_a", True),)))
    numbers = gone.begin_many([OwedConsolidation(SCOPE, (f"mem_{n}",)) for n in range(3)])
    after = gone.begin(OwedConsolidation(SCOPE, ("mem_z",)))
    assert numbers == [before + 1, before + 2, before + 3] and after == before + 4
    assert gone.begin_many([]) == []
    gone.end(numbers[1])
    died(gone)
    [(_, unfinished)] = UnfinishedWrites(tmp_path).orphans()
    assert unfinished == [
        HandOn(SCOPE, "mem_b", (("mem_a", True),)),
        OwedConsolidation(SCOPE, ("mem_0",)),
        OwedConsolidation(SCOPE, ("mem_2",)),
        OwedConsolidation(SCOPE, ("mem_z",)),
    ]


class CountedFlushes:
    """The journal's file, counting its flushes (each a write of the file, which gives up the interpreter lock)."""

    def __init__(self, file):
        self.file, self.flushes = file, 0

    def flush(self):
        self.flushes += 1
        self.file.flush()

    def __getattr__(self, name):
        return getattr(self.file, name)


def test_the_file_is_emptied_when_nothing_is_open_and_the_next_entry_starts_it_again(tmp_path):
    journal = UnfinishedWrites(tmp_path)
    for n in range(3):
        journal.end(journal.begin(OwedConsolidation(SCOPE, (f"mem_{n}",))))
        assert journal._path.read_text() == ""
    journal.begin(OwedConsolidation(SCOPE, ("mem_last",)))
    lines = journal._path.read_text().splitlines()
    assert len(lines) == 1 and '"mem_last"' in lines[0]  # at the start: nothing left of the earlier lines
    died(journal)
    assert [entries for _, entries in UnfinishedWrites(tmp_path).orphans()] == [
        [OwedConsolidation(SCOPE, ("mem_last",))]
    ]


def test_a_batch_is_written_in_one_flush(tmp_path):
    journal = UnfinishedWrites(tmp_path)
    journal.begin(OwedConsolidation(SCOPE, ("mem_first",)))  # the file opened
    counted = journal._file = CountedFlushes(journal._file)
    journal.begin_many([OwedConsolidation(SCOPE, (f"mem_{n}",)) for n in range(30)])
    assert counted.flushes == 1
    journal._file = counted.file
    journal.close()


def test_the_hand_ons_an_earlier_release_left_are_found(tmp_path):
    left_by_a_dead_process(  # where the release before wrote them, without a kind
        tmp_path,
        '{"hand_on": 0, "org": "acme", "project": "web", "heir": "mem_b", "losers": [["mem_a", true]]}\n'
        '{"hand_on": 1, "org": "acme", "project": "web", "heir": "mem_d", "losers": [["mem_c", false]]}\n'
        '{"done": 0}\n',
        folder=".memoria-hand-ons",
    )
    journal = UnfinishedWrites(tmp_path)
    [(path, unfinished)] = journal.orphans()
    assert unfinished == [HandOn(SCOPE, "mem_d", (("mem_c", False),))]
    journal.discard(path)
    assert journal.orphans() == []


def test_a_line_of_an_unknown_kind_is_skipped(tmp_path, caplog):
    left_by_a_dead_process(
        tmp_path,
        '{"n": 0, "kind": "compaction", "org": "acme", "project": "web"}\n'
        '{"n": 1, "kind": "consolidation", "org": "acme", "project": "web", "memories": ["mem_n"], "replaces": null}\n',
    )
    [(_, unfinished)] = UnfinishedWrites(tmp_path).orphans()
    assert unfinished == [OwedConsolidation(SCOPE, ("mem_n",))]
    assert "skipped a line that is not an entry" in caplog.text


def test_a_decided_supersede_comes_back_as_it_was_decided(tmp_path):
    gone = UnfinishedWrites(tmp_path)
    decided = DecidedSupersede(SCOPE, ("mem_a", "mem_b"), "mem_c", "supersede", "llm:m", "claude", "ses_1")
    gone.begin(decided)
    died(gone)
    [(_, unfinished)] = UnfinishedWrites(tmp_path).orphans()
    assert unfinished == [decided]


def test_status_changes_come_back_as_they_were_begun(tmp_path):
    gone = UnfinishedWrites(tmp_path)
    retract = StatusChange(
        SCOPE, ("mem_a", "mem_b"), "retract", "forget", "claude", "ses_1", "2026-12-02T10:00:00+00:00"
    )
    amend = StatusChange(
        SCOPE, ("mem_c",), "amend", "explicit", "claude", "ses_1", "2026-12-02T10:00:01+00:00", "ab12"
    )
    gone.begin(retract)
    gone.begin(amend)
    died(gone)
    [(_, unfinished)] = UnfinishedWrites(tmp_path).orphans()
    assert unfinished == [retract, amend]


def test_an_opening_file_a_dead_process_left_is_deleted_and_one_in_use_is_not(tmp_path):
    import os

    folder = tmp_path / UNFINISHED_DIR
    folder.mkdir()
    abandoned, fresh, held = (folder / f"{name}.opening" for name in ("gone", "new", "held"))
    for path in (abandoned, fresh, held):
        path.write_text('{"n": 0}\n')
    for path in (abandoned, held):
        os.utime(path, (1_000_000_000, 1_000_000_000))  # long ago
    with open(held) as holding:
        fcntl.flock(holding, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its process is renaming it
        assert UnfinishedWrites(tmp_path).orphans() == []
        assert (abandoned.exists(), fresh.exists(), held.exists()) == (False, True, True)


def test_orphans_one_server_runs_are_skipped_by_another_until_it_is_done(tmp_path):
    """A review: two servers starting on one store both ran a dead process's entries (its file's lock was let
    go once read), and both recorded the same supersede."""
    gone = UnfinishedWrites(tmp_path)
    entry = OwedConsolidation(SCOPE, ("mem_a",))
    gone.begin(entry)
    died(gone)
    first, second = UnfinishedWrites(tmp_path), UnfinishedWrites(tmp_path)
    with first.claimed() as claimed:
        assert [entries for _, entries in claimed] == [[entry]]
        assert second.orphans() == []  # held while the first runs them
        first.discard(claimed[0][0])
    assert second.orphans() == []  # run and deleted
