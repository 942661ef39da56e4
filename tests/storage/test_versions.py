import json
import os
from datetime import UTC, datetime, timedelta

import lancedb
import pyarrow as pa
import pytest

from storage.recovery import U64_MAX
from storage.versions import (
    COARSE_FILE_CLOCK_SECONDS,
    FINE_FILE_CLOCK_SECONDS,
    KEEP_EVERY_VERSION,
    MAX_SIGHTINGS,
    SMALL_FILE_BYTES,
    NewestManifest,
    SupersededVersions,
    clean_up_clock_at_most,
    kept_before,
    manifest_name,
    newest_on_disk,
    oldest_kept,
    read_small_file,
)

T0 = datetime(2026, 5, 1, 12, tzinfo=UTC)
KEEP = timedelta(seconds=10)
MARGIN = timedelta(seconds=2)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_nothing_is_dropped_before_a_round_has_seen_a_version_replaced():
    versions = SupersededVersions()
    versions.observe("memories", at(0), 5)
    assert (
        versions.cleanup_older_than("memories", at(30), KEEP, MARGIN) is None
    )  # one sighting: nothing replaced


def test_an_old_version_that_was_newest_until_just_now_is_kept():
    # Idle for an hour at version 5, then writes: at 3,600 s version 9 is the newest. Version 5 is an hour
    # old but was replaced seconds ago; a read may still be on it.
    versions = SupersededVersions()
    versions.observe("memories", at(0), 5)
    versions.observe("memories", at(3_600), 9)
    assert versions.cleanup_older_than("memories", at(3_601), KEEP, MARGIN) is None


def test_versions_replaced_at_least_keep_ago_are_dropped():
    versions = SupersededVersions()
    versions.observe("memories", at(0), 5)
    versions.observe("memories", at(30), 9)
    # At 45 s the sighting at 30 s (version 9) is 15 s old, more than KEEP. The last sighting of an older
    # newest version is at 0 s (version 5): everything committed before 0 s is numbered 5 at most, and
    # was replaced by 30 s. Cut-off: committed before 0 s, less MARGIN for the seconds before LanceDB
    # reads its clock: older than (45 - 0) + 2 = 47 s.
    assert versions.cleanup_older_than("memories", at(45), KEEP, MARGIN) == timedelta(seconds=47)


def test_the_settled_sighting_must_be_keep_old():
    versions = SupersededVersions()
    versions.observe("memories", at(0), 5)
    versions.observe("memories", at(30), 9)
    assert (
        versions.cleanup_older_than("memories", at(35), KEEP, MARGIN) is None
    )  # the 30 s sighting is 5 s old


def test_the_latest_settled_sighting_and_the_last_older_one_before_it_set_the_cut():
    versions = SupersededVersions()
    for seconds, newest in [(0, 1), (10, 4), (20, 8), (30, 12), (40, 15)]:
        versions.observe("memories", at(seconds), newest)
    # now 42: settled sightings are those at or before 32 s; the latest is 30 s (version 12); the last
    # before it with an older version is 20 s (version 8). Cut: (42 - 20) + 2 = 24 s.
    assert versions.cleanup_older_than("memories", at(42), KEEP, MARGIN) == timedelta(seconds=24)


def test_sightings_of_one_version_keep_only_the_latest():
    versions = SupersededVersions()
    for seconds in (0, 30, 60):
        versions.observe("memories", at(seconds), 5)
    versions.observe("memories", at(90), 7)
    # The run of version 5 is remembered at 60 s: the cut is (101 - 60) + 2 = 43 s, which drops what
    # was committed before 58 s at 101 s, all of it numbered 5 at most.
    assert versions.cleanup_older_than("memories", at(101), KEEP, MARGIN) == timedelta(seconds=43)


def test_a_cut_forgets_the_sightings_before_it():
    versions = SupersededVersions()
    for seconds, newest in [(0, 1), (10, 4), (20, 8), (30, 12)]:
        versions.observe("memories", at(seconds), newest)
    assert versions.cleanup_older_than("memories", at(41), KEEP, MARGIN) == timedelta(
        seconds=23
    )  # cut at 20 s
    assert versions._seen["memories"] == [(at(20), 8), (at(30), 12)]


def test_tables_are_tracked_apart():
    versions = SupersededVersions()
    versions.observe("memories", at(0), 5)
    versions.observe("memories", at(30), 9)
    versions.observe("retrievals", at(30), 2)
    assert versions.cleanup_older_than("memories", at(45), KEEP, MARGIN) == timedelta(seconds=47)
    assert versions.cleanup_older_than("retrievals", at(45), KEEP, MARGIN) is None


