"""Crashes. A server killed with SIGKILL at random points during bulk writes: the store opens every time,
every acknowledged write is there, and none twice. A newest manifest a power cut left empty: the server
starts on the version before and says so on stderr.

The servers are the real console entry point over stdio, driven by an MCP client; a shell wrapper writes
the server's pid to a file before it ``exec``s, so the test can kill exactly that process. The kill
delays are random: MEMORIA_CRASH_SEED=<seed> replays a failing run's choices (a failure names its seed;
the timing of the kills still varies)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import string
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import anyio
import lancedb
import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation

from retrieval.text import content_hash
from storage import migrations, recovery, schema
from storage.records import Scope
from storage.store import PURGE_JOURNAL, MemoryStore
from tests.forensics import files_holding, traces_of
from tests.helpers import TIMEOUT, call, scaled
from tools.common import memory_id_for

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and /bin/sh are POSIX"),
]

KILLS = scaled(5, 100)
SEED = int(os.environ.get("MEMORIA_CRASH_SEED") or random.SystemRandom().randrange(2**32))
DEFAULT_SCOPE = Scope("default", "default")
TABLES = [
    schema.META,
    schema.MEMORIES,
    schema.EPISODES,
    schema.RETRIEVALS,
    schema.AB_LOGS,
    schema.OUTCOMES,
    schema.WEIGHT_EVENTS,
    schema.ATTESTATIONS,
    schema.LINEAGE,
    schema.CONTRADICTIONS,
]
# The server takes about 1.5 s to build its runtime (migrations, recovery) after the handshake: kills this
# soon after connecting land there; the others land this long after the round's first acknowledged write.
STARTUP_KILL_WITHIN = 1.5
WRITE_KILL_WITHIN = 0.8
STARTUP_KILL_SHARE = 0.15
SINGLE_WRITERS = 4  # concurrent single remembers per round: their inserts are coalesced into shared commits


def server_params(db: Path, pid_file: Path, *, maintenance_seconds: float = 0.5) -> StdioServerParameters:
    env = {
        "MEMORIA_DB_URI": str(db),
        "MEMORIA_EMBEDDER": "hashed",
        "MEMORIA_RERANKER": "none",
        "MEMORIA_MAINTENANCE_INTERVAL_SECONDS": str(maintenance_seconds),
    }
    wrapper = 'echo $$ > "$0"; exec "$1" -m server serve'  # $$ is the server's pid once it execs
    return StdioServerParameters(
        command="/bin/sh", args=["-c", wrapper, str(pid_file), sys.executable], env=env
    )


@asynccontextmanager
async def server(params: StdioServerParameters, errlog: TextIO, name: str) -> AsyncIterator[Client]:
    async with Client(
        stdio_client(params, errlog=errlog),
        client_info=Implementation(name=name, version="1"),
        read_timeout_seconds=TIMEOUT,
    ) as client:
        yield client


def expected_id(content: str) -> str:
    return memory_id_for(DEFAULT_SCOPE, content_hash(content))


@dataclass
class Ledger:
    """What the client sent and what the server acknowledged, across every round."""

    acknowledged: dict[str, str] = field(default_factory=dict)  # content -> id the server answered
    in_flight: dict[str, None] = field(default_factory=dict)  # sent, not answered (ordered)
    kills_in_startup: int = 0
    retried: int = 0
    resent: set[str] = field(default_factory=set)
    # Resent writes the server already held: the kill came after their commit, before the answer.
    landed_unanswered: int = 0

    def send(self, contents: list[str]) -> None:
        self.in_flight.update(dict.fromkeys(contents))

    def answered(self, contents: list[str], answers: list[dict[str, str]]) -> None:
        for content, answer in zip(contents, answers, strict=True):
            assert answer["id"] == expected_id(content)
            self.acknowledged[content] = answer["id"]
            self.in_flight.pop(content, None)
            self.landed_unanswered += content in self.resent and answer["status"] == "duplicate"


class Words:
    """Contents no two alike and no near-duplicates (consolidation leaves them all active): a serial
    number and random made-up words."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._serial = 0

    def __call__(self) -> str:
        self._serial += 1
        words = ("".join(self._rng.choices(string.ascii_lowercase, k=7)) for _ in range(6))
        return f"crash note {self._serial}: {' '.join(words)}"


async def write_until_killed(
    client: Client, ledger: Ledger, words: Words, killed: anyio.Event, *, batch: int, retry: list[str]
) -> None:
    """remember (``batch`` 1) or remember_many, one call after another, until the kill ends the
    connection; ``retry`` is sent again first (what a client does after a lost answer)."""
    first = True
    try:
        while True:
            contents = retry if first and retry else [words() for _ in range(batch)]
            first = False
            ledger.send(contents)
            if batch == 1 and len(contents) == 1:
                out = await call(client, "remember", {"content": contents[0]})
                ledger.answered(contents, [out])
            else:
                items = [
                    {"content": text, "episode_id": f"ep-{len(ledger.acknowledged)}"} for text in contents
                ]
                out = await call(client, "remember_many", {"items": items})
                ledger.answered(contents, out["results"])
    except MCPError:
        if not killed.is_set():
            raise


