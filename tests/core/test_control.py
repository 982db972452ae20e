"""Control from the viewer: the Controller's rules, then real simulators on loopback driven
through real sources (XRP: drive, dead-man, disable; UgCS: arm, take off, mission, land)."""

from __future__ import annotations

import asyncio
import json
import math
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from robowire.addresses import parse_endpoint
from robowire.control import CommandSpec, CommandStatus, Controller, ParamSpec
from robowire.errors import TransportError
from robowire.protocols.ugcs import services as ugcs_services
from robowire.protocols.ugcs.events import CommandTimedOut, ResponseReceived
from robowire.protocols.ugcs.services import UcsSource, UgcsSim, reply_status
from robowire.protocols.xrp.services import XrpSim, XrpSource
from robowire.service import Service, SimOptions
from robowire.viewer.server import SUBPROTOCOL
from robowire.world import Device, World

pytestmark = pytest.mark.timeout(90)

FINAL = {"ok", "failed", "timeout", "refused"}


async def statuses(
    controller: Controller, source: str, device: str, command: str, **params: Any
) -> list[tuple[str, str]]:
    out = [
        (s.state, s.message) async for s in controller.run(source, device, command, dict(params))
    ]
    assert out, "a command always gets a status"
    assert out[-1][0] in FINAL and all(state not in FINAL for state, _ in out[:-1])
    return out


# -- the Controller's rules, with a stand-in source ------------------------------------------


class Toy:
    """A controllable source with one device and two commands."""

    def __init__(self, name: str = "toy") -> None:
        self.name = name
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.behaviour = "ok"

    COMMANDS = (
        CommandSpec(
            name="go",
            label="Go",
            params=(
                ParamSpec(name="speed", type="number", unit="m/s", default=1.0, maximum=5.0),
                ParamSpec(name="mode", type="string", choices=("slow", "fast")),
                ParamSpec(name="lights", type="bool"),
            ),
        ),
        CommandSpec(
            name="route",
            label="Route",
            params=(ParamSpec(name="waypoints", type="waypoints", required=True),),
        ),
    )

    def command_specs(self) -> Sequence[CommandSpec]:
        return self.COMMANDS

    def device_commands(self, device: str) -> Sequence[CommandSpec] | None:
        return self.COMMANDS if device == "d1" else None

    async def run_command(
        self, device: str, command: CommandSpec, params: Mapping[str, Any]
    ) -> AsyncIterator[CommandStatus]:
        self.calls.append((device, command.name, dict(params)))
        yield CommandStatus("sent", "sent")
        if self.behaviour == "raise":
            raise TransportError("toy: connection lost")
        if self.behaviour == "ok":
            yield CommandStatus("ok", "done")


class NotControllable(Service):
    async def run(self, world: World) -> None:
        pass


async def test_catalog_lists_only_controllable_sources() -> None:
    toy = Toy()
    controller = Controller(lambda: [NotControllable("other"), toy])
    catalog = controller.catalog()
    assert list(catalog) == ["toy"]
    assert [c["name"] for c in catalog["toy"]] == ["go", "route"]
    assert catalog["toy"][0]["label"] == "Go"
    assert catalog["toy"][0]["params"][0] == {
        "name": "speed",
        "type": "number",
        "unit": "m/s",
        "default": 1.0,
        "max": 5.0,
    }
    assert catalog["toy"][0]["params"][1]["choices"] == ["slow", "fast"]


async def test_unknown_source_device_command_are_refused_in_one_line() -> None:
    toy = Toy()
    controller = Controller(lambda: [toy])
    for args, words in (
        (("nope", "d1", "go"), "no source 'nope'"),
        (("toy", "d9", "go"), "no device 'd9'"),
        (("toy", "d1", "fly"), "no command 'fly'"),
    ):
        [(state, message)] = await statuses(controller, *args)
        assert state == "refused" and words in message and "\n" not in message
    assert toy.calls == []


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"speed": "fast"}, "speed"),
        ({"speed": 6}, "speed"),
        ({"speed": float("nan")}, "speed"),
        ({"speed": True}, "speed"),
        ({"speed": 10**400}, "speed"),
        ({"mode": "warp"}, "mode"),
        ({"lights": 1}, "lights"),
        ({"colour": "red"}, "colour"),
    ],
)
async def test_bad_parameter_is_refused_naming_it(params: dict[str, Any], named: str) -> None:
    toy = Toy()
    controller = Controller(lambda: [toy])
    [(state, message)] = await statuses(controller, "toy", "d1", "go", **params)
    assert state == "refused" and repr(named) in message
    assert toy.calls == []


