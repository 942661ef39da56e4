"""The real sentence-transformers loading code, against a tiny model built in this test session."""

import numpy as np
import pytest

from retrieval.embedders.base import Embedder
from retrieval.embedders.sentence_transformers import SentenceTransformerEmbedder
from retrieval.model_files import ModelUnavailable, resolve_model_dir


def test_sentence_transformer_embeddings_are_unit_length_rows(tiny_models):
    embedder = SentenceTransformerEmbedder(str(tiny_models["embedder"]), allow_downloads=False)
    embedder.warm_up()
    matrix = embedder.embed_documents(["we switched to mysql", "the cat sat"])
    assert matrix.shape == (2, 32)
    assert np.linalg.norm(matrix, axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)
    assert embedder.embed_query("mysql").shape == (32,)
    assert embedder.name == f"st:{tiny_models['embedder']}:32"
    assert isinstance(embedder, Embedder)


def test_using_an_embedder_before_warm_up_is_a_programming_error():
    with pytest.raises(RuntimeError, match="before warm_up"):
        SentenceTransformerEmbedder("anything").embed_query("x")


def test_a_hub_model_that_is_not_cached_fails_fast_when_downloads_are_off():
    with pytest.raises(ModelUnavailable, match="MEMORIA_ALLOW_MODEL_DOWNLOADS is off"):
        resolve_model_dir("memoria-tests/definitely-not-cached", allow_downloads=False)


def test_a_missing_local_folder_is_reported_as_such(tmp_path):
    with pytest.raises(ModelUnavailable, match="does not exist"):
        resolve_model_dir(str(tmp_path / "nope"), allow_downloads=True)
