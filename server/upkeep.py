"""The background work the server does between requests: the aggregation job (clusters, contradictions,
the consolidation sweep), the expiry of ephemeral memories and store maintenance. Plain functions over a
runtime, called by the server's background threads."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from retrieval.text import counted, forget_cached_texts
from storage.records import ContradictionRecord, Scope

if TYPE_CHECKING:
    from retrieval.contradictions import Contradiction
    from retrieval.models.llm.base import LanguageModel
    from server.state import ServerRuntime as Runtime  # built by server.state, which schedules this work
    from storage.store import MemoryStore

log = logging.getLogger(__name__)


@dataclass
class UpkeepReport:
    scopes: int = 0
    clusters: int = 0
    contradictions: int = 0
    superseded: int = 0
    kept: int = 0
    details: list[str] = field(default_factory=list)


def record_contradictions(
    store: MemoryStore, scope: Scope, found: Sequence[Contradiction], at: datetime
) -> list[ContradictionRecord]:
    """Record the opposite terms a pass found in ``scope`` as open contradictions (those with a memory no
    longer active are not: ``put_contradictions``); returns the pairs written."""
    return store.put_contradictions(
        [
            ContradictionRecord.detected(
                scope,
                pair.older_id,
                pair.newer_id,
                kind="opposition",
                detail=pair.detail,
                similarity=pair.subject_similarity,
                at=at,
            )
            for pair in found
        ]
    )


def aggregation_pass(runtime: Runtime, llm: LanguageModel | None = None) -> UpkeepReport:
    """One aggregation job run: per scope, clusters and contradictions (kept open until resolved), then the
    consolidation sweep over memories not examined yet."""
    report = UpkeepReport()
    now = runtime.clock()
    for result in runtime.corroboration.run_all():
        scope = result.scope
        report.scopes += 1
        report.clusters += len(result.clusters)
        report.contradictions += len(result.contradictions)
        record_contradictions(runtime.store, scope, result.contradictions, now)
        swept = runtime.consolidation.sweep(scope, llm=llm)
        report.superseded += len(swept.superseded)
        report.kept += len(swept.kept)
        runtime.writer.track(scope, swept)
        report.details.append(
            f"{scope.org_id}/{scope.project_id}: {result.rows} rows, {len(result.clusters)} clusters, "
            f"{len(result.contradictions)} contradictions, {len(swept.superseded)} consolidated in {result.elapsed_ms:.0f} ms"
        )
    return report


def maintenance_round(runtime: Runtime) -> dict[str, str]:
    """One round of the server's store maintenance: compact piled-up appends, fold new rows into the
    indexes and drop versions that a newer one replaced at least ``keep_versions_seconds`` ago (each commit
    is a version, and finding a table's newest version lists them all: kept a minute by age, 2,400-3,600
    piled up at 40 writes a second and every append slowed with them), then retract expired ephemeral
    memories. Expiry scans the memories table: before the compaction, across the hundred fragments that
    started the round, it took 35-41 ms at 100-500 memories; after it, 6-9 ms (a scratch timing, offline
    backend). The journal's expired rows go before the compaction, which rewrites what their deletion left.
    Returns what was done to the store, per table."""
    expire_journal(runtime)
    done = runtime.store.maintain(
        min_fragments=runtime.settings.compaction.min_fragments,
        keep_replaced_for=timedelta(seconds=runtime.settings.keep_versions_seconds),
    )
    catch_up(runtime)
    return done


def catch_up(runtime: Runtime) -> None:
    """What time or other processes left to do: retract ephemeral memories past their expiry, and finish
    what a process that died (another server on this store) began: the consolidation of memories it
    inserted, the credits it handed on and never carried (``storage.unfinished``).
    Every maintenance round, and once as a server starts (what happened while none ran)."""
    expired = expire_ephemeral(runtime)
    if expired:
        # (a standard memory given an expiry expires too: not "ephemeral", as a trial's log read)
        log.info(
            "retracted %s past %s expiry", counted(expired, "memory"), "its" if expired == 1 else "their"
        )
    if runtime.store.finish_pending_purges(running=True):  # another server's, killed mid-purge meanwhile
        forget_cached_texts()  # the purged text leaves this process's caches too
    finish_unfinished(runtime)


def finish_unfinished(runtime: Runtime) -> None:
    """Finish what a process that died began and never finished (``storage.unfinished``): the
    consolidation of memories it inserted, then the credits it handed on. A runtime does it as it is
    built, before anything is served (``server.state.build_runtime``: a restatement killed after its
    answer would otherwise read beside the memory it supersedes), and every maintenance round (another
    server on the store may die meanwhile)."""
    consolidated, carried = runtime.writer.recover_unfinished()
    if consolidated:
        log.info("consolidated %d memories a stopped process inserted and never consolidated", consolidated)
    if carried:
        log.info("handing on again %d carries of credits a stopped process left unfinished", carried)


JOURNAL_EXPIRY_EVERY_SECONDS = 600.0  # a look for expired records scans the journal's dates: not every round


def expire_journal(runtime: Runtime, *, now: float | None = None) -> tuple[int, int]:
    """Delete the recalls' records and A/B rows older than ``MEMORIA_JOURNAL_RETENTION_DAYS`` (0: kept for
    ever), at most once every ``JOURNAL_EXPIRY_EVERY_SECONDS``; the round's compaction then rewrites what
    the deletes left, and the clean-up of old versions gives the disk back. Returns what went."""
    days = runtime.settings.journal_retention_days
    now = time.monotonic() if now is None else now
    last = runtime.journal_expired_at
    if not days or (last is not None and now - last < JOURNAL_EXPIRY_EVERY_SECONDS):
        return 0, 0
    runtime.journal_expired_at = now
    records, rows = runtime.store.expire_journal(runtime.clock() - timedelta(days=days))
    if records or rows:
        log.info(
            "the journal dropped %d recall records and %d A/B rows older than %g days "
            "(MEMORIA_JOURNAL_RETENTION_DAYS)",
            records,
            rows,
            days,
        )
    return records, rows


def expire_ephemeral(runtime: Runtime) -> int:
    """Retract memories past their time (ephemeral ones, and those given an expiry), with lineage; returns
    how many."""
    by_scope: dict[Scope, list[str]] = {}
    for memory in runtime.store.expired(runtime.clock()):
        by_scope.setdefault(memory.scope, []).append(memory.id)
    return sum(len(runtime.writer.expire(scope, ids)) for scope, ids in by_scope.items())
