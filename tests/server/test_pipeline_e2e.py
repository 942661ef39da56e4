"""The whole pipeline through MCP clients: gate, corroboration, episode expansion, sampling-driven
iterative retrieval and LLM reranking, each visible in explain_ranking."""

import json

import numpy as np
import pytest
from mcp_types import CreateMessageResult, TextContent

from tests.fakes import ScriptedReranker, TableEmbedder
from tests.helpers import call, connected, server_with, settings_for

pytestmark = pytest.mark.anyio

CONCLUSION = "The flaky checkout test is caused by a shared Redis database"
SINGLE = "The checkout test needs the payments mock running"
SCORES = {CONCLUSION: 0.50, SINGLE: 0.50}


async def remember_as(server, agent: str, content: str, **extra) -> dict:
    async with connected(server, agent=agent) as client:
        return await call(client, "remember", {"content": content, **extra})


@pytest.mark.slow
async def test_a_greeting_is_gated_and_explain_says_so(settings):
    server = server_with(settings)
    await remember_as(server, "a", "The deploy script lives in scripts/deploy.sh")
    async with connected(server) as client:
        result = await call(client, "recall", {"query": "thanks, that's all!"})
        assert result["gated"] is True and result["context"] == "" and result["memories"] == []
        explained = await call(client, "explain_ranking", {"retrieval_id": result["retrieval_id"]})
        real = await call(client, "recall", {"query": "where is the deploy script?"})
    assert explained["gated"].startswith("greeting, thanks")
    assert explained["stages"][0]["events"][0]["retrieve"] is False
    assert all(stage["events"][0]["event"] == "StageSkipped" for stage in explained["stages"][1:])
    assert real["gated"] is False and len(real["memories"]) == 1


@pytest.mark.slow
async def test_a_conclusion_three_agents_stored_outranks_an_equally_relevant_single_agent_memory(settings):
    server = server_with(settings, reranker=ScriptedReranker(SCORES))
    single = await remember_as(server, "agent-a", SINGLE)
    first = await remember_as(server, "agent-a", CONCLUSION)
    for agent in ("agent-b", "agent-c"):
        again = await remember_as(server, agent, CONCLUSION)
        assert again["status"] == "duplicate" and again["id"] == first["id"]
        assert f"recorded {agent} as corroborating it" in again["note"]
    async with connected(server, agent="asker") as client:
        result = await call(client, "recall", {"query": "why is the checkout test flaky?"})
        explained = await call(client, "explain_ranking", {"retrieval_id": result["retrieval_id"]})
    assert [m["id"] for m in result["memories"]] == [first["id"], single["id"]]
    assert result["memories"][0]["corroborated_by"] == ["agent-b", "agent-c"]
    assert 'also stated by ["agent-b", "agent-c"]' in result["context"]
    top = explained["candidates"][0]
    assert top["corroborating_agents"] == ["agent-b", "agent-c"]
    assert top["scores"]["corroboration_boost"] == pytest.approx(0.1585, abs=1e-4)  # log2(3) x 0.1
    assert top["scores"]["final"] == pytest.approx(0.6585, abs=1e-4)
    assert explained["candidates"][1]["scores"]["corroboration_boost"] == 0.0


@pytest.mark.slow
async def test_a_question_asking_when_ranks_the_equally_relevant_memory_that_says_when_first(settings):
    undated, dated = (
        "The billing database migration needs a write freeze",
        "Billing moved to Postgres on 2026-03-02",
    )
    server = server_with(settings, reranker=ScriptedReranker({undated: 0.55, dated: 0.50}))
    first = await remember_as(server, "agent-a", undated)
    second = await remember_as(server, "agent-a", dated)
    async with connected(server, agent="asker") as client:
        asked = await call(client, "recall", {"query": "When did the billing database migration happen?"})
        about = await call(client, "recall", {"query": "the billing database migration"})
        explained = await call(client, "explain_ranking", {"retrieval_id": asked["retrieval_id"]})
    # 0.50 + 0.7 x 0.50 (it states a date, the question asks when) = 0.85 over 0.55; a query that asks for
    # no answer type keeps the reranker's order.
    assert [m["id"] for m in asked["memories"]] == [second["id"], first["id"]]
    assert [m["score"] for m in asked["memories"]] == pytest.approx([0.85, 0.55], abs=1e-6)
    assert [m["id"] for m in about["memories"]] == [first["id"], second["id"]]
    assert [c["scores"]["answer_type"] for c in explained["candidates"]] == pytest.approx([0.35, 0.0])


