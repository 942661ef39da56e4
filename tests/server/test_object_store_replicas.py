"""Several server replicas over streamable HTTP in front of one store on S3: each sees the others'
writes, and nothing written concurrently is lost or duplicated, against a local S3 server (moto)."""

from __future__ import annotations

import json

import anyio
import pytest
from mcp import Client
from mcp_types import Implementation

from storage.records import Scope
from storage.store import MemoryStore
from tests.helpers import TIMEOUT, call, http_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# Distinct facts (near-duplicates would be clustered and consolidated, which is not what this tests).
FACTS = {
    "alpha": [
        "The billing service keeps invoices in postgres",
        "Deploys to staging need a green canary first",
        "Grafana dashboards live in the observability repo",
        "The mobile app pins openssl to version three",
        "Nightly backups are copied to a second region",
        "Feature flags are read from launchdarkly at boot",
    ],
    "bravo": [
        "The search cluster runs elasticsearch with six shards",
        "Kafka retention for audit events is thirty days",
        "Terraform state is locked in a dynamodb table",
        "The checkout team reviews every payments change",
        "Load tests run from a dedicated jenkins agent",
        "Python services are formatted with ruff",
    ],
}
SHARED = ["Incidents are declared in the #ops channel", "On-call handover happens every Monday"]
SESSIONS_PER_REPLICA = 3


def replica_env(uri: str, options: dict[str, str]) -> dict[str, str]:
    return {
        "MEMORIA_DB_URI": uri,
        "MEMORIA_STORAGE_OPTIONS": json.dumps(options),
        "MEMORIA_EMBEDDER": "hashed",
        "MEMORIA_RERANKER": "none",
        "MEMORIA_MAINTENANCE_INTERVAL_SECONDS": "1",  # compactions race the writes, as in production
    }


def client(url: str, name: str) -> Client:
    return Client(url, client_info=Implementation(name=name, version="1"), read_timeout_seconds=TIMEOUT)


async def test_two_replicas_on_s3_lose_nothing_and_see_each_others_writes(s3_bucket):
    bucket, s3_options = s3_bucket
    uri = f"{bucket}/store"
    env = replica_env(uri, s3_options)
    written: dict[str, dict[str, str]] = {}
    shared_ids: set[str] = set()

    with http_server(env) as first, http_server(env) as second:
        replicas = {"alpha": first, "bravo": second}

        async def writer(name: str, url: str) -> None:
            async with client(url, f"agent-{name}") as session:
                mine = {}
                for i, fact in enumerate(FACTS[name]):
                    mine[(await call(session, "remember", {"content": fact}))["id"]] = fact
                    if i % 2 == 0:
                        await call(session, "recall", {"query": fact})
                for text in SHARED:
                    shared_ids.add((await call(session, "remember", {"content": text}))["id"])
                written[name] = mine

        with anyio.fail_after(TIMEOUT * 3):
            async with anyio.create_task_group() as group:
                for name, url in replicas.items():
                    group.start_soon(writer, name, url)

        # Each replica answers with what the other wrote, on its next recall.
        for reader, other in (("alpha", "bravo"), ("bravo", "alpha")):
            async with client(replicas[reader], f"reader-{reader}") as session:
                for memory_id, fact in written[other].items():
                    recalled = await call(session, "recall", {"query": fact, "top_k": 3})
                    assert memory_id in [m["id"] for m in recalled["memories"]], fact

        # Sessions on both replicas recall the same runbook step and report success at the same time:
        # the weight must replay every report, none overwritten by a replica that had not seen it.
        async def successful_session(url: str, name: str) -> None:
            async with client(url, name) as session:
                query = {"query": "where are incidents declared", "top_k": 2}
                shown = [m["id"] for m in (await call(session, "recall", query))["memories"]]
                assert shown
                await call(session, "report_outcome", {"outcome": "success", "helpful_ids": shown})

        with anyio.fail_after(TIMEOUT * 3):
            async with anyio.create_task_group() as group:
                for name, url in replicas.items():
                    for number in range(SESSIONS_PER_REPLICA):
                        group.start_soon(successful_session, url, f"worker-{name}-{number}")

    with MemoryStore.open(uri, storage_options=s3_options) as store:
        ids = store._memories.to_arrow().column("id").to_pylist()
        assert len(ids) == len(set(ids)) == len(FACTS["alpha"]) + len(FACTS["bravo"]) + len(SHARED)
        assert set(ids) == set(written["alpha"]) | set(written["bravo"]) | shared_ids
        outcomes = store.outcomes_in_scope(Scope("default", "default"))
        assert len(outcomes) == 2 * SESSIONS_PER_REPLICA
        for memory_id in {m for outcome in outcomes for m in outcome.memory_ids}:
            reports = sum(memory_id in outcome.memory_ids for outcome in outcomes)
            # Every success (each memory named helpful) closes a fifth of the gap to the ceiling 1.75,
            # from 1.0: 1.75 - 0.75 x 0.8^n.
            expected = 1.75 - 0.75 * 0.8**reports
            assert store.get_memory(memory_id).weight == pytest.approx(expected)
