"""How the server sizes the read lane: 3 threads when recall runs on this machine alone, 40 when one of its
steps waits on a network model, and MEMORIA_READ_CONCURRENCY whatever the models."""

import pytest

from retrieval.models.rerankers.cohere import CohereReranker
from server.state import read_lane
from tests.helpers import make_runtime, settings_for
from tools.lanes import Lanes


class LocalModels:
    reranker = None


class CohereModels:
    reranker = CohereReranker("test-key", base_url="http://127.0.0.1:9", model="rerank-v3.5")


def test_recall_on_local_models_gets_three_threads(tmp_path):
    assert read_lane(settings_for(tmp_path), LocalModels()) == 3


@pytest.mark.parametrize(
    "network_step",
    [
        {"gate": "llm"},
        {"llm_passes": ["cleanup"]},
        {"max_iterations": 2},
        {"llm_reranker": {"enabled": True, "modelId": "a-model"}},
        {"llm_reranker_by_agent": {"claude": {"enabled": True}}},
    ],
)
def test_a_recall_step_that_asks_a_language_model_gets_anyios_forty(tmp_path, network_step):
    assert read_lane(settings_for(tmp_path, **network_step), LocalModels()) == 40
    # With no language model at all those steps never wait on one.
    assert read_lane(settings_for(tmp_path, llm="none", **network_step), LocalModels()) == 3


def test_a_disabled_llm_reranker_waits_on_nothing(tmp_path):
    assert read_lane(settings_for(tmp_path, llm_reranker={"enabled": False}), LocalModels()) == 3


def test_the_cohere_reranker_gets_forty_and_the_setting_wins_over_both(tmp_path):
    assert read_lane(settings_for(tmp_path), CohereModels()) == 40
    assert read_lane(settings_for(tmp_path, read_concurrency=6), CohereModels()) == 6
    assert read_lane(settings_for(tmp_path, read_concurrency=1), LocalModels()) == 1


def test_the_runtime_the_server_builds_carries_the_lane(tmp_path):
    runtime = make_runtime(settings_for(tmp_path / "store", read_concurrency=5))
    try:
        assert runtime.lanes == Lanes(reads=5, reports=2)
    finally:
        runtime.close()