def test_sightings_are_bounded():
    versions = SupersededVersions()
    for number in range(MAX_SIGHTINGS * 3):
        versions.observe("memories", at(number), number)
    assert len(versions._seen["memories"]) == MAX_SIGHTINGS
    # Only the last MAX_SIGHTINGS remain, and the cut still comes from the last two.
    first = MAX_SIGHTINGS * 2
    now = at(MAX_SIGHTINGS * 3 + 100)
    assert (
        versions.cleanup_older_than("memories", now, KEEP, MARGIN) == now - at(MAX_SIGHTINGS * 3 - 2) + MARGIN
    )
    assert versions._seen["memories"][0][0] >= at(first)


def test_a_version_check_is_noted_only_once_the_maintenance_thread_set_the_spacing():
    versions = SupersededVersions()
    versions.sighted("memories", at(0), 5)  # no maintenance thread yet: not noted
    assert versions._seen == {}
    versions.spacing = timedelta(seconds=1)
    versions.sighted("memories", at(1), 6)
    versions.sighted("memories", at(1.5), 7)  # half a second after the one before: not noted
    versions.sighted("memories", at(2.5), 9)
    assert versions._seen["memories"] == [(at(1), 6), (at(2.5), 9)]


def test_a_sighting_older_than_the_last_noted_or_of_an_older_version_is_not_noted():
    versions = SupersededVersions()
    versions.observe("memories", at(10), 8)
    versions.observe("memories", at(9), 9)  # looked before the last one noted (another thread)
    versions.observe("memories", at(11), 7)  # a table handle behind the manifests
    assert versions._seen["memories"] == [(at(10), 8)]


def test_a_round_longer_than_the_versions_are_kept_leaves_a_recent_cut_off_when_writes_sighted_versions():
    # A round at 0 s sees version 0; its compaction loses to the appends for a minute (50 a second), and
    # the next round starts at 60 s. Seen only by the rounds, nothing settles a cut-off: the round drops
    # nothing, and the next ones, slower with every version kept, fell further behind (the lock-in).
    rounds_only = SupersededVersions()
    rounds_only.observe("memories", at(0), 0)
    rounds_only.observe("memories", at(60), 3_000)
    assert rounds_only.cleanup_older_than("memories", at(60), KEEP, MARGIN) is None
    # The writes' version checks, a second apart: the latest settled sighting is 50 s (version 2,500), the
    # last before it of an older version 49 s (2,450). Cut: (60 - 49) + 2 = 13 s, whatever the round took.
    with_writes = SupersededVersions(spacing=timedelta(seconds=1))
    with_writes.observe("memories", at(0), 0)
    for second in range(1, 60):
        with_writes.sighted("memories", at(second), 50 * second)
    with_writes.observe("memories", at(60), 3_000)
    assert with_writes.cleanup_older_than("memories", at(60), KEEP, MARGIN) == timedelta(seconds=13)


# ---------------------------------------------------------------- the newest version from the manifests


def test_a_sighting_between_rounds_closer_than_the_spacing_to_the_one_before_is_not_noted():
    spaced = SupersededVersions()
    spaced.observe("memories", at(0), 5)
    spaced.observe("memories", at(0.5), 7, spacing=timedelta(seconds=1))  # too soon: not noted
    spaced.observe("memories", at(20), 9)
    # now 30: the latest settled sighting is 20 s (version 9); the last before it with an older version
    # is 0 s (version 5), the one at 0.5 s not having been noted. Cut: (30 - 0) + 2 = 32 s.
    assert spaced.cleanup_older_than("memories", at(30), KEEP, MARGIN) == timedelta(seconds=32)
    # A sighting of the version seen last replaces it whatever the spacing: only the latest can cut.
    spaced.observe("memories", at(20.5), 9, spacing=timedelta(seconds=1))
    assert spaced.cleanup_older_than("memories", at(30.5), KEEP, MARGIN) == timedelta(seconds=32.5)


def manifests(table_dir, written_ns: dict[int, int]) -> None:
    """Empty V2 manifests of these versions, dated as given (nanoseconds since the epoch)."""
    folder = table_dir / "_versions"
    folder.mkdir(parents=True, exist_ok=True)
    for version, written in written_ns.items():
        path = folder / manifest_name(version, v2=True)
        path.write_bytes(b"")
        os.utime(path, ns=(written, written))


CALLED = 1_800_000_000.0  # when an optimize was called, seconds since the epoch


def ns(seconds: float) -> int:
    return round(seconds * 1e9)


