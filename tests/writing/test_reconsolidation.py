"""Consolidation run again with this release's rules (writing.reconsolidation): what an earlier release's
rules missed is found, oldest first; a second run finds nothing new; nothing decided before is undone."""

import time
from datetime import UTC, datetime, timedelta

from storage.records import Scope
from tests.helpers import make_runtime, settings_for
from tools.common import Caller
from tools.remember import RememberInput, remember
from writing.reconsolidation import Reconsolidated, consolidate_again

SCOPE = Scope("default", "default")


def written_unconsolidated(path, texts: list[str]) -> list[str]:
    """A store whose memories no consolidation examined as they were written (as an earlier release's rules
    missed what they say of each other)."""
    runtime = make_runtime(settings_for(path, consolidation_enabled=False))
    try:
        return [
            remember(RememberInput(content=text), runtime, Caller("claude-code", f"ses_{n}")).id
            for n, text in enumerate(texts)
        ]
    finally:
        runtime.close()


def test_a_revision_an_earlier_release_missed_is_found_and_a_later_restatement_of_the_old_value_disputed(
    tmp_path,
):
    old, new, again, cat = written_unconsolidated(
        tmp_path / "db",
        [
            "The billing API listens on port 8080.",
            "The billing API now listens on port 9090.",
            "Billing API listens on port 8080",  # the old value said again, after the revision
            "The office cat is called Miso.",
        ],
    )
    runtime = make_runtime(settings_for(tmp_path / "db"))
    try:
        found = consolidate_again(runtime.writer, SCOPE)
        assert found == Reconsolidated(examined=4, superseded=1, disputed=1)
        store = runtime.store
        assert (store.get_memory(old).status, store.get_memory(old).replaced_by) == ("superseded", new)
        assert {store.get_memory(i).status for i in (new, again, cat)} == {"active"}
        assert [set(pair) for pair in store.open_contradiction_pairs(SCOPE)] == [{new, again}]
        # Again: the superseded memory is not examined, nothing new is found, and nothing is recorded twice
        # (a review: each run wrote every keep_both event again).
        events = len(store.lineage(SCOPE, [old, new, again, cat]))
        assert consolidate_again(runtime.writer, SCOPE) == Reconsolidated(
            examined=3, superseded=0, disputed=0
        )
        assert len(store.lineage(SCOPE, [old, new, again, cat])) == events
    finally:
        runtime.close()


def test_a_memory_past_its_expiry_is_not_examined_and_supersedes_nothing(tmp_path):
    """A review: an expired "now listens on port 9090" superseded the live "listens on port 8080", and
    maintenance then retracted it, leaving nothing on the subject."""
    runtime = make_runtime(settings_for(tmp_path / "db", consolidation_enabled=False))
    try:
        old = remember(
            RememberInput(content="The billing API listens on port 8080."), runtime, Caller("a", "s1")
        ).id
        soon = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
        newer = RememberInput(content="The billing API now listens on port 9090.", expires_at=soon)
        remember(newer, runtime, Caller("a", "s2"))
    finally:
        runtime.close()
    time.sleep(1.2)  # past its expiry
    runtime = make_runtime(settings_for(tmp_path / "db"))
    try:
        assert consolidate_again(runtime.writer, SCOPE) == Reconsolidated(
            examined=1, superseded=0, disputed=0
        )
        assert runtime.store.get_memory(old).status == "active"
    finally:
        runtime.close()


def test_pairs_already_judged_distinct_are_not_recorded_again(tmp_path):
    """A review: every run wrote each keep_both event again (3, 6, 9, 12 events over three runs)."""
    runtime = make_runtime(settings_for(tmp_path / "db"))  # consolidation on, as a current release writes
    try:
        texts = [
            "Staging deploys run make deploy-staging from the repo root.",
            "Production deploys run make deploy-prod from the repo root.",
            "Preview deploys run make deploy-preview from the repo root.",
        ]
        ids = [
            remember(RememberInput(content=text), runtime, Caller("a", f"s{n}")).id
            for n, text in enumerate(texts)
        ]

        def kept() -> int:
            return sum(1 for event in runtime.store.lineage(SCOPE, ids) if event.action == "keep_both")

        recorded = kept()
        assert recorded > 0
        for _ in range(2):
            consolidate_again(runtime.writer, SCOPE)
            assert kept() == recorded
    finally:
        runtime.close()
