"""Numbered schema migrations. A store records its schema version in the ``meta`` table; opening it
applies whatever is pending, in order: under the store's write lock for a local folder, and under a
migration lease for an object store, where several replicas may open a new store at once."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import takewhile
from typing import Any

import pyarrow as pa
from lancedb.index import FTS, Bitmap, BTree

from storage import schema
from storage.locking import retrying

log = logging.getLogger(__name__)

MIGRATION_LEASE = "migration_lease"
# In the meta ``apply_pending`` returns (never written): the schema version the store had before this
# open upgraded it.
UPGRADED_FROM = "upgraded_from"
# A lease older than this was left by a process that died mid-migration; the migrations are idempotent,
# so the next process takes it over and runs them again.
LEASE_EXPIRES_AFTER = timedelta(minutes=10)


class StoreVersionError(RuntimeError):
    """The store was written by a newer release than this one."""


@dataclass(frozen=True)
class MigrationContext:
    vector_dim: int


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    apply: Callable[[Any, MigrationContext], None]


def m001_create_tables(db: Any, ctx: MigrationContext) -> None:
    # Indexed by migration 4, which moves these rows to the table the store uses.
    db.create_table(schema.LEGACY_MEMORIES, schema=schema.memories_schema(ctx.vector_dim), exist_ok=True)

    db.create_table(schema.EPISODES, schema=schema.episodes_schema(), exist_ok=True).create_index(
        "id", config=BTree(), replace=True
    )
    retrievals = db.create_table(schema.RETRIEVALS, schema=schema.retrievals_schema(), exist_ok=True)
    retrievals.create_index("retrieval_id", config=BTree(), replace=True)
    retrievals.create_index("session_id", config=BTree(), replace=True)
    db.create_table(schema.AB_LOGS, schema=schema.ab_logs_schema(), exist_ok=True)
    db.create_table(schema.OUTCOMES, schema=schema.outcomes_schema(), exist_ok=True).create_index(
        "session_id", config=BTree(), replace=True
    )
    db.create_table(schema.WEIGHT_EVENTS, schema=schema.weight_events_schema(), exist_ok=True)


def m002_corroboration(db: Any, ctx: MigrationContext) -> None:
    memories = db.open_table(schema.LEGACY_MEMORIES)
    missing = [field for field in schema.MEMORIES_V2_FIELDS if field.name not in memories.schema.names]
    if missing:
        # Existing rows get null; the aggregation job computes their fingerprints from content.
        memories.add_columns(missing)
    db.create_table(schema.ATTESTATIONS, schema=schema.attestations_schema(), exist_ok=True).create_index(
        "memory_id", config=BTree(), replace=True
    )


def m003_consolidation(db: Any, ctx: MigrationContext) -> None:
    memories = db.open_table(schema.LEGACY_MEMORIES)
    missing = [field for field in schema.MEMORIES_V3_FIELDS if field.name not in memories.schema.names]
    if missing:
        memories.add_columns(missing)
    lineage = db.create_table(schema.LINEAGE, schema=schema.lineage_schema(), exist_ok=True)
    lineage.create_index("memory_id", config=BTree(), replace=True)
    lineage.create_index("related_id", config=BTree(), replace=True)
    db.create_table(schema.CONTRADICTIONS, schema=schema.contradictions_schema(), exist_ok=True)


def m004_stable_row_ids(db: Any, ctx: MigrationContext) -> None:
    """Copy the memories into a table with stable row ids, then drop the old one. Crash-safe: the old
    table is dropped only after the copy and its indexes are complete, and a copy a crash interrupted
    is started again."""
    old = open_or_none(db, schema.LEGACY_MEMORIES)
    if old is None:
        return  # done before a crash that came before the version was recorded
    copied = open_or_none(db, schema.MEMORIES)
    if copied is not None:
        # A copy a crash interrupted holds at most the old table's rows; more means the store is not in
        # the state this migration expects, and dropping the table would lose memories.
        if copied.count_rows() > old.count_rows():
            raise RuntimeError(
                f"{schema.MEMORIES} holds more memories than {schema.LEGACY_MEMORIES}, which migration 4 "
                "would copy over it; back up the store and run `memoria doctor` before starting again"
            )
        db.drop_table(schema.MEMORIES)
    new = db.create_table(schema.MEMORIES, schema=old.schema, storage_options=schema.STABLE_ROW_IDS)
    if old.count_rows():
        for batch in old.search().limit(2**31 - 1).to_batches(10_000):
            new.add(pa.Table.from_batches([batch], schema=old.schema))
    index_memories(new)
    db.drop_table(schema.LEGACY_MEMORIES)


def m005_feedback_credits(db: Any, ctx: MigrationContext) -> None:
    """Per-memory credit for outcome reports, in a table of its own (stable row ids, so readers catch up
    by row version); A/B rows gain the weight the ranking applied. A report made before moved every
    memory of its session's contexts fully, for no query in particular: it becomes that credit. Crash-safe:
    a table a crash left half-filled is made again."""
    ab_logs = db.open_table(schema.AB_LOGS)
    missing = [field for field in schema.AB_LOGS_V5_FIELDS if field.name not in ab_logs.schema.names]
    if missing:
        ab_logs.add_columns(missing)
    if open_or_none(db, schema.FEEDBACK) is not None:
        db.drop_table(schema.FEEDBACK)
    feedback = db.create_table(
        schema.FEEDBACK, schema=schema.feedback_schema(), storage_options=schema.STABLE_ROW_IDS
    )
    rows = legacy_credit_rows(db.open_table(schema.OUTCOMES).search().limit(2**31 - 1).to_arrow().to_pylist())
    if rows:
        feedback.add(pa.Table.from_pylist(rows, schema=schema.feedback_schema()))
    for column in ("memory_id", "session_id"):
        feedback.create_index(column, config=BTree(), replace=True)


def m006_ab_log_columns(db: Any, ctx: MigrationContext) -> None:
    """The A/B log with the raw relevance beside what feedback weighted (``schema.AB_LOGS_V6_FIELDS``):
    rows logged before keep their relevance_score, which was the boosted score, now also in
    boosted_score; their relevance_kind and source are null. Ranks become nullable (an episode sibling has none). Each step is skipped when done,
    so a migration a crash interrupted completes."""
    ab_logs = db.open_table(schema.AB_LOGS)
    if "boosted_score" not in ab_logs.schema.names:
        ab_logs.add_columns({"boosted_score": "relevance_score"})
    missing = [field for field in schema.AB_LOGS_V6_FIELDS if field.name not in ab_logs.schema.names]
    if missing:
        ab_logs.add_columns(missing)
    for column in ("unweighted_rank", "weighted_rank"):
        if not ab_logs.schema.field(column).nullable:
            ab_logs.alter_columns({"path": column, "nullable": True})


def m007_visibility(db: Any, ctx: MigrationContext) -> None:
    """Memories gain their visibility; every memory stored before was readable by its whole project."""
    memories = db.open_table(schema.MEMORIES)
    if "visibility" not in memories.schema.names:
        memories.add_columns({"visibility": f"'{schema.VISIBILITY_DEFAULT}'"})


def m008_primary_keys(db: Any, ctx: MigrationContext) -> None:
    """Declare each table's key to LanceDB as its unenforced primary key: memories by id, lineage events by
    event_id. Replicas on an object store insert a memory with ``merge_insert("id")`` and no lock between
    them; without a declared key, LanceDB commits two replicas' inserts of the same new id (a restated
    fact) side by side, and the id is stored twice. With it, the later commit conflicts on the key and is
    replayed against the row the first one wrote. Skipped where the key is declared already."""
    from lancedb.remote.table import RemoteTable

    for name, column in PRIMARY_KEYS.items():
        table = db.open_table(name)
        if isinstance(table, RemoteTable):  # LanceDB Cloud takes no declared key (its client says so)
            log.warning(
                "%s: LanceDB Cloud declares no primary key, so two replicas that insert one new memory at "
                "the same moment can store it twice; run one replica per LanceDB Cloud database",
                name,
            )
            continue
        if primary_key(table.schema) != column:
            retrying(partial(table.set_unenforced_primary_key, column))


# The tables whose rows one column names, and that replicas insert into with ``merge_insert`` on it.
PRIMARY_KEYS = {schema.MEMORIES: "id", schema.LINEAGE: "event_id"}
# How Lance marks a key column in the field's metadata: its position in the key (what
# ``set_unenforced_primary_key`` writes), or "true" (older writers).
_KEY_POSITION = b"lance-schema:unenforced-primary-key:position"
_KEY_FLAG = b"lance-schema:unenforced-primary-key"


def primary_key(table_schema: pa.Schema) -> str | None:
    """The column LanceDB was told is the table's primary key (None: none was declared)."""
    for field in table_schema:
        metadata = field.metadata or {}
        if _KEY_POSITION in metadata or metadata.get(_KEY_FLAG, b"").lower() == b"true":
            return str(field.name)
    return None


