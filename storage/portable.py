"""Whole-store transfer at the row level: every row of every table as JSON-ready dicts, and back.

An export is JSON Lines: a header (``export_header``), then one ``{"table": name, "row": {...}}`` per row.
Rows keep every column as stored, so an import is lossless (ids, statuses, weights, lineage, traces);
timestamps are ISO-8601 UTC with microseconds and vectors base64 of little-endian float32. Importing
skips rows whose natural key (``NATURAL_KEYS``) the store already holds, so importing twice changes
nothing.
"""

from __future__ import annotations

import base64
import binascii
import json
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from storage import filters, schema
from storage.locking import retrying
from storage.records import (
    SHARED_VISIBILITIES,
    VISIBILITIES,
    Audience,
    Scope,
    Viewer,
    may_read,
    org_shelf,
)
from storage.rows import quoted_by, trace_of_row, with_trace
from storage.scan import scan, utc
from storage.store import MemoryStore

FORMAT_VERSION = 1
PRIVATE_VISIBILITIES = [v for v in VISIBILITIES if v not in SHARED_VISIBILITIES]
# Export order. Episodes come before the memories that name them, as the store itself writes them.
TABLE_ORDER = (
    schema.EPISODES,
    schema.MEMORIES,
    schema.LINEAGE,
    schema.ATTESTATIONS,
    schema.CONTRADICTIONS,
    schema.OUTCOMES,
    schema.FEEDBACK,
    schema.WEIGHT_EVENTS,
    schema.RETRIEVALS,
    schema.AB_LOGS,
)
# What makes a row the same row in another store: a row whose key is already there is not imported.
NATURAL_KEYS: dict[str, tuple[str, ...]] = {
    schema.MEMORIES: ("id",),  # ids are scope-qualified hashes
    # Episode ids are chosen by callers, so the same id may name episodes in two scopes.
    schema.EPISODES: ("org_id", "project_id", "id"),
    schema.LINEAGE: ("event_id",),
    schema.OUTCOMES: ("org_id", "project_id", "session_id"),
    schema.FEEDBACK: ("org_id", "project_id", "session_id", "memory_id"),
    schema.WEIGHT_EVENTS: ("memory_id", "session_id", "revision", "at"),
    schema.ATTESTATIONS: ("memory_id", "agent_id", "session_id"),
    schema.CONTRADICTIONS: ("org_id", "project_id", "older_id", "newer_id"),
    schema.RETRIEVALS: ("retrieval_id",),
    schema.AB_LOGS: ("retrieval_id", "observation_id"),
}
# The key column existing rows are looked up by (the most selective one).
_LOOKUP = {
    name: next(column for column in key if column not in ("org_id", "project_id"))
    for name, key in NATURAL_KEYS.items()
}
_CHUNK = 1_000  # values per `one_of` lookup


class RowError(ValueError):
    """A row that does not fit its table; the message names the column and what is wrong."""


@dataclass(frozen=True)
class ImportCount:
    written: int
    skipped: int


@dataclass(frozen=True)
class ExportHeader:
    """The first line of an export."""

    schema_version: int
    vector_dim: int
    exported_at: datetime
    counts: dict[str, int]
    format_version: int = FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "memoria_export": self.format_version,
            "schema_version": self.schema_version,
            "vector_dim": self.vector_dim,
            "exported_at": encode_time(self.exported_at),
            "counts": dict(self.counts),
        }


def export_header(store: MemoryStore, counts: Mapping[str, int], exported_at: datetime) -> ExportHeader:
    return ExportHeader(store.schema_version, store.vector_dim, exported_at, dict(counts))


