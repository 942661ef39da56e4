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
