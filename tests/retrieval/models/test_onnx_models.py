import numpy as np
import pytest

from retrieval.models.onnx_models import in_length_batches


def test_batches_hold_texts_of_similar_length_and_rows_come_back_in_the_given_order():
    texts = ["bb", "dddd", "a", "eeeee", "ccc"]
    batches: list[list[str]] = []

    def lengths(batch: list[str]) -> np.ndarray:
        batches.append(batch)
        return np.array([[len(text), 10 * len(text)] for text in batch], dtype=np.float32)

    rows = in_length_batches(texts, 2, lengths)
    assert batches == [["eeeee", "dddd"], ["ccc", "bb"], ["a"]]  # longest first: the padding is shared
    assert rows.tolist() == [[2, 20], [4, 40], [1, 10], [5, 50], [3, 30]]


def test_a_pair_counts_the_length_of_both_its_texts():
    pairs = [("q", "short"), ("q", "a much longer passage"), ("a long query here", "mid")]
    batches: list[list[tuple[str, str]]] = []

    def scores(batch: list[tuple[str, str]]) -> np.ndarray:
        batches.append(batch)
        return np.array([[float(len(passage))] for _, passage in batch])

    rows = in_length_batches(pairs, 1, scores)
    assert [batch[0][1] for batch in batches] == ["a much longer passage", "mid", "short"]
    assert rows[:, 0].tolist() == [5.0, 21.0, 3.0]


@pytest.mark.slow
def test_texts_embedded_together_get_the_vectors_they_get_alone(tiny_models):
    from retrieval.models.embedders.sentence_transformers import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(str(tiny_models["embedder"]), backend="onnx")
    embedder.warm_up()
    assert embedder.backend == "onnxruntime"
    texts = ["a much longer text about the staging database " * 6, "deploys", "the billing key rotates", "ok"]
    together = embedder.embed_documents(texts)
    alone = np.vstack([embedder.embed_documents([text]) for text in texts])
    assert (together * alone).sum(axis=1).min() >= 0.9999


class ScoresByPassageLength:
    """An onnx session stand-in for the cross-encoder: a pair's logit is its passage's length."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, str]]] = []

    def encode(self, pairs: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        self.batches.append(pairs)
        return np.array([[float(len(passage))] for _, passage in pairs]), np.ones((len(pairs), 1))


def test_the_cross_encoder_gives_each_passage_its_own_score_whatever_the_batches():
    from retrieval.models.rerankers.base import sigmoid
    from retrieval.models.rerankers.cross_encoder import CrossEncoderReranker

    reranker = CrossEncoderReranker("unused-folder", batch_size=2)
    session = ScoresByPassageLength()
    reranker._onnx = session  # as warm_up leaves it when onnxruntime runs the model
    passages = ["mid size", "a", "the longest passage of all", "abc"]
    scores = reranker.rerank("staging key", passages)
    assert scores == pytest.approx([sigmoid(float(len(passage))) for passage in passages])
    assert [[passage for _, passage in batch] for batch in session.batches] == [
        ["the longest passage of all", "mid size"],
        ["abc", "a"],
    ]


@pytest.mark.slow
def test_an_export_is_readable_as_the_model_folders_other_files_are(tiny_models, tmp_path):
    import os
    import shutil
    import stat

    from retrieval.models.onnx_models import export

    folder = tmp_path / "model"
    shutil.copytree(tiny_models["embedder"], folder, ignore=shutil.ignore_patterns("onnx"))
    previous = os.umask(0o022)
    try:
        export(folder, "encoder", folder / "onnx" / "model.onnx")
    finally:
        os.umask(previous)
    # A trial found the export private to the user who first ran the server (mkstemp's 0600): in a shared
    # model folder everyone else's server then fell back to torch.
    assert stat.S_IMODE((folder / "onnx" / "model.onnx").stat().st_mode) == 0o644
    assert not list((folder / "onnx").glob("*.partial"))


@pytest.mark.slow
def test_the_sessions_of_a_model_folder_wait_for_work_without_spinning(tiny_models):
    from retrieval.models.onnx_models import OnnxTransformer

    # A spinning worker takes a core from the server's request threads (onnxruntime spins by default).
    assert not OnnxTransformer(tiny_models["embedder"], "encoder").spins
    assert not OnnxTransformer(tiny_models["cross_encoder"], "classifier").spins
