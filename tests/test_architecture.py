"""Layering rules, checked on the source: a layer importing what it must not fails here."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The house, top to bottom: each part may import only the parts below it.
LAYERS = ["console", "server", "tools", "writing", "retrieval", "storage"]
PACKAGES = LAYERS[1:]  # the packages that serve (console is the commands for people)
# Libraries a part must not import whatever its place: LanceDB is storage's alone, MCP the server's.
LIBRARIES = {
    "console": {"lancedb", "pyarrow"},
    "server": {"lancedb", "pyarrow"},
    "tools": {"mcp", "lancedb", "pyarrow"},
    "writing": {"mcp", "lancedb", "pyarrow"},
    "retrieval": {"mcp", "lancedb", "pyarrow"},
    "storage": {"mcp"},
}
MAX_LINES = {"storage": 550, "tools": 350}  # "about 500" a storage module, "about 300" a tool


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def forbidden(package: str) -> set[str]:
    """The parts above ``package`` and the libraries it must not use."""
    return set(LAYERS[: LAYERS.index(package)]) | LIBRARIES[package]


@pytest.mark.parametrize("package", LAYERS)
def test_layers_import_only_what_they_may(package):
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & forbidden(package))
        for path in modules(package)
    }
    assert {path: found for path, found in offenders.items() if found} == {}


def test_the_layers_are_what_the_design_says():
    assert forbidden("tools") == {"console", "server", "mcp", "lancedb", "pyarrow"}
    assert forbidden("retrieval") == {"console", "server", "tools", "writing", "mcp", "lancedb", "pyarrow"}
    assert forbidden("storage") == {"console", "server", "tools", "writing", "retrieval", "mcp"}


@pytest.mark.parametrize("package", sorted(MAX_LINES))
def test_no_module_outgrows_its_part(package):
    sizes = {str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in modules(package)}
    assert {path: lines for path, lines in sizes.items() if lines > MAX_LINES[package]} == {}


def test_every_stage_module_is_listed_in_the_pipeline():
    pipeline = imported_modules(ROOT / "retrieval" / "pipeline.py")
    stages = {
        f"retrieval.stages.{path.stem}" for path in modules("retrieval/stages") if path.stem != "__init__"
    }
    assert stages and stages <= pipeline | used_by_stages(stages)


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def used_by_stages(stages: set[str]) -> set[str]:
    """Stage modules imported by another stage (fusion, the candidate search's scoring)."""
    used = set()
    for name in stages:
        used |= imported_modules(ROOT / (name.replace(".", "/") + ".py")) & stages - {name}
    return used


def test_only_storage_imports_lancedb_or_pyarrow():
    users = {
        str(p.relative_to(ROOT))
        for pkg in [*PACKAGES, "console"]
        for p in modules(pkg)
        if imported_roots(p) & {"lancedb", "pyarrow"}
    }
    assert users and all(user.startswith("storage/") for user in users)


def test_nothing_but_the_config_module_reads_the_environment():
    readers = set()
    for package in PACKAGES:
        for path in modules(package):
            text = path.read_text()
            if "os.environ" in text or "os.getenv" in text:
                readers.add(str(path.relative_to(ROOT)))
    assert readers == {"server/config.py"}


def test_no_print_to_stdout_in_the_server_packages():
    # stdout is the protocol stream of a stdio server: every print names sys.stderr. Commands for people,
    # which print their results to stdout, live in `console/`, which the server never imports.
    offenders = []
    for package in PACKAGES:
        for path in modules(package):
            for node in ast.walk(ast.parse(path.read_text())):
                is_print = isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"
                to_stderr = any(
                    k.arg == "file" and ast.unparse(k.value) == "sys.stderr"
                    for k in getattr(node, "keywords", ())
                )
                if is_print and not to_stderr:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


@pytest.mark.slow
def test_the_serving_path_never_imports_the_commands_for_people():
    probe = (
        "import sys; import server.serve, server.app; from server.config import Settings; "
        "server.app.build_server(Settings.from_env()); "
        "print(any(m == 'console' or m.startswith('console.') for m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "False"


@pytest.mark.slow
def test_the_server_module_loads_nothing_heavy_before_the_handshake():
    # `initialize` and `tools/list` are answered once server.app is imported and the tools registered;
    # numpy, LanceDB and the model libraries load afterwards, in the runtime's background build.
    probe = (
        "import sys; import server.app; from server.config import Settings; "
        "server.app.build_server(Settings.from_env()); "
        "print(sorted(m for m in ('numpy', 'lancedb', 'pyarrow', 'torch', 'sentence_transformers', "
        "'cohere', 'snowballstemmer') if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"
