"""Repairs of what an earlier release's rules decided and today's rules would not: run as a server starts
(``server.state``) and by ``memoria consolidate``, each idempotent (what was repaired reads as repaired; two
servers starting on one store at once restore a memory once: ``MemoryStore.reactivate`` changes only a
superseded one). Every start looks again, one read of the lineage of one kind: a server of the earlier
release still running on the store, or an import of its export, may have misread more since.

- **Artifacts superseded by another artifact.** Until 2026-12-07 an artifact was read as the next version
  of any artifact whose words it shared enough ("Health check for billing-api: curl ... :8002" superseded
  "Health check for ledger: curl ... :8017"); a trial upgrading a two-month store found 8 of a project's 10
  health checks superseded, recall for each finding another service's. The rule now keeps two artifacts
  whose titles each name a thing of their own apart (``names_another_artifact``); a memory it superseded
  so is active again, with a ``restore`` event saying why, and the newer one is no longer linked to it as
  its next version."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from storage.records import Scope
from writing.consolidation.report import Actor
from writing.consolidation.rules import names_another_artifact

if TYPE_CHECKING:
    from storage.records import MemoryRecord
    from writing.service import WriteService

log = logging.getLogger(__name__)

ARTIFACT_VERSION = "rules:artifact-version"  # the resolver of a supersede by the next version of an artifact
REPAIRER = Actor("memoria", "repair")
REPAIR_RESOLVER = "repair:artifact-title"


def misread_versions(writer: WriteService) -> list[tuple[MemoryRecord, MemoryRecord]]:
    """The artifacts still superseded as an older version of another artifact (older, newer), where today's
    rule reads the two titles as naming two things."""
    store = writer.store
    by_scope: dict[Scope, list[tuple[str, str]]] = {}
    for event in store.lineage_by("version", ARTIFACT_VERSION):
        if event.related_id is not None:
            by_scope.setdefault(Scope(event.org_id, event.project_id), []).append(
                (event.memory_id, event.related_id)
            )
    found = []
    for scope, pairs in by_scope.items():
        held = store.get_memories(list({i for pair in pairs for i in pair}), scope)
        for older_id, newer_id in pairs:
            older, newer = held.get(older_id), held.get(newer_id)
            if (
                older is not None
                and newer is not None
                and older.status == "superseded"
                and older.replaced_by == newer.id
                and names_another_artifact(older.content, newer.content)
            ):
                found.append((older, newer))
    return found


def restore_misread_versions(writer: WriteService) -> list[str]:
    """Make each artifact ``misread_versions`` finds active again; the ids restored. Then each newer artifact
    whose link was cleared, still active, is versioned again as its write would version it now: in a chain
    (ledger's check, then billing-api's, then ledger's again, each read as the next of the one before) the
    second ledger check supersedes the first, as its write does today (a review found all three active)."""
    restored, unlinked = [], {}
    for older, newer in misread_versions(writer):
        reason = (
            f"an earlier release superseded it as an older version of {newer.id}, an artifact whose title "
            "names another thing"
        )
        if newer.version_of == older.id:  # first: a crash before the revive leaves the pair to the next start
            writer.store.set_version_of(newer.id, None)
            unlinked[newer.id] = newer
        if writer.revive(older, REPAIRER, reason, REPAIR_RESOLVER) is not None:
            restored.append(older.id)
    for memory_id, newer in sorted(unlinked.items(), key=lambda item: item[1].created_at):
        current = writer.store.get_memories([memory_id], newer.scope).get(memory_id)
        vector = writer.store.memory_vectors([memory_id], newer.scope).get(memory_id)
        if current is not None and current.status == "active" and vector is not None:
            report = writer.consolidation.on_write(current, vector, llm=None, actor=REPAIRER, as_written=True)
            writer.track(newer.scope, report, memory_id)
    if restored:
        log.info(
            "restored %d artifacts an earlier release had superseded as versions of another artifact: %s",
            len(restored),
            ", ".join(restored),
        )
    return restored
