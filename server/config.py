"""The server's one frozen configuration object, read from the environment once at start-up.

Nothing else in the project reads ``os.environ``: everything that is configurable is a field here,
and ``ENVIRONMENT`` maps each field to the variable that sets it (``mcp.json`` lists them all).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)


class ConfigError(ValueError):
    """A configuration value is unusable; the message names the variable and how to fix it."""


class OrgFeatures(BaseModel):
    """Per-org feature flags (the seed's ``organizations.features`` JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    feedback_weighting_disabled: bool = False


def default_data_dir(
    home: Path | None = None, platform: str = sys.platform, env: Mapping[str, str] | None = None
) -> Path:
    """The per-user data folder: XDG on Linux, Application Support on macOS, LOCALAPPDATA on Windows."""
    env = os.environ if env is None else env
    home = home or Path.home()
    if platform == "darwin":
        return home / "Library" / "Application Support" / "memoria"
    if platform.startswith("win"):
        base = env.get("LOCALAPPDATA")
        return (Path(base) if base else home / "AppData" / "Local") / "memoria"
    xdg = env.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else home / ".local" / "share") / "memoria"


# The optional LLM passes at assembly (retrieval.stages.llm_passes), in the order they run.
LLMPassName = Literal["context_selection", "fact_selection", "cleanup"]
LLM_PASS_NAMES: tuple[str, ...] = get_args(LLMPassName)


