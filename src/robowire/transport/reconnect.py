"""The one reconnect loop: `keep_connecting` dials again and again, waiting as a `Backoff`
says. The `Source` template runs its connections on it, and so does a simulator that dials
(UgCS reverse mode: a VSM dialling the UCS)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from robowire.errors import TransportError
from robowire.timebase import monotonic


@dataclass(slots=True)
class Backoff:
    """The reconnect rule, sans I/O: how long to wait before the next attempt.

    Attempts that fail start `retry` seconds apart, the wait doubling after each failure up
    to `cap`. A connection that lasted at least `retry` seconds is dialled again at once (a
    peer that restarted is usually back, or refuses at once); one that ended sooner waits
    `retry` first, so a peer that accepts and closes at once is not hammered. Either way the
    next failure starts from `retry` again."""

    retry: float
    cap: float
    delay: float = field(init=False)

    def __post_init__(self) -> None:
        self.cap = max(self.cap, self.retry)
        self.delay = self.retry

    def failed(self, took: float) -> float:
        """An attempt that took `took` seconds failed: the wait before the next (an attempt
        that waited itself, a connection request that timed out, is not followed by a whole
        wait more)."""
        wait = max(0.0, self.delay - took)
        self.delay = min(2.0 * self.delay, self.cap)
        return wait

    def ended(self, lasted: float) -> float:
        """A connection that was up for `lasted` seconds ended: the wait before redialling."""
        self.delay = self.retry
        return 0.0 if lasted >= self.retry else self.retry


async def keep_connecting(
    connect: Callable[[], Awaitable[None]],
    backoff: Backoff,
    *,
    failed: Callable[[TransportError], None],
    ended: Callable[[], None],
) -> None:
    """Call `connect` again and again until cancelled, waiting as `backoff` says: the one
    reconnect loop (`Source`'s, and a dialling simulator's). `connect` raises TransportError
    when it cannot connect (`failed` is told) and returns once its connection has ended
    (`ended` is told); any other error ends the loop."""
    while True:
        began = monotonic()
        try:
            await connect()
        except TransportError as exc:
            failed(exc)
            wait = backoff.failed(monotonic() - began)
        else:
            ended()
            wait = backoff.ended(monotonic() - began)
        if wait > 0.0:
            await asyncio.sleep(wait)
