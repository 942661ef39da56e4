"""The ``memoria`` command line: its commands' arguments (the commands themselves: test_commands)."""

import subprocess
import sys
from pathlib import Path

import pytest


def test_memoria_token_prints_a_token_once_and_an_entry_holding_only_its_digest(tmp_path, capsys):
    import json

    import anyio

    from console.cli import main
    from server.auth import StaticTokenVerifier, load_token_file

    assert main(["token", "--principal", "alice", "--write", "acme/web", "--read", "acme/*"]) == 0
    first, _, entry_line = capsys.readouterr().out.strip().splitlines()
    token = first.rsplit(" ", 1)[1]
    entry = json.loads(entry_line)
    assert token not in entry_line and entry["principal"] == "alice"
    assert (entry["write"], entry["read"]) == (["acme/web"], ["acme/*"])
    (tmp_path / "tokens.json").write_text(json.dumps({"tokens": [entry]}))
    verified = anyio.run(StaticTokenVerifier(load_token_file(tmp_path / "tokens.json")).verify_token, token)
    assert verified is not None and verified.subject == "alice"


@pytest.mark.parametrize("scopes", [[], ["--write", "/web"]])
def test_memoria_token_refuses_a_missing_or_malformed_scope(scopes, capsys):
    from console.cli import main

    assert main(["token", "--principal", "alice", *scopes]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and ("--read or --write" in captured.err or "org/project" in captured.err)


def test_running_the_cli_module_runs_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "console.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0 and "usage: memoria" in done.stdout