def parse_header(value: Any) -> ExportHeader:
    """The header a first line holds; ``RowError`` says what is missing or wrong."""
    if not isinstance(value, dict) or "memoria_export" not in value:
        raise RowError('is not a memoria export header (a JSON object with "memoria_export")')
    version = value["memoria_export"]
    if not _is_int(version) or version < 1:
        raise RowError(f"memoria_export must be a positive integer, but got {version!r}")
    if version > FORMAT_VERSION:
        raise RowError(
            f"is export format {version}; this memoria reads format {FORMAT_VERSION}: upgrade memoria"
        )
    for name in ("schema_version", "vector_dim"):
        if not _is_int(value.get(name)) or value[name] < 1:
            raise RowError(f"{name} must be a positive integer, but got {value.get(name)!r}")
    counts = value.get("counts")
    if not isinstance(counts, dict) or not all(
        isinstance(name, str) and _is_int(count) and count >= 0 for name, count in counts.items()
    ):
        raise RowError(f"counts must map table names to row counts, but got {counts!r}")
    unknown = sorted(set(counts) - set(TABLE_ORDER))
    if unknown:
        raise RowError(
            f"counts names tables this memoria does not have: {', '.join(unknown)}; the export comes from a "
            "newer memoria: upgrade this one to import it"
        )
    return ExportHeader(
        schema_version=value["schema_version"],
        vector_dim=value["vector_dim"],
        exported_at=decode_time(value.get("exported_at"), "exported_at"),
        counts=dict(counts),
        format_version=version,
    )


# ------------------------------------------------------------------ export


def export_rows(
    store: MemoryStore,
    scopes: Sequence[Scope] | None = None,
    vectors: bool = True,
    viewer: Viewer | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every row of every table (of ``scopes``, or all), as (table name, JSON-ready row): table by table
    in ``TABLE_ORDER``, scope by scope, then by natural key, so two exports of one store are the same.
    Memories of every status are included; ``vectors=False`` leaves the memories' vectors out (an
    import embeds them again). Reads one scope of one table at a time.

    With a ``viewer``, only what that agent (in that session) may read: the org shelves of the scopes'
    orgs come too, another agent's (or session's) private memories do not, and neither does any row that
    names one (its lineage, attestations and contradictions, and the whole of every report, retrieval
    and A/B row that touched one)."""
    store.flush_logs()
    tables = store.tables()
    wanted = set(scopes) if scopes is not None else None
    if wanted is not None and viewer is not None:
        wanted |= {org_shelf(scope.org_id) for scope in wanted}
    hidden = _hidden_from(viewer, tables[schema.MEMORIES], wanted) if viewer is not None else set()
    left_out: set[tuple[str, str, str]] = (
        set()
    )  # reports (org, project, session) that touched a hidden memory
    for name in TABLE_ORDER:
        table = tables[name]
        fields = [field for field in table.schema if vectors or not _is_vector(field.type)]
        for scope in _scopes_of(table):
            if wanted is not None and scope not in wanted:
                continue
            data = scan(table, filters.scope_is(scope), [field.name for field in fields])
            rows = _encoded(data, fields)
            if name == schema.RETRIEVALS:
                rows = [_exported_retrieval(row) for row in rows]
            key = NATURAL_KEYS[name]
            rows.sort(key=lambda row: (tuple(row[column] for column in key), _canonical(row)))
            for row in rows:
                if hidden and _names_hidden(name, row, hidden, left_out):
                    continue
                yield name, row


def _exported_retrieval(row: Mapping[str, Any]) -> dict[str, Any]:
    """A retrieval record as an export carries it, whatever the schema that wrote it: its trace as JSON
    text (the store keeps it compressed since schema 10; an import compresses it again)."""
    exported = {key: value for key, value in row.items() if key not in _STORED_ONLY}
    return {**exported, "trace_json": trace_of_row(row)}


def _hidden_from(viewer: Viewer, memories: Any, wanted: set[Scope] | None) -> set[str]:
    """Ids of the memories (of ``wanted`` scopes, or all) that ``viewer`` may not read."""
    columns = ["id", "org_id", "project_id", "agent_id", "session_id", "visibility"]
    data = scan(memories, filters.one_of("visibility", PRIVATE_VISIBILITIES), columns).to_pylist()
    return {
        row["id"]
        for row in data
        if (wanted is None or Scope(row["org_id"], row["project_id"]) in wanted)
        and not may_read(viewer, Audience.of(row["visibility"], row["agent_id"], row["session_id"]))
    }


def _names_hidden(
    table: str, row: Mapping[str, Any], hidden: set[str], left_out: set[tuple[str, str, str]]
) -> bool:
    """Whether an exported row names a hidden memory (``export_rows``). Reports come in table order:
    outcomes first, so their credits and weight events go with them."""
    if table == schema.MEMORIES:
        return row["id"] in hidden
    if table == schema.LINEAGE:
        return row["memory_id"] in hidden or row["related_id"] in hidden
    if table == schema.ATTESTATIONS:
        return row["memory_id"] in hidden
    if table == schema.CONTRADICTIONS:
        return row["older_id"] in hidden or row["newer_id"] in hidden
    if table == schema.OUTCOMES:
        if hidden.isdisjoint(row["memory_ids"] or ()):
            return False
        left_out.add((row["org_id"], row["project_id"], row["session_id"]))
        return True
    if table in (schema.FEEDBACK, schema.WEIGHT_EVENTS):
        report = (row["org_id"], row["project_id"], row["session_id"])
        return report in left_out or row["memory_id"] in hidden
    if table == schema.RETRIEVALS:
        return not hidden.isdisjoint(row["context_ids"] or ()) or any(i in row["trace_json"] for i in hidden)
    if table == schema.AB_LOGS:
        return row["observation_id"] in hidden
    return False


def shelves_left_out(store: MemoryStore, scopes: Sequence[Scope]) -> dict[str, int]:
    """Per org of ``scopes``: how many memories its shelf holds (every status) that an export of
    ``scopes`` alone leaves out (the org-visible memories every project of the org reads)."""
    table = store.tables()[schema.MEMORIES]
    counts = {}
    for org_id in sorted({scope.org_id for scope in scopes if not scope.is_org_shelf}):
        held = scan(table, filters.scope_is(org_shelf(org_id)), ["id"]).num_rows
        if held:
            counts[org_id] = held
    return counts


def _scopes_of(table: Any) -> list[Scope]:
    data = scan(table, None, ["org_id", "project_id"])
    pairs = zip(data.column("org_id").to_pylist(), data.column("project_id").to_pylist(), strict=True)
    return [Scope(org, project) for org, project in sorted(set(pairs))]


def _encoded(data: pa.Table, fields: Sequence[pa.Field]) -> list[dict[str, Any]]:
    """Rows of ``data`` as JSON-ready dicts in the schema's column order (vectors as one numpy block,
    not Python floats)."""
    columns: dict[str, list[Any]] = {}
    for field in fields:
        column = data.column(field.name)
        if _is_vector(field.type):
            columns[field.name] = _encoded_vectors(column, field.type.list_size)
        elif pa.types.is_timestamp(field.type):
            columns[field.name] = [None if v is None else encode_time(v) for v in column.to_pylist()]
        else:
            columns[field.name] = column.to_pylist()
    return [{name: values[index] for name, values in columns.items()} for index in range(data.num_rows)]


def _encoded_vectors(column: pa.ChunkedArray, width: int) -> list[str | None]:
    combined = column.combine_chunks()
    present = ~np.asarray(combined.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    flat = combined.flatten().to_numpy(zero_copy_only=False).astype("<f4", copy=False)
    block = np.zeros((len(combined), width), dtype="<f4")
    block[present] = flat.reshape(-1, width)
    return [encode_vector(block[index]) if present[index] else None for index in range(len(combined))]


def encode_vector(vector: Any) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def encode_time(moment: datetime) -> str:
    moment = utc(moment)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _canonical(row: Mapping[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, ensure_ascii=False)


# ------------------------------------------------------------------ import


def validate_row(store: MemoryStore, table: str, row: Any) -> None:
    """Raise ``RowError`` unless ``row`` decodes to ``table``'s columns. A memory's vector may be
    missing or of another width here: ``import_rows`` needs it to be the store's (embed it first)."""
    _decode(_import_schema(table, _schema_of(store, table)), row, vector_dim=None)


