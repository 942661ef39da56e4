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
