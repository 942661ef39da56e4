"""The whole flow through an in-process MCP client: remember -> recall -> report_outcome -> recall shows
the reordering -> explain_ranking shows why."""

import json
import math

import pytest

from tests.fakes import ScriptedReranker
from tests.helpers import ALL_STAGES, TOOL_NAMES, call, call_error, connected, server_with

pytestmark = pytest.mark.anyio

POOL = "The postgres connection pool size is 20"
PORT = "Postgres listens on port 5432 in staging"
CAT = "The office cat is called Miso"


@pytest.mark.slow
async def test_feedback_reorders_recall_and_explain_shows_why(settings):
    reranker = ScriptedReranker({POOL: 0.80, PORT: 0.75, CAT: 0.05})
    async with connected(server_with(settings, reranker=reranker), agent="claude-code") as client:
        ids = {text: (await call(client, "remember", {"content": text}))["id"] for text in (POOL, PORT, CAT)}

        first = await call(client, "recall", {"query": "postgres settings", "top_k": 1})
        assert [m["id"] for m in first["memories"]] == [ids[POOL]]
        assert POOL in first["context"]

        report = await call(
            client,
            "report_outcome",
            {"outcome": "failure", "misleading_ids": [ids[POOL]], "note": "pool size was stale"},
        )
        assert report["status"] == "applied"
        assert report["updated"] == [
            {"id": ids[POOL], "role": "misleading", "share": 1.0, "weight_before": 1.0, "weight_after": 0.85}
        ]

        second = await call(client, "recall", {"query": "postgres settings", "top_k": 1})
        assert [m["id"] for m in second["memories"]] == [ids[PORT]]
        assert second["memories"][0]["score"] == pytest.approx(0.75)

        explained = await call(client, "explain_ranking", {"retrieval_id": second["retrieval_id"]})
        by_id = {c["id"]: c for c in explained["candidates"]}
        demoted, promoted = by_id[ids[POOL]], by_id[ids[PORT]]
        assert (demoted["unweighted_rank"], demoted["weighted_rank"], demoted["rank_delta"]) == (0, 1, -1)
        assert (promoted["unweighted_rank"], promoted["weighted_rank"], promoted["rank_delta"]) == (1, 0, 1)
        assert demoted["scores"]["rerank"] == 0.80
        # Named misleading, the same query: the named step (alpha 1.0) takes it to lo for this task,
        # 0.80 x 0.25 = 0.20; its global weight took the spec's step, 0.85.
        assert demoted["scores"]["feedback_weight"] == pytest.approx(0.25)
        assert demoted["scores"]["global_weight"] == pytest.approx(0.85)
        assert demoted["scores"]["final"] == pytest.approx(0.20)
        [move] = demoted["feedback"]["moves"]
        assert (move["role"], move["share"], move["closeness"]) == ("misleading", 1.0, 1.0)
        assert demoted["in_context"] is False and demoted["reason"] == "ranked below the top_k=1 cut"
        assert promoted["reason"] == "in the context at position [1]"
        assert [s["stage"] for s in explained["stages"]] == ALL_STAGES

        assert all(s["elapsed_ms"] >= 0 for s in explained["stages"])
        assert explained["backends"]["reranker"] == "scripted"

        # What the agent reads: a line per memory with the scores that placed it and the reports that moved
        # it, not the whole structure (which the structured content carries).
        result = await client.call_tool("explain_ranking", {"retrieval_id": second["retrieval_id"]})
        text = result.content[0].text
        assert text.startswith(f"Ranking of retrieval {second['retrieval_id']} for 'postgres settings'")
        lines = text.splitlines()
        assert lines[1].startswith("The relevance floor is 0.02, on the scale of each match's")
        assert lines[2].startswith(
            f"[1] {ids[PORT]} · final 0.750 = relevance 0.750 x weight 1.000 (feedback moved it up 1) · "
            "matches the query at "
        )
        assert lines[3].startswith("Left out (2):")
        assert lines[4].startswith(
            f"[2] {ids[POOL]} · final 0.200 = relevance 0.800 x weight 0.250 (feedback moved it down 1) · "
            "matches the query at "
        )
        assert "ranked below the top_k=1 cut" in lines[4]
        assert (
            lines[5].startswith("    reports: ") and "misleading (closeness 1.00): 1.000 -> 0.250" in lines[5]
        )
        assert lines[-1].startswith("Stages (ms): gate ")
        assert len(text) < len(json.dumps(result.structured_content)) / 3

        # Another task that finds the same memories: the report was about "postgres settings", not this.
        other = await call(client, "recall", {"query": "pool size", "top_k": 1})
        assert [m["id"] for m in other["memories"]] == [ids[POOL]]
        assert other["memories"][0]["score"] == pytest.approx(0.80)


