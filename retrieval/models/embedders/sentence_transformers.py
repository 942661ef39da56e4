"""Sentence-transformers embeddings (default all-MiniLM-L6-v2), loaded on warm-up, not on construction.

On the ``onnx`` backend (the default) the folder's transformer runs on onnxruntime directly
(``retrieval.models.onnx_models``), exported from the folder once; on ``torch``, or when onnxruntime cannot
load it, sentence-transformers runs it on torch. Both give the same vectors (cosine >= 0.9999, tested),
so they share the embedder's name and a store's vectors stay valid whichever runs."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.models.embedders.base import Vectors, l2_normalize
from retrieval.models.embedders.hashed import is_hashed
from retrieval.models.model_files import ModelUnavailable, load_on_backend, resolve_model_dir, short_reason

# The prompt names retrieval models declare in their sentence-transformers configuration.
QUERY_PROMPTS = ("query",)
DOCUMENT_PROMPTS = ("document", "passage", "corpus")

# What a model's vectors were made of is in the embedder's name, so that vector search never compares
# vectors of two recipes: "st:<model>:<width>" the text as it is, "+prompts" with the prompts the model
# declares, "+author" (stores written while a memory's author went before its content, with the prompts).
PROMPTED = "+prompts"
AUTHORED = "+author"


def model_reference(model: str) -> str:
    """How an embedder's name spells ``model``: a local folder as its absolute path, without a trailing
    separator ("minilm/", "./minilm" and "/models/minilm" are one folder, and one model's vectors); a hub
    id, or a folder that is not there (or cannot be looked at), as written. (Symbolic links are not
    followed: a store made through one keeps its name.)"""
    try:
        cwd = os.getcwd()
    except OSError:  # the working folder was removed: a relative name is as written
        cwd = ""
    return _reference(model, cwd) if cwd or os.path.isabs(model) else model


_FOLDERS: dict[tuple[str, str], str] = {}  # (spelling, working folder) -> absolute path, for folders found


def _reference(model: str, cwd: str) -> str:
    """Asked for each report's query vectors at recall: a folder found once is remembered (one not found is
    looked for again: it may be made meanwhile)."""
    key = (model, cwd)
    known = _FOLDERS.get(key)
    if known is not None:
        return known
    try:
        folder = Path(model).expanduser()
        local = folder.is_dir()
    except (OSError, ValueError, RuntimeError):  # unreadable, a name too long, no home to expand "~" into
        return model
    if not local:
        return model
    if len(_FOLDERS) > 256:
        _FOLDERS.clear()
    found = _FOLDERS[key] = os.path.abspath(folder)
    return found


def spelled(name: str) -> str:
    """An embedder's name with its model spelled as ``model_reference`` spells it (names made before it
    kept the folder as configured: "st:minilm/:384"); its recipe suffixes are kept."""
    if not name.startswith("st:"):
        return name
    suffix = ""
    for mark in (AUTHORED, PROMPTED):
        if name.endswith(mark):
            name, suffix = name.removesuffix(mark), mark + suffix
    model, _, width = name.removeprefix("st:").rpartition(":")
    return f"st:{model_reference(model)}:{width}{suffix}" if model else name + suffix


def local_model_folder(name: str) -> str | None:
    """The local folder whose model made the vectors of embedder ``name`` ("st:/models/minilm:384+prompts"
    gives "/models/minilm"), when it is a folder that is there; None for a hub id, another backend's name, or
    a folder that is gone."""
    if not name.startswith("st:"):
        return None
    for mark in (AUTHORED, PROMPTED):
        name = name.removesuffix(mark)
    model = name.removeprefix("st:").rpartition(":")[0]
    try:
        return model if model and os.path.isabs(model) and Path(model).is_dir() else None
    except (OSError, ValueError):
        return None


def same_model(stored: str, active: str) -> bool:
    """Whether two embedder names are two recipes of one model (plain, ``+prompts``, ``+author``), or one
    model's folder spelled two ways (names made before ``model_reference``: "st:minilm/:384"): vectors of
    another recipe or spelling are remade with no question asked; another model's are the user's call."""

    def base(name: str) -> str:
        return spelled(name).removesuffix(AUTHORED).removesuffix(PROMPTED)

    return stored.startswith("st:") and base(stored) == base(active)


def same_query_vectors(stored: str | None, active: str) -> bool:
    """Whether query vectors made under the embedder name ``stored`` are the ones ``active`` makes now.
    Queries never carried an author: query vectors of the "+author" recipe are those of the same model
    with its prompts (which the "+author" recipe always used). The offline backend's are never taken as
    stored: they cost microseconds to make again, and since 2026-11-30 a query's clitics are no features
    (``retrieval.text.query_word_tokens``) while the memories' vectors, and so the name, stayed as they were."""
    if stored is None or is_hashed(active):  # None: reports made before query vectors were kept
        return False
    stored, active = spelled(stored), spelled(active)  # one folder, spelled two ways: one model
    if stored == active:
        return True
    return stored.endswith(AUTHORED) and stored.removesuffix(AUTHORED) == active.removesuffix(PROMPTED)


