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


@pytest.mark.anyio
async def test_a_restatement_killed_before_its_supersede_landed_is_finished_before_the_next_server_answers(
    settings, monkeypatch
):
    """kill -9 after a restatement was answered and before the supersede it decided was committed: the
    next server finishes it as it starts, so its first answer never reads the old memory as active beside the new
    (before, the maintenance thread's first round did, about a second after the server answered)."""
    import server.state
    from server.app import build_server
    from tests.helpers import call, connected
    from tests.writing.test_service import killed_between_insert_and_consolidation

    old, new = killed_between_insert_and_consolidation(settings, "commit")
    monkeypatch.setattr(server.state, "catch_up", lambda runtime: None)  # no maintenance round in time
    async with connected(build_server(settings)) as client:
        traced = await call(client, "lineage", {"memory_id": old})
    assert (traced["memory"]["status"], traced["current"]["id"]) == ("superseded", new)


def test_a_principal_keeps_the_sessions_of_its_most_recent_client_names_and_drops_only_its_own(
    tmp_path, monkeypatch
):
    """A review: a token naming its clients at will could push other principals' default sessions out."""
    import server.state
    from server.state import AppState

    monkeypatch.setattr(server.state, "MAX_HELD_SESSIONS", 8)
    monkeypatch.setattr(server.state, "MAX_CLIENTS_PER_PRINCIPAL", 4)
    state = AppState(settings_for(tmp_path / "db"), lambda settings: None)

    def session(principal: str, name: str) -> str:
        return state.session_for(f"client:{state.client_key(principal, name)}", begins_task=True)

    bob = session("bob", "laptop")
    first = session("alice", "window-0")
    for index in range(1, 12):  # more names than sessions are held in all
        session("alice", f"window-{index}")
    assert session("bob", "laptop") == bob  # kept: alice's names made room among her own only
    assert session("alice", "window-0") != first  # the least recent of hers went
    assert session("alice", "window-11") == session("alice", "window-11")
