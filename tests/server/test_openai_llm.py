"""The LLM stages on an OpenAI-compatible chat endpoint (a local stand-in), through an MCP client that
offers no sampling: the gate and iterative retrieval ask the endpoint; when it fails, the deterministic
path runs and the trace says why."""

import json

import pytest

from tests.helpers import call, connected, server_with, settings_for
from tests.openai_standin import chat_standin

pytestmark = pytest.mark.anyio


def on_endpoint(tmp_path, endpoint, **settings):
    """Settings for a store in ``tmp_path`` whose language model is llama3.2 on the stand-in ``endpoint``."""
    return settings_for(
        tmp_path / "db", llm="openai", openai_base_url=endpoint.url, openai_model="llama3.2", **settings
    )


def answers(system: str, prompt: str) -> str:
    if "needs the agent's long-term memory" in system:
        return json.dumps({"needs_memory": "thanks" not in prompt, "confidence": 0.95, "reason": "asked"})
    return json.dumps({"sufficient": True, "confidence": 0.9, "sub_queries": []})


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
async def test_an_agents_own_llm_reranker_runs_on_the_endpoint_and_its_cost_is_priced(tmp_path):
    def rerank(system: str, prompt: str) -> str:
        rows = [line for line in prompt.splitlines() if line.startswith("[")]
        return json.dumps(
            {"scores": [{"index": i, "score": 0.9 if "5432" in row else 0.2} for i, row in enumerate(rows)]}
        )

    with chat_standin() as endpoint:
        endpoint.answer = rerank
        settings = on_endpoint(
            tmp_path,
            endpoint,
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


@pytest.mark.slow
async def test_the_llm_passes_at_assembly_run_on_the_endpoint_and_explain_shows_each(tmp_path):
    def passes(system: str, prompt: str) -> str:
        if "choose which stored memories" in system and "Candidate memories" in prompt:
            shown = json.loads(prompt.split("as JSON:\n", 1)[1].split("\nWhich memories", 1)[0])
            return json.dumps(
                {"drop": [e["id"] for e in shown if "lunch" in e["text"]], "reason": "off topic"}
            )
        if "choose which stored memories" in system:  # fact selection: trim the entry about the port
            entries = [line for line in prompt.splitlines() if line.startswith("[")]
            return json.dumps({"drop": [int(e[1]) for e in entries if "5432" in prompt.split(e, 1)[1][:80]]})
        return json.dumps({"context": "Invoices live in Postgres [1]."})

    with chat_standin() as endpoint:
        endpoint.answer = passes
        settings = on_endpoint(
            tmp_path,
            endpoint,
            llm_passes=["context_selection", "fact_selection", "cleanup"],
            min_fact_score=0.0,
            min_share_of_best=0.0,  # the port memory scores far below the invoices one: no filler cut here
        )
        async with connected(server_with(settings)) as client:
            invoices = await call(client, "remember", {"content": "Billing invoices live in Postgres"})
            port = await call(client, "remember", {"content": "Billing Postgres listens on port 5432"})
            lunch = await call(client, "remember", {"content": "Billing team lunch is on fridays"})
            recalled = await call(client, "recall", {"query": "where do billing invoices live in postgres"})
            explained = await call(client, "explain_ranking", {"retrieval_id": recalled["retrieval_id"]})
    assert [m["id"] for m in recalled["memories"]] == [invoices["id"]]
    assert (
        f"rewritten for this task by a language model (llama3.2) from memories [1] {invoices['id']}. "
        in recalled["context"]
    )
    assert recalled["context"].endswith("> Invoices live in Postgres [1].\n")
    stages = {stage["stage"]: stage["events"] for stage in explained["stages"]}
    assert list(stages)[-4:] == ["context_selection", "assembly", "fact_selection", "cleanup"]
    assert [(e["applied"], e["dropped"]) for e in stages["context_selection"]] == [(True, [lunch["id"]])]
    # fact selection assembled the context again: its event, then the pass's
    assert [e["event"] for e in stages["fact_selection"]] == ["ContextAssembled", "LLMPassRan"]
    assert stages["fact_selection"][0]["included"] == 1
    assert (stages["fact_selection"][1]["applied"], stages["fact_selection"][1]["dropped"]) == (
        True,
        [port["id"]],
    )
    assert [e["applied"] for e in stages["cleanup"]] == [True]
    assert stages["cleanup"][0]["prompt_tokens"] == 31
    by_id = {c["id"]: c for c in explained["candidates"]}
    assert by_id[lunch["id"]]["reason"] == "left out by the language model's context selection: off topic"
    assert by_id[port["id"]]["reason"] == "trimmed by the language model's fact selection"


@pytest.mark.slow
async def test_the_llm_passes_keep_the_deterministic_context_when_the_endpoint_fails(tmp_path):
    with chat_standin() as endpoint:
        endpoint.fail_with = 503
        settings = on_endpoint(
            tmp_path,
            endpoint,
            llm_passes=["context_selection", "cleanup"],
        )
        async with connected(server_with(settings)) as client:
            stored = await call(client, "remember", {"content": "Billing invoices live in Postgres"})
            recalled = await call(client, "recall", {"query": "where do billing invoices live"})
            explained = await call(client, "explain_ranking", {"retrieval_id": recalled["retrieval_id"]})
    assert [m["id"] for m in recalled["memories"]] == [stored["id"]]
    assert (
        recalled["context"].startswith("Relevant memories (retrieval ")
        and "> Billing invoices" in recalled["context"]
    )
    events = [
        e for s in explained["stages"] if s["stage"] in ("context_selection", "cleanup") for e in s["events"]
    ]
    assert [e["applied"] for e in events] == [False, False]
    assert all("HTTP 503" in e["reason"] for e in events)


@pytest.mark.slow
async def test_when_context_selection_leaves_nothing_the_agent_reads_why(tmp_path):
    def drop_all(system: str, prompt: str) -> str:
        shown = json.loads(prompt.split("as JSON:\n", 1)[1].split("\nWhich memories", 1)[0])
        return json.dumps({"drop": [entry["id"] for entry in shown], "reason": "none of these"})

    with chat_standin() as endpoint:
        endpoint.answer = drop_all
        settings = on_endpoint(
            tmp_path,
            endpoint,
            llm_passes=["context_selection"],
        )
        async with connected(server_with(settings)) as client:
            await call(client, "remember", {"content": "Billing invoices live in Postgres"})
            result = await client.call_tool("recall", {"query": "where do billing invoices live"})
    text = result.content[0].text
    assert text.startswith(
        "Nothing left in the context: the language model's context or fact selection left out all 1"
    )
    assert result.structured_content["memories"] == []
