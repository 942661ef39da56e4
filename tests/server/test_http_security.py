"""The HTTP transport end to end, against the real console entry point: bearer tokens (static and OAuth
introspection) with per-token scopes, 401 without one, Host/Origin checks beyond loopback (421/403), the
body limit (413), principals as agents, and no token in the server's log."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation

from tests.cohere_standin import cohere_standin
from tests.helpers import TIMEOUT, call, call_error, free_port, http_server
from tests.identity_provider import IdentityProvider

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TOKENS = {
    "alice": "alice-token-0123456789abcdef",  # writes acme/web
    "dave": "dave-token-0123456789abcdef",  # writes acme/web
    "bob": "bob-token-0123456789abcdef",  # reads acme/web
    "carol": "carol-token-0123456789abcdef",  # writes globex/api
    "erin": "erin-token-0123456789abcdef",  # writes every project of acme
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def base_env(db: Path, **extra: str) -> dict[str, str]:
    return {
        "MEMORIA_DB_URI": str(db),
        "MEMORIA_EMBEDDER": "hashed",
        "MEMORIA_RERANKER": "none",
        "MEMORIA_LOG_LEVEL": "DEBUG",
        "MEMORIA_AGGREGATION_INTERVAL_SECONDS": "0.3",
        **extra,
    }


def tokens_file(folder: Path) -> Path:
    grants = {"alice": ("write", "acme/web"), "dave": ("write", "acme/web"), "bob": ("read", "acme/web")}
    grants["carol"] = ("write", "globex/api")
    grants["erin"] = ("write", "acme")
    entries = [
        {"principal": name, "token": TOKENS[name], access: [scope]}
        for name, (access, scope) in grants.items()
    ]
    path = folder / "tokens.json"
    path.write_text(json.dumps({"tokens": entries}))
    return path


@asynccontextmanager
async def session(url: str, token: str | None, agent: str = "http-agent") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with anyio.fail_after(TIMEOUT):
        async with (
            httpx2.AsyncClient(headers=headers, timeout=TIMEOUT) as http,
            Client(
                streamable_http_client(url, http_client=http),
                client_info=Implementation(name=agent, version="1"),
                read_timeout_seconds=TIMEOUT,
            ) as client,
        ):
            yield client


def post(url: str, body: Any = INITIALIZE, token: str | None = None, **headers: str) -> httpx2.Response:
    if token:
        headers["Authorization"] = f"Bearer {token}"
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx2.post(url, content=content, headers={**MCP_HEADERS, **headers}, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def static_server(tmp_path_factory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("static-tokens")
    log = folder / "server.log"
    env = base_env(folder / "db", MEMORIA_HTTP_TOKENS_FILE=str(tokens_file(folder)))
    with http_server(env, log_path=log) as url:
        yield url, log


def test_a_request_without_a_valid_token_gets_401(static_server):
    url, _ = static_server
    for token in (None, "not-a-token-0123456789"):
        refused = post(url, token=token)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer ")
    assert post(url, token=TOKENS["alice"]).status_code == 200


async def test_each_token_reads_and_writes_only_the_scopes_it_grants(static_server):
    url, _ = static_server
    async with session(url, TOKENS["alice"], agent="cursor") as alice:
        stored = await call(alice, "remember", {"content": "The web app deploys from the release branch"})
    # No scope named: the token's home scope; the agent is the principal, not the client's name.
    assert (stored["org_id"], stored["project_id"], stored["agent_id"]) == ("acme", "web", "alice")

    async with session(url, TOKENS["bob"]) as bob:
        seen = await call(bob, "recall", {"query": "web app deploys release branch"})
        assert [m["id"] for m in seen["memories"]] == [stored["id"]]
        refused = await call_error(bob, "remember", {"content": "bob may only read"})
        assert "this token (bob) may not write to org 'acme' project 'web'" in refused
        assert "it may write: nothing" in refused

    async with session(url, TOKENS["carol"]) as carol:
        across = await call_error(
            carol, "recall", {"query": "deploys", "org_id": "acme", "project_id": "web"}
        )
        assert "this token (carol) may not read org 'acme' project 'web'" in across
        own = await call(carol, "recall", {"query": "web app deploys release branch"})
        assert own["memories"] == []  # globex/api holds nothing of acme's
        posing = await call_error(carol, "remember", {"content": "x", "agent_id": "alice"})
        assert "attributed to the token's principal 'carol'" in posing


async def test_one_principal_cannot_corroborate_itself_but_another_principal_does(static_server):
    url, _ = static_server
    conclusion = "The flaky checkout test is caused by the shared payment sandbox"
    async with session(url, TOKENS["alice"], agent="window-1") as first:
        original = await call(first, "remember", {"content": conclusion})
    async with session(url, TOKENS["alice"], agent="window-2") as second:  # same principal, new name
        again = await call(second, "remember", {"content": conclusion})
    assert again["status"] == "duplicate" and "corroborating" not in (again["note"] or "")
    async with session(url, TOKENS["dave"]) as dave:
        other = await call(dave, "remember", {"content": conclusion})
        assert other["note"] == "already stored by alice; recorded dave as corroborating it"
        deadline = time.monotonic() + TIMEOUT
        while True:  # the aggregation job (every 0.3 s here) turns attestations into clusters
            recalled = await call(dave, "recall", {"query": "flaky checkout test payment sandbox"})
            explained = await call(
                dave,
                "explain_ranking",
                {"retrieval_id": recalled["retrieval_id"], "memory_id": original["id"]},
            )
            agents = explained["candidates"][0]["corroborating_agents"]
            if agents or time.monotonic() > deadline:
                break
            await anyio.sleep(0.3)
    assert agents == ["dave"]


async def test_private_memories_belong_to_the_principal_and_org_wide_ones_need_a_grant_on_the_org(
    static_server,
):
    url, _ = static_server
    async with session(url, TOKENS["alice"], agent="cursor") as alice:
        private = await call(
            alice,
            "remember",
            {"content": "Alice keeps her signing key notes in the vault", "visibility": "agent"},
        )
        refused = await call_error(
            alice, "remember", {"content": "All of acme freezes deploys in December", "visibility": "org"}
        )
        assert "may not write to all of them" in refused and "acme/*" in refused
    # Dave's client calls itself alice: the agent is the token's principal, so alice's memory stays hers.
    async with session(url, TOKENS["dave"], agent="alice") as dave:
        seen = await call(dave, "recall", {"query": "signing key notes vault"})
        assert private["id"] not in {m["id"] for m in seen["memories"]}
    async with session(url, TOKENS["alice"], agent="another-window") as alice_again:
        seen = await call(alice_again, "recall", {"query": "signing key notes vault"})
        assert private["id"] in {m["id"] for m in seen["memories"]}
    async with session(url, TOKENS["erin"]) as erin:
        org = await call(
            erin,
            "remember",
            {
                "content": "All of acme freezes deploys in December",
                "visibility": "org",
                "org_id": "acme",
                "project_id": "web",
            },
        )
    async with session(url, TOKENS["bob"]) as bob:  # reads acme/web only: the org's memories too
        seen = await call(bob, "recall", {"query": "acme freezes deploys December"})
        assert org["id"] in {m["id"] for m in seen["memories"]}
    async with session(url, TOKENS["alice"]) as alice:  # may read it, not forget it for the whole org
        refused = await call_error(alice, "forget", {"memory_id": org["id"]})
        assert "may not write to all of them" in refused


async def test_every_tool_refuses_a_scope_its_token_does_not_grant(static_server):
    url, _ = static_server
    acme = {"org_id": "acme", "project_id": "web"}
    async with session(url, TOKENS["alice"]) as alice:
        stored = await call(alice, "remember", {"content": "Only acme may see the web team's incident notes"})
        recalled = await call(alice, "recall", {"query": "web team incident notes"})
    calls = {
        "remember": {"content": "x"},
        "remember_many": {"items": [{"content": "x"}]},
        "recall": {"query": "incident notes"},
        "explain_ranking": {"retrieval_id": recalled["retrieval_id"]},
        "forget": {"memory_id": stored["id"], "dry_run": True},
        "lineage": {"memory_id": stored["id"]},
        "drift": {},
        "report_outcome": {"outcome": "failure"},
    }
    async with session(url, TOKENS["carol"]) as carol:  # carol writes globex/api only
        for tool, arguments in calls.items():
            refused = await call_error(carol, tool, {**arguments, **acme})
            assert "this token (carol) may not" in refused and "org 'acme' project 'web'" in refused, tool
    async with session(url, TOKENS["bob"]) as bob:  # bob reads acme/web: he may look, not change
        await call(bob, "lineage", {"memory_id": stored["id"]})
        for tool in ("forget", "remember_many", "report_outcome"):
            assert "this token (bob) may not write to org 'acme'" in await call_error(bob, tool, calls[tool])
    async with session(url, TOKENS["alice"]) as alice:
        still = await call(alice, "recall", {"query": "web team incident notes"})
    assert stored["id"] in [m["id"] for m in still["memories"]]


async def test_the_resources_serve_only_the_scopes_a_token_grants(static_server):
    url, _ = static_server
    async with session(url, TOKENS["alice"]) as alice:
        stored = await call(alice, "remember", {"content": "The web team's on-call rota lives in PagerDuty"})
        home = json.loads((await alice.read_resource(f"memoria://memory/{stored['id']}")).contents[0].text)
        assert home["content"] == "The web team's on-call rota lives in PagerDuty"
    async with session(url, TOKENS["carol"]) as carol:  # carol writes globex/api only
        for uri in (
            f"memoria://memory/{stored['id']}?org_id=acme&project_id=web",
            "memoria://stats?org_id=acme&project_id=web",
            "memoria://drift?org_id=acme&project_id=web",
            "memoria://memories?org_id=acme&project_id=web",
        ):
            with pytest.raises(
                MCPError, match=r"this token \(carol\) may not read org 'acme' project 'web'"
            ) as refused:
                await carol.read_resource(uri)
            # What to do names the resource, not the tool behind it (a trial was told to call list_memories).
            assert str(refused.value).endswith("then read the resource again.")
        with pytest.raises(MCPError, match="no memory"):  # her home scope: acme's id is not there
            await carol.read_resource(f"memoria://memory/{stored['id']}")
        stats = json.loads((await carol.read_resource("memoria://stats")).contents[0].text)
    # Her stats are her own scope's: nothing of acme's is counted.
    assert (stats["org_id"], stats["project_id"], stats["memories"]) == ("globex", "api", 0)


async def test_stats_count_what_the_token_may_read_and_keep_the_servers_paths(static_server):
    # A new user's trial: bob's stats counted alice's private memory, and carried the store's folder.
    url, _ = static_server

    async def counts() -> tuple[dict, dict]:
        async with session(url, TOKENS["alice"]) as alice:
            hers = json.loads((await alice.read_resource("memoria://stats")).contents[0].text)
        async with session(url, TOKENS["bob"]) as bob:
            scope = "memoria://stats?org_id=acme&project_id=web"
            his = json.loads((await bob.read_resource(scope)).contents[0].text)
        return hers, his

    hers_before, his_before = await counts()
    async with session(url, TOKENS["alice"]) as alice:
        await call(alice, "remember", {"content": "The web build uses vite 6 (stats)"})
        private = {
            "content": "My local db password hint is in 1password (stats)",
            "visibility": "agent",
            "episode_id": "alice-setup-stats",
        }
        await call(alice, "remember", private)
    hers, his = await counts()
    assert hers["memories"] - hers_before["memories"] == 2  # the shared memory and her private one
    assert his["memories"] - his_before["memories"] == 1  # the shared one only
    assert (hers["episodes"] - hers_before["episodes"], his["episodes"] - his_before["episodes"]) == (1, 0)
    assert hers["store"] is None and his["store"] is None
    assert hers["aggregation"] is None and his["aggregation"] is None  # a pass counts the whole scope


async def test_outcome_reports_reach_only_the_principals_own_sessions(static_server):
    url, _ = static_server
    async with session(url, TOKENS["alice"]) as alice:
        await call(alice, "remember", {"content": "Canary deploys run before the full rollout"})
        recalled = await call(alice, "recall", {"query": "canary deploys rollout"})
        assert recalled["memories"]
        # The session id a recall returns is the one to report on, over a token as anywhere else.
        report = await call(
            alice, "report_outcome", {"outcome": "success", "session_id": recalled["session_id"]}
        )
        assert report["status"] == "applied" and report["updated"]
        await call(alice, "recall", {"query": "canary deploys rollout", "session_id": "ses_shared_name"})
        named = await call(alice, "report_outcome", {"outcome": "success", "session_id": "ses_shared_name"})
    assert named["status"] == "applied" and named["session_id"].endswith(":ses_shared_name")
    async with session(url, TOKENS["dave"]) as dave:
        # The same name is dave's own session, which never recalled; alice's full id does not reach hers
        # either: both are refused as sessions with no recall, and nothing of alice's moves.
        for name in ("ses_shared_name", named["session_id"]):
            refused = await call_error(dave, "report_outcome", {"outcome": "failure", "session_id": name})
            assert "no recall of session" in refused and "nothing was reported" in refused


async def test_two_clients_of_one_token_keep_their_own_sessions(static_server):
    """A trial: two editor windows of one token shared a session, so one read the other's session-private
    scratch note, and its report ended the other's task."""
    url, _ = static_server
    async with (
        session(url, TOKENS["alice"], agent="alice-window-1") as first,
        session(url, TOKENS["alice"], agent="alice-window-2") as second,
    ):
        note = await call(
            first,
            "remember",
            {"content": "Scratch: trying the redis 7.2 upgrade on the cache nodes", "visibility": "session"},
        )
        mine = await call(first, "recall", {"query": "redis upgrade cache nodes scratch"})
        theirs = await call(second, "recall", {"query": "redis upgrade cache nodes scratch"})
        assert [m["id"] for m in mine["memories"]] == [note["id"]]
        assert theirs["memories"] == [] and theirs["session_id"] != mine["session_id"]
        await call(second, "report_outcome", {"outcome": "failure"})
        still = await call(first, "recall", {"query": "redis upgrade cache nodes scratch"})
    assert still["session_id"] == mine["session_id"] and [m["id"] for m in still["memories"]] == [note["id"]]