def legacy_credit_rows(reports: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Credit rows for outcome reports made before per-memory credit (each session's newest revision):
    every memory of a report moved a full step with its session's score, for no query in particular."""
    newest: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for report in reports:
        key = (report["org_id"], report["project_id"], report["session_id"])
        if key not in newest or report["revision"] > newest[key]["revision"]:
            newest[key] = report
    rows: list[dict[str, Any]] = []
    for report in newest.values():
        common = {
            "org_id": report["org_id"],
            "project_id": report["project_id"],
            "session_id": report["session_id"],
            "revision": report["revision"],
            "first_reported_at": report["first_reported_at"],
        }
        rows.append({**common, "memory_id": "", "kind": "session"})
        rows += [
            {
                **common,
                "memory_id": memory_id,
                "kind": "credit",
                "role": "context",
                "share": 1.0,
                "score": report["score"],
            }
            for memory_id in dict.fromkeys(report["memory_ids"] or ())
        ]
    return rows


def version_from_tables(db: Any) -> tuple[int, int] | None:
    """The schema version a store's tables show, and its vector width, when its meta lost them: each
    migration leaves its mark (a table, a column, a declared key) and every migration before it is
    complete when its version is recorded. None for a new store."""
    memories = open_or_none(db, schema.MEMORIES)
    legacy = open_or_none(db, schema.LEGACY_MEMORIES)
    table = memories if memories is not None else legacy
    if table is None:
        return None
    dim = table.schema.field("vector").type.list_size
    names = set(table.schema.names)
    if memories is None:
        steps = (
            all(field.name in names for field in schema.MEMORIES_V2_FIELDS),
            all(field.name in names for field in schema.MEMORIES_V3_FIELDS),
        )
        return 1 + sum(1 for _ in takewhile(bool, steps)), dim
    ab_logs = set(db.open_table(schema.AB_LOGS).schema.names)
    upgraded = (
        open_or_none(db, schema.FEEDBACK) is not None,
        all(field.name in ab_logs for field in schema.AB_LOGS_V6_FIELDS),
        "visibility" in names,
        primary_key(table.schema) == PRIMARY_KEYS[schema.MEMORIES],
    )
    version = 4 + sum(1 for _ in takewhile(bool, upgraded))
    retrievals = set(db.open_table(schema.RETRIEVALS).schema.names)
    if version == 8 and all(field.name in retrievals for field in schema.RETRIEVALS_V10_FIELDS):
        # Migration 9 leaves no mark; 10, after it, does (a new store's tables have its columns from the
        # start, hence only once every earlier mark is there).
        return 10, dim
    return version, dim


def open_or_none(db: Any, name: str) -> Any:
    try:
        return db.open_table(name)
    except ValueError:  # "Table '...' was not found"
        return None


def index_memories(memories: Any) -> None:
    for column in ("id", "episode_id"):
        memories.create_index(column, config=BTree(), replace=True)
    for column in ("org_id", "project_id", "status", "kind", "embedder"):
        memories.create_index(column, config=Bitmap(), replace=True)
    # Stemmed, stop-worded BM25 over content + tags; rows added after the index stay searchable (flat scan)
    # until maintenance folds them in.
    memories.create_index("search_text", config=FTS(with_position=False), replace=True)


def m009_write_generations(db: Any, ctx: MigrationContext) -> None:
    """Writers count the write generations of a local store (``storage.generations``), and readers trust
    a table version while no write sequence ended since they read it. A release before this one writes
    without counting, so its writes would stay unseen for up to a second: the schema version makes it
    refuse this store. Nothing in the tables changes."""


def m010_compressed_traces(db: Any, ctx: MigrationContext) -> None:
    """Retrieval records keep their trace compressed and the memories it quotes beside it
    (``schema.RETRIEVALS_V10_FIELDS``); records written before keep theirs in ``trace_json`` and read as
    they did. A release before this one would read the new records' traces as empty: the schema version
    makes it refuse this store. Skipped when done, so a migration a crash interrupted completes."""
    retrievals = db.open_table(schema.RETRIEVALS)
    missing = [field for field in schema.RETRIEVALS_V10_FIELDS if field.name not in retrievals.schema.names]
    if missing:
        retrievals.add_columns(missing)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "create_tables", m001_create_tables),
    Migration(2, "corroboration", m002_corroboration),
    Migration(3, "consolidation", m003_consolidation),
    Migration(4, "stable_row_ids", m004_stable_row_ids),
    Migration(5, "feedback_credits", m005_feedback_credits),
    Migration(6, "ab_log_columns", m006_ab_log_columns),
    Migration(7, "visibility", m007_visibility),
    Migration(8, "primary_keys", m008_primary_keys),
    Migration(9, "write_generations", m009_write_generations),
    Migration(10, "compressed_traces", m010_compressed_traces),
)


