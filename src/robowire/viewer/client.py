"""One browser connected to the viewer: its own latest-state subscriber and its own pace.

Each `ViewerClient` runs three tasks beside its reader:

* frames: waits until the browser said `ready` for a frame (each grants one; at most
  `READY_WINDOW` are held, so a browser may ask ahead and a busy loop need not wait for its
  answer), something changed and 1/rate seconds passed; then pulls its subscriber (the
  latest values of what changed), sends a `catalog` for devices the browser has not seen
  yet, then one binary state frame. The first frame holds every device. A browser that
  never says `ready` gets no frame and costs one boolean mask per source; it never queues
  frames and never slows ingest or other browsers.
* texts: the bounded outbox of text messages (status, logs, links, command statuses); when a
  browser stalls the oldest are dropped.
* telemetry: at most 10 times a second, the selected device's fields when its receive time
  moved (the first one at once, on `select`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import orjson
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from robowire.access import CONTROL_NEEDS_TOKEN
from robowire.timebase import WallClock, monotonic
from robowire.transport.budget import pressure
from robowire.transport.loop import start_now
from robowire.viewer.frames import BlockSource, KindColours, encode_frame
from robowire.wire import SessionStats
from robowire.world import LatestState, Update, World
from robowire.world.table import SlotArray, SourceTable

log = logging.getLogger("robowire")

TELEMETRY_RATE = 10.0  # telemetry pushes per second, at most
OUTBOX = 1000  # text messages held for a browser that is behind; the oldest go first
READY_WINDOW = 2  # `ready`s a browser may have outstanding (frames asked for ahead)
BEHIND_RATE = 12.0  # frames a second per browser at most while the gateway is behind (the
# overload policy's floor is 10: the rest of a frame's cost, 10,000 drones encoded, goes to
# ingest and commands)
CONTROL_OFF = "control is off: start with --allow-control"


class CommandStatusLike(Protocol):
    """A command's progress, as `robowire.control.CommandStatus` has it."""

    @property
    def state(self) -> str: ...
    @property
    def message(self) -> str: ...


class ControllerLike(Protocol):
    """What the viewer needs of `robowire.control.Controller` (set with --allow-control)."""

    def catalog(self) -> Mapping[str, Sequence[Mapping[str, Any]]]: ...

    def run(
        self, source: str, device: str, command: str, params: dict[str, Any]
    ) -> AsyncIterator[CommandStatusLike]: ...


class Viewer(Protocol):
    """What a browser's connection needs of the viewer's server (`server.ViewerSink`): the
    state every browser shares, and where each browser's counts go."""

    name: str
    rate: float
    stats: SessionStats
    clock: WallClock
    frames_sent: int
    controller: ControllerLike | None

    def may_control(self, target: str) -> bool: ...
    def hello(self, control: bool) -> dict[str, Any]: ...
    def status(self) -> dict[str, Any]: ...
    def ignored(self, why: str) -> None: ...
    def links_now(self) -> list[dict[str, Any]]: ...
    def source_index(self, source: str) -> int: ...


def dumps(message: Mapping[str, Any]) -> bytes:
    """JSON text (NaN and infinities become null)."""
    return orjson.dumps(message, default=str, option=orjson.OPT_SERIALIZE_NUMPY)


def device_json(table: SourceTable, slot: int) -> dict[str, str]:
    return {"id": table.ids[slot], "name": table.names[slot], "kind": table.kinds[slot]}


def _vector(row: np.ndarray[Any, Any]) -> list[float] | None:
    return None if np.isnan(row).any() else [float(v) for v in row]


