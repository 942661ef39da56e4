"""A deterministic synthetic corpus of agent memories: several orgs, projects, agents and episodes, with
paraphrased near-duplicates, so benchmarks run on something shaped like real use (no data files)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

SERVICES = [
    "billing",
    "auth",
    "search",
    "checkout",
    "notifications",
    "reporting",
    "ingest",
    "gateway",
    "scheduler",
    "profile",
]
STORES = [
    "postgres",
    "mysql",
    "redis",
    "sqlite",
    "dynamodb",
    "clickhouse",
    "elasticsearch",
    "kafka",
    "s3",
    "lancedb",
]
TOOLS = ["pnpm", "poetry", "terraform", "helm", "docker compose", "bazel", "make", "uv", "cargo", "gradle"]
PEOPLE = ["Ana", "Bilal", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Jun"]
REASONS = [
    "latency spikes",
    "licensing costs",
    "a security review",
    "on-call load",
    "a customer escalation",
    "flaky tests",
]
TEMPLATES = [
    "The {service} service stores its data in {store}.",
    "We switched the {service} service from {store} to {store2} because of {reason}.",
    "Run `{tool} install` before building the {service} service.",
    "{person} owns the {service} deployment pipeline and reviews every change to it.",
    "The {service} tests are flaky when {store} is not warmed up; rerun them once before debugging.",
    "Connection pool size for {store} in {service} is {number}.",
    "Deploys of {service} happen on {day} after the {time} standup.",
    "The {service} API rate limit is {number} requests per minute per tenant.",
    "A fix for {service}: set the {store} timeout to {number} seconds to stop {reason}.",
    "{person} prefers {tool} over {tool2} for the {service} repository.",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
TIMES = ["9:30", "10:00", "11:15", "14:00"]


@dataclass(frozen=True)
class SyntheticMemory:
    content: str
    org_id: str
    project_id: str
    agent_id: str
    session_id: str
    episode_id: str
    tags: tuple[str, ...]


def sentence(rng: random.Random) -> tuple[str, str]:
    service = rng.choice(SERVICES)
    store, store2 = rng.sample(STORES, 2)
    tool, tool2 = rng.sample(TOOLS, 2)
    text = rng.choice(TEMPLATES).format(
        service=service,
        store=store,
        store2=store2,
        tool=tool,
        tool2=tool2,
        person=rng.choice(PEOPLE),
        reason=rng.choice(REASONS),
        number=rng.randint(2, 500),
        day=rng.choice(DAYS),
        time=rng.choice(TIMES),
    )
    return text, service


def paraphrase(text: str, rng: random.Random) -> str:
    swaps = [
        ("The ", "Our "),
        (" is ", " is set to "),
        ("because of", "due to"),
        ("before", "prior to"),
        (".", "!"),
    ]
    old, new = rng.choice(swaps)
    return text.replace(old, new, 1) if old in text else text + " (confirmed)"


def generate(
    count: int, *, seed: int = 7, orgs: int = 3, projects: int = 3, agents: int = 4
) -> list[SyntheticMemory]:
    rng = random.Random(seed)
    memories: list[SyntheticMemory] = []
    while len(memories) < count:
        org, project = f"org-{rng.randrange(orgs)}", f"project-{rng.randrange(projects)}"
        agent = f"agent-{rng.randrange(agents)}"
        session = f"ses-{len(memories) // 25}"
        episode = f"ep-{len(memories) // 8}"
        text, service = sentence(rng)
        if memories and rng.random() < 0.1:  # a near-duplicate of a recent memory, often by another agent
            source = rng.choice(memories[-50:])
            text, org, project = paraphrase(source.content, rng), source.org_id, source.project_id
        memories.append(
            SyntheticMemory(text + f" [{len(memories)}]", org, project, agent, session, episode, (service,))
        )
    return memories


def queries(count: int, *, seed: int = 11) -> list[tuple[str, str, str]]:
    """(query, org, project) triples phrased like an agent asking mid-task."""
    rng = random.Random(seed)
    forms = [
        "where does the {service} service keep its data?",
        "how do I deploy {service}",
        "{store} timeout problems in {service}",
        "who owns the {service} pipeline",
        "why did we move {service} off {store}",
        "what is the rate limit of the {service} api",
    ]
    return [
        (
            rng.choice(forms).format(service=rng.choice(SERVICES), store=rng.choice(STORES)),
            f"org-{rng.randrange(3)}",
            f"project-{rng.randrange(3)}",
        )
        for _ in range(count)
    ]


MAINTAIN_EVERY = 100_000


def store_corpus(
    runtime: Any,
    memories: Sequence[SyntheticMemory],
    *,
    examined_at: datetime | None = None,
    batch: int = 5_000,
    maintain_every: int | None = MAINTAIN_EVERY,
) -> None:
    """Write ``memories`` as a bulk import does: records built as ``remember`` builds them, embedded and
    inserted a batch at a time; ``examined_at`` stamps them as consolidated on the way in. Every
    ``maintain_every`` memories the store is maintained in line (None: the caller maintains it)."""
    from storage.records import Scope
    from writing.drafts import Draft

    for start in range(0, len(memories), batch):
        if maintain_every and start and start % maintain_every == 0:
            # What the server's maintenance does between batches: fold the new rows into the indexes (a
            # lookup by id scans every row no index covers yet) and compact the appends.
            runtime.store.maintain(min_fragments=runtime.settings.compaction.min_fragments)
        records = [
            replace(
                runtime.writer.prepare(
                    Draft(
                        content=m.content,
                        scope=Scope(m.org_id, m.project_id),
                        agent_id=m.agent_id,
                        session_id=m.session_id,
                        tags=tuple(m.tags),
                        episode_id=m.episode_id,
                    )
                ).record,
                consolidated_at=examined_at,
            )
            for m in memories[start : start + batch]
        ]
        runtime.store.insert_many(runtime.writer.embedded(records))
