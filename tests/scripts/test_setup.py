"""scripts/setup.sh runs before every `scripts/serve.sh`: when the environment is already set up for this
pyproject.toml it must return at once, touching neither Python nor a package index."""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path):
    """A checkout with the real setup script and a stand-in environment (its `memoria` never runs). The
    Python it would use to build an environment is /bin/false: reaching it means the script set up."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "memoria-mcp"\nversion = "1"\n')
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "memoria").write_text("#!/bin/sh\n")
    (bin_dir / "memoria").chmod(0o755)
    return tmp_path


def setup(checkout: Path, *extras: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "scripts/setup.sh", *extras],
        cwd=checkout,
        env={**os.environ, "PYTHON": "/bin/false"},
        capture_output=True,
        text=True,
        timeout=30,
    )


def stamp(checkout: Path, name: str, text: str | None = None) -> None:
    digest = hashlib.sha256((checkout / "pyproject.toml").read_bytes()).hexdigest()
    (checkout / ".venv" / f".memoria-setup-{name}").write_text((text or digest) + "\n")


def test_an_environment_set_up_for_this_pyproject_is_used_as_it_is(checkout):
    stamp(checkout, "base")
    done = setup(checkout)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


def test_the_test_extras_also_serve_the_server_but_not_the_other_way_round(checkout):
    stamp(checkout, "test")
    assert setup(checkout).returncode == 0
    stamp(checkout, "base")
    (checkout / ".venv" / ".memoria-setup-test").unlink()
    assert setup(checkout, "test").returncode != 0  # it had to set up (and our stand-in Python refused)


def test_a_changed_pyproject_sets_up_again(checkout):
    stamp(checkout, "base", text="0" * 64)
    done = setup(checkout)
    assert done.returncode != 0 and "needs Python 3.11" in done.stderr
    assert done.stdout == ""  # even then, nothing on stdout: serve.sh's stdout is the protocol
