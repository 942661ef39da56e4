"""The MCP resources through a real client: a memory by id, the scope's stats and the drift view, as JSON,
in the default scope or the one named in the query, with errors that say what to do."""

from __future__ import annotations

import json

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from tests.helpers import call, connected, server_with

pytestmark = pytest.mark.anyio


async def read_json(client, uri: str) -> dict:
    result = await client.read_resource(uri)
    assert len(result.contents) == 1 and result.contents[0].mime_type == "application/json"
    return json.loads(result.contents[0].text)


async def test_the_resources_and_their_templates_are_listed(settings):
    async with connected(server_with(settings)) as client:
        listed = {str(resource.uri) for resource in (await client.list_resources()).resources}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert listed == {"memoria://memories", "memoria://stats", "memoria://drift"}
    assert templates == {
        "memoria://memory/{memory_id}{?org_id,project_id}",
        "memoria://memories{?org_id,project_id,agent_id,tag,kind,episode_id,since,until,time_zone,status,cursor,limit}",
        "memoria://stats{?org_id,project_id}",
        "memoria://drift{?org_id,project_id,include_resolved,limit}",
    }


@pytest.mark.slow
async def test_a_memory_by_id_is_shown_in_full_with_its_weight_history_and_lineage(settings):
    async with connected(server_with(settings)) as client:
        stored = await call(
            client, "remember", {"content": "The API gateway retries idempotent calls twice", "tags": ["api"]}
        )
        await call(client, "recall", {"query": "gateway retries"})
        await call(client, "report_outcome", {"outcome": "success"})
        shown = await read_json(client, f"memoria://memory/{stored['id']}")
    assert shown["content"] == "The API gateway retries idempotent calls twice"
    assert (shown["id"], shown["tags"], shown["status"], shown["agent_id"]) == (
        stored["id"],
        ["api"],
        "active",
        "test-agent",
    )
    # One success report: one step of the EMA from 1.0, as report_outcome said.
    [step] = shown["weight_history"]
    assert step["weight_before"] == 1.0 and step["weight_after"] == shown["weight"] > 1.0
    assert shown["lineage"]["current"]["id"] == stored["id"]


@pytest.mark.slow
async def test_a_memory_in_another_scope_is_read_by_naming_the_scope(settings):
    async with connected(server_with(settings)) as client:
        stored = await call(
            client,
            "remember",
            {"content": "Globex bills monthly", "org_id": "globex", "project_id": "billing"},
        )
        with pytest.raises(MCPError, match=r"no memory .* in org 'default' / project 'default'") as missing:
            await client.read_resource(f"memoria://memory/{stored['id']}")
        assert missing.value.error.code == INVALID_PARAMS  # MCP's "resource not found", not an internal error
        shown = await read_json(client, f"memoria://memory/{stored['id']}?org_id=globex&project_id=billing")
    assert shown["content"] == "Globex bills monthly"


async def test_memories_are_listed_newest_first_page_by_page_and_none_twice_while_writes_arrive(settings):
    async with connected(server_with(settings)) as client:
        written = [
            (await call(client, "remember", {"content": f"Release note number {n}"}))["id"] for n in range(5)
        ]
        await call(client, "remember", {"content": "Elsewhere", "project_id": "other"})  # another scope
        first = await read_json(client, "memoria://memories?limit=2")
        # Written while someone pages: it comes before the first page, never on a later one.
        late = (await call(client, "remember", {"content": "Written while paging"}))["id"]
        second = await read_json(client, f"memoria://memories?limit=2&cursor={first['next_cursor']}")
        third = await read_json(client, f"memoria://memories?limit=2&cursor={second['next_cursor']}")
        again = await read_json(client, "memoria://memories?limit=10")
        with pytest.raises(MCPError, match="not one this server gave"):
            await client.read_resource("memoria://memories?cursor=garbage")
    pages = [[m["id"] for m in page["memories"]] for page in (first, second, third)]
    assert pages == [written[4:2:-1], written[2:0:-1], written[0:1]]
    assert third["next_cursor"] is None
    assert [m["id"] for m in again["memories"]] == [late, *reversed(written)]


