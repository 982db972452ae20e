"""`robowire.connect` and `robowire.open`: a live view of sources by the devices' own names.

```python
import robowire

with robowire.connect("vrpn://Tracker0@127.0.0.1:3883") as live:
    live.wait(timeout=5)
    for name, device in live.devices.items():
        print(name, device.position, device.orientation)
```

`connect` runs the gateway's event loop on a background thread, so a script or a notebook needs
no asyncio; `open` is the same view in the caller's own loop (`async with robowire.open(url) as
live`, `await live.wait()`, `async for update in live`).

The view reads the world's latest state: the sources run at their own rate on the loop, and
nothing the caller does (reading, iterating slowly, a callback that blocks) slows them. Each
reader of updates (`updates()`, each `on_update` callback, `async for`) has its own bounded
queue: when it falls behind, its oldest updates are dropped and counted (`Subscription.dropped`),
and the others go on. An `Update` is one batch of devices of one source that changed together
(a VRPN datagram's reports, a VRSP frame), with the values it wrote.

Names are the protocol's own (`"Tracker0/0"` for VRPN tracker Tracker0 sensor 0, a UgCS serial,
a VRSP drone id, a SpyGlass node id). When two sources have a device of the same name, both go
by their source-qualified name (`"vrpn@127.0.0.1:3883/Tracker0/0"`) and `Live.devices.shared`
lists them; the qualified form always works.

VRPN's other devices have callbacks of their own, as `vrpn_Button_Remote` and its kin do:
`on_button`, `on_analog`, `on_dial` and `on_text` (every press and release, every analog
report, every dial turn, every text message; `ButtonEvent`, `AnalogEvent`, `DialEvent`,
`TextEvent`). They see each write as it happens, where `on_update` sees the latest state, so a
press and its release in one datagram are two calls.

Thread safety: the sources write on the loop's thread. A `Device` (`live.devices[name]`,
`devices.values()`, `items()`) and a `snapshot()` are built on that thread too (one hop to it
per call: 0.05 to 0.1 ms on a loaded 2-core machine), so each is one consistent state, never
the position of one update with the orientation of the next. Their values are copies, yours
to keep. Read many devices with one `items()` or `snapshot()`, not one lookup each.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import threading
import time
from collections import deque
from collections.abc import (
    AsyncIterator,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from robowire.addresses import parse_endpoint
from robowire.background import LoopThread
from robowire.errors import ConfigError, RobowireError
from robowire.gateway import Gateway, open_recorder, open_source
from robowire.service import Service
from robowire.status import ServiceStatus
from robowire.world import LogEvent, World
from robowire.world.latest import LatestState
from robowire.world.model import Update as WorldUpdate
from robowire.world.table import FloatArray, SourceTable

__all__ = [
    "AnalogEvent",
    "AsyncLive",
    "ButtonEvent",
    "Device",
    "Devices",
    "DialEvent",
    "Live",
    "Reading",
    "Subscription",
    "TextEvent",
    "Update",
    "connect",
    "open",
]

log = logging.getLogger("robowire")

QUEUE = 1000
"""Updates a reader (`updates()`, a callback, `async for`) may fall behind before its oldest
are dropped."""

T = TypeVar("T")
Vector3 = tuple[float, float, float]
Quaternion = tuple[float, float, float, float]


class Reading(NamedTuple):
    """A telemetry value with its unit (`"m/s"`, `"deg"`, `"V"`, `"1"` for none)."""

    value: float
    unit: str


@dataclass(frozen=True, slots=True)
class Device:
    """One device as it is now: world frame ENU metres, quaternions (w, x, y, z).

    `name` is the key in `Live.devices`; `id` is its name within its `source`. `time` is when
    the source says the latest value happened (Unix seconds; the receive time where the
    protocol has no stamps). Absent quantities are None.
    """

    name: str
    source: str
    id: str
    kind: str
    position: Vector3 | None
    orientation: Quaternion | None
    velocity: Vector3 | None
    geodetic: Vector3 | None
    """latitude and longitude in degrees, altitude in metres (WGS84)"""
    telemetry: Mapping[str, Reading]
    time: float | None
    receive_time: float | None
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Update:
    """Devices of one source that changed together, with the values written.

    `values` has one array per changed quantity, row i for `names[i]`: `"position"` (n, 3),
    `"orientation"` (n, 4), `"velocity"` (n, 3), `"geodetic"` (n, 3), each telemetry field
    (n,), and `"source_time"` (n,).
    """

    source: str
    names: tuple[str, ...]
    fields: frozenset[str]
    time: float
    """when robowire received it (Unix seconds)"""
    values: Mapping[str, FloatArray]

    def __len__(self) -> int:
        return len(self.names)

    @property
    def positions(self) -> FloatArray | None:
        """(n, 3) positions written, or None if this update did not move its devices."""
        return self.values.get("position")

    @property
    def orientations(self) -> FloatArray | None:
        """(n, 4) orientations written, or None."""
        return self.values.get("orientation")


@dataclass(frozen=True, slots=True)
class ButtonEvent:
    """A VRPN button changed (`on_button`): `name` is its device (`"Button0"`), `button` its
    number, `pressed` its new state, `time` when the sender says it happened (Unix seconds)."""

    name: str
    button: int
    pressed: bool
    time: float


@dataclass(frozen=True, slots=True)
class AnalogEvent:
    """A VRPN analog report (`on_analog`): `channels[i]` is channel i's value."""

    name: str
    channels: tuple[float, ...]
    time: float