assert MIGRATIONS[-1].number == schema.SCHEMA_VERSION


def read_meta(db: Any) -> dict[str, str]:
    table = open_or_none(db, schema.META)
    if table is None:  # a new store
        return {}
    rows = table.to_arrow().to_pylist()
    return {row["key"]: row["value"] for row in rows}


def write_meta(db: Any, values: dict[str, str]) -> None:
    """Set these meta keys in one commit (an upsert on the key), so a crash leaves the meta as it was or
    as written, never without a key being replaced: a store whose ``schema_version`` a crash took away
    would run every migration again from the first on its next start."""
    table = db.create_table(schema.META, schema=schema.meta_schema(), exist_ok=True)
    rows = pa.Table.from_pylist(
        [{"key": key, "value": value} for key, value in values.items()], schema=schema.meta_schema()
    )
    table.merge_insert("key").when_matched_update_all().when_not_matched_insert_all().execute(rows)


def apply_pending(db: Any, vector_dim: int, *, other_processes_excluded: bool = True) -> dict[str, str]:
    """Bring the store to ``SCHEMA_VERSION``; returns its meta. The caller holds the write lock; when
    that lock does not keep other processes out (an object store), the migrations run under a lease,
    and a process that waited for it finds them done."""
    meta = read_meta(db)
    if other_processes_excluded or int(meta.get("schema_version", "0")) == schema.SCHEMA_VERSION:
        return _migrate(db, meta, vector_dim)
    with migration_lease(db):
        return _migrate(db, read_meta(db), vector_dim)


