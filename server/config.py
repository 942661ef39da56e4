"""The server's one frozen configuration object, read from the environment once at start-up.

Nothing else in the project reads ``os.environ``. Each setting is declared once, here: a field ``x`` is
read from ``MEMORIA_X``, a field ``y`` of a group ``g`` from ``MEMORIA_G_Y`` (``variables()`` lists them;
docs/configuration.md describes them).
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)


class ConfigError(ValueError):
    """A configuration value is unusable; the message names the variable and how to fix it."""


class OrgFeatures(BaseModel):
    """Per-org feature flags (an org's ``features`` JSON object)."""

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


def local_store_folder(db_uri: str) -> Path | None:
    """The folder a store URI names on this machine (a path, or ``file://``); None for an object store's
    URI (s3://, gs://, ...), whose existence is its own business."""
    if "://" in db_uri and not db_uri.startswith("file://"):
        return None
    return Path(db_uri.removeprefix("file://")).expanduser()


# The optional LLM passes at assembly (retrieval.stages.llm_passes), in the order they run.
LLMPassName = Literal["context_selection", "fact_selection", "cleanup"]
LLM_PASS_NAMES: tuple[str, ...] = get_args(LLMPassName)


PREFIX = "MEMORIA_"


class Group(BaseModel):
    """A group of settings: its field ``x`` is read from ``MEMORIA_<GROUP>_X``."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _json(value: Any, expected: type, noun: str) -> Any:
    """A JSON variable's value (values given in Python pass through)."""
    if not isinstance(value, str):
        return value
    try:
        value = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"must be JSON, but it does not parse: {exc.msg}") from None
    if not isinstance(value, expected):
        raise ValueError(f"must be {noun}, but got {type(value).__name__}")
    return value


def _items(value: Any) -> Any:
    """A list variable: comma-separated, or a JSON list."""
    if isinstance(value, str) and not value.lstrip().startswith("["):
        return [item.strip() for item in value.split(",") if item.strip()]
    return _json(value, list, "a JSON list")


JSON_OBJECT = BeforeValidator(lambda value: _json(value, dict, "a JSON object"))
JSON_LIST = BeforeValidator(lambda value: _json(value, list, "a JSON list"))
ITEMS = BeforeValidator(_items)


class CacheSettings(Group):
    """The in-process copies of small scopes that recall searches instead of LanceDB."""

    scope_rows: int = Field(
        250_000, ge=0, le=10_000_000, description="scopes up to this size are searched in memory (0: never)"
    )
    total_rows: int = Field(
        400_000, ge=0, le=100_000_000, description="memories held in memory across all cached scopes"
    )


class MallocSettings(Group):
    """glibc's allocator in the server process (``server.serve`` applies them before anything allocates)."""

    arenas: int = Field(
        2, ge=0, le=64, description="glibc malloc arenas of the server process (0: glibc's default)"
    )
    mmap_threshold_kb: int = Field(
        64,
        ge=0,
        le=32_768,
        description="size (KB) from which glibc's malloc maps an allocation of the server process on its "
        "own and gives it back when freed (0: glibc's sliding threshold)",
    )


class CollectorSettings(Group):
    """Python's cyclic garbage collector in the server process (``server.serve`` applies them)."""

    young_threshold: int = Field(
        20_000,
        ge=0,
        le=10_000_000,
        description="new container objects between two young collections of the server process (0: "
        "Python's default, 700)",
    )
    freeze_when_warm: bool = Field(
        True,
        description="once the runtime is built and the scope copies warmed, keep the objects that exist "
        "then (modules, models, the copies) out of later collections (gc.freeze)",
    )


class LanceDBSettings(Group):
    """LanceDB's own caches."""

    index_cache_mb: int = Field(64, ge=1, le=65_536, description="LanceDB's cache of index data (MB)")
    metadata_cache_mb: int = Field(
        64, ge=1, le=65_536, description="LanceDB's cache of table metadata: manifests, fragments (MB)"
    )


class VectorSettings(Group):
    """The stored vectors."""

    dim: int = Field(384, ge=8, le=4096, description="Vector width of a new store")
    index_min_rows: int = Field(
        100_000, ge=0, description="memories at which maintenance builds the ANN vector index (0: never)"
    )


