"""A command pays only for the imports it uses: the MCP SDK is for serving, the model libraries for the
models a command loads. Each command runs in a fresh interpreter, which then lists what it imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("mcp", "mcp_types", "torch", "sentence_transformers", "transformers", "onnxruntime", "cohere")

RUN_AND_LIST = """
import json, sys
from console.cli import main
arguments, heavy_names = json.loads(sys.argv[1]), set(json.loads(sys.argv[2]))
sys.argv = ["memoria", *arguments]
try:
    main()
except SystemExit:
    pass
heavy = sorted({name.split(".")[0] for name in sys.modules} & heavy_names)
sys.stderr.write("\\nIMPORTED " + json.dumps(heavy) + "\\n")
"""


def imported_by(arguments: list[str], tmp_path: Path) -> list[str]:
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith("MEMORIA_")},
        "MEMORIA_EMBEDDER": "hashed",
        "MEMORIA_RERANKER": "none",
        "MEMORIA_LLM": "none",
    }
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST, json.dumps(arguments), json.dumps(HEAVY)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = done.stderr.rsplit("IMPORTED ", 1)
    assert len(line) == 2, done.stderr
    return json.loads(line[1])


@pytest.mark.parametrize(
    "arguments",
    [
        ["remember", "--create", "the staging database is reset on Sundays"],
        ["recall", "when is staging reset"],
        ["stats"],
    ],
)
def test_a_command_on_the_offline_backend_imports_neither_the_mcp_sdk_nor_model_libraries(
    arguments, tmp_path
):
    db = str(tmp_path / "db")
    if arguments[0] != "remember":
        assert imported_by(["remember", "--db", db, "--create", "a first memory"], tmp_path) == []
    assert imported_by([arguments[0], "--db", db, *arguments[1:]], tmp_path) == []


def test_serving_is_what_imports_the_mcp_sdk(tmp_path):
    # `memoria client` prints an entry without starting anything; the server module itself needs the SDK.
    assert imported_by(["client", "claude-code"], tmp_path) == []
    code = "import sys; import server.app; print('mcp' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"
