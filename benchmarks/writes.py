"""The write engine, measured from outside: a real `memoria serve` over stdio on a fresh store.

    python -m benchmarks.writes                         # 10,000 writes, then 30 in flight
    python -m benchmarks.writes --writes 3000 --in-flight 30 --concurrent-writes 600
    python -m benchmarks.writes --writes 0 --concurrent-writes 1200 --restatements 0   # concurrency alone
    python -m benchmarks.writes --concurrent-writes 0                                  # endurance alone
    python -m benchmarks.writes --concurrent-writes 0 --repeats 5                      # and its medians

1. Endurance (none with ``--writes 0``): ``--writes`` remembers, one at a time, each followed by a recall
   every tenth write (as an agent works); the server's resident memory (VmRSS of its process) and the write
   rate are sampled every 300 writes. Reported: RSS at start and end, its growth per write, and the rate of writes 2,100-2,400
   against the first 300 (a server that slows with use shows it there).
2. Concurrency: the same number of remembers one at a time, then with ``--in-flight`` calls outstanding
   at once (one MCP session, concurrent requests), in a fresh scope each: writes per second and the ratio.
3. Restatements: ``--restatements`` of those memories said again in other words, one at a time and then
   with ``--in-flight`` outstanding. Consolidation supersedes each restated memory (a status change and a
   lineage event besides the append): the write agents repeat most.
The offline backend (hashed vectors, no reranker) unless ``--embedding-model`` names a local model.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from benchmarks.reporting import RESULTS, add_settings_argument, settings_of, write_json

WINDOW = 300
WORDS = [
    "deploy",
    "billing",
    "service",
    "staging",
    "production",
    "database",
    "postgres",
    "mysql",
    "cache",
    "redis",
    "queue",
    "worker",
    "token",
    "auth",
    "index",
    "shard",
    "replica",
    "migration",
    "schema",
    "rollback",
    "feature",
    "flag",
    "canary",
    "release",
    "incident",
    "pager",
    "alert",
    "metric",
    "dashboard",
    "latency",
    "timeout",
    "retry",
    "webhook",
    "payment",
    "invoice",
    "customer",
    "tenant",
    "region",
    "cluster",
    "node",
    "pod",
    "image",
    "build",
    "pipeline",
    "test",
    "flaky",
    "lint",
    "review",
    "merge",
    "branch",
    "hotfix",
    "config",
    "secret",
    "vault",
    "certificate",
    "dns",
    "proxy",
]


def sentence(rng: random.Random, number: int) -> str:
    words = rng.choices(WORDS, k=rng.randint(8, 16))
    return f"{' '.join(words).capitalize()} (note {number})."


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid``, MB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """CPU time ``pid`` used so far, user and system, every thread (Linux /proc): a write's cost that the
    client's own share of the cores and the machine's other load move less than its rate."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_pid(parent: int) -> int | None:
    """The `memoria serve` process the client started (a child of this process)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), -1)
        if ppid == parent and "serve" in cmdline:
            return int(entry.name)
    return None


def on_disk(db: Path) -> tuple[int, int]:
    """(versions, data files) of the memories table on disk: what maintenance must keep bounded."""
    table = next(db.glob("memories*.lance"), None)
    if table is None:
        return 0, 0
    return len(list((table / "_versions").glob("*"))), len(list((table / "data").glob("*")))


async def run(
    db: Path,
    writes: int,
    in_flight: int,
    concurrent_writes: int,
    env: dict[str, str],
    server_log: Path | None = None,
    restatements: int = 300,
) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "server", "serve"],
        env={**os.environ, **env, "MEMORIA_DB_URI": str(db)},
    )
    rng = random.Random(7)
    report: dict[str, Any] = {}
    with open(server_log or os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await client.list_tools()
            pid = server_pid(os.getpid())
            # Warm: models and the store open, the first write and recall paid for.
            await call(client, "remember", {"content": "warm up the write path", "project_id": "warm"})
            await call(client, "recall", {"query": "warm up", "project_id": "warm"})
            samples = [(0, rss_mb(pid) if pid else float("nan"), 0.0, *on_disk(db))]
            started = window_start = time.perf_counter()
            rates: list[float] = []
            cpu_per_write: list[float] = []  # the server's CPU ms a write, per window
            window_cpu = cpu_seconds(pid) if pid else float("nan")
            for number in range(1, writes + 1):
                await call(client, "remember", {"content": sentence(rng, number), "project_id": "endurance"})
                if number % 10 == 0:
                    await call(
                        client,
                        "recall",
                        {"query": " ".join(rng.choices(WORDS, k=4)), "project_id": "endurance"},
                    )
                if number % WINDOW == 0:
                    now = time.perf_counter()
                    rates.append(WINDOW / (now - window_start))
                    window_start = now
                    cpu = cpu_seconds(pid) if pid else float("nan")
                    cpu_per_write.append((cpu - window_cpu) * 1000 / WINDOW)
                    window_cpu = cpu
                    samples.append(
                        (number, rss_mb(pid) if pid else float("nan"), now - started, *on_disk(db))
                    )
                    print(
                        f"{number} writes, {samples[-1][1]:,.0f} MB, {rates[-1]:.1f}/s, server CPU "
                        f"{cpu_per_write[-1]:.1f} ms a write, memories table on disk: "
                        f"{samples[-1][3]} versions, {samples[-1][4]} data files",
                        file=sys.stderr,
                    )
            first, last = samples[0][1], samples[-1][1]
            late = rates[7] if len(rates) > 7 else None  # writes 2,101-2,400
            report["endurance"] = (
                None
                if not writes
                else {
                    "writes": writes,
                    "rss_start_mb": round(first, 1),
                    "rss_end_mb": round(last, 1),
                    "rss_growth_kb_per_write": round((last - first) * 1024 / writes, 2),
                    "rate_first_300": round(rates[0], 1) if rates else None,
                    "rate_2100_2400": round(late, 1) if late else None,
                    "late_over_first": round(late / rates[0], 3) if late and rates else None,
                    "cpu_ms_per_write_first_300": round(cpu_per_write[0], 2) if cpu_per_write else None,
                    "cpu_ms_per_write_2100_2400": round(cpu_per_write[7], 2)
                    if len(cpu_per_write) > 7
                    else None,
                    "samples": [
                        {
                            "writes": n,
                            "rss_mb": round(r, 1),
                            "seconds": round(s, 1),
                            "versions": v,
                            "data_files": f,
                            "cpu_ms_per_write": round(cpu_per_write[i - 1], 2) if i else None,
                        }
                        for i, (n, r, s, v, f) in enumerate(samples)
                    ],
                }
            )

            if not concurrent_writes:  # endurance alone
                return report
            contents = [sentence(rng, 100_000 + n) for n in range(2 * concurrent_writes)]
            started = time.perf_counter()
            stored: dict[str, str] = {}  # content -> the id of the memory it became
            for content in contents[:concurrent_writes]:
                out = await call(client, "remember", {"content": content, "project_id": "serial"})
                stored[content] = out["id"]
            serial = concurrent_writes / (time.perf_counter() - started)
            latencies: list[float] = []
            limiter = anyio.Semaphore(in_flight)

            async def one(content: str) -> None:
                async with limiter:
                    began = time.perf_counter()
                    out = await call(client, "remember", {"content": content, "project_id": "parallel"})
                    latencies.append((time.perf_counter() - began) * 1000)
                    stored[content] = out["id"]

            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for content in contents[concurrent_writes:]:
                    group.start_soon(one, content)
            parallel = concurrent_writes / (time.perf_counter() - started)
            ordered = sorted(latencies)
            report["concurrency"] = {
                "writes": concurrent_writes,
                "in_flight": in_flight,
                "one_at_a_time_per_s": round(serial, 1),
                "in_flight_per_s": round(parallel, 1),
                "ratio": round(parallel / serial, 2),
                "latency_p50_ms": round(statistics.median(ordered), 1),
                "latency_p95_ms": round(ordered[round(0.95 * (len(ordered) - 1))], 1),
            }
            if restatements:
                report["restatements"] = {
                    "writes": restatements,
                    "one_at_a_time": await restating(
                        client, {c: stored[c] for c in contents[:restatements]}, "serial", 1
                    ),
                    "in_flight": await restating(
                        client,
                        {
                            c: stored[c]
                            for c in contents[concurrent_writes : concurrent_writes + restatements]
                        },
                        "parallel",
                        in_flight,
                    ),
                }
    return report


def restated(content: str) -> str:
    """``content`` said again in other words: the note's number restated (``sentence``'s last words), so
    consolidation's rules find it a near-duplicate of the stored memory and supersede that one."""
    return content.replace(" (note ", " (restated, note ")


