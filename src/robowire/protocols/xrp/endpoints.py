"""CLI glue for XRP: `robowire listen|serve xrp://...`, `robowire sim xrp`, `decode xrp`,
and `robowire xrp drive`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import click

from robowire.endpoints import Endpoint
from robowire.errors import RobowireError
from robowire.protocols.xrp.codec import DEFAULT_PORT as _DEFAULT_PORT
from robowire.protocols.xrp.decode import decode_capture as _decode_capture
from robowire.protocols.xrp.file_source import XrpFileSource
from robowire.protocols.xrp.services import XrpSink, XrpSource
from robowire.protocols.xrp.sim import XrpSim
from robowire.service import Sim, SimOptions, Sink, Source

NAME = "xrp"
DEFAULT_PORT: int = _DEFAULT_PORT


def open_source(endpoint: Endpoint) -> Source:
    """`xrp://host:3540`: we are the WPILib side (`?enable=1` sends the enable byte,
    `&left=0.3&right=0.2` drives the wheels). A capture file (`xrp:capture.txt`, pcap/pcapng)
    replays what the WPILib side saw."""
    if endpoint.is_file:
        return XrpFileSource(endpoint)
    return XrpSource(endpoint)


def open_sink(endpoint: Endpoint) -> Sink:
    """`xrp://127.0.0.1:3540?device=ID`: an XRP robot whose sensors mirror a world device."""
    return XrpSink(endpoint)


def open_sim(options: SimOptions) -> Sim:
    return XrpSim(options)


def decode_capture(path: str) -> Iterator[dict[str, Any]]:
    """Every datagram of a pcap/pcapng capture or of the `<t> <dir> <len> <hex>` text form."""
    return _decode_capture(path)


@click.group(name="xrp")
def command() -> None:
    """XRP robot tools (WPILib's XRP UDP protocol)."""


@command.command()
@click.option("--host", default="192.168.42.1", show_default=True, help="The robot's address.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int)
@click.option("--left", default=0.0, type=click.FloatRange(-1, 1), help="Left effort -1..1.")
@click.option("--right", default=0.0, type=click.FloatRange(-1, 1), help="Right effort -1..1.")
@click.option("--duration", default=2.0, type=click.FloatRange(0, 3600), show_default=True)
@click.option("--enable", is_flag=True, help="Enable the robot (without it nothing moves).")
def drive(host: str, port: int, left: float, right: float, duration: float, enable: bool) -> None:
    """Drive an XRP: send wheel efforts for DURATION seconds, then stop and print its status.

    \b
    Example:
      robowire xrp drive --host 192.168.42.1 --left 0.5 --right 0.5 --duration 2 --enable
    """
    from robowire.protocols.xrp.client import XrpClient

    if not enable:
        click.echo("xrp drive: robot not enabled (pass --enable to move it)", err=True)

    async def run() -> dict[str, Any]:
        async with XrpClient(host, port) as robot:
            robot.drive(left, right)
            robot.enable(enable)
            await asyncio.sleep(duration)
            robot.stop()
            status = await robot.wait_status()
            counts = status.encoder_counts
            return {
                "enabled": enable,
                "encoder_counts": list(counts),
                "gyro_angle_z": status.gyro[5] if status.gyro else None,
                "packets_received": robot.session.stats.messages_in,
                "dropped": robot.session.stats.dropped,
            }

    try:
        result = asyncio.run(run())
    except RobowireError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(result))
