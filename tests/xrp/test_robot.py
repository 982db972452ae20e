"""A robot of your own on the XRP wire (`robowire.protocols.xrp.Robot`, `serve`): its sensors go
out as the firmware's status, WPILib's commands reach its `drive` and `step`; real WPILib
(robotpy-xrp) reads what it reports."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import math
import re
import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

import robowire
from robowire.errors import ConfigError
from robowire.protocols.xrp import Outputs, Robot, Sensors, serve
from robowire.protocols.xrp.codec import decode_status, encode_status
from robowire.protocols.xrp.session_wpilib import ClientSession

DIVISOR = 9_375_000
ROBOT_PROGRAM = Path(__file__).parent / "robot" / "robot.py"
FINAL = re.compile(r"FINAL enabled=(\w+) left=(-?\d+) right=(-?\d+) gyro=(-?[\d.]+)")


class Tank(Robot):
    """A robot of the test's own: each wheel's encoder counts 1000 a second at full output
    (the right motor mirrored), no lag; the gyro's yaw is (right - left) / 10 degrees."""

    def __init__(self) -> None:
        self.counts = [0.0, 0.0]
        self.last: float | None = None
        self.steps = 0
        self.driven: list[Outputs] = []
        self.reported: Sensors | None = None
        self.lock = threading.Lock()

    def drive(self, now: float, outputs: Outputs) -> None:
        with self.lock:
            self.driven.append(outputs)

    def step(self, now: float, outputs: Outputs) -> Sensors:
        dt = 0.0 if self.last is None else now - self.last
        self.last = now
        left, right = outputs.motors[0], -outputs.motors[1]
        self.counts[0] += 1000 * left * dt
        self.counts[1] += 1000 * right * dt
        counts = (int(self.counts[0]), int(self.counts[1]), 0, 0)
        moving = [1 / (1000 * v) if v else None for v in (left, right)]
        with self.lock:
            self.steps += 1
            self.reported = Sensors(
                encoder_counts=counts,
                encoder_periods=(moving[0], moving[1], None, None),
                gyro_angles=(0.0, 0.0, (counts[1] - counts[0]) / 10),
                analog=(0.25, 4.5, 2.5),
            )
            return self.reported


def test_sensors_go_out_as_the_firmware_reports_them() -> None:
    sensors = Sensors(
        encoder_counts=(5, -7, 2**31 + 3, 0),  # the third wraps as the firmware's i32 does
        encoder_periods=(0.001, -0.002, None, None),
        button=True,
        gyro_rates=(1.0, 2.0, 3.0),
        gyro_angles=(4.0, 5.0, 90.0),
        accel=(0.0, 0.5, 1.0),
        analog=(0.25, 4.5, 2.5),
    )
    values = sensors.status_values(DIVISOR)
    assert values[:12] == [
        5, (9375 << 1) | 1, DIVISOR,
        -7, 18750 << 1, DIVISOR,
        -(2**31) + 3, 0xFFFFFFFF, DIVISOR,
        0, 0xFFFFFFFF, DIVISOR,
    ]  # fmt: skip
    assert Sensors().status_values(DIVISOR)[1] == 0xFFFFFFFE  # the left's "no period"
    # and the WPILib side reads back what was said
    session = ClientSession()
    [event] = session.feed_datagram(encode_status(1, values), ("robot", 0), 0.0)
    status = event.status  # type: ignore[union-attr]
    assert status.encoder_counts == (5, -7, -(2**31) + 3, 0)
    assert status.encoder_periods[:2] == (pytest.approx(0.001), pytest.approx(-0.002))
    assert status.encoder_periods[2:] == (None, None)
    assert status.button is True and status.gyro == (1.0, 2.0, 3.0, 4.0, 5.0, 90.0)
    assert status.accel == (0.0, 0.5, 1.0) and status.analog == (0.25, 4.5, 2.5)
    assert decode_status(encode_status(1, values)) is not None  # the firmware's exact layout


def test_our_wpilib_side_drives_your_robot_and_reads_its_sensors() -> None:
    tank = Tank()
    with serve(tank, port=0) as robot:
        assert robot.address is not None
        host, port = robot.address
        with robowire.connect(f"xrp://{host}:{port}?enable=1&left=0.5&right=0.5") as live:
            device = live.wait_for("xrp", timeout=10, field="encoder_0_count")
            deadline = time.monotonic() + 30
            while device.telemetry["encoder_0_count"].value < 500:
                assert time.monotonic() < deadline, device.telemetry
                live.wait(timeout=5)
                device = live.devices["xrp"]
        until = time.monotonic() + 5  # the client is gone: the watchdog disables the robot
        while tank.driven[-1].enabled and time.monotonic() < until:
            time.sleep(0.02)
    with tank.lock:
        driven, reported, steps = list(tank.driven), tank.reported, tank.steps
    assert Outputs(enabled=True, motors=(0.5, -0.5, 0.0, 0.0)) in driven
    assert not driven[-1].enabled and driven[-1].motors == (0.0, 0.0, 0.0, 0.0)
    assert reported is not None and steps >= 10
    left, right = device.telemetry["encoder_0_count"], device.telemetry["encoder_1_count"]
    assert left.value == right.value >= 500  # both wheels forward, at the same speed
    assert device.telemetry["encoder_0_rate"].value == pytest.approx(500, rel=1e-3)
    assert device.telemetry["analog_1"].value == pytest.approx(4.5)


def test_serve_errors_are_one_line() -> None:
    with pytest.raises(ConfigError, match="at least one robot"):
        serve()
    with serve(Tank(), port=0) as robot:
        assert robot.address is not None
        with pytest.raises(robowire.errors.RobowireError, match="cannot"):
            serve(Tank(), port=robot.address[1])


@pytest.mark.interop
@pytest.mark.timeout(90)
@pytest.mark.skipif(
    importlib.util.find_spec("xrp") is None or importlib.util.find_spec("robotpy") is None,
    reason="robotpy-xrp is not installed",
)
async def test_wpilib_reads_your_robot(tmp_path: Path) -> None:
    """The interop test's WPILib program (straight, turn left, stop, print) against a robot of
    the test's own physics: WPILib reads the counts and yaw this robot reported."""
    tank = Tank()
    with serve(tank, port=0) as robot:
        assert robot.address is not None
        host, port = robot.address
        shutil.copy(ROBOT_PROGRAM, tmp_path / "robot.py")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "robotpy", "--main", "robot.py", "run-xrp", "--nogui",
            "--host", host, "--port", str(port),
            cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    text = out.decode(errors="replace")
    match = FINAL.search(text)
    assert match, text[-3000:]
    with tank.lock:
        reported, driven = tank.reported, list(tank.driven)
    assert reported is not None
    left, right = int(match.group(2)), int(match.group(3))
    # the motors were off for 0.6 s before WPILib printed: no lag, so the counts stood still
    assert (left, right) == reported.encoder_counts[:2]
    yaw = math.degrees(float(match.group(4)))  # printed in radians to 4 places
    assert yaw == pytest.approx(reported.gyro_angles[2], abs=0.01)
    assert right > left > 0  # straight, then a left turn
    sent = {tuple(round(m, 3) for m in o.motors) for o in driven if o.enabled}
    assert (0.6, -0.6, 0.0, 0.0) in sent  # float32 on the wire; the right motor inverted
