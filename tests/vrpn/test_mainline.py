"""Interop with the mainline C++ tools: `vrpn_server` and `vrpn_print_devices` (VRPN 07.38).

They are found next to the checkout, in `../shared/peers/vrpn/` (its README says how they were
built); ROBOWIRE_VRPN_SERVER / ROBOWIRE_VRPN_PRINT_DEVICES point at other builds. A checkout
without them skips these tests, saying where it looked. Checked: our client reads a real server
in both modes; the real client prints what our simulator sends without warnings; it prints the
same devices, sensors and report kinds (and the same deterministic values) reading a robowire
relay of a real server as reading the server directly; and it plays a `record -o run.vrpn`
log with every pose in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import socket
from pathlib import Path

import pytest

from mainline import PRINT_DEVICES, SERVER, needs_client, needs_server
from robowire.addresses import parse_endpoint
from robowire.gateway import Gateway, open_sink
from robowire.gateway import open_source as open_url
from robowire.protocols.vrpn.dissect import decode_log
from robowire.protocols.vrpn.services import VrpnLogSink, VrpnSink, VrpnSource, open_sim
from robowire.service import SimOptions
from robowire.world import World
from support import free_port, free_udp_port, until

from .test_live import started, stop, wait_for

pytestmark = pytest.mark.interop

# -- the mainline client's output --------------------------------------------------------------

Report = tuple[str, int | None, str]  # (device, sensor or number, what was printed)
_TRACKER = re.compile(r"Tracker (\S+?)@\S*, sensor (\d+):$")
_MOTION = re.compile(r"\s+(pos|vel|acc) \(")
_ANALOG = re.compile(r"Analog (\S+?)@\S*:$")
_CHANNELS = re.compile(r"\s+.*\((\d+) chans\)$")
_STATES = re.compile(r"Button (\S+?)@\S* has (\d+) buttons with states")
_BUTTON = re.compile(r"Button (\S+?)@\S*, number (\d+) was just (?:pressed|released)")
_DIAL = re.compile(r"Dial (\S+?)@\S*, number (\d+) was moved by")


def reports(text: str) -> tuple[set[Report], dict[Report, set[str]]]:
    """What `vrpn_print_devices` printed, as (device, sensor, kind) and each one's printed
    values: tracker `pos`/`vel`/`acc` of a sensor, `analog N` (N channels), `button states N`,
    `button` (a change of button n) and `dial` (dial n moved)."""
    found: set[Report] = set()
    values: dict[Report, set[str]] = {}
    lines = text.splitlines()
    for line, after in zip(lines, [*lines[1:], ""], strict=True):
        report: Report | None = None
        if (m := _TRACKER.match(line)) and (n := _MOTION.match(after)):
            report = (m[1], int(m[2]), n[1])
        elif (m := _ANALOG.match(line)) and (n := _CHANNELS.match(after)):
            report = (m[1], None, f"analog {n[1]}")
        elif m := _STATES.match(line):
            report, after = (m[1], None, f"button states {m[2]}"), line.split(": ", 1)[-1]
        elif m := _BUTTON.match(line):
            report, after = (m[1], int(m[2]), "button"), line
        elif m := _DIAL.match(line):
            report, after = (m[1], int(m[2]), "dial"), line.rsplit(" ", 1)[-1]
        if report is not None:
            found.add(report)
            values.setdefault(report, set()).add(after.strip().replace("-0.00", " 0.00"))
    return found, values


async def print_devices(names: list[str], seconds: float) -> str:
    """Run the mainline client on `names` for `seconds`, then SIGINT it (its own way out)."""
    client = await asyncio.create_subprocess_exec(
        "stdbuf",
        "-oL",
        str(PRINT_DEVICES),
        *names,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        await asyncio.sleep(seconds)
    finally:
        client.send_signal(signal.SIGINT)
        try:
            out = (await asyncio.wait_for(client.communicate(), 10))[0]
        except TimeoutError:
            client.kill()
            out = (await client.communicate())[0]
    return out.decode(errors="replace")


# -- our client, their server ------------------------------------------------------------------


@needs_server
@pytest.mark.parametrize("scheme", ["vrpn", "vrpn+tcp"])
async def test_our_client_reads_the_mainline_server(scheme: str, tmp_path: Path) -> None:
    config = tmp_path / "vrpn.cfg"
    config.write_text(
        "vrpn_Tracker_Spin\tTracker0\t2\t100.0  0.0 0.0 1.0  0.5\n"
        "vrpn_Button_Example\tButton0\t2\t2.0\n"
        "vrpn_Dial_Example\tDial0\t2\t2.0\t10.0\n"
    )
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        str(SERVER),
        "-f",
        str(config),
        "-millisleep",
        "1",
        str(port),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    world = World()
    source = VrpnSource(parse_endpoint(f"{scheme}://Tracker0,Button0,Dial0@127.0.0.1:{port}"))
    await asyncio.sleep(0.5)
    task = await started(source, world)
    try:
        table = world.table(source.name)
        await wait_for(lambda: {"Tracker0/0", "Tracker0/1", "Button0", "Dial0"} <= set(table.ids))
        await wait_for(lambda: source.stats.messages_in > 200)
        orientation = world.device(source.name, "Tracker0/1").orientation
        assert orientation is not None and abs(sum(q * q for q in orientation) - 1) < 1e-9
        assert source.link is not None and source.link.session is not None
        assert (source.link.session.peer_udp is not None) == (scheme == "vrpn")
        assert source.stats.dropped == 0
    finally:
        await stop(task)
        server.terminate()
        await server.wait()


# -- their client, our server -------------------------------------------------------------------


@needs_client
@pytest.mark.parametrize("udp", [True, False])
async def test_mainline_client_prints_our_simulator(udp: bool) -> None:
    sim = open_sim(SimOptions(port=0, rate=20, count=2))
    task = await started(sim)
    port = sim.address[1]  # type: ignore[index]
    where = f"127.0.0.1:{port}" if udp else f"tcp://127.0.0.1:{port}"
    names = [f"{device}@{where}" for device in ("Tracker0", "Analog0", "Button0", "Dial0")]
    try:
        out = await print_devices(names, 2.5)
    finally:
        await stop(task)
    assert "sensor 1:" in out and "pos (" in out and "vel (" in out
    assert "(4 chans)" in out and "has 2 buttons" in out and "was moved by  0.25" in out
    for bad in ("arning", "rror", "No response", "flatlined"):
        assert bad not in out


# -- a relay of the mainline server, read by the mainline client --------------------------------

RELAYED = ("Tracker0", "Button0", "Dial0", "Jsonnet")


async def _json_feeder(port: int) -> None:
    """Drives the server's vrpn_Tracker_JsonNet `Jsonnet` (tracker sensor 1, analog channel
    1, button 3) with JSON datagrams, as its Android widgets do."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        k = 0
        while True:
            for message in (
                {"type": 1, "id": 1, "pos": [0.1, 0.2, 0.3], "quat": [0.0, 0.0, 0.6, 0.8]},
                {"type": 3, "num": 1, "data": 0.25 * (k % 4)},
                {"type": 2, "button": 3, "state": k % 2 == 0},
            ):
                sock.sendto(json.dumps(message).encode(), ("127.0.0.1", port))
                await asyncio.sleep(0.05)
            k += 1


