"""Several server processes on one store (one per IDE window): no write is lost or duplicated, each sees
the others' writes on its next recall, feedback weights are what a serial replay of the outcome reports
gives, and a retried write or report changes nothing."""

from __future__ import annotations

import random
import string
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters
from mcp_types import Implementation

from retrieval.outcomes import WeightPolicy
from storage.records import Scope, WeightEvent
from storage.store import MemoryStore
from tests.helpers import TIMEOUT, call, connected, scaled, server_with, settings_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PROCESSES = 3
UNIQUE_PER_PROCESS = 25
SHARED = [f"shared fact number {i}: every window learns this" for i in range(10)]
DEFAULT_SCOPE = Scope("default", "default")


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


# ---------------------------------------------------------------- writes, recalls and reports at once

WRITERS = 4
ITEMS_PER_WRITER = scaled(40, 500)
ITEMS_PER_SESSION = 10
RECALL_EVERY = 5


@dataclass
class SessionLog:
    """What the test sent for one session: the memories its recalls put into a context and the score of
    its last report."""

    context_ids: set[str] = field(default_factory=set)
    score: float | None = None


@dataclass
class Shared:
    """What the writers acknowledged, as the test saw it."""

    acknowledged: dict[str, str] = field(default_factory=dict)  # id -> content
    latest: dict[int, tuple[str, str]] = field(default_factory=dict)  # writer -> (content, id) last stored
    first: dict[int, tuple[str, str]] = field(default_factory=dict)  # writer -> (content, id) first stored
    sessions: dict[str, SessionLog] = field(default_factory=dict)
    cross_recalls: int = 0  # recalls that found another process's newest write
    statuses: Counter[str] = field(default_factory=Counter)


def unique_words(rng: random.Random, k: int = 6) -> str:
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=7)) for _ in range(k))


async def report(client: Client, shared: Shared, session: str, rng: random.Random) -> None:
    """Report the session's outcome (a label or an explicit score); sometimes again unchanged, sometimes
    corrected."""
    label = rng.choice(["success", "failure", "partial"])
    arguments: dict[str, Any] = {"outcome": label, "session_id": session}
    if rng.random() < 0.5:
        arguments["score"] = round(rng.random(), 3)
        if label != "partial":  # the label on the score's side of partial (a contradiction is refused)
            arguments["outcome"] = "success" if arguments["score"] >= 0.5 else "failure"
        else:  # a partial's score lies strictly between 0 and 1 (0.0 is refused: a CI run drew it)
            arguments["score"] = min(max(arguments["score"], 0.001), 0.999)
    out = await call(client, "report_outcome", arguments)
    shared.statuses[out["status"]] += 1
    roll = rng.random()
    if roll < 0.2:  # the same report again: nothing moves
        again = await call(client, "report_outcome", arguments)
        assert again["status"] == "unchanged" and again["revision"] == out["revision"]
        assert all(u["weight_before"] == u["weight_after"] for u in again["updated"])
        shared.statuses["unchanged"] += 1
    elif roll < 0.4:  # a correction replaces the report, keeping its place in the replay order
        arguments = {"outcome": "failure" if label != "failure" else "success", "session_id": session}
        corrected = await call(client, "report_outcome", arguments)
        assert corrected["status"] == "replaced" and corrected["revision"] == out["revision"] + 1
        shared.statuses["replaced"] += 1
        out = corrected
    shared.sessions[session].score = out["score"]