async def test_a_token_lists_another_agents_memories_by_author_but_never_their_private_ones(static_server):
    """A trial: the listing's agent_id, a filter by author, was refused over a token as a claimed identity."""
    url, _ = static_server
    async with session(url, TOKENS["alice"]) as alice:
        shared = await call(alice, "remember", {"content": "The search service reindexes every hour"})
        await call(alice, "remember", {"content": "Alice's own note on reindexing", "visibility": "agent"})
    async with session(url, TOKENS["bob"]) as bob:
        listed = json.loads((await bob.read_resource("memoria://memories?agent_id=alice")).contents[0].text)
    assert shared["id"] in [m["id"] for m in listed["memories"]]
    assert {m["agent_id"] for m in listed["memories"]} == {"alice"}
    assert all("own note" not in m["preview"] for m in listed["memories"])


async def test_a_read_only_token_is_not_asked_to_remember_or_report(static_server):
    """A trial: a read-only token's session_start told it to remember and report, which it was refused."""
    url, _ = static_server
    async with session(url, TOKENS["bob"]) as bob:
        start = await bob.get_prompt("session_start", {"task": "fix the flaky deploy"})
        end = await bob.get_prompt("session_end", {"outcome": "success"})
    started, ended = start.messages[0].content.text, end.messages[0].content.text
    assert "This token may only read memory" in started and "call `report_outcome` once" not in started
    assert "cannot remember what is left nor report the outcome" in ended
    async with session(url, TOKENS["alice"]) as alice:
        writer = await alice.get_prompt("session_start", {"task": "fix the flaky deploy"})
    assert "call `report_outcome` once" in writer.messages[0].content.text


