"""The client set-up entries work: each one `memoria client` prints for Claude Code, Claude Desktop, Cursor
and VS Code (and the one in mcp.json) starts a server a real stdio client can use, and Claude Code's
SessionEnd hook reports the session's outcome through the CLI."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation

from console.commands import client_setup, memoria_executable, shared_settings
from tests.helpers import TIMEOUT, TOOL_NAMES, call

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ["claude-code", "claude-desktop", "cursor", "vscode"]


def server_entry(document: dict) -> dict:
    servers = document.get("mcpServers") or document["servers"]
    return servers["memoria"]


def offline(db: Path) -> dict[str, str]:
    return {
        "MEMORIA_DB_URI": str(db),
        "MEMORIA_EMBEDDER": "hashed",
        "MEMORIA_RERANKER": "none",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
    }


async def use(entry: dict, env: dict[str, str], agent: str) -> dict:
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**env, **entry.get("env", {})}
    )
    async with Client(
        stdio_client(params),
        client_info=Implementation(name=agent, version="1"),
        read_timeout_seconds=TIMEOUT,
    ) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOL_NAMES
        await call(client, "remember", {"content": f"{agent} can reach the memory server"})
        return await call(client, "recall", {"query": f"can {agent} reach the memory server"})


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_entry_has_the_shape_its_client_reads(client):
    setup = client_setup(client, "/opt/memoria/bin/memoria", "web")
    [main_file, *others] = setup["files"]
    entry = server_entry(setup["files"][main_file])
    assert entry["command"] == "/opt/memoria/bin/memoria" and entry["args"] == ["serve"]
    assert entry["env"] == {"MEMORIA_PROJECT_ID": "web"}
    assert ("type" in entry) == (client in ("claude-code", "vscode"))  # the two that name the transport
    expected = {
        "claude-code": [".mcp.json", ".claude/settings.json"],
        "claude-desktop": ["claude_desktop_config.json"],
        "cursor": [".cursor/mcp.json"],
        "vscode": [".vscode/mcp.json"],
    }[client]
    assert [main_file, *others] == expected


@pytest.mark.parametrize("client", CLIENTS)
async def test_each_client_entry_starts_a_working_server(client, tmp_path):
    entry = server_entry(next(iter(client_setup(client, memoria_executable(), "web")["files"].values())))
    found = await use(entry, offline(tmp_path / "db"), client)
    assert found["memories"] and found["memories"][0]["content"] == f"{client} can reach the memory server"


async def test_the_entry_in_mcp_json_starts_a_working_server(tmp_path):
    entry = server_entry(json.loads((ROOT / "mcp.json").read_text()))
    assert entry["command"] == "memoria"  # found on PATH (the venv's bin folder here)
    empty_means_default = {name: value for name, value in entry["env"].items() if value}
    assert empty_means_default == {}
    found = await use({**entry, "env": {}}, offline(tmp_path / "db"), "generic-client")
    assert found["memories"]


async def test_claude_codes_session_end_hook_reports_the_sessions_outcome(tmp_path):
    setup = client_setup("claude-code", memoria_executable(), "web")
    entry = server_entry(setup["files"][".mcp.json"])
    [matcher] = setup["files"][".claude/settings.json"]["hooks"]["SessionEnd"]
    [hook] = matcher["hooks"]
    env = offline(tmp_path / "db")
    recalled = await use(entry, env, "claude-code")  # the client name Claude Code sends
    ran = subprocess.run(
        [*shlex.split(hook["command"]), "--json"],
        input=json.dumps({"session_id": "abc", "hook_event_name": "SessionEnd", "reason": "exit"}),
        env=env,
        capture_output=True,
        text=True,
        timeout=hook["timeout"],
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert (report["session_id"], report["status"]) == (recalled["session_id"], "applied")
    assert [u["id"] for u in report["updated"]] == [m["id"] for m in recalled["memories"]]


def test_the_entry_and_the_hook_carry_the_shells_model_settings(tmp_path):
    # A server a client starts with another embedder (or on the offline fallback) writes vectors the
    # user's own commands skip: the shell's model settings go into the entry and the hook, folders absolute.
    (tmp_path / "minilm").mkdir()
    environ = {
        "MEMORIA_EMBEDDING_MODEL": "minilm/",
        "MEMORIA_RERANKER": "none",
        "COHERE_API_KEY": "secret",
        "MEMORIA_COHERE_API_KEY": "secret",
        "HOME": "/home/someone",
    }
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        settings = shared_settings(environ)
    finally:
        os.chdir(cwd)
    assert settings == {"MEMORIA_EMBEDDING_MODEL": str(tmp_path / "minilm"), "MEMORIA_RERANKER": "none"}
    setup = client_setup("claude-code", "/opt/memoria/bin/memoria", "web", None, settings)
    entry = server_entry(setup["files"][".mcp.json"])
    assert entry["env"] == {"MEMORIA_PROJECT_ID": "web", **settings}
    [matcher] = setup["files"][".claude/settings.json"]["hooks"]["SessionEnd"]
    assert shlex.split(matcher["hooks"][0]["command"]) == [
        "env",
        f"MEMORIA_EMBEDDING_MODEL={tmp_path / 'minilm'}",
        "MEMORIA_RERANKER=none",
        "/opt/memoria/bin/memoria",
        "outcome",
        "--hook",
        "--project",
        "web",
    ]
    assert "-e" in setup["note"] and f"MEMORIA_EMBEDDING_MODEL={tmp_path / 'minilm'}" in setup["note"]