async def _listening_server(tmp_path: Path) -> tuple[int, int, asyncio.subprocess.Process]:
    """The relay test's mainline server, (its port, its JsonNet port, the process), once it
    listens. A free port is only free when it is looked at: CI once had a live server its
    client could not reach for 60 s (no connection ever made), so a server that does not
    listen within 10 s is started again on other ports."""
    for _ in range(3):
        port, json_port = free_port(), free_udp_port()
        config = tmp_path / "vrpn.cfg"
        config.write_text(
            "vrpn_Tracker_NULL\tTracker0\t2\t30.0\n"
            "vrpn_Button_Example\tButton0\t2\t2.0\n"
            "vrpn_Dial_Example\tDial0\t2\t2.0\t10.0\n"
            f"vrpn_Tracker_JsonNet\tJsonnet\t{json_port}\n"
        )
        server = await asyncio.create_subprocess_exec(
            str(SERVER), "-f", str(config), "-NIC", "127.0.0.1", str(port),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        with contextlib.suppress(AssertionError):
            await until(lambda port=port: _listens(port), "vrpn_server listens", 10.0)
            return port, json_port, server
        server.terminate()
        await server.wait()
    raise AssertionError("vrpn_server never listened on a free port")


def _listens(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@needs_server
@needs_client
@pytest.mark.parametrize("relay_mode", ["tcp", "udp"])
async def test_mainline_client_sees_a_relay_as_the_server_itself(
    relay_mode: str, tmp_path: Path
) -> None:
    """`bridge vrpn://… --to vrpn://…` of a real vrpn_server (a NULL tracker of 2 sensors:
    pose, velocity and acceleration; example buttons and dials; a JsonNet device with a
    tracker, 128 analog channels and 256 buttons): the mainline client prints the same
    devices, sensors and report kinds through the relay as from the server, the tracker
    values alike, and analog values the server sent."""
    port, json_port, server = await _listening_server(tmp_path)
    feeder = asyncio.create_task(_json_feeder(json_port))
    gateway = Gateway()
    source = open_url(f"vrpn+tcp://{','.join(RELAYED)}@127.0.0.1:{port}?retry=0.2")
    sink = open_sink("vrpn://127.0.0.1:0")
    assert isinstance(sink, VrpnSink)
    gateway.add(source, sink)
    running = asyncio.create_task(gateway.run())
    try:
        wanted = {"Tracker0/0", "Tracker0/1", "Button0", "Dial0", "Jsonnet", "Jsonnet/1"}
        await until(
            lambda: wanted <= set(gateway.world.table(source.name).ids),
            lambda: (
                f"the relay's world has every device of the server (missing: "
                f"{sorted(wanted - set(gateway.world.table(source.name).ids))}; the source's "
                f"connections: {source.connections}; vrpn_server exit status: {server.returncode}; "
                f"gateway failures: {gateway.failures}; its run ended: {running.done()})"
            ),
        )
        assert sink.address is not None
        relay = f"tcp://127.0.0.1:{sink.address[1]}"
        if relay_mode == "udp":
            relay = f"127.0.0.1:{sink.address[1]}"
        direct_out, relay_out = await asyncio.gather(
            print_devices([f"{name}@tcp://127.0.0.1:{port}" for name in RELAYED], 4.0),
            print_devices([f"{name}@{relay}" for name in RELAYED], 4.0),
        )
    finally:
        feeder.cancel()
        gateway.stop()
        await asyncio.gather(running, feeder, return_exceptions=True)
        server.terminate()
        await server.wait()
    direct, direct_values = reports(direct_out)
    relayed, relay_values = reports(relay_out)
    assert {(d, s, k) for d, s, k in direct if d == "Tracker0"} == {
        ("Tracker0", sensor, kind) for sensor in (0, 1) for kind in ("pos", "vel", "acc")
    }
    assert ("Jsonnet", 1, "pos") in direct and ("Jsonnet", None, "analog 128") in direct
    assert ("Jsonnet", None, "button states 256") in direct and ("Jsonnet", 3, "button") in direct
    assert ("Dial0", 1, "dial") in direct and ("Button0", 1, "button") in direct
    assert relayed == direct
    for report in relayed:
        if report[0] == "Tracker0" or report[2].startswith("analog") or report[2] == "pos":
            assert relay_values[report] <= direct_values[report], report
    for bad in ("No response", "flatlined", "rror"):
        assert bad not in relay_out


# -- a log that robowire wrote, played by the mainline client -----------------------------------


@needs_client
async def test_mainline_client_plays_a_recorded_log_with_every_pose(tmp_path: Path) -> None:
    """`record vrpn://Tracker0,Analog0,Button0,Dial0@… -o run.vrpn`, then
    `vrpn_print_devices Tracker0@file://run.vrpn …`: every pose in the file is printed, every
    kind of report comes out as itself, and no warning."""
    sim = open_sim(SimOptions(port=0, rate=50, count=2))
    sims = await started(sim)
    names = ("Tracker0", "Analog0", "Button0", "Dial0")
    path = tmp_path / "run.vrpn"
    gateway = Gateway()
    source = open_url(f"vrpn://{','.join(names)}@127.0.0.1:{sim.address[1]}")  # type: ignore[index]
    log_sink = VrpnLogSink(str(path))
    gateway.add(source, log_sink)
    try:
        await gateway.run(2.5)
    finally:
        await stop(sims)
    poses = [e for e in decode_log(str(path)) if e.get("type") == "vrpn_Tracker Pos_Quat"]
    assert len(poses) > 100
    out = await print_devices([f"{name}@file://{path}" for name in names], 5.0)
    played, _ = reports(out)
    assert sum(1 for line in out.splitlines() if line.startswith("     pos (")) == len(poses)
    assert {("Tracker0", s, k) for s in (0, 1) for k in ("pos", "vel", "acc")} <= played
    assert ("Analog0", None, "analog 4") in played
    assert ("Button0", None, "button states 2") in played and ("Dial0", 0, "dial") in played
    for bad in ("No response", "flatlined", "rror"):
        assert bad not in out
