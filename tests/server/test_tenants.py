"""No recall, explain, expansion, corroboration count, feedback weight or drift view crosses an org/project
boundary.

Hypothesis draws a few tenants (org/project pairs): quote injections, LIKE wildcards, backslashes, unicode
look-alikes and near-collisions (one org with two projects; pairs whose concatenation is the same, like
("a", "b c") and ("a b", "c")). The same story is written into each, through one MCP client: identical
content, restated word for word by a second agent (an attestation) and nearly by a third (a corroboration
cluster), an episode (siblings to expand), a revision and a contradiction (drift), and in some tenants an
outcome report (feedback weights). Sessions, episodes and tags carry the same injection strings in every tenant;
agents are the tenant's own, so any foreign name or id in a view is a leak. Then every view of every
tenant is read: recall (memories and context), explain_ranking (every candidate, its corroborating agents
and episode source), drift, lineage and forget's dry run show only the tenant's ids, agents and text;
corroboration counts count its agents only; its feedback weights move by its own reports alone
(expected by hand: a success takes the global weight 1.0 to 0.8 x 1.0 + 0.2 x 1.75 = 1.15, a failure to
0.85, and the named memories' weight for a query as close as the session's to 1.75 and 0.25); and a
lookup of another tenant's memory or retrieval finds nothing. Half the examples search LanceDB itself
(no scope copies), so the store's typed filters are exercised as well as the copies.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mcp import Client

from retrieval.models.embedders.hashed import HashedEmbedder
from retrieval.models.providers import BackendInfo, Models
from retrieval.text import index_terms
from server.app import build_server
from server.config import Settings
from server.state import assemble_runtime
from storage.store import MemoryStore
from tests.helpers import call, call_error, connected, scaled, settings_for
from tools.common import Runtime

EXAMPLES = scaled(6, 60)
SUCCESS_WEIGHT = 0.8 * 1.0 + 0.2 * 1.75  # one success from the neutral 1.0 (alpha 0.2, ceiling 1.75)
FAILURE_WEIGHT = 0.8 * 1.0 + 0.2 * 0.25  # one failure (floor 0.25)
# The weight for a query as close as the reporting session's: a named memory takes the named step (alpha
# 1.0), straight to the ceiling or the floor.
NAMED_SUCCESS_WEIGHT, NAMED_FAILURE_WEIGHT = 1.75, 0.25

# Strings that break a filter built by pasting text into SQL or LIKE, or that look alike once folded.
INJECTIONS = [
    "alice' OR '1'='1",
    "null",  # JSON-looking names reach the model verbatim: not None, the default scope
    "[1, 2]",
    "x' OR 'a'='a",
    "' OR ''='",
    "'; DELETE FROM memories_v4; --",
    "%",
    "_",
    "%_%",
    "\\",
    '"',
    ";--",
    "*",
    "ünï",
    "ｕｎｉ",
    "uni",
    "a b",
    "b c",
]
COLLISIONS = [
    [("a", "b c"), ("a b", "c")],  # the same text once the two are joined with a space
    [("a", "b/c"), ("a/b", "c")],  # ... or with a slash
    [("acme", "web"), ("acme", "web2"), ("acme", "Web")],  # one org, look-alike projects
    [("alice' OR '1'='1", "p"), ("alice", "p")],
    [("%", "_"), ("x", "y")],  # wildcards, and what they would match
    [("default", "default"), ("default", "default' OR '1'='1")],
    [("ｕｎｉ", "p"), ("uni", "p"), ("ünï", "p")],  # equal after NFKC folding / accent stripping
    [("a\\", "b"), ("a", "\\b")],
]
MARKERS = ["kumquat", "quokka", "axolotl", "narwhal"]  # one per tenant, in its own texts (and no field name)

# The story every tenant is told (its marker word makes three of its texts its own).
CORROBORATED = "Deploys to staging go out from the release branch only"
NEAR_DUPLICATES = ("We deploy on Tuesdays.", "we deploy on tuesdays")
BELIEF, REVISION = "We use Postgres for the billing database", "We switched from Postgres to MySQL in March"
CLAIM, COUNTERCLAIM = (
    "Feature flag checkout_v2 is enabled in staging",
    "Feature flag checkout_v2 is disabled in staging",
)
STEPS = (
    "Draining the old nodes took most of the first day",
    "Rotating the TLS certificates finished the migration",
)


part = st.one_of(
    st.sampled_from(INJECTIONS),
    st.text(
        alphabet=st.characters(exclude_categories=("Cc", "Cs", "Co", "Cn", "Zl", "Zp")),
        min_size=1,
        max_size=12,
    ),
).filter(lambda text: bool(text.strip()) and "~" not in text)


@dataclass(frozen=True)
class Story:
    tenants: list[tuple[str, str]]
    outcomes: list[str | None]  # per tenant: the outcome its session reports, if any
    who: str  # agents are who~<tenant><a|b|c>
    session: str
    episode: str
    tag: str
    injection: str
    copies: bool  # search the in-process scope copies, or LanceDB itself


def distinct(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Tenants as the server sees them (identifiers are stripped), each once, at most four."""
    seen: dict[tuple[str, str], None] = {}
    for org, project in pairs:
        seen.setdefault((org.strip(), project.strip()), None)
    return list(seen)[: len(MARKERS)]


