"""A real install: the wheel built from the checkout carries the server and its CLI and no tests, and the
`memoria` command it installs serves an MCP client and runs the CLI from any folder, with no checkout in
sight. (Built without build isolation and installed without dependencies: the test needs no package index;
the dependencies are the test environment's own.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import Implementation

from tests.helpers import TIMEOUT, TOOL_NAMES, call

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"console", "retrieval", "server", "storage", "tools", "writing"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the folder it was installed into)."""
    base = tmp_path_factory.mktemp("wheel")
    # Built from a copy of the checkout: setuptools writes build/ and *.egg-info beside the sources.
    source = base / "source"
    ignored = shutil.ignore_patterns(".*", "__pycache__", "build", "dist", "*.egg-info", "benchmarks")
    shutil.copytree(ROOT, source, ignore=ignored)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", source, "--no-deps", "--no-build-isolation", "-q", "-w", base],
        check=True,
        cwd=base,
    )
    [wheel] = base.glob("memoria_mcp-*.whl")
    site = base / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", site, wheel],
        check=True,
        cwd=base,
    )
    return wheel, site


def elsewhere_env(site: Path, db: Path) -> dict[str, str]:
    """Only the installed copy ahead of the test environment's packages, run from a folder with no checkout."""
    return {
        "PYTHONPATH": str(site),
        "PATH": f"{site / 'bin'}{os.pathsep}/usr/bin:/bin",
        "HOME": str(db.parent),
        "MEMORIA_DB_URI": str(db),
        "MEMORIA_EMBEDDER": "hashed",
        "MEMORIA_RERANKER": "none",
    }


def test_the_wheel_carries_the_server_and_the_cli_and_no_tests(installed):
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.startswith("memoria_mcp-")}
    assert tops == PACKAGES
    assert not any(name.startswith(("tests/", "benchmarks/")) for name in names)
    # the report page's frame, style and script are files the console package reads at import
    assert {"console/templates/report.html", "console/static/report.css", "console/static/report.js"} <= set(
        names
    )
    [entry_points] = [name for name in names if name.endswith("entry_points.txt")]
    assert "memoria = console.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_command_runs_the_cli_from_any_folder(installed, tmp_path):
    _, site = installed
    env = elsewhere_env(site, tmp_path / "db")
    where = subprocess.run(
        [sys.executable, "-c", "import server; print(server.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip().startswith(str(site))  # the installed copy, not the checkout
    memoria = [sys.executable, "-c", "from console.cli import main; main()"]  # what the console script runs
    run = {"env": env, "cwd": tmp_path, "capture_output": True, "text": True, "timeout": 120}
    stored = subprocess.run([*memoria, "remember", "--create", "The wheel installs a memoria command"], **run)
    assert stored.returncode == 0, stored.stderr
    found = subprocess.run([*memoria, "recall", "what does the wheel install", "--json"], **run)
    assert found.returncode == 0 and "The wheel installs a memoria command" in found.stdout


async def test_the_installed_command_serves_an_mcp_client(installed, tmp_path):
    _, site = installed
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from console.cli import main; main()", "serve"],
        env=elsewhere_env(site, tmp_path / "db"),
        cwd=str(tmp_path),
    )
    async with Client(
        stdio_client(params),
        client_info=Implementation(name="wheel", version="1"),
        read_timeout_seconds=TIMEOUT,
    ) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOL_NAMES
        await call(client, "remember", {"content": "installed from a wheel"})
        found = await call(client, "recall", {"query": "installed from a wheel"})
    assert found["memories"][0]["content"] == "installed from a wheel"
