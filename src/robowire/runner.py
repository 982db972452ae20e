"""The runner: every service of a gateway as its own task around one world, until stopped.

Broken peers are a session's business (counted and dropped, never raised). A source that fails
is logged in one line and leaves the others running (the exit status says it failed). A sink or
simulator that fails (a port in use, a file that cannot be written) ends the run, since the
command cannot do its job without it: `run` raises its error, which the command prints as its
one error line. The run ends on `stop()`, when `duration` has passed, or when every source has
finished (files read to the end); then sinks get a moment to drain what the world published.
While it runs, the process's file descriptors are watched (`transport.descriptors`): running
out of them (no new connection can be accepted) is said in one line, and their return in one.

It knows services, not URLs: opening them is `robowire.gateway`'s (whose `Gateway` is this
runner plus `add_sources`), so the library's background thread (`robowire.background`) and a
protocol's own `serve` run services below the protocol registry.

A runner with `pace` (`listen`'s terminal table) runs its loop at a frame rate: each turn of
the loop handles what is ready, then rests `pace` seconds (a blocking sleep, so the process
wakes about `1 / pace` times a second however much comes). Meanwhile the kernel queues what
arrives, and the next turn reads each socket's whole queue as one batch: a display that
refreshes a few times a second gains nothing from waking for each datagram, and a batch costs
far less per message. Everything is still read and answered (pings, keep-alives), a turn or
so late; a coroutine waits a turn for each `await` that is not ready at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Self

from robowire.errors import RobowireError
from robowire.service import Service, Source
from robowire.status import RateMeter, Remote, ServiceStatus, service_status
from robowire.timebase import monotonic
from robowire.transport.descriptors import watch_descriptors
from robowire.world import World

log = logging.getLogger("robowire")


@dataclass
class Runner:
    """Runs services around one world. Services may be added before or during `run`."""

    world: World = field(default_factory=World)
    services: list[Service] = field(default_factory=list)
    failures: list[tuple[Service, BaseException]] = field(default_factory=list)
    drain_seconds: float = 0.2
    pace: float | None = None  # seconds the loop rests each turn (see above); None: never
    _tasks: dict[asyncio.Task[None], Service] = field(default_factory=dict)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _running: bool = False
    _started: list[Service] = field(default_factory=list)
    _rates: RateMeter = field(default_factory=RateMeter)

    def add(self, *services: Service) -> Self:
        for service in services:
            self.services.append(service)
            if self._running:
                self._start(service)
        return self

    def stop(self) -> None:
        """End the run (safe to call from any callback on the loop, or before `run`)."""
        self._stopping.set()

    def status(self) -> list[ServiceStatus]:
        """What each service is doing now (see `robowire.status`), a worker's followed by
        the services it runs; the message rates are measured between calls."""
        now = monotonic()
        out: list[ServiceStatus] = []
        for service in self.services:
            out.append(service_status(service, self._state(service), self.world, self._rates, now))
            if isinstance(service, Remote):  # a worker: then the services it runs
                out += service.remote_status()
        return out

    def _state(self, service: Service) -> str:
        if any(s is service for s, _ in self.failures):
            return "failed"
        started = any(s is service for s in self._started)
        if started and not any(s is service for s in self._tasks.values()):
            return "finished"
        if isinstance(service, Source):
            return "connected" if service.live(monotonic()) else "waiting"
        if isinstance(service, Remote):
            return "connected" if service.speaking() else "waiting"
        if not service.ready.is_set():
            return "waiting"
        return "listening" if service.announce == "listening on" else "connected"

    async def run(self, duration: float | None = None) -> None:
        """Run until stopped, `duration` seconds passed, or every source finished.

        Raises the RobowireError of a sink or simulator that failed, once everything stopped.
        """
        self._running = True
        if self.pace:
            asyncio.get_running_loop().call_soon(self._rest)
        watch = asyncio.create_task(watch_descriptors(), name="descriptors")
        try:
            async with asyncio.timeout(duration):
                await self._start_servers_then_sources()
                await self._stopping.wait()
        except TimeoutError:
            pass
        finally:
            self._running = False
            tasks = [*self._tasks, watch]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for service, exc in self.failures:
            if not isinstance(service, Source) and isinstance(exc, RobowireError):
                raise exc

    def _rest(self) -> None:
        """One turn's rest (`pace`), then again on the next turn, while the run goes on."""
        if self._running and self.pace:
            time.sleep(self.pace)
            asyncio.get_running_loop().call_soon(self._rest)

    async def _start_servers_then_sources(self) -> None:
        """Sinks and simulators first, each until it is ready (bound, subscribed) or has
        failed; sources only once all are up, so a sink that cannot bind ends the run before
        any source has started (one error line, nothing half-started)."""
        servers = [s for s in self.services if not isinstance(s, Source)]
        for service in servers:
            self._start(service)
        for service in servers:
            task = next((t for t, s in self._tasks.items() if s is service), None)
            if task is None or self.failures:
                break
            ready = asyncio.ensure_future(service.ready.wait())
            await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
        if not self.failures:
            for service in list(self.services):
                self._start(service)

    def _start(self, service: Service) -> None:
        if any(s is service for s in self._started):
            return
        self._started.append(service)
        service.gateway = self
        task = asyncio.create_task(service.run(self.world), name=service.name)
        self._tasks[task] = service
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        service = self._tasks.pop(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
                exc = exc.exceptions[0]  # a TaskGroup's failure: say what really broke
            self.failures.append((service, exc))
            fatal = not isinstance(service, Source)
            if fatal:
                self.stop()  # the server or simulator the command is for is gone: end the run
            if not isinstance(exc, RobowireError):  # a bug, not bad input: say what broke
                trace = exc if log.isEnabledFor(logging.DEBUG) else None
                log.error(
                    "%s stopped: %s: %s", service.name, type(exc).__name__, exc, exc_info=trace
                )
            elif not fatal:  # a fatal one is raised by `run`: the command's one error line
                log.error("%s: %s", service.name, exc)
        if not self._running or not isinstance(service, Source):
            return
        if not any(isinstance(s, Source) for s in self._tasks.values()):
            # every source has finished (files read): give sinks a moment to drain, then end
            asyncio.get_running_loop().call_later(self.drain_seconds, self.stop)
