"""Visibility scopes through a real MCP client: a memory is read by its whole org, its project (the
default), only its agent, or only its agent's session, and every reading path (recall, explain_ranking,
lineage, drift, forget, report_outcome's named ids, explicit update) shows a caller only what it may read.

Agents are MCP clients with different names; sessions are connections (one per client). The words of each
memory are distinct, so a recall for them finds exactly the memories its caller may see."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from storage.records import Scope
from storage.store import MemoryStore
from tests.helpers import call, call_error, connected, server_with, settings_for

pytestmark = pytest.mark.anyio

ORG = {"org_id": "acme"}
BILLING = {**ORG, "project_id": "billing"}
SEARCH = {**ORG, "project_id": "search"}


@pytest.fixture
def server(tmp_path: Path) -> Any:
    return server_with(settings_for(tmp_path / "db"))


@asynccontextmanager
async def two_agents(server: Any) -> AsyncIterator[tuple[Client, Client]]:
    """Two MCP clients of one server: the agents alice and bob (each connection a session of its own)."""
    async with connected(server, agent="alice") as alice, connected(server, agent="bob") as bob:
        yield alice, bob


async def remember(client: Any, content: str, where: dict[str, str], **extra: Any) -> dict[str, Any]:
    return await call(client, "remember", {"content": content, **where, **extra})


async def recalled(client: Any, query: str, where: dict[str, str]) -> set[str]:
    out = await call(client, "recall", {"query": query, **where})
    return {memory["id"] for memory in out["memories"]}


@pytest.mark.slow
async def test_each_visibility_reaches_exactly_its_readers(server):
    async with two_agents(server) as (alice, bob):
        project = await remember(alice, "The billing ledger closes at midnight UTC", BILLING)
        org = await remember(
            alice, "Every service logs to the central vector aggregator", BILLING, visibility="org"
        )
        mine = await remember(
            alice, "Alice prefers tabs over spaces in billing code", BILLING, visibility="agent"
        )
        session = await remember(
            alice, "Scratch note: the failing invoice test is flaky", BILLING, visibility="session"
        )
        assert [m["visibility"] for m in (project, org, mine, session)] == [
            "project",
            "org",
            "agent",
            "session",
        ]
        # The org memory lives on the org's shelf, not in the project that wrote it.
        assert (org["org_id"], org["project_id"]) == ("acme", "")

        everything = "billing ledger midnight vector aggregator tabs spaces failing invoice flaky"
        assert await recalled(alice, everything, BILLING) == {
            project["id"],
            org["id"],
            mine["id"],
            session["id"],
        }
        assert await recalled(bob, everything, BILLING) == {project["id"], org["id"]}
        # Another project of the org reads the org's memories only.
        assert await recalled(bob, everything, SEARCH) == {org["id"]}
        assert await recalled(alice, everything, SEARCH) == {org["id"]}
        # Another org reads nothing.
        assert await recalled(bob, everything, {"org_id": "other", "project_id": "billing"}) == set()

    # A new connection is a new session of the same agent: the agent's memory stays, the session's not.
    async with connected(server, agent="alice") as alice_later:
        assert await recalled(alice_later, everything, BILLING) == {project["id"], org["id"], mine["id"]}
        # The same agent and session named explicitly reads the session's memory again.
        out = await call(
            alice_later,
            "recall",
            {"query": everything, **BILLING, "session_id": session["session_id"]},
        )
        assert session["id"] in {memory["id"] for memory in out["memories"]}


async def test_the_context_marks_who_else_reads_a_memory(server):
    async with connected(server, agent="alice") as alice:
        await remember(alice, "Deploys freeze on Fridays after noon", BILLING, visibility="org")
        await remember(alice, "Deploys of billing need two approvals", BILLING, visibility="agent")
        await remember(alice, "Deploys of billing run from the release branch", BILLING)
        out = await call(alice, "recall", {"query": "deploys billing Fridays approvals", **BILLING})
        headers = [line for line in out["context"].splitlines() if line.startswith("[")]
        by_text = {
            "Fridays": next(h for h in headers if "org-wide" in h),
            "approvals": next(h for h in headers if "private to its agent" in h),
        }
        assert len(headers) == 3 and all(by_text.values())
        assert sum("org-wide" in h or "private" in h for h in headers) == 2


async def test_private_copies_of_the_same_text_are_separate_memories(server):
    """Identical text is stored once per audience: one agent's private note is never the other's
    duplicate, so neither learns the other wrote it, and neither corroborates a shared memory."""
    async with two_agents(server) as (alice, bob):
        text = "The staging database password rotates every Monday"
        a = await remember(alice, text, BILLING, visibility="agent")
        b = await remember(bob, text, BILLING, visibility="agent")
        shared = await remember(bob, text, BILLING)
        assert len({a["id"], b["id"], shared["id"]}) == 3
        assert (a["status"], b["status"], shared["status"]) == ("stored", "stored", "stored")
        assert b["note"] is None and shared["note"] is None
        # Consolidation left each one alone: none absorbed another audience's memory.
        for out in (a, b, shared):
            assert not (out["consolidation"] or {}).get("superseded")
        explained = await call(alice, "explain_ranking", {"query": "staging database password", **BILLING})
        ids = {candidate["id"] for candidate in explained["candidates"]}
        assert ids == {a["id"], shared["id"]}
        shared_row = next(c for c in explained["candidates"] if c["id"] == shared["id"])
        assert shared_row["corroborating_agents"] == []


@pytest.mark.slow
async def test_no_tool_reveals_another_agents_private_memory(server):
    async with two_agents(server) as (alice, bob):
        secret = await remember(
            alice, "Alice's draft pricing for the enterprise tier", BILLING, visibility="agent"
        )
        memory_id = secret["id"]
        for tool, arguments in (
            ("lineage", {"memory_id": memory_id}),
            ("forget", {"memory_id": memory_id}),
            ("remember", {"content": "Bob's pricing", "replaces": memory_id}),
            ("report_outcome", {"outcome": "success", "helpful_ids": [memory_id]}),
            ("explain_ranking", {"query": "enterprise pricing", "memory_id": memory_id}),
        ):
            message = await call_error(bob, tool, {**arguments, **BILLING})
            assert "no memory" in message and "pricing for the enterprise" not in message
        dry = await call(
            bob, "forget", {"query": "draft pricing enterprise tier", "dry_run": True, **BILLING}
        )
        assert dry["forgotten"] == []
        drift = await call(bob, "drift", BILLING)
        assert memory_id not in str(drift)

        # Alice's recall is recorded; its trace quotes her private memory, so Bob cannot open it.
        out = await call(alice, "recall", {"query": "draft pricing enterprise tier", **BILLING})
        assert memory_id in {memory["id"] for memory in out["memories"]}
        mine = await call(alice, "explain_ranking", {"retrieval_id": out["retrieval_id"], **BILLING})
        assert memory_id in {candidate["id"] for candidate in mine["candidates"]}
        # Each client here has a server runtime of its own, as another process would: Alice's recall record
        # reaches the table with her runtime's next batch of logs (within 0.2 s).
        with anyio.fail_after(10):
            while "no retrieval" in (
                refused := await call_error(
                    bob, "explain_ranking", {"retrieval_id": out["retrieval_id"], **BILLING}
                )
            ):
                await anyio.sleep(0.05)
        assert "made by another agent or session and is not shown" in refused and "pricing" not in refused

        # Alice herself may update and forget it; the update keeps it private.
        updated = await remember(
            alice, "Alice's revised pricing for the enterprise tier", BILLING, replaces=memory_id
        )
        assert updated["visibility"] == "agent"
        assert await recalled(bob, "revised pricing enterprise tier", BILLING) == set()
        changed = await call_error(
            alice,
            "remember",
            {"content": "Pricing, shared", "replaces": updated["id"], "visibility": "project", **BILLING},
        )
        assert "keeps who reads a memory" in changed
        gone = await call(alice, "forget", {"memory_id": updated["id"], **BILLING})
        assert [m["id"] for m in gone["forgotten"]] == [updated["id"]]


@pytest.mark.slow
async def test_an_org_memory_is_updated_and_forgotten_from_any_project_of_the_org(server, tmp_path):
    async with two_agents(server) as (alice, bob):
        org = await remember(alice, "The on-call rotation changes on Tuesdays", BILLING, visibility="org")
        # Bob, in another project, corrects it: the correction is org-wide too.
        fixed = await remember(bob, "The on-call rotation changes on Wednesdays", SEARCH, replaces=org["id"])
        assert fixed["visibility"] == "org"
        assert await recalled(alice, "on-call rotation changes", BILLING) == {fixed["id"]}
        lineage = await call(alice, "lineage", {"memory_id": org["id"], **BILLING})
        assert lineage["current"]["id"] == fixed["id"]
        # A report from a project session may name it as helpful.
        quoted = await call(bob, "recall", {"query": "on-call rotation", **SEARCH})
        report = await call(
            bob, "report_outcome", {"outcome": "success", "helpful_ids": [fixed["id"]], **SEARCH}
        )
        [helpful] = [u for u in report["updated"] if u["id"] == fixed["id"]]
        # The global weight takes one EMA step (alpha 0.2) towards the ceiling 1.75: 0.8 + 0.35.
        assert (helpful["role"], helpful["weight_after"]) == (
            "helpful",
            pytest.approx(0.8 * 1.0 + 0.2 * 1.75),
        )
        gone = await call(alice, "forget", {"memory_id": fixed["id"], "mode": "purge", **BILLING})
        assert [m["id"] for m in gone["forgotten"]] == [fixed["id"]]
        assert await recalled(bob, "on-call rotation changes", SEARCH) == set()
        # The purge scrubbed its text from the trace of a recall made in another project.
        explained = await call(bob, "explain_ranking", {"retrieval_id": quoted["retrieval_id"], **SEARCH})
        [row] = [c for c in explained["candidates"] if c["id"] == fixed["id"]]
        assert row["preview"] == "[purged]" and "Wednesdays" not in str(explained)
        retrieval_id = quoted["retrieval_id"]
    # Not only masked by explain_ranking: the stored trace no longer holds the text.
    with MemoryStore.open(str(tmp_path / "db"), vector_dim=settings_for(tmp_path / "db").vector.dim) as store:
        trace = store.get_retrieval(retrieval_id, Scope("acme", "search")).trace_json
        assert "Wednesdays" not in trace and "[purged]" in trace


@pytest.mark.slow
@pytest.mark.parametrize("visibility", ["nobody", "ORG", ""])
async def test_an_unknown_visibility_is_refused_with_the_choices(server, visibility):
    async with connected(server, agent="alice") as alice:
        message = await call_error(
            alice, "remember", {"content": "x marks the spot", "visibility": visibility, **BILLING}
        )
        assert all(choice in message for choice in ("'org'", "'project'", "'agent'", "'session'"))
        assert await recalled(alice, "x marks the spot", BILLING) == set()


async def test_a_private_memory_never_absorbs_revises_or_quotes_a_shared_one(server):
    """Consolidation stays within one audience, and a shared memory's search text never quotes a private
    episode neighbour: otherwise another agent's search for the private words would find it."""
    async with two_agents(server) as (alice, bob):
        shared = await remember(alice, "The deploy script lives in tools/deploy.sh", BILLING)
        near = await remember(
            alice, "The deploy script lives in tools/deploy.sh now", BILLING, visibility="agent"
        )
        belief = await remember(alice, "Billing stores invoices in MySQL", BILLING)
        revision = await remember(
            alice, "We switched billing from MySQL to Postgres", BILLING, visibility="agent"
        )
        for out in (near, revision):
            summary = out["consolidation"] or {}
            assert not summary.get("superseded") and not summary.get("revised")
        assert await recalled(bob, "deploy script tools deploy.sh", BILLING) == {shared["id"]}
        assert belief["id"] in await recalled(bob, "billing invoices MySQL", BILLING)
        drift = await call(bob, "drift", BILLING)
        assert drift["changes"] == [] and drift["contradictions"] == []

        # An episode-kind private memory neither titles the episode nor is quoted by its neighbour.
        await remember(
            alice,
            "Launch codename BLUEFIN",
            BILLING,
            visibility="agent",
            episode_id="ep-1",
            kind="episode",
        )
        public = await remember(alice, "The launch is planned for March", BILLING, episode_id="ep-1")
        assert await recalled(bob, "BLUEFIN", BILLING) == set()
        seen = await call(bob, "recall", {"query": "launch planned March", **BILLING})
        assert public["id"] in {m["id"] for m in seen["memories"]} and "BLUEFIN" not in seen["context"]
        assert 'agent "alice"' not in next(
            line for line in seen["context"].splitlines() if "episode ep-1" in line
        )


