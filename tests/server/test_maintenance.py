"""Background maintenance compacts the fragments that single-row writes pile up, off the request path."""

import anyio
import pytest

from server.app import build_server
from tests.helpers import call, connected, make_runtime, settings_for

pytestmark = pytest.mark.anyio


class Recorded:
    """A server factory that keeps the runtime it built, so a test can look at its store."""

    def __init__(self) -> None:
        self.runtime = None

    def __call__(self, settings):
        self.runtime = make_runtime(settings)
        return self.runtime


async def remember_twelve(client) -> None:
    for index in range(12):
        await call(client, "remember", {"content": f"small write number {index}"})


def fragments(runtime) -> int:
    return runtime.store._memories.stats()["fragment_stats"]["num_fragments"]


async def compacted(runtime) -> None:
    with anyio.fail_after(30):
        while fragments(runtime) >= 4:
            await anyio.sleep(0.1)


async def test_background_maintenance_compacts_small_appends(tmp_path):
    settings = settings_for(tmp_path / "db", maintenance_interval_seconds=0.2, compaction_min_fragments=4)
    built = Recorded()
    async with connected(build_server(settings, runtime_factory=built)) as client:
        await remember_twelve(client)
        await compacted(built.runtime)
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
    built = Recorded()
    async with connected(build_server(settings, runtime_factory=built)) as client:
        await remember_twelve(client)
        await compacted(built.runtime)
        assert built.runtime.store.appends_since_maintenance < 12


async def test_without_enough_appends_nothing_runs_before_the_interval(tmp_path):
    settings = settings_for(
        tmp_path / "db",
        maintenance_interval_seconds=3600,
        compaction_min_fragments=4,
        compaction_after_appends=1000,
    )
    built = Recorded()
    async with connected(build_server(settings, runtime_factory=built)) as client:
        await remember_twelve(client)
        await anyio.sleep(2.5)  # the loop looks every second: two looks, neither due
        assert fragments(built.runtime) >= 12