@contextmanager
def migration_lease(db: Any, *, poll_seconds: float = 0.2, settle_seconds: float = 1.0) -> Iterator[None]:
    """Hold the store's migration lease: a table only one process creates, dropped when the block ends.

    A create fails once the table is listed; two creates racing inside that check can both return,
    the later one's row replacing the earlier's, and a third racing them fails with a commit conflict
    (concurrent overwrites are retryable in lance 13). So a creator waits ``settle_seconds`` and reads
    the lease back: only the process whose row is there holds it (a create that lands later than that
    finds the table listed and fails), and every other goes back to waiting."""
    holder = uuid.uuid4().hex
    while True:
        try:
            db.create_table(
                MIGRATION_LEASE,
                data=[{"holder": holder, "taken_at": datetime.now(UTC)}],
                mode="create",
            )
            time.sleep(settle_seconds)
            taken = _lease_holder(db)
            if taken is not None and taken["holder"] == holder:
                break
            time.sleep(poll_seconds)
        except (ValueError, OSError, RuntimeError) as exc:
            if not lost_the_race(exc):
                raise
            taken = _lease_holder(db)
            if taken is not None and datetime.now(UTC) - taken["taken_at"] > LEASE_EXPIRES_AFTER:
                log.warning(
                    "taking over a migration lease left by %s at %s", taken["holder"], taken["taken_at"]
                )
                db.drop_table(MIGRATION_LEASE)
            time.sleep(poll_seconds)
    try:
        yield
    finally:
        taken = _lease_holder(db)
        if taken is not None and taken["holder"] == holder:  # not taken over as abandoned meanwhile
            db.drop_table(MIGRATION_LEASE)