@pytest.mark.slow
async def test_near_duplicates_by_three_agents_are_boosted_but_three_by_one_agent_are_not(tmp_path):
    # Consolidation off, so one agent's copies stay side by side (with it on they merge: see test_consolidation).
    settings = settings_for(tmp_path / "db", consolidation_enabled=False)
    variants = [CONCLUSION + ".", CONCLUSION.lower(), CONCLUSION.upper() + "!"]  # one SimHash, three contents
    scores = {
        **{v: 0.5 for v in variants},
        SINGLE: 0.5,
        "Deploys run on Tuesday": 0.5,
        "deploys run on tuesday.": 0.5,
    }
    server = server_with(settings, reranker=ScriptedReranker(scores))
    ids = [(await remember_as(server, f"agent-{i}", text))["id"] for i, text in enumerate(variants)]
    solo = [
        (await remember_as(server, "solo", text))["id"]
        for text in ("Deploys run on Tuesday", "deploys run on tuesday.")
    ]
    single = (await remember_as(server, "agent-x", SINGLE))["id"]
    async with connected(server) as client:
        result = await call(client, "recall", {"query": "checkout test deploys", "top_k": 10})
        explained = await call(client, "explain_ranking", {"retrieval_id": result["retrieval_id"]})
    boost = {c["id"]: c["scores"]["corroboration_boost"] for c in explained["candidates"]}
    agents = {c["id"]: c["corroborating_agents"] for c in explained["candidates"]}
    assert all(boost[i] == pytest.approx(0.1585, abs=1e-4) for i in ids)
    assert agents[ids[0]] == ["agent-1", "agent-2"]
    assert boost[solo[0]] == boost[solo[1]] == boost[single] == 0.0  # one agent repeating itself
    ranked = [c["id"] for c in sorted(explained["candidates"], key=lambda c: -c["scores"]["final"])]
    assert set(ranked[:3]) == set(ids)
    # The context shows the conclusion once; the other copies are folded into it, not repeated.
    shown = [m["id"] for m in result["memories"] if m["id"] in ids]
    assert len(shown) == 1 and result["memories"][0]["corroborated_by"]
    folded = {
        c["id"]: c["reason"] for c in explained["candidates"] if c["id"] in ids and c["id"] not in shown
    }
    assert all(
        reason == f"a near-duplicate of {shown[0]}, which is in the context: folded into it"
        for reason in folded.values()
    )
    assert len(folded) == 2


@pytest.mark.slow
async def test_a_sibling_from_the_same_episode_appears_below_its_source(settings):
    scores = {"The billing service stores invoices in Postgres": 0.9}
    server = server_with(settings, reranker=ScriptedReranker(scores, default=0.01))
    source = await remember_as(
        server, "a", "The billing service stores invoices in Postgres", episode_id="billing-audit"
    )
    sibling = await remember_as(
        server, "a", "Invoices older than seven years move to cold storage", episode_id="billing-audit"
    )
    await remember_as(server, "a", "Lunch is at noon")
    async with connected(server) as client:
        result = await call(client, "recall", {"query": "where are billing invoices kept", "top_k": 1})
        explained = await call(client, "explain_ranking", {"retrieval_id": result["retrieval_id"]})
    memories = {m["id"]: m for m in result["memories"]}
    assert (
        memories[sibling["id"]]["source"] == "sibling"
        and memories[sibling["id"]]["sibling_of"] == source["id"]
    )
    assert memories[source["id"]]["position"] < memories[sibling["id"]]["position"]
    # score_propagation_alpha x source, plus what its neighbour (the source, the next turn) lends it: 0.2 x 0.9
    assert memories[sibling["id"]]["score"] == pytest.approx(0.5 * 0.9 + 0.2 * 0.9)
    brought = next(c for c in explained["candidates"] if c["id"] == sibling["id"])
    assert brought["brought_by"] == source["id"] and brought["source"] == "sibling"
    assert "a sibling from the episode of" in brought["reason"]
    assert "## episode billing-audit" in result["context"]


