"""HTTP load benchmark, one command: concurrent MCP clients against the real server over streamable HTTP on
loopback, with bearer-token auth on, for a fixed time; reports latency percentiles and every error.

    python -m benchmarks.load                              # 50 clients for 60 s (the issue's bound)
    python -m benchmarks.load --clients 5 --seconds 5      # a quick look
    python -m benchmarks.load --rate 25                    # open loop: 25 calls a second due, below saturation
    python -m benchmarks.load --warm-up 0                  # count the first seconds too (cold scope copies)
    python -m benchmarks.load --seconds 45 --trace-writes  # and where the server's write time went
    python -m benchmarks.load --seconds 45 --without report_outcome  # no client waits on the reports' queue

The server (``python -m server serve --http``, offline backend) starts on a store preloaded with the
synthetic corpus (9 scopes), stamped as already examined by consolidation (a store in steady state). Each client is its own principal with its own static token and MCP session,
and loops until the time is up: 70% recall (a corpus question in its scope), 20% remember (a new fact),
5% explain_ranking of its last recall, 5% report_outcome for its session. An error is a tool error, a
protocol error or a failed request. The load generator shares the machine's cores with the server.

Closed loop (the default), 50 clients keep the server saturated: the calls answered in the run times
their mean latency is 50 clients x the run's seconds, so the run measures throughput, and a faster tool
leaves its clients more time to wait on the others. With ``--rate`` calls are due at a fixed mean rate
whatever the answers (an open loop): the latency of each tool at that load, counted from when the
call was due, so a server that falls behind shows it. An open loop counts from the first moment after
the warm-up at which the server has caught up (every client connected, no call in flight for more than
0.5 s since it was due), so that no counted call waits behind the warm-up's, and runs ``--seconds`` from
then; the report says how long that took (if the server has not caught up within 30 s, it counts from
then and says so).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from benchmarks.corpus import generate, queries, store_corpus
from benchmarks.perf import percentile
from benchmarks.reporting import RESULTS, add_settings_argument, offline_settings, settings_of, write_json
from benchmarks.write_probe import DUMP_EVERY_SECONDS, probe_env, summarise

# An open loop counts from the first moment after its warm-up at which every client is connected and no call
# in flight has waited longer than CAUGHT_UP_LAG seconds since it was due (a backlog), or CATCH_UP_SECONDS
# after the warm-up at the latest.
CAUGHT_UP_LAG = 0.5
CATCH_UP_SECONDS = 30.0

MIX: tuple[tuple[str, int], ...] = (
    ("recall", 70),
    ("remember", 20),
    ("explain_ranking", 5),
    ("report_outcome", 5),
)


def preload(db: Path, memories: int) -> None:
    from server.state import build_runtime

    runtime = build_runtime(offline_settings(db))
    try:
        # Stamped as examined by consolidation, as benchmarks.perf imports: the measurement is of a store in
        # steady state, not of one whose first consolidation sweep over every memory is still running.
        store_corpus(runtime, generate(memories), examined_at=runtime.clock())
        runtime.store.maintain(min_fragments=runtime.settings.compaction.min_fragments)
    finally:
        runtime.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def served(
    db: Path, tokens: dict[str, str], folder: Path, extra_env: dict[str, str] | None = None
) -> Iterator[tuple[str, int]]:
    """The real server over HTTP with one static token per client (``extra_env``: more MEMORIA_*
    settings); yields its URL and process id once it answers."""
    entries = [{"principal": name, "token": token, "write": ["*/*"]} for name, token in tokens.items()]
    (folder / "tokens.json").write_text(json.dumps({"tokens": entries}))
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "MEMORIA_DB_URI": str(db),
        "MEMORIA_EMBEDDER": "hashed",
        "MEMORIA_RERANKER": "none",
        "MEMORIA_LLM": "none",
        "MEMORIA_HTTP_TOKENS_FILE": str(folder / "tokens.json"),
        "MEMORIA_LOG_LEVEL": "WARNING",
        **(extra_env or {}),
    }
    with open(folder / "server.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "server", "serve", "--http", f"127.0.0.1:{port}"],
            env=env,
            stdout=log,
            stderr=log,
        )
        try:
            url = f"http://127.0.0.1:{port}/mcp"
            wait_until_up(port, process, folder / "server.log")
            yield url, process.pid
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_until_up(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start:\n{log.read_text()[-2000:]}") from None
            time.sleep(0.1)


def cpu_seconds(pid: int) -> float | None:
    """The CPU time a process has used (user and system, every thread), from ``/proc``; None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


