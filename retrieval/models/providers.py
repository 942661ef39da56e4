"""Choosing and loading the embedder and reranker, falling back to the offline backend when a model
cannot be loaded. Runs in a background thread at start-up, never before the MCP handshake."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from retrieval.models.embedders.base import CoalescingEmbedder, Embedder
from retrieval.models.embedders.hashed import HashedEmbedder
from retrieval.models.model_files import ModelUnavailable, short_reason
from retrieval.models.rerankers.base import Reranker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelConfig:
    """Which models load, and how. Fields are named like the settings' variables (``server.state``
    builds one from the settings by those names)."""

    embedder: Literal["auto", "sentence-transformers", "hashed"] = "auto"
    embedding_model: str = "sentence-transformers/all-MiniLM-L6-v2"
    reranker: Literal["auto", "cross-encoder", "cohere", "none"] = "auto"
    rerank_model: str = "cross-encoder/ms-marco-MiniLM-L6-v2"
    cohere_api_key: str | None = field(default=None, repr=False)
    cohere_rerank_model: str = "rerank-v3.5"
    cohere_base_url: str | None = None
    cohere_timeout_seconds: float = 10.0
    allow_model_downloads: bool = True
    model_device: str = "cpu"
    model_backend: Literal["torch", "onnx", "openvino"] = (
        "onnx"  # onnx: onnxruntime directly (retrieval.models.onnx_models)
    )
    embedding_model_file: str | None = None  # onnx/openvino: which export in the model folder
    rerank_model_file: str | None = None


@dataclass(frozen=True)
class BackendInfo:
    """What was asked for, what runs, and why they differ (for stderr, the trace and ``explain_ranking``)."""

    role: Literal["embedder", "reranker"]
    requested: str
    active: str
    offline_fallback: bool = False
    reason: str | None = None

    def describe(self) -> str:
        if not self.offline_fallback:
            return self.active + (f" ({self.reason})" if self.reason else "")
        return f"{self.active} (offline fallback: {self.reason})"


@dataclass(frozen=True)
class Models:
    embedder: Embedder
    reranker: Reranker | None
    embedder_info: BackendInfo
    reranker_info: BackendInfo

    @property
    def offline(self) -> bool:
        return self.embedder_info.active.startswith("hashed") and self.reranker is None


def load_models(config: ModelConfig, store_dim: int, announce: Callable[[str], None] | None = None) -> Models:
    """Load what ``config`` asks for; on any failure fall back and ``announce`` it once."""
    announce = announce or log.warning
    embedder, embedder_info = _load_embedder(config, store_dim)
    reranker, reranker_info = _load_reranker(config)
    for info in (embedder_info, reranker_info):
        if info.offline_fallback:
            if info.role == "embedder":
                instead = f"running on the offline backend: {info.active}"
            elif info.active == "none":
                instead = (
                    "recall ranks without a reranker (MEMORIA_RERANKER=none asks for none and says nothing)"
                )
            else:
                instead = f"ranking with {info.active} instead"
            announce(f"memoria: {info.role} {info.requested!r} is unavailable ({info.reason}); {instead}")
        elif info.reason:
            announce(f"memoria: {info.role} {info.requested!r}: {info.reason}")
    return Models(embedder, reranker, embedder_info, reranker_info)


def _load_embedder(config: ModelConfig, store_dim: int) -> tuple[Embedder, BackendInfo]:
    hashed = HashedEmbedder(store_dim)
    if config.embedder == "hashed":
        return hashed, BackendInfo("embedder", "hashed", hashed.name)
    from retrieval.models.embedders.sentence_transformers import SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder(
        config.embedding_model,
        device=config.model_device,
        allow_downloads=config.allow_model_downloads,
        backend=config.model_backend,
        model_file=config.embedding_model_file,
    )
    try:
        model.warm_up()
    except ModelUnavailable as exc:
        return hashed, BackendInfo("embedder", config.embedding_model, hashed.name, True, str(exc))
    except Exception as exc:  # a broken install must not take the server down: fall back, say why
        return hashed, BackendInfo("embedder", config.embedding_model, hashed.name, True, short_reason(exc))
    if model.dimension != store_dim:
        reason = (
            f"it makes {model.dimension}-d vectors but this store holds {store_dim}-d vectors; "
            "point MEMORIA_DB_URI at a new store or re-embed this one"
        )
        return hashed, BackendInfo("embedder", config.embedding_model, hashed.name, True, reason)
    return CoalescingEmbedder(model), BackendInfo(
        "embedder", config.embedding_model, f"{model.name} [{model.backend}]", reason=model.backend_note
    )


def _load_reranker(config: ModelConfig) -> tuple[Reranker | None, BackendInfo]:
    if config.reranker == "none":
        return None, BackendInfo("reranker", "none", "none")
    if config.reranker == "cohere":
        if config.cohere_api_key:
            from retrieval.models.rerankers.cohere import CohereReranker

            cohere = CohereReranker(
                config.cohere_api_key,
                model=config.cohere_rerank_model,
                base_url=config.cohere_base_url,
                timeout=config.cohere_timeout_seconds,
            )
            return cohere, BackendInfo("reranker", f"cohere:{config.cohere_rerank_model}", cohere.name)
        fallback, info = _load_cross_encoder(config)
        reason = "COHERE_API_KEY is not set" + (f"; and {info.reason}" if info.reason else "")
        return fallback, BackendInfo(
            "reranker", f"cohere:{config.cohere_rerank_model}", info.active, True, reason
        )
    return _load_cross_encoder(config)


def _load_cross_encoder(config: ModelConfig) -> tuple[Reranker | None, BackendInfo]:
    from retrieval.models.rerankers.cross_encoder import CrossEncoderReranker

    model = CrossEncoderReranker(
        config.rerank_model,
        device=config.model_device,
        allow_downloads=config.allow_model_downloads,
        backend=config.model_backend,
        model_file=config.rerank_model_file,
    )
    try:
        model.warm_up()
    except Exception as exc:
        reason = str(exc) if isinstance(exc, ModelUnavailable) else short_reason(exc)
        return None, BackendInfo("reranker", config.rerank_model, "none", True, reason)
    return model, BackendInfo(
        "reranker", config.rerank_model, f"{model.name} [{model.backend}]", reason=model.backend_note
    )
