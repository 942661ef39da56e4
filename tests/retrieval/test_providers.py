from retrieval.embedders.hashed import HashedEmbedder
from retrieval.embedders.sentence_transformers import SentenceTransformerEmbedder
from retrieval.providers import ModelConfig, load_models
from retrieval.rerankers.cohere import CohereReranker
from retrieval.rerankers.cross_encoder import CrossEncoderReranker

MISSING = "memoria-tests/not-a-cached-model"


def test_unloadable_models_fall_back_to_the_offline_backend_and_say_so_once_each():
    said: list[str] = []
    models = load_models(
        ModelConfig(embedding_model=MISSING, rerank_model=MISSING, allow_downloads=False),
        store_dim=384,
        announce=said.append,
    )
    assert isinstance(models.embedder, HashedEmbedder) and models.embedder.dimension == 384
    assert models.reranker is None
    assert models.offline
    assert models.embedder_info.offline_fallback and models.reranker_info.offline_fallback
    assert len(said) == 2
    assert "running on the offline backend: hashed-v1:384" in said[0]
    assert models.embedder_info.describe().startswith("hashed-v1:384 (offline fallback: ")


def test_real_models_load_when_available(tiny_models):
    said: list[str] = []
    config = ModelConfig(
        embedding_model=str(tiny_models["embedder"]), rerank_model=str(tiny_models["cross_encoder"])
    )
    models = load_models(config, store_dim=32, announce=said.append)
    assert isinstance(models.embedder, SentenceTransformerEmbedder)
    assert isinstance(models.reranker, CrossEncoderReranker)
    assert said == [] and not models.offline


def test_an_embedder_of_another_width_than_the_store_is_not_mixed_in(tiny_models):
    said: list[str] = []
    models = load_models(
        ModelConfig(embedding_model=str(tiny_models["embedder"]), reranker="none"),
        store_dim=384,
        announce=said.append,
    )
    assert isinstance(models.embedder, HashedEmbedder)
    assert "makes 32-d vectors but this store holds 384-d vectors" in models.embedder_info.reason


def test_cohere_is_used_when_chosen_and_a_key_is_set():
    models = load_models(
        ModelConfig(embedder="hashed", reranker="cohere", cohere_api_key="k"), store_dim=64, announce=print
    )
    assert isinstance(models.reranker, CohereReranker)
    assert models.reranker_info.active == "cohere:rerank-v3.5"


def test_cohere_without_a_key_falls_back_and_says_why():
    said: list[str] = []
    models = load_models(
        ModelConfig(embedder="hashed", reranker="cohere", rerank_model=MISSING, allow_downloads=False),
        store_dim=64,
        announce=said.append,
    )
    assert models.reranker is None
    assert "COHERE_API_KEY is not set" in models.reranker_info.reason
    assert len(said) == 1
