"""Batches of developer facts that state other values of the same things, written through `remember_many`.

    python -m benchmarks.batches                       # 20 batches of 100, then 100 single remembers
    python -m benchmarks.batches --batches 10 --singles 0

A team's agents write what they learn in batches ("billing-api listens on port 8007 in staging", "Alerts
for checkout route to the team-3 PagerDuty schedule", ...), and the same things are stated again with other
values as they change: each such fact disputes the earlier values (an open contradiction per pair, which
recall marks). The facts are made here from templates (ten services, ten kinds of fact, a seeded random),
as a new user's trial wrote them. A real ``memoria serve`` over stdio on a fresh store (offline backend,
no language model); reported: each batch's seconds and memories a second (the first and last three
batches apart: the cost must not grow with the store), single remembers of the same kind afterwards
(p50 / p95 ms), the contradictions recorded, and that table's versions and data files on disk.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks.reporting import (
    OFFLINE_SERVER_ENV,
    RESULTS,
    add_settings_argument,
    settings_of,
    write_json,
)
from benchmarks.writes import call

SERVICES = (
    "billing-api",
    "auth-service",
    "search-indexer",
    "notification-worker",
    "payments-gateway",
    "user-profile",
    "inventory-sync",
    "report-generator",
    "image-resizer",
    "email-dispatcher",
)
TAGS = ("ops", "db", "ci", "oncall", "security", "frontend", "backend", "infra", "release", "perf")


def fact(rng: random.Random, number: int) -> tuple[str, list[str]]:
    """One developer fact and its tags; about one in ten states a value another fact of its kind states
    otherwise (a port, a schedule, a database number, a TTL)."""
    service, kind = rng.choice(SERVICES), rng.randrange(10)
    text = (
        f"{service} listens on port {8000 + number % 500} in staging",
        f"{service} deploys are blocked on Fridays after 15:00 UTC (change freeze #{number})",
        f"The {service} runbook lives at docs/runbooks/{service}-{number}.md",
        f"{service} uses feature flag ff_{service.replace('-', '_')}_{number} for the new checkout path",
        f"CI job {service}-test-{number} needs the DOCKER_BUILDKIT=1 environment variable",
        f"{service} retries idempotent calls 3 times with jitter; non-idempotent ones never (decision {number})",
        f"Alerts for {service} route to the team-{number % 17} PagerDuty schedule",
        f"{service} schema migration {number:04d} must run before deploy on {rng.choice(['staging', 'production'])}",
        f"{service} caches user sessions in Redis db {number % 16} with a {rng.choice([5, 15, 30, 60])} minute TTL",
        f"Load test {number}: {service} handled {rng.randint(100, 5000)} rps at p99 {rng.randint(20, 900)} ms",
    )[kind]
    return text, [TAGS[kind], service]


def _rows(db: Path, name: str) -> int:
    import lancedb

    return int(lancedb.connect(str(db)).open_table(name).count_rows())


def table_on_disk(db: Path, name: str) -> dict[str, int]:
    table = db / f"{name}.lance"
    return {
        "versions": len(list((table / "_versions").glob("*"))),
        "data_files": len(list((table / "data").glob("*"))),
    }


async def run(db: Path, batches: int, size: int, singles: int, env: dict[str, str]) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "server", "serve"],
        env={**os.environ, **env, "MEMORIA_DB_URI": str(db)},
    )
    rng = random.Random(7)
    seconds: list[float] = []
    single_ms: list[float] = []
    disputed = 0
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await client.list_tools()
            await call(client, "recall", {"query": "warm up"})
            for batch in range(batches):
                items = []
                for number in range(batch * size, (batch + 1) * size):
                    text, tags = fact(rng, number)
                    items.append({"content": text, "tags": tags})
                started = time.perf_counter()
                await call(client, "remember_many", {"items": items})
                seconds.append(time.perf_counter() - started)
            for number in range(singles):
                text, tags = fact(rng, batches * size + number)
                started = time.perf_counter()
                out = await call(client, "remember", {"content": text, "tags": tags})
                single_ms.append((time.perf_counter() - started) * 1000)
                disputed += len((out.get("consolidation") or {}).get("contradicts") or [])
    first, last = seconds[: min(3, len(seconds))], seconds[-min(3, len(seconds)) :]
    report: dict[str, Any] = {
        "batches": batches,
        "batch_size": size,
        "batch_seconds": [round(s, 3) for s in seconds],
        "batch_seconds_median": round(statistics.median(seconds), 3),
        "per_s_first_3": round(size * len(first) / sum(first), 1),
        "per_s_last_3": round(size * len(last) / sum(last), 1),
        "per_s_all": round(size * len(seconds) / sum(seconds), 1),
        "contradictions_table": table_on_disk(db, "contradictions"),
        "contradictions_recorded": _rows(db, "contradictions"),
    }
    if single_ms:
        ordered = sorted(single_ms)
        report["singles"] = {
            "count": singles,
            "p50_ms": round(statistics.median(ordered), 1),
            "p95_ms": round(ordered[max(0, round(0.95 * len(ordered)) - 1)], 1),
            "values_disputed": disputed,
        }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument(
        "--singles", type=int, default=100, help="single remembers of the same kind afterwards"
    )
    add_settings_argument(parser)
    parser.add_argument("--out", type=Path, default=RESULTS / "batches.json")
    args = parser.parse_args(argv)
    if args.batches < 1 or args.batch_size < 1 or args.singles < 0:
        parser.error("--batches and --batch-size need 1 or more, --singles 0 or more")
    env = OFFLINE_SERVER_ENV | settings_of(parser, args.set)
    with tempfile.TemporaryDirectory(prefix="memoria-batches-") as tmp:
        report = anyio.run(run, Path(tmp) / "store", args.batches, args.batch_size, args.singles, env)
    write_json(args.out, report)
    print(
        f"remember_many of {args.batch_size}: median {report['batch_seconds_median']} s; "
        f"{report['per_s_first_3']} a second in the first 3 batches, {report['per_s_last_3']} in the last 3; "
        f"contradictions table {report['contradictions_table']}"
        + (
            f"; single remembers p50 {report['singles']['p50_ms']} ms, p95 {report['singles']['p95_ms']} ms"
            if "singles" in report
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
