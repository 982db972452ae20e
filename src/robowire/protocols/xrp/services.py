"""The XRP services on the shared templates: source, capture source, serve sink, simulator.

* `XrpSource` (`robowire listen xrp://host:3540`): we are the WPILib side. The robot streams
  status only to whoever sent it the latest datagram, so the source sends commands at 50 Hz
  too: disabled, motors off, unless the URL says `?enable=1` (the control byte 1) and
  `&left=E&right=E` (wheel efforts -1..1, forward positive; they move the robot only while
  enabled). Running it next to a real WPILib program steals the robot's replies from that
  program. UDP has no connection: the source counts as connected once the robot's first status
  arrives, and says once if none has come after `ANSWER_WAIT` seconds.
  It is `control.Controllable` (the viewer's `--allow-control`): `drive` (left, right efforts
  -1..1; the motors stop `DEAD_MAN` s after the last drive, so a closed browser tab never
  leaves a robot running), `enable`, `disable` (motors off too) and `stop` (motors off). Each
  goes out at once, in its own packet; its status is ok once sent (the robot's status does not
  say whether it is enabled).
* `XrpFileSource` (`robowire listen xrp:capture.txt`, pcap/pcapng too): the robot's status
  goes through the WPILib-side session and adapter as a live robot's does; the commands the
  WPILib side sent set the motor, servo, LED and enabled values shown.
* `XrpSink` (`robowire serve xrp://127.0.0.1:3540?device=ID`): an XRP robot on a UDP port whose
  sensors mirror one world device (`adapter.DeviceMirror`), so WPILib code can run against
  anything robowire tracks. An XRP robot's device is relayed: the sink's robot reports that
  robot's own sensor values, and when its `XrpSource` runs in the same gateway (`robowire
  bridge xrp://A --to xrp://B`), what a WPILib program tells the sink's robot goes on to the
  robot (`XrpSource.relay`), so the program drives it. Any other device moves a simulated
  robot: the rangefinder and line sensors read the sink's arena at the device's pose, and
  motor commands are accepted (enable, watchdog and sequence rules apply as on a robot) but
  move nothing. `&source=NAME` picks among clashing ids; without `device`, the first device
  that has a pose.
* `RobotServer` (`serve(robot, port=...)`): your `robot.Robot`s on consecutive UDP ports
  (`port + i`; port 0: any free ports), each behind a robot session.
* `XrpSim` (`robowire sim xrp`): a `RobotServer` whose body is one `model.Fleet` for its N
  robots, so their physics and status encoding are one vectorised step however many there
  are.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from robowire.background import Running
from robowire.capture import CaptureReader, Record
from robowire.control import FAILED, OK, CommandSpec, CommandStatus, ParamSpec
from robowire.endpoints import Endpoint, number
from robowire.errors import ConfigError, DecodeError
from robowire.protocols.datagram import DatagramSource
from robowire.protocols.xrp.adapter import DeviceMirror, XrpAdapter
from robowire.protocols.xrp.client import halsim_host, halsim_port
from robowire.protocols.xrp.codec import DEFAULT_PORT, PROTOCOL
from robowire.protocols.xrp.dissect import TO_ROBOT, TO_WPILIB, direction_of
from robowire.protocols.xrp.events import (
    CommandReceived,
    EnabledChanged,
    RobotEvent,
    StatusBatch,
    StatusReceived,
    WpilibEvent,
    XrpEvent,
)
from robowire.protocols.xrp.model import MOTOR_LAG, Arena, Fleet
from robowire.protocols.xrp.robot import Robot, Robots
from robowire.protocols.xrp.session_robot import RobotSession, StatusSource
from robowire.protocols.xrp.session_wpilib import ClientSession, wheel_values
from robowire.service import CaptureSource, Sim, SimOptions, Sink
from robowire.timebase import monotonic
from robowire.transport.udp import DatagramDriver, open_udp_socket, run_datagram
from robowire.wire import Address, PacketDropped
from robowire.world import LogEvent, Update, World

log = logging.getLogger("robowire.xrp")

ANSWER_WAIT = 1.5  # s without a status before the source says it is still waiting
MAX_ROBOTS = 1000
ROBOT: Address = ("robot", 0)  # the address a capture's robot datagrams are fed from
DEAD_MAN = 0.5  # s after the last `drive` command before the motors stop


def _effort_param(side: str) -> ParamSpec:
    return ParamSpec(name=side, type="number", unit="ratio", default=0.0, minimum=-1.0, maximum=1.0)


COMMANDS = (
    CommandSpec(
        name="drive", label="Drive", params=(_effort_param("left"), _effort_param("right"))
    ),
    CommandSpec(name="enable", label="Enable"),
    CommandSpec(name="disable", label="Disable"),
    CommandSpec(name="stop", label="Stop"),
)
"""What the viewer can tell an XRP (`XrpSource` is `control.Controllable`)."""


def _effort(endpoint: Endpoint, side: str) -> float:
    text = endpoint.option(side, "0")
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not -1.0 <= value <= 1.0:
        raise ConfigError(f"{endpoint.raw}: {side} must be an effort -1..1, not {text!r}")
    return value


class XrpSource(DatagramSource):
    """Watches (and keeps alive) one XRP robot as the WPILib side (a datagram client: the
    robot answers every 20 ms tick, so `silence` says when it is gone). Like WPILib's
    halsim_xrp, a URL without host or port (`xrp://`) takes them from `HALSIMXRP_HOST`/
    `HALSIMXRP_PORT`. It is connected as long as the robot answers."""

    dials = True

    def __init__(self, endpoint: Endpoint) -> None:
        host = endpoint.host if endpoint.host_given else halsim_host(endpoint.host)
        super().__init__(PROTOCOL, host, endpoint.port_or(halsim_port()))
        enable = endpoint.option("enable", "0")
        if enable not in ("0", "1"):
            raise ConfigError(f"{endpoint.raw}: enable must be 0 or 1, not {enable!r}")
        self.session: ClientSession = ClientSession()
        self.session.enabled = enable == "1"
        left, right = wheel_values(_effort(endpoint, "left"), _effort(endpoint, "right"))
        self.session.set_motor(0, left)
        self.session.set_motor(1, right)
        self._answered = False
        self._warned = False
        self._dead_man: asyncio.TimerHandle | None = None

    def new_adapter(self, world: World) -> XrpAdapter:
        return XrpAdapter(world, self.name)

    # -- control (control.Controllable) ----------------------------------------------------------

    @property
    def device_id(self) -> str:
        return self.adapter.device_id if isinstance(self.adapter, XrpAdapter) else "xrp"

    def command_specs(self) -> Sequence[CommandSpec]:
        return COMMANDS

    def device_commands(self, device: str) -> Sequence[CommandSpec] | None:
        return COMMANDS if device == self.device_id else None

    async def run_command(
        self, device: str, command: CommandSpec, params: Mapping[str, Any]
    ) -> AsyncIterator[CommandStatus]:
        if self.driver is None:
            yield CommandStatus(FAILED, f"{command.name}: not connected to the robot")
            return
        session = self.session
        match command.name:
            case "drive":
                left, right = float(params.get("left", 0.0)), float(params.get("right", 0.0))
                motor_left, motor_right = wheel_values(left, right)
                session.set_motor(0, motor_left)
                session.set_motor(1, motor_right)
                self._arm_dead_man(left != 0.0 or right != 0.0)
            case "enable":
                session.enabled = True
            case "disable":
                session.enabled = False
                self._motors_off()
            case _:  # stop
                self._motors_off()
        self._send_now()
        text = f"{command.name} sent"
        if not self._answered:
            text += " (the robot has not answered yet)"
        elif command.name == "drive" and not session.enabled:
            text += " (the robot is disabled: enable it to move)"
        yield CommandStatus(OK, text)

    def relay(self, events: Sequence[RobotEvent]) -> None:
        """What a WPILib program told the robot of an `XrpSink` that relays this one goes on
        to this robot with the next packet: the control byte and each motor, servo and DIO
        output of every command the sink's robot accepted. When the sink's robot stops hearing
        the program (its watchdog), this robot is disabled and its motors stopped."""
        for event in events:
            if isinstance(event, CommandReceived):
                self.session.take(event.packet)
            elif isinstance(event, EnabledChanged) and event.reason == "watchdog":
                self.session.enabled = False
                self._motors_off()

    def _motors_off(self) -> None:
        for motor in range(4):
            self.session.set_motor(motor, 0.0)
        self._arm_dead_man(False)

    def _arm_dead_man(self, moving: bool) -> None:
        if self._dead_man is not None:
            self._dead_man.cancel()
            self._dead_man = None
        if moving:
            loop = asyncio.get_running_loop()
            self._dead_man = loop.call_later(DEAD_MAN, self._dead_man_stop)

    def _dead_man_stop(self) -> None:
        self._dead_man = None
        log.info("%s: no drive command for %g s: motors stopped", self.name, DEAD_MAN)
        self._motors_off()
        self._send_now()

    def _send_now(self) -> None:
        """One packet with what the session holds now, not at the next 20 ms tick."""
        if self.driver is None:
            return
        sent = self.session.send_now()
        self.driver.flush()
        self.deliver([sent], monotonic())  # the world's telemetry shows what was sent

    def received(self, events: list[WpilibEvent]) -> None:
        if not self._answered and any(isinstance(e, (StatusReceived, StatusBatch)) for e in events):
            self._answered = True
            if self._warned:
                log.warning("%s: the robot answers", self.name)
            self.connected()
        self.deliver(events, monotonic())

    def _opened(self, driver: DatagramDriver) -> None:
        super()._opened(driver)
        self.session.remote = self.remote  # replies must come from where it sends

    async def connect(self, world: World) -> None:
        """The datagram client's connection (the template's), saying once when the robot
        has not answered after `ANSWER_WAIT` seconds."""
        task = asyncio.create_task(super().connect(world))
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

    time_default = "receive"  # no timestamps on the wire: stamp on receipt

    def __init__(self, endpoint: Endpoint, read: CaptureReader) -> None:
        super().__init__(PROTOCOL, endpoint, read)
        self.session = ClientSession(ROBOT)

    def new_adapter(self, world: World) -> XrpAdapter:
        return XrpAdapter(world, self.name)

    def records(self) -> Iterator[Record]:
        return self._read(self.path, self._bad_line)  # type: ignore[no-any-return]

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
        self.port = endpoint.port_or(halsim_port())  # where WPILib programs here will send
        super().__init__(f"xrp-robot@{self.host}:{self.port}")
        self.fleet = Fleet(1, arena=Arena.from_settings(endpoint.options, endpoint.raw))
        self.fleet.frozen = True  # the world moves this robot, not its motors
        self.mirror = DeviceMirror(
            self.fleet, endpoint.option("device", ""), endpoint.option("source", "")
        )
        self.robot = RobotSession(self.mirror)
        self._upstream: XrpSource | None = None  # the relayed robot's source, once found
        self._looked = False  # said once that commands move nothing

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
        upstream = self._relayed()
        if upstream is not None:
            upstream.relay(events)

    def _relayed(self) -> XrpSource | None:
        """The source of the XRP robot this sink relays, when it runs in the same gateway."""
        target = self.mirror.target
        if self._upstream is not None or not self.mirror.native or target is None:
            return self._upstream
        services = self.gateway.services if self.gateway is not None else []
        found = [s for s in services if isinstance(s, XrpSource) and s.name == target[0]]
        if found:
            self._upstream = found[0]
            log.info("%s: WPILib commands to this robot go on to %s", self.name, target[0])
        elif not self._looked:
            log.info("%s: %s is not a live XRP source here: commands move nothing",
                     self.name, target[0])  # fmt: skip
        self._looked = True
        return self._upstream

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        self.mirror.write(world, items)
        return True


class Body(StatusSource, Protocol):
    """What a `RobotServer`'s robot sessions read their sensors from and drive: `robot.Robots`
    (your robots) or `model.Fleet` (the simulator's)."""

    def apply(self, index: int, events: Iterable[XrpEvent]) -> None: ...


class RobotServer(Sim):
    """`count` robots of `body` on consecutive UDP ports from `port` (0: any free ports), each
    behind a robot session (the firmware's rules). Every socket is opened before any robot
    runs, so a port in use is one error line."""

    def __init__(
        self, body: Body, count: int, *, host: str, port: int, name: str = "xrp-robot"
    ) -> None:
        self.host = host
        self.port = port
        super().__init__(f"{name}@{host}:{port}")
        self.body = body
        self.count = count
        # every robot reports on the same 50 ms grid: a simulated fleet's physics step and
        # sensor snapshot serve them all (a real robot's timer phase is arbitrary anyway)
        self.sessions = [RobotSession(body, i, status_phase=0.0) for i in range(self.count)]
        self.addresses: list[Address | None] = [None] * self.count

    def _on_events(self, index: int, events: Sequence[RobotEvent]) -> None:
        self.body.apply(index, events)
        for event in events:
            match event:
                case PacketDropped():
                    self.stats.drop(event.reason)
                case EnabledChanged(enabled=enabled, reason=reason):
                    state = "enabled" if enabled else "disabled"
                    log.info("xrp robot %d %s (%s)", index, state, reason)
        self.stats.messages_in = sum(r.stats.messages_in for r in self.sessions)

    async def serve(self) -> None:
        """The robots on their sockets: each session's timer runs its robot (the firmware's
        50 ms status), so there is no step of the simulator's own."""
        drivers: list[DatagramDriver] = []
        try:
            for i, robot in enumerate(self.sessions):  # every socket first: a busy port is one line
                sock = open_udp_socket((self.host, self.port + i if self.port else 0))
                drivers.append(DatagramDriver(robot, functools.partial(self._on_events, i), sock))
            for i, driver in enumerate(drivers):
                name = driver.sock.getsockname()
                self.addresses[i] = (str(name[0]), int(name[1]))
                driver.flush()
            first = self.addresses[0]
            assert first is not None
            self.listening(first)
            log.info("xrp: %d robot(s) from %s:%d", self.count, first[0], first[1])
            await asyncio.Future()  # until cancelled
        finally:
            for driver in drivers:
                driver.close()


class XrpSim(RobotServer):
    """N simulated robots on consecutive UDP ports, sharing one `model.Fleet`.

    Settings (`--set k=v`): `arena_width`, `arena_height` (m), `line_radius`, `line_width` (m),
    `lag` (s, motor time constant), `button` (1: the user button reads pressed).
    """

    def __init__(self, options: SimOptions) -> None:
        count = options.count or 1
        if not 1 <= count <= MAX_ROBOTS:
            raise ConfigError(f"xrp sim: count must be 1..{MAX_ROBOTS}")
        settings = options.options
        button = settings.get("button", "0")
        if button not in ("0", "1"):
            raise ConfigError(f"xrp sim: button must be 0 or 1, not {button!r}")
        self.fleet = Fleet(
            count,
            arena=Arena.from_settings(settings, "xrp sim"),
            lag=number(settings, "lag", MOTOR_LAG, "xrp sim"),
        )
        self.fleet.button[:] = button == "1"
        port = halsim_port() if options.port is None else options.port
        super().__init__(self.fleet, count, host=options.host, port=port, name="xrp-sim")


def serve(
    *robots: Robot, host: str = "127.0.0.1", port: int = DEFAULT_PORT, name: str = "xrp-robot"
) -> Running:
    """Run `robots` (see `robot`) on UDP ports `port`, `port + 1`, ... until the returned
    handle is closed (a `with` block); port 0 picks free ones (`.address` says the first's).
    A WPILib program reaches the first with `HALSIMXRP_HOST`/`HALSIMXRP_PORT`. Raises the
    CLI's one-line error when a port is taken. In your own event loop, add
    `RobotServer(Robots(robots), len(robots), host=..., port=...)` to a
    `robowire.gateway.Gateway` instead."""
    if not robots:
        raise ConfigError("xrp: serve needs at least one robot")
    body = Robots(robots)
    return Running(
        lambda: [RobotServer(body, len(robots), host=host, port=port, name=name)], "robowire-xrp"
    )