class Tally:
    def __init__(self, mix: tuple[tuple[str, int], ...] = MIX) -> None:
        self.mix = mix  # the tools the clients call, with their weights
        self.latencies: dict[str, list[float]] = {name: [] for name, _ in mix}
        self.errors: Counter[str] = Counter()
        self.failed_requests = 0  # errors without an answer (no latency recorded)
        self.examples: list[str] = []
        self.counted_from = 0.0  # perf_counter: calls due before it are the warm-up's, made but not counted
        self.warm_up_calls = 0
        self.in_flight: dict[object, float] = {}  # calls sent and not answered yet: when each was due
        self.connected = 0  # clients whose MCP session is open
        self.made = 0  # calls sent, counted or not
        # Open loop: seconds past the warm-up until the server had caught up, when counting began; and
        # whether it had before CATCH_UP_SECONDS were out (False: counting began then all the same).
        self.caught_up_after: float | None = None
        self.caught_up = True

    def error(self, tool: str, message: str) -> None:
        self.errors[tool] += 1
        if len(self.examples) < 5:
            self.examples.append(f"{tool}: {message[:200]}")


class Client:
    """One client's choices: its own random stream, its questions and its last recall (for explain_ranking)."""

    def __init__(self, name: str, seed: int, mix: tuple[tuple[str, int], ...] = MIX) -> None:
        self.name = name
        self.mix = mix
        self.rng = random.Random(seed)
        self.asks = queries(50, seed=seed)
        self.last_retrieval: dict[str, str] | None = None  # its id and scope
        self.written = 0
        self.said: Counter[str] = Counter()  # how often this client remembered a fact about each question

    def next_call(self) -> tuple[str, dict[str, Any]]:
        tool = self.rng.choices([name for name, _ in self.mix], [weight for _, weight in self.mix])[0]
        query, org, project = self.rng.choice(self.asks)
        if tool == "explain_ranking" and self.last_retrieval is None:
            tool = "recall"
        arguments: dict[str, Any] = {"org_id": org, "project_id": project}
        if tool == "recall":
            arguments["query"] = query
        elif tool == "remember":
            self.written += 1
            # Said again by this client, a fact restates what it said before: the same words and one more
            # ("again"), which consolidation's near-exact rule supersedes, as it did the numbered notes of
            # earlier versions of this benchmark ("fact 5: ..." then "fact 9: ..."), which a number swapped
            # for another now keeps apart as two facts.
            again = self.said[query]
            self.said[query] += 1
            arguments["content"] = (
                f"{self.name} noted: {query} was answered in the runbook" + " again" * again
            )
        elif tool == "explain_ranking":
            arguments = dict(self.last_retrieval or {})
        else:
            arguments["outcome"] = self.rng.choice(["success", "failure", "partial"])
        return tool, arguments


async def call_once(
    session: Any, me: Client, tool: str, arguments: dict[str, Any], tally: Tally, started: float
) -> None:
    """One call; its latency counts from ``started`` (for an open loop, the moment it was due)."""
    call = object()
    tally.in_flight[call] = started
    tally.made += 1
    try:
        result = await session.call_tool(tool, arguments)
    except Exception as exc:  # a failed request counts as an error, and the client carries on
        if started >= tally.counted_from:
            tally.failed_requests += 1
        else:
            tally.warm_up_calls += 1
        tally.error(tool, f"{type(exc).__name__}: {exc}")
        return
    finally:
        del tally.in_flight[call]
    if started >= tally.counted_from:
        tally.latencies[tool].append((time.perf_counter() - started) * 1000)
    else:
        tally.warm_up_calls += 1
    if result.is_error:
        tally.error(tool, str(getattr(result.content[0], "text", result.content[0])))
    elif tool == "recall" and result.structured_content:
        retrieval_id = result.structured_content["retrieval_id"]
        me.last_retrieval = {
            "retrieval_id": retrieval_id,
            "org_id": arguments["org_id"],
            "project_id": arguments["project_id"],
        }


