"""The XRP source (`robowire listen xrp://host:3540`) and sink (`robowire serve xrp://...`).

Source: we are the WPILib side. The robot streams status only to whoever sent it the latest
datagram, so the source sends commands at 50 Hz too: disabled, motors off, unless the URL
says `?enable=1` (then it sends the control byte 1) and `&left=E&right=E` (wheel efforts
-1..1, forward positive; they move the robot only while enabled). Running it next to a
real WPILib program steals the robot's replies from that program.

Sink: an XRP robot on a UDP port whose sensors mirror one world device, so WPILib code can
run against anything robowire tracks: the device's yaw drives the gyro, the distance it moves
(and turns) drives the left and right encoders as a 155 mm-track robot's wheels would, and the
rangefinder and line sensors read the sink's arena at the device's pose. Motor commands are
accepted (enable, watchdog and sequence rules apply as on a robot) but do not move anything.
Pick the device with `?device=ID` (and `&source=NAME` if ids clash); without it, the first
device that has a pose.
"""

from __future__ import annotations

import asyncio
import logging
import math

from robowire.endpoints import Endpoint
from robowire.errors import ConfigError
from robowire.protocols.base import PacketDropped
from robowire.protocols.xrp.adapter import XrpAdapter
from robowire.protocols.xrp.client import resolve, start_client
from robowire.protocols.xrp.codec import DEFAULT_PORT
from robowire.protocols.xrp.physics import COUNTS_PER_METRE, TRACK_WIDTH, Fleet
from robowire.protocols.xrp.session import (
    ClientSession,
    RobotSession,
    StatusReceived,
    wheel_values,
)
from robowire.protocols.xrp.sim import arena_from
from robowire.service import Sink, Source
from robowire.timebase import WallClock
from robowire.transport.udp import run_datagram
from robowire.world import Update, World
from robowire.world.model import ORIENTATION, POSITION

log = logging.getLogger("robowire.xrp")


class XrpSource(Source):
    """Watches (and keeps alive) one XRP robot as the WPILib side."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"xrp@{self.host}:{self.port}")
        self.enable = endpoint.option("enable", "0") == "1"
        try:
            self.efforts = tuple(
                min(1.0, max(-1.0, float(endpoint.option(side, "0")))) for side in ("left", "right")
            )
        except ValueError:
            raise ConfigError(f"{endpoint.raw}: left and right must be efforts -1..1") from None
        self.session: ClientSession | None = None

    async def run(self, world: World) -> None:
        loop = asyncio.get_running_loop()
        clock = WallClock()
        remote = resolve(self.host, self.port)
        session = self.session = ClientSession(remote)
        session.enabled = self.enable
        motor_left, motor_right = wheel_values(*self.efforts)
        session.set_motor(0, motor_left)
        session.set_motor(1, motor_right)
        adapter = XrpAdapter(world, self.name)

        def on_events(events: list[object]) -> None:
            receive_time = clock.wall(loop.time())
            for event in events:
                if isinstance(event, StatusReceived):
                    self.stats.messages_in += 1
                    adapter.apply(event.status, session, receive_time)
                elif isinstance(event, PacketDropped):
                    self.stats.drop(event.reason)

        task, driver = await start_client(session, on_events, remote)
        name = driver.sock.getsockname()
        self.listening((str(name[0]), int(name[1])))
        await task


def _yaw(orientation: tuple[float, float, float, float]) -> float:
    w, x, y, z = orientation
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


class XrpSink(Sink):
    """An XRP robot whose sensors follow a world device."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"xrp-robot@{self.host}:{self.port}")
        self.device = endpoint.option("device", "")
        self.source = endpoint.option("source", "")
        self.fleet = Fleet(1, arena=arena_from(endpoint.options))
        self.fleet.frozen = True  # the world moves this robot, not its motors
        self.robot = RobotSession(self.fleet)
        self.target: tuple[str, str] | None = None
        self._last: tuple[float, float, float, float] | None = None  # time, x, y, yaw

    def follow(self, x: float, y: float, yaw: float, time: float) -> None:
        """Move the mirrored robot to (x, y, yaw) at `time` (wall seconds)."""
        fleet = self.fleet
        if self._last is None:
            fleet.pose[0] = (x, y, yaw)
            self._last = (time, x, y, yaw)
            fleet.invalidate()
            return
        t0, x0, y0, _ = self._last
        previous = float(fleet.pose[0, 2])
        turn = math.remainder(yaw - previous, math.tau)  # keep the gyro angle continuous
        heading = previous + 0.5 * turn
        forward = (x - x0) * math.cos(heading) + (y - y0) * math.sin(heading)
        wheel_left = forward - 0.5 * turn * TRACK_WIDTH
        wheel_right = forward + 0.5 * turn * TRACK_WIDTH
        dt = time - t0
        fleet.pose[0] = (x, y, previous + turn)
        if fleet.counting[0]:  # encoders count only while enabled, as on the robot
            fleet.counts[0, 0] += wheel_left * COUNTS_PER_METRE
            fleet.counts[0, 1] += wheel_right * COUNTS_PER_METRE
        if dt > 0:
            fleet.yaw_rate[0] = turn / dt
            fleet.count_rate[0, 0] = wheel_left * COUNTS_PER_METRE / dt
            fleet.count_rate[0, 1] = wheel_right * COUNTS_PER_METRE / dt
            fleet.last_tick[0, :2] = fleet.time or 0.0
        self._last = (time, x, y, previous + turn)
        fleet.invalidate()

    def _matches(self, source: str, device_id: str) -> bool:
        if self.target is not None:
            return self.target == (source, device_id)
        if self.device and device_id != self.device:
            return False
        return not self.source or source == self.source

    def _apply(self, world: World, update: Update) -> None:
        if POSITION not in update.fields and ORIENTATION not in update.fields:
            return
        table = world.tables[update.source]
        for slot in update.slots.tolist():
            device_id = table.ids[slot]
            if not self._matches(update.source, device_id):
                continue
            device = world.device(update.source, device_id)
            if device.position is None:
                continue
            if self.target is None:
                self.target = (update.source, device_id)
                log.info("%s: mirrors %s/%s", self.name, update.source, device_id)
            yaw = _yaw(device.orientation) if device.orientation is not None else 0.0
            self.follow(device.position[0], device.position[1], yaw, update.receive_time)
            return

    async def run(self, world: World) -> None:
        with world.feed.subscribe(maxlen=4096) as updates:
            server = asyncio.create_task(
                run_datagram(
                    self.robot, self._count, local_addr=(self.host, self.port),
                    on_listening=self.listening,
                )
            )  # fmt: skip
            try:
                async for item in updates:
                    if isinstance(item, Update):
                        self._apply(world, item)
                    if server.done():
                        server.result()  # re-raise what ended the robot's socket
            finally:
                server.cancel()
                await asyncio.gather(server, return_exceptions=True)

    def _count(self, events: list[object]) -> None:
        for event in events:
            if isinstance(event, PacketDropped):
                self.stats.drop(event.reason)
        self.stats.messages_in = self.robot.stats.messages_in
        self.stats.messages_out = self.robot.stats.messages_out
