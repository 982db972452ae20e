"""`robowire ugcs devices|command|mission` (`PROTOCOL.command`): UgCS vehicles commanded
from the command line through `client.UcsClient`, without UgCS."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import click

from robowire.errors import ConfigError, RobowireError
from robowire.protocols.ugcs.client import (
    CommandResult,
    Mission,
    UcsClient,
    split_host,
)
from robowire.protocols.ugcs.codec import DEFAULT_PORT, DEGREE_SEMANTICS, Value
from robowire.protocols.ugcs.session_ucs import UcsDevice


def _params(pairs: Sequence[str]) -> dict[str, Value]:
    out: dict[str, Value] = {}
    for pair in pairs:
        key, eq, text = pair.partition("=")
        if not eq or not key:
            raise ConfigError(f"--param {pair!r}: expected NAME=VALUE")
        value: Value
        if text.lower() in ("true", "false"):
            value = text.lower() == "true"
        elif text.lower() in ("na", "none", ""):
            value = None
        else:
            try:
                value = int(text)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    value = text
        out[key] = value
    return out


def _run(job: Callable[[], Any]) -> Any:
    try:
        return asyncio.run(job())
    except RobowireError as exc:
        raise click.ClickException(str(exc)) from None


_HOST = click.option(
    "--host",
    required=True,
    metavar="HOST[:PORT]",
    help=f"The VSM (port {DEFAULT_PORT} if not given).",
)
_DEVICE = click.option("--device", required=True, help="The vehicle: its serial (or name, or id).")
_TIMEOUT = click.option(
    "--timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.1, 3600),
    help="Seconds to wait for the VSM.",
)


@click.group(name="ugcs")
def command() -> None:
    """UgCS tools: command the vehicles of a VSM as a UgCS server would.

    \b
    Examples:
      robowire ugcs devices --host 127.0.0.1:5556
      robowire ugcs command --host 127.0.0.1 --device SIM-0001 arm
      robowire ugcs mission --host 127.0.0.1 --device SIM-0001 examples/ugcs-square.json --start
    """


@command.command(name="command")
@_HOST
@_DEVICE
@click.argument("name")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="A command parameter (degrees for angles, metres, m/s); repeatable.",
)
@_TIMEOUT
def command_cmd(host: str, device: str, name: str, params: tuple[str, ...], timeout: float) -> None:
    """Send one command NAME to a vehicle and print the VSM's reply (exit 1 unless OK).

    \b
    Examples:
      robowire ugcs command --host 127.0.0.1:5556 --device SIM-0001 arm
      robowire ugcs command --host 127.0.0.1 --device SIM-0001 takeoff_command \\
          --param relative_altitude=20
    """
    values = _params(params)

    async def run() -> CommandResult:
        address, port = split_host(host)
        async with UcsClient(address, port, connect_timeout=timeout) as ucs:
            await ucs.wait_for_device(device, timeout)
            return await ucs.command(device, name, values, timeout=timeout)

    result: CommandResult = _run(run)
    click.echo(str(result))
    if not result.ok:
        raise SystemExit(1)


@command.command()
@_HOST
@_DEVICE
@click.argument("mission_file", metavar="MISSION.json", type=click.Path(dir_okay=False))
@click.option(
    "--start", is_flag=True, help="Send 'auto' after the upload (the vehicle must be armed)."
)
@_TIMEOUT
def mission(host: str, device: str, mission_file: str, start: bool, timeout: float) -> None:
    """Upload a mission (JSON: attributes + waypoints in degrees, metres, m/s) to a vehicle.

    Prints the VSM's reply and the mission id; exit 1 unless OK. The file form is in
    docs/ugcs.md ("The mission file").

    \b
    Example:
      robowire ugcs mission --host 127.0.0.1:5556 --device SIM-0001 examples/ugcs-square.json
    """
    plan = Mission.load(mission_file)

    async def run() -> list[CommandResult]:
        address, port = split_host(host)
        async with UcsClient(address, port, connect_timeout=timeout) as ucs:
            await ucs.wait_for_device(device, timeout)
            results = [await ucs.upload_mission(device, plan, timeout=timeout)]
            if start and results[0].ok:
                results.append(await ucs.command(device, "auto", timeout=timeout))
            return results

    results: list[CommandResult] = _run(run)
    for result in results:
        extra = (
            f" (mission id {result.mission_id}, {len(plan.items)} items)"
            if result.mission_id is not None
            else ""
        )
        click.echo(f"{result}{extra}")
    if not all(r.ok for r in results):
        raise SystemExit(1)


@command.command()
@_HOST
@click.option(
    "--wait",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0, 60),
    help="Seconds to collect registrations after the VSM said hello.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per device.")
@_TIMEOUT
def devices(host: str, wait: float, as_json: bool, timeout: float) -> None:
    """List the devices a VSM registers, with their commands and latest telemetry.

    \b
    Example:
      robowire ugcs devices --host 127.0.0.1:5556
    """

    async def run() -> list[dict[str, Any]]:
        address, port = split_host(host)
        async with UcsClient(address, port, connect_timeout=timeout) as ucs:
            await asyncio.sleep(wait)
            return [_describe(d) for d in ucs.devices]

    found: list[dict[str, Any]] = _run(run)
    for entry in found:
        if as_json:
            click.echo(json.dumps(entry))
        else:
            where = ""
            values = entry["telemetry"]
            if isinstance(values.get("latitude"), float):
                where = f" at {values['latitude']:.6f},{values['longitude']:.6f}"
            click.echo(
                f"{entry['device']} (id {entry['session_id']}){where}: "
                f"{len(entry['commands'])} commands, {len(values)} telemetry fields"
            )
    if not found:
        click.echo("no devices", err=True)


def _describe(device: UcsDevice) -> dict[str, Any]:
    values: dict[str, Any] = {}
    semantics = {f.key: f.semantic for f in device.info.fields}
    for name, value in device.values.items():
        if isinstance(value, bytes):
            value = value.hex()
        elif semantics.get(name) in DEGREE_SEMANTICS and isinstance(value, float):
            value = math.degrees(value)
        values[name] = value
    return {
        "device": device.label,
        "session_id": device.device_id,
        "properties": {k: v for k, v in device.info.properties.items() if not isinstance(v, bytes)},
        "commands": sorted(device.commands),
        "telemetry": values,
    }