def sampling_callback(log: list):
    async def answer(context, params):
        system = params.system_prompt or ""
        log.append(system)
        if "check whether memories" in system:
            text = json.dumps({"sufficient": False, "confidence": 0.1, "sub_queries": ["kafka retention"]})
        else:
            text = "I cannot help with that"
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=text), model="client-llm"
        )

    return answer


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sampling_drives_iterative_retrieval(tmp_path, mode):
    # min_fact_score keeps the first pass to what the original query matches well, so only the
    # sub-query can bring the Kafka memory in.
    server = server_with(settings_for(tmp_path / "db", max_iterations=2, min_fact_score=0.3))
    await remember_as(server, "a", "Billing invoices live in Postgres")
    hidden = await remember_as(server, "a", "Kafka retention is fourteen days")

    asked: list = []
    async with connected(server, mode=mode, sampling_callback=sampling_callback(asked)) as client:
        result = await call(client, "recall", {"query": "billing invoices", "top_k": 5})
        explained = await call(client, "explain_ranking", {"retrieval_id": result["retrieval_id"]})
    assert asked and "check whether memories" in asked[0]
    iterative = next(s for s in explained["stages"] if s["stage"] == "iterative")
    judged, ran = iterative["events"][0], iterative["events"][1]
    assert (
        judged["event"] == "SufficiencyJudged"
        and judged["model"] == "client-llm"
        and judged["sub_queries"] == ["kafka retention"]
    )
    assert ran["event"] == "SubQueryRan" and ran["query"] == "kafka retention"
    found = next(c for c in explained["candidates"] if c["id"] == hidden["id"])
    assert found["queries"] == ["kafka retention"]


@pytest.mark.slow
async def test_without_sampling_iterative_retrieval_is_skipped_cleanly(tmp_path):
    server = server_with(settings_for(tmp_path / "db", max_iterations=3))
    await remember_as(server, "a", "Billing invoices live in Postgres")
    async with connected(server) as client:
        result = await call(client, "recall", {"query": "billing invoices"})
        explained = await call(client, "explain_ranking", {"retrieval_id": result["retrieval_id"]})
    iterative = next(s for s in explained["stages"] if s["stage"] == "iterative")
    assert iterative["events"][0]["event"] == "IterationSkipped"
    assert "client offers no sampling" in iterative["events"][0]["reason"]
    assert len(result["memories"]) == 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_llm_reranker_scores_through_sampling_and_falls_back_when_it_cannot(tmp_path, mode):
    settings = settings_for(
        tmp_path / "db", llm_reranker={"enabled": True, "modelId": "claude-haiku", "topK": 10}
    )
    server = server_with(settings)
    low = await remember_as(server, "a", "postgres pool size is 20")
    high = await remember_as(server, "a", "postgres runs on port 5432")
    hints = []

    async def rerank_by_llm(context, params):
        hints.append(params.model_preferences.hints[0].name if params.model_preferences else None)
        listing = params.messages[0].content.text
        scores = [
            {"index": i, "score": 0.9 if "5432" in line else 0.1}
            for i, line in enumerate(row for row in listing.splitlines() if row.startswith("["))
        ]
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text=json.dumps({"scores": scores})),
            model="client-llm",
        )

    async with connected(server, mode=mode, sampling_callback=rerank_by_llm) as client:
        result = await call(client, "recall", {"query": "postgres"})
        explained = await call(client, "explain_ranking", {"retrieval_id": result["retrieval_id"]})
    assert [m["id"] for m in result["memories"]] == [high["id"], low["id"]]
    assert hints and hints[0] == "claude-haiku"
    rerank = next(s for s in explained["stages"] if s["stage"] == "rerank")
    assert rerank["events"][0]["event"] == "LLMReranked" and rerank["events"][0]["success"] is True

    async with connected(
        server, mode=mode, sampling_callback=sampling_callback([])
    ) as client:  # answers nonsense
        fallback = await call(client, "explain_ranking", {"query": "postgres"})
    events = next(s for s in fallback["stages"] if s["stage"] == "rerank")["events"]
    assert [e["event"] for e in events] == ["LLMReranked", "RerankFellBack", "RerankSkipped"]
    assert events[0]["success"] is False