class SentenceTransformerEmbedder:
    """Wraps ``SentenceTransformer``; ``warm_up()`` does the slow import and load."""

    def __init__(
        self,
        model: str,
        *,
        device: str = "cpu",
        allow_downloads: bool = True,
        backend: str = "torch",
        model_file: str | None = None,
    ) -> None:
        self._model_ref = model
        self._reference = model_reference(model)  # as the name spells it
        self._device = device
        self._backend = backend
        self._model_file = model_file
        self.backend = backend  # what it runs on once loaded (torch when the asked backend could not load)
        self.backend_note: str | None = None
        self._allow_downloads = allow_downloads
        self._model: Any = None
        self._onnx: Any = None  # an OnnxTransformer when the model runs on onnxruntime directly
        self._pooling = "mean"
        self._prompts: dict[str, str] = {}
        self._dimension = 0
        # torch inference from several worker threads at once only fights over the same cores.
        self._inference_lock = threading.Lock()

    def warm_up(self) -> None:
        if self._model is not None or self._onnx is not None:
            return
        folder = resolve_model_dir(
            self._model_ref, allow_downloads=self._allow_downloads, backend=self._backend
        )
        if self._backend == "onnx":
            try:
                self._warm_onnx(folder)
                return
            except Exception as exc:  # onnxruntime missing, an export that failed: the same model on torch
                self.backend_note = (
                    f"onnxruntime could not run it ({short_reason(exc)}); running on torch. "
                    "Set MEMORIA_MODEL_BACKEND=torch to skip trying"
                )
                self._backend = "torch"
        try:
            from sentence_transformers import SentenceTransformer

            model, self.backend, note = load_on_backend(
                SentenceTransformer,
                folder,
                device=self._device,
                backend=self._backend,
                model_file=self._model_file,
            )
        except Exception as exc:
            raise ModelUnavailable(
                f"{self._model_ref} could not be loaded from {folder} ({short_reason(exc)})"
            ) from exc
        self.backend_note = note or self.backend_note
        # sentence-transformers 6 renamed get_sentence_embedding_dimension to get_embedding_dimension.
        measure = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dimension = measure()
        if not dimension:
            raise ModelUnavailable(f"{self._model_ref} does not report an embedding dimension")
        self._model = model
        self._dimension = int(dimension)

    def _warm_onnx(self, folder: Any) -> None:
        import json
        from pathlib import Path

        from retrieval.models.onnx_models import OnnxTransformer, pooling

        onnx = OnnxTransformer(Path(folder), "encoder", model_file=self._model_file)
        self._pooling = pooling(Path(folder))
        try:
            config = json.loads((Path(folder) / "config_sentence_transformers.json").read_text())
            self._prompts = {k: v for k, v in (config.get("prompts") or {}).items() if isinstance(v, str)}
        except (OSError, ValueError):
            self._prompts = {}
        self._onnx = onnx
        try:  # a session that loads but cannot run (missing inputs, a bad export) is not used at all
            self._dimension = int(self._encode_onnx(["dimension probe"], ()).shape[1])
        except BaseException:
            self._onnx = None
            raise
        self.backend = "onnxruntime"

    def _encode_onnx(self, texts: Sequence[str], prompt_names: Sequence[str]) -> Vectors:
        from retrieval.models.onnx_models import pooled

        prefix = next((self._prompts[name] for name in prompt_names if self._prompts.get(name)), "")
        states, mask = self._onnx.encode([prefix + text for text in texts])
        return l2_normalize(np.asarray(pooled(states, mask, self._pooling), dtype=np.float32))

    @property
    def name(self) -> str:
        # A memory's vector is of its content alone: its author before it ranked worse (docs/retrieval.md).
        # Stores written while vectors were of "author: content" name them "...+author"; the server makes
        # them again at start (and `memoria reembed` on demand). A model that declares prompts gets
        # "+prompts": vectors made before prompts were applied carry the plain name.
        return f"st:{self._reference}:{self._dimension}" + (PROMPTED if self._declares_prompts() else "")

    def _declares_prompts(self) -> bool:
        declared = self._prompts if self._onnx is not None else (getattr(self._model, "prompts", None) or {})
        return any(declared.get(name) for name in (*QUERY_PROMPTS, *DOCUMENT_PROMPTS))

    @property
    def dimension(self) -> int:
        self._require()
        return self._dimension

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._encode(texts, DOCUMENT_PROMPTS)

    def embed_query(self, text: str) -> Vectors:
        return self._encode([text], QUERY_PROMPTS)[0]

    def _encode(self, texts: Sequence[str], prompt_names: Sequence[str]) -> Vectors:
        """Unit vectors of ``texts``, with the first of ``prompt_names`` the model declares (retrieval
        models such as bge or e5 expect one prefix on queries and another, or none, on passages; a model
        that declares none, like all-MiniLM-L6-v2, gets the texts as they are)."""
        self._require()
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        if self._onnx is not None:
            from retrieval.models.onnx_models import in_length_batches

            return in_length_batches(texts, 32, lambda batch: self._encode_onnx(batch, prompt_names))
        declared = getattr(self._model, "prompts", None) or {}
        prompt_name = next((name for name in prompt_names if declared.get(name)), None)
        with self._inference_lock:
            matrix = self._model.encode(
                list(texts),
                batch_size=32,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
                prompt_name=prompt_name,
            )
        return l2_normalize(np.asarray(matrix, dtype=np.float32))

    def _require(self) -> None:
        if self._model is None and self._onnx is None:
            raise RuntimeError("SentenceTransformerEmbedder used before warm_up()")