async def crash_round(db: Path, tmp: Path, ledger: Ledger, words: Words, rng: random.Random) -> None:
    """Start a server, write with two callers at once on its connection (remember, and remember_many in
    batches), SIGKILL it at a random point. Contents the previous kill left unanswered are sent again
    first."""
    retry = list(ledger.in_flight)
    ledger.retried += len(retry)
    ledger.resent.update(retry)
    in_startup = rng.random() < STARTUP_KILL_SHARE
    delay = rng.uniform(0, STARTUP_KILL_WITHIN if in_startup else WRITE_KILL_WITHIN)
    ledger.kills_in_startup += in_startup
    acknowledged_before = len(ledger.acknowledged)
    pid_file = tmp / "server.pid"
    pid_file.unlink(missing_ok=True)
    killed = anyio.Event()

    async def kill() -> None:
        pid = int(pid_file.read_text())
        if not in_startup:
            while len(ledger.acknowledged) == acknowledged_before:
                await anyio.sleep(0.005)
        await anyio.sleep(delay)
        killed.set()
        os.kill(pid, signal.SIGKILL)

    with (tmp / "stderr.log").open("w") as errlog, anyio.fail_after(TIMEOUT):
        async with (
            server(server_params(db, pid_file), errlog, "crash-test") as client,
            anyio.create_task_group() as group,
        ):
            group.start_soon(kill)
            # Single remembers from several callers at once share group commits; a batch goes beside them.
            for single in range(SINGLE_WRITERS):
                group.start_soon(
                    lambda single=single: write_until_killed(
                        client, ledger, words, killed, batch=1, retry=retry[single : single + 1]
                    )
                )
            group.start_soon(
                lambda: write_until_killed(
                    client, ledger, words, killed, batch=rng.randint(5, 40), retry=retry[SINGLE_WRITERS:]
                )
            )


def check_store(db: Path, ledger: Ledger) -> int:
    """Open the store as a restarted server would, read every table whole, and check the memories: every
    acknowledged id once, nothing that was never sent. Returns the number of memories."""
    with MemoryStore.open(str(db)) as store:
        for name in TABLES:
            store._db.open_table(name).to_arrow()
        ids = store._memories.to_arrow().column("id").to_pylist()
    duplicated = sorted(memory_id for memory_id, count in Counter(ids).items() if count > 1)
    lost = sorted(set(ledger.acknowledged.values()) - set(ids))
    sent = set(ledger.acknowledged.values()) | {expected_id(text) for text in ledger.in_flight}
    assert (lost, duplicated) == ([], []), f"lost {len(lost)}, duplicated {len(duplicated)}"
    assert set(ids) <= sent, "the store holds a memory no client sent"
    return len(ids)


async def test_a_server_killed_at_random_points_during_bulk_writes_loses_no_acknowledged_write(tmp_path):
    rng = random.Random(SEED)
    db = tmp_path / "store"
    ledger = Ledger()
    words = Words(rng)
    started = time.monotonic()
    for number in range(1, KILLS + 1):
        try:
            await crash_round(db, tmp_path, ledger, words, rng)
            check_store(db, ledger)
        except Exception as exc:
            log = (tmp_path / "stderr.log").read_text()[-3000:] if (tmp_path / "stderr.log").exists() else ""
            raise AssertionError(
                f"kill {number} of {KILLS} (MEMORIA_CRASH_SEED={SEED}): {exc!r}\nserver stderr:\n{log}"
            ) from exc

    # A fresh server starts on what the kills left, finds what they acknowledged and goes on writing.
    sample = rng.sample(sorted(ledger.acknowledged), k=min(5, len(ledger.acknowledged)))
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with server(server_params(db, tmp_path / "server.pid"), errlog, "after-crashes") as client:
            for content in sample:
                recalled = await call(client, "recall", {"query": content, "top_k": 3})
                assert ledger.acknowledged[content] in [m["id"] for m in recalled["memories"]], SEED
            after = await call(client, "remember", {"content": "written after the last crash"})
    ledger.answered(["written after the last crash"], [after])
    stored = check_store(db, ledger)
    print(
        f"\n{KILLS} SIGKILLs ({ledger.kills_in_startup} during start-up) in {time.monotonic() - started:.0f} s, "
        f"seed {SEED}: {len(ledger.acknowledged)} acknowledged writes all present once "
        f"({stored} memories stored; {ledger.retried} unanswered writes sent again, "
        f"{ledger.landed_unanswered} of them already stored)"
    )


