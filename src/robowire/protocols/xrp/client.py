"""Drive an XRP from Python, or from the command line (`robowire xrp drive`, the `command`
group that `PROTOCOL.command` names): the WPILib side on a connected UDP socket.

    async with XrpClient("192.168.42.1") as robot:
        robot.enable()                       # the robot moves only when enabled
        robot.drive(0.5, 0.5)                # left, right effort, forward positive
        await asyncio.sleep(2)
        print(robot.status.encoder_counts)

Commands go out every 20 ms whatever happens (as WPILib does); the robot disables itself
500 ms after the last one, so leaving the block (or the process dying) stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import click

from robowire.errors import ConfigError, RobowireError, TransportError
from robowire.protocols.datagram import resolve
from robowire.protocols.xrp.codec import DEFAULT_PORT
from robowire.protocols.xrp.events import RobotStatus, StatusBatch, StatusReceived, WpilibEvent
from robowire.protocols.xrp.session_wpilib import ClientSession, wheel_values
from robowire.transport.udp import DatagramDriver, run_datagram
from robowire.wire import Address

HOST_VARIABLE = "HALSIMXRP_HOST"
PORT_VARIABLE = "HALSIMXRP_PORT"


def halsim_host(default: str) -> str:
    """The robot's host as WPILib's `halsim_xrp` finds it: `HALSIMXRP_HOST`, else `default`."""
    return os.environ.get(HOST_VARIABLE) or default


def halsim_port() -> int:
    """The robot's UDP port as `halsim_xrp` finds it: `HALSIMXRP_PORT`, else 3540."""
    text = os.environ.get(PORT_VARIABLE)
    if not text:
        return DEFAULT_PORT
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise ConfigError(f"{PORT_VARIABLE}={text}: the port must be 1..65535")
    return port


async def start_client(
    session: ClientSession,
    on_events: Callable[[list[WpilibEvent]], None],
    remote: Address,
) -> tuple[asyncio.Task[None], DatagramDriver]:
    """Run `session` on a socket connected to `remote`; returns the task and its driver."""
    loop = asyncio.get_running_loop()
    opened: asyncio.Future[DatagramDriver] = loop.create_future()
    task = asyncio.create_task(
        run_datagram(
            session,
            on_events,
            local_addr=("0.0.0.0", 0),
            remote_addr=remote,
            on_open=opened.set_result,
        )
    )
    waiting: set[asyncio.Future[Any]] = {task, opened}
    done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        task.result()  # raises the TransportError that ended it
    return task, opened.result()


class XrpClient:
    """The WPILib side as a Python object; use `async with`."""

    def __init__(self, host: str = "192.168.42.1", port: int = DEFAULT_PORT) -> None:
        self.host = host
        self.port = port
        self.remote: Address | None = None
        self.session = ClientSession(reboots=False)  # WPILib's own sequence rule, as a driver
        self._task: asyncio.Task[None] | None = None
        self._driver: DatagramDriver | None = None
        self._status_event = asyncio.Event()

    @property
    def status(self) -> RobotStatus | None:
        """The latest accepted robot status (None until the robot answered)."""
        return self.session.status

    def _on_events(self, events: Sequence[WpilibEvent]) -> None:
        if any(isinstance(e, (StatusReceived, StatusBatch)) for e in events):
            self._status_event.set()

    async def __aenter__(self) -> XrpClient:
        self.remote = resolve(self.host, self.port)
        self.session.remote = self.remote
        self._task, self._driver = await start_client(self.session, self._on_events, self.remote)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Send one last disabled, motors-off packet and stop."""
        if self._task is None:
            return
        self.stop()
        self.session.enabled = False
        self._flush_now()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    def _flush_now(self) -> None:
        if self._driver is not None:
            self.session.send_now()
            self._driver.flush()

    def enable(self, enabled: bool = True) -> None:
        self.session.enabled = enabled
        self._flush_now()

    def disable(self) -> None:
        self.enable(False)

    def drive(self, left: float, right: float) -> None:
        """Left and right efforts -1..1, forward positive (the right motor is inverted here)."""
        motor_left, motor_right = wheel_values(left, right)
        self.session.set_motor(0, motor_left)
        self.session.set_motor(1, motor_right)

    def stop(self) -> None:
        for motor in range(4):
            self.session.set_motor(motor, 0.0)

    def set_motor(self, motor: int, value: float) -> None:
        self.session.set_motor(motor, value)

    def set_servo(self, servo: int, position: float) -> None:
        self.session.set_servo(servo, position)

    def set_led(self, on: bool) -> None:
        self.session.set_dio(1, on)

    async def wait_status(self, timeout: float = 2.0) -> RobotStatus:
        """The next status the robot sends (TransportError if none comes in `timeout`)."""
        self._status_event.clear()
        try:
            await asyncio.wait_for(self._status_event.wait(), timeout)
        except TimeoutError:
            raise TransportError(
                f"no status from the XRP at {self.host}:{self.port} in {timeout:g} s"
            ) from None
        assert self.session.status is not None
        return self.session.status


@click.group(name="xrp")
def command() -> None:
    """XRP robot tools (WPILib's XRP UDP protocol)."""


@command.command()
@click.option(
    "--host",
    default=None,
    help="The robot's address [default: $HALSIMXRP_HOST, else 192.168.42.1 (the XRP's own AP)].",
)
@click.option(
    "--port",
    default=None,
    type=click.IntRange(1, 65535),
    help="[default: $HALSIMXRP_PORT, else 3540]",
)
@click.option("--left", default=0.0, type=click.FloatRange(-1, 1), help="Left effort -1..1.")
@click.option("--right", default=0.0, type=click.FloatRange(-1, 1), help="Right effort -1..1.")
@click.option("--duration", default=2.0, type=click.FloatRange(0, 3600), show_default=True)
@click.option("--enable", is_flag=True, help="Enable the robot (without it nothing moves).")
def drive(
    host: str | None, port: int | None, left: float, right: float, duration: float, enable: bool
) -> None:
    """Drive an XRP: send wheel efforts for DURATION seconds, then stop and print its status.

    \b
    Example:
      robowire xrp drive --host 192.168.42.1 --left 0.5 --right 0.5 --duration 2 --enable
    """
    try:
        host, port = host or halsim_host("192.168.42.1"), port or halsim_port()
    except RobowireError as exc:
        raise click.ClickException(str(exc)) from None
    if not enable:
        click.echo("xrp drive: robot not enabled (pass --enable to move it)", err=True)

    async def run() -> dict[str, Any]:
        async with XrpClient(host, port) as robot:
            robot.drive(left, right)
            robot.enable(enable)
            await asyncio.sleep(duration)
            robot.stop()
            status = await robot.wait_status()
            return {
                "enabled": enable,
                "encoder_counts": list(status.encoder_counts),
                "gyro_angle_z": status.gyro[5] if status.gyro else None,
                "packets_received": robot.session.stats.messages_in,
                "dropped": robot.session.stats.dropped,
            }

    try:
        result = asyncio.run(run())
    except RobowireError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(result))
