#!/usr/bin/env bash
# Creates ./.venv and installs memoria into it, with a CPU build of torch where one can be had.
# Usage: scripts/setup.sh [extras]   e.g. scripts/setup.sh test
# All output goes to stderr: scripts/serve.sh runs this before a stdio server whose stdout is the protocol.
set -euo pipefail
exec 1>&2
cd "$(dirname "$0")/.."

extras="${1:-}"
python="${PYTHON:-python3}"

# Already set up for this pyproject.toml (and these extras, or more): nothing to do, and no package index
# needed. A stamp per set of extras holds the hash of the pyproject.toml it was installed from.
stamp_of() { echo ".venv/.memoria-setup-${1:-base}"; }
wanted="$({ sha256sum pyproject.toml 2>/dev/null || shasum -a 256 pyproject.toml 2>/dev/null; } | cut -d' ' -f1 || true)"
if [ -n "$wanted" ] && [ -x .venv/bin/memoria ]; then
  satisfied_by=("${extras:-base}")
  [ -z "$extras" ] && satisfied_by+=(test)  # the test extras include the server's own
  for have in "${satisfied_by[@]}"; do
    if [ "$(cat "$(stamp_of "$have")" 2>/dev/null)" = "$wanted" ]; then
      exit 0
    fi
  done
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "memoria needs Python 3.11 or newer; set PYTHON=/path/to/python3.11 and run again" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "creating .venv with $("$python" --version)"
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check)

if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  # sentence-transformers needs torch, and a bare `torch` on Linux pulls several GB of CUDA packages.
  # Prefer a local CPU wheel (find-links), then PyTorch's CPU index, then whatever pip finds.
  if "${pip[@]}" install --dry-run --quiet --no-deps --no-index "torch==2.13.0" >/dev/null 2>&1; then
    echo "installing torch 2.13.0 (local CPU wheel)"
    "${pip[@]}" install --quiet "torch==2.13.0"
  elif [ "$(uname -s)" = "Linux" ] && "${pip[@]}" install --quiet torch --index-url https://download.pytorch.org/whl/cpu; then
    echo "installed torch from the PyTorch CPU index"
  else
    echo "installing torch from the default index"
    "${pip[@]}" install --quiet torch
  fi
fi

target="."
[ -n "$extras" ] && target=".[$extras]"
echo "installing memoria-mcp ($target)"
"${pip[@]}" install --quiet -e "$target"
[ -n "$wanted" ] && echo "$wanted" > "$(stamp_of "$extras")"
exit 0