async def client_loop(
    url: str,
    name: str,
    token: str,
    seconds: float,
    tally: Tally,
    seed: int,
    rate: float | None = None,
    until: Callable[[], float] | None = None,
) -> None:
    """Closed loop (``rate`` None): the next call as soon as the last one answered. Open loop: calls due
    at ``rate`` a second (exponential gaps, seeded), each sent when due whether or not the ones before
    it answered, its latency counted from when it was due."""
    import httpx2
    from mcp import Client as McpClient
    from mcp.client.streamable_http import streamable_http_client
    from mcp_types import Implementation

    me = Client(name, seed, tally.mix)
    async with (
        # Idle connections are dropped before the server's own 5 s keep-alive ends: an open loop leaves a
        # client idle for seconds, and a request sent on a connection the server is closing fails.
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
            limits=httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=2.0),
        ) as http,
        McpClient(
            streamable_http_client(url, http_client=http),
            client_info=Implementation(name=name, version="1"),
            read_timeout_seconds=120,
        ) as session,
    ):
        tally.connected += 1
        if rate is None:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                tool, arguments = me.next_call()
                await call_once(session, me, tool, arguments, tally, time.perf_counter())
        else:
            await open_loop(session, me, rate, seconds, tally, until)


async def open_loop(
    session: Any,
    me: Client,
    rate: float,
    seconds: float,
    tally: Tally,
    until: Callable[[], float] | None = None,
) -> None:
    """``me``'s calls for ``seconds``, due at ``rate`` a second (seeded exponential gaps), each sent as its
    own task when due, whether or not the ones before it were answered; returns once all were. ``until``:
    a moment (``time.perf_counter()``) up to which calls are due as well, read before each call: a run
    whose counting starts once the warm-up's calls are answered goes on until its counted seconds are
    over."""
    start = time.perf_counter()
    due = me.rng.expovariate(rate)  # seconds after start
    async with anyio.create_task_group() as calls:
        while due < seconds or (until is not None and start + due < until()):
            await anyio.sleep(max(0.0, start + due - time.perf_counter()))
            tool, arguments = me.next_call()
            calls.start_soon(call_once, session, me, tool, arguments, tally, start + due)
            due += me.rng.expovariate(rate)


def caught_up(tally: Tally, clients: int, now: float) -> bool:
    """Every one of ``clients`` connected, and no call in flight due more than ``CAUGHT_UP_LAG`` ago."""
    return tally.connected >= clients and all(now - due <= CAUGHT_UP_LAG for due in tally.in_flight.values())


async def start_counting(tally: Tally, warm_up_ends: float, open_loop: bool, clients: int = 0) -> None:
    """Set ``tally.counted_from``: the end of the warm-up in a closed loop, where calls are always in flight.
    In an open loop, the first moment after it at which the server has caught up (``caught_up``: no call
    waiting behind a backlog), so that no counted call waits behind the warm-up's: the first recall of
    each scope builds its copy, and at 25 calls a second the calls due in the first seconds after a 5 s
    warm-up waited 0.6-2.1 s behind those builds (recall p95 1,807 ms against 91-182 ms once caught up).
    At the latest ``CATCH_UP_SECONDS`` after the warm-up, noted as not caught up."""
    await anyio.sleep(max(0.0, warm_up_ends - time.perf_counter()))
    if open_loop:
        give_up = warm_up_ends + CATCH_UP_SECONDS
        while not caught_up(tally, clients, time.perf_counter()) and time.perf_counter() < give_up:
            await anyio.sleep(0.002)
        now = time.perf_counter()
        tally.caught_up = caught_up(tally, clients, now)
        tally.caught_up_after = max(0.0, now - warm_up_ends)
        tally.counted_from = now
    else:
        tally.counted_from = warm_up_ends