@dataclass(frozen=True, slots=True)
class DialEvent:
    """A VRPN dial turned (`on_dial`) by `delta` revolutions; `total` is every turn since the
    source connected."""

    name: str
    dial: int
    delta: float
    total: float
    time: float


@dataclass(frozen=True, slots=True)
class TextEvent:
    """A text message (`on_text`): VRPN text (`level` "info", "warning" or "error") and the
    other sources' log lines (a UgCS VSM's, a session's problems)."""

    name: str
    text: str
    level: str
    time: float


def _vector(row: npt.NDArray[np.float64]) -> Any:
    return None if np.isnan(row).any() else tuple(row.tolist())


def _device(name: str, table: SourceTable, slot: int) -> Device:
    source_time = float(table.source_time[slot])
    receive_time = float(table.receive_time[slot])
    stamp = source_time if not math.isnan(source_time) else receive_time
    return Device(
        name=name,
        source=table.source,
        id=table.ids[slot],
        kind=table.kinds[slot],
        position=_vector(table.position[slot]),
        orientation=_vector(table.orientation[slot]) if table.has_orientation[slot] else None,
        velocity=_vector(table.velocity[slot]),
        geodetic=_vector(table.geodetic[slot]),
        telemetry={k: Reading(v, u) for k, (v, u) in table.telemetry_of(slot).items()},
        time=None if math.isnan(stamp) else stamp,
        receive_time=None if math.isnan(receive_time) else receive_time,
        attributes=dict(table.attributes[slot]),
    )


class _Names:
    """Every device's name across the world's tables, rebuilt when a device appears."""

    def __init__(self, tables: Mapping[str, SourceTable]) -> None:
        self._tables = tables
        self._lock = threading.Lock()
        self._sizes: tuple[tuple[str, int], ...] = ()
        self.where: dict[str, tuple[SourceTable, int]] = {}
        self.by_source: dict[str, list[str]] = {}
        self.shared: dict[str, tuple[str, ...]] = {}

    def refresh(self) -> None:
        tables = list(self._tables.values())
        sizes = tuple((t.source, len(t.ids)) for t in tables)
        if sizes == self._sizes:
            return
        with self._lock:
            if sizes == self._sizes:
                return
            owners: dict[str, list[SourceTable]] = {}
            for table, (_, n) in zip(tables, sizes, strict=True):
                for device_id in table.ids[:n]:
                    owners.setdefault(device_id, []).append(table)
            where: dict[str, tuple[SourceTable, int]] = {}
            by_source: dict[str, list[str]] = {}
            shared: dict[str, tuple[str, ...]] = {}
            for table, (_, n) in zip(tables, sizes, strict=True):
                names = by_source[table.source] = []
                for slot, device_id in enumerate(table.ids[:n]):
                    qualified = f"{table.source}/{device_id}"
                    name = device_id if len(owners[device_id]) == 1 else qualified
                    if name != device_id:
                        shared[device_id] = (*shared.get(device_id, ()), qualified)
                    names.append(name)
                    where[name] = (table, slot)
                    where.setdefault(qualified, (table, slot))
            self.where, self.by_source, self.shared = where, by_source, shared
            self._sizes = sizes

    def name_of(self, source: str, device_id: str) -> str:
        """The name of `device_id` of `source` (qualified when another source has it too)."""
        self.refresh()
        return f"{source}/{device_id}" if device_id in self.shared else device_id

    def of(self, table: SourceTable, slots: npt.NDArray[np.intp]) -> tuple[str, ...]:
        names = self.by_source.get(table.source)
        top = int(slots.max()) if len(slots) else -1
        if names is None or top >= len(names):
            self.refresh()
            names = self.by_source[table.source]
        return tuple(names[s] for s in slots.tolist())


