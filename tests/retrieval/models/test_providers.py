import pytest

from retrieval.models.embedders.hashed import HashedEmbedder
from retrieval.models.embedders.sentence_transformers import SentenceTransformerEmbedder
from retrieval.models.model_files import load_on_backend
from retrieval.models.providers import ModelConfig, load_models
from retrieval.models.rerankers.cohere import CohereReranker
from retrieval.models.rerankers.cross_encoder import CrossEncoderReranker

MISSING = "memoria-tests/not-a-cached-model"


def test_unloadable_models_fall_back_to_the_offline_backend_and_say_so_once_each():
    said: list[str] = []
    models = load_models(
        ModelConfig(embedding_model=MISSING, rerank_model=MISSING, allow_model_downloads=False),
        store_dim=384,
        announce=said.append,
    )
    assert isinstance(models.embedder, HashedEmbedder) and models.embedder.dimension == 384
    assert models.reranker is None
    assert models.offline
    assert models.embedder_info.offline_fallback and models.reranker_info.offline_fallback
    assert len(said) == 2
    assert "running on the offline backend: hashed-v1:384" in said[0]
    assert said[1].endswith(
        "recall ranks without a reranker (MEMORIA_RERANKER=none asks for none and says nothing)"
    )
    assert models.embedder_info.describe().startswith("hashed-v1:384 (offline fallback: ")


@pytest.mark.slow
def test_real_models_load_when_available(tiny_models):
    said: list[str] = []
    config = ModelConfig(
        embedding_model=str(tiny_models["embedder"]), rerank_model=str(tiny_models["cross_encoder"])
    )
    models = load_models(config, store_dim=32, announce=said.append)
    assert isinstance(models.embedder.inner, SentenceTransformerEmbedder)
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
        ModelConfig(embedder="hashed", reranker="cohere", rerank_model=MISSING, allow_model_downloads=False),
        store_dim=64,
        announce=said.append,
    )
    assert models.reranker is None
    assert "COHERE_API_KEY is not set" in models.reranker_info.reason
    assert len(said) == 1


@pytest.mark.slow
def test_the_onnx_backend_runs_the_models_on_onnxruntime_with_the_vectors_and_scores_of_torch(tiny_models):
    from retrieval.models.onnx_models import EXPORT

    said: list[str] = []
    config = ModelConfig(
        embedding_model=str(tiny_models["embedder"]),
        rerank_model=str(tiny_models["cross_encoder"]),
        model_backend="onnx",
    )
    models = load_models(config, store_dim=32, announce=said.append)
    torch_models = load_models(
        ModelConfig(
            embedding_model=config.embedding_model, rerank_model=config.rerank_model, model_backend="torch"
        ),
        store_dim=32,
    )
    assert (
        isinstance(models.embedder.inner, SentenceTransformerEmbedder) and not models.offline and said == []
    )
    assert models.embedder.backend == models.reranker.backend == "onnxruntime"
    assert models.embedder_info.active.endswith("[onnxruntime]")
    assert (tiny_models["embedder"] / EXPORT).exists() and (tiny_models["cross_encoder"] / EXPORT).exists()
    texts = ["the deploy script needs the staging key", "a much longer text " * 40]
    # The same model either way: one vector fingerprint, vectors within float rounding (cosine >= 0.9999).
    assert models.embedder.name == torch_models.embedder.name
    cosines = (models.embedder.embed_documents(texts) * torch_models.embedder.embed_documents(texts)).sum(
        axis=1
    )
    assert cosines.min() >= 0.9999
    assert models.embedder.embed_query(texts[0]) @ torch_models.embedder.embed_query(texts[0]) >= 0.9999
    scores = models.reranker.rerank("staging key", texts)
    assert scores == pytest.approx(torch_models.reranker.rerank("staging key", texts), abs=1e-4)