async def test_a_report_naming_unknown_or_contradictory_ids_is_refused_and_moves_nothing(settings):
    async with connected(server_with(settings), agent="claude-code") as client:
        pool = (await call(client, "remember", {"content": POOL}))["id"]
        theirs = (await call(client, "remember", {"content": CAT, "project_id": "elsewhere"}))["id"]
        await call(client, "recall", {"query": "postgres pool"})
        unknown = await call_error(
            client, "report_outcome", {"outcome": "success", "helpful_ids": [pool, "mem_nope", theirs]}
        )
        assert f"no memory mem_nope, {theirs} in org 'default' / project 'default'" in unknown
        assert "nothing was reported" in unknown and "recall results" in unknown
        both = await call_error(
            client, "report_outcome", {"outcome": "success", "helpful_ids": [pool], "misleading_ids": [pool]}
        )
        assert (
            f"report_outcome: helpful_ids and misleading_ids both name {pool}: " in both
        )  # named, not `arguments`
        shown = json.loads(
            (await client.read_resource(f"memoria://memory/{pool}")).contents[0].text  # type: ignore[union-attr]
        )
        assert shown["weight"] == 1.0 and shown["weight_history"] == []
        # A report naming it properly then applies, once.
        applied = await call(client, "report_outcome", {"outcome": "success", "helpful_ids": [pool]})
        again = await call(client, "report_outcome", {"outcome": "success", "helpful_ids": [pool]})
        assert (applied["status"], again["status"]) == ("applied", "unchanged")


async def test_recall_returns_only_what_clears_the_relevance_floor_and_says_so(settings):
    async with connected(server_with(settings)) as client:
        ids = {text: (await call(client, "remember", {"content": text}))["id"] for text in (POOL, PORT, CAT)}
        found = await call(client, "recall", {"query": "postgres connection pool size", "top_k": 10})
        # The cat matches nothing of the query: below the floor (0.10 offline). The port matches only
        # "postgres": above the floor, but under a quarter of the pool's score, filler beside it.
        assert [(m["id"], m["rank"], m["position"], m["source"]) for m in found["memories"]] == [
            (ids[POOL], 1, 1, "direct")
        ]
        assert found["note"] == (
            "2 memories matched the query above the relevance floor (0.1), fewer than top_k=10; 1 of the 2 "
            "matched the query under 0.25 of what the best match does and was left out as filler (the "
            "server's MEMORIA_MIN_SHARE_OF_BEST)"
        )
        why = await call(client, "explain_ranking", {"retrieval_id": found["retrieval_id"]})
        [port] = [c for c in why["candidates"] if c["id"] == ids[PORT]]
        assert port["reason"].startswith("far below the best match: matches the query at ")
        assert port["reason"].endswith(f", the best match's ({ids[POOL]}) (MEMORIA_MIN_SHARE_OF_BEST)")
        [assembled] = [e for s in why["stages"] if s["stage"] == "assembly" for e in s["events"]]
        assert (assembled["filler"], assembled["share_of_best"]) == (1, 0.25)
        both = await call(client, "recall", {"query": "postgres", "top_k": 10})
        assert [(m["rank"], m["position"]) for m in both["memories"]] == [(1, 1), (2, 2)]
        nothing = await call(client, "recall", {"query": "kubernetes ingress certificates"})
        assert (nothing["memories"], nothing["context"]) == ([], "")
        assert (
            nothing["note"]
            == "nothing relevant was found: no memory matched the query above the relevance floor (0.1)"
        )
        explained = await call(client, "explain_ranking", {"retrieval_id": nothing["retrieval_id"]})
        [floor] = [
            e
            for s in explained["stages"]
            if s["stage"] == "min_score"
            for e in s["events"]
            if e["event"] == "FloorApplied"
        ]
        assert floor["floor"] == 0.1 and floor["dropped"] >= 1


