"""Finding a model's files before loading it: a local folder, the Hugging Face cache, then (if allowed)
the Hub. Resolving files first means an unavailable model is known in milliseconds, without paying the
seconds torch takes to import."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


class ModelUnavailable(RuntimeError):
    """A model could not be loaded (not cached, no network, broken files); the message says which and why."""


# Weight formats and exports the PyTorch loaders never read; skipping them keeps a first download small.
_EXPORTS = ["onnx/*", "openvino/*", "*.onnx"]
_IGNORED = ["*.h5", "*.msgpack", "*.ot", "*.tflite", "*.gguf"]


def resolve_model_dir(model_ref: str, *, allow_downloads: bool, backend: str = "torch") -> Path:
    """The local folder holding ``model_ref`` (a path, or a Hub id found in the cache or downloaded); the
    ONNX/OpenVINO exports are fetched only for those backends."""
    ignored = _IGNORED + (_EXPORTS if backend == "torch" else [])
    local = Path(model_ref).expanduser()
    if local.is_dir():
        return local
    if local.is_absolute() or model_ref.startswith((".", "~")):
        raise ModelUnavailable(f"the model folder {model_ref} does not exist")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model_ref, local_files_only=True, ignore_patterns=ignored))
    except Exception as cached_exc:
        if not allow_downloads:
            raise ModelUnavailable(
                f"{model_ref} is not in the local Hugging Face cache and MEMORIA_ALLOW_MODEL_DOWNLOADS is off"
            ) from cached_exc
    try:
        return Path(snapshot_download(model_ref, ignore_patterns=ignored))
    except Exception as exc:
        raise ModelUnavailable(
            f"{model_ref} is not cached and could not be downloaded ({short_reason(exc)}); connect once to let it "
            "download, or set the model to a local folder"
        ) from exc


def short_reason(exc: BaseException) -> str:
    """The first line of an exception, capped, for one-line log and trace messages."""
    first_line = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first_line[:160]}" if first_line else type(exc).__name__


def load_on_backend(
    loader: Callable[..., Any], folder: Path, *, device: str, backend: str, model_file: str | None
) -> tuple[Any, str, str | None]:
    """``loader`` (``SentenceTransformer`` or ``CrossEncoder``) on sentence-transformers' ``backend``
    (``model_file``: which ONNX/OpenVINO export of the folder, e.g. a quantised one). When that backend
    cannot load here (its runtime is not installed, no export), the same model on torch. Returns (model,
    backend it runs on, why that is not the one asked for, or None)."""
    if backend == "torch":
        return loader(str(folder), device=device), "torch", None
    kwargs = {"file_name": model_file} if model_file else None
    try:
        return loader(str(folder), device=device, backend=backend, model_kwargs=kwargs), backend, None
    except Exception as exc:
        note = (
            f"the {backend} backend could not load it ({short_reason(exc)}); running on torch. "
            f"Install sentence-transformers[{backend}] or set MEMORIA_MODEL_BACKEND=torch"
        )
        return loader(str(folder), device=device), "torch", note