async def restating(client: Any, memories: Mapping[str, str], project: str, in_flight: int) -> dict[str, Any]:
    """Remember each of ``memories`` (content -> the id it was stored as) again, restated, with
    ``in_flight`` calls outstanding: the rate, latencies, and how many writes superseded exactly the memory
    they restated."""
    latencies: list[float] = []
    superseded = 0
    limiter = anyio.Semaphore(in_flight)

    async def one(content: str) -> None:
        nonlocal superseded
        async with limiter:
            began = time.perf_counter()
            out = await call(client, "remember", {"content": restated(content), "project_id": project})
            latencies.append((time.perf_counter() - began) * 1000)
            superseded += ((out or {}).get("consolidation") or {}).get("superseded") == [memories[content]]

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for content in memories:
            group.start_soon(one, content)
    elapsed = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "in_flight": in_flight,
        "per_s": round(len(memories) / elapsed, 1),
        "latency_p50_ms": round(statistics.median(ordered), 1),
        "latency_p95_ms": round(ordered[round(0.95 * (len(ordered) - 1))], 1),
        "superseded": superseded,  # writes whose consolidation superseded exactly the memory restated
    }


async def call(client: Any, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content[0].text if result.content else result}")
    return result.structured_content


def endurance_median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over endurance runs of each figure they all report (a run too short for writes
    2,100-2,400 reports None there, and is left out of that figure's median)."""
    keys = ("rss_growth_kb_per_write", "rate_first_300", "rate_2100_2400", "late_over_first")
    medians: dict[str, Any] = {"runs": len(runs)}
    for key in keys:
        values = [run[key] for run in runs if run.get(key) is not None]
        medians[key] = round(statistics.median(values), 3) if values else None
    return medians


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writes", type=int, default=10_000)
    parser.add_argument("--in-flight", type=int, default=30)
    parser.add_argument("--concurrent-writes", type=int, default=600)
    parser.add_argument(
        "--restatements",
        type=int,
        default=300,
        help="remembers that restate earlier ones (consolidation supersedes those), one at a time and in flight",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="endurance runs, each on a fresh store and server; their medians are reported too (a run's rate "
        "over its first 300 writes varied from 72 to 111 a second on one machine, and the ratio with it)",
    )
    parser.add_argument("--embedding-model", type=Path, help="a local sentence-transformers model folder")
    add_settings_argument(parser)
    parser.add_argument(
        "--server-log",
        type=Path,
        help="keep the server's stderr in this file (a repeated run's in NAME.2.log, NAME.3.log, ...)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "writes.json")
    args = parser.parse_args(argv)
    env = {"MEMORIA_ALLOW_MODEL_DOWNLOADS": "false", "HF_HUB_OFFLINE": "1", "MEMORIA_LLM": "none"}
    if args.embedding_model:
        env |= {
            "MEMORIA_EMBEDDER": "sentence-transformers",
            "MEMORIA_EMBEDDING_MODEL": str(args.embedding_model.resolve()),
            "MEMORIA_RERANKER": "none",
        }
    else:
        env |= {"MEMORIA_EMBEDDER": "hashed", "MEMORIA_RERANKER": "none"}
    env |= settings_of(parser, args.set)
    if args.repeats < 1:
        parser.error("--repeats needs 1 or more")
    with tempfile.TemporaryDirectory(prefix="memoria-writes-") as tmp:
        report = anyio.run(
            run,
            Path(tmp) / "store",
            args.writes,
            args.in_flight,
            args.concurrent_writes,
            env,
            args.server_log,
            min(args.restatements, args.concurrent_writes),
        )
    runs = [report["endurance"]] if report["endurance"] else []
    for repeat in range(2, args.repeats + 1 if runs else 0):  # endurance alone, each on a fresh store
        log = (
            args.server_log.with_name(f"{args.server_log.stem}.{repeat}{args.server_log.suffix}")
            if args.server_log
            else None
        )
        with tempfile.TemporaryDirectory(prefix="memoria-writes-") as tmp:
            runs.append(
                anyio.run(run, Path(tmp) / "store", args.writes, args.in_flight, 0, env, log)["endurance"]
            )
    report["settings"] = env
    concurrency = report.get("concurrency")
    for endurance in runs:
        print(
            f"endurance: {endurance['writes']:,} writes, RSS {endurance['rss_start_mb']:,.0f} -> {endurance['rss_end_mb']:,.0f} MB "
            f"({endurance['rss_growth_kb_per_write']} KB a write); writes 2,100-2,400 at {endurance['late_over_first']}x "
            f"the rate of the first 300 ({endurance['rate_2100_2400']} vs {endurance['rate_first_300']} a second; server CPU "
            f"{endurance['cpu_ms_per_write_2100_2400']} vs {endurance['cpu_ms_per_write_first_300']} ms a write)"
        )
    if len(runs) > 1:
        report["endurance_runs"] = runs
        report["endurance_median"] = median = endurance_median(runs)
        print(
            f"median of {len(runs)} endurance runs: {median['rss_growth_kb_per_write']} KB a write; writes 2,100-2,400 "
            f"at {median['late_over_first']}x the rate of the first 300 (each run: "
            f"{', '.join(str(endurance['late_over_first']) for endurance in runs)})"
        )
    if concurrency:
        print(
            f"concurrency: {concurrency['one_at_a_time_per_s']}/s one at a time, {concurrency['in_flight_per_s']}/s with "
            f"{concurrency['in_flight']} in flight ({concurrency['ratio']}x); p50 {concurrency['latency_p50_ms']} ms, "
            f"p95 {concurrency['latency_p95_ms']} ms"
        )
    if "restatements" in report:
        restating_report = report["restatements"]
        serial, parallel = restating_report["one_at_a_time"], restating_report["in_flight"]
        print(
            f"restatements: {restating_report['writes']} remembers restating earlier ones, {serial['per_s']}/s one at a "
            f"time (p50 {serial['latency_p50_ms']} ms), {parallel['per_s']}/s with {parallel['in_flight']} in flight "
            f"(p50 {parallel['latency_p50_ms']} ms, p95 {parallel['latency_p95_ms']} ms); "
            f"{serial['superseded'] + parallel['superseded']} superseded exactly the memory they restated"
        )
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
