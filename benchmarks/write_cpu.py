"""Where a remember's processor time goes, and what the MCP SDK alone costs a call.

    python -m benchmarks.write_cpu                      # 2,500 stored, 500 timed, 2,500 in flight
    python -m benchmarks.write_cpu --stored 1000 --timed 200 --in-flight-writes 600

With 30 remembers in flight a server is bound by the interpreter (one core's worth of Python threads at a
time), so its rate is about one over the processor time a write costs. Two parts:

1. In process, one thread: ``--stored`` remembers written, then ``--timed`` more, each timed by the
   writing thread's processor time, whole and by step (the methods of ``STEPS``, each wrapped with a timer;
   the steps nest, as their names say), and the whole by the process's: LanceDB commits and reads on
   threads of its own, which the thread's time leaves out. The offline backend, no language model.
2. Over stdio, ``--in-flight`` remembers outstanding at once on one MCP session (the client of
   ``benchmarks.writes``), ``--in-flight-writes`` of them: against ``memoria serve`` on a fresh store, then
   against a server built on the same SDK whose ``remember`` tool does nothing (started by this module
   with ``--serve-noop``). For each: calls a second, and the server's processor time a call (user and
   system, all threads, from /proc), and what memoria adds to the SDK's own cost.

A benchmark's instrument, not the server's: it wraps private methods by name and reports ``missing``
when one is gone, so that a renamed method shows instead of a step silently not timed.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from benchmarks.reporting import OFFLINE_SERVER_ENV, RESULTS, offline_settings, write_json
from benchmarks.writes import call, sentence, server_pid

# (module, class, method, what it is called in the report), outermost first
STEPS: tuple[tuple[str, str, str, str], ...] = (
    ("writing.service", "WriteService", "_insert_coalesced", "insert: ids read, embedded, journal, commit"),
    ("writing.service", "WriteService", "embedded", "insert: embedding"),
    ("writing.service", "WriteService", "_consolidate_new", "consolidation, whole"),
    ("writing.consolidation.service", "ConsolidationService", "_revise", "consolidation: revision rule"),
    ("writing.consolidation.service", "ConsolidationService", "_neighbours", "consolidation: neighbours"),
    ("storage.scope_copy", "ScopeCopy", "nearest", "consolidation: neighbours: nearest in the scope copy"),
    (
        "writing.consolidation.service",
        "ConsolidationService",
        "_contradictions",
        "consolidation: contradictions",
    ),
    (
        "writing.consolidation.service",
        "ConsolidationService",
        "_lexical_neighbours",
        "consolidation: neighbours by their words (full-text)",
    ),
    ("storage.generations", "VersionWatch", "current", "store: version checks (any caller)"),
)


def _timed(totals: dict[str, list[float]], label: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def timer(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return method(*args, **kwargs)
        finally:
            entry = totals.setdefault(label, [0.0, 0.0])
            entry[0] += 1
            entry[1] += time.thread_time() - started

    return timer


def install(totals: dict[str, list[float]]) -> tuple[Callable[[], None], list[str]]:
    """Wrap every step of ``STEPS`` that exists; returns the undo and the steps that are gone."""
    undo: list[Callable[[], None]] = []
    missing: list[str] = []
    for module_name, class_name, method_name, label in STEPS:
        owner = getattr(importlib.import_module(module_name), class_name, None)
        method = getattr(owner, method_name, None) if owner is not None else None
        if method is None:
            missing.append(f"{module_name}.{class_name}.{method_name}")
            continue
        setattr(owner, method_name, _timed(totals, label, method))
        undo.append(functools.partial(setattr, owner, method_name, method))

    def unwrap() -> None:
        for step in reversed(undo):
            step()

    return unwrap, missing


def in_process(stored: int, timed: int) -> dict[str, Any]:
    """Processor time per remember, whole and by step, on a store holding ``stored`` memories."""
    from server.state import build_runtime
    from tools.common import Caller
    from tools.remember import RememberInput, remember

    rng = random.Random(7)
    caller = Caller("bench", "write-cpu")
    totals: dict[str, list[float]] = {}
    # Wrapped before the runtime is built: the write service hands its bound methods to the group commit.
    undo, missing = install(totals)
    try:
        with tempfile.TemporaryDirectory(prefix="memoria-write-cpu-") as tmp:
            runtime = build_runtime(offline_settings(Path(tmp) / "store"))
            try:
                for number in range(stored):
                    remember(RememberInput(content=sentence(rng, number), project_id="cpu"), runtime, caller)
                totals.clear()
                started, process_started = time.thread_time(), time.process_time()
                for number in range(timed):
                    content = sentence(rng, stored + number)
                    remember(RememberInput(content=content, project_id="cpu"), runtime, caller)
                whole = time.thread_time() - started
                process = time.process_time() - process_started
            finally:
                runtime.close()
    finally:
        undo()
    steps = {
        label: {
            "calls_per_remember": round(totals[label][0] / timed, 2),
            "ms_per_remember": round(totals[label][1] / timed * 1000, 3),
        }
        for *_, label in STEPS
        if label in totals
    }
    return {
        "stored": stored,
        "timed": timed,
        "ms_per_remember": round(whole / timed * 1000, 3),
        # every thread's: LanceDB's own (its commits and reads run on its threads) and the runtime's
        "process_ms_per_remember": round(process / timed * 1000, 3),
        "steps": steps,
        "missing": missing,
    }


def _cpu_seconds(pid: int) -> float:
    """User and system time of every thread of ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def in_flight(args: list[str], env: dict[str, str], writes: int, outstanding: int) -> dict[str, Any]:
    """``writes`` remembers, ``outstanding`` at a time, against the stdio server ``python args``."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=args, env={**os.environ, **env})
    rng = random.Random(11)
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await client.list_tools()
            pid = server_pid(os.getpid())
            if pid is None:
                raise RuntimeError(
                    f"the server started with {args} was not found among this process's children"
                )
            for number in range(100):  # warm: the store open, the first writes paid for
                await call(client, "remember", {"content": sentence(rng, number), "project_id": "cpu"})
            limit = anyio.Semaphore(outstanding)

            async def one(content: str) -> None:
                async with limit:
                    await call(client, "remember", {"content": content, "project_id": "cpu"})

            cpu_before, started = _cpu_seconds(pid), time.perf_counter()
            async with anyio.create_task_group() as group:
                for number in range(writes):
                    group.start_soon(one, sentence(rng, 100_000 + number))
            elapsed, cpu = time.perf_counter() - started, _cpu_seconds(pid) - cpu_before
    return {
        "writes": writes,
        "in_flight": outstanding,
        "per_s": round(writes / elapsed, 1),
        "server_cores": round(cpu / elapsed, 2),
        "server_cpu_ms_per_call": round(cpu / writes * 1000, 2),
    }


def serve_noop() -> None:
    """A stdio MCP server on the same SDK whose ``remember`` answers at once: the SDK's own cost a call."""
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("noop")

    @app.tool()
    def remember(content: str, project_id: str = "cpu") -> dict[str, str]:
        """Answer as a remember would, storing nothing."""
        return {"id": "mem_noop", "content": content, "project_id": project_id}

    app.run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stored", type=int, default=2_500, help="memories stored before the timed ones")
    parser.add_argument("--timed", type=int, default=500, help="remembers timed in process")
    parser.add_argument("--in-flight", type=int, default=30)
    parser.add_argument(
        "--in-flight-writes",
        type=int,
        default=2_500,
        help="remembers sent with --in-flight outstanding (0: the in-process part only)",
    )
    parser.add_argument("--serve-noop", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS / "write_cpu.json")
    args = parser.parse_args(argv)
    if args.serve_noop:
        serve_noop()
        return 0
    report: dict[str, Any] = {"in_process": in_process(args.stored, args.timed)}
    env = dict(OFFLINE_SERVER_ENV)
    if args.in_flight_writes > 0:  # 0: the in-process part only
        with tempfile.TemporaryDirectory(prefix="memoria-write-cpu-") as tmp:
            env["MEMORIA_DB_URI"] = str(Path(tmp) / "store")
            report["memoria"] = anyio.run(
                in_flight, ["-m", "server", "serve"], env, args.in_flight_writes, args.in_flight
            )
        report["sdk_only"] = anyio.run(
            in_flight,
            ["-m", "benchmarks.write_cpu", "--serve-noop"],
            {},
            args.in_flight_writes,
            args.in_flight,
        )
        report["memoria_adds_ms_per_call"] = round(
            report["memoria"]["server_cpu_ms_per_call"] - report["sdk_only"]["server_cpu_ms_per_call"], 2
        )
    write_json(args.out, report)
    inside = report["in_process"]
    print(
        f"in process, one thread, {inside['stored']:,} stored: {inside['ms_per_remember']:.2f} ms of the writing "
        f"thread's CPU a remember, {inside['process_ms_per_remember']:.2f} ms of the process's (LanceDB's threads too)"
    )
    for label, step in inside["steps"].items():
        print(f"  {label:58s} {step['calls_per_remember']:5.2f} calls  {step['ms_per_remember']:6.3f} ms")
    if inside["missing"]:
        print(f"  not timed (gone): {', '.join(inside['missing'])}")
    if "memoria" not in report:
        return 0
    for name in ("memoria", "sdk_only"):
        run = report[name]
        print(
            f"{name}: {run['writes']:,} remembers, {run['in_flight']} in flight: {run['per_s']:.1f} a second, "
            f"server {run['server_cores']:.2f} cores, {run['server_cpu_ms_per_call']:.2f} ms of CPU a call"
        )
    print(f"memoria adds {report['memoria_adds_ms_per_call']:.2f} ms of server CPU a call to the SDK's own")
    return 0


if __name__ == "__main__":
    sys.exit(main())