@pytest.mark.slow
async def test_the_memory_resources_show_a_private_memory_to_its_agent_only(server):
    async with two_agents(server) as (alice, bob):
        secret = await remember(alice, "Alice's notes on the quarterly numbers", BILLING, visibility="agent")
        uri = f"memoria://memory/{secret['id']}?org_id=acme&project_id=billing"
        shown = await alice.read_resource(uri)
        assert json.loads(shown.contents[0].text)["visibility"] == "agent"
        with pytest.raises(MCPError, match="no memory"):
            await bob.read_resource(uri)
        listed = await bob.read_resource("memoria://memories?org_id=acme&project_id=billing")
        assert secret["id"] not in listed.contents[0].text
        listed = await alice.read_resource("memoria://memories?org_id=acme&project_id=billing")
        assert secret["id"] in listed.contents[0].text


@pytest.mark.slow
async def test_drift_shows_the_newest_changes_a_caller_may_read_even_behind_private_ones(server):
    async with two_agents(server) as (alice, bob):
        await remember(alice, "I prefer TypeScript.", BILLING)
        shared = await remember(alice, "i prefer typescript", BILLING)
        assert shared["consolidation"]["superseded"]
        for text in (
            "Note to self: rotate keys",
            "note to self: rotate keys!",
            "Note to self - rotate keys",
        ):
            await remember(alice, text, BILLING, visibility="agent")
        mine = await call(alice, "drift", {"limit": 1, **BILLING})
        theirs = await call(bob, "drift", {"limit": 1, **BILLING})
        assert mine["changes"][0]["by"]["id"] != shared["id"]  # alice's own private merge is newest
        assert [change["by"]["id"] for change in theirs["changes"]] == [shared["id"]]


@pytest.mark.slow
async def test_reports_from_every_project_move_an_org_memorys_weight(server):
    """An org memory's global weight replays the reports of every project that read it: a second
    project's report takes a second step instead of writing over the first (alpha 0.2 towards 1.75)."""
    async with two_agents(server) as (alice, bob):
        org = await remember(
            alice, "Builds are cached in the shared artifact store", BILLING, visibility="org"
        )
        reports = []
        for client, where in ((bob, SEARCH), (alice, BILLING)):
            await call(client, "recall", {"query": "builds cached artifact store", **where})
            out = await call(
                client, "report_outcome", {"outcome": "success", "helpful_ids": [org["id"]], **where}
            )
            [update] = [u for u in out["updated"] if u["id"] == org["id"]]
            reports.append(update["weight_after"])
        first = 0.8 * 1.0 + 0.2 * 1.75
        assert reports == [pytest.approx(first), pytest.approx(0.8 * first + 0.2 * 1.75)]
