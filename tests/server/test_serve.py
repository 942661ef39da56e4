import argparse
import asyncio
import os
import platform
import signal
import subprocess
import sys
import threading

import pytest

from server.config import limit_blas_threads
from server.serve import body_limit, event_loop_options, parse_http_address, tune_malloc


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8765", ("127.0.0.1", 8765)),
        ("0.0.0.0:9000", ("0.0.0.0", 9000)),
        ("[::1]:8080", ("::1", 8080)),
        (":7000", ("127.0.0.1", 7000)),
    ],
)
def test_http_address_defaults_to_loopback(text, expected):
    assert parse_http_address(text) == expected


@pytest.mark.parametrize("text", ["localhost", "1.2.3.4:99999", "host:port"])
def test_bad_http_addresses_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_http_address(text)


def test_a_bad_environment_variable_stops_start_up_with_its_name():
    result = subprocess.run(
        [sys.executable, "-m", "server", "serve"],
        env={"MEMORIA_RERANK_MULTIPLIER": "lots", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "MEMORIA_RERANK_MULTIPLIER" in result.stderr
    assert result.stdout == ""


@pytest.mark.slow
def test_the_server_holds_numpys_blas_to_one_thread_unless_the_environment_says_otherwise():
    # In a fresh interpreter (numpy not loaded yet), as `memoria serve` runs it.
    probe = (
        "import os, sys; from server.config import limit_blas_threads; limit_blas_threads(int(sys.argv[1])); "
        "print(os.environ.get('OPENBLAS_NUM_THREADS'), os.environ.get('MKL_NUM_THREADS'))"
    )
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}

    def run(threads: int, **env: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe, str(threads)], env={**clean, **env}, capture_output=True, text=True
        )
        return done.stdout.strip()

    assert run(1) == "1 1"
    assert run(0) == "None None"  # 0: the library's default
    assert run(1, OPENBLAS_NUM_THREADS="4") == "4 1"  # a variable the environment sets wins


def test_blas_threads_are_left_alone_once_numpy_is_loaded(monkeypatch):
    import numpy  # noqa: F401  (loaded: setting the variable now would only mislead)

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    limit_blas_threads(1)
    assert "OPENBLAS_NUM_THREADS" not in os.environ


class RecordingLibc:
    """A C library that records what mallopt was asked and answers ``answer`` (1: done)."""

    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


def test_malloc_gets_its_arenas_and_a_fixed_mmap_threshold_with_trim_at_twice_it():
    libc = RecordingLibc()

    done = tune_malloc(2, 64, libc)

    # glibc's parameters: M_ARENA_MAX -8, M_MMAP_THRESHOLD -3, M_TRIM_THRESHOLD -1
    assert libc.calls == [(-8, 2), (-3, 65_536), (-1, 131_072)]
    assert done == libc.calls


class RefusingLibc(RecordingLibc):
    """A C library that refuses one parameter (an mmap threshold above what an older glibc takes)."""

    def __init__(self, refused: int) -> None:
        super().__init__()
        self.refused = refused

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 0 if param == self.refused else 1


def test_a_refused_mmap_threshold_leaves_the_trim_threshold_alone():
    # Setting the trim threshold alone would stop glibc's sliding threshold at its default.
    libc = RefusingLibc(refused=-3)

    assert tune_malloc(2, 65_536, libc) == [(-8, 2)]
    assert libc.calls == [(-8, 2), (-3, 67_108_864)]


def test_a_refused_arena_count_still_fixes_the_threshold():
    assert tune_malloc(2, 64, RefusingLibc(refused=-8)) == [(-3, 65_536), (-1, 131_072)]


def test_serving_tunes_malloc_from_the_settings_before_building_the_server(monkeypatch):
    import server.app
    import server.serve
    from server.config import Settings

    asked: list[tuple[int, int]] = []

    class Built(Exception):
        pass

    def build_server(settings, **_):
        assert asked, "malloc is tuned before the server (and its threads) starts"
        raise Built

    monkeypatch.setattr(server.serve, "tune_malloc", lambda arenas, kb: asked.append((arenas, kb)))
    monkeypatch.setattr(server.app, "build_server", build_server)
    settings = Settings.from_env(
        {"MEMORIA_MALLOC_ARENAS": "3", "MEMORIA_MALLOC_MMAP_THRESHOLD_KB": "256"}, db_uri="/tmp/x"
    )
    with pytest.raises(Built):
        server.serve.serve(settings, None)
    assert asked == [(3, 256)]


