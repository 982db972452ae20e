"""The one reconnect loop: `keep_connecting` dials again and again, waiting as a `Backoff`
says. The `Source` template runs its connections on it, and so does a simulator that dials
(UgCS reverse mode: a VSM dialling the UCS)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from robowire.errors import TransportError
from robowire.timebase import monotonic

STEADY_ATTEMPTS = 30  # an outage's first 30 `retry`s (half a minute at the default 1 s):
# attempts `retry` apart, no doubling


@dataclass(slots=True)
class Backoff:
    """The reconnect rule, sans I/O: how long to wait before the next attempt.

    For the first `steady` seconds of an outage (`STEADY_ATTEMPTS` times `retry` unless
    given), attempts start `retry` seconds apart (a peer restarted is usually back within
    seconds, and is found within `retry` of its return); after that the wait doubles after
    each failure up to `cap` (a peer gone for good is not dialled every second forever). A
    connection that lasted at least `retry` seconds is dialled again at once (a peer that
    restarted is usually back, or refuses at once); one that ended sooner waits `retry`
    first, so a peer that accepts and closes at once is not hammered. Either way a new outage
    starts: `retry` apart again."""

    retry: float
    cap: float
    steady: float = -1.0  # below 0: STEADY_ATTEMPTS * retry
    delay: float = field(init=False)
    outage: float = field(init=False, default=0.0)  # seconds of this outage so far

    def __post_init__(self) -> None:
        self.cap = max(self.cap, self.retry)
        self.delay = self.retry
        if self.steady < 0.0:
            self.steady = STEADY_ATTEMPTS * self.retry

    def failed(self, took: float) -> float:
        """An attempt that took `took` seconds failed: the wait before the next (an attempt
        that waited itself, a connection request that timed out, is not followed by a whole
        wait more)."""
        wait = max(0.0, self.delay - took)
        self.outage += took + wait
        if self.outage >= self.steady:
            self.delay = min(2.0 * self.delay, self.cap)
        return wait

    def ended(self, lasted: float) -> float:
        """A connection that was up for `lasted` seconds ended: the wait before redialling."""
        self.delay = self.retry
        self.outage = 0.0
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
