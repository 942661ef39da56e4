"""Tags through an MCP client: recall by any or all of several tags, forget by tag (shown first)."""

import json

import pytest

from tests.helpers import call, call_error, connected, server_with

pytestmark = pytest.mark.anyio

NOTES = {
    "both": ("Deploy the billing service with the blue-green script", ["ops", "billing"]),
    "ops": ("Deploy the search service with the rolling script", ["ops"]),
    "billing": ("Deploy the billing reports from the finance job", ["billing"]),
    "none": ("Deploy notes for the mobile app live in the wiki", []),
}


async def stored(client) -> dict[str, str]:
    return {
        name: (await call(client, "remember", {"content": content, "tags": tags}))["id"]
        for name, (content, tags) in NOTES.items()
    }


@pytest.mark.slow
async def test_recall_keeps_memories_with_any_or_with_all_of_the_tags(settings):
    async with connected(server_with(settings)) as client:
        ids = await stored(client)
        query = {"query": "how do we deploy", "top_k": 10, "tags": ["ops", "billing"]}
        anyof = await call(client, "recall", query)
        assert {m["id"] for m in anyof["memories"]} == {ids["both"], ids["ops"], ids["billing"]}
        allof = await call(client, "recall", {**query, "tags_all": True})
        assert [m["id"] for m in allof["memories"]] == [ids["both"]]


async def test_forget_by_tag_shows_what_would_go_first_and_forgets_it_when_told(settings):
    async with connected(server_with(settings)) as client:
        ids = await stored(client)
        shown = await call(client, "forget", {"tag": "billing"})
        assert shown["dry_run"] is True
        assert {m["id"] for m in shown["forgotten"]} == {ids["both"], ids["billing"]}
        assert "dry run: the 2 memories tagged 'billing' would be retracted" in shown["note"]
        listed = json.loads((await client.read_resource("memoria://memories")).contents[0].text)
        assert len(listed["memories"]) == 4  # nothing went

        done = await call(
            client, "forget", {"tag": "billing", "dry_run": False, "reason": "billing moved out"}
        )
        assert done["dry_run"] is False and done["note"] == "2 memories tagged 'billing' retracted"
        left = json.loads((await client.read_resource("memoria://memories")).contents[0].text)
        assert {m["id"] for m in left["memories"]} == {ids["ops"], ids["none"]}
        history = await call(client, "lineage", {"memory_id": ids["billing"]})
        assert (
            history["events"][-1]["action"] == "retract"
            and history["events"][-1]["reason"] == "billing moved out"
        )

        nothing = await call(client, "forget", {"tag": "billing", "dry_run": False})
        assert nothing["forgotten"] == [] and "no active memory has the tag 'billing'" in nothing["note"]
        both = await call_error(client, "forget", {"tag": "ops", "query": "deploy"})
        assert "exactly one of memory_id, query (with max_memories) or tag" in both
