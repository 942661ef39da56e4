import json

from retrieval.stages.candidate_search import CandidateSearchStage
from retrieval.stages.iterative import IterativeRetrievalStage
from retrieval.stages.rerank import RerankStage
from retrieval.stages.threshold import MinScoreStage
from retrieval.trace import IterationSkipped, SubQueryRan, SufficiencyJudged
from retrieval.types import RecallRequest
from storage.records import Scope
from tests.fakes import FakeSource, ScriptedLLM, ScriptedReranker, TokenEmbedder
from tests.records import memory_record

EMBEDDER = TokenEmbedder()
MEMORIES = [
    memory_record("invoices", content="billing invoices live in postgres", embedder=EMBEDDER.name),
    memory_record("retention", content="kafka retention is fourteen days", embedder=EMBEDDER.name),
    memory_record("lunch", content="lunch is at noon", embedder=EMBEDDER.name),
]


def stage(
    max_iterations: int, reranker=None
) -> tuple[IterativeRetrievalStage, CandidateSearchStage, RerankStage]:
    source = FakeSource(EMBEDDER, MEMORIES)
    search = CandidateSearchStage(source, EMBEDDER, vector_weight=0.0, use_vector=False)
    rerank = RerankStage(reranker)
    return (
        IterativeRetrievalStage(search, rerank, MinScoreStage(0.0), max_iterations=max_iterations),
        search,
        rerank,
    )


def first_pass(search, rerank, request):
    return rerank(request, search(request, ()).candidates).candidates


def judgement(sufficient: bool, confidence: float, sub_queries: list[str]) -> str:
    return json.dumps({"sufficient": sufficient, "confidence": confidence, "sub_queries": sub_queries})


def request(llm=None, query: str = "billing invoices") -> RecallRequest:
    return RecallRequest(
        query=query,
        scope=Scope("o", "p"),
        top_k=5,
        char_budget=2000,
        candidate_limit=10,
        llm=llm,
    )


def test_a_sub_query_finds_what_the_first_pass_missed():
    llm = ScriptedLLM({"sufficiency": [judgement(False, 0.2, ["kafka retention"]), judgement(True, 0.9, [])]})
    iterative, search, rerank = stage(max_iterations=3)
    req = request(llm)
    before = first_pass(search, rerank, req)
    assert [c.id for c in before] == ["invoices"]
    output = iterative(req, before)
    assert {c.id for c in output.candidates} == {"invoices", "retention"}
    retention = next(c for c in output.candidates if c.id == "retention")
    assert retention.queries == ("kafka retention",)
    # word-overlap "BM25": 2 of 2 words, max-normalised to 1.0, discounted x 0.9 for a sub-query
    assert retention.relevance_score == 0.9
    kinds = [type(e) for e in output.events]
    assert kinds[:2] == [SufficiencyJudged, SubQueryRan] and SufficiencyJudged in kinds[2:]
    assert len(llm.asked) == 2 and "billing invoices" in llm.asked[0].prompt


def test_a_reranker_cross_reranks_everything_against_the_original_query():
    llm = ScriptedLLM({"sufficiency": [judgement(False, 0.1, ["kafka retention"])]})
    reranker = ScriptedReranker(
        {"billing invoices live in postgres": 0.9, "kafka retention is fourteen days": 0.4}
    )
    iterative, search, rerank = stage(max_iterations=2, reranker=reranker)
    req = request(llm)
    output = iterative(req, first_pass(search, rerank, req))
    assert [(c.id, c.relevance_score) for c in output.candidates] == [("invoices", 0.9), ("retention", 0.4)]
    assert reranker.calls[-1][0] == "billing invoices"  # the cross-rerank used the original query


def test_a_sufficient_first_pass_stops_there():
    llm = ScriptedLLM({"sufficiency": [judgement(True, 0.95, ["ignored"])]})
    iterative, search, rerank = stage(max_iterations=3)
    req = request(llm)
    output = iterative(req, first_pass(search, rerank, req))
    assert [c.id for c in output.candidates] == ["invoices"]
    assert not any(isinstance(e, SubQueryRan) for e in output.events)


def test_one_iteration_or_no_llm_means_a_single_pass_and_the_trace_says_why():
    iterative, *_ = stage(max_iterations=1)
    assert iterative(request(ScriptedLLM({})), ()).events == (
        IterationSkipped("max_iterations is 1: a single pass"),
    )
    iterative, *_ = stage(max_iterations=2)
    reason = iterative(request(None), ()).events[0].reason
    assert reason.startswith("no LLM: the client offers no sampling")