def test_the_oldest_version_kept_is_dated_by_its_manifest_and_what_the_file_system_may_cut_off(tmp_path):
    manifests(tmp_path / "t.lance", {9: ns(CALLED - 4.25), 12: ns(CALLED - 1.0), 10: ns(CALLED - 3.0)})
    assert oldest_kept(tmp_path / "t.lance") == (9, pytest.approx(CALLED - 4.25 + FINE_FILE_CLOCK_SECONDS))
    # Dated to the whole second: written up to a second or two later than that.
    manifests(tmp_path / "coarse.lance", {3: ns(CALLED - 4.0)})
    assert oldest_kept(tmp_path / "coarse.lance") == (
        3,
        pytest.approx(CALLED - 4.0 + COARSE_FILE_CLOCK_SECONDS),
    )
    assert oldest_kept(tmp_path / "missing.lance") is None


def test_the_clean_up_read_its_clock_at_most_when_the_oldest_version_it_kept_was_dated_plus_its_age(tmp_path):
    # Versions 9-12 kept after an optimize called at CALLED with versions 5-11 kept, 11 the newest, told to
    # drop what is older than 5 s. LanceDB drops every version committed before its clock less 5 s but the
    # newest, so version 9 (not the newest: 11 was) was committed after that: it read its clock at most at
    # 9's date + 5 s = CALLED - 4.25 + 0.05 + 5, 0.8 s after the call, which took 3 s in all (the
    # compaction first, then the clean-up reading every manifest, then the indexes).
    table = tmp_path / "t.lance"
    manifests(table, {9: ns(CALLED - 4.25), 10: ns(CALLED - 3.0), 11: ns(CALLED - 0.5), 12: ns(CALLED + 1.0)})
    older_than = timedelta(seconds=5)
    assert clean_up_clock_at_most(table, CALLED, (5, 11), older_than, took=3.0) == pytest.approx(0.8)
    # Never more than the call took.
    quick = tmp_path / "quick.lance"
    manifests(quick, {9: ns(CALLED - 4.25), 11: ns(CALLED - 0.5), 12: ns(CALLED + 0.3)})
    assert clean_up_clock_at_most(quick, CALLED, (5, 11), older_than, took=0.5) == 0.5


def test_a_clean_up_that_dropped_nothing_is_not_timed(tmp_path):
    # Every version kept as the call began is still there although the clean-up was given a cut-off:
    # nothing was that old, and its clock reading mattered to no version. Timed whole instead, such a round
    # (reading every version kept) widened the margin and the next cut-off, so the next round dropped
    # nothing either, and the versions piled up by one a write (2026-12-06).
    table = tmp_path / "t.lance"
    manifests(table, {9: ns(CALLED - 4.25), 10: ns(CALLED - 3.0), 11: ns(CALLED - 0.5), 12: ns(CALLED + 1.0)})
    assert clean_up_clock_at_most(table, CALLED, (9, 11), timedelta(seconds=5), took=3.0) is None
    assert clean_up_clock_at_most(table, CALLED, (8, 11), timedelta(seconds=5), took=3.0) == pytest.approx(
        0.8
    )
    # Told to keep every version (no cut-off known yet), it drops nothing by design: the call's time.
    assert clean_up_clock_at_most(table, CALLED, (9, 11), KEEP_EVERY_VERSION, took=3.0) == 3.0


def test_the_call_s_time_stands_when_nothing_it_kept_bounds_the_clock_better(tmp_path):
    table = tmp_path / "t.lance"
    # Only the version that was newest as the call began is left (the newest is kept however old), and
    # the commits after it: nothing dates the clean-up's clock.
    manifests(table, {11: ns(CALLED - 60.0), 12: ns(CALLED + 1.0)})
    assert clean_up_clock_at_most(table, CALLED, (5, 11), timedelta(seconds=5), took=3.0) == 3.0
    manifests(tmp_path / "u.lance", {9: ns(CALLED - 4.25), 11: ns(CALLED - 0.5), 12: ns(CALLED + 1.0)})
    # The versions before the call unknown (an object store), or nothing dropped by age (the clean-up told
    # to keep every version): the call's time.
    assert clean_up_clock_at_most(tmp_path / "u.lance", CALLED, None, timedelta(seconds=5), took=3.0) == 3.0
    assert clean_up_clock_at_most(tmp_path / "u.lance", CALLED, (5, 11), KEEP_EVERY_VERSION, took=3.0) == 3.0
    # A version kept that is dated before the clock could have been read: the dates are not to be trusted.
    assert (
        clean_up_clock_at_most(tmp_path / "u.lance", CALLED, (5, 11), timedelta(seconds=1), took=3.0) == 3.0
    )
    assert clean_up_clock_at_most(tmp_path / "u.lance", CALLED, (5, 11), timedelta(seconds=5), took=3.0) == (
        pytest.approx(0.8)
    )


