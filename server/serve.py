"""Serving: ``memoria serve`` (stdio, the default) or ``memoria serve --http HOST:PORT`` tunes the process
(glibc's allocator, numpy's BLAS threads), builds the server and runs it on its transport. The ``memoria``
command itself, with the commands for people, is ``console.cli``; ``python -m server`` serves alone."""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import anyio

from server.config import MAX_BODY_BYTES, ConfigError, Settings, limit_blas_threads
from server.log_setup import configure_logging

log = logging.getLogger("memoria")


def parse_http_address(value: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` (``[::1]:PORT`` for IPv6); the host defaults to 127.0.0.1."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PORT or HOST:PORT, but got {value!r}") from None
    if not 0 < number < 65536:
        raise argparse.ArgumentTypeError(f"port must be 1-65535, but got {number}")
    return host, number


# glibc's mallopt parameters
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8


class Mallopt(Protocol):
    def mallopt(self, param: int, value: int) -> int: ...


def glibc() -> Any | None:
    """The process's glibc (``mallopt`` and ``malloc_trim`` typed), or None off Linux with glibc."""
    import ctypes
    import ctypes.util
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.mallopt.restype = ctypes.c_int
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim.restype = ctypes.c_int
    except (OSError, AttributeError):
        log.debug("could not load glibc's malloc controls", exc_info=True)
        return None
    return libc


def tune_malloc(arenas: int, mmap_threshold_kb: int, libc: Mallopt | None = None) -> list[tuple[int, int]]:
    """Set glibc's malloc up for a server that writes all day, before its threads start; returns the
    (parameter, value) pairs set (none off glibc, or with 0s).

    - ``arenas``: with one arena per thread (LanceDB's runtime and the request threads), memory freed in
      one arena is not reused by another.
    - ``mmap_threshold_kb``: a fixed threshold at or above which an allocation that the heap's free
      chunks cannot serve gets a mapping of its own, given back to the system when freed, instead of
      growing the heap. glibc's threshold slides up (to 32 MB) each time a mapped block larger than it
      is freed; then the multi-MB buffers of every maintenance round grew the heap, which did not
      shrink again. Plain LanceDB compacting every 100 appends kept 1.95 MB a round that way, 0.56 MB
      with the threshold fixed at 64 KB (``python -m benchmarks.native_heap``). The trim threshold is
      set to twice it, as glibc's sliding rule would, and only once glibc took the mmap threshold
      (setting it alone would also stop the sliding, at glibc's default)."""
    wanted = []
    if arenas > 0:
        wanted.append((M_ARENA_MAX, arenas))
    if mmap_threshold_kb > 0:
        wanted.append((M_MMAP_THRESHOLD, mmap_threshold_kb * 1024))
    if not wanted:
        return []
    if libc is None:
        libc = glibc()
        if libc is None:
            return []
    done = []
    for param, value in wanted:
        if libc.mallopt(param, value) == 1:  # mallopt returns 1 on success
            done.append((param, value))
            if param == M_MMAP_THRESHOLD:
                trim = (M_TRIM_THRESHOLD, 2 * value)
                if libc.mallopt(*trim) == 1:
                    done.append(trim)
    return done


def tune_collector(young_threshold: int) -> tuple[int, int, int]:
    """Young collections of Python's cyclic collector every ``young_threshold`` new container objects
    instead of every 700 (0: leave it); returns the thresholds in force.

    Under load a request lives across many young collections (its candidates, traces and results stay
    alive for the whole call), so at 700 most of them were promoted, the oldest generation grew by a
    quarter every few seconds, and each of its full collections stopped every thread for 200-290 ms with
    the interpreter lock held. Fewer young collections let a request's objects die young; the full ones
    still come, rarely, so cyclic garbage is still reclaimed."""
    if young_threshold > 0:
        _, middle, oldest = gc.get_threshold()
        gc.set_threshold(young_threshold, middle, oldest)
    return gc.get_threshold()


def freeze_collector() -> int:
    """Collect once, then keep every object alive now out of later collections (``gc.freeze``); returns
    how many were frozen. Called once the runtime is built and the scope copies warmed: the modules,
    models and copies live as long as the server, and a full collection then walks only what came
    after. A frozen object is still freed when nothing refers to it; one caught in a reference cycle
    later stays, so at most what was frozen once."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def serve(settings: Settings, http: tuple[str, int] | None) -> int:
    from server.app import build_server
    from server.http import bound_socket, refuse_open_endpoint, transport_security

    tune_malloc(settings.malloc.arenas, settings.malloc.mmap_threshold_kb)
    limit_blas_threads(settings.blas_threads)
    tune_collector(settings.gc.young_threshold)
    sys.setswitchinterval(settings.switch_interval_ms / 1000)
    fresh = new_store(settings.db_uri)  # looked at before the server makes it
    listening = bound_socket(*http) if http is not None else None  # a port in use: nothing started
    app = build_server(settings, when_warm=freeze_collector if settings.gc.freeze_when_warm else None)
    loop = event_loop_options(settings.uvloop)
    if http is None:
        say_new_store(fresh)
        log.info("memoria serving MCP on stdio; store %s", settings.db_uri)
        if sys.stdin.isatty():  # a person at a terminal, not a client: say what it waits for
            log.info(
                "memoria is an MCP server: it waits for a client's messages on stdin (Ctrl-C stops it). "
                "`memoria --help` lists the commands for people; `memoria client claude-code` prints the "
                "entry that makes a client start it."
            )
        return _until_interrupted(app.run_stdio_async, loop)
    host, port = http
    authenticated = app.settings.auth is not None  # build_server read the tokens file or OAuth settings
    refuse_open_endpoint(host, settings, authenticated=authenticated)
    say_new_store(fresh)
    security = transport_security(host, port, settings)
    log.info(
        "memoria serving MCP over streamable HTTP at http://%s:%d/mcp; store %s; clients %s",
        host,
        port,
        settings.db_uri,
        f"authenticate with {'OAuth' if settings.oauth.issuer_url else 'static tokens'}"
        if authenticated
        else "are not asked for a token (loopback)",
    )
    serving = functools.partial(
        app.run_streamable_http_async,
        host=host,
        port=port,
        sock=listening,
        transport_security=security,
        max_request_body_size=body_limit(settings),
    )
    return _until_interrupted(serving, loop)


def body_limit(settings: Settings) -> int:
    """The largest HTTP request body served (413 beyond): ``MEMORIA_HTTP_MAX_BODY_BYTES``, else the largest
    call the tools' own limits let through, so that a call over one of them gets the tool error that names
    it. A trial's remember_many of 100 items of 19,990 characters, within every limit the schema states,
    got an opaque 413 at the former 4 MiB."""
    from tools.remember_many import MAX_ITEMS

    if settings.http.max_body_bytes is not None:
        return settings.http.max_body_bytes
    # UTF-8 as clients send it: 4 bytes a character at most (a client that escapes non-ASCII as \uXXXX
    # sends up to 12); never more than the setting itself may say (256 MiB), whatever MEMORIA_MAX_CONTENT_CHARS.
    return min(MAX_ITEMS * settings.max_content_chars * 4 + (1 << 20), MAX_BODY_BYTES)


# After Ctrl-C, how long the server may take to stop before it exits regardless: a stdio server whose
# client keeps its pipe open waits in a thread reading stdin that nothing can interrupt.
INTERRUPT_GRACE_SECONDS = 5.0


def _until_interrupted(serving: Callable[[], Awaitable[object]], backend_options: dict[str, bool]) -> int:
    """Serve until the transport ends (0), or until Ctrl-C: the way the README stops a server, said in one
    line, not as a traceback. Stopping cancels the serving task, whose lifespan closes the runtime; the
    process then ends by SIGINT, as an interrupted program does (the shell says 130), without waiting for
    a stdio reader thread blocked on a pipe its client keeps open. If stopping itself has not finished
    ``INTERRUPT_GRACE_SECONDS`` later, it exits regardless (every acknowledged write is committed; what is
    lost is at most the last 0.2 s of retrieval logs and credits still being handed on)."""
    stopping = threading.Event()  # Ctrl-C came

    async def serve_quietly() -> None:
        asyncio.get_running_loop().set_exception_handler(functools.partial(_after_interrupt, stopping))
        await serving()

    def run() -> None:
        anyio.run(serve_quietly, backend_options=backend_options)

    if threading.current_thread() is not threading.main_thread():  # no signal handlers there
        try:
            run()
        except KeyboardInterrupt:
            return 130
        return 0
    previous = signal.getsignal(signal.SIGINT)

    def interrupted(signum: int, frame: Any) -> None:
        stopping.set()
        watchdog = threading.Timer(INTERRUPT_GRACE_SECONDS, _exit_interrupted)
        watchdog.daemon = True
        watchdog.start()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C stops at once
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)
    try:
        run()
    except BaseException as exc:
        if not isinstance(exc, KeyboardInterrupt) and not (stopping.is_set() and _only_interrupts(exc)):
            raise
        log.info("memoria stopped (interrupted)")
        _flush_output()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # ends the process here
        return 130  # (a platform where it did not)
    finally:
        signal.signal(signal.SIGINT, previous)
    return 0


def _after_interrupt(stopping: threading.Event, loop: Any, context: dict[str, Any]) -> None:
    """The serving loop's handler of errors no task awaited. Ctrl-C raises in whichever task runs at that
    moment; when that is a task of a task group (the stdio transport's writer, a request's handler), the
    group ends with the interrupt wrapped in an exception group, and asyncio, shutting down, would print
    its traceback as an unhandled error. After Ctrl-C such an ending is the stop, not an error."""
    if stopping.is_set() and _only_interrupts(context.get("exception")):
        return
    loop.default_exception_handler(context)


def _only_interrupts(exc: BaseException | None) -> bool:
    """Whether ``exc`` is Ctrl-C's interrupt or a cancellation, or a group of nothing else."""
    if isinstance(exc, KeyboardInterrupt | asyncio.CancelledError):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_interrupts(inner) for inner in exc.exceptions)
    return False


def _flush_output() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


def _exit_interrupted() -> None:
    log.warning("memoria was still stopping %.0f s after Ctrl-C: exiting now", INTERRUPT_GRACE_SECONDS)
    _flush_output()
    os._exit(130)


def event_loop_options(wanted: bool) -> dict[str, bool]:
    """anyio's asyncio options: uvloop when ``wanted`` and installed (``MEMORIA_UVLOOP``). Every MCP message
    passes through the event loop several times (transport, dispatch, the hop to a tool's worker thread and
    back), and uvloop spends less of the interpreter's time on each: the share of one core that the
    requests of a busy server compete for."""
    if not wanted:
        return {"use_uvloop": False}
    try:
        import uvloop  # noqa: F401
    except ImportError:
        log.info("uvloop is not installed: serving on asyncio's own event loop")
        return {"use_uvloop": False}
    return {"use_uvloop": True}


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """``--http`` and ``--db``: how ``memoria serve`` and ``python -m server`` are told where to serve."""
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        type=parse_http_address,
        help="serve streamable HTTP instead of stdio; HOST defaults to 127.0.0.1",
    )
    parser.add_argument("--db", metavar="URI", help="LanceDB folder or URI (overrides MEMORIA_DB_URI)")


def new_store(db_uri: str) -> str | None:
    """What to say of the store ``db_uri`` names before the server makes it (None: nothing): a local folder,
    other than the default one, that does not exist yet, or that holds other files and no store."""
    from retrieval.text import listed
    from server.config import default_data_dir, local_store_folder

    folder = local_store_folder(db_uri)
    if folder is None or folder == default_data_dir() / "lancedb":
        return None
    where = db_uri if str(folder.absolute()) == db_uri else f"{db_uri} ({folder.absolute()})"
    if not folder.exists():
        return f"no store at {where} yet: making a new, empty one there (if you meant an existing store, check the path)"
    try:
        others = sorted(entry.name for entry in folder.iterdir() if not entry.name.startswith(".memoria"))
    except OSError:
        return None  # opening the store says what is wrong
    if others and not any(name.endswith(".lance") for name in others):
        return (
            f"{where} holds other files ({listed(others, 3)}) and no memoria store: making the store's tables beside them "
            "(point MEMORIA_DB_URI at a folder of its own if that was not meant)"
        )
    return None


def say_new_store(notice: str | None) -> None:
    """A named local folder that did not exist is served (a client entry names its folder before the
    first start: the server makes it), but a mistyped path then becomes a new, empty store that answers
    every recall with nothing, and a folder of other files (a project's source) gets the store's tables
    beside them: said once, on stderr, as the server starts serving. The default folder is made on first
    use, unsaid."""
    if notice:
        log.warning("%s", notice)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m server [serve] [--http HOST:PORT] [--db URI]``: the server alone, without the commands
    for people (``memoria``, in ``console``, has them all)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:
        argv = argv[1:]
    elif argv and not argv[0].startswith("-"):
        return refused(
            f"python -m server only serves; run `memoria {argv[0]}` (or `python -m console {argv[0]}`) "
            f"for the command {argv[0]!r}"
        )
    parser = argparse.ArgumentParser(
        prog="python -m server",
        description="Serve memoria over MCP. The commands for people (recall, remember, import, ...) are "
        "`memoria <command>`, or `python -m console <command>`.",
    )
    add_serve_arguments(parser)
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env(**({"db_uri": args.db} if args.db else {}))
        configure_logging(settings.log_level)
        return serve(settings, args.http)
    except ConfigError as exc:
        return refused(str(exc))


def refused(message: str) -> int:
    """Say why the server does not start, on stderr (stdout is the protocol stream), before logging is
    set up; the exit status."""
    sys.stderr.write(f"memoria: {message}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
