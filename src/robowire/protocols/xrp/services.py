"""The XRP services on the shared templates: source, capture source, serve sink, simulator.

* `XrpSource` (`robowire listen xrp://host:3540`): we are the WPILib side. The robot streams
  status only to whoever sent it the latest datagram, so the source sends commands at 50 Hz
  too: disabled, motors off, unless the URL says `?enable=1` (the control byte 1) and
  `&left=E&right=E` (wheel efforts -1..1, forward positive; they move the robot only while
  enabled). Running it next to a real WPILib program steals the robot's replies from that
  program. UDP has no connection: the source counts as connected once the robot's first status
  arrives, and says once if none has come after `ANSWER_WAIT` seconds.
* `XrpFileSource` (`robowire listen xrp:capture.txt`, pcap/pcapng too): the robot's status
  goes through the WPILib-side session and adapter as a live robot's does; the commands the
  WPILib side sent set the motor, servo, LED and enabled values shown.
* `XrpSink` (`robowire serve xrp://127.0.0.1:3540?device=ID`): an XRP robot on a UDP port whose
  sensors mirror one world device (`adapter.DeviceMirror`), so WPILib code can run against
  anything robowire tracks; the rangefinder and line sensors read the sink's arena at the
  device's pose. Motor commands are accepted (enable, watchdog and sequence rules apply as on a
  robot) but move nothing. `&source=NAME` picks among clashing ids; without `device`, the first
  device that has a pose.
* `XrpSim` (`robowire sim xrp`): N robots on consecutive UDP ports (`port + i`; port 0: any
  free ports), sharing one `model.Fleet`, so their physics is one vectorised step however many
  there are. Every socket is opened before any robot runs, so a port in use is one error line.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterator, Sequence

from robowire.capture import Record
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, DecodeError
from robowire.protocols.base import Address, PacketDropped
from robowire.protocols.xrp.adapter import DeviceMirror, XrpAdapter
from robowire.protocols.xrp.client import resolve, start_client
from robowire.protocols.xrp.codec import DEFAULT_PORT, PROTOCOL
from robowire.protocols.xrp.dissect import TO_ROBOT, TO_WPILIB, direction_of, read_capture
from robowire.protocols.xrp.events import EnabledChanged, RobotEvent, StatusReceived, WpilibEvent
from robowire.protocols.xrp.model import MOTOR_LAG, Arena, Fleet, number
from robowire.protocols.xrp.session_robot import RobotSession
from robowire.protocols.xrp.session_wpilib import ClientSession, wheel_values
from robowire.service import CaptureSource, Sim, SimOptions, Sink, Source
from robowire.transport.udp import DatagramDriver, open_udp_socket, run_datagram
from robowire.world import LogEvent, Update, World

log = logging.getLogger("robowire.xrp")

ANSWER_WAIT = 1.5  # s without a status before the source says it is still waiting
MAX_ROBOTS = 1000
ROBOT: Address = ("robot", 0)  # the address a capture's robot datagrams are fed from


def _effort(endpoint: Endpoint, side: str) -> float:
    text = endpoint.option(side, "0")
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not -1.0 <= value <= 1.0:
        raise ConfigError(f"{endpoint.raw}: {side} must be an effort -1..1, not {text!r}")
    return value


class XrpSource(Source):
    """Watches (and keeps alive) one XRP robot as the WPILib side."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"xrp@{self.host}:{self.port}")
        enable = endpoint.option("enable", "0")
        if enable not in ("0", "1"):
            raise ConfigError(f"{endpoint.raw}: enable must be 0 or 1, not {enable!r}")
        self.session = ClientSession()
        self.session.enabled = enable == "1"
        left, right = wheel_values(_effort(endpoint, "left"), _effort(endpoint, "right"))
        self.session.set_motor(0, left)
        self.session.set_motor(1, right)
        self._answered = False
        self._warned = False

    def new_adapter(self, world: World) -> XrpAdapter:
        return XrpAdapter(world, self.name)

    def _on_events(self, events: Sequence[WpilibEvent]) -> None:
        if not self._answered and any(isinstance(e, StatusReceived) for e in events):
            self._answered = True
            if self._warned:
                log.warning("%s: the robot answers", self.name)
            self.connected()
        self.deliver(events, asyncio.get_running_loop().time())

    async def connect(self, world: World) -> None:
        remote = resolve(self.host, self.port)
        self.session.remote = remote
        task, _ = await start_client(self.session, self._on_events, remote)
        try:
            await asyncio.wait([task], timeout=ANSWER_WAIT)
            if not task.done() and not self._answered and not self._warned:
                self._warned = True
                log.warning(
                    "%s: still sending to %s:%d, waiting for the robot to answer",
                    self.name, self.host, self.port,
                )  # fmt: skip
            await task
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


