"""Fan-out to the readers of a live view: each reader (`updates()`, a callback, `async for`)
has its own bounded queue (an outlet); when it falls behind, its oldest items are dropped and
counted, and the others go on. A callback (`Subscription`) runs on a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["AsyncOutlet", "Fanout", "Outlet", "Subscription", "ThreadOutlet"]

log = logging.getLogger("robowire")

T = TypeVar("T")


class Outlet(Generic[T]):
    """One reader's bounded queue of updates or events (oldest dropped and counted when
    full)."""

    def __init__(self, maxlen: int) -> None:
        self.items: deque[T] = deque(maxlen=maxlen)
        self.dropped = 0
        self.closed = False

    def put(self, update: T) -> None:
        if len(self.items) == self.items.maxlen:
            self.dropped += 1
        self.items.append(update)

    def end(self) -> None:
        self.closed = True


class ThreadOutlet(Outlet[T]):
    def __init__(self, maxlen: int) -> None:
        super().__init__(maxlen)
        self.cond = threading.Condition()

    def put(self, update: T) -> None:
        with self.cond:
            super().put(update)
            self.cond.notify()

    def end(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def get(self, timeout: float | None) -> T | None:
        """The oldest item; None when `timeout` passed first or the outlet ended."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.items or self.closed, timeout):
                return None
            return self.items.popleft() if self.items else None


class AsyncOutlet(Outlet[T]):
    def __init__(self, maxlen: int) -> None:
        super().__init__(maxlen)
        self.event = asyncio.Event()

    def put(self, update: T) -> None:
        super().put(update)
        self.event.set()

    def end(self) -> None:
        self.closed = True
        self.event.set()

    async def get(self, timeout: float | None) -> T | None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while not self.items and not self.closed:
                    self.event.clear()
                    await self.event.wait()
        return self.items.popleft() if self.items else None


class Subscription(Generic[T]):
    """A callback registered with `on_update` (or `on_button`, ...): it runs on its own thread
    from its own bounded queue, so one that blocks stalls neither the sources nor the other
    readers."""

    def __init__(self, hub: Fanout[T], callback: Callable[[T], object], maxlen: int) -> None:
        self._hub = hub
        self._outlet: ThreadOutlet[T] = ThreadOutlet(maxlen)
        self.callback = callback
        self.calls = 0
        self.errors = 0
        hub.attach(self._outlet)
        self._thread = threading.Thread(target=self._run, name="robowire-callback", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        """Updates lost because the callback fell more than its queue behind."""
        return self._outlet.dropped

    def _run(self) -> None:
        while True:
            update = self._outlet.get(None)
            if update is None:
                return
            try:
                self.callback(update)
            except Exception:
                self.errors += 1
                log.exception("robowire: the callback %r raised", self.callback)
            self.calls += 1

    def cancel(self) -> None:
        """Stop calling the callback (updates already queued are not delivered)."""
        self._hub.detach(self._outlet)
        self._outlet.items.clear()
        self._outlet.end()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5.0)


class Fanout(Generic[T]):
    """Outlets that each get every item `put` hands out (attached from any thread)."""

    def __init__(self) -> None:
        self.outlets: tuple[Outlet[T], ...] = ()
        self.finished = False
        self._lock = threading.Lock()

    def attach(self, outlet: Outlet[T]) -> None:
        with self._lock:
            self.outlets = (*self.outlets, outlet)
        if self.finished:
            outlet.end()

    def detach(self, outlet: Outlet[T]) -> None:
        with self._lock:
            self.outlets = tuple(o for o in self.outlets if o is not outlet)

    def put(self, item: T) -> None:
        for outlet in self.outlets:
            outlet.put(item)

    def end(self) -> None:
        self.finished = True
        for outlet in self.outlets:
            outlet.end()