def test_no_token_is_ever_written_to_the_log(static_server):
    url, log = static_server
    post(url, token="wrong-token-but-still-secret-0123")
    text = log.read_text()
    assert "memoria serving MCP over streamable HTTP" in text and "authenticate with static tokens" in text
    for token in [*TOKENS.values(), "wrong-token-but-still-secret-0123"]:
        assert token not in text


# ------------------------------------------------------------------------------------------ beyond loopback


def test_beyond_loopback_a_wrong_host_gets_421_a_foreign_origin_403_and_a_big_body_413(tmp_path):
    env = base_env(
        tmp_path / "db",
        MEMORIA_HTTP_TOKENS_FILE=str(tokens_file(tmp_path)),
        MEMORIA_HTTP_ALLOWED_HOSTS="memory.test:*",
        MEMORIA_HTTP_ALLOWED_ORIGINS="https://app.memory.test",
        MEMORIA_HTTP_MAX_BODY_BYTES="4096",
    )
    with http_server(env, bind="0.0.0.0") as url:
        port = url.split(":")[2].split("/")[0]
        alice = TOKENS["alice"]
        assert post(url, token=alice, Host=f"evil.example:{port}").status_code == 421
        assert (
            post(url, token=alice, Host=f"memory.test:{port}", Origin="http://evil.example").status_code
            == 403
        )
        big = {**INITIALIZE, "params": {**INITIALIZE["params"], "padding": "x" * 5000}}
        assert post(url, big, token=alice, Host=f"memory.test:{port}").status_code == 413
        assert post(url, token=None, Host=f"memory.test:{port}").status_code == 401
        ok = post(url, token=alice, Host=f"memory.test:{port}", Origin="https://app.memory.test")
        assert ok.status_code == 200


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"tokens": "yes"}, "needs MEMORIA_HTTP_ALLOWED_HOSTS"),
        ({"MEMORIA_HTTP_ALLOWED_HOSTS": "memory.test:*"}, "refusing to serve 0.0.0.0 without authentication"),
    ],
)
def test_serving_every_interface_without_allowed_hosts_or_tokens_refuses_to_start(tmp_path, extra, message):
    if extra.pop("tokens", None):
        extra["MEMORIA_HTTP_TOKENS_FILE"] = str(tokens_file(tmp_path))
    env = {"PATH": "/usr/bin:/bin", **base_env(tmp_path / "db", **extra)}
    finished = subprocess.run(
        [sys.executable, "-m", "server", "serve", "--http", f"0.0.0.0:{free_port()}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert finished.returncode == 2
    assert message in finished.stderr and finished.stdout == ""


# ------------------------------------------------------------------------------------------ OAuth 2.1


async def test_oauth_tokens_are_checked_by_introspection_for_this_server_and_their_scopes(tmp_path):
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    claims = {"iss": None, "exp": int(time.time()) + 3600}
    provider = IdentityProvider(
        {
            "writer": {**claims, "sub": "alice", "aud": resource, "scope": "memoria:write:acme/web"},
            "reader": {**claims, "sub": "bob", "aud": resource, "scope": "memoria:read:acme/web"},
            "elsewhere": {
                **claims,
                "sub": "eve",
                "aud": "https://other.example/mcp",
                "scope": "memoria:write:acme/web",
            },
        }
    )
    with provider.serving() as issuer:
        for answer in provider.tokens.values():
            answer["iss"] = issuer
        env = base_env(
            tmp_path / "db",
            MEMORIA_OAUTH_ISSUER_URL=issuer,
            MEMORIA_OAUTH_RESOURCE_URL=resource,
            MEMORIA_OAUTH_INTROSPECTION_URL=f"{issuer}/introspect",
            MEMORIA_OAUTH_CLIENT_ID="memoria",
            MEMORIA_OAUTH_CLIENT_SECRET="introspection-secret",
        )
        with http_server(env, port=port) as url:
            metadata = httpx2.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp").json()
            assert metadata["resource"] == resource and metadata["authorization_servers"] == [issuer]
            anonymous = post(url)
            assert anonymous.status_code == 401
            assert "resource_metadata=" in anonymous.headers["www-authenticate"]
            assert post(url, token="elsewhere").status_code == 401  # issued for another server
            assert post(url, token="unknown").status_code == 401

            async with session(url, "writer") as alice:
                stored = await call(alice, "remember", {"content": "OAuth-protected memory of the web team"})
            assert (stored["org_id"], stored["agent_id"]) == ("acme", "alice")
            async with session(url, "reader") as bob:
                seen = await call(bob, "recall", {"query": "OAuth-protected memory web team"})
                assert [m["id"] for m in seen["memories"]] == [stored["id"]]
                assert "may not write" in await call_error(bob, "remember", {"content": "no"})
    assert all(authorization and authorization.startswith("Basic ") for _, authorization in provider.requests)


async def test_the_clients_token_is_never_passed_upstream(tmp_path):
    with cohere_standin(api_key="cohere-key-of-the-server") as cohere:
        env = base_env(
            tmp_path / "db",
            MEMORIA_HTTP_TOKENS_FILE=str(tokens_file(tmp_path)),
            MEMORIA_RERANKER="cohere",
            COHERE_API_KEY=cohere.api_key,
            MEMORIA_COHERE_BASE_URL=cohere.url,
        )
        with http_server(env) as url:
            async with session(url, TOKENS["alice"]) as alice:
                await call(alice, "remember", {"content": "The reranker runs at Cohere for this team"})
                recalled = await call(alice, "recall", {"query": "which reranker does this team use"})
    assert recalled["memories"] and cohere.requests  # the recall did go upstream
    assert {request["auth"] for request in cohere.requests} == {"Bearer cohere-key-of-the-server"}
    assert all(TOKENS["alice"] not in json.dumps(request) for request in cohere.requests)
