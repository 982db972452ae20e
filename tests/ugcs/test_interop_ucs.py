"""Our UCS side against our VSM (`UgcsSim`: the VSM session with the simulated fleet) through
real sockets on 127.0.0.1: a mission flown to completion, the source into the world, the CLI.

What the vehicle must do comes from the mission we wrote (its waypoints) and the fact sheet
(ACKs, the item map, `current_command`), never from the code under test. No assertion is on
wall-clock time: waits are bounded only so that a broken peer fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from robowire.addresses import parse_endpoint
from robowire.errors import TransportError
from robowire.protocols.ugcs.client import Mission, UcsClient
from robowire.protocols.ugcs.codec import defs
from robowire.protocols.ugcs.events import MissionProgress
from robowire.protocols.ugcs.services import UcsSource, UgcsSim
from robowire.service import SimOptions
from robowire.world import World

pytestmark = pytest.mark.timeout(120)

ORIGIN = (56.9496, 24.1052, 10.0)  # the simulator's default origin (lat, lon deg; alt m)
FAST = {"climb_rate": "6", "descent_rate": "6", "cruise_speed": "8"}
M_PER_DEG_LAT = 111_320.0


def offset(north: float, east: float) -> tuple[float, float]:
    """The point `north`, `east` metres from the origin, in degrees."""
    lat = ORIGIN[0] + north / M_PER_DEG_LAT
    lon = ORIGIN[1] + east / (M_PER_DEG_LAT * math.cos(math.radians(ORIGIN[0])))
    return lat, lon


def distance(lat: float, lon: float, lat2: float, lon2: float) -> float:
    """Metres between two points in degrees (equirectangular: fine over tens of metres)."""
    north = (lat2 - lat) * M_PER_DEG_LAT
    east = (lon2 - lon) * M_PER_DEG_LAT * math.cos(math.radians(lat))
    return math.hypot(north, east)


WAYPOINTS = [offset(0.0, 20.0), offset(20.0, 20.0), offset(20.0, 0.0)]
MISSION = {
    "attributes": {"name": "test", "altitude_origin": ORIGIN[2]},
    "waypoints": [
        {"command": "takeoff_mission", "altitude_amsl": ORIGIN[2] + 8, "climb_rate": 6},
        *(
            {"latitude": lat, "longitude": lon, "altitude": ORIGIN[2] + 8, "speed": 8,
             "acceptance_radius": 1.5}
            for lat, lon in WAYPOINTS
        ),
        {"command": "land_mission", "descent_rate": 6},
    ],
}  # fmt: skip


@contextlib.asynccontextmanager
async def vsm(count: int = 2, rate: float = 10.0) -> AsyncIterator[UgcsSim]:
    sim = UgcsSim(SimOptions(port=0, count=count, rate=rate, options=dict(FAST)))
    task = asyncio.create_task(sim.run(World()))
    await asyncio.wait_for(sim.ready.wait(), 10)
    try:
        yield sim
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def port_of(sim: UgcsSim) -> int:
    assert sim.address is not None
    return sim.address[1]


async def test_a_mission_is_flown_to_completion() -> None:
    async with vsm() as sim, UcsClient("127.0.0.1", port_of(sim)) as ucs:
        assert ucs.peer is not None and ucs.peer.peer_type == defs.PEER_TYPE_VSM
        drone = await ucs.wait_for_device("SIM-0001")
        assert drone.info.device_id != 0
        items: list[int | None] = []
        track: list[tuple[float, float]] = []

        def watch(events: list[Any]) -> None:
            items.extend(e.item for e in events if isinstance(e, MissionProgress))
            lat, lon = drone.values.get("latitude"), drone.values.get("longitude")
            if isinstance(lat, float) and isinstance(lon, float):
                track.append((math.degrees(lat), math.degrees(lon)))

        ucs.listeners.append(watch)
        await ucs.wait_for(lambda: drone.values.get("gps_fix") == defs.GPS_FIX_TYPE_3D, 30,
                           "no 3D fix")  # fmt: skip
        mission = Mission.from_json(MISSION)
        upload = await ucs.upload_mission("SIM-0001", mission)
        assert upload.ok, upload
        assert upload.mission_id is not None
        # the map covers every item of what we sent (takeoff, set_speed, 3 moves, land)
        assert sorted(upload.mission_map.values()) == list(range(len(mission.items)))
        assert (await ucs.command("SIM-0001", "arm")).ok
        assert (await ucs.command("SIM-0001", "auto")).ok
        await ucs.wait_for(lambda: drone.values.get("current_mission_id") == upload.mission_id,
                           10, "the mission is not running")  # fmt: skip
        await ucs.wait_for(lambda: drone.values.get("is_armed") is False, 90,
                           "the vehicle did not land")  # fmt: skip
        # current_command followed the map: items in order, each move among them
        seen = [i for i in items if i is not None]
        assert seen == sorted(seen)
        moves = [i for i, (name, _) in enumerate(mission.items) if name == "move"]
        assert set(moves) <= set(seen)
        # the vehicle passed each waypoint (within its acceptance radius and one 200 ms step)
        for lat, lon in WAYPOINTS:
            closest = min(distance(lat, lon, *p) for p in track)
            assert closest < 1.5 + 8 * 0.2 + 0.5, (lat, lon, closest)
        await ucs.wait_for(lambda: drone.values.get("altitude_agl") == pytest.approx(0, abs=0.1),
                           10, "not on the ground")  # fmt: skip


async def test_a_refusal_and_a_silent_unknown_device() -> None:
    async with vsm(count=1) as sim, UcsClient("127.0.0.1", port_of(sim)) as ucs:
        await ucs.wait_for_device("SIM-0001")
        refused = await ucs.command("SIM-0001", "land_command")  # on the ground
        assert refused.code == defs.STATUS_FAILED and refused.text
        with pytest.raises(TransportError, match="no reply"):
            await ucs.command_id(4242, 1, timeout=1.0)  # the SDK never answers: we time out
        assert (await ucs.command("SIM-0001", "disarm")).code in (
            defs.STATUS_OK, defs.STATUS_FAILED,
        )  # fmt: skip


async def test_the_source_puts_the_fleet_in_the_world() -> None:
    async with vsm(count=3, rate=10) as sim:
        world = World()
        source = UcsSource(parse_endpoint(f"ugcs://127.0.0.1:{port_of(sim)}"))
        task = asyncio.create_task(source.run(world))
        try:
            for _ in range(200):
                table = world.tables.get(source.name)
                if (
                    table is not None
                    and len(table) == 3
                    and all(d.geodetic is not None for d in vehicles(world, source.name))
                ):
                    break
                await asyncio.sleep(0.05)
            devices = {d.device_id: d for d in world.devices(source.name)}
            assert sorted(devices) == ["SIM-0001", "SIM-0002", "SIM-0003"]
            first = devices["SIM-0001"]
            assert first.kind == "ugcs"
            assert first.geodetic is not None
            assert first.geodetic[0] == pytest.approx(ORIGIN[0], abs=0.001)  # degrees
            assert first.attributes["autopilot_type"] == "emulator"
            assert first.telemetry["remaining_power_level"][1] == "ratio"
            assert first.position is not None  # ENU from the first fix
            assert math.hypot(first.position[0], first.position[1]) < 50
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


# -- the CLI, as processes -------------------------------------------------------------------------

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def robowire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "robowire.cli", *args],
        env=ENV, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def sim_process() -> Any:
    """`robowire sim ugcs` on a free port; yields HOST:PORT."""
    process = subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", "sim", "ugcs", "--port", "0", "--count", "2",
         "--duration", "60"],
        env=ENV, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        line = process.stderr.readline()
        assert "listening on" in line, line
        yield line.split("listening on ", 1)[1].split(";", 1)[0].strip()
    finally:
        process.terminate()
        process.wait(10)


def test_cli_command_devices_and_mission(sim_process: str, tmp_path: Path) -> None:
    listed = robowire("ugcs", "devices", "--host", sim_process, "--json")
    assert listed.returncode == 0, listed.stderr
    names = [json.loads(line)["device"] for line in listed.stdout.splitlines()]
    assert names == ["SIM-0001", "SIM-0002"]
    armed = robowire("ugcs", "command", "--host", sim_process, "--device", "SIM-0002", "arm")
    # a fresh vehicle may still be without a 3D fix: then the VSM refuses (exit 1, its reason)
    assert armed.stdout.startswith("arm: STATUS_"), armed.stdout + armed.stderr
    assert (armed.returncode == 0) == armed.stdout.startswith("arm: STATUS_OK")
    path = tmp_path / "mission.json"
    path.write_text(json.dumps(MISSION))
    uploaded = robowire("ugcs", "mission", "--host", sim_process, "--device", "SIM-0001",
                        str(path))  # fmt: skip
    assert uploaded.returncode == 0, uploaded.stderr
    assert uploaded.stdout.startswith("mission_upload: STATUS_OK (mission id ")


def test_cli_errors_are_one_line(sim_process: str, tmp_path: Path) -> None:
    nobody = robowire("ugcs", "command", "--host", sim_process, "--device", "NOPE", "arm",
                      "--timeout", "1")  # fmt: skip
    assert nobody.returncode != 0
    assert len(nobody.stderr.splitlines()) == 1 and "NOPE" in nobody.stderr
    unknown = robowire("ugcs", "command", "--host", sim_process, "--device", "SIM-0001", "fly")
    assert unknown.returncode != 0 and "no command 'fly'" in unknown.stderr
    assert len(unknown.stderr.splitlines()) == 1
    bad = tmp_path / "bad.json"
    bad.write_text('{"waypoints": []}')
    mission = robowire("ugcs", "mission", "--host", sim_process, "--device", "SIM-0001", str(bad))
    assert mission.returncode != 0 and "waypoints" in mission.stderr
    closed = robowire("ugcs", "devices", "--host", "127.0.0.1:1", "--timeout", "1")
    assert closed.returncode != 0 and len(closed.stderr.splitlines()) == 1
    assert "cannot connect to 127.0.0.1:1" in closed.stderr


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ugcs://127.0.0.1:1?mode=bogus", "mode must be connect or listen"),
        ("ugcs://127.0.0.1:1?origin=1,2,3,4", "origin must be LAT,LON[,ALT]"),
        ("ugcs://127.0.0.1:1?origin=95,0", "origin must be LAT,LON[,ALT]"),
        ("ugcs://127.0.0.1:1?foo=1", "unknown option 'foo'"),
    ],
)
def test_cli_listen_options_are_checked(url: str, message: str) -> None:
    run = robowire("listen", url, "--duration", "1")
    assert run.returncode != 0
    assert len(run.stderr.splitlines()) == 1 and message in run.stderr, run.stderr


def test_cli_help_has_examples() -> None:
    for command in ("command", "mission", "devices"):
        run = robowire("ugcs", command, "--help")
        assert run.returncode == 0 and "Example" in run.stdout


# -- reverse mode: VSMs dial the source ------------------------------------------------------------


async def listening_source(world: World) -> tuple[UcsSource, asyncio.Task[None]]:
    source = UcsSource(parse_endpoint("ugcs://127.0.0.1:0?mode=listen"))
    task = asyncio.create_task(source.run(world))
    await asyncio.wait_for(source.ready.wait(), 10)
    return source, task


def vehicles(world: World, source: str) -> list[Any]:
    return list(world.devices(source)) if source in world.tables else []


async def until(condition: Any, what: str, seconds: float = 30.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(what)


async def test_a_reverse_mode_vsm_dials_the_listening_source() -> None:
    world = World()
    source, task = await listening_source(world)
    assert source.address is not None
    sim = UgcsSim(SimOptions(count=2, rate=10, target=f"127.0.0.1:{source.address[1]}"))
    sim_task = asyncio.create_task(sim.run(World()))
    try:
        await until(lambda: len(vehicles(world, source.name)) == 2, "no vehicles")
        await until(
            lambda: all(d.geodetic is not None for d in vehicles(world, source.name)), "no fix"
        )
        assert sorted(d.device_id for d in vehicles(world, source.name)) == ["SIM-0001", "SIM-0002"]
    finally:
        for t in (sim_task, task):
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t


class RawVsm:
    """A VSM written by hand on a socket: Register_peer with a given peer_id, one device."""

    def __init__(self, peer_id: int, serial: str) -> None:
        from robowire.protocols.ugcs.device import DeviceSpec, FieldSpec, IdCounter, SubsystemSpec
        from robowire.protocols.ugcs.device import register as register_device

        spec = DeviceSpec(
            properties={"vehicle_serial": (serial, defs.FIELD_SEMANTIC_STRING)},
            subsystems=(
                SubsystemSpec(
                    type=defs.SUBSYSTEM_TYPE_FLIGHT_CONTROLLER,
                    telemetry=(FieldSpec("altitude_agl", defs.FIELD_SEMANTIC_ALTITUDE_AGL),),
                ),
            ),
        )
        self.info = register_device(spec, IdCounter(), 1_700_000_000_000)
        self.peer_id = peer_id

    async def dial(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        from robowire.protocols.ugcs.codec import encode, pb

        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        peer = pb.Vsm_message(device_id=0)
        peer.register_peer.peer_id = self.peer_id
        peer.register_peer.peer_type = defs.PEER_TYPE_VSM
        registration = self.info.to_message()
        registration.message_id = 1
        registration.response_required = True
        writer.write(encode(peer) + encode(registration))
        await writer.drain()
        return reader, writer

    def altitude(self, value: float) -> bytes:
        from robowire.protocols.ugcs.codec import encode, pb, write_value

        msg = pb.Vsm_message(device_id=self.info.device_id)
        tf = msg.device_status.telemetry_fields.add(
            field_id=self.info.fields[0].field_id, ms_since_epoch=1
        )
        write_value(tf.value, value)
        return encode(msg)


async def test_one_vsm_on_two_connections_feeds_the_world_once() -> None:
    world = World()
    source, task = await listening_source(world)
    assert source.address is not None
    vsm_a = RawVsm(4711, "SN-A")
    try:
        _, old = await vsm_a.dial(source.address[1])
        await until(lambda: len(vehicles(world, source.name)) == 1, "not registered")
        _, new = await vsm_a.dial(source.address[1])  # the same VSM instance again
        await until(lambda: len(source.sessions) == 2, "second connection not up")
        await asyncio.sleep(0.2)
        new.write(vsm_a.altitude(5.0))
        await until(lambda: world.device(source.name, "SN-A").telemetry.get("altitude_agl")
                    == (5.0, "m"), "newest connection not applied")  # fmt: skip
        old.write(vsm_a.altitude(99.0))  # the older connection is on standby: not applied
        await asyncio.sleep(0.3)
        assert world.device(source.name, "SN-A").telemetry["altitude_agl"] == (5.0, "m")
        new.close()  # the newest goes: the older one takes over
        await until(lambda: len(source.sessions) == 1, "close not seen")
        old.write(vsm_a.altitude(7.0))
        await until(lambda: world.device(source.name, "SN-A").telemetry.get("altitude_agl")
                    == (7.0, "m"), "the older connection did not take over")  # fmt: skip
        old.close()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_source_reconnects_when_the_vsm_comes_back() -> None:
    world = World()
    async with vsm(count=1) as first:
        port = port_of(first)
        source = UcsSource(parse_endpoint(f"ugcs://127.0.0.1:{port}"))
        source.retry = 0.2
        task = asyncio.create_task(source.run(world))
        await until(lambda: len(vehicles(world, source.name)) == 1, "no vehicle")
    try:
        await until(
            lambda: world.device(source.name, "SIM-0001").attributes["registered"] is False,
            "the lost connection did not unregister the vehicle",
        )
        again = UgcsSim(SimOptions(port=port, count=1, rate=10, options=dict(FAST)))
        again_task = asyncio.create_task(again.run(World()))
        try:
            await until(
                lambda: world.device(source.name, "SIM-0001").attributes["registered"] is True,
                "not registered again after the VSM came back",
            )
            assert source.connections == 2
        finally:
            again_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await again_task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_command_fails_at_once_when_the_vsm_hangs_up() -> None:
    from robowire.protocols.ugcs.codec import FrameReader, encode, pb

    vsm_a = RawVsm(99, "SN-H")  # one device, command-less: the command goes by raw id

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = pb.Vsm_message(device_id=0)
        peer.register_peer.peer_id = 99
        peer.register_peer.peer_type = defs.PEER_TYPE_VSM
        registration = vsm_a.info.to_message()
        registration.message_id = 1
        registration.response_required = True
        writer.write(encode(peer) + encode(registration))
        await writer.drain()
        frames = FrameReader()
        while True:  # our Register_peer, the ACK, then the command: hang up without a reply
            data = await reader.read(1000)
            messages, _ = frames.feed(data)
            if not data or any(m.device_commands for m in messages):
                break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with UcsClient("127.0.0.1", port) as ucs:
            await ucs.wait_for_device("SN-H")
            await asyncio.sleep(0.2)
            with pytest.raises(TransportError, match="closed the connection"):
                await asyncio.wait_for(ucs.command_id(vsm_a.info.device_id, 1, timeout=30), 10)
    finally:
        server.close()
