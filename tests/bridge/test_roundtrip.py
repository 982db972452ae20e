"""Same-protocol relays are transparent (issue 19 items 1 and 5): for UgCS, VRSP, SpyGlass and
XRP, a consumer reads the simulator directly and through `robowire bridge P://A --to P://B` (a
real CLI process), and must see the same device identities, message kinds and values, within
the wire's precision. The consumer is robowire's own client of the protocol, except for XRP,
where it is WPILib itself (robotpy-xrp)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from robowire.protocols.spyglass.codec import Packet, SyntaxType, next_packet, syntax_type_of
from robowire.protocols.ugcs.client import UcsClient
from robowire.protocols.ugcs.session_ucs import UcsDevice
from robowire.world import Device, World
from support import Process

from .test_bridge_cli import far_end, free_udp_port, port_of, robowire

pytestmark = pytest.mark.timeout(180)


# -- UgCS: robowire's UCS client of the VSM simulator and of the relay ---------------------------


def registration(device: UcsDevice) -> dict[str, object]:
    """What an operator sees of a vehicle: its serial, its properties and the autopilot."""
    info = device.info
    controller = dict(info.subsystem_properties[0][1]) if info.subsystem_properties else {}
    return {"serial": device.label, **info.properties, **controller}


async def vehicles(port: int, count: int) -> dict[str, UcsDevice]:
    async with UcsClient("127.0.0.1", port) as ucs:
        await ucs.wait_for(
            lambda: len(ucs.devices) == count and all("latitude" in d.values for d in ucs.devices),
            60.0,
            f"{count} vehicles with a position",
        )
        return {d.label: d for d in ucs.devices}


def test_ugcs_relay_keeps_serials_properties_and_positions() -> None:
    with robowire("sim", "ugcs", "--port", "0", "--count", "3") as sim:
        sim_port = port_of(sim)
        with robowire(
            "bridge", f"ugcs://127.0.0.1:{sim_port}", "--to", "ugcs://127.0.0.1:0"
        ) as bridge:
            port = port_of(bridge)
            direct = asyncio.run(vehicles(sim_port, 3))
            relayed = asyncio.run(vehicles(port, 3))
    assert sorted(direct) == ["SIM-0001", "SIM-0002", "SIM-0003"]
    assert sorted(relayed) == sorted(direct)
    for serial, vehicle in direct.items():
        assert registration(relayed[serial]) == registration(vehicle)
        for name in ("latitude", "longitude"):  # the vehicles stand still: same fix
            got, want = relayed[serial].values[name], vehicle.values[name]
            assert isinstance(got, float) and isinstance(want, float)
            assert math.isclose(got, want, abs_tol=1e-9), name


# -- VRSP: robowire's VRSP receiver of the light-show simulator, then of the relay ---------------


def show(url: str, drones: int) -> World:
    """What a VRSP receiver at `url` makes of the show: every drone with its heading."""
    return far_end(
        url,
        lambda w: (
            len(w) == drones and all("heading" in d.telemetry and d.attributes for d in w.devices())
        ),
    )


def units_of(device: Device) -> dict[str, str]:
    """Telemetry names and units (a pyro cue's `_since` only while it burns: left out)."""
    return {k: u for k, (_, u) in device.telemetry.items() if not k.endswith("_since")}


def test_vrsp_relay_keeps_drone_ids_definitions_heading_and_payloads() -> None:
    first, second = free_udp_port(), free_udp_port()
    sim = ("sim", "vrsp", "--drones", "20", "--to", f"127.0.0.1:{first}")
    with robowire(*sim):
        direct = show(f"vrsp://127.0.0.1:{first}", 20)
    with (
        robowire("bridge", f"vrsp://127.0.0.1:{first}", "--to", f"vrsp://127.0.0.1:{second}"),
        robowire(*sim),
    ):
        relayed = show(f"vrsp://127.0.0.1:{second}", 20)
    want = {d.device_id: d for d in direct.devices()}
    got = {d.device_id: d for d in relayed.devices()}
    assert sorted(want, key=int) == [str(n) for n in range(1, 21)]  # the show numbers 1..20
    assert sorted(got, key=int) == sorted(want, key=int)
    for drone, d in want.items():  # the show moves on between the two reads: same kinds
        o = got[drone]
        assert o.attributes == d.attributes  # definition, model, lumens, payload definitions
        assert units_of(o) == units_of(d)  # heading, LED, each payload's light, cue, gimbal
        assert o.orientation is not None and o.geodetic is not None


# -- SpyGlass: a viewer's packet stream from the simulator and from the relay, side by side ------


async def packets(port: int, seconds: float) -> tuple[list[Packet], float]:
    """Every packet a SpyGlass viewer connected to `port` reads in `seconds`, and the wall
    time its first bytes came (the server had taken it on by then)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    buffer, out = bytearray(), []
    first = math.inf
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    try:
        while (left := end - loop.time()) > 0:
            try:
                buffer += await asyncio.wait_for(reader.read(65536), left)
            except TimeoutError:
                break
            first = min(first, time.time())
            offset = 0
            while (found := next_packet(buffer, offset)) is not None:
                out.append(found[0])
                offset += found[1]
            del buffer[:offset]
    finally:
        writer.close()
    return out, first


def same_kind(packet: Packet) -> tuple[object, ...]:
    """What a newer packet supersedes: the node's packet of this class and semantic type (to
    the same node, for a link), as the relay's world keeps one of each."""
    return packet.sender, type(packet), packet.semantic_type, getattr(packet, "destination", 0)


