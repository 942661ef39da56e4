"""Several server processes on one store (one per IDE window): no write is lost or duplicated, and each
sees the others' writes on its next recall."""

from __future__ import annotations

import sys

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import Implementation

from storage.store import MemoryStore
from tests.helpers import TIMEOUT, call

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PROCESSES = 3
UNIQUE_PER_PROCESS = 25
SHARED = [f"shared fact number {i}: every window learns this" for i in range(10)]


def params(db) -> StdioServerParameters:
    env = {
        "MEMORIA_DB_URI": str(db),
        "MEMORIA_EMBEDDER": "hashed",
        "MEMORIA_RERANKER": "none",
        "MEMORIA_MAINTENANCE_INTERVAL_SECONDS": "0.5",
    }
    return StdioServerParameters(command=sys.executable, args=["-m", "server", "serve"], env=env)


async def test_concurrent_server_processes_lose_and_duplicate_nothing(tmp_path):
    db = tmp_path / "shared-store"
    ids: dict[int, set[str]] = {}

    async def window(number: int) -> None:
        async with Client(
            params(db),
            client_info=Implementation(name=f"window-{number}", version="1"),
            read_timeout_seconds=TIMEOUT,
        ) as client:
            mine = set()
            for i in range(UNIQUE_PER_PROCESS):
                out = await call(client, "remember", {"content": f"window {number} learned fact {i}"})
                assert out["status"] == "stored"
                mine.add(out["id"])
                if i % 5 == 0:
                    await call(client, "recall", {"query": f"fact {i}"})
            for text in SHARED:
                mine.add((await call(client, "remember", {"content": text}))["id"])
            ids[number] = mine

    with anyio.fail_after(TIMEOUT * 3):
        async with anyio.create_task_group() as group:
            for number in range(PROCESSES):
                group.start_soon(window, number)

    with MemoryStore.open(str(db)) as store:
        rows = store._memories.to_arrow().column("id").to_pylist()
    assert len(rows) == len(set(rows)) == PROCESSES * UNIQUE_PER_PROCESS + len(SHARED)
    assert set(rows) == set().union(*ids.values())


async def test_a_write_in_one_process_is_visible_to_the_next_recall_in_another(tmp_path):
    db = tmp_path / "shared-store"
    async with Client(
        params(db), client_info=Implementation(name="reader", version="1"), read_timeout_seconds=TIMEOUT
    ) as reader:
        before = await call(reader, "recall", {"query": "feature flag rollout"})
        assert before["memories"] == []
        async with Client(
            params(db), client_info=Implementation(name="writer", version="1"), read_timeout_seconds=TIMEOUT
        ) as writer:
            written = await call(
                writer, "remember", {"content": "The feature flag rollout finished on Monday"}
            )
        after = await call(reader, "recall", {"query": "feature flag rollout"})
    assert [m["id"] for m in after["memories"]] == [written["id"]]
