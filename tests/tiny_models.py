"""Tiny local models for exercising the real sentence-transformers loading code with no network."""

from __future__ import annotations

from pathlib import Path

SENTENCES = [
    "we switched from postgres to mysql in march",
    "the deploy script lives in scripts deploy sh",
    "use pnpm not npm in the web package",
    "the cat sat on the mat",
    "i prefer typescript over javascript",
    "the build failed because of a missing environment variable",
]


def build_tiny_models(root: Path) -> dict[str, Path]:
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast

    torch.manual_seed(0)
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer.train_from_iterator(
        SENTENCES, trainers.WordPieceTrainer(vocab_size=300, special_tokens=special)
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
    config = dict(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    embedder_dir, cross_encoder_dir = root / "tiny-embedder", root / "tiny-cross-encoder"
    BertModel(BertConfig(**config)).save_pretrained(embedder_dir)
    fast.save_pretrained(embedder_dir)
    BertForSequenceClassification(BertConfig(**config, num_labels=1)).save_pretrained(cross_encoder_dir)
    fast.save_pretrained(cross_encoder_dir)
    return {"embedder": embedder_dir, "cross_encoder": cross_encoder_dir}
