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


@pytest.mark.parametrize("principal", ["", "   ", "a\nb", "x" * 129])
def test_memoria_token_refuses_a_principal_the_server_would_not_load(principal, capsys):
    # A new user's trial: `--principal ""` printed an entry whose tokens file then stopped the server.
    from console.cli import main

    assert main(["token", "--principal", principal, "--write", "acme/web"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--principal must be a name of 1-128 printable characters" in captured.err


@pytest.mark.parametrize("given", ["99999", "-1", "http"])
def test_a_port_out_of_range_is_refused_by_the_parser(given, capsys):
    from console.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["ui", "--port", given])
    assert exit_.value.code == 2
    assert "is not a port: give a number from 0 to 65535" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "meant"), [(["recal", "x"], "'recall'"), (["remember", "x", "--kind", "epsiode"], "'episode'")]
)
def test_a_mistyped_command_or_choice_is_told_the_closest_one(argv, meant, capsys):
    from console.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and capsys.readouterr().err.rstrip().endswith(f"; did you mean {meant}?")


def test_the_closest_choice_is_read_from_either_way_python_lists_the_choices(capsys):
    from console.cli import _Parser

    for listed in ("serve, remember, recall", "'serve', 'remember', 'recall'"):  # 3.12.8+ and before
        with pytest.raises(SystemExit):
            _Parser(prog="memoria").error(f"argument command: invalid choice: 'recal' (choose from {listed})")
        assert capsys.readouterr().err.rstrip().endswith("; did you mean 'recall'?")


def test_memoria_version_prints_the_installed_version(capsys):
    from importlib.metadata import version

    from console.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"memoria {version('memoria-mcp')}"


def test_running_the_cli_module_runs_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "console.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0 and "usage: memoria" in done.stdout


def test_options_given_before_the_command_are_the_commands():
    from console.cli import command_first, make_parser

    parser = make_parser()
    assert command_first(["--db", "/tmp/store", "list", "--limit", "3"], parser) == [
        "list",
        "--db",
        "/tmp/store",
        "--limit",
        "3",
    ]
    # A command name that is the value of the option before it is that value: a folder called "list", a
    # project called "stats".
    assert command_first(["--db", "list"], parser) == ["--db", "list"]
    assert command_first(["--db", "s", "--project", "stats", "list"], parser) == [
        "list",
        "--db",
        "s",
        "--project",
        "stats",
    ]
    assert command_first(["--http", "127.0.0.1:8765"], parser) == ["--http", "127.0.0.1:8765"]


def test_memoria_with_the_store_before_the_command_runs_the_command(tmp_path):
    store = tmp_path / "store"
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "console",
            "remember",
            "Deploys go out on Tuesdays",
            "--db",
            str(store),
            "--create",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={"MEMORIA_EMBEDDER": "hashed", "MEMORIA_RERANKER": "none", "PATH": "/usr/bin:/bin"},
    )
    assert made.returncode == 0, made.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "console", "--db", str(store), "list"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"MEMORIA_EMBEDDER": "hashed", "MEMORIA_RERANKER": "none", "PATH": "/usr/bin:/bin"},
    )
    assert listed.returncode == 0, listed.stderr
    assert "Deploys go out on Tuesdays" in listed.stdout