def test_when_onnxruntime_cannot_run_a_model_the_same_model_runs_on_torch_and_says_why(tiny_models):
    said: list[str] = []
    config = ModelConfig(
        embedding_model=str(tiny_models["embedder"]),
        reranker="none",
        model_backend="onnx",
        embedding_model_file="onnx/not-there.onnx",
    )
    models = load_models(config, store_dim=32, announce=said.append)
    assert models.embedder.backend == "torch" and not models.offline
    assert len(said) == 1 and "onnxruntime could not run it" in said[0] and "running on torch" in said[0]


def test_a_session_that_loads_but_cannot_run_is_not_used_the_models_run_on_torch(tiny_models, monkeypatch):
    """onnxruntime opens the export, but running it fails (a missing input, a broken export): the probe
    made at load catches it, and every embedding and score then comes from torch, not the broken session."""
    from retrieval.models import onnx_models

    def broken(self, *args, **kwargs):
        raise RuntimeError("Required inputs (['position_ids']) are missing")

    monkeypatch.setattr(onnx_models.OnnxTransformer, "encode", broken)
    said: list[str] = []
    config = ModelConfig(
        embedding_model=str(tiny_models["embedder"]),
        rerank_model=str(tiny_models["cross_encoder"]),
        model_backend="onnx",
    )
    models = load_models(config, store_dim=32, announce=said.append)
    assert models.embedder.backend == models.reranker.backend == "torch" and not models.offline
    assert models.embedder.embed_query("staging key").shape == (32,)
    assert len(models.reranker.rerank("staging key", ["the staging key rotates"])) == 1
    assert said and all("running on torch" in line for line in said)


class RecordingLoader:
    """Stands in for SentenceTransformer / CrossEncoder: records how it was called; may refuse a backend."""

    def __init__(self, refuse: str | None = None) -> None:
        self.calls: list[dict] = []
        self.refuse = refuse

    def __call__(self, path, **kwargs):
        self.calls.append({"path": path, **kwargs})
        if kwargs.get("backend") == self.refuse:
            raise ImportError(f"{self.refuse} runtime missing")
        return "model"


def test_a_backend_and_its_export_file_reach_the_loader(tmp_path):
    loader = RecordingLoader()
    loaded = load_on_backend(
        loader, tmp_path, device="cpu", backend="onnx", model_file="onnx/model_qint8_avx2.onnx"
    )
    assert loaded == ("model", "onnx", None)
    assert loader.calls == [
        {
            "path": str(tmp_path),
            "device": "cpu",
            "backend": "onnx",
            "model_kwargs": {"file_name": "onnx/model_qint8_avx2.onnx"},
        }
    ]
    refusing = RecordingLoader(refuse="openvino")
    model, backend, note = load_on_backend(
        refusing, tmp_path, device="cpu", backend="openvino", model_file=None
    )
    assert (model, backend) == ("model", "torch")
    assert "ImportError: openvino runtime missing" in note and "MEMORIA_MODEL_BACKEND=torch" in note
    assert refusing.calls[1] == {"path": str(tmp_path), "device": "cpu"}


def test_the_backend_is_read_from_the_environment():
    from server.config import Settings
    from server.state import model_config

    settings = Settings.from_env(
        {
            "MEMORIA_MODEL_BACKEND": "onnx",
            "MEMORIA_EMBEDDING_MODEL_FILE": "onnx/model_O3.onnx",
            "MEMORIA_RERANK_MODEL_FILE": "onnx/model_qint8_avx2.onnx",
        }
    )
    config = model_config(settings)
    assert (config.model_backend, config.embedding_model_file, config.rerank_model_file) == (
        "onnx",
        "onnx/model_O3.onnx",
        "onnx/model_qint8_avx2.onnx",
    )


@pytest.mark.slow
def test_cohere_without_a_key_says_which_reranker_ranks_instead(tiny_models):
    said: list[str] = []
    models = load_models(
        ModelConfig(embedder="hashed", reranker="cohere", rerank_model=str(tiny_models["cross_encoder"])),
        store_dim=64,
        announce=said.append,
    )
    # A review found "recall ranks without a reranker" said while the local cross-encoder ranked instead.
    assert models.reranker is not None and models.reranker_info.offline_fallback
    assert said[-1].endswith(f"ranking with {models.reranker_info.active} instead")