class EmbeddingSettings(Group):
    """The local embedding model (``embedder``: which embedder runs)."""

    model: str = Field("sentence-transformers/all-MiniLM-L6-v2", description="Hub id or local folder")
    model_file: str | None = Field(
        None,
        max_length=256,
        description="file in the model folder for onnx/openvino, e.g. a quantised export",
    )


class RerankSettings(Group):
    """The local cross-encoder (``reranker``: which reranker runs) and the candidates it sees."""

    model: str = Field("cross-encoder/ms-marco-MiniLM-L6-v2", description="Hub id or local folder")
    model_file: str | None = Field(None, max_length=256, description="the same for the cross-encoder")
    multiplier: int = Field(3, ge=1, le=20, description="candidates = top_k x this")


class ModelSettings(Group):
    """How both local models run."""

    device: str = Field("cpu", description="torch device for local models")
    backend: Literal["torch", "onnx", "openvino"] = Field(
        "onnx",
        description="inference backend of both local models: onnx (onnxruntime directly, exported from the "
        "folder once), torch, or openvino (sentence-transformers')",
    )


class CohereSettings(Group):
    """Cohere's API: Rerank, and chat for the LLM stages. The key is also read from ``COHERE_API_KEY``."""

    api_key: SecretStr | None = None
    rerank_model: str = "rerank-v3.5"
    base_url: str | None = None
    timeout_seconds: float = Field(10.0, gt=0, le=120)
    chat_model: str = "command-a-03-2025"


class OpenAISettings(Group):
    """An OpenAI-compatible chat endpoint for the LLM stages."""

    base_url: str | None = Field(
        None, description="an OpenAI-compatible chat endpoint (Ollama, llama.cpp, vLLM, OpenAI), up to /v1"
    )
    model: str | None = None
    api_key: SecretStr | None = None
    timeout_seconds: float = Field(30.0, gt=0, le=600)

    @field_validator("base_url")
    @classmethod
    def _chat_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http(s) URL such as http://127.0.0.1:11434/v1, but got {value!r}")
        return value


class ConsolidationSettings(Group):
    """Consolidation on write and in the sweep (``writing.consolidation.service.ConsolidationPolicy``)."""

    enabled: bool = True
    resolve_threshold: float = Field(0.60, ge=0.0, le=1.0)
    text_dedup_threshold: float = Field(0.8, ge=0.0, le=1.0)
    cluster_concurrency: int = Field(4, ge=1, le=64)
    max_existing_matches: int = Field(5, ge=1, le=100)
    rerank: bool = Field(False, description="the rerank step before pairwise resolution")
    rerank_pool: int = Field(20, ge=1, le=200)
    rerank_min_score: float = Field(0.5, ge=0.0, le=1.0)
    across_agents: bool = Field(False, description="also merge near-duplicates written by different agents")
    artifacts: bool = Field(True, description="artifact versioning")
    artifact_threshold: float = Field(0.5, ge=0.0, le=1.0)


class EphemeralSettings(Group):
    """Ephemeral memories."""

    ttl_seconds: float = Field(7 * 24 * 3600.0, gt=0)
    half_life_days: float = Field(
        2.0, ge=0, description="ephemeral memories' relevance halves every that many days (0: no decay)"
    )


class AggregationSettings(Group):
    """The aggregation job."""

    interval_seconds: float = Field(60.0, gt=0)
    max_rows: int = Field(10_000, ge=1, le=10_000_000)