async def test_waypoints_are_checked() -> None:
    toy = Toy()
    controller = Controller(lambda: [toy])
    for bad in ([], [[1, 2]], [[91, 0, 10]], [["a", 0, 1]], "here"):
        [(state, message)] = await statuses(controller, "toy", "d1", "route", waypoints=bad)
        assert state == "refused" and "'waypoints'" in message
    [(state, message)] = await statuses(controller, "toy", "d1", "route")
    assert state == "refused" and "'waypoints' is required" in message
    result = await statuses(controller, "toy", "d1", "route", waypoints=[[56.9, 24.1, 20]])
    assert result[-1][0] == "ok"
    assert toy.calls == [("d1", "route", {"waypoints": [(56.9, 24.1, 20.0)]})]


async def test_defaults_filled_and_statuses_passed_on() -> None:
    toy = Toy()
    controller = Controller(lambda: [toy])
    result = await statuses(controller, "toy", "d1", "go", mode="fast")
    assert result == [("sent", "sent"), ("ok", "done")]
    assert toy.calls == [("d1", "go", {"speed": 1.0, "mode": "fast"})]


async def test_a_command_always_ends_in_a_final_state() -> None:
    toy = Toy()
    controller = Controller(lambda: [toy])
    toy.behaviour = "silent"  # the source's statuses end without a final one
    result = await statuses(controller, "toy", "d1", "go")
    assert result[-1] == ("failed", "go: ended without a result")
    toy.behaviour = "raise"
    result = await statuses(controller, "toy", "d1", "go")
    assert result[-1] == ("failed", "go: toy: connection lost")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(command=st.sampled_from(["go", "route"]), params=JSON)
def test_any_json_params_get_one_final_status(command: str, params: Any) -> None:
    """Whatever a browser sends as params: one answer, refused (naming what is wrong) or
    passed on checked, never an exception."""
    toy = Toy()
    controller = Controller(lambda: [toy])

    async def run() -> list[CommandStatus]:
        return [s async for s in controller.run("toy", "d1", command, params)]

    result = asyncio.run(run())
    assert result[-1].final and all(not s.final for s in result[:-1])
    if result[-1].state == "refused":
        assert len(result) == 1 and toy.calls == [] and "\n" not in result[-1].message
    else:
        assert result[-1].state == "ok" and len(toy.calls) == 1


def test_vsm_replies_become_statuses() -> None:
    def reply(code: int, text: str = "", progress: float | None = None) -> ResponseReceived:
        return ResponseReceived(
            device_id=1, message_id=7, code=code, status=text, progress=progress
        )

    assert reply_status("arm", reply(0)) == CommandStatus("ok", "arm: done")  # STATUS_OK
    assert reply_status("arm", reply(1, "no 3D GPS fix")) == CommandStatus(  # STATUS_FAILED
        "failed", "arm: no 3D GPS fix"
    )
    assert reply_status("x", reply(2)) == CommandStatus(  # no text: the code's name
        "failed", "x: STATUS_INVALID_COMMAND"
    )
    assert reply_status("upload", reply(5, "uploading", 0.5)) == CommandStatus(  # IN_PROGRESS
        "in_progress", "upload: uploading 50%"
    )
    timed_out = CommandTimedOut(device_id=1, message_id=7, timeout=10.0)
    assert reply_status("land_command", timed_out) == CommandStatus(
        "timeout", "land_command: no reply from the VSM in 10 s"
    )


# -- live: simulators on loopback, real sources --------------------------------------------------


@asynccontextmanager
async def running(world: World, *services: Service) -> AsyncIterator[None]:
    tasks = []
    try:
        for service in services:
            tasks.append(asyncio.create_task(service.run(world)))
            await asyncio.wait_for(service.ready.wait(), 10)
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def device(world: World, source: str, device_id: str) -> Device | None:
    try:
        return world.device(source, device_id)
    except KeyError:
        return None