@st.composite
def stories(draw: st.DrawFn) -> Story:
    tenants = distinct(
        [*draw(st.sampled_from(COLLISIONS)), *draw(st.lists(st.tuples(part, part), max_size=1))]
    )
    outcomes = ["success", None, *(draw(st.sampled_from(["success", "failure", None])) for _ in tenants[2:])]
    order = draw(st.permutations(range(len(tenants))))  # which tenant reports, and in which order they write
    return Story(
        tenants=[tenants[i] for i in order],
        outcomes=outcomes,
        who=draw(part),
        session=draw(part),
        episode=draw(part),
        tag=draw(part.filter(lambda text: "|" not in text and len(text) <= 60)),
        injection=draw(st.sampled_from(INJECTIONS)),
        copies=draw(st.booleans()),
    )


@dataclass
class Tenant:
    index: int
    org_id: str
    project_id: str
    who: str
    owned: set[str] = field(default_factory=set)  # every memory id written here
    named: dict[str, str] = field(default_factory=dict)  # which memory is which in the story
    retrievals: list[str] = field(default_factory=list)
    reported: dict[str, float] = field(default_factory=dict)  # memory id -> weight its report set

    @property
    def scope(self) -> dict[str, str]:
        return {"org_id": self.org_id, "project_id": self.project_id}

    @property
    def marker(self) -> str:
        return MARKERS[self.index]

    def agent(self, letter: str) -> str:
        return f"{self.who}~{self.index}{letter}"

    @property
    def agents(self) -> set[str]:
        return {self.agent(letter) for letter in "abc"}

    def keep(self, out: dict[str, Any], name: str | None = None) -> None:
        """Record the memory ids a remember answer names (consolidation only names this scope's)."""
        self.owned.add(out["id"])
        summary = out.get("consolidation") or {}
        for key in ("superseded", "kept", "revised", "contradicts"):
            self.owned.update(summary.get(key) or [])
        if name is not None:
            self.named[name] = out["id"]


def runtime_factory(copies: bool):
    def build(settings: Settings) -> Runtime:
        store = MemoryStore.open(
            settings.db_uri,
            vector_dim=settings.vector.dim,
            analyzer=index_terms,
            cache_scope_rows=settings.cache.scope_rows if copies else 0,
        )
        embedder = HashedEmbedder(store.vector_dim)
        info = BackendInfo("embedder", embedder.name, embedder.name)
        models = Models(
            embedder=embedder,
            reranker=None,
            embedder_info=info,
            reranker_info=BackendInfo("reranker", "none", "none"),
        )
        return assemble_runtime(settings, store, models)

    return build


# ---------------------------------------------------------------------------------------------- writing


