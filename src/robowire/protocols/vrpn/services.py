"""The VRPN source (`robowire listen vrpn://...`) and sink (`robowire serve vrpn://...`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
from typing import Any

import numpy as np

from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, SessionError, TransportError
from robowire.protocols.base import Address, ConnectionLost, PacketDropped
from robowire.protocols.vrpn.adapter import VrpnAdapter
from robowire.protocols.vrpn.codec import DEFAULT_PORT, MAX_NAME, MAX_REMOTE_ID
from robowire.protocols.vrpn.driver import VrpnLink, connect
from robowire.protocols.vrpn.messages import (
    AnalogChannel,
    TextMessage,
    TrackerSetUpdateRate,
    TrackerVelocity,
)
from robowire.protocols.vrpn.registry import TrackerReports
from robowire.protocols.vrpn.server import VrpnServer
from robowire.protocols.vrpn.session import (
    VERSION_MISMATCH,
    Connected,
    MessageReceived,
    PeerSilent,
    Role,
    VrpnSession,
)
from robowire.service import Sink, Source
from robowire.timebase import WallClock
from robowire.world import LogEvent, Update, World

log = logging.getLogger("robowire.vrpn")

RETRY_SECONDS = 1.0


def device_names(endpoint: Endpoint) -> list[str]:
    """`Tracker0@host`, `Tracker0,Analog0@host` or `?devices=a,b`; empty means every device."""
    raw = ",".join(x for x in (endpoint.user or "", endpoint.option("devices", "")) if x)
    names = [n.strip() for n in raw.split(",") if n.strip() and n.strip() != "*"]
    for name in names:
        if len(name.encode()) > MAX_NAME:
            raise ConfigError(f"VRPN device name {name[:20]!r}... is longer than {MAX_NAME} bytes")
    return names


class VrpnSource(Source):
    """A VRPN client: one connection, several device names, reconnects when the server goes."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"vrpn@{self.host}:{self.port}")
        self.devices = device_names(endpoint)
        self.udp = endpoint.scheme == "vrpn" and endpoint.option("udp", "1") != "0"
        self.time_mode = endpoint.option("time", "sender")
        if self.time_mode not in ("sender", "receive"):
            raise ConfigError(f"{endpoint.raw}: time must be 'sender' or 'receive'")
        try:
            self.retry = float(endpoint.option("retry", str(RETRY_SECONDS)))
        except ValueError:
            raise ConfigError(f"{endpoint.raw}: retry must be seconds") from None
        try:
            self.update_rate = float(endpoint.option("rate", "0"))
        except ValueError:
            raise ConfigError(f"{endpoint.raw}: rate must be updates per second") from None
        self.connections = 0
        self.link: VrpnLink | None = None

    async def run(self, world: World) -> None:
        loop = asyncio.get_running_loop()
        clock = WallClock()
        adapter = VrpnAdapter(world, self.name, devices=self.devices or None, time=self.time_mode)

        def make_session(peer: Address, udp_inbound: Address | None) -> VrpnSession:
            return VrpnSession(
                Role.CLIENT,
                ping_senders=self.devices,
                udp_inbound=udp_inbound,
                clock_offset=clock.wall(0.0),
                now=loop.time(),
            )

        def on_events(link: VrpnLink, events: list[object]) -> None:
            receive_time = clock.wall(loop.time())
            adapter.apply(events, receive_time)
            for event in events:
                match event:
                    case TrackerReports():
                        self.stats.messages_in += len(event)
                    case Connected() if self.update_rate > 0 and link.session is not None:
                        # ask each tracker for this rate, as vrpn_Tracker_Remote can
                        for name in self.devices:
                            rate = TrackerSetUpdateRate(rate=self.update_rate)
                            link.session.send(name, rate)
                        link.flush()
                    case MessageReceived():
                        self.stats.messages_in += 1
                    case PacketDropped():
                        self.stats.drop(event.reason)
                        log.warning("%s: %s", self.name, event)
                    case PeerSilent(seconds=seconds):
                        log.warning("%s: no pong from the server for %.0f s", self.name, seconds)
                    case ConnectionLost(reason=reason):
                        if not reason.startswith(VERSION_MISMATCH):
                            log.warning("%s: %s; reconnecting", self.name, reason)

        failed = False
        while True:
            try:
                link = await connect(
                    self.host,
                    self.port,
                    make_session,
                    on_events,
                    udp=self.udp,
                    timeout=max(self.retry, 2.0) if self.connections else 5.0,
                )
            except TransportError as exc:
                if not failed:
                    log.warning("%s: %s; retrying every %g s", self.name, exc, self.retry)
                    failed = True
                await asyncio.sleep(self.retry)
                continue
            failed = False
            self.connections += 1
            self.link = link
            if self.connections > 1:
                log.info("%s: reconnected", self.name)
            self.ready.set()
            try:
                await asyncio.shield(link.closed)
            finally:
                link.close()
            self.link = None
            reason = link.session.close_reason if link.session is not None else ""
            if reason.startswith(VERSION_MISMATCH):
                raise SessionError(f"{self.host}:{self.port}: {reason}")  # retrying cannot help
            await asyncio.sleep(min(self.retry, 0.2))


def _vrpn_name(text: str) -> str:
    """A device id as a VRPN sender name clients can type in `Name@host` (no '@', ':')."""
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", text)[:MAX_NAME]
    return name or "device"