def test_spyglass_relay_sends_the_packets_the_network_sent() -> None:
    with robowire("sim", "spyglass", "--count", "8", "--rate", "4", "--port", "0") as sim:
        sim_port = port_of(sim)
        with robowire(
            "bridge", f"spyglass://127.0.0.1:{sim_port}", "--to", "spyglass://127.0.0.1:0",
            "--status-port", "0",
        ) as bridge:  # fmt: skip
            assert bridge.stderr is not None
            status = re.search(r"status on (http://\S+)", bridge.stderr.readline())
            assert status, "no status line"
            port = port_of(bridge)

            async def both() -> tuple[tuple[list[Packet], float], tuple[list[Packet], float]]:
                return await asyncio.gather(packets(sim_port, 6.0), packets(port, 6.0))

            (direct, _), (relayed, relay_took_us_on) = asyncio.run(both())
            with urllib.request.urlopen(status.group(1), timeout=30) as answer:
                services = json.load(answer)["services"]
    times = [p.time for p in relayed]
    assert times == sorted(times)  # never backwards
    # the relay's first packets are the latest state it held when the viewer came; after
    # that (the relay may take the viewer on later than the simulator did, on a loaded
    # machine), within the time both viewers were reading, the very same packets
    low = max(direct[0].time, relay_took_us_on) + 0.5
    high = min(direct[-1].time, relayed[-1].time) - 0.5
    want = [p for p in direct if low <= p.time <= high]
    got = [p for p in relayed if low <= p.time <= high]
    assert len(want) > 50
    kinds = {(type(p).__name__, syntax_type_of(p), p.semantic_type) for p in want}
    assert ("DataPacket", SyntaxType.UINT8_LIST, 20) in kinds
    assert ("NeighborhoodPacket", SyntaxType.UINT16_LIST, 10) in kinds
    # none changed or made up, none twice; and each packet the network sent went out, or,
    # when the relay fell behind (a newer packet of the same came before it sent this one),
    # was shed, counted, for the newer one, which went out
    missing = [p for p in want if p not in got]
    extra = [p for p in got if p not in want]
    assert sorted(got, key=repr) == sorted((p for p in want if p in got), key=repr), extra
    newest: dict[tuple[object, ...], float] = {}
    for p in relayed:
        if p in direct:  # (the network's, if after `high` too)
            newest[same_kind(p)] = p.time
    assert all(newest.get(same_kind(p), -math.inf) > p.time for p in missing), missing
    (relay,) = [s for s in services if s["role"] == "sink"]
    assert relay["shed"] >= len(missing), (relay, missing)


# -- XRP: WPILib (robotpy-xrp's halsim_xrp) reads the simulated robot directly and through the relay


WPILIB = Path(__file__).resolve().parents[1] / "xrp" / "robot" / "relay.py"
needs_wpilib = pytest.mark.skipif(
    importlib.util.find_spec("xrp") is None or importlib.util.find_spec("robotpy") is None,
    reason="robotpy-xrp is not installed",
)


def wpilib_program(port: int, mode: str, workdir: Path) -> dict[str, Any]:
    """Runs tests/xrp/robot/relay.py (`drive` or `read`) against the XRP robot on `port` with
    RobotPy's `run-xrp`, and returns the readings it printed."""
    workdir.mkdir()
    shutil.copy(WPILIB, workdir / "robot.py")
    done = subprocess.run(
        [sys.executable, "-m", "robotpy", "--main", "robot.py", "run-xrp", "--nogui",
         "--host", "127.0.0.1", "--port", str(port)],
        cwd=workdir, env={**os.environ, "ROBOWIRE_ROBOT_MODE": mode},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("READINGS ")]
    assert lines, done.stdout[-3000:] + done.stderr[-3000:]
    readings: dict[str, Any] = json.loads(lines[0].removeprefix("READINGS "))
    return readings


@needs_wpilib
@pytest.mark.interop
def test_xrp_relay_gives_wpilib_the_robots_readings_and_drives_it(tmp_path: Path) -> None:
    # lag=0: the wheels stop when the motors do, so the robot is still once the program stops
    # and the readings taken one after the other are of one and the same state
    sim = Process("sim", "xrp", "--port", "0", "--set", "lag=0")
    bridge: Process | None = None
    try:
        robot = int(sim.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1))
        bridge = Process("bridge", f"xrp://127.0.0.1:{robot}", "--to", "xrp://127.0.0.1:0")
        relay = int(bridge.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1))
        driven = wpilib_program(relay, "drive", tmp_path / "drive")  # drives robot A via B
        through = wpilib_program(relay, "read", tmp_path / "through")
        bridge.stop()
        bridge = None
        direct = wpilib_program(robot, "read", tmp_path / "direct")
    finally:
        if bridge is not None:
            bridge.stop()
        sim.stop()
    # the program drove the simulated robot through the relay: straight, then a left turn
    left, right = driven["counts"][:2]
    assert driven["enabled"] and right > left > 100
    assert 120 < math.degrees(driven["gyro_angle"][2]) < 180
    assert direct["counts"] == driven["counts"]
    assert direct["gyro_angle"] == pytest.approx(driven["gyro_angle"], rel=1e-6)
    # read through the relay, WPILib sees what it sees reading the robot: every value the
    # same (counts, the encoders' periods as rates, gyro, accelerometer, line sensors,
    # rangefinder, button: float32 on the wire both ways, so not even a rounding apart)
    assert not direct["enabled"] and direct["accel"] == [0.0, 0.0, 1.0]
    assert 0 < direct["range"] < 4
    assert through == direct