class Devices(Mapping[str, Device]):
    """The live devices by name (see the module docstring); each lookup reads the current
    state, on the loop's thread. `shared` maps a name two sources share to the qualified
    names they go by."""

    def __init__(self, names: _Names, read: Callable[[Callable[[], Any]], Any]) -> None:
        self._names = names
        self._read = read

    @property
    def shared(self) -> Mapping[str, tuple[str, ...]]:
        self._names.refresh()
        return dict(self._names.shared)

    def __getitem__(self, name: str) -> Device:
        device: Device = self._read(lambda: self._device(name))
        return device

    def _device(self, name: str) -> Device:
        self._names.refresh()
        found = self._names.where.get(name)
        if found is None:
            shared = self._names.shared.get(name)
            if shared:
                raise KeyError(f"{name!r} is in {len(shared)} sources: use {' or '.join(shared)}")
            raise KeyError(name)
        table, slot = found
        return _device(name, table, slot)

    def __iter__(self) -> Iterator[str]:
        self._names.refresh()
        for names in list(self._names.by_source.values()):
            yield from names

    def items(self) -> list[tuple[str, Device]]:  # type: ignore[override]
        """Every (name, device) now, built in one hop to the loop."""
        items: list[tuple[str, Device]] = self._read(
            lambda: [(name, self._device(name)) for name in self]
        )
        return items

    def values(self) -> list[Device]:  # type: ignore[override]
        """Every device now, built in one hop to the loop."""
        return [device for _, device in self.items()]

    def __len__(self) -> int:
        self._names.refresh()
        return sum(len(n) for n in self._names.by_source.values())

    def __contains__(self, name: object) -> bool:
        self._names.refresh()
        return name in self._names.where

    def __repr__(self) -> str:
        return f"<Devices {list(self)}>"


# -- fan-out ----------------------------------------------------------------------------------


class _Outlet(Generic[T]):
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


class _ThreadOutlet(_Outlet[T]):
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


class _AsyncOutlet(_Outlet[Update]):
    def __init__(self, maxlen: int) -> None:
        super().__init__(maxlen)
        self.event = asyncio.Event()

    def put(self, update: Update) -> None:
        super().put(update)
        self.event.set()

    def end(self) -> None:
        self.closed = True
        self.event.set()

    async def get(self, timeout: float | None) -> Update | None:
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

    def __init__(self, hub: _Fanout[T], callback: Callable[[T], object], maxlen: int) -> None:
        self._hub = hub
        self._outlet: _ThreadOutlet[T] = _ThreadOutlet(maxlen)
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


class _Fanout(Generic[T]):
    """Outlets that each get every item `put` hands out (attached from any thread)."""

    def __init__(self) -> None:
        self.outlets: tuple[_Outlet[T], ...] = ()
        self.finished = False
        self._lock = threading.Lock()

    def attach(self, outlet: _Outlet[T]) -> None:
        with self._lock:
            self.outlets = (*self.outlets, outlet)
        if self.finished:
            outlet.end()

    def detach(self, outlet: _Outlet[T]) -> None:
        with self._lock:
            self.outlets = tuple(o for o in self.outlets if o is not outlet)

    def put(self, item: T) -> None:
        for outlet in self.outlets:
            outlet.put(item)

    def end(self) -> None:
        self.finished = True
        for outlet in self.outlets:
            outlet.end()


class _Hub(_Fanout[Update]):
    """On the loop: pulls what changed in the world and hands it to every outlet."""

    def __init__(self, world: World) -> None:
        super().__init__()
        self.world = world
        self.names = _Names(world.tables)
        self.count = 0  # updates so far
        self.cond = threading.Condition()  # `Live.wait` sleeps on it
        self.waiting = 0
        self.changes: LatestState | None = None
        self.wakeup: asyncio.Event | None = None  # for `AsyncLive.wait`

    async def run(self) -> None:
        subscription = self.world.subscribe()
        assert isinstance(subscription, LatestState)
        self.changes = subscription
        with subscription:
            while True:
                await subscription.wait()
                self.deliver(subscription.pull())

    def deliver(self, items: Sequence[object]) -> None:
        tables = self.world.tables
        new = 0
        for item in items:
            if not isinstance(item, WorldUpdate) or not len(item.slots):
                continue
            table = tables[item.source]
            update = Update(
                item.source,
                self.names.of(table, item.slots),
                item.fields,
                item.receive_time,
                item.values,
            )
            new += 1
            self.put(update)
        if new:
            self.count += new
            if self.wakeup is not None:
                self.wakeup.set()
            if self.waiting:
                with self.cond:
                    self.cond.notify_all()

    def finish(self) -> None:
        """The run is over: wake every waiter and end every reader."""
        if self.changes is not None:
            self.deliver(self.changes.pull())
        self.end()
        if self.wakeup is not None:
            self.wakeup.set()
        with self.cond:
            self.cond.notify_all()


