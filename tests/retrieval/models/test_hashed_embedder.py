import subprocess
import sys

import numpy as np
import pytest

from retrieval.models.embedders.base import Embedder
from retrieval.models.embedders.hashed import HashedEmbedder, _bucket, hashed_features


def test_vectors_are_unit_length_with_the_requested_width():
    embedder = HashedEmbedder(128)
    matrix = embedder.embed_documents(["postgres pool size", "the deploy script"])
    assert matrix.shape == (2, 128) and matrix.dtype == np.float32
    assert np.linalg.norm(matrix, axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)
    assert isinstance(embedder, Embedder)


def test_shared_words_and_word_forms_bring_texts_closer():
    embedder = HashedEmbedder(384)
    query = embedder.embed_query("database migrations")
    related = embedder.embed_query("we ran the database migration yesterday")
    unrelated = embedder.embed_query("the cat sat on the mat")
    assert float(query @ related) > 0.4
    assert float(query @ related) > float(query @ unrelated) + 0.3


def test_a_querys_clitics_bring_no_memory_closer():
    """The words of "what's" and "Bob's" share an "s"; the query's is no feature, the memory's still is."""
    embedder = HashedEmbedder(384)
    memory = embedder.embed_documents(["Bob's laptop runs Ubuntu 22.04."])[0]
    same_words = embedder.embed_documents(["Bob laptop runs Ubuntu 22.04."])[0]
    assert float(embedder.embed_query("what's the weather forecast?") @ memory) < 0.05
    assert float(embedder.embed_documents(["what's the weather forecast?"])[0] @ memory) > 0.1  # as before
    assert float(embedder.embed_query("Bob's laptop") @ same_words) == pytest.approx(
        float(embedder.embed_query("Bob laptop") @ same_words)
    )
    # A query without an apostrophe is embedded as a memory is.
    assert np.array_equal(
        embedder.embed_query("deploy script"), embedder.embed_documents(["deploy script"])[0]
    )


def test_features_weight_words_pairs_and_trigrams():
    features = hashed_features("deploy script")
    assert features["w:deploy"] == 1.0
    assert features["b:deploy script"] == 0.5
    assert features["c:#de"] == pytest.approx(0.2)


def test_vectors_are_identical_in_another_process():
    # Python's hash() is salted per process; stored vectors must not depend on it.
    code = "from retrieval.models.embedders.hashed import HashedEmbedder; print(HashedEmbedder(64).embed_query('stable across runs').tolist())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    here = HashedEmbedder(64).embed_query("stable across runs")
    assert np.array(eval(other), dtype=np.float32) == pytest.approx(here, abs=1e-6)


def test_fingerprint_names_version_and_width():
    assert HashedEmbedder(384).name == "hashed-v1:384"
    with pytest.raises(ValueError, match="dimension must be >= 8, but got 4"):
        HashedEmbedder(4)


def test_vectors_are_the_hashed_features_summed_into_their_signed_buckets():
    texts = ["the deploy script deploys the deploy script", "Postgres pool size: 20", "", "a b a b a"]
    expected = np.zeros((len(texts), 96), dtype=np.float64)
    for row, text in enumerate(texts):
        for feature, weight in hashed_features(text).items():
            column, sign = _bucket(feature, 96)
            expected[row, column] += sign * weight
    norms = np.linalg.norm(expected, axis=1, keepdims=True)
    expected = np.divide(expected, norms, out=np.zeros_like(expected), where=norms > 0)
    embedder = HashedEmbedder(96)
    assert embedder.embed_documents(texts) == pytest.approx(expected, abs=1e-6)
    # Cached buckets and trigram parts give the same vectors the second time.
    assert embedder.embed_documents(texts[::-1]) == pytest.approx(expected[::-1], abs=1e-6)