def _time(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


class ViewerClient:
    """One browser's WebSocket (see the module docstring)."""

    def __init__(self, sink: Viewer, world: World, ws: ServerConnection) -> None:
        self.sink = sink
        self.world = world
        self.ws = ws
        self.rate = sink.rate
        self.control = sink.may_control(ws.request.path if ws.request is not None else "")
        self.frames_sent = 0
        self.ignored = 0  # browser messages that were not understood
        self.dropped_texts = 0
        self._ready = asyncio.Event()  # set while `_granted` > 0
        self._granted = 0  # frames the browser asked for and has not got
        self._outbox: deque[bytes] = deque()
        self._texts = asyncio.Event()
        self._selected: tuple[str, int] | None = None
        self._telemetry_due = asyncio.Event()
        self._known: dict[str, int] = {}  # source -> devices the browser was told of
        self._colours: dict[str, KindColours] = {}
        self._commands: set[asyncio.Future[None]] = set()

    # -- the connection ------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve this browser until it goes away."""
        with self.world.subscribe() as changes:
            assert isinstance(changes, LatestState)
            await self.ws.send(dumps(self.sink.hello(self.control)), text=True)
            self.push(self.sink.status())  # then once a second with everybody else
            tasks = [
                asyncio.create_task(self._send_frames(changes)),
                asyncio.create_task(self._send_texts()),
                asyncio.create_task(self._send_telemetry()),
            ]
            try:
                reader = asyncio.create_task(self._read())
                done, _ = await asyncio.wait([reader, *tasks], return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    exc = None if task.cancelled() else task.exception()
                    if exc is not None and not isinstance(exc, ConnectionClosed):
                        raise exc
            finally:
                for pending in [*tasks, *self._commands]:
                    pending.cancel()
                await asyncio.gather(*tasks, *self._commands, return_exceptions=True)

    def push(self, message: Mapping[str, Any]) -> None:
        """Queue a text message (the oldest is dropped when the browser is far behind)."""
        if len(self._outbox) >= OUTBOX:
            self._outbox.popleft()
            self.dropped_texts += 1
            self.sink.stats.drop("a browser far behind: its oldest text messages dropped")
        self._outbox.append(dumps(message))
        self._texts.set()

    async def _send_texts(self) -> None:
        while True:
            await self._texts.wait()
            self._texts.clear()
            while self._outbox:
                await self.ws.send(self._outbox.popleft(), text=True)

    # -- from the browser ------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                self._handle(raw)
        except ConnectionClosed:
            pass

    def _ignore(self, why: str) -> None:
        self.ignored += 1
        self.sink.ignored(why)

    def _handle(self, raw: str | bytes) -> None:
        if isinstance(raw, bytes):
            return self._ignore("a binary message")
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return self._ignore("not JSON")
        if not isinstance(message, dict):
            return self._ignore("not a JSON object")
        match message.get("type"):
            case "ready":
                self._granted = min(READY_WINDOW, self._granted + 1)
                self._ready.set()
            case "hello":
                rate = message.get("rate")
                if isinstance(rate, int | float) and not isinstance(rate, bool) and rate > 0:
                    self.rate = min(self.sink.rate, float(rate))
            case "select":
                self._select(message)
            case "command":
                self._command(message)
            case other:
                return self._ignore(f"unknown message type {other!r}")
        return None

    def _select(self, message: dict[str, Any]) -> None:
        source, slot = message.get("source"), message.get("slot")
        if source is None:
            self._selected = None
            return
        table = self.world.tables.get(source) if isinstance(source, str) else None
        if table is None or not isinstance(slot, int) or not 0 <= slot < len(table):
            self._selected = None
            return self._ignore(f"select of an unknown device {source!r} {slot!r}")
        self._selected = (source, slot)
        self._telemetry_due.set()
        return None

    def _command(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        controller = self.sink.controller
        if controller is None or not self.control:
            why = CONTROL_OFF if controller is None else CONTROL_NEEDS_TOKEN
            self.push({"type": "command_status", "id": ident, "state": "refused", "message": why})
            return
        source, device, command = (
            message.get("source"),
            message.get("device"),
            message.get("command"),
        )
        params = message.get("params") or {}
        if not all(isinstance(v, str) for v in (source, device, command)) or not isinstance(
            params, dict
        ):
            self.push(
                {"type": "command_status", "id": ident, "state": "refused",
                 "message": "a command needs source, device and command names"}
            )  # fmt: skip
            return

        async def run() -> None:
            try:
                async for status in controller.run(str(source), str(device), str(command), params):
                    self.push(
                        {"type": "command_status", "id": ident, "state": status.state,
                         "message": status.message}
                    )  # fmt: skip
            except Exception as exc:  # a controller bug must not end the browser's connection
                log.warning("%s: command %s failed: %s", self.sink.name, command, exc)
                self.push(
                    {"type": "command_status", "id": ident, "state": "failed", "message": str(exc)}
                )

        # sent in this turn, not a round of the loop later; what follows (replies) in a task
        task = start_now(run())
        if not task.done():
            self._commands.add(task)
            task.add_done_callback(self._commands.discard)

    # -- state frames -------------------------------------------------------------------------

    async def _send_frames(self, changes: LatestState) -> None:
        loop = asyncio.get_running_loop()
        next_at = 0.0
        first = True
        while True:
            await self._ready.wait()
            if not first:
                await changes.wait()
            delay = next_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            items = changes.pull()
            if first:
                slots = {
                    name: np.arange(len(t), dtype=np.intp) for name, t in self.world.tables.items()
                }
            else:
                slots = {i.source: i.slots for i in items if isinstance(i, Update) and len(i)}
            for message in self._catalogs():
                await self.ws.send(dumps(message), text=True)
            if first:  # the links of the devices just listed
                for message in self.sink.links_now():
                    await self.ws.send(dumps(message), text=True)
            frame = self._frame(slots, loop.time())
            if frame is None:
                continue  # nothing to draw (only logs changed): still ready
            first = False
            self._granted -= 1
            if not self._granted:
                self._ready.clear()
            now = loop.time()
            rate = min(self.rate, BEHIND_RATE) if pressure().behind(monotonic()) else self.rate
            next_at = now + 1.0 / rate
            await self.ws.send(frame)
            self.frames_sent += 1
            self.sink.frames_sent += 1

    def _catalogs(self) -> list[dict[str, Any]]:
        """`catalog` messages for the devices added since the last ones."""
        out = []
        for name, table in list(self.world.tables.items()):
            known = self._known.get(name, 0)
            count = len(table)
            if count <= known:
                continue
            devices = [
                {"id": i, "name": n, "kind": k}
                for i, n, k in zip(
                    table.ids[known:count],
                    table.names[known:count],
                    table.kinds[known:count],
                    strict=True,
                )
            ]
            out.append(
                {"type": "catalog", "source": name, "index": self.sink.source_index(name),
                 "protocol": name.partition("@")[0].partition(":")[0], "start": known,
                 "devices": devices}
            )  # fmt: skip
            self._known[name] = count
        return out

    def _frame(self, slots: Mapping[str, SlotArray], now: float) -> bytes | None:
        """A state frame of the `slots` of each source (only those the browser knows of), or
        None when there is nothing in it."""
        blocks = []
        for name, chosen in slots.items():
            table = self.world.tables.get(name)
            known = self._known.get(name, 0)
            if table is None or not known:
                continue
            chosen = chosen[chosen < known]
            if not len(chosen):
                continue
            colours = self._colours.setdefault(name, KindColours()).of(table)
            blocks.append(BlockSource(self.sink.source_index(name), table, chosen, colours))
        if not blocks and self.frames_sent:
            return None
        return encode_frame(self.frames_sent, self.sink.clock.wall(now), blocks)

    # -- telemetry of the selected device -----------------------------------------------------

    async def _send_telemetry(self) -> None:
        sent_at = math.nan
        sent: tuple[str, int] | None = None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._telemetry_due.wait(), 1.0 / TELEMETRY_RATE)
            due = self._telemetry_due.is_set()
            self._telemetry_due.clear()
            selected = self._selected
            if selected is None:
                sent = None
                continue
            table = self.world.tables.get(selected[0])
            if table is None:
                continue
            received = float(table.receive_time[selected[1]])
            if not due and selected == sent and (received == sent_at or math.isnan(received)):
                continue
            sent, sent_at = selected, received
            await self.ws.send(dumps(self.telemetry(*selected)), text=True)
            await asyncio.sleep(1.0 / TELEMETRY_RATE)

    def telemetry(self, source: str, slot: int) -> dict[str, Any]:
        table = self.world.tables[source]
        return {
            "type": "telemetry",
            "source": source,
            "slot": slot,
            **device_json(table, slot),
            "time": _time(float(table.receive_time[slot])),
            "source_time": _time(float(table.source_time[slot])),
            "fields": {k: [v, u] for k, (v, u) in table.telemetry_of(slot).items()},
            "position": _vector(table.position[slot]),
            "orientation": _vector(table.orientation[slot])
            if table.has_orientation[slot]
            else None,
            "geodetic": _vector(table.geodetic[slot]),
            "velocity": _vector(table.velocity[slot]),
            "attributes": dict(table.attributes[slot]),
        }
