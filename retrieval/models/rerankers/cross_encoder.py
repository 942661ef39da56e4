"""Local cross-encoder reranking (default ms-marco-MiniLM-L6-v2; bge-reranker-v2-m3 selectable)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval.models.model_files import ModelUnavailable, load_on_backend, resolve_model_dir, short_reason
from retrieval.models.rerankers.base import RerankFailed, sigmoid


class CrossEncoderReranker:
    """Scores (query, document) pairs with a sentence-transformers ``CrossEncoder``; logits go through a
    sigmoid here (not inside the model) so every model's scores land in [0, 1] the same way."""

    def __init__(
        self,
        model: str,
        *,
        device: str = "cpu",
        allow_downloads: bool = True,
        batch_size: int = 32,
        backend: str = "torch",
        model_file: str | None = None,
    ) -> None:
        self._model_ref = model
        self._device = device
        self._backend = backend
        self._model_file = model_file
        self.backend = backend  # what it runs on once loaded (torch when the asked backend could not load)
        self.backend_note: str | None = None
        self._allow_downloads = allow_downloads
        self._batch_size = batch_size
        self._model: Any = None
        self._onnx: Any = None  # an OnnxTransformer when the model runs on onnxruntime directly
        self._identity: Any = None
        self._inference_lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"cross-encoder:{self._model_ref}"

    def warm_up(self) -> None:
        if self._model is not None or self._onnx is not None:
            return
        folder = resolve_model_dir(
            self._model_ref, allow_downloads=self._allow_downloads, backend=self._backend
        )
        backend = self._backend
        if backend == "onnx":
            try:
                from pathlib import Path

                from retrieval.models.onnx_models import OnnxTransformer

                onnx = OnnxTransformer(Path(folder), "classifier", model_file=self._model_file)
                onnx.encode([("probe query", "probe passage")])  # a session that loads but cannot run
                self._onnx = onnx
                self.backend = "onnxruntime"
                return
            except Exception as exc:  # onnxruntime missing, an export that failed: the same model on torch
                self.backend_note = (
                    f"onnxruntime could not run it ({short_reason(exc)}); running on torch. "
                    "Set MEMORIA_MODEL_BACKEND=torch to skip trying"
                )
                backend = "torch"
        try:
            import torch
            from sentence_transformers import CrossEncoder

            self._model, self.backend, note = load_on_backend(
                CrossEncoder, folder, device=self._device, backend=backend, model_file=self._model_file
            )
            self.backend_note = note or self.backend_note
        except Exception as exc:
            raise ModelUnavailable(
                f"{self._model_ref} could not be loaded from {folder} ({short_reason(exc)})"
            ) from exc
        self._identity = torch.nn.Identity()

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        if self._model is None and self._onnx is None:
            raise RuntimeError("CrossEncoderReranker used before warm_up()")
        if not documents:
            return []
        pairs = [(query, document) for document in documents]
        try:
            if self._onnx is not None:
                from retrieval.models.onnx_models import in_length_batches

                onnx = self._onnx
                raw = in_length_batches(pairs, self._batch_size, lambda batch: onnx.encode(batch)[0])
                if raw.ndim == 2 and raw.shape[1] == 1:
                    raw = raw[:, 0]
            else:
                with self._inference_lock:
                    raw = self._model.predict(
                        pairs,
                        batch_size=self._batch_size,
                        activation_fn=self._identity,
                        show_progress_bar=False,
                    )
        except Exception as exc:
            raise RerankFailed(f"cross-encoder {self._model_ref} failed: {exc}", transient=True) from exc
        logits = np.asarray(raw, dtype=np.float64)
        if logits.ndim == 2 and logits.shape[1] > 1:
            # Two-class heads: probability of the "relevant" class.
            shifted = logits - logits.max(axis=1, keepdims=True)
            probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
            return [float(p) for p in probabilities[:, -1]]
        return [sigmoid(float(logit)) for logit in logits.reshape(-1)]
