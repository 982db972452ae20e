"""The live view: `Live` (its event loop on a background thread, `connect`) and `AsyncLive`
(in the caller's loop, `open`), over one gateway and its world.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from robowire.addresses import parse_endpoint
from robowire.background import LoopThread
from robowire.errors import ConfigError, RobowireError
from robowire.gateway import Gateway, open_recorder, open_source
from robowire.live.devices import (
    AnalogEvent,
    ButtonEvent,
    Device,
    Devices,
    DialEvent,
    TextEvent,
    Update,
)
from robowire.live.fanout import AsyncOutlet, Fanout, Subscription, ThreadOutlet
from robowire.live.feeds import Hub, VrpnEvents
from robowire.service import Service
from robowire.status import ServiceStatus
from robowire.world.table import FloatArray

__all__ = ["QUEUE", "AsyncLive", "Live", "connect", "open"]

QUEUE = 1000
"""Updates a reader (`updates()`, a callback, `async for`) may fall behind before its oldest
are dropped."""

T = TypeVar("T")


def _with_time(url: str, mode: str | None) -> Any:
    endpoint = parse_endpoint(url)
    if mode is None:
        return endpoint
    return dataclasses.replace(endpoint, options={**endpoint.options, "time": mode})


class _View:
    """What `Live` and `AsyncLive` share: the gateway, the hub, reading the state."""

    def __init__(self, urls: Sequence[str], time: str | None, record: str | None) -> None:
        if not urls:
            raise ConfigError("connect: give at least one source URL or file")
        self._urls = list(urls)
        self._time = time
        self._record = record
        self.gateway = Gateway()
        self._hub = Hub(self.gateway.world)
        self._events = VrpnEvents(self.gateway.world, self._hub.names)
        self._run: asyncio.Task[None] | None = None
        self._hub_task: asyncio.Task[None] | None = None
        self.error: BaseException | None = None

    async def _start(self) -> None:
        """On the loop: open every source (errors raise here, before anything runs)."""
        sources = [open_source(_with_time(url, self._time)) for url in self._urls]
        services: list[Service] = list(sources)
        if self._record is not None:
            services.append(open_recorder(self._record, self._urls, sources))
        self.gateway.add(*services)
        self._hub_task = asyncio.create_task(self._hub.run())
        self._run = asyncio.create_task(self.gateway.run())
        self._run.add_done_callback(self._ended)
        await asyncio.sleep(0)  # let sinks bind before the caller goes on

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.error = task.exception()
        elif self.gateway.failures and all(
            any(s is f for f, _ in self.gateway.failures) for s in self.gateway.services
        ):
            self.error = self.gateway.failures[0][1]  # nothing worked: say why
        if self._hub_task is not None:
            self._hub_task.cancel()
        self._hub.finish()
        self._events.end()

    def _check(self) -> None:
        error = self.error
        if error is None:
            return
        if isinstance(error, RobowireError):
            raise error
        raise RobowireError(f"{type(error).__name__}: {error}") from error

    def _read(self, read: Callable[[], T]) -> T:
        """`read()` on the loop's thread (where the sources write), its result here."""
        raise NotImplementedError

    @property
    def devices(self) -> Devices:
        """Every device by name (see the module docstring)."""
        return Devices(self._hub.names, self._read)

    @property
    def finished(self) -> bool:
        """The run is over (every source was a file, read to its end; or closed)."""
        return self._hub.finished

    @property
    def update_count(self) -> int:
        """Updates seen so far."""
        return self._hub.count

    def snapshot(self) -> tuple[npt.NDArray[np.str_], FloatArray, FloatArray]:
        """`(ids, positions, orientations)` of every device now: names (n,), positions
        (n, 3) and orientations (n, 4, NaN where a device has none), in `devices` order."""
        return self._read(self._snapshot)

    def _snapshot(self) -> tuple[npt.NDArray[np.str_], FloatArray, FloatArray]:
        names = self._hub.names
        names.refresh()
        tables = [self.gateway.world.tables[s] for s in names.by_source]
        sizes = [len(names.by_source[t.source]) for t in tables]
        ids = [n for t in tables for n in names.by_source[t.source]]
        if not ids:
            return np.array([], dtype=str), np.empty((0, 3)), np.empty((0, 4))
        positions = np.concatenate([t.position[:n] for t, n in zip(tables, sizes, strict=True)])
        orientations = np.concatenate(
            [
                np.where(t.has_orientation[:n, None], t.orientation[:n], np.nan)
                for t, n in zip(tables, sizes, strict=True)
            ]
        )
        return np.array(ids), positions, orientations

    def on_update(
        self, callback: Callable[[Update], object], maxlen: int = QUEUE
    ) -> Subscription[Update]:
        """Call `callback(update)` for every update, on a thread of its own (see
        `Subscription`); `cancel()` the returned subscription to stop."""
        return Subscription(self._hub, callback, maxlen)

    def on_button(
        self, callback: Callable[[ButtonEvent], object], maxlen: int = QUEUE
    ) -> Subscription[ButtonEvent]:
        """Call `callback(event)` for every change of a VRPN button (a press and its release
        are two calls, however close), on a thread of its own (see `Subscription`)."""
        return self._on(self._events.button, callback, maxlen)

    def on_analog(
        self, callback: Callable[[AnalogEvent], object], maxlen: int = QUEUE
    ) -> Subscription[AnalogEvent]:
        """Call `callback(event)` for every VRPN analog report, with all its channels."""
        return self._on(self._events.analog, callback, maxlen)

    def on_dial(
        self, callback: Callable[[DialEvent], object], maxlen: int = QUEUE
    ) -> Subscription[DialEvent]:
        """Call `callback(event)` for every turn of a VRPN dial (its delta and total)."""
        return self._on(self._events.dial, callback, maxlen)

    def on_text(
        self, callback: Callable[[TextEvent], object], maxlen: int = QUEUE
    ) -> Subscription[TextEvent]:
        """Call `callback(event)` for every text message (VRPN text, other sources' logs)."""
        return self._on(self._events.text, callback, maxlen)

    def _on(
        self, fanout: Fanout[T], callback: Callable[[T], object], maxlen: int
    ) -> Subscription[T]:
        subscription = Subscription(fanout, callback, maxlen)
        if not self._events.attached:
            self._read(self._events.attach)
        return subscription