def lost_the_race(exc: Exception) -> bool:
    """A create that failed because another process created the same table first, or at once."""
    message = str(exc).lower()
    return "already exists" in message or "commit conflict" in message


def _lease_holder(db: Any) -> dict[str, Any] | None:
    """Who holds the lease and since when; None when it was released (perhaps while being read)."""
    try:
        rows = db.open_table(MIGRATION_LEASE).to_arrow().to_pylist()
    except (ValueError, OSError, RuntimeError):  # dropped between the failed create and this read
        return None
    return rows[0] if rows else None


def _migrate(db: Any, meta: dict[str, str], vector_dim: int) -> dict[str, str]:
    current = int(meta.get("schema_version", "0"))
    if current > schema.SCHEMA_VERSION:
        raise StoreVersionError(
            f"this store has schema version {current}, newer than this release understands "
            f"({schema.SCHEMA_VERSION}); upgrade memoria-mcp or point MEMORIA_DB_URI at another store"
        )
    if "schema_version" not in meta and (found := version_from_tables(db)):
        # Before 2026-11-27 a kill while the meta was written could take its schema version away; the
        # migrations would then start again from the first over tables already upgraded.
        current, dim = found
        log.warning(
            "the store's meta names no schema version, but its tables are those of version %d: recording it",
            current,
        )
        write_meta(db, {"schema_version": str(current), "vector_dim": str(dim)})
        meta = read_meta(db)
    if current == schema.SCHEMA_VERSION:
        return meta
    if current:
        # Said where every process logs it (a trial: `memoria doctor` upgraded a store an older server was
        # serving, said nothing, and that server's writes then failed with "retrying is safe").
        log.warning(
            "upgrading the store from schema version %d to %d: memoria releases older than this one no longer "
            "open it, and a server of one still running on it must be stopped (its writes would fail); "
            "upgrade each and start it again",
            current,
            schema.SCHEMA_VERSION,
        )
    dim = int(meta.get("vector_dim", vector_dim))
    ctx = MigrationContext(vector_dim=dim)
    for migration in MIGRATIONS:
        if migration.number > current:
            migration.apply(db, ctx)
            update = {"schema_version": str(migration.number), "vector_dim": str(dim)}
            if current == 0 and "created_at" not in meta:
                update["created_at"] = datetime.now(UTC).isoformat()
            write_meta(db, update)
            meta = {**meta, **update}
    return {**meta, UPGRADED_FROM: str(current)} if current else meta