def has_vector(store: MemoryStore, row: Mapping[str, Any]) -> bool:
    """Whether a memory row carries a vector of this store's width."""
    value = row.get("vector")
    if not isinstance(value, str):
        return False
    try:
        return len(_vector_bytes(value)) == store.vector_dim * 4
    except RowError:
        return False


def with_vector(row: Mapping[str, Any], vector: Any, embedder: str | None = None) -> dict[str, Any]:
    """``row`` with ``vector`` (and, if given, the name of the embedder that made it)."""
    updated = {**row, "vector": encode_vector(vector)}
    if embedder is not None:
        updated["embedder"] = embedder
    return updated


def import_rows(store: MemoryStore, table: str, rows: Iterable[Mapping[str, Any]]) -> ImportCount:
    """Write exported ``rows`` into ``table`` exactly as they were, except rows whose natural key the
    store (or an earlier row of ``rows``) already has: those are skipped. Memories must carry vectors of
    the store's width. Every row is decoded before anything is written (a bad one raises ``RowError``)."""
    handle = store.tables()[table]
    arrow_schema = handle.schema
    row_schema = _import_schema(table, arrow_schema)
    key = NATURAL_KEYS[table]
    decoded: dict[tuple[Any, ...], dict[str, Any]] = {}
    total = 0
    for row in rows:
        total += 1
        values = _decode(row_schema, row, vector_dim=store.vector_dim if table == schema.MEMORIES else None)
        if table == schema.RETRIEVALS:  # kept compressed, as the store writes it
            values = with_trace(values, values["trace_json"], _quoted_in(values["trace_json"]))
        decoded.setdefault(tuple(_key_value(values[column]) for column in key), values)
    if not decoded:
        return ImportCount(0, total)
    # Both locks, the reports' first (their order): the report tables are written under the reports' lock.
    with store.reporting(), store.exclusive():
        existing = _existing_keys(handle, key, _LOOKUP[table], list(decoded))
        fresh = [values for row_key, values in decoded.items() if row_key not in existing]
        if fresh:
            try:
                data = pa.Table.from_pylist(fresh, schema=arrow_schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                raise RowError(f"a {table} row does not fit the table: {exc}") from exc
            if store.excludes_other_processes:
                retrying(partial(handle.add, data))
            else:  # replicas on an object store: insert-if-absent in one commit
                retrying(lambda: handle.merge_insert(list(key)).when_not_matched_insert_all().execute(data))
    # Scope copies catch up from the table version on their next read (new rows have a newer
    # `_row_last_updated_at_version`), so a recall in this process sees what was written.
    return ImportCount(len(fresh), total - len(fresh))


def existing_memory_ids(store: MemoryStore, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` the store already holds (an import skips them: nothing to embed for them)."""
    if not ids:
        return set()
    found = _existing_keys(store.tables()[schema.MEMORIES], ("id",), "id", [(i,) for i in ids])
    return {str(key[0]) for key in found}


def _existing_keys(
    handle: Any, key: tuple[str, ...], lookup: str, wanted: list[tuple[Any, ...]]
) -> set[tuple[Any, ...]]:
    position = key.index(lookup)
    values = sorted({str(row_key[position]) for row_key in wanted})
    found: set[tuple[Any, ...]] = set()
    for start in range(0, len(values), _CHUNK):
        data = scan(handle, filters.one_of(lookup, values[start : start + _CHUNK]), list(key))
        columns = [data.column(column).to_pylist() for column in key]
        found.update(tuple(_key_value(value) for value in values) for values in zip(*columns, strict=True))
    return found


def _key_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return utc(value)
    return value


# A table's schema is a round trip to LanceDB's event loop (about half a millisecond): read once per
# store and table, not once per row checked. Schemas change only by a migration, when a store is opened.
_SCHEMAS: weakref.WeakKeyDictionary[MemoryStore, dict[str, pa.Schema]] = weakref.WeakKeyDictionary()


def _quoted_in(trace_json: str) -> list[str]:
    try:
        return quoted_by(trace_json)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise RowError(f"trace_json must be a recall's trace (a JSON object), but it is not: {exc}") from exc


# Columns only the store writes: an export carries a retrieval record's trace as JSON text.
_STORED_ONLY = frozenset(field.name for field in schema.RETRIEVALS_V10_FIELDS)


def _import_schema(table: str, arrow_schema: pa.Schema) -> pa.Schema:
    """The columns an exported row of ``table`` may carry."""
    if table != schema.RETRIEVALS:
        return arrow_schema
    return pa.schema([field for field in arrow_schema if field.name not in _STORED_ONLY])


def _schema_of(store: MemoryStore, table: str) -> pa.Schema:
    known = _SCHEMAS.setdefault(store, {})
    if table not in known:
        tables = store.tables()
        if table not in tables:
            raise RowError(f"there is no table {table!r} (tables: {', '.join(TABLE_ORDER)})")
        known[table] = tables[table].schema
    return known[table]


def _decode(arrow_schema: pa.Schema, row: Any, *, vector_dim: int | None) -> dict[str, Any]:
    """``row`` as Arrow-ready values of ``arrow_schema``'s columns; ``vector_dim``: the width a vector
    must have (None: any, or none)."""
    if not isinstance(row, dict):
        raise RowError(f"a row must be a JSON object, but got {type(row).__name__}")
    unknown = sorted(set(row) - set(arrow_schema.names))
    if unknown:
        raise RowError(f"has columns the table does not: {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for field in arrow_schema:
        value = row.get(field.name)
        if value is None:
            if not field.nullable or (vector_dim is not None and _is_vector(field.type)):
                what = f"a {vector_dim}-dimensional vector" if _is_vector(field.type) else "a value"
                raise RowError(f"{field.name} needs {what}, but it is missing or null")
            values[field.name] = None
        else:
            values[field.name] = _decode_value(field, value, vector_dim)
    return values


def _decode_value(field: pa.Field, value: Any, vector_dim: int | None) -> Any:
    kind = field.type
    if pa.types.is_timestamp(kind):
        return decode_time(value, field.name)
    if _is_vector(kind):
        if not isinstance(value, str):
            raise RowError(f"{field.name} must be base64 of little-endian float32, but got {value!r:.40}")
        raw = _vector_bytes(value, field.name)
        if vector_dim is not None and len(raw) != vector_dim * 4:
            raise RowError(
                f"{field.name} has {len(raw) // 4} dimensions but this store holds {vector_dim}-d "
                "vectors: leave the vector out (or export with --no-vectors) and the import embeds the memory again"
            )
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if pa.types.is_string(kind):
        if not isinstance(value, str):
            raise RowError(f"{field.name} must be a string, but got {value!r:.40}")
        return value
    if pa.types.is_integer(kind):
        bits = kind.bit_width - 1
        if not _is_int(value) or not -(2**bits) <= value < 2**bits:
            raise RowError(f"{field.name} must be a {kind} integer, but got {value!r:.40}")
        return value
    if pa.types.is_floating(kind):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise RowError(f"{field.name} must be a number, but got {value!r:.40}")
        return float(value)
    if pa.types.is_boolean(kind):
        if not isinstance(value, bool):
            raise RowError(f"{field.name} must be true or false, but got {value!r:.40}")
        return value
    if pa.types.is_list(kind) and pa.types.is_string(kind.value_type):
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise RowError(f"{field.name} must be a list of strings, but got {value!r:.40}")
        return value
    if pa.types.is_list(kind):  # e.g. an outcome's credits (structs) and query vectors (lists of numbers)
        if not isinstance(value, list):
            raise RowError(f"{field.name} must be a list, but got {value!r:.40}")
        item = pa.field(field.name, kind.value_type, nullable=True)
        return [None if entry is None else _decode_value(item, entry, None) for entry in value]
    if pa.types.is_struct(kind):
        if not isinstance(value, dict):
            raise RowError(f"{field.name} must be a JSON object, but got {value!r:.40}")
        names = {kind.field(index).name for index in range(kind.num_fields)}
        unknown = sorted(set(value) - names)
        if unknown:
            raise RowError(f"{field.name} has fields its column does not: {', '.join(unknown)}")
        decoded = {}
        for index in range(kind.num_fields):
            part = kind.field(index)
            entry = value.get(part.name)
            if entry is None and not part.nullable:
                raise RowError(f"{field.name}.{part.name} needs a value, but it is missing or null")
            name = f"{field.name}.{part.name}"
            decoded[part.name] = None if entry is None else _decode_value(part.with_name(name), entry, None)
        return decoded
    raise RowError(f"{field.name} has a column type import does not know: {kind}")


def decode_time(value: Any, name: str) -> datetime:
    if value is None:
        raise RowError(f"{name} is missing: it must be an ISO-8601 time, such as 2026-11-24T09:30:00+00:00")
    if not isinstance(value, str):
        raise RowError(f"{name} must be an ISO-8601 time, but got {value!r:.40}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise RowError(f"{name} must be an ISO-8601 time, but got {value!r:.40}") from None
    return utc(moment)


def _vector_bytes(value: str, name: str = "vector") -> bytes:
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise RowError(f"{name} is not valid base64") from None
    if len(raw) % 4:
        raise RowError(f"{name} is {len(raw)} bytes, not a whole number of float32 values")
    return raw


def _is_vector(kind: pa.DataType) -> bool:
    return pa.types.is_fixed_size_list(kind)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
