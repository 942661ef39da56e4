"""Where benchmark reports go, and how they are written."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"

# The environment of a `memoria serve` a benchmark starts on the offline backend: hashed vectors, no reranker,
# no language model, no model downloads.
OFFLINE_SERVER_ENV = {
    "MEMORIA_ALLOW_MODEL_DOWNLOADS": "false",
    "HF_HUB_OFFLINE": "1",
    "MEMORIA_LLM": "none",
    "MEMORIA_EMBEDDER": "hashed",
    "MEMORIA_RERANKER": "none",
}


def offline_settings(db: Path, env: dict[str, str] | None = None, **overrides: Any) -> Any:
    """Server settings for a store at ``db`` on the offline backend (hashed vectors, no reranker, no LLM,
    no model downloads, maintenance out of the way), read as the server reads ``env`` (MEMORIA_*
    variables); ``overrides`` win."""
    from server.config import Settings

    values: dict[str, Any] = {
        "db_uri": str(db),
        "embedder": "hashed",
        "reranker": "none",
        "llm": "none",
        "allow_model_downloads": False,
        "maintenance_interval_seconds": 3600,
    }
    return Settings.from_env(env or {}, **(values | overrides))


def write_json(path: Path, report: Any) -> None:
    """Write ``report`` as indented JSON to ``path`` (parents created) and say where on stderr."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}", file=sys.stderr)


def measured_apart(module: str, *arguments: str) -> dict[str, Any]:
    """Run ``python -m module arguments`` in a process of its own (its memory and its allocator settings
    are its own) and return the JSON object on the last line it prints."""
    done = subprocess.run(
        [sys.executable, "-m", module, *arguments], capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def add_settings_argument(
    parser: argparse.ArgumentParser, help: str = "a server setting (repeatable)"
) -> None:
    """``--set MEMORIA_VAR=VALUE``, repeatable: settings a benchmark passes to the server it runs."""
    parser.add_argument("--set", action="append", default=[], metavar="MEMORIA_VAR=VALUE", help=help)


def settings_of(parser: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    """The ``--set`` items as a mapping; one without ``=`` is a usage error."""
    if any("=" not in item for item in items):
        parser.error("--set takes MEMORIA_VAR=VALUE")
    return dict(item.split("=", 1) for item in items)