async def test_offline_backend_flow_end_to_end(settings):
    async with connected(server_with(settings)) as client:
        for text in (POOL, PORT, CAT):
            await call(client, "remember", {"content": text, "tags": ["db"] if "ostgres" in text else []})
        duplicate = await call(client, "remember", {"content": POOL})
        assert duplicate["status"] == "duplicate" and duplicate["duplicate_of"] == duplicate["id"]

        recalled = await call(client, "recall", {"query": "what is the postgres pool size?", "top_k": 2})
        assert recalled["memories"][0]["content"] == POOL
        assert len(recalled["context"]) <= 16_000

        report = await call(client, "report_outcome", {"outcome": "success"})
        # The best match takes a full step towards 1.75 at alpha 0.2; the second ("postgres" alone, read
        # as common as in a store of 20) its share of the second place, 1 / log2(3).
        second = 1 + 0.2 * (1 / math.log2(3)) * 0.75
        assert sorted(u["weight_after"] for u in report["updated"]) == pytest.approx([second, 1.15], abs=1e-6)

        explained = await call(client, "explain_ranking", {"retrieval_id": recalled["retrieval_id"]})
        assert explained["backends"]["embedder"].startswith("hashed-v1:384")
        assert explained["backends"]["reranker"] == "none"
        top = explained["candidates"][0]
        assert top["scores"]["vector"] > 0 and top["scores"]["fulltext"] > 0
        assert top["found_by"] == ["vector", "fulltext"]