def test_serving_sets_the_interpreters_switch_interval_from_the_settings_before_building_the_server(
    monkeypatch,
):
    import server.app
    import server.serve
    from server.config import Settings

    asked: list[float] = []

    class Built(Exception):
        pass

    def build_server(settings, **_):
        assert asked, "the switch interval is set before the server's threads start"
        raise Built

    monkeypatch.setattr(server.serve.sys, "setswitchinterval", asked.append)
    monkeypatch.setattr(server.serve, "tune_malloc", lambda arenas, kb: [])
    monkeypatch.setattr(server.app, "build_server", build_server)
    for env in ({}, {"MEMORIA_SWITCH_INTERVAL_MS": "0.5"}):
        with pytest.raises(Built):
            server.serve.serve(Settings.from_env(env, db_uri="/tmp/x"), None)
    assert asked == [pytest.approx(0.005), pytest.approx(0.0005)]  # Python's own 5 ms unless told


def test_a_port_in_use_is_said_in_one_line_before_anything_starts(monkeypatch, tmp_path):
    """A trial: `serve --http` on a busy port logged that it served, made the store, then failed."""
    import socket

    import server.app
    import server.serve
    from server.config import ConfigError, Settings

    built: list[object] = []
    monkeypatch.setattr(server.app, "build_server", lambda settings, **_: built.append(settings))
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ConfigError, match=f"cannot serve on 127.0.0.1:{port}: the address is in use"):
            server.serve.serve(Settings.from_env({}, db_uri=str(tmp_path / "db")), ("127.0.0.1", port))
    finally:
        taken.close()
    assert built == [] and not (tmp_path / "db").exists()


def test_zero_leaves_each_malloc_setting_to_glibc():
    libc = RecordingLibc()

    assert tune_malloc(0, 0, libc) == []
    assert libc.calls == []
    assert tune_malloc(0, 128, libc) == [(-3, 131_072), (-1, 262_144)]


def test_settings_malloc_refuses_are_not_reported_as_set():
    assert tune_malloc(2, 64, RecordingLibc(answer=0)) == []


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc only"
)
def test_the_real_glibc_takes_the_thresholds_in_a_process_of_its_own():
    code = "from server.serve import tune_malloc; print(tune_malloc(0, 64))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "[(-3, 65536), (-1, 131072)]"


def test_python_m_server_only_serves_and_points_a_command_for_people_at_memoria(capsys):
    from server.serve import main

    assert main(["recall", "the pool size"]) == 2
    assert "memoria recall" in capsys.readouterr().err


def test_the_event_loop_is_uvloop_when_installed_and_wanted(monkeypatch):
    pytest.importorskip("uvloop")
    assert event_loop_options(True) == {"use_uvloop": True}
    assert event_loop_options(False) == {"use_uvloop": False}
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if it were not installed: asyncio's own loop
    assert event_loop_options(True) == {"use_uvloop": False}


def test_the_collector_takes_the_young_threshold_and_freezes_in_a_process_of_its_own():
    # The real gc, in a child: thresholds and frozen objects are the whole process's.
    code = (
        "import gc; from server.serve import tune_collector, freeze_collector; "
        "before = gc.get_threshold(); print(before, tune_collector(0), tune_collector(20000)); "
        "frozen = freeze_collector(); print(frozen > 0, frozen == gc.get_freeze_count())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["(700, 10, 10) (700, 10, 10) (20000, 10, 10)", "True True"]


def test_serving_tunes_the_collector_and_freezes_it_once_warm_unless_told_not_to(monkeypatch):
    import server.app
    import server.serve
    from server.config import Settings

    asked: list[int] = []
    hooks: list[object] = []

    class Built(Exception):
        pass

    def build_server(settings, *, when_warm=None):
        assert asked, "the collector is tuned before the server (and its threads) starts"
        hooks.append(when_warm)
        raise Built

    monkeypatch.setattr(server.serve, "tune_collector", lambda young: asked.append(young))
    monkeypatch.setattr(server.serve, "tune_malloc", lambda arenas, kb: [])
    monkeypatch.setattr(server.app, "build_server", build_server)
    for env in ({}, {"MEMORIA_GC_YOUNG_THRESHOLD": "0", "MEMORIA_GC_FREEZE_WHEN_WARM": "false"}):
        with pytest.raises(Built):
            server.serve.serve(Settings.from_env(env, db_uri="/tmp/x"), None)
    assert asked == [20_000, 0]
    assert hooks == [server.serve.freeze_collector, None]


# A server whose Ctrl-C lands inside a task group: in one of its tasks (the stdio transport's writer, a
# request's handler), or in the task that awaits them, in the group's body. Either way the group ends with
# the interrupt wrapped in an exception group. Run in a process of its own, which the stop ends by SIGINT.
INTERRUPTED_IN_A_TASK_GROUP = """
import logging, os, signal, sys
import anyio
from server.serve import _until_interrupted

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
where = sys.argv[2]

async def ctrl_c(here):
    await anyio.sleep(0.1)
    if here == where:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, raised here: in this task
    await anyio.sleep(10)

async def serving():
    async with anyio.create_task_group() as transport:
        transport.start_soon(ctrl_c, "task")
        await ctrl_c("body")

_until_interrupted(serving, {"use_uvloop": sys.argv[1] == "uvloop"})
print("not stopped", file=sys.stderr)
"""


@pytest.mark.parametrize("where", ["task", "body"])
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_ctrl_c_landing_inside_a_task_group_stops_with_one_line_and_no_traceback(loop, where):
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_IN_A_TASK_GROUP, loop, where],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGINT  # ended by the signal (the shell says 130)
    assert done.stderr == "memoria stopped (interrupted)\n"


