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


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_a_model_that_declares_prompts_applies_them_and_says_so_in_its_name(tiny_models, tmp_path, backend):
    import json
    import shutil

    prompted = tmp_path / "prompted"
    shutil.copytree(tiny_models["embedder"], prompted, ignore=shutil.ignore_patterns("onnx"))
    settings_file = prompted / "config_sentence_transformers.json"
    declared = json.loads(settings_file.read_text()) if settings_file.exists() else {}
    declared["prompts"] = {"query": "query: ", "passage": "passage: "}
    settings_file.write_text(json.dumps(declared))
    # A sentence-transformers folder (modules and mean pooling, as the tiny model is read without them).
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (prompted / "modules.json").write_text(json.dumps(modules))
    (prompted / "1_Pooling").mkdir()
    pooling = {"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True}
    (prompted / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    plain = SentenceTransformerEmbedder(str(tiny_models["embedder"]), allow_downloads=False, backend=backend)
    model = SentenceTransformerEmbedder(str(prompted), allow_downloads=False, backend=backend)
    plain.warm_up()
    model.warm_up()
    # Vectors made before prompts were applied carry the plain name: the two never meet in vector search.
    assert model.name == f"st:{prompted}:32+prompts" and plain.name == f"st:{tiny_models['embedder']}:32"
    assert model.embed_documents(["the cat sat"])[0] == pytest.approx(
        plain.embed_documents(["passage: the cat sat"])[0], abs=1e-5
    )
    assert model.embed_query("mysql") == pytest.approx(plain.embed_query("query: mysql"), abs=1e-5)


def test_query_vectors_of_the_author_recipe_are_still_the_models_query_vectors():
    from retrieval.models.embedders.sentence_transformers import same_query_vectors

    assert same_query_vectors("st:m:384", "st:m:384")
    # Queries never carried an author; the "+author" recipe applied the model's prompts.
    assert same_query_vectors("st:m:384+author", "st:m:384")
    assert same_query_vectors("st:m:384+author", "st:m:384+prompts")
    # Plain vectors of a prompted model were made without its prompts; another model is another model.
    assert not same_query_vectors("st:m:384", "st:m:384+prompts")
    assert not same_query_vectors("st:other:384+author", "st:m:384")
    assert not same_query_vectors("st:m:384+prompts", "st:m:384")
    assert not same_query_vectors(None, "st:m:384")  # reports made before query vectors were kept


def test_recipes_of_one_model_are_told_from_another_model():
    from retrieval.models.embedders.sentence_transformers import same_model

    assert same_model("st:m:384+author", "st:m:384")
    assert same_model("st:m:384", "st:m:384+prompts")
    assert same_model("st:m:384+author", "st:m:384+prompts")
    assert not same_model("st:other:384+author", "st:m:384")
    assert not same_model("hashed-v1:384", "st:m:384")  # the fallback's vectors are not a recipe of the model


def test_the_local_folder_that_made_a_stores_vectors_is_read_from_the_embedders_name(tmp_path):
    from retrieval.models.embedders.sentence_transformers import local_model_folder

    (tmp_path / "minilm").mkdir()
    assert local_model_folder(f"st:{tmp_path}/minilm:384") == f"{tmp_path}/minilm"
    assert local_model_folder(f"st:{tmp_path}/minilm:384+author") == f"{tmp_path}/minilm"
    assert local_model_folder("st:sentence-transformers/all-MiniLM-L6-v2:384") is None  # a hub id
    assert local_model_folder(f"st:{tmp_path}/gone:384") is None  # a folder no longer there
    assert local_model_folder("hashed-v1:384") is None


@pytest.mark.slow
def test_one_model_folder_spelled_two_ways_names_one_embedder(tiny_models, monkeypatch):
    # "minilm/" (a shell's completion) and "./minilm" from its parent are the folder "/.../minilm": their
    # vectors are one model's, and a store made under one spelling is searched under the other.
    folder = tiny_models["embedder"]
    monkeypatch.chdir(folder.parent)
    names = set()
    for spelling in (str(folder), f"{folder}/", f"./{folder.name}", f"{folder.name}/"):
        embedder = SentenceTransformerEmbedder(spelling, allow_downloads=False)
        embedder.warm_up()
        names.add(embedder.name)
    assert names == {f"st:{folder}:32"}


def test_a_store_named_under_another_spelling_of_the_folder_is_the_same_model(tmp_path, monkeypatch):
    from retrieval.models.embedders.sentence_transformers import same_model

    (tmp_path / "minilm").mkdir()
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path)
    # Names written before spellings were made one: remade at start with no question asked.
    assert same_model(f"st:{tmp_path}/minilm/:384", f"st:{tmp_path}/minilm:384")
    assert same_model("st:minilm:384", f"st:{tmp_path}/minilm:384+prompts")
    assert not same_model("st:other:384", f"st:{tmp_path}/minilm:384")
    assert not same_model(f"st:{tmp_path}/minilm:768", f"st:{tmp_path}/minilm:384")  # another width
    assert same_model(
        "st:sentence-transformers/all-MiniLM-L6-v2:384", "st:sentence-transformers/all-MiniLM-L6-v2:384"
    )


def test_query_vectors_stored_under_another_spelling_of_the_folder_are_the_models(tmp_path, monkeypatch):
    from retrieval.models.embedders.sentence_transformers import _FOLDERS, same_query_vectors

    (tmp_path / "minilm").mkdir()
    monkeypatch.chdir(tmp_path)
    _FOLDERS.clear()
    # Reports keep the name their query vectors were made under: not made again at every start.
    assert same_query_vectors("st:minilm/:384", f"st:{tmp_path}/minilm:384")
    assert same_query_vectors("st:minilm/:384+author", f"st:{tmp_path}/minilm:384+prompts")
    assert not same_query_vectors("st:other:384", f"st:{tmp_path}/minilm:384")


def test_a_model_folder_that_cannot_be_looked_at_is_named_as_written(monkeypatch):
    from pathlib import Path

    from retrieval.models.embedders.sentence_transformers import _FOLDERS, model_reference

    def refused(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "is_dir", refused)
    _FOLDERS.clear()
    # A review found the check raising out of the embedder's construction: the server then failed to start
    # instead of loading what it can (or falling back) and saying why.
    assert model_reference("/root/private/minilm") == "/root/private/minilm"
    _FOLDERS.clear()