async def tell(client: Client, story: Story, tenant: Tenant) -> None:
    scope, session = tenant.scope, story.session
    a, b, c = (tenant.agent(letter) for letter in "abc")

    async def remember(content: str, agent: str, name: str | None = None, **extra: Any) -> dict[str, Any]:
        out = await call(
            client,
            "remember",
            {"content": content, "agent_id": agent, "session_id": session, **scope, **extra},
        )
        tenant.keep(out, name)
        return out

    await remember(CORROBORATED, a, "corroborated", tags=[story.tag])
    again = await remember(CORROBORATED, b)  # the same conclusion from another agent: an attestation
    assert again["status"] == "duplicate"
    await remember(NEAR_DUPLICATES[0], a, "near-a")
    await remember(NEAR_DUPLICATES[1], c, "near-c")
    await remember(f"{story.injection} was the payload in the {tenant.marker} incident", c, tags=[story.tag])
    await remember(f"Tenant {tenant.marker} keeps the on-call rota in the shared calendar", c, "marker")
    batch = await call(
        client,
        "remember_many",
        {
            "items": [
                {
                    "content": f"Migrated the billing service to the {tenant.marker} cluster",
                    "kind": "episode",
                    "episode_id": story.episode,
                },
                {"content": STEPS[0], "episode_id": story.episode},
                {"content": STEPS[1], "episode_id": story.episode},
            ],
            "agent_id": a,
            "session_id": session,
            **scope,
        },
    )
    for out, name in zip(batch["results"], ("episode", "draining", "rotating"), strict=True):
        tenant.keep(out, name)
    await remember(BELIEF, a, "belief")
    revised = await remember(REVISION, a, "revision", session_id=f"{session}-2")
    assert revised["consolidation"]["revised"] == [tenant.named["belief"]]
    await remember(CLAIM, b, "claim")
    counter = await remember(COUNTERCLAIM, b, "counterclaim", session_id=f"{session}-2")
    assert counter["consolidation"]["contradicts"] == [tenant.named["claim"]]


async def work(client: Client, story: Story, tenant: Tenant) -> set[str]:
    """A recall in the story's session (the same session id in every tenant); returns what it put into
    the context."""
    recalled = await call(
        client,
        "recall",
        {
            "query": "how do we deploy to staging",
            "session_id": story.session,
            "agent_id": tenant.agent("a"),
            **tenant.scope,
        },
    )
    check_recall(tenant, recalled)
    tenant.retrievals.append(recalled["retrieval_id"])
    return {memory["id"] for memory in recalled["memories"]}


async def report(
    client: Client, story: Story, tenant: Tenant, outcome: str | None, in_context: set[str]
) -> None:
    """The session's outcome, in the tenants that report one: it moves this tenant's recalled memories
    (each named, so each moves a full step)."""
    if outcome is None:
        return
    named = "helpful_ids" if outcome == "success" else "misleading_ids"
    out = await call(
        client,
        "report_outcome",
        {"outcome": outcome, "session_id": story.session, named: sorted(in_context), **tenant.scope},
    )
    weight = SUCCESS_WEIGHT if outcome == "success" else FAILURE_WEIGHT
    assert in_context and {update["id"] for update in out["updated"]} == in_context
    for update in out["updated"]:
        assert update["weight_before"] == 1.0 and update["weight_after"] == pytest.approx(weight)
    # explain_ranking asks a query this close to the session's (closeness 1 on hashed vectors)
    tenant.reported = dict.fromkeys(
        in_context, NAMED_SUCCESS_WEIGHT if outcome == "success" else NAMED_FAILURE_WEIGHT
    )


# ---------------------------------------------------------------------------------------------- checking


@dataclass
class World:
    story: Story
    tenants: list[Tenant]

    def others(self, tenant: Tenant) -> list[Tenant]:
        return [other for other in self.tenants if other is not tenant]


def foreign_in(text: str, tenant: Tenant, world: World) -> list[str]:
    """Ids, agents and marker words of other tenants that appear in ``text``."""
    found = []
    for other in world.others(tenant):
        found += [memory_id for memory_id in other.owned if memory_id in text]
        found += [agent for agent in other.agents if agent in text]
        if other.marker in text:
            found.append(other.marker)
    return found


ECHOES = {"query", "queries", "sub_queries"}


