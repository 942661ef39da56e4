"""Running a model folder's transformer on onnxruntime directly: the fast tokenizer of ``tokenizer.json``
and an ONNX export of the weights, exported once from the folder (``onnx/model.onnx``) when it has none.

No optimum and no sentence-transformers at inference: a sentence embedding is the export's token states
pooled as the folder's ``1_Pooling/config.json`` says (mean by default), a cross-encoder score is its
logits. Exporting needs torch and onnx once; loading needs neither. A query costs about a tenth of the
torch path here (benchmarks/writes.py --embedding-model measures it).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

log = logging.getLogger(__name__)

EXPORT = Path("onnx") / "model.onnx"
SPINNING = "session.intra_op.allow_spinning"
Kind = Literal["encoder", "classifier"]


class OnnxTransformer:
    """A tokenizer and an ONNX session over one model folder, thread-safe."""

    def __init__(
        self, folder: Path, kind: Kind, *, model_file: str | None = None, threads: int | None = None
    ) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.folder = folder
        self.kind = kind
        path = folder / model_file if model_file else folder / EXPORT
        if not path.exists():
            if model_file:
                raise FileNotFoundError(f"{path} does not exist")
            export(folder, kind, path)
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        # A session's worker threads wait for work by sleeping, not by spinning (onnxruntime spins by
        # default): in a server they share the cores with request threads and LanceDB's, and a spinning
        # worker takes a core they need. One MiniLM text on this machine's two cores beside a busy process:
        # 26-39% faster, and a fifth to a quarter less CPU a text (``benchmarks.model_threads``; on a quiet
        # machine 3-36% slower).
        options.add_session_config_entry(SPINNING, "0")
        self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._inputs = {node.name for node in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.max_length = max_length(folder)
        self._tokenizer.enable_truncation(self.max_length)
        self._tokenizer.enable_padding()
        self._lock = threading.Lock()  # tokenizer settings are shared state

    @property
    def spins(self) -> bool:
        """Whether the session's worker threads spin while they wait for work."""
        try:
            return self._session.get_session_options().get_session_config_entry(SPINNING) != "0"
        except RuntimeError:  # not set: onnxruntime's default, which spins
            return True

    def encode(self, texts: Sequence[str] | Sequence[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        """(the model's first output, the attention mask) for a batch of texts or (query, document) pairs."""
        with self._lock:
            encoded = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.array([e.type_ids for e in encoded], dtype=np.int64)
        output = self._session.run(
            None, {name: value for name, value in feed.items() if name in self._inputs}
        )[0]
        return np.asarray(output), mask


def in_length_batches(
    items: Sequence[str] | Sequence[tuple[str, str]], batch_size: int, run: Callable[[list[Any]], np.ndarray]
) -> np.ndarray:
    """``run`` over batches of at most ``batch_size`` items of similar length, longest first; its rows put
    back in the order of ``items``. A batch is padded to its longest text, and every other text of it pays
    for the padding: 320 LoCoMo turns in batches of 32 as they came took 13.3 ms a text with
    all-MiniLM-L6-v2 on this machine's two cores, one at a time 8.7, in batches of 32 by length 8.6
    (``benchmarks/model_batches.py``; the group commit's batches, ``remember_many`` and a cross-encoder's
    candidates go many at once). A pair (a cross-encoder's query and passage) counts both texts."""
    order = sorted(range(len(items)), key=lambda index: -_length(items[index]))
    rows = np.concatenate(
        [
            run([items[index] for index in order[start : start + batch_size]])
            for start in range(0, len(order), batch_size)
        ]
    )
    placed = np.empty_like(rows)
    placed[order] = rows
    return placed


def _length(item: str | tuple[str, str]) -> int:
    return len(item) if isinstance(item, str) else sum(len(text) for text in item)


def max_length(folder: Path) -> int:
    """The sequence length to truncate to: sentence-transformers' config, else the tokenizer's, else 512;
    never more than the model has position embeddings for."""
    configured = _config_value(folder / "sentence_bert_config.json", "max_seq_length")
    if not isinstance(configured, int) or not 0 < configured <= 100_000:
        configured = _config_value(folder / "tokenizer_config.json", "model_max_length")
    if not isinstance(configured, int) or not 0 < configured <= 100_000:
        configured = 512
    positions = _config_value(folder / "config.json", "max_position_embeddings")
    return min(configured, positions) if isinstance(positions, int) and positions > 0 else configured


def _config_value(path: Path, key: str) -> Any:
    try:
        return json.loads(path.read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def pooling(folder: Path) -> str:
    """How token states become one vector, per the folder's sentence-transformers pooling config."""
    try:
        config = json.loads((folder / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError):
        return "mean"
    for mode in ("cls", "max", "lasttoken"):
        if config.get(f"pooling_mode_{mode}_token" if mode != "lasttoken" else "pooling_mode_lasttoken"):
            return mode
    return "mean"


def pooled(states: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    weights = mask[..., None].astype(np.float32)
    if mode == "cls":
        return states[:, 0]
    if mode == "max":
        return np.where(weights > 0, states, -np.inf).max(axis=1)
    if mode == "lasttoken":
        return states[np.arange(len(states)), mask.sum(axis=1) - 1]
    return (states * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)


def export(folder: Path, kind: Kind, path: Path) -> None:
    """Export the folder's transformer to ONNX at ``path`` (written whole, then renamed into place)."""
    import torch
    from transformers import AutoModel, AutoModelForSequenceClassification

    loader: Any = AutoModelForSequenceClassification if kind == "classifier" else AutoModel
    model = loader.from_pretrained(str(folder)).eval()

    class Wrapped(torch.nn.Module):  # keyword arguments: the positional order changed across versions
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            output = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return output.logits if kind == "classifier" else output.last_hidden_state

    sample = torch.ones(2, 8, dtype=torch.long)
    axes = {"b": 0, "s": 1}
    dynamic = {
        name: {axes["b"]: "batch", axes["s"]: "sequence"}
        for name in ("input_ids", "attention_mask", "token_type_ids")
    }
    dynamic["output"] = {0: "batch"} if kind == "classifier" else {0: "batch", 1: "sequence"}
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".onnx.partial")
    os.close(handle)
    try:
        log.info("exporting %s to ONNX (once): %s", folder, path)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on Python control flow, not problems here
            torch.onnx.export(
                Wrapped(),
                (sample, sample, torch.zeros_like(sample)),
                temporary,
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["output"],
                dynamic_axes=dynamic,
                opset_version=17,
                dynamo=False,
            )
        # mkstemp makes the file readable by its owner only: the export is of the model folder, shared as
        # the folder's other files are (the mode of its config.json).
        os.chmod(temporary, _files_mode(folder))
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)


def _files_mode(folder: Path) -> int:
    """The read and write bits of the model folder's own files (its ``config.json``), 0644 without one."""
    try:
        return (folder / "config.json").stat().st_mode & 0o666
    except OSError:
        return 0o644
