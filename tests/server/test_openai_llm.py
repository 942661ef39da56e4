"""The LLM stages on an OpenAI-compatible chat endpoint (a local stand-in), through an MCP client that
offers no sampling: the gate and iterative retrieval ask the endpoint; when it fails, the deterministic
path runs and the trace says why."""

import json

import pytest

from tests.helpers import call, connected, server_with, settings_for
from tests.openai_standin import chat_standin

pytestmark = pytest.mark.anyio


def answers(system: str, prompt: str) -> str:
    if "needs the agent's long-term memory" in system:
        return json.dumps({"needs_memory": "thanks" not in prompt, "confidence": 0.95, "reason": "asked"})
    return json.dumps({"sufficient": True, "confidence": 0.9, "sub_queries": []})


async def test_the_gate_and_iteration_ask_the_configured_endpoint_when_the_client_cannot_sample(tmp_path):
    with chat_standin(api_key="ollama-key") as endpoint:
        endpoint.answer = answers
        settings = settings_for(
            tmp_path / "db",
            gate="llm",
            max_iterations=2,
            llm="openai",
            openai_base_url=endpoint.url,
            openai_model="llama3.2",
            openai_api_key="ollama-key",
        )
        async with connected(server_with(settings)) as client:
            stored = await call(client, "remember", {"content": "Billing invoices live in Postgres"})
            recalled = await call(client, "recall", {"query": "where do billing invoices live"})
            thanked = await call(client, "recall", {"query": "thanks for the help with invoices"})
            explained = await call(client, "explain_ranking", {"retrieval_id": recalled["retrieval_id"]})
    assert [m["id"] for m in recalled["memories"]] == [stored["id"]]
    assert thanked["gated"] is True and thanked["gate_reason"].startswith(
        "the LLM judged no memory is needed"
    )
    asked = [request["body"]["messages"][0]["content"] for request in endpoint.requests]
    assert len(asked) == 3 and "needs the agent's long-term memory" in asked[0]
    assert {request["body"]["model"] for request in endpoint.requests} == {"llama3.2"}
    gate = next(stage for stage in explained["stages"] if stage["stage"] == "gate")
    assert [(e["event"], e["method"]) for e in gate["events"]] == [("GateDecided", "llm")]


async def test_an_endpoint_that_fails_leaves_the_deterministic_path_and_says_why(tmp_path):
    with chat_standin() as endpoint:
        endpoint.fail_with = 500
        settings = settings_for(
            tmp_path / "db", gate="llm", llm="openai", openai_base_url=endpoint.url, openai_model="qwen2.5"
        )
        async with connected(server_with(settings)) as client:
            stored = await call(client, "remember", {"content": "Billing invoices live in Postgres"})
            recalled = await call(client, "recall", {"query": "where do billing invoices live"})
            explained = await call(client, "explain_ranking", {"retrieval_id": recalled["retrieval_id"]})
    assert endpoint.requests and [m["id"] for m in recalled["memories"]] == [stored["id"]]
    gate = next(stage for stage in explained["stages"] if stage["stage"] == "gate")
    assert "HTTP 500" in json.dumps(gate["events"])


async def test_an_agents_own_llm_reranker_runs_on_the_endpoint_and_its_cost_is_priced(tmp_path):
    def rerank(system: str, prompt: str) -> str:
        rows = [line for line in prompt.splitlines() if line.startswith("[")]
        return json.dumps(
            {"scores": [{"index": i, "score": 0.9 if "5432" in row else 0.2} for i, row in enumerate(rows)]}
        )

    with chat_standin() as endpoint:
        endpoint.answer = rerank
        settings = settings_for(
            tmp_path / "db",
            llm="openai",
            openai_base_url=endpoint.url,
            openai_model="llama3.2",
            llm_reranker_by_agent={"reviewer": {"enabled": True, "model": "llama3.2", "topK": 1}},
            llm_prices={"llama3.2": {"input": 1.0, "output": 2.0}},
            min_fact_score=0.0,
        )
        server = server_with(settings)
        async with connected(server, agent="reviewer") as reviewer:
            await call(reviewer, "remember", {"content": "postgres pool size is 20"})
            port = await call(reviewer, "remember", {"content": "postgres runs on port 5432"})
            mine = await call(reviewer, "recall", {"query": "postgres"})
            explained = await call(reviewer, "explain_ranking", {"retrieval_id": mine["retrieval_id"]})
        asked = len(endpoint.requests)
        async with connected(server, agent="writer") as writer:
            theirs = await call(writer, "recall", {"query": "postgres"})
    # topK 1 kept from what the model scored: the port memory, though BM25 put the two level.
    assert [m["id"] for m in mine["memories"] if m["source"] == "direct"] == [port["id"]]
    rerank_events = next(s for s in explained["stages"] if s["stage"] == "rerank")["events"]
    llm = rerank_events[0]
    assert (llm["event"], llm["success"], llm["model"]) == ("LLMReranked", True, "llama3.2")
    # The stand-in reports 31 prompt and 9 completion tokens: (31 x 1.0 + 9 x 2.0) / 1,000,000 USD.
    assert llm["cost"] == pytest.approx(0.000049)
    assert len(endpoint.requests) == asked and len(theirs["memories"]) == 2  # the writer's: no LLM rerank
