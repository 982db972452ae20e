"""Real WPILib (robotpy-xrp, the allwpilib halsim_xrp extension) drives our simulated robot.

The program in `robot/robot.py` enables itself, drives straight, turns left, stops, prints
what its encoders and gyro read, and quits while still enabled. We check that what WPILib
read is our robot's state, that this state is what our physics gives for the motor values
WPILib sent, and that our robot disables (watchdog) within 600 ms after the program stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import math
import re
import shutil
import sys
from pathlib import Path

import pytest

from robowire.protocols.xrp.codec import XRPMotor
from robowire.protocols.xrp.events import CommandReceived, EnabledChanged, RobotEvent
from robowire.protocols.xrp.model import COUNTS_PER_METRE, TRACK_WIDTH, Fleet
from robowire.protocols.xrp.session_robot import RobotSession
from robowire.transport.udp import run_datagram

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(
        importlib.util.find_spec("xrp") is None or importlib.util.find_spec("robotpy") is None,
        reason="robotpy-xrp is not installed",
    ),
    pytest.mark.timeout(90),
]

ROBOT = Path(__file__).parent / "robot" / "robot.py"
FINAL = re.compile(
    r"FINAL enabled=(\w+) left=(-?\d+) right=(-?\d+) gyro=(-?[\d.]+) rate=(-?[\d.]+)"
)


def replay(commands: list[tuple[float, bool, list[float]]], end: float) -> Fleet:
    """Our physics for the motor values WPILib sent (a fresh fleet, no quantum)."""
    fleet = Fleet(1, quantum=0.0)
    for t, enabled, motors in commands:
        fleet.advance(t)
        if enabled != bool(fleet.counting[0]):
            fleet.command[0] = 0.0
            fleet.counting[0] = enabled
        if enabled:
            fleet.command[0] = motors
    fleet.advance(end)
    return fleet


async def test_wpilib_drives_our_robot(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    fleet = Fleet(1)
    robot = RobotSession(fleet)
    commands: list[tuple[float, bool, list[float]]] = []
    disabled_at: list[float] = []
    last_command = [0.0]
    motors = [0.0] * 4

    def on_events(events: list[RobotEvent]) -> None:
        fleet.apply(0, events)  # the robot's outputs drive its physics, as in the simulator
        now = loop.time()
        for event in events:
            if isinstance(event, CommandReceived):
                last_command[0] = now
                for block in event.packet.blocks:
                    if isinstance(block, XRPMotor) and 0 <= block.id < 4:
                        motors[block.id] = block.value
                commands.append((now, event.enabled, list(motors)))
            elif isinstance(event, EnabledChanged) and event.reason == "watchdog":
                disabled_at.append(now)

    bound: asyncio.Future[tuple[str, int]] = loop.create_future()
    server = asyncio.create_task(
        run_datagram(robot, on_events, local_addr=("127.0.0.1", 0), on_listening=bound.set_result)
    )
    try:
        host, port = await asyncio.wait_for(bound, 5)
        shutil.copy(ROBOT, tmp_path / "robot.py")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "robotpy", "--main", "robot.py", "run-xrp", "--nogui",
            "--host", host, "--port", str(port),
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 45)
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        stopped = loop.time()
        text = out.decode(errors="replace")
        match = FINAL.search(text)
        assert match, text[-3000:]
        # after the program stops, the robot must disable on its own
        while not disabled_at and loop.time() - stopped < 1.5:
            await asyncio.sleep(0.01)
    finally:
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server
    enabled, left, right = match.group(1) == "True", int(match.group(2)), int(match.group(3))
    gyro_rad = float(match.group(4))  # XRPGyro.getAngle() is in radians in RobotPy 2026
    assert enabled

    # 1. WPILib read our robot's state (motors off 0.6 s before it printed; the motor lag
    # leaves the wheels creeping by a count or two after that)
    counts = fleet.encoder_counts()[0]
    assert left == pytest.approx(int(counts[0]), abs=3)
    assert right == pytest.approx(int(counts[1]), abs=3)
    assert gyro_rad == pytest.approx(fleet.pose[0, 2], abs=0.01)

    # 2. that state is our physics for the motor values WPILib sent
    model = replay(commands, fleet.time or 0.0)
    expected = model.counts[0]
    assert left == pytest.approx(expected[0], abs=15)
    assert right == pytest.approx(expected[1], abs=15)
    assert math.degrees(gyro_rad) == pytest.approx(math.degrees(model.pose[0, 2]), abs=1.5)
    # and is the kinematics of a 155 mm track: heading = (right - left) / track width
    kinematic = (right - left) / COUNTS_PER_METRE / TRACK_WIDTH
    assert gyro_rad == pytest.approx(kinematic, rel=0.01)
    # the program drove left first straight then turned left: a big CCW heading change
    assert 120 < math.degrees(gyro_rad) < 180 and right > left > 0

    # 3. WPILib sent what it was told: right motor inverted, all four motors every packet
    enabled_motors = [m for _, en, m in commands if en and m[0] != 0.0]
    assert [0.6, -0.6, 0.0, 0.0] in [[round(v, 3) for v in m] for m in enabled_motors]

    # 4. the robot disabled by itself within 600 ms of the last command
    assert disabled_at, "robot did not disable after the program stopped"
    assert disabled_at[0] - last_command[0] < 0.6
    assert not robot.enabled and fleet.command[0].tolist() == [0.0] * 4
