"""Finding a model's files before loading it: a local folder, the Hugging Face cache, then (if allowed)
the Hub. Resolving files first means an unavailable model is known in milliseconds, without paying the
seconds torch takes to import."""

from __future__ import annotations

from pathlib import Path


class ModelUnavailable(RuntimeError):
    """A model could not be loaded (not cached, no network, broken files); the message says which and why."""


# Weight formats and exports the PyTorch loaders never read; skipping them keeps a first download small.
_IGNORED = ["onnx/*", "openvino/*", "*.onnx", "*.h5", "*.msgpack", "*.ot", "*.tflite", "*.gguf"]


def resolve_model_dir(model_ref: str, *, allow_downloads: bool) -> Path:
    """The local folder holding ``model_ref`` (a path, or a Hub id found in the cache or downloaded)."""
    local = Path(model_ref).expanduser()
    if local.is_dir():
        return local
    if local.is_absolute() or model_ref.startswith((".", "~")):
        raise ModelUnavailable(f"the model folder {model_ref} does not exist")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model_ref, local_files_only=True, ignore_patterns=_IGNORED))
    except Exception as cached_exc:
        if not allow_downloads:
            raise ModelUnavailable(
                f"{model_ref} is not in the local Hugging Face cache and MEMORIA_ALLOW_MODEL_DOWNLOADS is off"
            ) from cached_exc
    try:
        return Path(snapshot_download(model_ref, ignore_patterns=_IGNORED))
    except Exception as exc:
        raise ModelUnavailable(
            f"{model_ref} is not cached and could not be downloaded ({short_reason(exc)}); connect once to let it "
            "download, or set the model to a local folder"
        ) from exc


def short_reason(exc: BaseException) -> str:
    """The first line of an exception, capped, for one-line log and trace messages."""
    first_line = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first_line[:160]}" if first_line else type(exc).__name__
