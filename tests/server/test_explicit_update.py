"""remember(..., replaces=ID): an explicit update, through an MCP client."""

import json

import pytest

from tests.helpers import call, call_error, connected, server_with

pytestmark = pytest.mark.anyio

OLD = "The billing database runs Postgres 15 on db-billing-1"
NEW = "The billing database runs Postgres 16 on db-billing-2 since the upgrade"


@pytest.mark.slow
async def test_an_explicit_update_supersedes_the_memory_with_lineage_and_keeps_its_weight(settings):
    async with connected(server_with(settings)) as client:
        old = await call(client, "remember", {"content": OLD, "tags": ["db"], "kind": "fact"})
        recalled = await call(client, "recall", {"query": "billing database postgres"})
        assert [m["id"] for m in recalled["memories"]] == [old["id"]]
        await call(client, "report_outcome", {"outcome": "success", "helpful_ids": [old["id"]]})  # 1.15

        new = await call(client, "remember", {"content": NEW, "replaces": old["id"]})
        assert new["status"] == "stored" and new["id"] != old["id"]
        assert (
            new["note"]
            == f"explicit update: {new['id']} replaces {old['id']}, which stays superseded for audit"
        )

        history = await call(client, "lineage", {"memory_id": old["id"]})
        assert history["memory"]["status"] == "superseded" and history["current"]["id"] == new["id"]
        how = history["replaced_by_chain"][0]["how"]
        assert (how["action"], how["resolver"], how["reason"]) == ("supersede", "explicit", "explicit update")

        after = await call(client, "recall", {"query": "billing database postgres"})
        assert [m["id"] for m in after["memories"]] == [new["id"]]  # the old one stays for audit only
        shown = json.loads((await client.read_resource(f"memoria://memory/{new['id']}")).contents[0].text)
        assert shown["tags"] == ["db"]  # kept from the memory it replaces
        assert shown["weight"] == pytest.approx(1.15)  # the old memory's weight carries over
        # ...and its history: the report that moved the old memory is in the new one's weight history.
        assert [(step["memory_id"], step["weight_after"]) for step in shown["weight_history"]] == [
            (old["id"], pytest.approx(1.15))
        ]
        # And its reports' credits: for a query like the reported session's, the new memory weighs as the
        # old one did (named helpful, for the same query: the named step to the top weight, 1.75; its global
        # weight, the spec's step, 1.15).
        explained = await call(client, "explain_ranking", {"retrieval_id": after["retrieval_id"]})
        top = explained["candidates"][0]
        assert top["id"] == new["id"] and top["scores"]["feedback_weight"] == pytest.approx(1.75)
        assert top["scores"]["global_weight"] == pytest.approx(1.15)


async def test_an_update_of_an_unknown_foreign_superseded_or_immutable_memory_is_refused(settings):
    async with connected(server_with(settings)) as client:
        elsewhere = await call(client, "remember", {"content": OLD, "project_id": "other"})
        error = await call_error(client, "remember", {"content": NEW, "replaces": elsewhere["id"]})
        assert f"no memory {elsewhere['id']} in org 'default' / project 'default'" in error
        assert "nothing was stored" in error
        assert "no memory mem_nope" in await call_error(
            client, "remember", {"content": NEW, "replaces": "mem_nope"}
        )

        old = await call(client, "remember", {"content": OLD})
        new = await call(client, "remember", {"content": NEW, "replaces": old["id"]})
        again = await call_error(client, "remember", {"content": "Postgres 17", "replaces": old["id"]})
        assert (
            f"{old['id']} is superseded, not active; nothing was stored. Update {new['id']}, which replaced it"
            in again
        )

        same = await call_error(client, "remember", {"content": NEW, "replaces": new["id"]})
        assert "the new content is the same" in same

        fixed = await call(
            client, "remember", {"content": "Invoices are kept 10 years", "protection_tier": "immutable"}
        )
        frozen = await call_error(
            client, "remember", {"content": "Invoices are kept 7 years", "replaces": fixed["id"]}
        )
        assert "is immutable and is never replaced" in frozen
        listed = json.loads((await client.read_resource("memoria://memories")).contents[0].text)
        assert "Invoices are kept 7 years" not in {m["preview"] for m in listed["memories"]}


async def test_an_update_back_to_an_earlier_text_makes_that_memory_current_again(settings):
    async with connected(server_with(settings)) as client:
        old = await call(client, "remember", {"content": OLD})
        new = await call(client, "remember", {"content": NEW, "replaces": old["id"]})
        back = await call(client, "remember", {"content": OLD, "replaces": new["id"]})
        assert back["id"] == old["id"]
        assert (
            back["note"]
            == f"explicit update: {old['id']} replaces {new['id']}, which stays superseded for audit"
        )
        after = await call(client, "recall", {"query": "billing database postgres"})
        assert [m["id"] for m in after["memories"]] == [old["id"]]
        history = await call(client, "lineage", {"memory_id": old["id"]})
        # Superseded by the update, restored by the update back, then the update superseded by it.
        assert [(e["action"], e["memory_id"]) for e in history["events"]] == [
            ("supersede", old["id"]),
            ("restore", old["id"]),
            ("supersede", new["id"]),
        ]
        assert history["memory"]["status"] == "active"


