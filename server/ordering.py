"""Read-your-writes on one session: a read waits for the writes of its session that arrived before it.

A client may send ``remember`` and, without waiting for its answer, ``recall`` on the same connection. The
server runs the two at once, and the recall found nothing of the memory sent just before it (a new user's
trial). Each write (``remember``, ``remember_many``, ``forget``, ``report_outcome``) is registered under its
client's session (the connection's, whatever session an argument names) as it arrives, before the call's
first wait; a read (``recall``, ``explain_ranking``, ...) waits for the writes registered before it, and
only for those (``READ_WAITS_AT_MOST`` at most): writes do not wait for each other (group commit coalesces
them), and a write sent after a read does not hold it up. Nothing is kept once a session has no write in
flight, so what is held does not grow with the calls served.
"""

from __future__ import annotations

import anyio

# How long a read waits for the writes before it: a write that waits on its client (a language model's
# answer asked by sampling, a person's approval) must not hold the session's reads without end; past it,
# the read goes on and may miss what those writes store.
READ_WAITS_AT_MOST = 30.0


class WritesInFlight:
    """The writes in flight, per session key (the event loop's thread only)."""

    def __init__(self) -> None:
        self._pending: dict[str, set[anyio.Event]] = {}

    def begin(self, key: str) -> anyio.Event:
        """Register a write of ``key`` as it arrives; set the event it returns when it ends (``end``)."""
        done = anyio.Event()
        self._pending.setdefault(key, set()).add(done)
        return done

    def end(self, key: str, done: anyio.Event) -> None:
        done.set()
        pending = self._pending.get(key)
        if pending is not None:
            pending.discard(done)
            if not pending:
                del self._pending[key]

    async def settled(self, key: str, at_most: float = READ_WAITS_AT_MOST) -> None:
        """Wait until every write of ``key`` registered before this call has ended, or ``at_most`` seconds
        have passed."""
        with anyio.move_on_after(at_most):
            for done in list(self._pending.get(key, ())):
                await done.wait()

    def __len__(self) -> int:
        """The sessions with a write in flight."""
        return len(self._pending)
