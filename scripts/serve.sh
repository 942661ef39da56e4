#!/usr/bin/env bash
# Set up (first run) and start the memoria MCP server on stdio, storing memories in LanceDB under the
# per-user data folder (override with MEMORIA_DB_URI). Extra arguments go to `memoria serve`,
# e.g. scripts/serve.sh --http 127.0.0.1:8765
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/memoria serve "$@"
