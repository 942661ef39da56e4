"""Background maintenance compacts the fragments that single-row writes pile up, off the request path."""

import anyio
import pytest

from server.app import build_server
from tests.helpers import call, connected, make_runtime, settings_for

pytestmark = pytest.mark.anyio


async def test_background_maintenance_compacts_small_appends(tmp_path):
    settings = settings_for(tmp_path / "db", maintenance_interval_seconds=0.2, compaction_min_fragments=4)
    runtimes = []

    def factory(s):
        runtimes.append(make_runtime(s))
        return runtimes[-1]

    async with connected(build_server(settings, runtime_factory=factory)) as client:
        for index in range(12):
            await call(client, "remember", {"content": f"small write number {index}"})
        memories = runtimes[0].store._memories
        with anyio.fail_after(30):
            while memories.stats()["fragment_stats"]["num_fragments"] >= 4:
                await anyio.sleep(0.1)
        recalled = await call(client, "recall", {"query": "small write number 7", "top_k": 12})
    assert len(recalled["memories"]) == 12
    assert recalled["memories"][0]["content"] == "small write number 7"


async def test_appends_piling_up_start_a_round_before_the_interval(tmp_path):
    # An hour between rounds, but 8 appends are enough to start one: a busy server compacts as it goes.
    settings = settings_for(
        tmp_path / "db",
        maintenance_interval_seconds=3600,
        compaction_min_fragments=4,
        compaction_after_appends=8,
    )
    runtimes = []

    def factory(s):
        runtimes.append(make_runtime(s))
        return runtimes[-1]

    async with connected(build_server(settings, runtime_factory=factory)) as client:
        for index in range(12):
            await call(client, "remember", {"content": f"small write number {index}"})
        memories = runtimes[0].store._memories
        with anyio.fail_after(30):
            while memories.stats()["fragment_stats"]["num_fragments"] >= 4:
                await anyio.sleep(0.1)
        assert runtimes[0].store.appends_since_maintenance < 12


async def test_without_enough_appends_nothing_runs_before_the_interval(tmp_path):
    settings = settings_for(
        tmp_path / "db",
        maintenance_interval_seconds=3600,
        compaction_min_fragments=4,
        compaction_after_appends=1000,
    )
    runtimes = []

    def factory(s):
        runtimes.append(make_runtime(s))
        return runtimes[-1]

    async with connected(build_server(settings, runtime_factory=factory)) as client:
        for index in range(12):
            await call(client, "remember", {"content": f"small write number {index}"})
        await anyio.sleep(2.5)  # the loop looks every second: two looks, neither due
        assert runtimes[0].store._memories.stats()["fragment_stats"]["num_fragments"] >= 12
