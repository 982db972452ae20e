"""An event loop on a background thread, for the library's synchronous face.

`robowire.connect` and `robowire.publish` run their gateway here, so a script or a notebook
needs no asyncio: the sources and sinks run at their own pace on this thread, and the caller's
thread only reads the latest state or hands writes over (`call_soon`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from robowire.transport.loop import new_event_loop

T = TypeVar("T")


class LoopThread:
    """One event loop running forever on its own daemon thread until `close`."""

    def __init__(self, name: str = "robowire") -> None:
        self.loop = new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start `coro` on the loop; its future resolves in any thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result (its exception is raised here)."""
        return self.submit(coro).result(timeout)

    def call(self, fn: Callable[..., T], *args: Any, timeout: float | None = 10.0) -> T:
        """Call `fn(*args)` on the loop thread and return its result here."""
        if threading.current_thread() is self._thread:
            return fn(*args)

        async def call() -> T:
            return fn(*args)

        return self.run(call(), timeout)

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue `fn(*args)` on the loop without waiting for it."""
        self.loop.call_soon_threadsafe(fn, *args)

    def close(self) -> None:
        """Stop the loop, join the thread and close the loop (idempotent)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10.0)
        if not self._thread.is_alive():
            self.loop.close()
