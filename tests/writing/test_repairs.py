"""Repairs of what an earlier release's rules decided (writing.repairs): an artifact that the old
next-version rule superseded by another artifact is active again, once, with lineage saying why."""

import pytest

from tools.common import Caller
from tools.remember import RememberInput, remember
from writing.consolidation import service as consolidation_service
from writing.repairs import REPAIR_RESOLVER, misread_versions, restore_misread_versions

LEDGER = "Health check for ledger: curl -fsS http://localhost:8017/healthz returns ok."
BILLING = "Health check for billing-api: curl -fsS http://localhost:8002/healthz returns ok."


def artifact(runtime, content: str, session: str):
    return remember(RememberInput(content=content, kind="artifact"), runtime, Caller("claude-code", session))


@pytest.fixture
def old_rule(monkeypatch):
    """The next-version rule before 2026-12-06: no title kept two artifacts apart."""
    monkeypatch.setattr(consolidation_service, "names_another_artifact", lambda older, newer: False)
    return monkeypatch


def test_an_artifact_the_old_rule_superseded_by_another_artifact_is_active_again(runtime, old_rule):
    ledger = artifact(runtime, LEDGER, "ses_1").id
    billing = artifact(runtime, BILLING, "ses_2")
    assert billing.consolidation.version_of == ledger  # what the earlier release did
    old_rule.undo()

    assert restore_misread_versions(runtime.writer) == [ledger]

    store = runtime.store
    restored, newer = store.get_memory(ledger), store.get_memory(billing.id)
    assert (restored.status, restored.replaced_by) == ("active", None)
    assert newer.status == "active" and newer.version_of is None
    [event] = [e for e in store.lineage(restored.scope, [ledger]) if e.action == "restore"]
    assert event.resolver == REPAIR_RESOLVER and billing.id in event.reason
    assert misread_versions(runtime.writer) == []


def test_every_start_looks_again_and_finds_what_was_misread_since(runtime, monkeypatch):
    assert restore_misread_versions(runtime.writer) == []
    # Superseded the old way afterwards (a server of the earlier release still running on the store).
    monkeypatch.setattr(consolidation_service, "names_another_artifact", lambda older, newer: False)
    ledger = artifact(runtime, LEDGER, "ses_1").id
    artifact(runtime, BILLING, "ses_2")
    monkeypatch.undo()
    assert restore_misread_versions(runtime.writer) == [ledger]
    assert restore_misread_versions(runtime.writer) == []  # repaired: nothing left to find


def test_in_a_chain_the_artifact_of_the_same_title_is_versioned_again(runtime, old_rule):
    """A review: ledger's check, billing-api's, then ledger's again, each read as the next of the one before;
    restoring the first two left all three active, the first ledger check beside its own next version."""
    first = artifact(runtime, LEDGER, "ses_1").id
    billing = artifact(runtime, BILLING, "ses_2").id
    again = artifact(runtime, LEDGER.replace("8017", "8018"), "ses_3").id
    assert runtime.store.get_memory(again).version_of == billing
    old_rule.undo()

    assert sorted(restore_misread_versions(runtime.writer)) == sorted([first, billing])
    store = runtime.store
    assert (store.get_memory(first).status, store.get_memory(first).replaced_by) == ("superseded", again)
    assert store.get_memory(again).version_of == first
    assert {store.get_memory(i).status for i in (billing, again)} == {"active"}
    assert store.get_memory(billing).version_of is None


def test_a_real_next_version_stays_superseded(runtime):
    first = artifact(runtime, LEDGER, "ses_1").id
    newer = artifact(runtime, LEDGER.replace("8017", "8018"), "ses_2")
    assert newer.consolidation.version_of == first

    assert restore_misread_versions(runtime.writer) == []
    assert runtime.store.get_memory(first).status == "superseded"
    assert runtime.store.get_memory(newer.id).version_of == first