def without_queries(value: Any) -> Any:
    """A view without the query texts it echoes (a query may name another tenant's marker on purpose):
    the queries themselves, and the gate's reason, which lists the query's words."""
    if isinstance(value, dict):
        echoes = ECHOES | ({"reason"} if value.get("event") == "GateDecided" else set())
        return {k: without_queries(v) for k, v in value.items() if k not in echoes}
    if isinstance(value, list):
        return [without_queries(v) for v in value]
    return value


def check_recall(tenant: Tenant, out: dict[str, Any], world: World | None = None) -> None:
    for memory in out["memories"]:
        assert memory["id"] in tenant.owned, memory
        assert memory["agent_id"] in tenant.agents, memory
        assert set(memory["corroborated_by"]) <= tenant.agents, memory
        assert set(memory["contradicted_by"]) <= tenant.owned, memory
        assert memory["sibling_of"] is None or memory["sibling_of"] in tenant.owned, memory
    if world is not None:
        assert foreign_in(out["context"], tenant, world) == [], out["context"]


def check_explain(tenant: Tenant, world: World, out: dict[str, Any]) -> None:
    assert (out["org_id"], out["project_id"]) == (tenant.org_id, tenant.project_id)
    for candidate in out["candidates"]:
        assert candidate["id"] in tenant.owned, candidate
        assert candidate["agent_id"] in tenant.agents, candidate
        assert set(candidate["corroborating_agents"]) <= tenant.agents, candidate
        for linked in (candidate["brought_by"], candidate["cluster_canonical"]):
            assert linked is None or linked in tenant.owned, candidate
        assert {link["id"] for link in candidate["replaces"]} <= tenant.owned, candidate
    assert foreign_in(json.dumps(without_queries(out), ensure_ascii=False), tenant, world) == []


async def check_tenant(client: Client, world: World, tenant: Tenant) -> None:
    story, scope = world.story, tenant.scope
    session = {"session_id": f"{story.session}-check", "agent_id": tenant.agent("c")}
    queries = [
        "how do we deploy to staging",
        "billing database postgres mysql",
        "checkout_v2 feature flag staging",
        f"{story.injection} payload incident",
        *(f"{o.marker} on-call rota {o.org_id} {o.project_id} {o.who}" for o in world.others(tenant)),
    ]
    for query in queries:
        recalled = await call(client, "recall", {"query": query, **session, **scope})
        check_recall(tenant, recalled, world)
        tenant.retrievals.append(recalled["retrieval_id"])
        explained = await call(client, "explain_ranking", {"retrieval_id": recalled["retrieval_id"], **scope})
        check_explain(tenant, world, explained)
    # One direct match: its episode (the same episode id in every tenant) brings the rest as siblings.
    expanded = await call(
        client, "recall", {"query": "draining the old nodes", "top_k": 1, **session, **scope}
    )
    check_recall(tenant, expanded, world)
    siblings = [m for m in expanded["memories"] if m["source"] == "sibling"]
    assert siblings and all(m["sibling_of"] == tenant.named["draining"] for m in siblings), expanded
    explained = await call(client, "explain_ranking", {"retrieval_id": expanded["retrieval_id"], **scope})
    check_explain(tenant, world, explained)
    tagged = await call(
        client, "recall", {"query": "deploys staging payload", "tags": [story.tag], **session, **scope}
    )
    assert {m["id"] for m in tagged["memories"]} <= tenant.owned and tagged["memories"]
    await check_counts(client, tenant, world)
    await check_views(client, tenant, world)


