"""The real sentence-transformers loading code, against a tiny model built in this test session."""

import numpy as np
import pytest

from retrieval.models.embedders.base import Embedder
from retrieval.models.embedders.sentence_transformers import SentenceTransformerEmbedder
from retrieval.models.model_files import ModelUnavailable, resolve_model_dir


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_model_that_declares_a_query_prompt_gets_it_on_queries_only(tiny_models, tmp_path):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_models["embedder"]), device="cpu")
    model.prompts = {"query": "query: ", "passage": "passage: "}
    model.save(str(tmp_path / "prompted"))
    embedder = SentenceTransformerEmbedder(str(tmp_path / "prompted"), allow_downloads=False)
    embedder.warm_up()
    expected_query = model.encode(["query: we switched to mysql"], normalize_embeddings=True)[0]
    expected_passage = model.encode(["passage: we switched to mysql"], normalize_embeddings=True)[0]
    assert embedder.embed_query("we switched to mysql") == pytest.approx(expected_query, abs=1e-5)
    assert embedder.embed_documents(["we switched to mysql"])[0] == pytest.approx(expected_passage, abs=1e-5)
    plain = SentenceTransformerEmbedder(str(tiny_models["embedder"]), allow_downloads=False)
    plain.warm_up()  # no prompts declared: the text as it is
    assert plain.embed_query("mysql") == pytest.approx(plain.embed_documents(["mysql"])[0], abs=1e-6)