class XrpFileSource(CaptureSource):
    """Reads a capture to its end; `speed` (what `replay --speed` sets) paces it."""

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(PROTOCOL, endpoint, read_capture)
        self.session = ClientSession(ROBOT)

    def new_adapter(self, world: World) -> XrpAdapter:
        return XrpAdapter(world, self.name)

    def records(self) -> Iterator[Record]:
        return read_capture(self.path, self._bad_line)

    def _bad_line(self, error: DecodeError) -> None:
        self.stats.drop(error.reason)

    def feed(self, record: Record, now: float) -> list[WpilibEvent]:
        direction = direction_of(record)
        if direction == TO_ROBOT:
            return self.session.feed_sent_datagram(record.data, now)
        if direction == TO_WPILIB:
            return self.session.feed_datagram(record.data, ROBOT, now)
        reason = f"datagram {record.flow} is neither to nor from port {DEFAULT_PORT}"
        return [PacketDropped(protocol=PROTOCOL, reason=reason, size=len(record.data))]


class XrpSink(Sink):
    """An XRP robot whose sensors follow a world device."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"xrp-robot@{self.host}:{self.port}")
        self.fleet = Fleet(1, arena=Arena.from_settings(endpoint.options, endpoint.raw))
        self.fleet.frozen = True  # the world moves this robot, not its motors
        self.robot = RobotSession(self.fleet)
        self.mirror = DeviceMirror(
            self.fleet, endpoint.option("device", ""), endpoint.option("source", "")
        )

    @property
    def target(self) -> tuple[str, str] | None:
        """(source, device id) of the mirrored device, once there is one."""
        return self.mirror.target

    async def serve(self, world: World) -> None:
        await run_datagram(
            self.robot, self._on_events, local_addr=(self.host, self.port),
            on_listening=self.listening,
        )  # fmt: skip

    def _on_events(self, events: Sequence[RobotEvent]) -> None:
        self.fleet.apply(0, events)
        for event in events:
            if isinstance(event, PacketDropped):
                self.stats.drop(event.reason)
        self.stats.messages_in = self.robot.stats.messages_in
        self.stats.messages_out = self.robot.stats.messages_out

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        self.mirror.write(world, items)
        return True


class XrpSim(Sim):
    """N simulated robots on consecutive UDP ports.

    Settings (`--set k=v`): `arena_width`, `arena_height` (m), `line_radius`, `line_width` (m),
    `lag` (s, motor time constant), `button` (1: the user button reads pressed).
    """

    def __init__(self, options: SimOptions) -> None:
        self.host = options.host
        self.port = DEFAULT_PORT if options.port is None else options.port
        self.count = options.count or 1
        if not 1 <= self.count <= MAX_ROBOTS:
            raise ConfigError(f"xrp sim: count must be 1..{MAX_ROBOTS}")
        super().__init__(f"xrp-sim@{self.host}:{self.port}")
        settings = options.options
        button = settings.get("button", "0")
        if button not in ("0", "1"):
            raise ConfigError(f"xrp sim: button must be 0 or 1, not {button!r}")
        self.fleet = Fleet(
            self.count,
            arena=Arena.from_settings(settings, "xrp sim"),
            lag=number(settings, "lag", MOTOR_LAG, "xrp sim"),
        )
        self.fleet.button[:] = button == "1"
        # every robot reports on the same 50 ms grid: one physics step and sensor snapshot
        # serve them all (a real robot's timer phase is arbitrary anyway)
        self.robots = [RobotSession(self.fleet, i, status_phase=0.0) for i in range(self.count)]
        self.addresses: list[Address | None] = [None] * self.count

    def _on_events(self, index: int, events: Sequence[RobotEvent]) -> None:
        self.fleet.apply(index, events)
        for event in events:
            match event:
                case PacketDropped():
                    self.stats.drop(event.reason)
                case EnabledChanged(enabled=enabled, reason=reason):
                    state = "enabled" if enabled else "disabled"
                    log.info("xrp robot %d %s (%s)", index, state, reason)
        self.stats.messages_in = sum(r.stats.messages_in for r in self.robots)

    async def run(self, world: World) -> None:
        drivers: list[DatagramDriver] = []
        try:
            for i, robot in enumerate(self.robots):  # every socket first: a busy port is one line
                sock = open_udp_socket((self.host, self.port + i if self.port else 0))
                drivers.append(DatagramDriver(robot, functools.partial(self._on_events, i), sock))
            for i, driver in enumerate(drivers):
                name = driver.sock.getsockname()
                self.addresses[i] = (str(name[0]), int(name[1]))
                driver.flush()
            first = self.addresses[0]
            assert first is not None
            self.listening(first)
            log.info("xrp sim: %d robot(s) from %s:%d", self.count, first[0], first[1])
            await asyncio.Future()  # until cancelled
        finally:
            for driver in drivers:
                driver.close()
