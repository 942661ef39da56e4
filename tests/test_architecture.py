"""Layering rules, checked on the source: a layer importing what it must not fails here."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["server", "tools", "writing", "storage", "retrieval"]


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


FORBIDDEN = {
    "storage": {"server", "tools", "writing", "retrieval", "mcp"},
    "retrieval": {"server", "tools", "writing", "lancedb", "pyarrow", "mcp"},
    "writing": {"server", "tools", "console", "lancedb", "pyarrow", "mcp"},
    "tools": {"mcp", "lancedb", "pyarrow"},
    "server": {"lancedb", "pyarrow"},
}


@pytest.mark.parametrize("package", PACKAGES)
def test_layers_import_only_what_they_may(package):
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & FORBIDDEN[package])
        for path in modules(package)
    }
    assert {path: found for path, found in offenders.items() if found} == {}


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
