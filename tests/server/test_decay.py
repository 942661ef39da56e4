"""Age decay through an MCP client: a server whose clock stands at 25 November 2026, memories that
occurred weeks before, and explain_ranking showing the factor each memory's relevance was multiplied by."""

from datetime import UTC, datetime

import pytest

from server.app import build_server
from tests.helpers import call, connected, make_runtime, settings_for

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
QUERY = "billing service deploy from the main branch on Tuesday"
OLD = ("2026-09-26T12:00:00Z", "The billing service deploys from the main branch every Tuesday")  # 60 days
YOUNG = ("2026-11-22T12:00:00Z", "Billing deploys happen on Tuesday")  # 3 days


def server(tmp_path, **settings):
    def runtime_at_now(current):
        runtime = make_runtime(current)
        runtime.clock = lambda: NOW
        return runtime

    return build_server(settings_for(tmp_path / "db", **settings), runtime_factory=runtime_at_now)


async def remember(client, when: str, content: str, tier: str = "standard") -> str:
    stored = await call(
        client, "remember", {"content": content, "occurred_at": when, "protection_tier": tier}
    )
    return stored["id"]


async def scores_of(client) -> tuple[list[str], dict[str, dict]]:
    recalled = await call(client, "recall", {"query": QUERY})
    explained = await call(client, "explain_ranking", {"retrieval_id": recalled["retrieval_id"]})
    return [m["id"] for m in recalled["memories"]], {c["id"]: c["scores"] for c in explained["candidates"]}


async def test_standard_memories_do_not_fade_by_default(tmp_path):
    async with connected(server(tmp_path)) as client:
        old, young = await remember(client, *OLD), await remember(client, *YOUNG)
        order, scores = await scores_of(client)
    assert order == [old, young]  # the fuller match first
    assert scores[old]["decay"] == scores[young]["decay"] == 1.0


async def test_with_a_half_life_an_old_memory_fades_below_a_young_one(tmp_path):
    async with connected(server(tmp_path, decay_half_life_days=30)) as client:
        old, young = await remember(client, *OLD), await remember(client, *YOUNG)
        order, scores = await scores_of(client)
    assert order == [young, old]
    assert scores[old]["decay"] == pytest.approx(0.25)  # 60 days, two half-lives
    assert scores[young]["decay"] == pytest.approx(0.5 ** (3 / 30))
    for memory_id in (old, young):
        each = scores[memory_id]
        expected = (each["relevance"] + each["corroboration_boost"]) * each["decay"] * each["feedback_weight"]
        assert each["final"] == pytest.approx(expected)


async def test_a_protected_memory_never_fades(tmp_path):
    async with connected(server(tmp_path, decay_half_life_days=30)) as client:
        old = await remember(client, *OLD, tier="protected")
        young = await remember(client, *YOUNG)
        order, scores = await scores_of(client)
    assert order == [old, young]
    assert scores[old]["decay"] == 1.0