RETRY = (
    "def retry(fn, attempts=5, backoff=0.2):\n    for i in range(attempts):\n        try:\n"
    "            return fn()\n        except ConnectionError:\n            time.sleep(backoff * 2 ** i)"
)


async def test_an_explicit_update_of_an_artifact_is_its_next_version_in_the_result_and_in_lineage(settings):
    async with connected(server_with(settings)) as client:
        first = await call(client, "remember", {"content": RETRY, "kind": "artifact"})
        second = await call(
            client,
            "remember",
            {"content": RETRY.replace("attempts=5", "attempts=7"), "replaces": first["id"]},
        )
        # A trial: the result said nothing was superseded, and lineage listed no earlier version.
        found = second["consolidation"]
        assert (found["superseded"], found["resolver"], found["version_of"]) == (
            [first["id"]],
            "explicit",
            first["id"],
        )
        versions = (await call(client, "lineage", {"memory_id": second["id"]}))["versions"]
        assert [v["id"] for v in versions] == [first["id"]]

        # A version the rules find next continues the chain through the explicit update.
        third = await call(
            client, "remember", {"content": RETRY.replace("attempts=5", "attempts=9"), "kind": "artifact"}
        )
        assert third["consolidation"]["version_of"] == second["id"]
        versions = (await call(client, "lineage", {"memory_id": third["id"]}))["versions"]
        assert [v["id"] for v in versions] == [second["id"], first["id"]]

        # The text says the version once, and not the supersede the note already says.
        shown = await client.call_tool(
            "remember", {"content": RETRY.replace("attempts=5", "attempts=11"), "replaces": third["id"]}
        )
        fourth = shown.structured_content["id"]
        assert shown.content[0].text.splitlines()[1:] == [
            f"explicit update: {fourth} replaces {third['id']}, which stays superseded for audit",
            f"a new version of {third['id']}",
        ]


async def test_an_artifact_updated_back_to_its_earlier_text_lists_its_versions_without_a_loop(settings):
    async with connected(server_with(settings)) as client:
        first = await call(client, "remember", {"content": RETRY, "kind": "artifact"})
        edited = RETRY.replace("attempts=5", "attempts=7")
        second = await call(client, "remember", {"content": edited, "replaces": first["id"]})
        back = await call(client, "remember", {"content": RETRY, "replaces": second["id"]})
        assert back["id"] == first["id"]
        assert [
            v["id"] for v in (await call(client, "lineage", {"memory_id": first["id"]}))["versions"]
        ] == []
        assert [
            v["id"] for v in (await call(client, "lineage", {"memory_id": second["id"]}))["versions"]
        ] == [first["id"]]


async def test_an_artifact_updated_back_to_its_first_text_of_three_leaves_each_versions_chain_as_it_was(
    settings,
):
    # A review: A -> B -> C, then C updated with A's text, linked A to C: A -> C -> B -> A, and B listed C,
    # which came after it, among its earlier versions.
    async with connected(server_with(settings)) as client:
        a = await call(client, "remember", {"content": RETRY, "kind": "artifact"})
        b = await call(client, "remember", {"content": RETRY.replace("=5", "=7"), "replaces": a["id"]})
        c = await call(client, "remember", {"content": RETRY.replace("=5", "=9"), "replaces": b["id"]})
        back = await call(client, "remember", {"content": RETRY, "replaces": c["id"]})
        assert back["id"] == a["id"]

        async def versions(memory: dict) -> list[str]:
            return [v["id"] for v in (await call(client, "lineage", {"memory_id": memory["id"]}))["versions"]]

        assert [await versions(m) for m in (a, b, c)] == [[], [a["id"]], [b["id"], a["id"]]]


@pytest.mark.slow
async def test_an_explicit_update_of_a_memory_that_misled_does_not_inherit_the_blame(settings):
    async with connected(server_with(settings)) as client:
        old = await call(client, "remember", {"content": OLD})
        await call(client, "recall", {"query": "billing database postgres"})
        await call(client, "report_outcome", {"outcome": "failure", "misleading_ids": [old["id"]]})  # 0.85
        new = await call(client, "remember", {"content": NEW, "replaces": old["id"]})
        shown = json.loads((await client.read_resource(f"memoria://memory/{new['id']}")).contents[0].text)
        assert shown["weight"] == pytest.approx(1.0)  # the correction starts clean
        after = await call(client, "recall", {"query": "billing database postgres"})
        explained = await call(client, "explain_ranking", {"retrieval_id": after["retrieval_id"]})
        [top] = [c for c in explained["candidates"] if c["id"] == new["id"]]
        assert top["scores"]["feedback_weight"] == pytest.approx(1.0) and top["feedback"]["reports"] == 0
