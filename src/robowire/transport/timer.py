"""The one re-armable timer every driver uses to call `session.tick` at its next deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


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
