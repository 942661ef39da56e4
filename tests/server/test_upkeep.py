"""A maintenance round (``server.upkeep.maintenance_round``): what it does to the store, and in what order."""

from datetime import timedelta

from server.upkeep import maintenance_round
from storage.records import Scope
from tests.helpers import make_runtime, settings_for
from tools.common import Caller
from tools.remember import RememberInput, remember

SCOPE = Scope("default", "default")


def fragments(runtime) -> int:
    return runtime.store._memories.stats()["fragment_stats"]["num_fragments"]


def test_a_round_compacts_the_appends_before_it_scans_for_expired_memories(tmp_path):
    runtime = make_runtime(settings_for(tmp_path / "db", compaction_min_fragments=4))
    try:
        note = remember(
            RememberInput(content="The staging deploy is frozen this afternoon", protection_tier="ephemeral"),
            runtime,
            Caller("claude-code", "ses_1"),
        )
        for index in range(8):
            remember(
                RememberInput(content=f"small write number {index}"), runtime, Caller("claude-code", "ses_1")
            )
        assert fragments(runtime) >= 9
        runtime.clock = lambda: runtime.store.get_memory(note.id, SCOPE).expires_at + timedelta(seconds=1)
        scanned_over: list[int] = []
        scan = runtime.store.expired

        def expired(now):  # the store's scan, noting how many fragments it had to read
            scanned_over.append(fragments(runtime))
            return scan(now)

        runtime.store.expired = expired
        done = maintenance_round(runtime)
        assert "memories" in " ".join(done)
        assert len(scanned_over) == 1 and scanned_over[0] < 4  # compacted first (the retraction adds one)
        assert runtime.store.get_memory(note.id, SCOPE).status == "retracted"
    finally:
        runtime.close()


def test_the_log_of_a_round_counts_the_memories_past_their_expiry_whatever_their_tier(tmp_path, caplog):
    """A trial: a standard memory given an expiry was logged as "retracted 1 expired ephemeral memories"."""
    import logging

    runtime = make_runtime(settings_for(tmp_path / "db"))
    try:
        until = (runtime.clock() + timedelta(hours=1)).isoformat()
        note = remember(
            RememberInput(content="The staging database is frozen until the release", expires_at=until),
            runtime,
            Caller("claude-code", "ses_1"),
        )
        runtime.clock = lambda: runtime.store.get_memory(note.id, SCOPE).expires_at + timedelta(seconds=1)
        with caplog.at_level(logging.INFO, logger="server.upkeep"):
            maintenance_round(runtime)
        assert "retracted 1 memory past its expiry" in caplog.messages
    finally:
        runtime.close()
