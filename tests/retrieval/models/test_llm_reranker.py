import json
from dataclasses import replace

import pytest

from retrieval.models.rerankers.llm import (
    MAX_CANDIDATES,
    LLMReranker,
    RerankerConfiguration,
    RerankerService,
    parse_reranker_configuration,
)
from retrieval.stages.rerank import RerankStage
from retrieval.trace import LLMReranked, Reranked, RerankFellBack
from retrieval.types import Candidate, RecallRequest
from storage.records import Scope
from tests.fakes import ScriptedLLM, ScriptedReranker
from tests.records import memory_record

DOCS = ["postgres pool size is 20", "the cat sat", "postgres port 5432"]


def scores(*values: float) -> str:
    return json.dumps({"scores": [{"index": i, "score": v} for i, v in enumerate(values)]})


def test_configuration_has_the_seeds_shape():
    config = parse_reranker_configuration(
        '{"enabled": true, "modelId": "claude-haiku", "topK": 5, "minScore": 0.3}'
    )
    assert config == RerankerConfiguration(enabled=True, modelId="claude-haiku", topK=5, minScore=0.3)
    assert parse_reranker_configuration(None) is None
    assert parse_reranker_configuration("not json") is None
    assert parse_reranker_configuration({"enabled": False}) == RerankerConfiguration(enabled=False)


def test_llm_scores_come_back_in_input_order_with_usage():
    result = LLMReranker("m").rerank("postgres", DOCS, ScriptedLLM({"rerank": [scores(0.9, 0.0, 0.6)]}))
    assert result.success and result.scores == (0.9, 0.0, 0.6)
    assert result.usage.promptTokens == 10 and result.usage.completionTokens == 5
    assert result.durationMs >= 0 and result.model == "scripted-llm"


def test_top_k_is_kept_from_what_the_llm_scored_not_cut_before_it():
    llm = ScriptedLLM({"rerank": [scores(0.2, 0.9, 0.5)]})
    result = LLMReranker("m").rerank("postgres", DOCS, llm, top_k=2)
    assert "[2]" in llm.asked[0].prompt  # the third memory was scored too
    assert result.scores == (None, 0.9, 0.5)  # the two it scored best are kept: the first fused is not


def test_the_llm_scores_at_most_its_cap_of_candidates():
    many = [f"memory {i}" for i in range(MAX_CANDIDATES + 5)]
    llm = ScriptedLLM({"rerank": [scores(*[0.5] * MAX_CANDIDATES)]})
    result = LLMReranker("m").rerank("postgres", many, llm)
    assert (
        f"[{MAX_CANDIDATES - 1}]" in llm.asked[0].prompt and f"[{MAX_CANDIDATES}]" not in llm.asked[0].prompt
    )
    assert result.scores == (0.5,) * MAX_CANDIDATES + (None,) * 5


def test_model_is_read_as_model_id_and_the_cost_comes_from_the_price_table():
    assert parse_reranker_configuration({"enabled": True, "model": "gpt-4o-mini"}).modelId == "gpt-4o-mini"
    prices = {"scripted-llm": {"input": 0.15, "output": 0.60}}  # USD per million tokens
    result = LLMReranker("m", prices).rerank(
        "postgres", DOCS, ScriptedLLM({"rerank": [scores(0.9, 0.0, 0.6)]})
    )
    # 10 input and 5 output tokens: (10 x 0.15 + 5 x 0.60) / 1,000,000 = 0.0000045 USD
    assert result.usage.cost == pytest.approx(0.0000045)
    unpriced = LLMReranker("m").rerank("postgres", DOCS, ScriptedLLM({"rerank": [scores(0.9, 0.0, 0.6)]}))
    assert unpriced.usage.cost is None


def test_an_agent_may_have_a_reranker_configuration_of_its_own():
    stage = RerankStage(
        ScriptedReranker({}),
        llm_config=RerankerConfiguration(enabled=False),
        agent_configs={"reviewer": RerankerConfiguration(enabled=True, modelId="m", minScore=0.5)},
    )
    llm = ScriptedLLM({"rerank": [scores(0.9, 0.2, 0.6)]})
    mine = stage(replace(request(llm), agent_id="reviewer"), candidates())
    assert [(c.id, c.rerank_score) for c in mine.candidates] == [("m0", 0.9), ("m2", 0.6)]
    others = stage(replace(request(llm), agent_id="writer"), candidates())
    assert isinstance(others.events[0], Reranked)  # the server's configuration: the cross-encoder


def test_a_missing_score_is_a_failure_not_a_guess():
    result = LLMReranker("m").rerank("postgres", DOCS, ScriptedLLM({"rerank": [scores(0.9)]}))
    assert not result.success and "no score for memories [1, 2]" in result.error


def test_instances_are_cached_by_model():
    service = RerankerService()
    assert service.get("a") is service.get("a") and service.get("a") is not service.get("b")


def request(llm) -> RecallRequest:
    return RecallRequest(
        query="postgres", scope=Scope("o", "p"), top_k=5, char_budget=1000, candidate_limit=15, llm=llm
    )


def candidates() -> tuple[Candidate, ...]:
    return tuple(
        Candidate(memory=memory_record(f"m{i}", content=d), fused_score=0.5 - i / 10)
        for i, d in enumerate(DOCS)
    )


def test_the_rerank_stage_uses_llm_scores_and_the_min_score():
    stage = RerankStage(None, llm_config=RerankerConfiguration(enabled=True, modelId="m", minScore=0.5))
    output = stage(request(ScriptedLLM({"rerank": [scores(0.9, 0.2, 0.6)]})), candidates())
    assert [(c.id, c.rerank_score) for c in output.candidates] == [("m0", 0.9), ("m2", 0.6)]
    assert isinstance(output.events[0], LLMReranked) and output.events[0].success


def test_a_failed_llm_rerank_falls_back_to_the_cross_encoder_and_says_so():
    cross_encoder = ScriptedReranker({DOCS[2]: 0.8}, default=0.1)
    stage = RerankStage(cross_encoder, llm_config=RerankerConfiguration(enabled=True, modelId="m"))
    output = stage(request(ScriptedLLM({})), candidates())
    assert [type(e) for e in output.events] == [LLMReranked, RerankFellBack, Reranked]
    assert "fell back to scripted" in output.events[1].reason
    assert output.candidates[0].id == "m2"


@pytest.mark.parametrize("llm", [None])
def test_without_a_request_llm_the_cross_encoder_runs(llm):
    stage = RerankStage(ScriptedReranker({}), llm_config=RerankerConfiguration(enabled=True))
    assert isinstance(stage(request(llm), candidates()).events[0], Reranked)


def test_scores_that_are_not_objects_are_a_failure():
    result = LLMReranker("m").rerank(
        "postgres", DOCS, ScriptedLLM({"rerank": ['{"scores": [0.9, 0.1, 0.3]}']})
    )
    assert not result.success and "should be an object" in result.error


def test_an_unexpected_error_in_the_llm_path_falls_back():
    class Exploding:
        name = "exploding"

        def complete(self, request):
            raise ZeroDivisionError("bug")

    stage = RerankStage(ScriptedReranker({}), llm_config=RerankerConfiguration(enabled=True, modelId="m"))
    output = stage(request(Exploding()), candidates())
    assert [type(e) for e in output.events] == [LLMReranked, RerankFellBack, Reranked]