def test_a_file_system_dated_by_another_clock_leaves_the_call_s_time(tmp_path):
    """A network or shared folder dates files by its own clock: a version committed during the call but
    dated before it began (a clock behind this process's) or after it ended, or none committed during the
    call, and the manifests' dates bound nothing."""
    older_than = timedelta(seconds=5)
    behind = tmp_path / "behind.lance"
    manifests(behind, {9: ns(CALLED - 4.25), 11: ns(CALLED - 0.5), 12: ns(CALLED - 0.2)})
    assert clean_up_clock_at_most(behind, CALLED, (5, 11), older_than, took=3.0) == 3.0
    ahead = tmp_path / "ahead.lance"
    manifests(ahead, {9: ns(CALLED - 4.25), 11: ns(CALLED - 0.5), 12: ns(CALLED + 3.5)})
    assert clean_up_clock_at_most(ahead, CALLED, (5, 11), older_than, took=3.0) == 3.0
    idle = tmp_path / "idle.lance"
    manifests(idle, {9: ns(CALLED - 4.25), 11: ns(CALLED - 0.5)})
    assert clean_up_clock_at_most(idle, CALLED, (5, 11), older_than, took=3.0) == 3.0


def test_a_real_clean_up_reads_its_clock_no_later_than_the_bound_says(tmp_path):
    """LanceDB as it is: versions 0.6 s apart, an optimize told to drop those older than 1.5 s, then two
    seconds more. The bound dates the clock reading within the call, before those seconds."""
    import time

    db = lancedb.connect(str(tmp_path))
    table = db.create_table("t", pa.table({"a": [0]}))
    for value in range(1, 4):
        time.sleep(0.6)
        table.add(pa.table({"a": [value]}))
    before = kept_before(tmp_path / "t.lance")
    called_at, started = time.time(), time.perf_counter()
    table.optimize(cleanup_older_than=timedelta(seconds=1.5))  # compacts the four fragments: a commit
    time.sleep(2.0)  # as a slow index update after the clean-up would
    took = time.perf_counter() - started
    kept = oldest_kept(tmp_path / "t.lance")
    assert kept is not None and kept[0] > 1  # the first versions went
    bound = clean_up_clock_at_most(tmp_path / "t.lance", called_at, before, timedelta(seconds=1.5), took)
    # At most the compaction and a gap between two versions (0.6 s): the two seconds after are not counted.
    assert bound is not None and 0.0 <= bound < took - 1.0


def test_the_newest_version_on_disk_is_the_table_s_own_after_appends_and_updates(tmp_path):
    db = lancedb.connect(str(tmp_path), read_consistency_interval=timedelta(0))
    table = db.create_table("t", pa.table({"a": [1]}))
    assert newest_on_disk(tmp_path / "t.lance") == table.version == 1
    table.add(pa.table({"a": [2]}))
    table.update(where="a = 1", values={"a": 3})
    other = lancedb.connect(str(tmp_path)).open_table("t")  # another process's commit counts the same
    other.add(pa.table({"a": [4]}))
    assert newest_on_disk(tmp_path / "t.lance") == table.version == 4


def test_both_manifest_namings_are_read_and_other_files_ignored(tmp_path):
    versions = tmp_path / "v2.lance" / "_versions"
    versions.mkdir(parents=True)
    for version in (3, 12, 7):  # V2: u64::MAX - version, 20 digits, the newest sorts first
        (versions / f"{U64_MAX - version:020d}.manifest").write_bytes(b"")
    # Lance's files on the way to a commit, and its hint, name no committed version.
    (versions / f"{U64_MAX - 13:020d}.manifest#1").write_bytes(b"")
    (versions / ".tmpxw3t6m").write_bytes(b"")
    (versions / "latest_version_hint.json").write_text('{"version": 99}')
    assert newest_on_disk(tmp_path / "v2.lance") == 12
    older = tmp_path / "v1.lance" / "_versions"
    older.mkdir(parents=True)
    for version in (2, 10, 9):  # V1: the version itself
        (older / f"{version}.manifest").write_bytes(b"")
    assert newest_on_disk(tmp_path / "v1.lance") == 10
    # A detached version's manifest is as long as a V2 name but names no version of the table's history.
    detached = f"d{7:019d}.manifest"
    assert len(detached) == len(f"{U64_MAX:020d}.manifest")
    (older / detached).write_bytes(b"")
    assert newest_on_disk(tmp_path / "v1.lance") == 10