async def keep_driving(
    controller: Controller, source: str, left: float, right: float, seconds: float
) -> None:
    """Drive commands at 10 Hz for `seconds`, as a browser holding a key does."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        result = await statuses(controller, source, "xrp", "drive", left=left, right=right)
        assert result[-1][0] == "ok", result
        await asyncio.sleep(0.1)


async def test_xrp_drive_dead_man_and_disable() -> None:
    world = World()
    sim = XrpSim(SimOptions(port=0))
    async with running(world, sim):
        assert sim.address is not None
        source = XrpSource(parse_endpoint(f"xrp://127.0.0.1:{sim.address[1]}"))
        controller = Controller(lambda: [sim, source])
        async with running(world, source):
            name = source.name
            assert [c["name"] for c in controller.catalog()[name]] == [
                "drive",
                "enable",
                "disable",
                "stop",
            ]
            await until(lambda: device(world, name, "xrp") is not None, "the robot's status")

            def x() -> float:
                found = device(world, name, "xrp")
                assert found is not None and found.position is not None
                return found.position[0]

            def motor(i: int) -> float:
                found = device(world, name, "xrp")
                assert found is not None
                return found.telemetry[f"motor_{i}"][0]

            def moved_since(pose: tuple[float, float]) -> float:
                """How far the simulated robot really is from `pose` (the sim's own truth:
                a disabled robot's encoders stop counting, so odometry cannot tell)."""
                return math.hypot(sim.fleet.pose[0][0] - pose[0], sim.fleet.pose[0][1] - pose[1])

            def here() -> tuple[float, float]:
                return (float(sim.fleet.pose[0][0]), float(sim.fleet.pose[0][1]))

            # the robot starts at the origin facing East: forward is +x
            start = x()
            assert (await statuses(controller, name, "xrp", "enable"))[-1][0] == "ok"
            await keep_driving(controller, name, 0.8, 0.8, 1.5)
            assert x() > start + 0.05
            assert motor(0) == 0.8 and motor(1) == -0.8  # the right motor is mounted mirrored
            # the browser goes quiet: the dead-man stops the motors, the robot stops
            await until(lambda: motor(0) == 0.0 and motor(1) == 0.0, "the dead-man stop")
            await asyncio.sleep(1.0)  # the motors' lag settles
            stopped = here()
            await asyncio.sleep(0.5)
            assert moved_since(stopped) < 0.002

            # backwards: -x; then disable, and it stops although drive commands keep coming
            back = x()
            await keep_driving(controller, name, -0.8, -0.8, 1.0)
            assert x() < back - 0.02
            result = await statuses(controller, name, "xrp", "disable")
            assert result[-1][0] == "ok"
            await until(lambda: not sim.fleet.counting[0], "the robot disabled")
            await asyncio.sleep(1.0)
            disabled = here()
            await keep_driving(controller, name, 0.8, 0.8, 0.8)
            assert moved_since(disabled) < 0.002
            last = await statuses(controller, name, "xrp", "drive", left=0.5, right=0.5)
            assert last[-1][0] == "ok" and "disabled" in last[-1][1]


UGCS_SETTINGS = {"gps_warmup": "0", "climb_rate": "5", "cruise_speed": "10"}


async def test_ugcs_arm_takeoff_mission_land_and_refusals() -> None:
    world = World()
    sim = UgcsSim(SimOptions(port=0, count=2, options=UGCS_SETTINGS))
    async with running(world, sim):
        assert sim.address is not None
        source = UcsSource(parse_endpoint(f"ugcs://127.0.0.1:{sim.address[1]}"))
        controller = Controller(lambda: [sim, source])
        async with running(world, source):
            name = source.name

            def drone() -> Device:
                found = device(world, name, "SIM-0001")
                assert found is not None
                return found

            def placed() -> bool:
                found = device(world, name, "SIM-0001")
                return found is not None and found.geodetic is not None

            controller.catalog()  # asked early (a browser that came first): not kept stale
            await until(placed, "SIM-0001's position")
            catalog = {c["name"]: c for c in controller.catalog()[name]}
            for expected in ("arm", "disarm", "takeoff_command", "land_command",
                             "return_to_home", "mission_upload", "mission_pause",
                             "mission_resume", "waypoint", "emergency_land"):  # fmt: skip
                assert expected in catalog
            assert catalog["takeoff_command"]["params"] == [
                {"name": "relative_altitude", "type": "number", "unit": "m", "default": None}
            ]
            assert [p["name"] for p in catalog["mission_upload"]["params"]] == [
                "waypoints",
                "speed",
                "name",
                "start",
            ]
            waypoint = {p["name"]: p for p in catalog["waypoint"]["params"]}
            assert (
                waypoint["latitude"]["unit"] == "deg" and waypoint["ground_speed"]["unit"] == "m/s"
            )

            # refusals: by the controller (one line), and by the VSM (its reason)
            [(state, message)] = await statuses(controller, name, "SIM-0001", "fly_away")
            assert state == "refused" and "no command 'fly_away'" in message
            [(state, message)] = await statuses(controller, name, "SIM-0099", "arm")
            assert state == "refused" and "no device 'SIM-0099'" in message
            [(state, message)] = await statuses(
                controller, name, "SIM-0001", "takeoff_command", relative_altitude="high"
            )
            assert state == "refused" and "'relative_altitude'" in message
            result = await statuses(controller, name, "SIM-0001", "disarm")
            assert result[0][0] == "sent" and result[-1] == ("failed", "disarm: not armed")

            # arm, take off: it climbs
            ground = drone().geodetic
            assert ground is not None
            result = await statuses(controller, name, "SIM-0001", "arm")
            assert [s for s, _ in result] == ["sent", "ok"]
            result = await statuses(
                controller, name, "SIM-0001", "takeoff_command", relative_altitude=15
            )
            assert result[-1][0] == "ok", result

            def altitude() -> float:
                geodetic = drone().geodetic
                assert geodetic is not None
                return geodetic[2]

            await until(lambda: altitude() > ground[2] + 5, "the climb")

            # a mission 150 m north of the start, flown at once: it heads for the waypoint
            target = (ground[0] + 150 / 111_320, ground[1], 15.0)

            def distance() -> float:
                geodetic = drone().geodetic
                assert geodetic is not None
                north = (target[0] - geodetic[0]) * 111_320
                east = (target[1] - geodetic[1]) * 111_320 * math.cos(math.radians(target[0]))
                return math.hypot(north, east)

            before = distance()
            assert before > 140
            result = await statuses(
                controller,
                name,
                "SIM-0001",
                "mission_upload",
                waypoints=[list(target)],
                speed=10,
                start=True,
            )
            assert result[-1][0] == "ok", result
            assert [s for s, _ in result] == ["sent", "in_progress", "sent", "ok"]  # upload, auto
            await until(lambda: distance() < before - 30, "flying toward the waypoint")

            # land: it comes down
            result = await statuses(controller, name, "SIM-0001", "land_command")
            assert result[-1][0] == "ok", result
            high = altitude()
            await until(lambda: altitude() < high - 3, "the descent")
            # the other drone was never touched
            other = device(world, name, "SIM-0002")
            assert other is not None and other.telemetry["is_armed"][0] == 0.0


async def test_ugcs_no_reply_is_a_timeout_and_a_lost_vsm_fails_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ugcs_services, "COMMAND_TIMEOUT", 1.0)
    world = World()
    sim = UgcsSim(SimOptions(port=0, count=1, options=UGCS_SETTINGS))
    sim.server.on_command = lambda event: None  # a VSM that never answers
    sim_task = asyncio.create_task(sim.run(world))
    await asyncio.wait_for(sim.ready.wait(), 10)
    assert sim.address is not None
    source = UcsSource(parse_endpoint(f"ugcs://127.0.0.1:{sim.address[1]}"))
    controller = Controller(lambda: [source])
    try:
        async with running(world, source):
            name = source.name
            await until(lambda: device(world, name, "SIM-0001") is not None, "SIM-0001")
            result = await statuses(controller, name, "SIM-0001", "arm")
            assert result == [
                ("sent", "arm sent"),
                ("timeout", "arm: no reply from the VSM in 1 s"),
            ]

            # the VSM goes away while a command waits for its reply
            waiting = asyncio.create_task(statuses(controller, name, "SIM-0001", "arm"))
            await asyncio.sleep(0.2)
            sim_task.cancel()
            result = await waiting
            assert result[0] == ("sent", "arm sent")
            assert result[-1][0] == "failed" and "\n" not in result[-1][1]
    finally:
        sim_task.cancel()
        await asyncio.gather(sim_task, return_exceptions=True)


