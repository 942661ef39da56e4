#!/usr/bin/env bash
# Set up (first run) and run every check: lint, types, and the whole test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh -k recall
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
.venv/bin/python -m ruff check .
.venv/bin/python -m mypy
.venv/bin/python -m pytest "$@"