def test_a_table_with_no_manifest_folder_or_none_in_it_says_nothing(tmp_path):
    assert newest_on_disk(tmp_path / "missing.lance") is None
    (tmp_path / "empty.lance" / "_versions").mkdir(parents=True)
    assert newest_on_disk(tmp_path / "empty.lance") is None


def test_the_newest_manifest_follows_commits_with_one_listing(tmp_path):
    db = lancedb.connect(str(tmp_path), read_consistency_interval=timedelta(0))
    table = db.create_table("t", pa.table({"a": [1]}))
    newest = NewestManifest(tmp_path / "t.lance")
    assert newest.read() == 1
    other = lancedb.connect(str(tmp_path)).open_table("t")  # another process's commits count the same
    for value in range(2, 7):
        other.add(pa.table({"a": [value]}))
        assert newest.read() == table.version == value
    table.update(where="a = 1", values={"a": 0})
    table.add(pa.table({"a": [9]}))  # two commits between reads: both followed
    assert newest.read() == table.version == 8
    assert newest.listings == 1


def _committed(versions, *numbers, v2=True, hint=True):
    """Manifests of these versions, as Lance names them, and its hint naming the last."""
    for version in numbers:
        (versions / (f"{U64_MAX - version:020d}.manifest" if v2 else f"{version}.manifest")).write_bytes(b"")
    if hint:
        (versions / "latest_version_hint.json").write_text(json.dumps({"version": numbers[-1]}))


def _dropped(versions, *numbers):
    for version in numbers:
        (versions / f"{U64_MAX - version:020d}.manifest").unlink()


def test_the_newest_manifest_probes_from_the_hint_never_across_a_gap(tmp_path):
    versions = tmp_path / "t.lance" / "_versions"
    versions.mkdir(parents=True)
    _committed(versions, 1, 2, 3, 4, 5, 6)
    newest = NewestManifest(tmp_path / "t.lance")
    assert newest.read() == 6 and newest.listings == 1  # the first read learns the naming
    # Long after, 7 and 8 were committed and 7 dropped before 6 (a review: a probe from the version found
    # last, 6, stopped at the gap and read 6 while 8 was the newest).
    _committed(versions, 7, 8)
    _dropped(versions, 7)
    assert newest.read() == 8
    _committed(versions, 9, hint=False)  # the instant between a commit and its hint: one step on
    assert newest.read() == 9
    assert newest.listings == 1


def test_the_newest_manifest_lists_when_the_hint_is_missing_or_names_a_version_gone(tmp_path):
    versions = tmp_path / "t.lance" / "_versions"
    versions.mkdir(parents=True)
    _committed(versions, 1, 2, 3)
    newest = NewestManifest(tmp_path / "t.lance")
    assert newest.read() == 3
    # Start-up recovery set the broken newest manifest aside, and its hint with it.
    _dropped(versions, 3)
    (versions / "latest_version_hint.json").unlink()
    assert newest.read() == 2 and newest.listings == 2
    _committed(versions, 3, 4)
    (versions / "latest_version_hint.json").write_text('{"version": 7}')  # names nothing on disk
    assert newest.read() == 4 and newest.listings == 3
    (versions / "latest_version_hint.json").write_text("{not json")
    assert newest.read() == 4 and newest.listings == 4


def test_the_newest_manifest_reads_v1_names_and_an_empty_folder_as_nothing(tmp_path):
    versions = tmp_path / "t.lance" / "_versions"
    versions.mkdir(parents=True)
    newest = NewestManifest(tmp_path / "t.lance")
    assert newest.read() is None
    _committed(versions, 1, 2, v2=False)
    assert newest.read() == 2
    _committed(versions, 3, v2=False)
    assert newest.read() == 3
    assert newest.listings == 2


@pytest.mark.parametrize("size", [0, 15, SMALL_FILE_BYTES, SMALL_FILE_BYTES + 1, 3 * SMALL_FILE_BYTES + 7])
def test_a_small_file_is_read_whole_whatever_its_size(tmp_path, size):
    written = bytes(range(256)) * (size // 256 + 1)
    (tmp_path / "hint").write_bytes(written[:size])
    assert read_small_file(tmp_path / "hint") == written[:size]


def test_a_missing_small_file_raises_as_a_read_of_it_would(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_small_file(tmp_path / "gone")