async def test_a_power_cut_newest_manifest_is_set_aside_and_the_server_starts_on_the_version_before(
    tmp_path,
):
    db = tmp_path / "store"
    params = server_params(db, tmp_path / "server.pid", maintenance_seconds=3600)
    facts = [
        "The billing service retries webhooks three times",
        "Staging deploys need the VPN profile called orca",
        "The cut-off write: nightly backups moved to 02:00 UTC",
    ]
    with (tmp_path / "first.log").open("w") as errlog:
        async with server(params, errlog, "before-the-cut") as client:
            ids = [(await call(client, "remember", {"content": fact}))["id"] for fact in facts]
    versions = db / f"{schema.MEMORIES}.lance" / recovery.VERSIONS_DIR
    newest = max(
        (path for path in versions.iterdir() if recovery.version_of(path.name) is not None),
        key=lambda path: recovery.version_of(path.name) or 0,
    )
    version = recovery.version_of(newest.name)
    newest.write_bytes(b"")  # the power cut: the rename reached the disk, the manifest's bytes did not

    log_path = tmp_path / "second.log"
    with log_path.open("w") as errlog:
        async with server(params, errlog, "after-the-cut") as client:
            found = {
                fact: [m["id"] for m in (await call(client, "recall", {"query": fact}))["memories"]]
                for fact in facts
            }
    assert ids[0] in found[facts[0]] and ids[1] in found[facts[1]]
    assert ids[2] not in found[facts[2]]  # the write that manifest recorded
    stderr = log_path.read_text()
    assert (
        f"WARNING storage.recovery: {schema.MEMORIES}: the newest manifest (version {version}) was empty "
        f"(a write cut off by a crash); starting on version {version - 1}"
    ) in stderr
    assert (db / recovery.QUARANTINE_DIR / schema.MEMORIES / newest.name).exists()


PURGE_KILLS = scaled(8, 60)
PURGE_KILL_WITHIN = (
    0.25  # a purge through the server takes about this long here: kills land before, in, after
)


async def test_a_purge_killed_at_any_point_is_finished_at_the_next_start_or_never_began(tmp_path):
    """SIGKILL at a random moment of a purge: when the store opens again, either nothing was purged (the
    memory is whole, with no purge in its lineage) or the purge is finished: the memory reads as purged,
    its text is in no file of the store (traces included), its lineage holds the purge exactly once."""
    rng = random.Random(SEED + 1)
    outcomes: Counter[str] = Counter()
    for number in range(1, PURGE_KILLS + 1):
        db = tmp_path / f"round-{number}"
        token = f"zq{number}SECRET{rng.randrange(10**6)}xk"
        secret = f"{token} is the vault passphrase"
        pid_file = tmp_path / "server.pid"
        pid_file.unlink(missing_ok=True)
        delay = rng.uniform(0, PURGE_KILL_WITHIN)
        try:
            with (tmp_path / "stderr.log").open("w") as errlog, anyio.fail_after(TIMEOUT):
                async with server(server_params(db, pid_file), errlog, "purger") as client:
                    items = [
                        {"content": text, "episode_id": "vault"}
                        for text in ("Where is the vault?", secret, "Thanks")
                    ]
                    out = await call(client, "remember_many", {"items": items})
                    memory_id = out["results"][1]["id"]
                    await call(client, "recall", {"query": "vault passphrase"})  # a trace quotes it

                    async def purge(target: str) -> None:
                        with contextlib.suppress(MCPError):
                            await client.call_tool("forget", {"memory_id": target, "mode": "purge"})

                    async with anyio.create_task_group() as group:
                        group.start_soon(purge, memory_id)
                        await anyio.sleep(delay)
                        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except Exception as exc:
            if not isinstance(exc, (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)):
                raise
        begun = any(key.startswith(PURGE_JOURNAL) for key in migrations.read_meta(lancedb.connect(str(db))))
        with MemoryStore.open(str(db)) as store:  # a restarted server: finishes what was begun
            memory = store.get_memory(memory_id)
            events = [e.action for e in store.lineage(DEFAULT_SCOPE, [memory_id])]
            traces = " ".join(traces_of(store._retrievals))
        on_disk = files_holding(db, token.encode())
        context = f"round {number}, kill after {delay:.3f} s (MEMORIA_CRASH_SEED={SEED})"
        if memory.status == "purged":
            assert (memory.content, events.count("purge"), on_disk) == ("", 1, []), context
            assert token not in traces, context
            outcomes["finished at the restart" if begun else "finished before the kill"] += 1
        else:
            assert (memory.status, memory.content, "purge" in events) == ("active", secret, False), context
            outcomes["never began"] += 1
    print(f"\n{PURGE_KILLS} purges killed at random (seed {SEED}): {dict(outcomes)}")