def test_an_llm_that_cannot_answer_ends_the_iterations_cleanly():
    iterative, search, rerank = stage(max_iterations=3)
    req = request(ScriptedLLM({"sufficiency": ["not json at all"]}))
    output = iterative(req, first_pass(search, rerank, req))
    assert [c.id for c in output.candidates] == ["invoices"]
    assert "could not judge sufficiency" in output.events[0].reason


def test_sub_queries_given_as_one_string_or_junk_are_handled():
    as_string = ScriptedLLM(
        {
            "sufficiency": [
                json.dumps({"sufficient": False, "confidence": 0.1, "sub_queries": "kafka retention"})
            ]
        }
    )
    iterative, search, rerank = stage(max_iterations=2)
    output = iterative(request(as_string), first_pass(search, rerank, request(as_string)))
    assert [e.query for e in output.events if isinstance(e, SubQueryRan)] == ["kafka retention"]
    junk = ScriptedLLM(
        {"sufficiency": [json.dumps({"sufficient": False, "confidence": 0.1, "sub_queries": 2})]}
    )
    output = iterative(request(junk), first_pass(search, rerank, request(junk)))
    assert "should be a list of strings" in output.events[0].reason
    # "false" as text is no answer, not a yes (a trial saw it read as sufficient, and traced so).
    texts = ScriptedLLM({"sufficiency": [json.dumps({"sufficient": "false", "sub_queries": ["kafka"]})]})
    output = iterative(request(texts), first_pass(search, rerank, request(texts)))
    assert "'sufficient' should be true or false, but got 'false'" in output.events[0].reason


def test_min_fact_score_still_applies_after_the_sub_query_discount():
    llm = ScriptedLLM({"sufficiency": [judgement(False, 0.2, ["kafka retention"])]})
    source = FakeSource(EMBEDDER, MEMORIES)
    search = CandidateSearchStage(source, EMBEDDER, vector_weight=0.0, use_vector=False)
    rerank = RerankStage(None)
    iterative = IterativeRetrievalStage(search, rerank, MinScoreStage(0.95), max_iterations=2)
    req = request(llm)
    output = iterative(req, first_pass(search, rerank, req))
    assert "retention" not in {c.id for c in output.candidates}  # 1.0 x 0.9 = 0.9 < 0.95


def test_attribution_for_the_original_query_holds_through_sub_queries_and_the_cross_rerank():
    from retrieval.stages.attribution import AttributionStage

    memories = [
        memory_record("hers", content="melanie painted a lake", agent_id="Melanie", embedder=EMBEDDER.name),
        memory_record("his", content="caroline painted a horse", agent_id="Caroline", embedder=EMBEDDER.name),
    ]
    search = CandidateSearchStage(
        FakeSource(EMBEDDER, memories), EMBEDDER, vector_weight=0.0, use_vector=False
    )
    reranker = ScriptedReranker({"melanie painted a lake": 0.6, "caroline painted a horse": 0.8})
    rerank = RerankStage(reranker)
    attribution = AttributionStage(0.5)
    iterative = IterativeRetrievalStage(
        search, rerank, MinScoreStage(0.0), attribution=attribution, max_iterations=2
    )
    llm = ScriptedLLM({"sufficiency": [judgement(False, 0.1, ["caroline horse"])]})
    req = request(llm, "what did Melanie paint")
    first = attribution(req, rerank(req, search(req, ()).candidates).candidates).candidates
    output = iterative(req, first)
    # cross-rerank: hers 0.6 x 1; his 0.8 x (1 - 0.5) = 0.4, found by the sub-query, discounted all the same
    assert [(c.id, c.relevance_score, c.attribution_factor) for c in output.candidates] == [
        ("hers", 0.6, 1.0),
        ("his", 0.4, 0.5),
    ]


def test_every_call_a_sub_query_and_the_cross_rerank_make_to_a_model_is_traced_failed_or_not():
    """A trial: a recall made 6 model calls, and explain_ranking showed 4."""
    from retrieval.models.rerankers.llm import RerankerConfiguration
    from retrieval.trace import LLMReranked, RerankFellBack

    source = FakeSource(EMBEDDER, MEMORIES)
    search = CandidateSearchStage(source, EMBEDDER, vector_weight=0.0, use_vector=False)
    rerank = RerankStage(None, llm_config=RerankerConfiguration(enabled=True, modelId="m"))
    iterative = IterativeRetrievalStage(search, rerank, MinScoreStage(0.0), max_iterations=2)
    llm = ScriptedLLM({"sufficiency": [judgement(False, 0.2, ["kafka retention"])]})  # no rerank answers
    output = iterative(request(llm), search(request(llm), ()).candidates)
    asked = [event for event in output.events if isinstance(event, LLMReranked)]
    assert len(asked) == 2 and not any(event.success for event in asked)  # the sub-query's, the cross one
    assert sum(isinstance(event, RerankFellBack) for event in output.events) == 2
