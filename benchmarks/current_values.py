"""Values stated again and again: does recall show the current one, and leave room for the rest?

    python -m benchmarks.current_values                          # offline backend
    python -m benchmarks.current_values --embedding-model FOLDER # a local sentence-transformers folder
    python -m benchmarks.current_values --restatements 12 --services 10

A team's agents state the same few things of each service again as they change ("payments-api listens on
port 8412", "payments-api runs 6 replicas", "payments-api's request timeout is 30 seconds"), beside facts
that do not change (its language, owner, region, database, deploy day and alerts channel). The facts are
made here from templates (a seeded random), remembered one at a time through a real ``memoria serve`` over
stdio on a fresh store, in time order, the changing values interleaved with each other and with the other
services'. Then, through the same session:

- **value questions** ("which port does payments-api listen on?", one per changing thing and service):
  whether the current value is in the context, whether it is the first of that thing's values there, and
  how many older values of it the context holds;
- **overview questions** ("what do we know about payments-api?"): how many of the service's six facts
  that do not change the context holds, and how many older values.

Reported as shares and means over the questions, with the top_k each asked with.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import anyio

from benchmarks.quality import model_settings
from benchmarks.reporting import OFFLINE_SERVER_ENV, RESULTS, write_json
from benchmarks.writes import call

SERVICES = (
    "payments-api",
    "ledger-worker",
    "search-gateway",
    "profile-service",
    "inventory-api",
    "mailer",
    "image-proxy",
    "checkout-web",
    "fraud-scorer",
    "audit-log",
    "pricing-engine",
    "session-store",
)
# What each service says once (the six facts that do not change).
STEADY = (
    "{s} is written in {language}",
    "{s} is owned by {owner}",
    "{s} runs in the {region} region",
    "{s} stores its data in {database}",
    "{s} deploys on {day}s",
    "Alerts for {s} go to the {channel} Slack channel",
)
LANGUAGES = ("Go", "Rust", "Kotlin", "TypeScript", "Python", "Elixir")
OWNERS = ("Dana Kim", "Marco Rossi", "Priya Nair", "Lena Ortiz", "Sam Okafor", "Yuki Tanaka")
REGIONS = ("eu-west-1", "us-east-2", "ap-south-1", "eu-central-1")
DATABASES = ("Postgres", "DynamoDB", "Cassandra", "MySQL", "Redis")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday")
# The things stated again with another value, and the question that asks for each.
CHANGING = (
    ("{s} listens on port {v}", lambda rng: str(rng.randrange(7000, 9999)), "which port does {s} listen on?"),
    (
        "{s} runs {v} replicas in production",
        lambda rng: str(rng.randrange(2, 40)),
        "how many replicas does {s} run?",
    ),
    (
        "The request timeout of {s} is {v} seconds",
        lambda rng: str(rng.randrange(5, 120)),
        "what is the request timeout of {s}?",
    ),
)


class Workload(NamedTuple):
    facts: list[str]  # in the order they are remembered
    steady: dict[str, list[str]]  # per service, its facts that do not change
    values: dict[tuple[str, int], list[str]]  # per (service, changing thing), its values' texts, oldest first


def workload(services: int, restatements: int, seed: int) -> Workload:
    """The facts, the steady ones and the values (the last of each is current)."""
    rng = random.Random(seed)
    facts: list[str] = []
    steady: dict[str, list[str]] = {}
    values: dict[tuple[str, int], list[str]] = {}
    chosen = SERVICES[:services]
    for service in chosen:
        steady[service] = [
            template.format(
                s=service,
                language=rng.choice(LANGUAGES),
                owner=rng.choice(OWNERS),
                region=rng.choice(REGIONS),
                database=rng.choice(DATABASES),
                day=rng.choice(DAYS),
                channel=f"#{service}-alerts",
            )
            for template in STEADY
        ]
        facts.extend(steady[service])
    pending = [
        (service, thing) for service in chosen for thing in range(len(CHANGING)) for _ in range(restatements)
    ]
    rng.shuffle(pending)
    for service, thing in pending:
        template, value_of, _ = CHANGING[thing]
        said = values.setdefault((service, thing), [])
        text = template.format(s=service, v=value_of(rng))
        while text in said:  # every restatement another value
            text = template.format(s=service, v=value_of(rng))
        said.append(text)
        facts.append(text)
    return Workload(facts, steady, values)


async def run(db: Path, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "server", "serve"],
        env={**os.environ, **env, "MEMORIA_DB_URI": str(db)},
    )
    facts, steady, values = workload(args.services, args.restatements, args.seed)
    value_rows: list[dict[str, Any]] = []
    overview_rows: list[dict[str, Any]] = []
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            for text in facts:
                await call(client, "remember", {"content": text})
            for (service, thing), said in values.items():
                question = CHANGING[thing][2].format(s=service)
                found = await call(client, "recall", {"query": question, "top_k": args.top_k})
                shown = [memory["content"] for memory in found["memories"]]
                of_it = [text for text in shown if text in said]
                value_rows.append(
                    {
                        "current_shown": said[-1] in shown,
                        "current_first": bool(of_it) and of_it[0] == said[-1],
                        "older_shown": sum(1 for text in of_it if text != said[-1]),
                        "quoted_only": said[-1] not in shown and said[-1] in found["context"],
                    }
                )
            for service in SERVICES[: args.services]:
                found = await call(
                    client, "recall", {"query": f"what do we know about {service}?", "top_k": args.top_k}
                )
                shown = [memory["content"] for memory in found["memories"]]
                older = {text for (s, _), said in values.items() if s == service for text in said[:-1]}
                current = {said[-1] for (s, _), said in values.items() if s == service}
                overview_rows.append(
                    {
                        "steady_shown": sum(1 for text in shown if text in steady[service]),
                        "current_shown": sum(1 for text in shown if text in current),
                        "older_shown": sum(1 for text in shown if text in older),
                        "placed": len(shown),
                    }
                )
    return {
        "memories": len(facts),
        "value_questions": {
            "n": len(value_rows),
            "current_shown": statistics.mean(r["current_shown"] for r in value_rows),
            "current_first": statistics.mean(r["current_first"] for r in value_rows),
            "current_only_quoted": statistics.mean(r["quoted_only"] for r in value_rows),
            "older_values_shown_mean": statistics.mean(r["older_shown"] for r in value_rows),
        },
        "overview_questions": {
            "n": len(overview_rows),
            "steady_facts_shown_mean": statistics.mean(r["steady_shown"] for r in overview_rows),
            "current_values_shown_mean": statistics.mean(r["current_shown"] for r in overview_rows),
            "older_values_shown_mean": statistics.mean(r["older_shown"] for r in overview_rows),
            "placed_mean": statistics.mean(r["placed"] for r in overview_rows),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--services", type=int, default=8, help="services (at most 12)")
    parser.add_argument("--restatements", type=int, default=8, help="values stated of each changing thing")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--embedding-model", help="a local sentence-transformers folder (else the offline backend)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "current_values.json")
    args = parser.parse_args(argv)
    env = dict(OFFLINE_SERVER_ENV)
    if args.embedding_model:
        env |= model_settings(Path(args.embedding_model))
    with tempfile.TemporaryDirectory() as tmp:
        report = anyio.run(run, Path(tmp) / "store", args, env)
    report |= {
        "services": args.services,
        "restatements": args.restatements,
        "top_k": args.top_k,
        "backend": args.embedding_model or "offline",
    }
    values, overview = report["value_questions"], report["overview_questions"]
    print(
        f"{report['memories']} memories ({args.services} services, {args.restatements} values of each of 3 "
        f"things), top_k {args.top_k}, {report['backend']}"
    )
    print(
        f"value questions ({values['n']}): current value shown {values['current_shown']:.3f}, first of its "
        f"values {values['current_first']:.3f}, only quoted {values['current_only_quoted']:.3f}; older values "
        f"shown {values['older_values_shown_mean']:.2f} a context"
    )
    print(
        f"overview questions ({overview['n']}): of 6 steady facts {overview['steady_facts_shown_mean']:.2f} "
        f"shown, current values {overview['current_values_shown_mean']:.2f} of 3, older values "
        f"{overview['older_values_shown_mean']:.2f}, {overview['placed_mean']:.1f} memories placed"
    )
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