class FeedbackSettings(Group):
    """Outcome feedback: the weight EMA and which memories an outcome moves."""

    ema_alpha: float = Field(0.2, gt=0.0, le=1.0)
    named_alpha: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="the EMA step of a memory the agent named helpful or misleading, in the weight for a "
        "query close to the reporting session's (the global weight keeps the EMA alpha)",
    )
    context_reach: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="how far reports naming no memory can take a memory of their contexts, as a share of "
        "the way to the bound a named memory reaches, however often they are repeated",
    )
    min_weight: float = Field(0.25, gt=0.0)
    max_weight: float = Field(1.75, gt=0.0)
    closeness: Annotated[tuple[float, float] | None, JSON_LIST] = Field(
        None,
        description="[start, full]: the query cosine at which a report starts to count for a recall and "
        "counts fully; default measured per embedder ([0.3, 0.6] hashed, [0.65, 0.9] a model)",
    )
    relative_floor: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="a memory scoring below this fraction of its context's best never moves with an outcome",
    )
    absolute_floor: float = Field(0.05, ge=0.0, le=1.0, description="nor one scoring below this relevance")
    failure_share: float = Field(
        0.5, ge=0.0, le=1.0, description="an unnamed memory's share of a failed session's blame"
    )
    unnamed_share: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="when an agent names helpful or misleading memories, the others move by this fraction",
    )

    @field_validator("max_weight")
    @classmethod
    def _max_above_min(cls, value: float, info: Any) -> float:
        low = info.data.get("min_weight")
        if low is not None and value <= low:
            raise ValueError(f"must be greater than MEMORIA_FEEDBACK_MIN_WEIGHT ({low}), but got {value}")
        return value

    @field_validator("closeness")
    @classmethod
    def _closeness_range(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not -1.0 <= value[0] < value[1] <= 1.0:
            raise ValueError(f"must be [start, full] with -1 <= start < full <= 1, but got {list(value)}")
        return value


MAX_BODY_BYTES = 256 * 1024 * 1024  # the most MEMORIA_HTTP_MAX_BODY_BYTES may say, and its derived default


class HttpSettings(Group):
    """The streamable HTTP transport."""

    tokens_file: str | None = Field(
        None, description="JSON file of static bearer tokens and the scopes each may read and write"
    )
    allowed_hosts: Annotated[list[str], ITEMS] = Field(
        default_factory=list,
        description="Host headers accepted when bound beyond loopback, e.g. memory.example.com:* (421 otherwise)",
    )
    allowed_origins: Annotated[list[str], ITEMS] = Field(
        default_factory=list,
        description="Origin headers accepted from browsers, e.g. https://app.example.com",
    )
    max_body_bytes: int | None = Field(
        None,
        ge=1024,
        le=MAX_BODY_BYTES,
        description="larger HTTP request bodies get 413; default: the largest call the tools' own limits let "
        "through (remember_many's 200 items of MEMORIA_MAX_CONTENT_CHARS at 4 bytes a character, and 1 MiB)",
    )
    allow_unauthenticated: bool = Field(
        False,
        description="serve HTTP beyond loopback without tokens (only behind your own authenticating proxy)",
    )


class OAuthSettings(Group):
    """HTTP as an OAuth 2.1 resource server."""

    issuer_url: str | None = Field(None, description="OAuth 2.1: the authorization server's issuer URL")
    resource_url: str | None = Field(
        None, description="OAuth 2.1: this server's URL as tokens name it (their audience / resource)"
    )
    introspection_url: str | None = Field(None, description="OAuth 2.1: RFC 7662 introspection endpoint")
    client_id: str | None = Field(None, description="OAuth 2.1: client id for introspection")
    client_secret: SecretStr | None = None

    @field_validator("issuer_url", "resource_url", "introspection_url")
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


class CompactionSettings(Group):
    """Background compaction of the table."""

    min_fragments: int = Field(16, ge=2)
    after_appends: int = Field(
        100,
        ge=0,
        description="appends that start a maintenance round before its interval, or 1% of the memories if "
        "more (0: the interval only)",
    )


class Settings(BaseSettings):
    """Everything the server can be told. Frozen: built once (``from_env``), passed everywhere."""

    # Only what ``from_env`` passes in: it reads the environment it is given, never os.environ behind it.
    # Values are text until the fields' own validators parse them (JSON, comma-separated lists).
    model_config = SettingsConfigDict(
        frozen=True,
        extra="forbid",
        env_prefix=PREFIX,
        env_nested_delimiter="_",
        env_nested_max_split=1,
        enable_decoding=False,
    )

    db_uri: str = Field(
        description="LanceDB URI: a local folder (default) or any LanceDB URI such as s3://bucket/path"
    )
    storage_options: Annotated[dict[str, str], JSON_OBJECT] = Field(
        default_factory=dict, description="LanceDB storage options (JSON object)"
    )
    cache: CacheSettings = CacheSettings()
    malloc: MallocSettings = MallocSettings()
    gc: CollectorSettings = CollectorSettings()
    blas_threads: int = Field(
        1,
        ge=0,
        le=256,
        description="threads of numpy's BLAS in the server process (0: the library's default)",
    )
    switch_interval_ms: float = Field(
        5.0,
        gt=0,
        le=100,
        description="how long a thread of the server runs Python before one waiting for the interpreter "
        "takes its turn (sys.setswitchinterval; Python's default is 5)",
    )
    uvloop: bool = Field(
        True,
        description="run the server's event loop on uvloop when it is installed (Linux and macOS): "
        "less time per MCP message than asyncio's own loop",
    )
    lancedb: LanceDBSettings = LanceDBSettings()
    vector: VectorSettings = VectorSettings()

    @field_validator("db_uri")
    @classmethod
    def _unquoted(cls, value: str) -> str:
        # A trial: '"/srv/memoria"' (quotes copied in from a .env or JSON file) made a folder named '"'.
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            raise ValueError(f"is quoted ({value}): remove the quotes around the path or URI")
        return value

    org_id: str = Field("default", min_length=1, max_length=128, description="Default org scope")
    project_id: str = Field("default", min_length=1, max_length=128, description="Default project scope")

    @field_validator("org_id", "project_id")
    @classmethod
    def _grantable(cls, value: str, info: Any) -> str:
        from storage.scope_ids import scope_id_problem

        problem = scope_id_problem(value, "org" if info.field_name == "org_id" else "project")
        if problem:
            raise ValueError(problem)
        return value

    embedder: Literal["auto", "sentence-transformers", "hashed"] = "auto"
    reembed_at_start: bool = Field(
        True,
        description="at start, give memories whose vectors another embedder made (another model, an older "
        "recipe) vectors from the active one, in the background; never on the offline fallback",
    )
    embedding: EmbeddingSettings = EmbeddingSettings()
    reranker: Literal["auto", "cross-encoder", "cohere", "none"] = "auto"
    rerank: RerankSettings = RerankSettings()
    model: ModelSettings = ModelSettings()
    allow_model_downloads: bool = True
    cohere: CohereSettings = CohereSettings()

    read_concurrency: int | None = Field(
        None,
        ge=1,
        le=64,
        description="recall and explain_ranking calls served at once; the others wait their turn, so that "
        "a burst of reads never holds up remembers and outcome reports (default 3; 40 when a step of "
        "recall waits on a network model)",
    )
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
    min_share_of_best: float | None = Field(
        None,
        ge=0.0,
        lt=1.0,
        description="a memory matching the query under this share of what the best match does is filler "
        "beside it and never enters the context, even below top_k; default 0.25 (measured), none with a "
        "reranker's scores (not measured); 0: every memory above the relevance floor may",
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
    neighbourhood_weight: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="share of the best direct match's score within neighbourhood_turns of a memory in its "
        "episode that the memory is lent (0: off)",
    )
    neighbourhood_turns: int = Field(
        2, ge=0, le=20, description="how many turns away, either side, a memory's episode neighbours may be"
    )
    answer_type_weight: float = Field(
        0.7,
        ge=0.0,
        le=2.0,
        description="the share of its weighted score a match is lent when a question asks when, where or how "
        "many and its text states a time, a place or a quantity (0: off)",
    )
    max_iterations: int = Field(1, ge=1, le=5)
    sufficiency_threshold: float = Field(0.7, ge=0.0, le=1.0)
    llm: Literal["auto", "sampling", "cohere", "openai", "none"] = "auto"
    sampling_timeout_seconds: float = Field(
        60.0,
        gt=0,
        le=600,
        description="how long a request to the client's own LLM (MCP sampling) may take before the rules "
        "decide without it",
    )
    openai: OpenAISettings = OpenAISettings()
    llm_passes: Annotated[list[LLMPassName], ITEMS] = Field(
        default_factory=list,
        description="the optional LLM passes at assembly that run (none by default): context_selection, "
        "fact_selection, cleanup; through the same language model as the LLM reranker",
    )
    llm_reranker: Annotated[dict[str, Any], JSON_OBJECT] = Field(
        default_factory=dict,
        description="a reranker configuration: enabled, modelId (or model), topK, minScore",
    )
    llm_reranker_by_agent: Annotated[dict[str, dict[str, Any]], JSON_OBJECT] = Field(
        default_factory=dict, description="an agent's own LLM reranker configuration: {agent_id: {...}}"
    )
    llm_prices: Annotated[dict[str, dict[str, float]], JSON_OBJECT] = Field(
        default_factory=dict,
        description="USD per million tokens by model, for the LLM reranker's cost: {model: {input, output}}",
    )
    consolidation: ConsolidationSettings = ConsolidationSettings()
    contradiction_oppositions: Annotated[list[tuple[str, str]], JSON_LIST] = Field(
        default_factory=list, description="extra opposition pairs, JSON [[word, opposite], ...]"
    )
    ephemeral: EphemeralSettings = EphemeralSettings()
    decay_half_life_days: float = Field(
        0.0, ge=0, description="standard memories' relevance halves every that many days (0: no decay)"
    )
    aggregation: AggregationSettings = AggregationSettings()
    fusion_vector_weight: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="w in the fused score; default 0.3 on hashed vectors, 2/3 with a model",
    )
    fusion_context_share: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="c, the share of w given to a memory's context cosine (it with its episode neighbours); "
        "default 0 on hashed vectors, 0.5 with a model",
    )
    feedback: FeedbackSettings = FeedbackSettings()
    org_features: Annotated[dict[str, OrgFeatures], JSON_OBJECT] = Field(default_factory=dict)

    max_content_chars: int = Field(20_000, ge=100, le=1_000_000)
    max_query_chars: int = Field(4_000, ge=50, le=100_000)
    max_top_k: int = Field(100, ge=1, le=1_000)
    min_char_budget: int = Field(200, ge=50)
    max_char_budget: int = Field(200_000, ge=1_000)
    max_tags: int = Field(32, ge=0, le=1_000)

    http: HttpSettings = HttpSettings()
    oauth: OAuthSettings = OAuthSettings()

    maintenance_interval_seconds: float = Field(30.0, gt=0)
    compaction: CompactionSettings = CompactionSettings()
    keep_versions_seconds: float = Field(
        5.0,
        gt=0,
        le=604_800,
        description="seconds a table version is kept once a newer one replaced it (a read on it finishes first)",
    )
    journal_retention_days: float = Field(
        30.0,
        ge=0,
        le=36_500,
        description="days each recall's record (trace, context, A/B rows) is kept for explain_ranking, "
        "report_outcome and the report (0: for ever)",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("llm_passes", mode="before")
    @classmethod
    def _known_passes(cls, value: Any) -> Any:
        value = _items(value)
        if isinstance(value, (list, tuple)):
            unknown = [name for name in value if name not in LLM_PASS_NAMES]
            if unknown:
                raise ValueError(
                    f"unknown pass {', '.join(map(repr, unknown))}: the passes are context_selection, "
                    "fact_selection and cleanup, comma-separated or as a JSON list"
                )
        return value

    @model_validator(mode="after")
    def _openai_complete(self) -> Settings:
        if self.llm == "openai" and not self.openai.base_url:
            raise ValueError("MEMORIA_LLM=openai needs MEMORIA_OPENAI_BASE_URL (and MEMORIA_OPENAI_MODEL)")
        if self.openai.base_url and not self.openai.model:
            raise ValueError(
                "MEMORIA_OPENAI_BASE_URL needs MEMORIA_OPENAI_MODEL: the model the endpoint serves"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # from_env reads the environment it is given (_Environment)

    @property
    def background_llm(self) -> Literal["openai", "cohere"] | None:
        """The model that answers when no client can (a client without sampling, a command, the
        consolidation sweep): an OpenAI-compatible endpoint, else Cohere chat, whichever MEMORIA_LLM allows
        and is configured."""
        if self.llm in ("auto", "openai") and self.openai.base_url:
            return "openai"
        if self.llm in ("auto", "cohere") and self.cohere.api_key is not None:
            return "cohere"
        return None

    def feedback_weighting_enabled(self, org_id: str) -> bool:
        """The org's toggle: feedback weighting is on unless the org's features say ``feedback_weighting_disabled``."""
        features = self.org_features.get(org_id)
        return not (features and features.feedback_weighting_disabled)

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
        """Build the settings from ``MEMORIA_*`` variables; ``overrides`` win. An override is named like its
        variable, in lower case and without the prefix (``cache_scope_rows=0``)."""
        env = dict(os.environ if environ is None else environ)
        renamed = [f"{old} is now {new} ({why})" for old, (new, why) in RENAMED.items() if env.get(old)]
        if renamed:
            raise ConfigError(
                "invalid configuration: " + "; ".join(renamed) + ". Set the new variable instead."
            )
        for standard, own in ALIASES.items():
            if env.get(standard) and not env.get(own):
                env[own] = env[standard]
        _warn_unknown(env)
        values = _merge(_Environment(cls, env)(), nest(overrides))
        values.setdefault("db_uri", str(default_data_dir(env=env) / "lancedb"))
        return cls._validated(values)

    def flat(self, names: Iterable[str]) -> dict[str, Any]:
        """Settings by their variables' names (``cache_scope_rows``), for an option object whose fields are
        named so."""
        values: dict[str, Any] = {}
        for name in names:
            value: Any = self
            for step in path_of(name):
                value = getattr(value, step)
            values[name] = value
        return values

    def replace(self, **overrides: Any) -> Settings:
        """A copy with ``overrides`` (named as for ``from_env``), validated again."""
        return self._validated(_merge(self.model_dump(), nest(overrides)))

    @classmethod
    def _validated(cls, values: dict[str, Any]) -> Settings:
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                message = str(error["msg"]).removeprefix("Value error, ")
                if error["type"] == "bool_parsing":
                    message = f"must be true or false, but got {error['input']!r}"
                if not error["loc"]:  # a rule across settings: its message names the variables
                    problems.append(message)
                    continue
                variable, within = variable_at(error["loc"])
                if error["type"] == "extra_forbidden" and len(error["loc"]) == 2:
                    close = difflib.get_close_matches(variable.upper(), list(variables()), n=1, cutoff=0.8)
                    message = (
                        f"no such setting (did you mean {close[0]}?)"
                        if close
                        else "no such setting (docs/configuration.md lists them)"
                    )
                where = f" (at {'.'.join(map(str, within))})" if within else ""
                problems.append(f"{variable}{where}: {message}")
            raise ConfigError("invalid configuration: " + "; ".join(problems)) from None


_warned: set[str] = set()


def _warn_unknown(env: Mapping[str, str]) -> None:
    """Say once per process, on stderr's log, each ``MEMORIA_*`` variable that is no setting, with the
    closest one: a misspelt ``MEMORIA_TOP_K_FACT`` would otherwise be ignored in silence. (A misspelt
    field of a group, ``MEMORIA_FEEDBACK_MAX_WEIGHTT``, is refused by the group's validation instead.)"""
    known = variables()
    group_prefixes = tuple(f"{PREFIX}{name}_".upper() for name in groups())
    for name in sorted(env):
        upper = name.upper()
        if (
            not upper.startswith(PREFIX)
            or not str(env[name]).strip()
            or upper in known
            or upper in RENAMED
            or upper in ALIASES.values()
            or upper.startswith(group_prefixes)
            or upper in _warned
        ):
            continue
        _warned.add(upper)
        close = difflib.get_close_matches(upper, list(known), n=1, cutoff=0.8)
        hint = f"did you mean {close[0]}?" if close else "docs/configuration.md lists the settings"
        logging.getLogger(__name__).warning("%s is not a memoria setting and is ignored (%s)", name, hint)


class _Environment(EnvSettingsSource):
    """pydantic-settings' reading of ``MEMORIA_*`` variables, over the environment it is given. An empty
    variable means the default. Only a group's variables are split into group and field:
    ``MEMORIA_LLM_RERANKER_BY_AGENT`` is a setting of its own, not a key of ``MEMORIA_LLM_RERANKER``'s."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = {name.lower(): value.strip() for name, value in environ.items() if value.strip()}
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self._environ

    def explode_env_vars(
        self, field_name: str, field: FieldInfo, env_vars: Mapping[str, str | None]
    ) -> dict[str, Any]:
        if not _is_group(field.annotation):
            return {}
        return super().explode_env_vars(field_name, field, env_vars)


def _is_group(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Group)


def groups() -> dict[str, type[Group]]:
    """The settings' groups by field name."""
    return {
        name: annotation
        for name, field in Settings.model_fields.items()
        if isinstance(annotation := field.annotation, type) and issubclass(annotation, Group)
    }


def variables() -> dict[str, FieldInfo]:
    """Every variable the settings read, with the field it sets."""
    found: dict[str, FieldInfo] = {}
    for name, field in Settings.model_fields.items():
        group = groups().get(name)
        if group is None:
            found[f"{PREFIX}{name}".upper()] = field
            continue
        for sub_name, sub_field in group.model_fields.items():
            found[f"{PREFIX}{name}_{sub_name}".upper()] = sub_field
    for standard, own in ALIASES.items():
        found[standard] = found[own]
    return found


def variable_at(loc: tuple[int | str, ...]) -> tuple[str, tuple[int | str, ...]]:
    """The variable that sets the value at a validation error's location, and where inside it the error is."""
    head = str(loc[0])
    if head in groups() and len(loc) > 1:
        return f"{PREFIX}{head}_{loc[1]}".upper(), loc[2:]
    return f"{PREFIX}{head}".upper(), loc[1:]


def path_of(name: str) -> tuple[str, ...]:
    """Where the setting named like its variable (``cache_scope_rows``) sits: ``("cache", "scope_rows")``."""
    if name in Settings.model_fields:
        return (name,)
    for group_name, group in groups().items():
        field = name.removeprefix(f"{group_name}_")
        if field != name and field in group.model_fields:
            return group_name, field
    raise TypeError(f"no setting is named {name!r}")


def nest(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Flat overrides (``cache_scope_rows=0``) as the nested values the settings take (``cache={...}``)."""
    nested: dict[str, Any] = {}
    fields: dict[str, dict[str, Any]] = {}  # a group's fields named one by one, applied over the group
    for key, value in overrides.items():
        match path_of(key):
            case (name,):
                nested[name] = value
            case (group_name, field):
                fields.setdefault(group_name, {})[field] = value
    for group_name, named in fields.items():
        given = nested.get(group_name)
        base = given.model_dump() if isinstance(given, BaseModel) else dict(given or {})  # never the caller's
        nested[group_name] = {**base, **named}
    return nested


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides``; a group's values are merged field by field."""
    merged = dict(base)
    for key, value in overrides.items():
        if key in groups() and isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


# A standard third-party variable, read when memoria's own is unset.
ALIASES = {"COHERE_API_KEY": "MEMORIA_COHERE_API_KEY"}

# Variables that were renamed: set, they stop the server with the new name rather than being ignored.
RENAMED = {
    "MEMORIA_KEEP_VERSIONS_MINUTES": (
        "MEMORIA_KEEP_VERSIONS_SECONDS",
        "how long a version is kept once a newer one replaced it, in seconds",
    ),
    "MEMORIA_ENABLE_CONSOLIDATION": (
        "MEMORIA_CONSOLIDATION_ENABLED",
        "consolidation's settings share a prefix",
    ),
    "MEMORIA_CONSOLIDATE_ACROSS_AGENTS": (
        "MEMORIA_CONSOLIDATION_ACROSS_AGENTS",
        "consolidation's settings share a prefix",
    ),
    "MEMORIA_ENABLE_ARTIFACT_CONSOLIDATION": (
        "MEMORIA_CONSOLIDATION_ARTIFACTS",
        "consolidation's settings share a prefix",
    ),
    "MEMORIA_ARTIFACT_CONSOLIDATION_CONFIDENCE_THRESHOLD": (
        "MEMORIA_CONSOLIDATION_ARTIFACT_THRESHOLD",
        "consolidation's settings share a prefix",
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
