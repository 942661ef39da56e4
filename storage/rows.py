"""Rows <-> records: how the typed records of ``storage.records`` are laid out in the tables' columns."""

from __future__ import annotations

import json
import re
import unicodedata
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from storage import filters
from storage.records import (
    ContradictionRecord,
    CreditedSession,
    EpisodeRecord,
    MemoryCredit,
    MemoryRecord,
    NewMemory,
    OutcomeRecord,
    ReportQueries,
    RetrievalRecord,
    Scope,
)
from storage.scan import utc


def arrow_rows(rows: Iterable[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """``rows`` as an Arrow table of ``schema``, as ``pa.Table.from_pylist`` makes it (a missing key is null,
    a key the schema lacks is left out, the same errors), in one conversion instead of one per column.
    Each conversion lets the interpreter go to another thread and, on a busy server, waits for its turn
    back (up to the switch interval, 5 ms): ``from_pylist`` converts column by column and then validates,
    about twenty hand-overs for a memory's row, on every append of a remember."""
    dicts = [row if isinstance(row, dict) else dict(row) for row in rows]  # the conversion reads dicts
    whole = pa.array(dicts, type=pa.struct(list(schema)))
    return pa.Table.from_batches([pa.RecordBatch.from_struct_array(whole)], schema=schema)


MEMORY_COLUMNS = [
    "id",
    "org_id",
    "project_id",
    "agent_id",
    "session_id",
    "episode_id",
    "kind",
    "content",
    "content_hash",
    "tags",
    "protection_tier",
    "status",
    "replaced_by",
    "weight",
    "created_at",
    "updated_at",
    "embedder",
    "simhash",
    "expires_at",
    "version_of",
    "consolidated_at",
    "visibility",
]


def memory_to_row(new: NewMemory) -> dict[str, Any]:
    record = new.record
    return {
        **record.__dict__,
        "tags": list(record.tags),
        "tags_key": filters.tags_key(record.tags),
        "simhash": to_int64(record.simhash),
        "search_text": new.search_text,
        "vector": np.asarray(new.vector, dtype=np.float32),
    }


def memory_from_row(row: Mapping[str, Any]) -> MemoryRecord:
    return MemoryRecord(**record_values({name: row[name] for name in MEMORY_COLUMNS}))


_TIMES = frozenset({"created_at", "updated_at", "expires_at", "consolidated_at"})


def record_values(row: Mapping[str, Any]) -> dict[str, Any]:
    """The record fields among a (whole or partial) row's columns, as records hold them: Arrow gives lists,
    maybe-naive datetimes and the signed SimHash; records hold tuples, UTC times and the unsigned one."""
    values: dict[str, Any] = {}
    for name in MEMORY_COLUMNS:
        if name not in row:
            continue
        value = row[name]
        if name == "tags":
            value = tuple(value or ())
        elif name == "weight":
            value = float(value)
        elif name == "simhash":
            value = from_int64(value)
        elif name in _TIMES and value is not None:
            value = utc(value)
        values[name] = value
    return values


def episode_from_row(row: Mapping[str, Any]) -> EpisodeRecord:
    return EpisodeRecord(
        **{**row, "started_at": utc(row["started_at"]), "last_seen_at": utc(row["last_seen_at"])}
    )


def to_int64(value: int | None) -> int | None:
    """Unsigned 64-bit SimHash -> the signed int64 stored in the column."""
    return None if value is None else value - (1 << 64) if value >= 1 << 63 else value


def from_int64(value: int | None) -> int | None:
    return None if value is None else value + (1 << 64) if value < 0 else value


def contradiction_from_row(row: Mapping[str, Any]) -> ContradictionRecord:
    return ContradictionRecord(
        **{
            **row,
            "detected_at": utc(row["detected_at"]),
            "resolved_at": utc(row["resolved_at"]) if row["resolved_at"] is not None else None,
        }
    )


def scope_of_row(row: Mapping[str, Any]) -> Scope:
    return Scope(row["org_id"], row["project_id"])


# A retrieval record's trace is kept compressed (``trace_zlib``), with the ids of the memories it quotes
# beside it (``trace_ids``: what a purge looks for). The trace is most of a record (about 40 KB of JSON
# for top_k 10), and every maintenance round that compacts the records decoded and encoded each one
# again; compressed once when written, they cost a round a quarter of the time (docs/benchmarks.md,
# "Retrieval records with their traces compressed"). Records written before schema 10 keep theirs in
# ``trace_json``.
TRACE_COMPRESSION_LEVEL = 6  # zlib's default: 0.13 of the JSON, 0.33 ms a record, in the write-behind thread


def with_trace(row: Mapping[str, Any], trace_json: str, quoted: Iterable[str]) -> dict[str, Any]:
    """A retrieval row with its trace replaced by ``trace_json`` (compressed), quoting ``quoted``."""
    return {**packed(row, trace_json), "trace_ids": trace_ids_key(quoted)}


def packed(row: Mapping[str, Any], trace_json: str) -> dict[str, Any]:
    """A retrieval row with ``trace_json`` as its trace, compressed."""
    return {
        **row,
        "trace_json": "",
        "trace_zlib": zlib.compress(trace_json.encode(), TRACE_COMPRESSION_LEVEL),
    }


def trace_ids_key(quoted: Iterable[str]) -> str:
    """The memories a trace quotes as one text, each between line breaks (no id holds one), so that
    ``filters.quotes`` finds a record quoting one with a substring test."""
    return "\n" + "".join(f"{memory_id}\n" for memory_id in sorted(set(quoted)))


def ids_of_key(key: str) -> set[str]:
    return set(key.split("\n")) - {""}


def stored_retrieval(row: Mapping[str, Any]) -> dict[str, Any]:
    """A queued retrieval row (its trace as JSON, its quotes listed) as the table keeps it."""
    return packed(row, row["trace_json"])


def quoted_by(trace_json: str) -> list[str]:
    """The memories a trace quotes: its candidates."""
    return [candidate["id"] for candidate in json.loads(trace_json).get("candidates", ())]


def trace_of_row(row: Mapping[str, Any]) -> str:
    """The trace JSON of a retrieval row, compressed or (written before schema 10) not."""
    packed = row.get("trace_zlib")
    return zlib.decompress(packed).decode() if packed else str(row["trace_json"])


def retrieval_from_row(row: Mapping[str, Any]) -> RetrievalRecord:
    fields = {key: value for key, value in row.items() if key not in ("trace_zlib", "trace_ids")}
    return RetrievalRecord(
        **{
            **fields,
            "created_at": utc(row["created_at"]),
            "context_ids": tuple(row["context_ids"] or ()),
            "trace_json": trace_of_row(row),
        }
    )


def outcome_from_row(row: Mapping[str, Any]) -> OutcomeRecord:
    return OutcomeRecord(
        **{
            **row,
            "memory_ids": tuple(row["memory_ids"] or ()),
            "first_reported_at": utc(row["first_reported_at"]),
            "reported_at": utc(row["reported_at"]),
        }
    )


CREDIT_COLUMNS = [
    "org_id",
    "project_id",
    "session_id",
    "memory_id",
    "revision",
    "first_reported_at",
    "role",
    "share",
    "score",
    "query_index",
]
QUERY_COLUMNS = ["session_id", "queries", "query_vectors", "query_embedder"]


def credit_values(credit: MemoryCredit) -> dict[str, Any]:
    return {"kind": "credit", **credit.__dict__}


def credited_sessions(table: pa.Table) -> list[tuple[Scope, CreditedSession]]:
    """Credit rows with their scopes, read column by column (a report has tens of them; a replay reads
    thousands), one per report and memory. Replicas on an object store that saved one session's report at
    the same moment (a retry that reached another replica) can both have inserted its rows, LanceDB
    declaring no key of several columns; replayed twice, that report would move a weight twice. The
    newest revision counts; of two reports raced at once, the larger credit, so that every reader picks
    the same row."""
    columns = {name: table.column(name).to_pylist() for name in CREDIT_COLUMNS}
    kept: dict[tuple[Scope, str, str], tuple[Scope, CreditedSession]] = {}
    for index in range(table.num_rows):
        scope = Scope(columns["org_id"][index], columns["project_id"][index])
        credited = CreditedSession(
            session_id=columns["session_id"][index],
            first_reported_at=utc(columns["first_reported_at"][index]),
            revision=columns["revision"][index],
            credit=MemoryCredit(
                columns["memory_id"][index],
                columns["role"][index],
                columns["share"][index],
                columns["score"][index],
                columns["query_index"][index],
            ),
        )
        key = (scope, credited.session_id, credited.credit.memory_id)
        other = kept.get(key)
        if other is None or _credit_rank(credited) > _credit_rank(other[1]):
            kept[key] = (scope, credited)
    return list(kept.values())


def _credit_rank(credited: CreditedSession) -> tuple[int, float, float, str]:
    """Which of two rows of one report and memory counts: the newer revision, then the larger credit."""
    credit = credited.credit
    return (credited.revision, credit.share, credit.score, credit.role)


def report_queries_from(table: pa.Table) -> list[ReportQueries]:
    found = []
    for row in table.select(QUERY_COLUMNS).to_pylist():
        vectors = row["query_vectors"] or []
        found.append(
            ReportQueries(
                session_id=row["session_id"],
                queries=tuple(row["queries"] or ()),
                vectors=np.asarray(vectors, dtype=np.float32) if vectors else None,
                embedder=row["query_embedder"],
            )
        )
    return found


def vector_of_row(row: Mapping[str, Any]) -> np.ndarray | None:
    value = row.get("vector")
    return None if value is None else np.asarray(value, dtype=np.float32)


# Words too common to tell that a query asked for a memory's text (``telling_words``).
COMMON_WORDS = frozenset(
    [
        "about",
        "after",
        "again",
        "also",
        "been",
        "before",
        "being",
        "could",
        "does",
        "doing",
        "from",
        "have",
        "here",
        "into",
        "just",
        "like",
        "made",
        "make",
        "more",
        "most",
        "much",
        "must",
        "need",
        "only",
        "other",
        "over",
        "same",
        "should",
        "some",
        "such",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "used",
        "uses",
        "using",
        "very",
        "want",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "will",
        "with",
        "would",
        "your",
    ]
)


def telling_words(text: str) -> set[str]:
    """The words of ``text`` that say what it is about: four letters or more, or three characters or
    more with a digit, lower-cased, not among ``COMMON_WORDS`` (a purge withholds the queries that asked
    for a purged memory in its words: ``storage.forgetting``)."""
    words = re.findall(r"\w+", unicodedata.normalize("NFKC", text).lower())
    return {
        word
        for word in words
        if (len(word) >= 4 or (len(word) >= 3 and any(c.isdigit() for c in word)))
        and word not in COMMON_WORDS
    }


def query_withheld(row: dict[str, Any], *, withheld: str) -> dict[str, Any]:
    """A retrieval row with its query replaced by ``withheld``, in its trace too: the query's field, and its
    telling words wherever the trace's stages wrote them (the gate's reason "has content words: ...", the
    text embedded without agents' names, a language model's sub-queries, the queries of the reports that
    moved a candidate), in any case. The candidates' previews are memories' own text, and stay."""
    trace = json.loads(trace_of_row(row))
    told = telling_words(row["query"])
    pattern = (
        re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(told))) + r")\b", re.IGNORECASE)
        if told
        else None
    )

    def cleaned(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(withheld, value) if pattern is not None else value
        if isinstance(value, list):
            return [cleaned(item) for item in value]
        if isinstance(value, dict):
            return {key: item if key == "preview" else cleaned(item) for key, item in value.items()}
        return value

    trace = cleaned(trace)
    if "query" in trace:
        trace["query"] = withheld
    text = json.dumps(trace)
    quoted = ids_of_key(row["trace_ids"]) if row["trace_ids"] else quoted_by(text)
    return with_trace({**row, "query": withheld}, text, quoted)


def session_queries_withheld(row: dict[str, Any], *, told: set[str], withheld: str) -> dict[str, Any]:
    """A session row with its queries in the purged memories' words withheld, and their vectors zeroed: an
    embedding can be read back into its words (the offline backend's hashes its words outright). A credit
    under a withheld query then counts for no query (cosine 0), as a question no one can ask again."""
    queries = [
        withheld if query == withheld or telling_words(query) & told else query
        for query in row["queries"] or []
    ]
    vectors = [
        [0.0] * len(vector) if index < len(queries) and queries[index] == withheld else vector
        for index, vector in enumerate(row["query_vectors"] or [])
    ]
    return {**row, "queries": queries or row["queries"], "query_vectors": vectors or row["query_vectors"]}