async def test_the_llm_gate_and_iteration_each_ask_the_client_in_the_input_required_flow(tmp_path):
    server = server_with(settings_for(tmp_path / "db", gate="llm", max_iterations=2))
    await remember_as(server, "a", "Billing invoices live in Postgres")
    purposes = []

    async def answer(context, params):
        system = params.system_prompt or ""
        if "needs the agent's long-term memory" in system:
            purposes.append("gate")
            text = json.dumps(
                {"needs_memory": "thanks" not in params.messages[0].content.text, "confidence": 0.95}
            )
        else:
            purposes.append("sufficiency")
            text = json.dumps({"sufficient": True, "confidence": 0.9, "sub_queries": []})
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=text), model="client-llm"
        )

    async with connected(
        server, mode="auto", sampling_callback=answer
    ) as client:  # 2026-07-28: one question per round
        recalled = await call(client, "recall", {"query": "billing invoices"})
        thanked = await call(client, "recall", {"query": "thanks for the help with invoices"})
    assert purposes == ["gate", "sufficiency", "gate"]
    assert recalled["gated"] is False and len(recalled["memories"]) == 1
    assert thanked["gated"] is True and thanked["gate_reason"].startswith(
        "the LLM judged no memory is needed"
    )


async def test_many_llm_questions_or_useless_answers_never_exhaust_the_client(tmp_path):
    settings = settings_for(
        tmp_path / "db", gate="llm", max_iterations=5, llm_reranker={"enabled": True}, min_fact_score=0.0
    )
    server = server_with(settings)
    await remember_as(server, "a", "Billing invoices live in Postgres")
    calls = []

    async def unhelpful(context, params):
        calls.append(1)
        if len(calls) % 2:
            return CreateMessageResult(role="assistant", content=TextContent(type="text", text=""), model="m")
        text = json.dumps(
            {
                "sufficient": False,
                "confidence": 0.0,
                "sub_queries": [f"angle {len(calls)}"],
                "needs_memory": True,
            }
        )
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=text), model="m")

    async with connected(server, mode="auto", sampling_callback=unhelpful) as client:
        result = await call(client, "recall", {"query": "billing invoices"})
    assert len(result["memories"]) == 1
    assert len(calls) <= 8  # the server stops asking before the client's own round limit


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_llm_passes_ask_the_client_each_in_turn_and_the_retried_call_keeps_their_answers(
    tmp_path, mode
):
    # "auto" is the 2026-07-28 input-required flow: one question per round, the call retried (with a
    # new retrieval id) and the recorded answers replayed, so each pass's question must stay the same.
    settings = settings_for(
        tmp_path / "db", llm_passes=["context_selection", "fact_selection", "cleanup"], min_fact_score=0.0
    )
    server = server_with(settings)
    pool = await remember_as(server, "a", "postgres pool size is 20")
    await remember_as(server, "a", "postgres runs on port 5432")
    asked = []

    async def answer(context, params):
        prompt = params.messages[0].content.text
        if "Candidate memories" in prompt:
            asked.append("context_selection")
            text = json.dumps({"drop": [], "reason": "all useful"})
        elif "should be trimmed" in prompt:
            asked.append("fact_selection")
            rows = [line for line in prompt.splitlines() if line.startswith("[")]
            text = json.dumps({"drop": [int(row[1]) for row in rows if "5432" in prompt.split(row)[1][:60]]})
        else:
            asked.append("cleanup")
            text = json.dumps({"context": "The pool holds 20 connections [1]."})
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=text), model="client-llm"
        )

    # Retried, the questions stay the same with a time zone too (the preamble that names it is not asked).
    arguments = {"query": "postgres pool and port"} | (
        {"time_zone": "Europe/Paris"} if mode == "auto" else {}
    )
    async with connected(server, mode=mode, sampling_callback=answer) as client:
        result = await call(client, "recall", arguments)
    assert asked == ["context_selection", "fact_selection", "cleanup"]
    assert [m["id"] for m in result["memories"]] == [pool["id"]]
    assert "(client-llm) from memories [1]" in result["context"]
    assert ("Dates are in Europe/Paris." in result["context"]) == (mode == "auto")
    assert result["context"].endswith("> The pool holds 20 connections [1].\n")