class Settings(BaseModel):
    """Everything the server can be told. Frozen: built once, passed everywhere."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    db_uri: str = Field(
        description="LanceDB URI: a local folder (default) or any LanceDB URI such as s3://bucket/path"
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict, description="LanceDB storage options (JSON object)"
    )
    cache_scope_rows: int = Field(
        250_000, ge=0, le=10_000_000, description="scopes up to this size are searched in memory (0: never)"
    )
    cache_total_rows: int = Field(
        400_000, ge=0, le=100_000_000, description="memories held in memory across all cached scopes"
    )
    malloc_arenas: int = Field(
        2, ge=0, le=64, description="glibc malloc arenas of the server process (0: glibc's default)"
    )
    malloc_mmap_threshold_kb: int = Field(
        64,
        ge=0,
        le=32_768,
        description="size (KB) from which glibc's malloc maps an allocation of the server process on its "
        "own and gives it back when freed (0: glibc's sliding threshold)",
    )
    blas_threads: int = Field(
        1,
        ge=0,
        le=256,
        description="threads of numpy's BLAS in the server process (0: the library's default)",
    )
    lancedb_index_cache_mb: int = Field(64, ge=1, le=65_536, description="LanceDB's cache of index data (MB)")
    lancedb_metadata_cache_mb: int = Field(
        64, ge=1, le=65_536, description="LanceDB's cache of table metadata: manifests, fragments (MB)"
    )
    vector_index_min_rows: int = Field(
        100_000, ge=0, description="memories at which maintenance builds the ANN vector index (0: never)"
    )
    org_id: str = Field("default", min_length=1, max_length=128, description="Default org scope")
    project_id: str = Field("default", min_length=1, max_length=128, description="Default project scope")

    embedder: Literal["auto", "sentence-transformers", "hashed"] = "auto"
    embedding_model: str = "sentence-transformers/all-MiniLM-L6-v2"
    vector_dim: int = Field(384, ge=8, le=4096, description="Vector width of a new store")
    reranker: Literal["auto", "cross-encoder", "cohere", "none"] = "auto"
    rerank_model: str = "cross-encoder/ms-marco-MiniLM-L6-v2"
    cohere_api_key: SecretStr | None = None
    cohere_rerank_model: str = "rerank-v3.5"
    cohere_base_url: str | None = None
    cohere_timeout_seconds: float = Field(10.0, gt=0, le=120)
    allow_model_downloads: bool = True
    model_device: str = "cpu"
    model_backend: Literal["torch", "onnx", "openvino"] = Field(
        "onnx",
        description="inference backend of both local models: onnx (onnxruntime directly, exported from the "
        "folder once), torch, or openvino (sentence-transformers')",
    )
    embedding_model_file: str | None = Field(
        None,
        max_length=256,
        description="file in the model folder for onnx/openvino, e.g. a quantised export",
    )
    rerank_model_file: str | None = Field(None, max_length=256, description="the same for the cross-encoder")

    rerank_multiplier: int = Field(3, ge=1, le=20)
    top_k_facts: int = Field(10, ge=1, le=1_000, description="recall's top_k when a call gives none")
    top_k_episodes: int = Field(3, ge=0, le=100, description="episode summaries a context may hold")
    max_episodes: int = Field(10, ge=1, le=1_000, description="distinct episodes a context may hold")
    min_fact_score: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="the relevance floor: candidates below it never enter the context; default measured "
        "per backend (0.10 hashed vectors, 0.15 a model, 0.02 with a reranker)",
    )
    forget_min_relevance: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="forget by query only touches memories at least this relevant to the query",
    )
    author_discount: float = Field(
        0.5,
        ge=0.0,
        lt=1.0,
        description="relevance cut for other agents' memories when the query names an agent",
    )
    instruction_demotion: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="relevance kept by a memory whose text reads as instructions to the model (1: flag only)",
    )
    gate: Literal["local", "llm", "off"] = "local"
    query_time_words: bool = Field(
        False,
        description="a time expression in a recall's query ('last week') becomes its window when unambiguous",
    )
    fulltext_search: bool = True
    corroboration: bool = True
    episode_expansion: bool = True
    score_propagation_alpha: float = Field(0.5, gt=0.0, lt=1.0)
    max_siblings: int = Field(3, ge=0, le=50, description="siblings each retrieved memory may bring")
    max_iterations: int = Field(1, ge=1, le=5)
    sufficiency_threshold: float = Field(0.7, ge=0.0, le=1.0)
    llm: Literal["auto", "sampling", "cohere", "openai", "none"] = "auto"
    cohere_chat_model: str = "command-a-03-2025"
    openai_base_url: str | None = Field(
        None, description="an OpenAI-compatible chat endpoint (Ollama, llama.cpp, vLLM, OpenAI), up to /v1"
    )
    openai_model: str | None = None
    openai_api_key: SecretStr | None = None
    openai_timeout_seconds: float = Field(30.0, gt=0, le=600)
    llm_passes: list[LLMPassName] = Field(
        default_factory=list,
        description="the optional LLM passes at assembly that run (none by default): context_selection, "
        "fact_selection, cleanup; through the same language model as the LLM reranker",
    )
    llm_reranker: dict[str, Any] = Field(
        default_factory=dict,
        description="the MemberJunction shape: enabled, modelId (or model), topK, minScore",
    )
    llm_reranker_by_agent: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="an agent's own LLM reranker configuration: {agent_id: {...}}"
    )
    llm_prices: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="USD per million tokens by model, for the LLM reranker's cost: {model: {input, output}}",
    )
    enable_consolidation: bool = True
    consolidation_resolve_threshold: float = Field(0.60, ge=0.0, le=1.0)
    consolidation_text_dedup_threshold: float = Field(0.8, ge=0.0, le=1.0)
    consolidation_cluster_concurrency: int = Field(4, ge=1, le=64)
    consolidation_max_existing_matches: int = Field(5, ge=1, le=100)
    consolidation_rerank: bool = Field(False, description="the rerank step before pairwise resolution")
    consolidation_rerank_pool: int = Field(20, ge=1, le=200)
    consolidation_rerank_min_score: float = Field(0.5, ge=0.0, le=1.0)
    consolidate_across_agents: bool = False
    enable_artifact_consolidation: bool = True
    artifact_consolidation_confidence_threshold: float = Field(0.5, ge=0.0, le=1.0)
    contradiction_oppositions: list[tuple[str, str]] = Field(
        default_factory=list, description="extra opposition pairs, JSON [[word, opposite], ...]"
    )
    ephemeral_ttl_seconds: float = Field(7 * 24 * 3600.0, gt=0)
    decay_half_life_days: float = Field(
        0.0, ge=0, description="standard memories' relevance halves every that many days (0: no decay)"
    )
    ephemeral_half_life_days: float = Field(
        2.0, ge=0, description="ephemeral memories' relevance halves every that many days (0: no decay)"
    )
    aggregation_interval_seconds: float = Field(60.0, gt=0)
    aggregation_max_rows: int = Field(10_000, ge=1, le=10_000_000)
    fusion_vector_weight: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="w in the fused score; default 0.3 on hashed vectors, 0.4 with a model",
    )
    feedback_ema_alpha: float = Field(0.2, gt=0.0, le=1.0)
    feedback_named_alpha: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="the EMA step of a memory the agent named helpful or misleading, in the weight for a "
        "query close to the reporting session's (the global weight keeps feedback_ema_alpha)",
    )
    feedback_min_weight: float = Field(0.25, gt=0.0)
    feedback_max_weight: float = Field(1.75, gt=0.0)
    feedback_closeness: tuple[float, float] | None = Field(
        None,
        description="[start, full]: the query cosine at which a report starts to count for a recall and "
        "counts fully; default measured per embedder ([0.3, 0.6] hashed, [0.65, 0.9] a model)",
    )
    feedback_relative_floor: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="a memory scoring below this fraction of its context's best never moves with an outcome",
    )
    feedback_absolute_floor: float = Field(
        0.05, ge=0.0, le=1.0, description="nor one scoring below this relevance"
    )
    feedback_failure_share: float = Field(
        0.5, ge=0.0, le=1.0, description="an unnamed memory's share of a failed session's blame"
    )
    feedback_unnamed_share: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="when an agent names helpful or misleading memories, the others move by this fraction",
    )
    org_features: dict[str, OrgFeatures] = Field(default_factory=dict)

    max_content_chars: int = Field(20_000, ge=100, le=1_000_000)
    max_query_chars: int = Field(4_000, ge=50, le=100_000)
    max_top_k: int = Field(100, ge=1, le=1_000)
    min_char_budget: int = Field(200, ge=50)
    max_char_budget: int = Field(200_000, ge=1_000)
    max_tags: int = Field(32, ge=0, le=1_000)

    http_tokens_file: str | None = Field(
        None, description="JSON file of static bearer tokens and the scopes each may read and write"
    )
    oauth_issuer_url: str | None = Field(None, description="OAuth 2.1: the authorization server's issuer URL")
    oauth_resource_url: str | None = Field(
        None, description="OAuth 2.1: this server's URL as tokens name it (their audience / resource)"
    )
    oauth_introspection_url: str | None = Field(
        None, description="OAuth 2.1: RFC 7662 introspection endpoint"
    )
    oauth_client_id: str | None = Field(None, description="OAuth 2.1: client id for introspection")
    oauth_client_secret: SecretStr | None = None
    http_allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host headers accepted when bound beyond loopback, e.g. memory.example.com:* (421 otherwise)",
    )
    http_allowed_origins: list[str] = Field(
        default_factory=list,
        description="Origin headers accepted from browsers, e.g. https://app.example.com",
    )
    http_max_body_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024, description="larger HTTP request bodies get 413"
    )
    http_allow_unauthenticated: bool = Field(
        False,
        description="serve HTTP beyond loopback without tokens (only behind your own authenticating proxy)",
    )

    maintenance_interval_seconds: float = Field(30.0, gt=0)
    compaction_min_fragments: int = Field(16, ge=2)
    keep_versions_seconds: float = Field(
        5.0,
        gt=0,
        le=604_800,
        description="seconds a table version is kept once a newer one replaced it (a read on it finishes first)",
    )
    compaction_after_appends: int = Field(
        100,
        ge=0,
        description="appends that start a maintenance round before its interval, or 1% of the memories if "
        "more (0: the interval only)",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("feedback_max_weight")
    @classmethod
    def _max_above_min(cls, value: float, info: Any) -> float:
        low = info.data.get("feedback_min_weight")
        if low is not None and value <= low:
            raise ValueError(f"must be greater than feedback_min_weight ({low}), but got {value}")
        return value

    @field_validator("llm_passes", mode="before")
    @classmethod
    def _known_passes(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            unknown = [name for name in value if name not in LLM_PASS_NAMES]
            if unknown:
                raise ValueError(
                    f"unknown pass {', '.join(map(repr, unknown))}: the passes are context_selection, "
                    "fact_selection and cleanup, comma-separated or as a JSON list"
                )
        return value

    @field_validator("feedback_closeness")
    @classmethod
    def _closeness_range(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not -1.0 <= value[0] < value[1] <= 1.0:
            raise ValueError(f"must be [start, full] with -1 <= start < full <= 1, but got {list(value)}")
        return value

    @field_validator("oauth_issuer_url", "oauth_resource_url", "oauth_introspection_url")
    @classmethod
    def _https_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        loopback = parts.hostname in {"127.0.0.1", "localhost", "::1"}
        if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
            raise ValueError(f"must be an https:// URL (http:// only on loopback), but got {value!r}")
        return value

    @field_validator("openai_base_url")
    @classmethod
    def _chat_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http(s) URL such as http://127.0.0.1:11434/v1, but got {value!r}")
        return value

    @model_validator(mode="after")
    def _openai_complete(self) -> Settings:
        if self.llm == "openai" and not self.openai_base_url:
            raise ValueError("MEMORIA_LLM=openai needs MEMORIA_OPENAI_BASE_URL (and MEMORIA_OPENAI_MODEL)")
        if self.openai_base_url and not self.openai_model:
            raise ValueError(
                "MEMORIA_OPENAI_BASE_URL needs MEMORIA_OPENAI_MODEL: the model the endpoint serves"
            )
        return self

    @property
    def background_llm(self) -> Literal["openai", "cohere"] | None:
        """The model that answers when no client can (a client without sampling, a command, the
        consolidation sweep): an OpenAI-compatible endpoint, else Cohere chat, whichever MEMORIA_LLM allows
        and is configured."""
        if self.llm in ("auto", "openai") and self.openai_base_url:
            return "openai"
        if self.llm in ("auto", "cohere") and self.cohere_api_key is not None:
            return "cohere"
        return None

    def feedback_weighting_enabled(self, org_id: str) -> bool:
        """The seed's org toggle: enabled unless the org's features say ``feedback_weighting_disabled``."""
        features = self.org_features.get(org_id)
        return not (features and features.feedback_weighting_disabled)

    @property
    def is_local_store(self) -> bool:
        return "://" not in self.db_uri or self.db_uri.startswith("file://")

    def schema_limits(self, tool: str) -> dict[str, dict[str, int]]:
        """``tool``'s argument bounds as this server enforces them, for the schemas clients read."""
        limits = {
            "content": {"maxLength": self.max_content_chars},
            "query": {"maxLength": self.max_query_chars},
            "top_k": {"minimum": 1, "maximum": self.max_top_k},
            "char_budget": {"minimum": self.min_char_budget, "maximum": self.max_char_budget},
        }
        if tool in ("remember", "remember_many"):  # the tags a memory carries (recall's filter: its own)
            limits["tags"] = {"maxItems": self.max_tags}
        return limits

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build the settings from ``MEMORIA_*`` variables (see ``ENVIRONMENT``); overrides win."""
        env = os.environ if environ is None else environ
        renamed = [f"{old} is now {new} ({why})" for old, (new, why) in RENAMED.items() if env.get(old)]
        if renamed:
            raise ConfigError(
                "invalid configuration: " + "; ".join(renamed) + ". Set the new variable instead."
            )
        values: dict[str, Any] = {}
        for field_name, variable in ENVIRONMENT.items():
            raw = env.get(variable)
            if raw is None or raw == "":
                continue
            values[field_name] = _parse(field_name, variable, raw)
        values.update(overrides)
        values.setdefault("db_uri", str(default_data_dir(env=env) / "lancedb"))
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                if not error["loc"]:  # a rule across settings: its message names the variables
                    problems.append(str(error["msg"]).removeprefix("Value error, "))
                    continue
                field_name = str(error["loc"][0])
                variable = ENVIRONMENT.get(field_name, field_name)
                problems.append(f"{variable}: {str(error['msg']).removeprefix('Value error, ')}")
            raise ConfigError("invalid configuration: " + "; ".join(problems)) from None


_LIST_FIELDS = {"http_allowed_hosts", "http_allowed_origins", "llm_passes"}  # a JSON list, or comma-separated
_JSON_FIELDS = {
    "storage_options",
    "org_features",
    "llm_reranker",
    "llm_reranker_by_agent",
    "llm_prices",
    "contradiction_oppositions",
    "feedback_closeness",
    *_LIST_FIELDS,
}
_BOOL_TRUE = {"1", "true", "yes", "on"}
_BOOL_FALSE = {"0", "false", "no", "off"}


def _parse(field_name: str, variable: str, raw: str) -> Any:
    if field_name in _LIST_FIELDS and not raw.lstrip().startswith("["):
        return [item.strip() for item in raw.split(",") if item.strip()]
    if field_name in _JSON_FIELDS:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{variable} must be JSON, but it does not parse: {exc.msg}") from None
        expected = (
            list if field_name in {"contradiction_oppositions", "feedback_closeness", *_LIST_FIELDS} else dict
        )
        noun = "a JSON list" if expected is list else "a JSON object"
        if not isinstance(value, expected):
            raise ConfigError(f"{variable} must be {noun}, but got {type(value).__name__}")
        return value
    if Settings.model_fields[field_name].annotation is bool:
        lowered = raw.strip().lower()
        if lowered in _BOOL_TRUE:
            return True
        if lowered in _BOOL_FALSE:
            return False
        raise ConfigError(f"{variable} must be true or false, but got {raw!r}")
    return raw.strip()


# Field -> environment variable. Every variable the server reads is here and in mcp.json.
ENVIRONMENT: dict[str, str] = {
    "db_uri": "MEMORIA_DB_URI",
    "storage_options": "MEMORIA_STORAGE_OPTIONS",
    "cache_scope_rows": "MEMORIA_CACHE_SCOPE_ROWS",
    "cache_total_rows": "MEMORIA_CACHE_TOTAL_ROWS",
    "malloc_arenas": "MEMORIA_MALLOC_ARENAS",
    "malloc_mmap_threshold_kb": "MEMORIA_MALLOC_MMAP_THRESHOLD_KB",
    "blas_threads": "MEMORIA_BLAS_THREADS",
    "lancedb_index_cache_mb": "MEMORIA_LANCEDB_INDEX_CACHE_MB",
    "lancedb_metadata_cache_mb": "MEMORIA_LANCEDB_METADATA_CACHE_MB",
    "org_id": "MEMORIA_ORG_ID",
    "project_id": "MEMORIA_PROJECT_ID",
    "embedder": "MEMORIA_EMBEDDER",
    "embedding_model": "MEMORIA_EMBEDDING_MODEL",
    "vector_dim": "MEMORIA_VECTOR_DIM",
    "reranker": "MEMORIA_RERANKER",
    "rerank_model": "MEMORIA_RERANK_MODEL",
    "cohere_api_key": "COHERE_API_KEY",
    "cohere_rerank_model": "MEMORIA_COHERE_RERANK_MODEL",
    "cohere_base_url": "MEMORIA_COHERE_BASE_URL",
    "cohere_timeout_seconds": "MEMORIA_COHERE_TIMEOUT_SECONDS",
    "allow_model_downloads": "MEMORIA_ALLOW_MODEL_DOWNLOADS",
    "model_device": "MEMORIA_MODEL_DEVICE",
    "model_backend": "MEMORIA_MODEL_BACKEND",
    "embedding_model_file": "MEMORIA_EMBEDDING_MODEL_FILE",
    "rerank_model_file": "MEMORIA_RERANK_MODEL_FILE",
    "rerank_multiplier": "MEMORIA_RERANK_MULTIPLIER",
    "top_k_facts": "MEMORIA_TOP_K_FACTS",
    "top_k_episodes": "MEMORIA_TOP_K_EPISODES",
    "max_episodes": "MEMORIA_MAX_EPISODES",
    "min_fact_score": "MEMORIA_MIN_FACT_SCORE",
    "forget_min_relevance": "MEMORIA_FORGET_MIN_RELEVANCE",
    "author_discount": "MEMORIA_AUTHOR_DISCOUNT",
    "instruction_demotion": "MEMORIA_INSTRUCTION_DEMOTION",
    "gate": "MEMORIA_GATE",
    "query_time_words": "MEMORIA_QUERY_TIME_WORDS",
    "fulltext_search": "MEMORIA_FULLTEXT_SEARCH",
    "corroboration": "MEMORIA_CORROBORATION",
    "episode_expansion": "MEMORIA_EPISODE_EXPANSION",
    "score_propagation_alpha": "MEMORIA_SCORE_PROPAGATION_ALPHA",
    "max_siblings": "MEMORIA_MAX_SIBLINGS",
    "max_iterations": "MEMORIA_MAX_ITERATIONS",
    "sufficiency_threshold": "MEMORIA_SUFFICIENCY_THRESHOLD",
    "llm": "MEMORIA_LLM",
    "cohere_chat_model": "MEMORIA_COHERE_CHAT_MODEL",
    "openai_base_url": "MEMORIA_OPENAI_BASE_URL",
    "openai_model": "MEMORIA_OPENAI_MODEL",
    "openai_api_key": "MEMORIA_OPENAI_API_KEY",
    "openai_timeout_seconds": "MEMORIA_OPENAI_TIMEOUT_SECONDS",
    "llm_reranker": "MEMORIA_LLM_RERANKER",
    "llm_passes": "MEMORIA_LLM_PASSES",
    "llm_reranker_by_agent": "MEMORIA_LLM_RERANKER_BY_AGENT",
    "llm_prices": "MEMORIA_LLM_PRICES",
    "enable_consolidation": "MEMORIA_ENABLE_CONSOLIDATION",
    "consolidation_resolve_threshold": "MEMORIA_CONSOLIDATION_RESOLVE_THRESHOLD",
    "consolidation_text_dedup_threshold": "MEMORIA_CONSOLIDATION_TEXT_DEDUP_THRESHOLD",
    "consolidation_cluster_concurrency": "MEMORIA_CONSOLIDATION_CLUSTER_CONCURRENCY",
    "consolidation_max_existing_matches": "MEMORIA_CONSOLIDATION_MAX_EXISTING_MATCHES",
    "consolidation_rerank": "MEMORIA_CONSOLIDATION_RERANK",
    "consolidation_rerank_pool": "MEMORIA_CONSOLIDATION_RERANK_POOL",
    "consolidation_rerank_min_score": "MEMORIA_CONSOLIDATION_RERANK_MIN_SCORE",
    "consolidate_across_agents": "MEMORIA_CONSOLIDATE_ACROSS_AGENTS",
    "enable_artifact_consolidation": "MEMORIA_ENABLE_ARTIFACT_CONSOLIDATION",
    "artifact_consolidation_confidence_threshold": "MEMORIA_ARTIFACT_CONSOLIDATION_CONFIDENCE_THRESHOLD",
    "contradiction_oppositions": "MEMORIA_CONTRADICTION_OPPOSITIONS",
    "ephemeral_ttl_seconds": "MEMORIA_EPHEMERAL_TTL_SECONDS",
    "decay_half_life_days": "MEMORIA_DECAY_HALF_LIFE_DAYS",
    "ephemeral_half_life_days": "MEMORIA_EPHEMERAL_HALF_LIFE_DAYS",
    "aggregation_interval_seconds": "MEMORIA_AGGREGATION_INTERVAL_SECONDS",
    "aggregation_max_rows": "MEMORIA_AGGREGATION_MAX_ROWS",
    "fusion_vector_weight": "MEMORIA_FUSION_VECTOR_WEIGHT",
    "feedback_ema_alpha": "MEMORIA_FEEDBACK_EMA_ALPHA",
    "feedback_named_alpha": "MEMORIA_FEEDBACK_NAMED_ALPHA",
    "feedback_min_weight": "MEMORIA_FEEDBACK_MIN_WEIGHT",
    "feedback_max_weight": "MEMORIA_FEEDBACK_MAX_WEIGHT",
    "feedback_closeness": "MEMORIA_FEEDBACK_CLOSENESS",
    "feedback_relative_floor": "MEMORIA_FEEDBACK_RELATIVE_FLOOR",
    "feedback_absolute_floor": "MEMORIA_FEEDBACK_ABSOLUTE_FLOOR",
    "feedback_failure_share": "MEMORIA_FEEDBACK_FAILURE_SHARE",
    "feedback_unnamed_share": "MEMORIA_FEEDBACK_UNNAMED_SHARE",
    "org_features": "MEMORIA_ORG_FEATURES",
    "max_content_chars": "MEMORIA_MAX_CONTENT_CHARS",
    "max_query_chars": "MEMORIA_MAX_QUERY_CHARS",
    "max_top_k": "MEMORIA_MAX_TOP_K",
    "min_char_budget": "MEMORIA_MIN_CHAR_BUDGET",
    "max_char_budget": "MEMORIA_MAX_CHAR_BUDGET",
    "max_tags": "MEMORIA_MAX_TAGS",
    "http_tokens_file": "MEMORIA_HTTP_TOKENS_FILE",
    "oauth_issuer_url": "MEMORIA_OAUTH_ISSUER_URL",
    "oauth_resource_url": "MEMORIA_OAUTH_RESOURCE_URL",
    "oauth_introspection_url": "MEMORIA_OAUTH_INTROSPECTION_URL",
    "oauth_client_id": "MEMORIA_OAUTH_CLIENT_ID",
    "oauth_client_secret": "MEMORIA_OAUTH_CLIENT_SECRET",
    "http_allowed_hosts": "MEMORIA_HTTP_ALLOWED_HOSTS",
    "http_allowed_origins": "MEMORIA_HTTP_ALLOWED_ORIGINS",
    "http_max_body_bytes": "MEMORIA_HTTP_MAX_BODY_BYTES",
    "http_allow_unauthenticated": "MEMORIA_HTTP_ALLOW_UNAUTHENTICATED",
    "maintenance_interval_seconds": "MEMORIA_MAINTENANCE_INTERVAL_SECONDS",
    "compaction_min_fragments": "MEMORIA_COMPACTION_MIN_FRAGMENTS",
    "compaction_after_appends": "MEMORIA_COMPACTION_AFTER_APPENDS",
    "keep_versions_seconds": "MEMORIA_KEEP_VERSIONS_SECONDS",
    "vector_index_min_rows": "MEMORIA_VECTOR_INDEX_MIN_ROWS",
    "log_level": "MEMORIA_LOG_LEVEL",
}

# Variables that were renamed: set, they stop the server with the new name rather than being ignored.
RENAMED = {
    "MEMORIA_KEEP_VERSIONS_MINUTES": (
        "MEMORIA_KEEP_VERSIONS_SECONDS",
        "how long a version is kept once a newer one replaced it, in seconds",
    ),
}


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


def limit_blas_threads(threads: int) -> None:
    """Hold numpy's BLAS to ``threads`` threads, before numpy loads. The scope copies' vector products
    (every recall's vector leg, every write's consolidation check) are matrix-vector products that BLAS
    splits over threads from about a thousand rows on; a server already answers requests in parallel,
    and on a busy machine those threads spin and wait for each other: with two cores taken by other
    work a 1,500-row product took 1.5 ms on all threads and 0.37 ms on one, and a server's write rate fell
    to a fifth after 1,200 writes (benchmarks/writes.py). A variable the environment already sets wins;
    0 leaves the library's default."""
    if threads <= 0:
        return
    if "numpy" in sys.modules:  # loaded already: its BLAS keeps its threads
        return
    for variable in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(variable, str(threads))