async def check_counts(client: Client, tenant: Tenant, world: World) -> None:
    """Corroboration counts this tenant's agents only; feedback weights move by its own reports only."""
    explained = await call(
        client,
        "explain_ranking",
        {"query": "how do we deploy to staging from the release branch", "top_k": 20, **tenant.scope},
    )
    check_explain(tenant, world, explained)
    by_id = {candidate["id"]: candidate for candidate in explained["candidates"]}
    corroborated = by_id[tenant.named["corroborated"]]  # attested by b here, and by every tenant's own b
    assert corroborated["corroborating_agents"] == [tenant.agent("b")]
    assert corroborated["scores"]["corroboration_boost"] == pytest.approx(0.1)  # log2(1 + 1) x 0.1
    assert set(tenant.reported) <= set(by_id)  # every memory the report moved is weighed here
    for candidate in explained["candidates"]:
        expected = tenant.reported.get(candidate["id"], 1.0)
        assert candidate["scores"]["feedback_weight"] == pytest.approx(expected), (candidate["id"], expected)
    cluster = await call(
        client, "explain_ranking", {"query": "which day do we deploy tuesdays", **tenant.scope}
    )
    near = {tenant.named["near-a"], tenant.named["near-c"]}
    assert near <= {candidate["id"] for candidate in cluster["candidates"]}
    for candidate in cluster["candidates"]:
        if candidate["id"] in near:  # one cluster of two agents: the one not authoring its canonical counts
            agents = candidate["corroborating_agents"]
            assert len(agents) == 1 and set(agents) <= {tenant.agent("a"), tenant.agent("c")}, candidate
            assert candidate["scores"]["corroboration_boost"] == pytest.approx(0.1)


async def check_views(client: Client, tenant: Tenant, world: World) -> None:
    scope = tenant.scope
    drift = await call(client, "drift", {"include_resolved": True, **scope})
    assert drift["open_contradictions"] == 1
    assert [(p["older"]["id"], p["newer"]["id"]) for p in drift["contradictions"]] == [
        (tenant.named["claim"], tenant.named["counterclaim"])
    ]
    revisions = [c["event"] for c in drift["changes"] if c["event"]["action"] == "revise"]
    assert [(e["memory_id"], e["related_id"]) for e in revisions] == [
        (tenant.named["belief"], tenant.named["revision"])
    ]
    assert foreign_in(json.dumps(drift, ensure_ascii=False), tenant, world) == []
    for name in ("belief", "revision", "claim", "corroborated", "draining"):
        history = await call(client, "lineage", {"memory_id": tenant.named[name], **scope})
        assert foreign_in(json.dumps(history, ensure_ascii=False), tenant, world) == []
        if name == "belief":
            assert history["current"]["id"] == tenant.named["revision"]
    for query in ("deploy staging tuesdays billing migration", f"{world.story.injection} payload"):
        dry = await call(client, "forget", {"query": query, "max_memories": 20, "dry_run": True, **scope})
        assert {brief["id"] for brief in dry["forgotten"]} <= tenant.owned
        assert foreign_in(json.dumps(dry, ensure_ascii=False), tenant, world) == []
    for other in world.others(tenant):  # another tenant's ids name nothing here
        theirs = other.named["corroborated"]
        assert "no memory" in await call_error(client, "lineage", {"memory_id": theirs, **scope})
        assert "no memory" in await call_error(
            client, "forget", {"memory_id": theirs, "dry_run": True, **scope}
        )
        assert "no retrieval" in await call_error(
            client, "explain_ranking", {"retrieval_id": other.retrievals[0], **scope}
        )
        explain_theirs = {"retrieval_id": tenant.retrievals[0], "memory_id": theirs, **scope}
        assert "no memory" in await call_error(client, "explain_ranking", explain_theirs)


# ---------------------------------------------------------------------------------------------- the property


async def run(story: Story, path: Path) -> None:
    server = build_server(settings_for(path), runtime_factory=runtime_factory(story.copies))
    tenants = [Tenant(i, org, project, story.who) for i, (org, project) in enumerate(story.tenants)]
    world = World(story, tenants)
    async with connected(server, agent="tenant-prober") as client:
        for tenant in tenants:
            await tell(client, story, tenant)
        contexts = [await work(client, story, tenant) for tenant in tenants]
        for tenant, outcome, in_context in zip(tenants, story.outcomes, contexts, strict=True):
            await report(client, story, tenant, outcome, in_context)
        for tenant in tenants:
            await check_tenant(client, world, tenant)


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # an example is a whole server's run: no shrinking
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@pytest.mark.slow
@given(story=stories())
def test_no_view_of_one_tenant_shows_another_tenants_memories_agents_counts_or_weights(story):
    with tempfile.TemporaryDirectory() as folder:
        anyio.run(run, story, Path(folder) / "store")