async def test_tools_are_listed_with_their_contract(settings):
    async with connected(server_with(settings)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == TOOL_NAMES
    assert tools["forget"].annotations.destructive_hint is True
    assert (
        tools["drift"].annotations.read_only_hint is True
        and tools["lineage"].annotations.read_only_hint is True
    )
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["explain_ranking"].annotations.read_only_hint is True
    assert tools["report_outcome"].annotations.idempotent_hint is True
    assert tools["remember"].annotations.read_only_hint is False
    remember_schema = tools["remember"].input_schema
    assert remember_schema["required"] == ["content"]
    assert remember_schema["properties"]["kind"]["enum"] == ["fact", "episode", "artifact"]
    assert remember_schema["properties"]["protection_tier"]["default"] == "standard"
    recall_schema = tools["recall"].input_schema["properties"]
    assert recall_schema["char_budget"]["default"] == 16000
    # An optional value is its type (left out when unset), with no null default and no generated title.
    assert recall_schema["top_k"]["type"] == "integer" and "default" not in recall_schema["top_k"]
    assert "Default: MEMORIA_TOP_K_FACTS (10)" in recall_schema["top_k"]["description"]
    assert not any("title" in field for field in recall_schema.values())

    assert {"org_id", "project_id"} <= set(recall_schema)
    assert set(tools["recall"].output_schema["properties"]) >= {"retrieval_id", "context", "memories"}
    # Output schemas say the result's fields and their types, briefly: they are loaded in every session.
    assert tools["recall"].output_schema["properties"]["memories"] == {"type": "array"}
    score = tools["report_outcome"].input_schema["properties"]["score"]
    assert (score["minimum"], score["maximum"], score["type"]) == (0.0, 1.0, "number")
    batch_item = tools["remember_many"].input_schema["properties"]["items"]["items"]
    assert batch_item["required"] == ["content"] and "protection_tier" in batch_item["properties"]
    assert all("$ref" not in json.dumps(tool.input_schema) for tool in tools.values())


@pytest.mark.slow
async def test_agent_defaults_to_the_client_name_and_session_to_the_connection(settings):
    server = server_with(settings)
    async with connected(server, agent="cursor") as client:
        one = await call(client, "remember", {"content": "first fact"})
        two = await call(client, "remember", {"content": "second fact"})
        recalled = await call(client, "recall", {"query": "fact"})
    async with connected(server, agent="cursor") as other_client:
        three = await call(other_client, "remember", {"content": "third fact"})
    assert one["agent_id"] == two["agent_id"] == "cursor"
    assert one["session_id"] == two["session_id"] == recalled["session_id"]
    assert three["session_id"] != one["session_id"]


@pytest.mark.slow
async def test_handshake_era_clients_get_one_session_per_connection(settings):
    server = server_with(settings)
    async with connected(server, agent="claude-desktop", mode="legacy") as client:
        one = await call(client, "remember", {"content": "legacy one"})
        two = await call(client, "recall", {"query": "legacy"})
    async with connected(server, agent="claude-desktop", mode="legacy") as client:
        three = await call(client, "remember", {"content": "legacy two"})
    assert one["agent_id"] == "claude-desktop"
    assert one["session_id"] == two["session_id"] != three["session_id"]


@pytest.mark.parametrize("mode", [None, "legacy"], ids=["2026-era", "handshake-era"])
async def test_a_report_after_a_remember_that_ended_the_reported_session_says_how_to_change_that_one(
    settings, mode
):
    # A trial reported, remembered something, then reported again to add an id: the remember began a new
    # session, and the second report went to it, recalling nothing. The report says how to amend instead.
    options = {"mode": mode} if mode else {}
    async with connected(server_with(settings), agent="cursor", **options) as client:
        stored = await call(client, "remember", {"content": "Deploys go out with the blue-green script"})
        first = await call(client, "recall", {"query": "how do deploys go out"})
        await call(client, "report_outcome", {"outcome": "success"})
        await call(client, "remember", {"content": "The blue-green script lives in ops/deploy.sh"})
        amend = await call(client, "report_outcome", {"outcome": "success", "helpful_ids": [stored["id"]]})
        amended = await call(
            client,
            "report_outcome",
            {"outcome": "success", "helpful_ids": [stored["id"]], "session_id": first["session_id"]},
        )
        # The session before is now the empty one the amend went to: no report of a recall to change there.
        await call(client, "remember", {"content": "Blue-green deploys keep the old fleet for 30 minutes"})
        later = await call(client, "report_outcome", {"outcome": "success"})
    assert "previous session" not in later["detail"]
    assert amend["session_id"] != first["session_id"]
    assert (
        f"This connection's previous session {first['session_id']} was reported before a remember or a "
        f"recall began this one: to change that report, report again with session_id={first['session_id']}"
    ) in amend["detail"]
    assert amended["status"] == "replaced" and "previous session" not in amended["detail"]


@pytest.mark.parametrize("mode", [None, "legacy"], ids=["2026-era", "handshake-era"])
async def test_a_reported_session_ends_and_the_connections_next_task_is_a_session_of_its_own(settings, mode):
    """A connection reports its default session: a report again still replaces that report, and the
    connection's next recall begins a new session, whose report does not replace the first task's."""
    options = {"mode": mode} if mode else {}
    async with connected(server_with(settings), agent="cursor", **options) as client:
        stored = await call(client, "remember", {"content": "Deploys go out with the blue-green script"})
        first = await call(client, "recall", {"query": "how do deploys go out"})
        report = await call(client, "report_outcome", {"outcome": "success", "helpful_ids": [stored["id"]]})
        # A look at the ranking between two reports stays in the session: the second still replaces.
        await call(client, "explain_ranking", {"retrieval_id": first["retrieval_id"]})
        again = await call(client, "report_outcome", {"outcome": "success", "helpful_ids": [stored["id"]]})
        second = await call(client, "recall", {"query": "blue-green deploy script"})
        # Named as the recall result gave it, the connection's own session ends all the same.
        next_report = await call(
            client, "report_outcome", {"outcome": "failure", "session_id": second["session_id"]}
        )
        third = await call(client, "recall", {"query": "deploy script"})
        await call(client, "recall", {"query": "deploy script", "session_id": "ses_other"})
        elsewhere = await call(client, "report_outcome", {"outcome": "success", "session_id": "ses_other"})
        fourth = await call(client, "recall", {"query": "deploys"})
    assert report["session_id"] == again["session_id"] == first["session_id"] == stored["session_id"]
    assert (report["status"], again["status"]) == ("applied", "unchanged")
    assert second["session_id"] != first["session_id"] == report["session_id"]
    assert (next_report["session_id"], next_report["status"]) == (second["session_id"], "applied")
    assert third["session_id"] not in (first["session_id"], second["session_id"])
    # Reporting another session leaves the connection's own going on.
    assert elsewhere["session_id"] == "ses_other" and fourth["session_id"] == third["session_id"]


async def test_scopes_isolate_memories(settings):
    async with connected(server_with(settings)) as client:
        await call(client, "remember", {"content": "acme secret roadmap", "org_id": "acme"})
        other = await call(client, "recall", {"query": "secret roadmap", "org_id": "globex"})
        own = await call(client, "recall", {"query": "secret roadmap", "org_id": "acme"})
    assert other["memories"] == [] and other["context"] == ""
    assert [m["content"] for m in own["memories"]] == ["acme secret roadmap"]


async def test_recalls_text_is_the_context_block_and_each_memory_is_sent_once(settings):
    async with connected(server_with(settings)) as client:
        stored = await call(
            client, "remember", {"content": "The staging database is reset every Sunday night"}
        )
        result = await client.call_tool("recall", {"query": "when is the staging database reset"})
        nothing = await client.call_tool("recall", {"query": "kubernetes ingress certificates rotation"})
        tagged = await client.call_tool(
            "recall", {"query": "when is the staging database reset", "tags": ["ops"]}
        )
    [text] = result.content
    structured = result.structured_content
    # What the agent reads: the block (with its ids in it), then why fewer than top_k came back.
    assert text.text == structured["context"].rstrip() + "\n\n" + structured["note"]
    assert structured["retrieval_id"] in text.text and stored["id"] in text.text
    assert text.text.count("reset every Sunday night") == 1  # not again as a JSON list of memories
    assert structured["memories"][0]["id"] == stored["id"]  # the list is in the structured content
    [empty] = nothing.content
    assert nothing.structured_content["memories"] == []
    assert empty.text.startswith("Nothing relevant was found (retrieval ret_")
    # Within a tag no memory carries, the agent reads that only that tag was searched, and how to widen.
    assert tagged.content[0].text == (
        f"Nothing relevant was found among the memories tagged `ops` (retrieval "
        f"{tagged.structured_content['retrieval_id']}): recall without `tags` to search them all."
    )


async def test_the_schemas_carry_the_limits_the_server_enforces(settings):
    tight = settings.model_copy(update={"max_content_chars": 500, "max_top_k": 7, "max_tags": 3})
    async with connected(server_with(tight)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        refused = await call_error(client, "recall", {"query": "x", "top_k": 8})
    remember = tools["remember"].input_schema["properties"]
    assert (remember["content"]["maxLength"], remember["tags"]["maxItems"]) == (500, 3)
    batch_item = tools["remember_many"].input_schema["properties"]["items"]["items"]["properties"]
    assert batch_item["content"]["maxLength"] == 500
    recall = tools["recall"].input_schema["properties"]
    assert (recall["top_k"]["minimum"], recall["top_k"]["maximum"]) == (1, 7)
    assert recall["query"]["maxLength"] == settings.max_query_chars
    assert "`top_k` must be between 1 and 7" in refused  # the schema's bound is the one enforced


async def test_the_tool_list_an_agent_loads_every_session_stays_within_12_kb(settings):
    async with connected(server_with(settings)) as client:
        listed = await client.list_tools()
    # As sent on the wire: the tools/list result, compact JSON.
    assert len(listed.model_dump_json(by_alias=True, exclude_none=True)) <= 12_000
    for tool in listed.tools:
        # Each still says what it is for; no generated titles; output schemas list fields and types only.
        assert tool.description and len(tool.description) <= 400
        assert "title" not in tool.input_schema
        assert all(set(field) <= {"type"} for field in tool.output_schema["properties"].values())


async def test_what_an_agent_reads_of_a_remember_is_a_line_not_the_json(settings):
    # A new user's trial: each remember answered with ~650 characters of indented JSON, mostly nulls.
    async with connected(server_with(settings)) as client:
        first = await client.call_tool("remember", {"content": "The API server listens on port 8080"})
        fixed = await client.call_tool(
            "remember", {"content": "The API server listens on port 9090, not 8080", "tags": ["api"]}
        )
        batch = await client.call_tool(
            "remember_many",
            {"items": [{"content": "Deploys run at noon"}, {"content": "Deploys run at noon"}]},
        )
    old, new = first.structured_content["id"], fixed.structured_content["id"]
    assert first.content[0].text == f"stored {old} (fact, standard) in default/default"
    assert fixed.content[0].text == (
        f"stored {new} (fact, standard) in default/default\nrevised: {old}\ndecided by revision:explicit"
    )
    lines = batch.content[0].text.splitlines()
    assert lines[0] == "1 stored, 1 already stored, in default/default"  # said once (a trial: on every line)
    assert lines[1].startswith("1. stored mem_") and lines[2].startswith("2. already stored mem_")
    assert lines[1].endswith("(fact, standard)") and "default/default" not in "".join(lines[1:])


async def test_what_an_agent_reads_of_forget_report_outcome_and_lineage_is_lines_not_the_json(settings):
    # A new user's trial: these three answered with raw JSON while the other tools answer in words.
    async with connected(server_with(settings), agent="cursor") as client:
        old = await call(client, "remember", {"content": "The API server listens on port 8080"})
        new = await call(
            client, "remember", {"content": "The API server listens on port 9090", "replaces": old["id"]}
        )
        recalled = await call(client, "recall", {"query": "API server port"})
        assert [m["id"] for m in recalled["memories"]] == [new["id"]]
        report = await client.call_tool("report_outcome", {"outcome": "success", "helpful_ids": [new["id"]]})
        history = await client.call_tool("lineage", {"memory_id": old["id"]})
        dry = await client.call_tool("forget", {"query": "API server port", "mode": "purge"})
        done = await client.call_tool("forget", {"memory_id": new["id"]})
    session = report.structured_content["session_id"]
    lines = report.content[0].text.splitlines()
    assert lines[0].startswith(f"Session {session}: success (score 1), applied: 1 helpful memory moved ")
    assert lines[1:] == [
        "Global weights (the logged baseline; explain_ranking shows the weight a recall applies):",
        f"- {new['id']} (helpful, share 1): 1.000 -> 1.150",
    ]
    lines = history.content[0].text.splitlines()
    assert lines[0].startswith(f"Memory {old['id']} (superseded, cursor, ")
    assert lines[1].startswith(f"Stands in its place now: {new['id']} (active, cursor, ")
    assert lines[2] == "Replaced by, in order:" and "supersede" in lines[3] and "explicit" in lines[3]
    text = dry.content[0].text
    assert text.startswith("Dry run: 1 memory would be purged; nothing was changed.\n- ")
    assert "[relevance " in text and (
        "\ndry run: a purge erases for good, and 1 memory matches; check it, then call again with dry_run=false "
        "to purge it (or pass its memory_id); " in text
    )
    assert text.count("dry_run=false") == 1  # a trial read it twice
    assert done.content[0].text.splitlines()[:2] == [
        "1 memory retracted.",
        f"- {new['id']} (retracted, cursor, {new['created_at'][:10]}): 'The API server listens on port 9090'",
    ]
