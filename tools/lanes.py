"""Lanes: how many worker threads each kind of tool call may hold at once.

A tool does its work in a worker thread, and anyio's pool (40 threads per event loop; the server runs
one) served every tool alike. Under many clients the reads took most of it: a remember, or an outcome
report, waited for a thread behind dozens of recalls that only shared the interpreter more thinly, and
the reports queued behind one another while each ran ten times slower than alone (``benchmarks.load``, 50 clients: remember
p50 1.0 s, report_outcome p50 12.9 s).

Now recall and explain_ranking run at most ``MEMORIA_READ_CONCURRENCY`` at a time and outcome reports
``REPORTS`` at a time (their reports' lock lets one write at a time anyway); the others wait their turn
without holding a thread, in the order they came. Writes and the light tools keep anyio's pool. By
default the read lane holds ``READS`` (3) threads when recall runs on this machine alone: its work is
Python's and LanceDB's, two cores are kept busy with the event loop, writes and LanceDB's own threads
beside it, and more threads only share the interpreter more thinly. A recall that waits on the network
(the Cohere reranker, an LLM reranker, the LLM gate or passes, through the client's sampling or an API)
mostly waits, and three of them waiting on a slow model would hold up every recall: then the lane
holds ``READS_WAITING`` (anyio's 40), as before lanes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

T = TypeVar("T")

Lane = Literal["read", "report"]

READS = 3
READS_WAITING = 40  # when recall waits on a network model: anyio's own pool size
REPORTS = 2

# One set of limiters per event loop run (a limiter belongs to the loop that made it: tests run many),
# by lane and size.
_LIMITERS: RunVar[dict[tuple[Lane, int], anyio.CapacityLimiter]] = RunVar("memoria_lanes")


@dataclass(frozen=True)
class Lanes:
    """The threads each lane may hold at once (``read``: recall, explain_ranking; ``report``:
    report_outcome)."""

    reads: int = READS
    reports: int = REPORTS

    def limiter(self, lane: Lane) -> anyio.CapacityLimiter:
        """This event loop's limiter of ``lane`` (made on first use)."""
        try:
            limiters = _LIMITERS.get()
        except LookupError:
            limiters = {}
            _LIMITERS.set(limiters)
        key = (lane, self.reads if lane == "read" else self.reports)
        if key not in limiters:
            limiters[key] = anyio.CapacityLimiter(key[1])
        return limiters[key]

    async def run(self, lane: Lane, work: Callable[..., T], *args: object) -> T:
        """``work(*args)`` in a worker thread, once ``lane`` has a thread free."""
        return await anyio.to_thread.run_sync(work, *args, limiter=self.limiter(lane))
