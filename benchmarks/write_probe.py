"""Where a running server's write time goes: the write service's steps and the store's locks, timed.

Used by ``python -m benchmarks.load --trace-writes``: the server is started with ``benchmarks/write_probe_site``
on its ``PYTHONPATH``, whose ``sitecustomize`` calls ``install_when_loaded`` when ``MEMORIA_BENCH_WRITE_PROBE``
names a file. Once the server's modules are imported, ``install`` wraps the methods of ``STEPS`` with a
timer and the locks' ``hold`` with one that times the wait and the hold (per lock file), and keeps the
call stack of every outermost hold of ``LONG_HOLD_MS`` or more; every half second and at exit it writes
what it timed to that file as JSON. ``summarise`` turns the file into per-step percentiles.

A benchmark's instrument, not the server's: it wraps private methods by name, and says so in the file
(``missing``) when one is gone, so that a renamed method shows instead of a step silently not timed.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

PROBE_ENV = "MEMORIA_BENCH_WRITE_PROBE"
SITE = Path(__file__).with_name("write_probe_site")  # put on the server's PYTHONPATH
LONG_HOLD_MS = 80.0
DUMP_EVERY_SECONDS = 0.5  # a server stopped by a signal may not run atexit: the file is never older than this
# Frames a long hold's stack leaves out: threads' and context managers' own, and this module's wrappers.
PLUMBING = frozenset(
    {"_bootstrap", "_bootstrap_inner", "run", "__enter__", "__exit__", "timed", "timed_hold", "helper"}
)

# (module, class, method, what it is called in the report)
STEPS: tuple[tuple[str, str, str, str], ...] = (
    ("writing.service", "WriteService", "remember", "remember (write service)"),
    ("storage.group_commit", "GroupCommit", "run", "group commit, either level: wait and commit"),
    ("writing.consolidation.service", "ConsolidationService", "on_write", "consolidation"),
    ("writing.consolidation.service", "ConsolidationService", "_supersede", "consolidation: supersede"),
    ("writing.consolidation.service", "ConsolidationService", "record_retirement", "retirement: lineage"),
    ("writing.inheritance", "Inheritance", "inherit", "inheritance: what the superseded earned"),
    ("writing.inheritance", "Inheritance", "inherit_credits", "inheritance: credits and weight"),
    ("storage.memories", "Memories", "_set_status", "status change (supersede, retract; lock wait included)"),
    ("storage.tables", "StoreTables", "_append_rows", "append (any table)"),
    ("storage.tables", "StoreTables", "_update_chunk", "update of memories' rows (status, stamp)"),
    ("storage.tables", "StoreTables", "_merge_update", "merge into memories' rows (weights, tags)"),
    ("storage.feedback_log", "FeedbackLog", "set_weights", "report: weight write"),
)
LOCK = ("storage.locking", "WriteLock")
# The frames through which a call takes a lock: left out of the name of who held it.
LOCK_FRAMES = frozenset({"hold", "exclusive", "reporting", "_sequence"})


class Recorder:
    """Timings by name, written to ``path`` as JSON."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.timings: dict[str, list[float]] = {}
        self.missing: list[str] = []
        self._lock = threading.Lock()

    def add(self, name: str, ms: float) -> None:
        with self._lock:
            self.timings.setdefault(name, []).append(round(ms, 3))

    def dump(self) -> None:
        with self._lock:
            data = {
                "timings": {name: list(values) for name, values in self.timings.items()},
                "missing": self.missing,
            }
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(data))
        partial.replace(self.path)