# -- VRPN analogs, buttons, dials and text ----------------------------------------------------

CHANNEL, BUTTON, DIAL = "channel_", "button_", "dial_"
"""The VRPN adapter's names of a sender's fields (`channel_0`, `button_3`, ...; not imported
from it: that would load the VRPN package for every `connect`)."""


class _Events:
    """On the loop, from the first `on_button` (or analog, dial, text) callback on: attached to
    the world's feed, it sees each write as it happens (before the next one can merge it away)
    and turns what VRPN sources wrote into events, and every log event into a `TextEvent`.
    It costs the sources nothing until then, and a check of the fields written after."""

    def __init__(self, world: World, names: _Names) -> None:
        self.world = world
        self.names = names
        self.analog: _Fanout[AnalogEvent] = _Fanout()
        self.button: _Fanout[ButtonEvent] = _Fanout()
        self.dial: _Fanout[DialEvent] = _Fanout()
        self.text: _Fanout[TextEvent] = _Fanout()
        self.attached = False
        self._last: dict[tuple[str, int, str], float] = {}  # button states and dial totals

    def attach(self) -> None:
        """(On the loop.) Start seeing writes; buttons and dials known so far are the state
        the first events change."""
        if self.attached:
            return
        self.attached = True
        for table in self.world.tables.values():
            if table.protocol != "vrpn":
                continue
            for field_, column in table.telemetry.items():
                if field_.startswith((BUTTON, DIAL)):
                    for slot in np.flatnonzero(~np.isnan(column[: len(table.ids)])).tolist():
                        self._last[(table.source, slot, field_)] = float(column[slot])
        self.world.feed.attach(self)

    def put(self, item: WorldUpdate | LogEvent) -> None:
        """(On the loop, inside the source's write.) Never raises into the source."""
        try:
            self._put(item)
        except Exception:
            log.exception("robowire: VRPN events of %s", getattr(item, "source", "?"))

    def _put(self, item: WorldUpdate | LogEvent) -> None:
        if isinstance(item, LogEvent):
            if self.text.outlets:
                name = self.names.name_of(item.source, item.device_id)
                self.text.put(TextEvent(name, item.text, item.level, item.time))
            return
        table = self.world.tables[item.source]
        if table.protocol != "vrpn" or not any(
            f.startswith((CHANNEL, BUTTON, DIAL)) for f in item.fields
        ):
            return
        names = self.names.of(table, item.slots)
        times = table.source_time[item.slots].tolist()
        channels = sorted((int(f[len(CHANNEL) :]), f) for f in item.fields if f.startswith(CHANNEL))
        for row, slot in enumerate(item.slots.tolist()):
            name, stamp = names[row], times[row]
            if channels and self.analog.outlets:
                values = tuple(float(table.telemetry[f][slot]) for _, f in channels)
                self.analog.put(AnalogEvent(name, values, stamp))
            for field_ in item.fields:
                if field_.startswith(BUTTON):
                    self._button(table, slot, field_, name, stamp)
                elif field_.startswith(DIAL):
                    self._dial(table, slot, field_, name, stamp)

    def _button(self, table: SourceTable, slot: int, field_: str, name: str, t: float) -> None:
        value = float(table.telemetry[field_][slot])
        key = (table.source, slot, field_)
        if self._last.get(key) != value:
            self._last[key] = value
            self.button.put(ButtonEvent(name, int(field_[len(BUTTON) :]), value != 0.0, t))

    def _dial(self, table: SourceTable, slot: int, field_: str, name: str, t: float) -> None:
        total = float(table.telemetry[field_][slot])
        key = (table.source, slot, field_)
        delta = total - self._last.get(key, 0.0)
        self._last[key] = total
        self.dial.put(DialEvent(name, int(field_[len(DIAL) :]), delta, total, t))

    def end(self) -> None:
        for fanout in (self.analog, self.button, self.dial, self.text):
            fanout.end()


# -- the view ---------------------------------------------------------------------------------


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
        self._hub = _Hub(self.gateway.world)
        self._events = _Events(self.gateway.world, self._hub.names)
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
        self, fanout: _Fanout[T], callback: Callable[[T], object], maxlen: int
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
        outlet: _ThreadOutlet[Update] = _ThreadOutlet(self.queue)
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
        if self._thread.loop.is_closed():
            return
        run = self._run
        if run is not None and not run.done():
            self._thread.call_soon(self.gateway.stop)
            with contextlib.suppress(BaseException):
                self._thread.run(_finished(run), timeout=10.0)
        self._thread.close()

    def __enter__(self) -> Live:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


async def _finished(task: asyncio.Task[None]) -> None:
    await asyncio.wait([task])


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
        outlet = _AsyncOutlet(self.queue)
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