class Live(_View):
    """A live view of sources with the event loop on a background thread (`connect`).

    Close it (`with` block, or `close()`) to stop the sources.
    """

    def __init__(
        self,
        *urls: str,
        time: str | None = None,
        record: str | None = None,
        queue: int = QUEUE,
    ) -> None:
        super().__init__(urls, time, record)
        self.queue = queue
        self._thread = LoopThread("robowire-live")
        try:
            self._thread.run(self._start(), timeout=30.0)
        except BaseException:
            self._thread.close()
            raise

    def _read(self, read: Callable[[], T]) -> T:
        if self._thread.loop.is_closed():  # closed: nothing writes any more
            return read()
        return self._thread.call(read)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the next update: True once one came, False if `timeout` seconds passed
        first or the run is over (files read). Raises the error that ended the run."""
        hub = self._hub
        with hub.cond:
            hub.waiting += 1
            try:
                seen = hub.count
                done = hub.cond.wait_for(lambda: hub.count > seen or hub.finished, timeout)
            finally:
                hub.waiting -= 1
        self._check()
        return bool(done) and hub.count > seen

    def wait_for(
        self, name: str, timeout: float | None = None, *, field: str | None = None
    ) -> Device:
        """The device `name` once it exists (and, with `field`, once that telemetry field or
        quantity has a value). Raises TimeoutError after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            device = self.devices.get(name)
            if device is not None and (field is None or _has(device, field)):
                return device
            left = None if deadline is None else deadline - time.monotonic()
            if (left is not None and left <= 0) or (not self.wait(left) and self.finished):
                what = name if field is None else f"{name} with {field}"
                raise TimeoutError(f"no {what} after {timeout} s")

    def updates(self, timeout: float | None = None) -> Iterator[Update]:
        """Every update from now on, oldest first; ends when none came for `timeout` seconds
        or the run is over. A loop that falls `queue` updates behind loses the oldest."""
        outlet: ThreadOutlet[Update] = ThreadOutlet(self.queue)
        self._hub.attach(outlet)
        try:
            while True:
                update = outlet.get(timeout)
                if update is None:
                    self._check()
                    return
                yield update
        finally:
            self._hub.detach(outlet)

    def status(self) -> list[ServiceStatus]:
        """What each source (and the recorder) is doing: state, messages, rates, drops."""
        return self._thread.call(self.gateway.status)

    def close(self) -> None:
        """Stop every source and the loop (idempotent)."""
        self._thread.stop(self._run, self.gateway.stop)

    def __enter__(self) -> Live:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _has(device: Device, name: str) -> bool:
    if name in device.telemetry:
        return True
    return getattr(device, name, None) is not None


class AsyncLive(_View):
    """The live view in the caller's event loop (`async with robowire.open(...) as live`)."""

    def __init__(
        self, *urls: str, time: str | None = None, record: str | None = None, queue: int = QUEUE
    ) -> None:
        super().__init__(urls, time, record)
        self.queue = queue

    def _read(self, read: Callable[[], T]) -> T:
        return read()  # the caller is on the loop, where the sources write

    async def __aenter__(self) -> AsyncLive:
        self._hub.wakeup = asyncio.Event()
        await self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._run is not None and not self._run.done():
            self.gateway.stop()
            await asyncio.wait([self._run])

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait for the next update (see `Live.wait`)."""
        hub = self._hub
        assert hub.wakeup is not None, "use `async with robowire.open(...)`"
        seen = hub.count
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while hub.count == seen and not hub.finished:
                    hub.wakeup.clear()
                    await hub.wakeup.wait()
        self._check()
        return hub.count > seen

    async def updates(self, timeout: float | None = None) -> AsyncIterator[Update]:
        """Every update from now on (see `Live.updates`)."""
        outlet: AsyncOutlet[Update] = AsyncOutlet(self.queue)
        self._hub.attach(outlet)
        try:
            while True:
                update = await outlet.get(timeout)
                if update is None:
                    self._check()
                    return
                yield update
        finally:
            self._hub.detach(outlet)

    def __aiter__(self) -> AsyncIterator[Update]:
        return self.updates()

    def status(self) -> list[ServiceStatus]:
        """See `Live.status`."""
        return self.gateway.status()


def connect(
    *urls: str, time: str | None = None, record: str | None = None, queue: int = QUEUE
) -> Live:
    """Listen to sources (URLs or files, as `robowire listen` takes them) and return the live
    view, its event loop on a background thread.

    `time` sets every source's `?time=` (`sender`, `receive` or `corrected`); `record` also
    records everything to that MCAP file; `queue` bounds each reader's queue of updates.
    Raises `robowire.errors.ConfigError` (the CLI's one-line message) for a URL it cannot use.
    """
    return Live(*urls, time=time, record=record, queue=queue)


def open(
    *urls: str, time: str | None = None, record: str | None = None, queue: int = QUEUE
) -> AsyncLive:
    """The live view of `connect` in the running event loop: `async with robowire.open(url)
    as live: await live.wait(); async for update in live: ...`."""
    return AsyncLive(*urls, time=time, record=record, queue=queue)