def _timed(recorder: Recorder, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            recorder.add(name, (time.perf_counter() - started) * 1000)

    return timed


def _caller_names() -> list[str]:
    """The names of the calling frames, outermost first, without the plumbing (no source lines read)."""
    names = []
    frame: Any = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name not in PLUMBING:
            names.append(frame.f_code.co_name)
        frame = frame.f_back
    names.reverse()
    while names and names[-1] in LOCK_FRAMES:  # the lock's own entry points
        names.pop()
    return names


def _timed_hold(recorder: Recorder, hold: Callable[..., Any]) -> Callable[..., Any]:
    @contextlib.contextmanager
    def timed_hold(lock: Any, **how: Any) -> Iterator[None]:
        name = Path(str(lock.path)).name.lstrip(".") if lock.path is not None else "in-process lock"
        callers = _caller_names()  # before the lock: nothing waits for this
        asked = time.perf_counter()
        outermost = False
        with hold(lock, **how):
            got = time.perf_counter()
            outermost = lock._depth == 1
            try:
                yield
            finally:
                released = time.perf_counter()
        if outermost:  # recorded once the lock is given up
            held = (released - got) * 1000
            recorder.add(f"lock {name}: wait", (got - asked) * 1000)
            recorder.add(f"lock {name}: held", held)
            # Every hold by the calls that took it, and the long ones with more of their stack.
            recorder.add(f"hold of {name} by " + " > ".join(callers[-3:]), held)
            if held >= LONG_HOLD_MS:
                recorder.add(f"long hold of {name}: " + " > ".join(callers[-7:]), held)

    return timed_hold


def install(path: Path) -> Callable[[], None]:
    """Time ``STEPS`` and the locks in this process, writing to ``path``; returns what undoes it."""
    recorder = Recorder(path)
    undo: list[Callable[[], None]] = []
    for module_name, class_name, method_name, label in STEPS:
        cls = getattr(importlib.import_module(module_name), class_name, None)
        original = vars(cls).get(method_name) if cls is not None else None
        if original is None:
            recorder.missing.append(f"{module_name}.{class_name}.{method_name}")
            continue
        setattr(cls, method_name, _timed(recorder, label, original))
        undo.append(functools.partial(setattr, cls, method_name, original))
    lock_class = getattr(importlib.import_module(LOCK[0]), LOCK[1])
    hold = vars(lock_class)["hold"]
    lock_class.hold = _timed_hold(recorder, hold)
    undo.append(functools.partial(setattr, lock_class, "hold", hold))
    stop = threading.Event()

    def dumping() -> None:
        while not stop.wait(DUMP_EVERY_SECONDS):
            recorder.dump()

    threading.Thread(target=dumping, name="write-probe", daemon=True).start()
    atexit.register(recorder.dump)

    def uninstall() -> None:
        stop.set()
        atexit.unregister(recorder.dump)
        for step in reversed(undo):
            step()
        recorder.dump()

    return uninstall


def install_when_loaded(path: str) -> None:
    """``install`` once the server has imported what it times (from a ``sitecustomize``, which runs before
    the server's own imports): a thread waits for the modules, so that nothing is imported before the
    server has tuned malloc and its BLAS threads."""
    wanted = {module for module, *_ in STEPS} | {LOCK[0]}

    def waiting() -> None:
        while not wanted <= sys.modules.keys():
            time.sleep(0.05)
        install(Path(path))

    threading.Thread(target=waiting, name="write-probe-install", daemon=True).start()


def summarise(path: Path) -> dict[str, Any]:
    """Per timed name: calls, median, p95 (the percentiles of the load's own figures) and total; long holds
    by total time, most first."""
    from benchmarks.perf import percentile  # here: the server loads this module before its own imports

    data = json.loads(path.read_text())
    steps: dict[str, Any] = {}
    holds: dict[str, Any] = {}
    by_caller: dict[str, Any] = {}
    for name, values in data["timings"].items():
        figures = {
            "n": len(values),
            "p50_ms": round(percentile(values, 0.50), 1),
            "p95_ms": round(percentile(values, 0.95), 1),
            "total_s": round(sum(values) / 1000, 2),
        }
        if name.startswith("long hold"):
            holds[name] = figures
        elif name.startswith("hold of"):
            by_caller[name] = figures
        else:
            steps[name] = figures
    return {
        "steps": steps,
        "long_holds": dict(sorted(holds.items(), key=lambda item: -item[1]["total_s"])),
        "holds_by_caller": dict(sorted(by_caller.items(), key=lambda item: -item[1]["total_s"])),
        "missing": data["missing"],
    }


def probe_env(path: Path) -> dict[str, str]:
    """The environment that makes a server started from this checkout time its writes into ``path``."""
    root = str(Path(__file__).resolve().parent.parent)
    return {"PYTHONPATH": os.pathsep.join([str(SITE), root]), PROBE_ENV: str(path)}
