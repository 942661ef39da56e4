"""Tiny local models for exercising the real sentence-transformers loading code with no network."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

SENTENCES = [
    "we switched from postgres to mysql in march",
    "the deploy script lives in scripts deploy sh",
    "use pnpm not npm in the web package",
    "the cat sat on the mat",
    "i prefer typescript over javascript",
    "the build failed because of a missing environment variable",
]


def build_tiny_models(
    root: Path,
    *,
    sentences: Sequence[str] = SENTENCES,
    vocab_size: int = 300,
    hidden_size: int = 32,
    layers: int = 1,
    heads: int = 2,
    intermediate_size: int = 64,
    max_positions: int = 128,
) -> dict[str, Path]:
    """A BERT embedder and cross-encoder with random weights and a WordPiece tokenizer trained on
    ``sentences``. The defaults are tiny (tests); the benchmark builds one shaped like MiniLM-L6."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast  # type: ignore[attr-defined]  # lazily exported

    torch.manual_seed(0)
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer.train_from_iterator(
        sentences, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=special)
    )
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    fast = BertTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    config: dict[str, Any] = dict(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_positions,
    )
    embedder_dir, cross_encoder_dir = root / "tiny-embedder", root / "tiny-cross-encoder"
    BertModel(BertConfig(**config)).save_pretrained(embedder_dir)
    fast.save_pretrained(embedder_dir)
    scorer = BertConfig(**config, num_labels=1)  # type: ignore[call-arg]
    BertForSequenceClassification(scorer).save_pretrained(cross_encoder_dir)
    fast.save_pretrained(cross_encoder_dir)
    return {"embedder": embedder_dir, "cross_encoder": cross_encoder_dir}