def test_an_error_that_is_not_the_interrupt_still_reaches_asyncios_handler():
    from server.serve import _after_interrupt

    class Loop:
        def __init__(self) -> None:
            self.reported: list[dict] = []

        def default_exception_handler(self, context: dict) -> None:
            self.reported.append(context)

    stopping = threading.Event()
    loop = Loop()
    interrupt = BaseExceptionGroup("transport", [KeyboardInterrupt(), asyncio.CancelledError()])
    failure = BaseExceptionGroup("transport", [KeyboardInterrupt(), ValueError("a bug")])
    _after_interrupt(stopping, loop, {"exception": interrupt})  # before Ctrl-C: reported as ever
    stopping.set()
    _after_interrupt(stopping, loop, {"exception": interrupt})  # the stop itself: quiet
    _after_interrupt(stopping, loop, {"exception": failure})
    _after_interrupt(stopping, loop, {"message": "a callback failed"})
    assert [context.get("exception") for context in loop.reported] == [interrupt, failure, None]


def test_the_server_says_where_a_new_store_goes_and_when_a_folder_holds_other_files(tmp_path, monkeypatch):
    # A new user's trial: a relative path was made wherever the client started the server, unsaid where, and
    # a folder of other files (a project's source) got the store's tables beside them without a word.
    from server.serve import new_store

    monkeypatch.chdir(tmp_path)
    assert new_store("relstore") == (
        f"no store at relstore ({tmp_path / 'relstore'}) yet: making a new, empty one there (if you meant an "
        "existing store, check the path)"
    )
    project = tmp_path / "project"
    project.mkdir()
    for name in ("README.md", "src", "setup.py", "tests"):
        (project / name).touch()
    assert new_store(str(project)) == (
        f"{project} holds other files (README.md, setup.py, src and 1 more) and no memoria store: making the "
        "store's tables beside them (point MEMORIA_DB_URI at a folder of its own if that was not meant)"
    )
    (project / "memories.lance").mkdir()  # a store: nothing to say
    assert new_store(str(project)) is None
    started = tmp_path / "started"
    started.mkdir()
    (started / ".memoria-write.lock").touch()  # a start that stopped before its tables: its own files only
    assert new_store(str(started)) is None
    assert new_store("s3://bucket/memoria") is None


def test_an_http_body_holds_the_largest_batch_of_memories_the_tools_take(tmp_path):
    """A trial: 100 items of 19,990 characters, within every limit remember_many states, got an opaque 413
    at 4 MiB. The default now holds 200 items of the longest content at 4 bytes a character, with tags."""
    import json

    from server.config import Settings
    from tools.remember_many import MAX_ITEMS, RememberManyInput

    settings = Settings(db_uri=str(tmp_path / "db"))
    item = {"content": "\U0001f600" * settings.max_content_chars, "tags": ["t" * 64] * 20, "kind": "episode"}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": "remember_many", "arguments": {"items": [item] * MAX_ITEMS}}
    RememberManyInput.model_validate(call["params"]["arguments"])  # within the tool's limits
    body = json.dumps(call, ensure_ascii=False).encode()
    assert len(body) > 16_000_000 and len(body) <= body_limit(settings)
    said = Settings(db_uri=str(tmp_path / "db"), http={"max_body_bytes": 4096})
    assert body_limit(said) == 4096
    # Never more than the setting itself may say (a review: 764 MiB with the longest content allowed).
    assert body_limit(Settings(db_uri=str(tmp_path / "db"), max_content_chars=1_000_000)) == 256 * 1024 * 1024


def test_a_person_at_a_terminal_is_told_what_the_stdio_server_waits_for(tmp_path):
    """A new user's trial: bare `memoria` in a terminal printed one log line and waited without a word."""
    import os
    import pty
    import select
    import signal
    import time

    reader, terminal = pty.openpty()  # stdin a terminal, as a person's shell gives it
    process = subprocess.Popen(
        [sys.executable, "-m", "server", "serve"],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "MEMORIA_DB_URI": str(tmp_path / "db"), "MEMORIA_EMBEDDER": "hashed"},
    )
    said = b""
    try:
        deadline = time.monotonic() + 60
        while b"waits for a client's messages on stdin" not in said and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stderr], [], [], 1.0)
            if ready:
                said += os.read(process.stderr.fileno(), 4096)
    finally:
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
        os.close(reader)
        os.close(terminal)
    assert b"memoria is an MCP server: it waits for a client's messages on stdin (Ctrl-C stops it)" in said
    assert out == b""  # stdout is the protocol's