def run_load(
    clients: int,
    seconds: float,
    memories: int,
    seed: int = 5,
    rate: float | None = None,
    extra_env: dict[str, str] | None = None,
    warm_up: float = 0.0,
    trace_writes: bool = False,
    without: tuple[str, ...] = (),
) -> dict[str, Any]:
    """``without``: tools left out of the mix (the others keep their weights). ``rate``: calls a second
    from all clients together, sent when due (an open loop); None: each client calls again as soon as it has its answer (a closed loop, the server saturated). ``warm_up``:
    seconds of calls first, made but not counted (the first recall of each scope builds its copy).
    ``trace_writes``: the server times its write path (``benchmarks.write_probe``), over its whole life
    (warm-up included), reported as ``write_path``."""
    with tempfile.TemporaryDirectory(prefix="memoria-load-") as folder_name:
        folder = Path(folder_name)
        db = folder / "db"
        probe = folder / "write-path.json"
        if trace_writes:
            traced = probe_env(probe)
            if extra_env and extra_env.get("PYTHONPATH"):
                traced["PYTHONPATH"] += os.pathsep + extra_env["PYTHONPATH"]
            extra_env = {**(extra_env or {}), **traced}
        started = time.perf_counter()
        preload(db, memories)
        preload_seconds = time.perf_counter() - started
        tokens = {
            f"client-{i:02d}": f"load-token-{i:02d}-{random.Random(i).getrandbits(64):016x}"
            for i in range(clients)
        }
        tally = Tally(tuple((name, weight) for name, weight in MIX if name not in without))
        cpu: dict[str, float | None] = {}
        with served(db, tokens, folder, extra_env) as (url, pid):

            async def counting_from() -> None:
                await start_counting(tally, began + warm_up, open_loop=rate is not None, clients=clients)
                cpu["from"] = cpu_seconds(pid)

            async def everyone() -> None:
                async with anyio.create_task_group() as group:
                    group.start_soon(counting_from)
                    for number, (name, token) in enumerate(tokens.items()):
                        group.start_soon(
                            client_loop,
                            url,
                            name,
                            token,
                            warm_up + seconds,
                            tally,
                            seed + number,
                            None if rate is None else rate / clients,
                            lambda: tally.counted_from + seconds,
                        )

            began = time.perf_counter()
            # Closed loop: the warm-up's end; open loop: set once the warm-up's calls are answered.
            tally.counted_from = began + warm_up if rate is None else math.inf
            anyio.run(everyone)
            elapsed = time.perf_counter() - tally.counted_from
            cpu["to"] = cpu_seconds(pid)
            if trace_writes:
                time.sleep(2 * DUMP_EVERY_SECONDS)  # the probe's last write, before the server is stopped
        write_path = summarise(probe) if trace_writes and probe.exists() else None
    every = [ms for values in tally.latencies.values() for ms in values]
    begun, ended = cpu.get("from"), cpu.get("to")
    used = ended - begun if begun is not None and ended is not None else None
    return {
        "clients": clients,
        "seconds": seconds,
        "rate": rate,
        "warm_up_seconds": warm_up,
        "warm_up_calls": tally.warm_up_calls,
        "calls_made": tally.made,
        **(
            {"caught_up_after_seconds": round(tally.caught_up_after or 0.0, 2), "caught_up": tally.caught_up}
            if rate is not None
            else {}
        ),
        "memories": memories,
        "mix": {name: weight for name, weight in tally.mix},
        "preload_seconds": round(preload_seconds, 1),
        "elapsed_seconds": round(elapsed, 1),
        "calls": len(every) + tally.failed_requests,
        "calls_per_second": round(len(every) / elapsed, 1) if elapsed else 0.0,
        "errors": sum(tally.errors.values()),
        "errors_by_tool": dict(tally.errors),
        "error_examples": tally.examples,
        # The server's CPU over the counted time (every thread: the interpreter's and LanceDB's), per call
        # answered. It includes the warm-up calls still in flight when counting began (a closed loop's, or
        # an open loop's that had not caught up) and the sessions' closing at the end: a little above each
        # call's own share.
        "server_cpu_ms_per_call": round(used * 1000 / len(every), 2) if used is not None and every else None,
        "server_cores": round(used / elapsed, 2) if used is not None and elapsed else None,
        "overall": latency(every),
        "by_tool": {tool: latency(values) for tool, values in tally.latencies.items()},
        **({"write_path": write_path} if trace_writes else {}),
    }


def latency(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 0.50), 1),
        "p95_ms": round(percentile(values, 0.95), 1),
        "p99_ms": round(percentile(values, 0.99), 1),
    }