async def writer(db, number: int, shared: Shared, rng: random.Random) -> None:
    """One server process: remembers its items in sessions of ITEMS_PER_SESSION, recalls every
    RECALL_EVERY items (another process's newest write when there is one, or at a session's end its first
    write, which must be found), and reports each session's outcome."""
    async with Client(
        params(db),
        client_info=Implementation(name=f"writer-{number}", version="1"),
        read_timeout_seconds=TIMEOUT,
    ) as client:
        for item in range(ITEMS_PER_WRITER):
            session = f"w{number}-s{item // ITEMS_PER_SESSION}"
            log = shared.sessions.setdefault(session, SessionLog())
            content = f"writer {number} note {item}: {unique_words(rng)}"
            out = await call(client, "remember", {"content": content, "session_id": session})
            assert out["status"] == "stored", out
            shared.acknowledged[out["id"]] = content
            shared.latest[number] = (content, out["id"])
            shared.first.setdefault(number, (content, out["id"]))
            if item % RECALL_EVERY == RECALL_EVERY - 1:
                others = [w for w in shared.latest if w != number]
                source = rng.choice(others) if others else number
                # A session's last recall looks for a writer's first memory: WRITERS of them for every
                # session, so some memory is credited by two sessions' reports (the check below needs one).
                last = item % ITEMS_PER_SESSION == ITEMS_PER_SESSION - 1
                query, wanted = (shared.first if last else shared.latest)[source]
                recalled = await call(client, "recall", {"query": query, "session_id": session, "top_k": 5})
                found = [m["id"] for m in recalled["memories"]]
                assert wanted in found, f"writer {number} did not find {wanted} ({query!r}): {found}"
                shared.cross_recalls += source != number and not last
                log.context_ids.update(found)
            if item % ITEMS_PER_SESSION == ITEMS_PER_SESSION - 1 or item == ITEMS_PER_WRITER - 1:
                await report(client, shared, session, rng)


def expected_weights(policy: WeightPolicy, ids: list[str], credits: dict[str, list[Any]]) -> dict[str, float]:
    """Every memory's weight replayed serially from its credit in each session's current report, in the
    order sessions first reported."""
    return {
        memory_id: policy.replay_credits((c.credit.share, c.credit.score) for c in credits.get(memory_id, []))
        for memory_id in ids
    }


def test_the_replay_policy_is_the_ema_the_docs_describe():
    # Worked by hand (alpha 0.2, weights in [0.25, 1.75]): a success targets 1.75, a failure 0.25.
    # success then failure: 0.8 x 1.0 + 0.2 x 1.75 = 1.15; then 0.8 x 1.15 + 0.2 x 0.25 = 0.97.
    # failure then success: 0.8 x 1.0 + 0.2 x 0.25 = 0.85; then 0.8 x 0.85 + 0.2 x 1.75 = 1.03.
    policy = WeightPolicy()
    assert policy.replay([1.0, 0.0]) == pytest.approx(0.97)
    assert policy.replay([0.0, 1.0]) == pytest.approx(1.03)  # the order matters: hence a replay order
    assert policy.replay([0.5]) == pytest.approx(1.0)


async def test_four_processes_writing_recalling_and_reporting_at_once_agree_with_a_serial_replay(tmp_path):
    seed = random.SystemRandom().randrange(2**32)
    db = tmp_path / "shared-store"
    shared = Shared()
    started = time.monotonic()
    try:
        with anyio.fail_after(TIMEOUT * 3 + ITEMS_PER_WRITER * 2):
            async with anyio.create_task_group() as group:
                for number in range(WRITERS):
                    group.start_soon(writer, db, number, shared, random.Random(seed + number))
    except Exception as exc:
        raise AssertionError(f"seed {seed}: {exc!r}") from exc
    elapsed = time.monotonic() - started

    settings = settings_for(db)
    policy = WeightPolicy(
        settings.feedback.ema_alpha, settings.feedback.min_weight, settings.feedback.max_weight
    )
    with MemoryStore.open(str(db)) as store:
        rows = store._memories.to_arrow().select(["id", "weight"]).to_pylist()
        outcomes = store.outcomes_in_scope(DEFAULT_SCOPE)
        credits = store.credits_for(DEFAULT_SCOPE, [row["id"] for row in rows])
        events = [WeightEvent(**row) for row in store._weight_events.to_arrow().to_pylist()]
    ids = [row["id"] for row in rows]
    stored = {row["id"]: row["weight"] for row in rows}

    # 0 lost, 0 duplicated.
    assert len(shared.acknowledged) == WRITERS * ITEMS_PER_WRITER
    assert sorted(set(shared.acknowledged) - set(ids)) == []
    assert [i for i, count in Counter(ids).items() if count > 1] == []
    assert set(ids) == set(shared.acknowledged)

    # The stored reports are the ones sent: one per session, its last score, credit for the memories its
    # recalls put into a context (filler below the relevance floor gets none).
    assert {o.session_id: o.score for o in outcomes} == {s: log.score for s, log in shared.sessions.items()}
    for o in outcomes:
        context_ids = shared.sessions[o.session_id].context_ids
        assert set(o.memory_ids) <= context_ids and bool(o.memory_ids) == bool(context_ids)

    # Every weight is the serial replay, in first-reported order: the same arithmetic, so the same floats.
    assert stored == expected_weights(policy, ids, credits)
    moved = [i for i in ids if stored[i] != 1.0]
    reported_twice = [i for i in ids if sum(i in o.memory_ids for o in outcomes) >= 2]
    assert moved and reported_twice

    # The weight history of each memory is a chain from 1.0 to its stored weight (events round to 6 places).
    history: dict[str, list[WeightEvent]] = {}
    for event in sorted(events, key=lambda e: (e.at, e.revision)):
        history.setdefault(event.memory_id, []).append(event)
    for memory_id, chain in history.items():
        befores = [e.weight_before for e in chain]
        afters = [e.weight_after for e in chain]
        assert befores == pytest.approx([1.0, *afters[:-1]], abs=1e-6), memory_id
        assert afters[-1] == pytest.approx(stored[memory_id], abs=1e-6), memory_id
    assert set(history) <= set().union(*(o.memory_ids for o in outcomes))
    assert all(stored[i] == 1.0 for i in set(ids) - set(history))

    print(
        f"\n{WRITERS} processes x {ITEMS_PER_WRITER} remember in {elapsed:.0f} s (seed {seed}): "
        f"{len(ids)} memories, 0 lost, 0 duplicated; {len(outcomes)} sessions reported "
        f"({dict(shared.statuses)}); {len(ids)} weights equal to the serial replay ({len(moved)} moved, "
        f"{len(reported_twice)} by 2+ reports); {len(events)} weight events chained; "
        f"{shared.cross_recalls} recalls found another process's newest write"
    )