@pytest.mark.slow
async def test_stats_count_the_scope_by_status_kind_and_tier(settings):
    async with connected(server_with(settings)) as client:
        await call(client, "remember", {"content": "Deploys happen on Tuesdays"})
        await call(client, "remember", {"content": "The schema lives in db/schema.sql", "kind": "artifact"})
        doomed = await call(
            client, "remember", {"content": "A temporary note", "protection_tier": "ephemeral"}
        )
        await call(client, "forget", {"memory_id": doomed["id"]})
        await call(client, "remember", {"content": "Elsewhere", "org_id": "other"})
        # Read by every project of the org, as its listing shows (a trial: the listing showed it, stats not).
        await call(client, "remember", {"content": "Org-wide: rotate keys monthly", "visibility": "org"})
        stats = await read_json(client, "memoria://stats")
        other = await read_json(client, "memoria://stats?org_id=other")
        listed = await read_json(client, "memoria://memories")
    assert (stats["org_id"], stats["project_id"]) == ("default", "default")
    assert stats["memories"] == 3 and stats["active"] == 2 and stats["org_wide"] == 1
    assert len(listed["memories"]) == stats["active"] + stats["org_wide"]
    assert stats["by_status"] == {"active": 2, "retracted": 1}
    assert stats["by_kind"] == {"fact": 1, "artifact": 1}
    assert stats["by_tier"] == {"standard": 2}
    assert stats["agents"] == 1 and stats["open_contradictions"] == 0
    assert stats["backends"]["embedder"].startswith("hashed")
    assert other["memories"] == 1 and other["org_wide"] == 0


@pytest.mark.slow
async def test_drift_lists_what_superseded_what(settings):
    async with connected(server_with(settings)) as client:
        old = await call(client, "remember", {"content": "We deploy the web app with Heroku"})
        new = await call(client, "remember", {"content": "We switched from Heroku to Fly.io for the web app"})
        drift = await read_json(client, "memoria://drift")
    [change] = [c for c in drift["changes"] if c["replaced"] and c["replaced"]["id"] == old["id"]]
    assert change["by"]["id"] == new["id"] and change["event"]["action"] in {"revise", "supersede"}


async def test_the_drift_resource_takes_the_tools_include_resolved_and_limit(settings):
    # A trial: the resource said it works as the tool, and took neither.
    async with connected(server_with(settings)) as client:
        await call(client, "remember", {"content": "The API gateway listens on port 9090"})
        await call(client, "remember", {"content": "The API gateway listens on port 8080"})
        opened = await read_json(client, "memoria://drift")
        [pair] = opened["contradictions"]
        await call(client, "forget", {"memory_id": pair["older"]["id"]})
        left = await read_json(client, "memoria://drift")
        settled = await read_json(client, "memoria://drift?include_resolved=true&limit=1")
        with pytest.raises(MCPError) as bad:
            await client.read_resource("memoria://drift?limit=0")
    assert left["contradictions"] == [] and [p["status"] for p in settled["contradictions"]] == ["resolved"]
    assert len(settled["changes"]) <= 1 and "`limit`" in str(bad.value)


async def test_a_bad_scope_in_the_query_gets_an_error_that_names_it(settings):
    async with connected(server_with(settings)) as client:
        with pytest.raises(MCPError) as raised:
            await client.read_resource("memoria://stats?org_id=" + "x" * 200)
    assert "`org_id`" in str(raised.value) and "read the resource again" in str(raised.value)
    # The request's, not the server's fault: invalid params (a team's trial read a refusal as -32603, an
    # internal error clients may retry).
    assert raised.value.error.code == INVALID_PARAMS


async def test_a_query_parameter_the_resource_does_not_take_is_refused_not_dropped(settings):
    """A new user's trial: ``memoria://memories?tags=ops`` (for ``tag``) listed every memory unfiltered."""
    async with connected(server_with(settings)) as client:
        await call(client, "remember", {"content": "Deploys go out on Tuesdays", "tags": ["ops"]})
        with pytest.raises(MCPError) as raised:
            await client.read_resource("memoria://memories?tags=ops&limit=5")
        assert "unknown parameter 'tags': this resource takes " in str(raised.value)
        assert "tag, time_zone, until" in str(raised.value)
        with pytest.raises(MCPError, match="unknown parameters 'colour', 'x'") as unknown:
            await client.read_resource("memoria://stats?x=1&colour=red")
        assert unknown.value.error.code == INVALID_PARAMS
        listed = await read_json(client, "memoria://memories?tag=ops&limit=5")  # the right name still works
        assert len(listed["memories"]) == 1
        shown = listed["memories"][0]["id"]
        with pytest.raises(
            MCPError, match="unknown parameter 'memory_id': this resource takes org_id, project_id"
        ):
            await client.read_resource(
                f"memoria://memory/{shown}?memory_id=mem_other"
            )  # its id is in the path
        assert (await read_json(client, f"memoria://memory/{shown}?project_id=default"))["id"] == shown