def render(report: dict[str, Any]) -> str:
    loop = (
        "closed loop" if report.get("rate") is None else f"open loop, {report['rate']:g} calls a second due"
    )
    lines = [
        f"{report['clients']} clients ({loop}) for {report['seconds']:.0f} s"
        + (f" after {report['warm_up_seconds']:g} s of warm-up" if report.get("warm_up_seconds") else "")
        + caught_up_note(report)
        + f" on {report['memories']:,} memories: "
        f"{report['calls']:,} calls ({report['calls_per_second']}/s), errors: {report['errors']}"
        + (
            f"; without {', '.join(left)}"
            if (left := [n for n, _ in MIX if n not in report.get("mix", dict(MIX))])
            else ""
        ),
        f"{'tool':<16}{'calls':>8}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}",
    ]
    for tool, figures in [("all", report["overall"]), *report["by_tool"].items()]:
        if figures["n"]:
            lines.append(
                f"{tool:<16}{figures['n']:>8}{figures['p50_ms']:>10}{figures['p95_ms']:>10}{figures['p99_ms']:>10}"
            )
    if report.get("server_cpu_ms_per_call") is not None:
        lines.append(
            f"server CPU: {report['server_cpu_ms_per_call']} ms a call answered, "
            f"{report['server_cores']} cores in use"
        )
    lines.extend(f"error: {example}" for example in report["error_examples"])
    if "write_path" in report:
        lines.extend(render_write_path(report["write_path"]))
    return "\n".join(lines)


def caught_up_note(report: dict[str, Any]) -> str:
    """How long after its warm-up an open-loop run began counting (once the server had caught up)."""
    after = report.get("caught_up_after_seconds")
    if after is None or (after < 0.05 and report.get("caught_up", True)):
        return ""
    if not report.get("caught_up", True):
        return (
            f" (and {after:g} s more: a call had waited over {CAUGHT_UP_LAG:g} s at every moment, counted "
            "from then all the same)"
        )
    return f" (and {after:g} s more, until no call had waited over {CAUGHT_UP_LAG:g} s)"


def render_write_path(traced: dict[str, Any] | None) -> list[str]:
    """The server's write path as ``--trace-writes`` timed it (its whole life, warm-up included)."""
    if traced is None:
        return ["write path: the server wrote no timings (was it started from this checkout?)"]
    lines = [f"{'write path (server, whole run)':<58}{'calls':>7}{'p50 ms':>9}{'p95 ms':>9}{'total s':>9}"]
    for name, figures in sorted(traced["steps"].items()):
        lines.append(
            f"{name:<58}{figures['n']:>7}{figures['p50_ms']:>9}{figures['p95_ms']:>9}{figures['total_s']:>9}"
        )
    for name, figures in list(traced.get("holds_by_caller", {}).items())[:10]:
        lines.append(f"{figures['n']:>5} x p50 {figures['p50_ms']} ms, {figures['total_s']} s: {name}")
    for name, figures in list(traced["long_holds"].items())[:6]:
        lines.append(f"{figures['n']:>5} x p50 {figures['p50_ms']} ms, {figures['total_s']} s: {name}")
    lines.extend(f"not timed (no such method): {missing}" for missing in traced["missing"])
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--memories", type=int, default=10_000, help="preloaded synthetic memories")
    parser.add_argument(
        "--rate",
        type=float,
        help="calls a second from all clients together, each sent when due (an open loop; latency "
        "counted from when it was due); without it each client calls again once answered",
    )
    parser.add_argument(
        "--warm-up",
        type=float,
        default=5.0,
        help="seconds of calls made first and not counted (default 5: the first recall of each of the 9 "
        "scopes builds its copy, which a server that has run a while has; 0 counts every call). An open "
        "loop counts from the first moment after it at which no call has waited over 0.5 s",
    )
    parser.add_argument(
        "--trace-writes",
        action="store_true",
        help="the server times its write path (the write service's steps, each lock's waits and holds, "
        "the call stacks of long holds) and the report shows where a remember's time goes",
    )
    parser.add_argument(
        "--without",
        nargs="+",
        default=[],
        choices=[name for name, _ in MIX if name != "recall"],
        help="leave these tools out of the mix: without report_outcome, the clients a slow report holds "
        "call recall and remember instead (the closed loop's throughput and the other tools' latency then)",
    )
    add_settings_argument(parser)
    parser.add_argument("--out", type=Path, default=RESULTS / "load.json")
    args = parser.parse_args(argv)
    if args.rate is not None and args.rate <= 0:
        parser.error("--rate must be above 0")
    if args.warm_up < 0:
        parser.error("--warm-up must be 0 or more")
    extra_env = settings_of(parser, args.set)
    report = run_load(
        args.clients,
        args.seconds,
        args.memories,
        rate=args.rate,
        extra_env=extra_env,
        warm_up=args.warm_up,
        trace_writes=args.trace_writes,
        without=tuple(args.without),
    )
    report["settings"] = extra_env
    print(render(report), file=sys.stdout)
    write_json(args.out, report)
    return 0 if report["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