# ---------------------------------------------------------------- retried calls


async def test_a_remember_retried_after_a_client_timeout_is_stored_once(tmp_path):
    db = tmp_path / "shared-store"
    content = "The release checklist lives in docs/release.md"
    async with Client(
        params(db), client_info=Implementation(name="impatient", version="1"), read_timeout_seconds=TIMEOUT
    ) as client:
        await call(client, "recall", {"query": "warm up"})  # the runtime is built: the write runs now
        with pytest.raises(MCPError):
            await client.call_tool("remember", {"content": content}, read_timeout_seconds=0.001)
        retried = await call(client, "remember", {"content": content})
        again = await call(client, "remember", {"content": content})
    assert retried["status"] in ("stored", "duplicate")  # whether the abandoned call had written yet
    assert again["status"] == "duplicate" and again["id"] == retried["id"]
    with MemoryStore.open(str(db)) as store:
        assert store._memories.to_arrow().column("id").to_pylist() == [retried["id"]]


async def test_reporting_the_same_outcome_twice_through_mcp_leaves_the_weights_as_the_first_report_set_them(
    tmp_path,
):
    settings = settings_for(tmp_path / "store")
    async with connected(server_with(settings), "reporter") as client:
        for text in ["postgres pool size is 20", "postgres runs on port 5432"]:
            await call(client, "remember", {"content": text})
        recalled = await call(client, "recall", {"query": "postgres pool", "top_k": 2})
        in_context = [m["id"] for m in recalled["memories"]]
        named = {"outcome": "success", "helpful_ids": in_context}
        first = await call(client, "report_outcome", named)
        second = await call(client, "report_outcome", named)
    assert in_context and first["status"] == "applied" and second["status"] == "unchanged"
    assert {u["id"]: u["weight_after"] for u in first["updated"]} == dict.fromkeys(in_context, 1.15)
    # 0.8 x 1.0 + 0.2 x 1.75 = 1.15, and the repeat moves nothing
    assert {u["id"]: (u["weight_before"], u["weight_after"]) for u in second["updated"]} == dict.fromkeys(
        in_context, (1.15, 1.15)
    )
    with MemoryStore.open(settings.db_uri) as store:
        weights = {row["id"]: row["weight"] for row in store._memories.to_arrow().to_pylist()}
        events = store._weight_events.to_arrow().num_rows
    assert {i: round(w, 9) for i, w in weights.items()} == {
        i: 1.15 if i in in_context else 1.0 for i in weights
    }
    assert events == len(in_context)  # the repeat wrote no history
