"""Read-your-writes on one session (``server.ordering``): a read waits for the writes of its session sent
before it; through a real client, a recall sent right after a remember, unawaited, finds it."""

from __future__ import annotations

import anyio
import pytest

from server.ordering import WritesInFlight
from tests.helpers import connected, server_with

pytestmark = pytest.mark.anyio


async def test_a_read_waits_for_the_earlier_writes_of_its_session_only():
    writes = WritesInFlight()
    first = writes.begin("s1")
    other = writes.begin("s2")  # another session's write never holds s1's reads up
    settled = []

    async def read() -> None:
        await writes.settled("s1")
        settled.append("read")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        later = writes.begin("s1")  # sent after the read: not waited for
        assert settled == []
        writes.end("s1", first)
        await anyio.wait_all_tasks_blocked()
        assert settled == ["read"]
    writes.end("s1", later)
    writes.end("s2", other)
    assert len(writes) == 0  # nothing is kept once no write is in flight


async def test_a_read_waits_no_longer_than_its_bound_for_a_write_that_never_ends():
    writes = WritesInFlight()
    writes.begin("s1")  # a write waiting on its client, say
    with anyio.fail_after(5):
        await writes.settled("s1", at_most=0.05)


async def test_a_recall_sent_right_after_a_remember_unawaited_finds_it(settings):
    # A new user's trial: the recall ran beside the remember and found nothing of it.
    found: dict[int, list[str]] = {}
    async with connected(server_with(settings)) as client:
        for i in range(3):

            async def remember(i: int = i) -> None:
                await client.call_tool(
                    "remember", {"content": f"The build cache bucket {i} is s3://cache-{i}"}
                )

            async def recall(i: int = i) -> None:
                result = await client.call_tool("recall", {"query": f"build cache bucket {i}"})
                found[i] = [m["content"] for m in result.structured_content["memories"]]

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(remember)
                tasks.start_soon(recall)
    for i in range(3):
        assert f"The build cache bucket {i} is s3://cache-{i}" in found[i]
