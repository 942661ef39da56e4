"""Arrow schemas of every table, one function per table; the memory table's vector width is per store."""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 10

# Migration 4 moved the memories to a table with stable row ids, whose per-row "last updated at version"
# lets a process read only what changed since the version it has cached (storage.scope_cache).
LEGACY_MEMORIES = "memories"
MEMORIES = "memories_v4"
STABLE_ROW_IDS = {"new_table_enable_stable_row_ids": "true"}
EPISODES = "episodes"
RETRIEVALS = "retrievals"
FEEDBACK = "feedback_credits"
FEEDBACK_SCHEMA_VERSION = 5  # the first schema with the credit table (an older export's reports lack it)
AB_LOGS_SCHEMA_VERSION = 6  # the first with the raw relevance apart (older exports lack boosted_score)
AB_LOGS = "retrieval_ab_logs"
OUTCOMES = "outcomes"
WEIGHT_EVENTS = "weight_events"
ATTESTATIONS = "attestations"
LINEAGE = "lineage_events"
CONTRADICTIONS = "contradictions"
META = "meta"

_TS = pa.timestamp("us", tz="UTC")


def memories_schema(vector_dim: int) -> pa.Schema:
    """The memories table as migration 1 creates it; ``MEMORIES_V2_FIELDS`` are added by migration 2."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("org_id", pa.string(), nullable=False),
            pa.field("project_id", pa.string(), nullable=False),
            pa.field("agent_id", pa.string(), nullable=False),
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("episode_id", pa.string()),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("content", pa.string(), nullable=False),
            pa.field("content_hash", pa.string(), nullable=False),
            pa.field("tags", pa.list_(pa.string())),
            # "|a|b|": lets a tag filter be a typed `contains` expression instead of SQL text.
            pa.field("tags_key", pa.string(), nullable=False),
            pa.field("protection_tier", pa.string(), nullable=False),
            pa.field("status", pa.string(), nullable=False),
            pa.field("replaced_by", pa.string()),
            pa.field("weight", pa.float64(), nullable=False),
            pa.field("created_at", _TS, nullable=False),
            pa.field("updated_at", _TS, nullable=False),
            pa.field("embedder", pa.string(), nullable=False),
            pa.field("search_text", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), vector_dim)),
        ]
    )


# Signed storage of the unsigned 64-bit SimHash (Arrow has uint64, but LanceDB scalar filters are int64-friendly).
MEMORIES_V2_FIELDS = [pa.field("simhash", pa.int64())]


# Migration 3: consolidation bookkeeping, ephemeral expiry, artifact version chains, purge marks.
MEMORIES_V3_FIELDS = [
    pa.field("consolidated_at", _TS),
    pa.field("expires_at", _TS),
    pa.field("version_of", pa.string()),
    pa.field("purged_at", _TS),
]

# Migration 7: who may read a memory (``storage.records.Visibility``); rows written before are "project".
VISIBILITY_DEFAULT = "project"


def lineage_schema() -> pa.Schema:
    """Everything done to a memory after it was written: who, when, why, and which resolver decided."""
    return pa.schema(
        [
            pa.field("event_id", pa.string(), nullable=False),
            pa.field("org_id", pa.string(), nullable=False),
            pa.field("project_id", pa.string(), nullable=False),
            pa.field("action", pa.string(), nullable=False),
            pa.field("memory_id", pa.string(), nullable=False),
            pa.field("related_id", pa.string()),
            pa.field("resolver", pa.string(), nullable=False),
            pa.field("reason", pa.string(), nullable=False),
            pa.field("agent_id", pa.string(), nullable=False),
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("at", _TS, nullable=False),
        ]
    )


def contradictions_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("org_id", pa.string(), nullable=False),
            pa.field("project_id", pa.string(), nullable=False),
            pa.field("older_id", pa.string(), nullable=False),
            pa.field("newer_id", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("detail", pa.string(), nullable=False),
            pa.field("similarity", pa.float64(), nullable=False),
            pa.field("status", pa.string(), nullable=False),
            pa.field("resolution", pa.string()),
            pa.field("detected_at", _TS, nullable=False),
            pa.field("resolved_at", _TS),
        ]
    )


def attestations_schema() -> pa.Schema:
    """Agents that stated an already-stored memory again (exact duplicates): they corroborate it."""
    return pa.schema(
        [
            pa.field("memory_id", pa.string(), nullable=False),
            pa.field("org_id", pa.string(), nullable=False),
            pa.field("project_id", pa.string(), nullable=False),
            pa.field("agent_id", pa.string(), nullable=False),
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("at", _TS, nullable=False),
        ]
    )


def episodes_schema() -> pa.Schema:

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("org_id", pa.string(), nullable=False),
            pa.field("project_id", pa.string(), nullable=False),
            pa.field("title", pa.string()),
            pa.field("agent_id", pa.string(), nullable=False),
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("started_at", _TS, nullable=False),
            pa.field("last_seen_at", _TS, nullable=False),
        ]
    )


# Schema 10: the trace compressed, and the memories it quotes, one per line (``storage.rows.with_trace``);
# records written before have them null and their trace in ``trace_json``.
RETRIEVALS_V10_FIELDS = (
    pa.field("trace_zlib", pa.binary()),
    pa.field("trace_ids", pa.string()),
)


def retrievals_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("retrieval_id", pa.string(), nullable=False),
            pa.field("org_id", pa.string(), nullable=False),
            pa.field("project_id", pa.string(), nullable=False),
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("agent_id", pa.string(), nullable=False),
            pa.field("query", pa.string(), nullable=False),
            pa.field("purpose", pa.string(), nullable=False),
            pa.field("created_at", _TS, nullable=False),
            pa.field("top_k", pa.int32(), nullable=False),
            pa.field("char_budget", pa.int32(), nullable=False),
            pa.field("context_ids", pa.list_(pa.string())),
            pa.field("trace_json", pa.string(), nullable=False),
            *RETRIEVALS_V10_FIELDS,
        ]
    )


def ab_logs_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("retrieval_id", pa.string(), nullable=False),
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("org_id", pa.string(), nullable=False),
            pa.field("project_id", pa.string(), nullable=False),
            pa.field("query_text", pa.string(), nullable=False),
            pa.field("observation_id", pa.string(), nullable=False),
            pa.field("relevance_score", pa.float64(), nullable=False),
            pa.field("feedback_weight", pa.float64(), nullable=False),
            pa.field("weighted_score", pa.float64(), nullable=False),
            pa.field("unweighted_rank", pa.int32(), nullable=False),
            pa.field("weighted_rank", pa.int32(), nullable=False),
            pa.field("weighting_enabled", pa.bool_(), nullable=False),
            pa.field("created_at", _TS, nullable=False),
        ]
    )


def outcomes_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("org_id", pa.string(), nullable=False),
            pa.field("project_id", pa.string(), nullable=False),
            pa.field("outcome", pa.string(), nullable=False),
            pa.field("score", pa.float64(), nullable=False),
            pa.field("note", pa.string()),
            pa.field("memory_ids", pa.list_(pa.string())),
            pa.field("first_reported_at", _TS, nullable=False),
            pa.field("reported_at", _TS, nullable=False),
            pa.field("revision", pa.int32(), nullable=False),
        ]
    )


def feedback_schema() -> pa.Schema:
    """Each session's current outcome report, as weights read it: one ``credit`` row per memory it moves
    (``share`` of a full step towards ``score``; 0 for a memory a corrected report no longer moves, so
    that nothing is ever deleted and a reader catches up by row version), and one ``session`` row (empty
    ``memory_id``) with the session's recall queries and their embeddings, which make a report count
    for tasks like the session's. A report's rows are written in one commit."""
    return pa.schema(
        [
            pa.field("org_id", pa.string(), nullable=False),
            pa.field("project_id", pa.string(), nullable=False),
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("memory_id", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("revision", pa.int32(), nullable=False),
            pa.field("first_reported_at", _TS, nullable=False),
            pa.field("role", pa.string()),
            pa.field("share", pa.float64()),
            pa.field("score", pa.float64()),
            pa.field("query_index", pa.int32()),
            pa.field("queries", pa.list_(pa.string())),
            pa.field("query_vectors", pa.list_(pa.list_(pa.float32()))),
            pa.field("query_embedder", pa.string()),
        ]
    )


# Migration 5: the weight the ranking applied, beside the global weight of ``feedback_weight``.
AB_LOGS_V5_FIELDS = [pa.field("context_weight", pa.float64())]
# Schema 6, the A/B log: relevance_score is the raw relevance, and beside it
# boosted_score (what feedback multiplies; added from relevance_score, which held it until then),
# rerank_score, what the raw relevance is (relevance_kind) and whether the row is a direct match or an
# episode sibling (source; a sibling has no ranks).
AB_LOGS_V6_FIELDS = [
    pa.field("rerank_score", pa.float64()),
    pa.field("relevance_kind", pa.string()),
    pa.field("source", pa.string()),
]


def weight_events_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("memory_id", pa.string(), nullable=False),
            pa.field("org_id", pa.string(), nullable=False),
            pa.field("project_id", pa.string(), nullable=False),
            pa.field("session_id", pa.string(), nullable=False),
            pa.field("weight_before", pa.float64(), nullable=False),
            pa.field("weight_after", pa.float64(), nullable=False),
            pa.field("revision", pa.int32(), nullable=False),
            pa.field("at", _TS, nullable=False),
        ]
    )


def meta_schema() -> pa.Schema:
    return pa.schema(
        [pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string(), nullable=False)]
    )