PUPPY = "We adopted a rescue puppy"
WALKS = "Walks happen every morning before work"
TRICKS = "She already knows sit and stay"
REPORT = "The quarterly report is due Friday"
ROUTINE = "pet care routine"  # no word of it in any memory: the full-text leg finds nothing


@pytest.mark.slow
async def test_a_turn_that_says_little_alone_is_found_through_its_context_in_its_episode(tmp_path):
    vectors = {
        PUPPY: (1.0, 0.6, 0.0),
        WALKS: (0.1, 0.0, 0.995),  # alone, nearly unrelated to the routine asked about
        TRICKS: (0.6, 1.0, 0.0),
        REPORT: (0.3, 0.3, 0.906),
        ROUTINE: (1.0, 1.0, 0.0),
    }
    server = server_with(settings_for(tmp_path / "db"), embedder=TableEmbedder(vectors, name="table-model"))
    for minute, text in enumerate((PUPPY, WALKS, TRICKS)):
        await remember_as(server, "a", text, episode_id="new-dog", occurred_at=f"2026-01-01T10:0{minute}:00Z")
    report = await remember_as(server, "a", REPORT)
    async with connected(server) as client:
        result = await call(client, "recall", {"query": ROUTINE, "top_k": 4})
        explained = await call(client, "explain_ranking", {"retrieval_id": result["retrieval_id"]})
    unit = {text: np.asarray(v) / np.linalg.norm(v) for text, v in vectors.items()}
    query = unit[ROUTINE]
    together = unit[PUPPY] + unit[WALKS] + unit[TRICKS]
    context = float(together @ query / np.linalg.norm(together))  # 0.89: its neighbours are on topic
    cosine = float(unit[WALKS] @ query)  # 0.07
    walks = next(c for c in explained["candidates"] if c["preview"] == WALKS)
    assert walks["scores"]["vector"] == pytest.approx(cosine, abs=1e-4)
    assert walks["scores"]["context"] == pytest.approx(context, abs=1e-4)
    # w = 2/3, c = 0.5, no word matched: the memory, its context and its words weigh a third each
    assert walks["scores"]["fused"] == pytest.approx((cosine + context) / 3, abs=1e-4)
    fused = next(e for e in explained["stages"][1]["events"] if e["event"] == "CandidatesFused")
    assert fused["context_share"] == 0.5 and fused["vector_weight"] == pytest.approx(2 / 3)
    # Alone it would be filler under the relevance floor (2/3 x 0.07 = 0.05); in context it ranks above a
    # memory whose own wording is closer to the question but whose episode says nothing of it.
    scores = {m["id"]: m["score"] for m in result["memories"]}
    assert walks["scores"]["relevance"] > 0.15 > 2 / 3 * cosine
    assert scores[walks["id"]] > scores[report["id"]]
