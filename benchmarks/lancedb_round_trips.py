"""What one LanceDB call costs while other threads run Python, one command:

    python -m benchmarks.lancedb_round_trips                  # 0, 1 and 2 busy threads, 100 calls each
    python -m benchmarks.lancedb_round_trips --busy 0 2 6 --calls 100

A call of LanceDB's synchronous API crosses threads several times (the caller, LanceDB's event loop,
the Rust threads that complete it), and each crossing needs the interpreter lock. Alone, a call takes a
few milliseconds at most; with other threads running Python, each crossing waits for its turn with the
lock, so what counts is how many crossings a call makes. A server under load always has other threads
running Python (the recall pipeline, the MCP layer), so its LanceDB calls pay this on every write.

Measured here on a table of one string and a 384-float vector, per number of busy threads: a one-row
append through ``Table.add`` (which first asks the table for its schema), the same append through
``storage.appenders.Appenders`` (straight to the native append), and three calls that only ask the
table something (``schema``, ``version``, ``count_rows``), taking turns call by call. ``version`` asks a
handle of the default connection, which answers from what it last loaded; the store's handles check
for the newest version on every call (``read_consistency_interval=0``), as ``version (strong)`` does; and
``version (manifests)`` is how the store's readers take it on a local store, from the names of the
table's manifests (``storage.versions.newest_on_disk``: no LanceDB call at all, but a listing of every
version kept, which grows by two each round here), and ``version (probe)`` the same from the version found
last and a check for the names after it (``storage.versions.NewestManifest``, what the store uses since
2026-12-01). ``scan (builder)`` is a filtered read of one row through LanceDB's synchronous query
builder on the store's kind of handle, ``scan`` the same read as the store makes it
(``storage.scan``: one round trip). Medians in ms, and
the native append's ratio to ``Table.add``. A busy thread runs Python only, so it gives the lock up only
when the interpreter makes it (every 5 ms by default) or another thread asks for it: each crossing of a
call then waits up to that long. That is the worst case; threads that also wait on I/O or numpy hand the
lock over sooner.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa

from benchmarks.reporting import RESULTS, write_json
from storage.appenders import Appenders
from storage.filters import equals
from storage.scan import EVERY_ROW, scan
from storage.versions import NewestManifest, newest_on_disk

SCHEMA = pa.schema([pa.field("id", pa.string()), pa.field("vector", pa.list_(pa.float32(), 384))])


def one_row(index: int, rng: np.random.Generator) -> pa.Table:
    vector = rng.random(384, dtype=np.float32)
    return pa.Table.from_pylist([{"id": f"row-{index}", "vector": vector.tolist()}], schema=SCHEMA)


class BusyThreads:
    """``count`` threads running Python until stopped."""

    def __init__(self, count: int) -> None:
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(count)]

    def _work(self) -> None:
        total = 0
        while not self._stop.is_set():
            for step in range(1_000):
                total += step

    def __enter__(self) -> BusyThreads:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def builder_scan(table: Any, row_id: str) -> pa.Table:
    """A filtered read through LanceDB's synchronous query builder, as ``storage.scan`` read before."""
    found: pa.Table = table.search().where(equals("id", row_id)).select(["id"]).limit(EVERY_ROW).to_arrow()
    return found


def medians_ms(calls: dict[str, Callable[[int], Any]], count: int) -> dict[str, float]:
    """Each call ``count`` times, taking turns call by call, so that all meet the same moments of the
    busy threads; the median of each in ms."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for index in range(count):
        for name, call in calls.items():
            started = time.perf_counter()
            call(index)
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.median(values) for name, values in times.items()}


def measure(folder: Path, busy: int, calls: int) -> dict[str, float]:
    db = lancedb.connect(str(folder))
    table = db.create_table(f"t{busy}", schema=SCHEMA)
    table.add(one_row(-1, np.random.default_rng(0)))
    strong = lancedb.connect(str(folder), read_consistency_interval=timedelta(0)).open_table(f"t{busy}")
    appenders = Appenders(lancedb.connect(str(folder)))
    if not appenders.direct(f"t{busy}"):
        print("this LanceDB has no native append: both appends go through Table.add", file=sys.stderr)
    rng = np.random.default_rng(busy)
    rows = [one_row(index, rng) for index in range(2 * calls)]
    probe = NewestManifest(folder / f"t{busy}.lance")
    with BusyThreads(busy):
        return medians_ms(
            {
                "Table.add": lambda i: table.add(rows[i]),
                "Appenders.add": lambda i: appenders.add(f"t{busy}", rows[calls + i]),
                "schema": lambda _: table.schema,
                "version": lambda _: table.version,
                "count_rows": lambda _: table.count_rows(),
                "version (strong)": lambda _: strong.version,
                "version (manifests)": lambda _: newest_on_disk(folder / f"t{busy}.lance"),
                "version (probe)": lambda _: probe.read(),
                "scan (builder)": lambda i: builder_scan(strong, f"row-{i}"),
                "scan": lambda i: scan(strong, equals("id", f"row-{i}"), ["id"]),
            },
            calls,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 1, 2], help="busy threads, one run each")
    parser.add_argument("--calls", type=int, default=100, help="calls of each kind per run")
    parser.add_argument("--out", type=Path, default=RESULTS / "lancedb_round_trips.json")
    args = parser.parse_args(argv)
    report: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for busy in args.busy:
            report[str(busy)] = measure(Path(folder), busy, args.calls)
    names = list(next(iter(report.values())))
    print(f"{'busy threads':>12} " + " ".join(f"{name:>19}" for name in names) + "   direct / Table.add")
    for busy, medians in report.items():
        ratio = medians["Appenders.add"] / medians["Table.add"]
        print(f"{busy:>12} " + " ".join(f"{medians[name]:>19.2f}" for name in names) + f"   {ratio:.2f}x")
    print("(medians in ms)")
    write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
