#!/usr/bin/env bash
# Set up (first run) and run every check: lint, types, and the whole test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh -k recall
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test

# The report page test drives the system Chromium (never a browser Playwright downloads). Install Debian's
# when it is missing and we can; otherwise carry on: the test skips, or fails under CI=true.
install_chromium() {
  local apt=(apt-get -y -qq -o Dpkg::Use-Pty=0 install --no-install-recommends chromium)
  export DEBIAN_FRONTEND=noninteractive
  "${apt[@]}" || { apt-get -qq update && "${apt[@]}"; }
}
if [ ! -x /usr/bin/chromium ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no /usr/bin/chromium and no apt-get: the report browser test will not run here" >&2
  elif [ "$(id -u)" != "0" ]; then
    echo "no /usr/bin/chromium: run 'sudo apt-get install chromium' for the report browser test" >&2
  else
    echo "installing Debian's chromium for the report browser test" >&2
    install_chromium >&2 || echo "could not install chromium: the report browser test will not run" >&2
  fi
fi

.venv/bin/python -m ruff check .
.venv/bin/python -m mypy
# Two workers (the suite spends much of its time waiting on server processes it starts); `-n 0` after
# the script's name runs it in one process.
.venv/bin/python -m pytest -n 2 "$@"