# -- end to end: the CLI's viewer, a WebSocket client as the browser -----------------------------

ROBOWIRE = [sys.executable, "-m", "robowire.cli"]


@asynccontextmanager
async def viewer(*args: str) -> AsyncIterator[tuple[str, list[str]]]:
    """`robowire serve http://127.0.0.1:0 ...` as a process; yields its page URL and the
    lines it printed before it."""
    process = await asyncio.create_subprocess_exec(
        *ROBOWIRE, "serve", "http://127.0.0.1:0", *args, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    lines: list[str] = []
    drain: asyncio.Task[bytes] | None = None
    try:
        while True:
            line = (await asyncio.wait_for(process.stderr.readline(), 30)).decode()
            assert line, f"the viewer ended: {lines}"
            lines.append(line)
            found = re.search(r"listening on (http://127\.0\.0\.1:\d+/(\?token=[\w-]+)?);", line)
            if found:
                break
        drain = asyncio.create_task(process.stderr.read())  # a full pipe would block it
        yield found.group(1), lines
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            assert await asyncio.wait_for(process.wait(), 15) == 130
        if drain is not None:
            assert "Traceback" not in (await drain).decode()


async def browser_command(
    url: str, source: str, device: str, command: str, **params: Any
) -> list[dict[str, Any]]:
    """What a browser gets for one `command` message: its `command_status` messages up to
    the final one (and the hello first)."""
    page, _, token = url.partition("?")
    ws_url = page.replace("http", "ws") + "ws" + (f"?{token}" if token else "")
    async with connect(ws_url, subprotocols=[Subprotocol(SUBPROTOCOL)]) as ws:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "hello"
        await ws.send(json.dumps({"type": "hello", "rate": 30}))
        message = {"type": "command", "id": 7, "source": source, "device": device,
                   "command": command, "params": params}  # fmt: skip
        await ws.send(json.dumps(message))
        replies = [hello]
        while True:
            raw = await asyncio.wait_for(ws.recv(), 20)
            if isinstance(raw, bytes):
                continue
            reply = json.loads(raw)
            if reply["type"] != "command_status":
                continue
            assert reply["id"] == 7
            replies.append(reply)
            if reply["state"] in FINAL:
                return replies


async def test_viewer_commands_drive_a_robot_only_with_allow_control() -> None:
    world = World()
    sim = XrpSim(SimOptions(port=0))
    async with running(world, sim):
        assert sim.address is not None
        robot = f"xrp://127.0.0.1:{sim.address[1]}"
        source = f"xrp@127.0.0.1:{sim.address[1]}"
        start = (float(sim.fleet.pose[0][0]), float(sim.fleet.pose[0][1]))

        async with viewer("--from", robot) as (url, _):  # control is off by default
            hello, *statuses = await browser_command(url, source, "xrp", "enable")
            assert hello["control"] is False and hello["commands"] == {}
            assert [(s["state"], s["message"]) for s in statuses] == [
                ("refused", "control is off: start with --allow-control")
            ]
            await asyncio.sleep(0.5)
            assert not sim.fleet.counting[0]  # the robot stays disabled

        async with viewer("--from", robot, "--allow-control") as (url, lines):
            assert any("control allowed" in line for line in lines)
            assert "?token=" in url  # the page's address carries the token made at start
            hello, *statuses = await browser_command(url.split("?")[0], source, "xrp", "enable")
            assert hello["control"] is False and hello["commands"] == {}
            assert [(s["state"], s["message"]) for s in statuses] == [
                ("refused", "control needs the token printed at start")
            ]
            hello, *statuses = await browser_command(url, source, "xrp", "enable")
            assert hello["control"] is True
            assert [c["name"] for c in hello["commands"][source]] == [
                "drive",
                "enable",
                "disable",
                "stop",
            ]
            assert statuses[-1]["state"] == "ok"
            _, *statuses = await browser_command(url, source, "xrp", "drive", left=2, right=0)
            assert statuses[-1]["state"] == "refused" and "'left'" in statuses[-1]["message"]
            loop = asyncio.get_running_loop()
            end = loop.time() + 1.5
            while loop.time() < end:  # a browser holding the up key
                _, *statuses = await browser_command(
                    url, source, "xrp", "drive", left=0.8, right=0.8
                )
                assert statuses[-1]["state"] == "ok"
            moved = math.hypot(sim.fleet.pose[0][0] - start[0], sim.fleet.pose[0][1] - start[1])
            assert moved > 0.05


async def test_allow_control_is_for_the_viewer_only() -> None:
    process = await asyncio.create_subprocess_exec(
        *ROBOWIRE, "serve", "foxglove://127.0.0.1:0", "--from", "xrp://127.0.0.1:1",
        "--allow-control", stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode != 0
    assert err.decode().strip().splitlines() == [
        "robowire: error: --allow-control: only the web viewer (http://) takes commands"
    ]