class VrpnSink(Sink):
    """Serves the world: each device is a tracker (sensor 0) named after it (pose as Pos_Quat,
    velocity as Velocity), and its numeric telemetry the channels of an analog device of the
    same name. `?tracker=NAME` serves
    every device as a sensor of one tracker instead."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"vrpn-server@{self.host}:{self.port}")
        self.single = endpoint.option("tracker", "")
        self.server: VrpnServer | None = None
        self._names: dict[tuple[str, str], tuple[str, int]] = {}  # (source, id) -> name, sensor
        self._used: set[str] = set()
        self._channels: dict[tuple[str, str], list[str]] = {}
        self.reports_sent = 0

    def _target(self, source: str, device_id: str) -> tuple[str, int] | None:
        key = (source, device_id)
        found = self._names.get(key)
        if found is not None:
            return found
        assert self.server is not None
        if self.single:
            target = (self.single, len(self._names))
        else:
            if len(self._used) >= MAX_REMOTE_ID - 100:
                return None  # C++ clients refuse ids >= 2000: leave room for the types
            name = base = _vrpn_name(device_id)
            n = 2
            while name in self._used:
                name = f"{base}_{n}"
                n += 1
            self._used.add(name)
            target = (name, 0)
        self._names[key] = target
        self.server.add_device(target[0])
        return target

    async def run(self, world: World) -> None:
        clock = WallClock()
        self.server = VrpnServer(
            [self.single] if self.single else [],
            clock_offset=clock.wall(0.0),
            sensors=lambda name: max(1, sum(1 for n, _ in self._names.values() if n == name)),
        )
        subscription = world.feed.subscribe()
        task = asyncio.create_task(self.server.run(self.host, self.port, self.listening))
        wait: asyncio.Future[Update | LogEvent] | None = None
        try:
            while True:
                wait = asyncio.ensure_future(subscription.get())
                done, _ = await asyncio.wait([wait, task], return_when=asyncio.FIRST_COMPLETED)
                if task in done:
                    task.result()  # raises the server's TransportError
                    return
                items = [wait.result(), *subscription.drain()]
                self._forward(world, items)
        finally:
            if wait is not None:
                wait.cancel()
                with contextlib.suppress(BaseException):
                    await wait
            subscription.close()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _forward(self, world: World, items: list[Update | LogEvent]) -> None:
        assert self.server is not None
        senders: list[str] = []
        sensors: list[int] = []
        positions: list[Any] = []
        quats: list[Any] = []
        times: list[float] = []
        for item in items:
            if isinstance(item, LogEvent):
                self._text(item)
                continue
            table = world.tables.get(item.source)
            if table is None:
                continue
            values = item.values
            has_pose = "position" in item.fields or "orientation" in item.fields
            for row, slot in enumerate(item.slots.tolist()):
                target = self._target(item.source, table.ids[slot])
                if target is None:
                    continue
                if has_pose:
                    pos = values["position"][row] if "position" in values else table.position[slot]
                    if np.isnan(pos).any():
                        continue
                    quat = (
                        values["orientation"][row]
                        if "orientation" in values
                        else table.orientation[slot]
                    )
                    senders.append(target[0])
                    sensors.append(target[1])
                    positions.append(pos)
                    quats.append(quat[[1, 2, 3, 0]])  # world wxyz -> wire xyzw
                    when = (
                        float(values["source_time"][row]) if "source_time" in values else math.nan
                    )
                    times.append(item.receive_time if math.isnan(when) else when)
                if "velocity" in values and not np.isnan(values["velocity"][row]).any():
                    velocity = values["velocity"][row]
                    self.server.broadcast(
                        target[0],
                        TrackerVelocity(
                            sensor=target[1],
                            velocity=(float(velocity[0]), float(velocity[1]), float(velocity[2])),
                        ),
                        time=item.receive_time,
                        reliable=False,
                        flush=False,
                    )
                telemetry = [f for f in item.fields if f in table.telemetry]
                if telemetry and not self.single:
                    self._analog(table, item.source, table.ids[slot], slot, target[0], telemetry)
        if senders:
            self.server.broadcast_poses(
                senders,
                sensors,
                np.array(positions),
                np.array(quats),
                time=np.array(times),
                flush=False,
            )
            self.reports_sent += len(senders)
        self.server.flush()

    def _text(self, event: LogEvent) -> None:
        """World log events go out as VRPN text messages from the device's tracker name."""
        assert self.server is not None
        known = self._names.get((event.source, event.device_id))
        name = known[0] if known is not None else _vrpn_name(event.device_id)
        severity = {"warning": 1, "error": 2}.get(event.level, 0)
        self.server.broadcast(
            name, TextMessage(text=event.text, severity=severity), time=event.time
        )

    def _analog(
        self, table: Any, source: str, device_id: str, slot: int, name: str, fields: list[str]
    ) -> None:
        assert self.server is not None
        channels = self._channels.setdefault((source, device_id), [])
        for field in sorted(fields):
            if field not in channels and len(channels) < 128:
                channels.append(field)
        values = tuple(float(table.telemetry[f][slot]) for f in channels)
        self.server.broadcast(name, AnalogChannel(channels=values), reliable=False, flush=False)
