"""The timers: the one re-armable timer every driver uses to call `session.tick` at its next
deadline, and the ticker a source's periodic work runs on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from robowire.timebase import monotonic


class DeadlineTimer:
    """Calls `callback` at the session's next deadline; `arm` replaces any earlier one."""

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self._loop = loop
        self._callback = callback
        self._handle: asyncio.TimerHandle | None = None
        self._when: float | None = None

    def arm(self, deadline: float | None) -> None:
        if deadline == self._when and self._handle is not None:
            return
        self.cancel()
        if deadline is not None:
            self._when = deadline
            self._handle = self._loop.call_at(deadline, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._when = None
        self._callback()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self._when = None


class Ticker:
    """Calls `callback(now)` every `period` seconds (`now`: monotonic) until `cancel`; a
    `period` of None never calls it."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        period: float | None,
        callback: Callable[[float], None],
    ) -> None:
        self._loop = loop
        self._period = period
        self._callback = callback
        self._handle: asyncio.TimerHandle | None = None
        if period is not None:
            self._handle = loop.call_later(period, self._fire)

    def _fire(self) -> None:
        assert self._period is not None
        self._handle = self._loop.call_later(self._period, self._fire)
        self._callback(monotonic())

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
