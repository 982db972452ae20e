"""An event loop on a background thread, for the library's synchronous face.

`robowire.connect` and `robowire.publish` run their gateway here, so a script or a notebook
needs no asyncio: the sources and sinks run at their own pace on this thread, and the caller's
thread only reads the latest state or hands writes over (`call_soon`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from robowire.errors import RobowireError
from robowire.runner import Runner
from robowire.service import Service
from robowire.status import ServiceStatus
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
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def call() -> None:
            try:
                future.set_result(fn(*args))
            except BaseException as error:
                future.set_exception(error)

        self.loop.call_soon_threadsafe(call)
        return future.result(timeout)

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


class Running:
    """Services (a sink, a simulator, a VSM) run by a gateway on a `LoopThread` until
    `close` (or the end of a `with` block). Built with a function that makes them on the loop;
    the constructor returns once each is ready (bound, subscribed) and raises the error of one
    that failed instead (the CLI's one-line message: a port in use, a bad option)."""

    def __init__(self, make: Callable[[], Sequence[Service]], name: str = "robowire") -> None:
        self.gateway = Runner()
        self.thread = LoopThread(name)
        self._run: asyncio.Task[None] | None = None
        try:
            self.services = self.thread.run(self._start(make), timeout=30.0)
        except BaseException:
            self.thread.close()
            raise

    async def _start(self, make: Callable[[], Sequence[Service]]) -> list[Service]:
        services = list(make())
        self.gateway.add(*services)
        run = self._run = asyncio.create_task(self.gateway.run())
        for service in services:
            ready = asyncio.ensure_future(service.ready.wait())
            await asyncio.wait({run, ready}, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            if run.done():
                run.result()  # raises what stopped it
                raise RobowireError(f"{service.name}: ended at once")
        return services

    @property
    def address(self) -> tuple[str, int] | None:
        """Where the first service listens (or sends to): the port it got for port 0."""
        return self.services[0].address

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the loop thread (to touch the world or a service safely)."""
        return self.thread.call(fn, *args)

    def status(self) -> list[ServiceStatus]:
        """What each service is doing (`Runner.status`)."""
        return self.thread.call(self.gateway.status)

    def close(self) -> None:
        """Stop the services and the loop (idempotent)."""
        if self.thread.loop.is_closed():
            return
        run = self._run
        if run is not None and not run.done():
            self.thread.call_soon(self.gateway.stop)

            async def ended() -> None:
                await asyncio.wait([run])

            with contextlib.suppress(BaseException):
                self.thread.run(ended(), timeout=10.0)
        self.thread.close()

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
