"""Drive an XRP from Python: the WPILib side on a connected UDP socket.

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
import socket
from collections.abc import Callable
from types import TracebackType
from typing import Any

from robowire.errors import TransportError
from robowire.protocols.base import Address
from robowire.protocols.xrp.codec import DEFAULT_PORT
from robowire.protocols.xrp.session import ClientSession, RobotStatus, StatusReceived, wheel_values
from robowire.transport.udp import DatagramDriver, run_datagram


def resolve(host: str, port: int) -> Address:
    """An IPv4 address for `host` (halsim_xrp is IPv4 only), so replies match exactly."""
    try:
        info = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise TransportError(f"cannot resolve XRP host {host!r}: {exc.strerror}") from None
    address = info[0][4]
    return (str(address[0]), int(address[1]))


async def start_client(
    session: ClientSession,
    on_events: Callable[[list[object]], None],
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
        self.session = ClientSession()
        self._task: asyncio.Task[None] | None = None
        self._driver: DatagramDriver | None = None
        self._status_event = asyncio.Event()

    @property
    def status(self) -> RobotStatus | None:
        """The latest accepted robot status (None until the robot answered)."""
        return self.session.status

    def _on_events(self, events: list[object]) -> None:
        if any(isinstance(e, StatusReceived) for e in events):
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
