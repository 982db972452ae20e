from __future__ import annotations

import math

import pytest

from robowire.protocols.xrp.adapter import XrpAdapter
from robowire.protocols.xrp.events import StatusReceived
from robowire.protocols.xrp.model import COUNTS_PER_METRE, Fleet
from robowire.protocols.xrp.session_robot import RobotSession
from robowire.protocols.xrp.session_wpilib import ClientSession
from robowire.world import World

from .pair import ROBOT


def _status(robot: RobotSession, client: ClientSession) -> list[StatusReceived]:
    events = client.feed_datagram(robot.status_datagram(0.0), ROBOT, 0.0)
    assert isinstance(events[0], StatusReceived)
    return [events[0]]


def test_pose_from_encoders_and_gyro_and_units() -> None:
    fleet = Fleet(1)
    robot = RobotSession(fleet)
    robot.seq = 1
    client = ClientSession(ROBOT)
    world = World()
    adapter = XrpAdapter(world, "xrp@test")
    adapter.apply(_status(robot, client), 100.0)
    # move the robot by hand: 0.2 m forward along +x, then turn to 90 degrees and 0.1 m up
    fleet.counts[0, :2] = 0.2 * COUNTS_PER_METRE
    fleet.invalidate()
    adapter.apply(_status(robot, client), 100.05)
    fleet.pose[0, 2] = math.pi / 2
    fleet.invalidate()
    adapter.apply(_status(robot, client), 100.1)
    fleet.counts[0, :2] += 0.1 * COUNTS_PER_METRE
    fleet.invalidate()
    adapter.apply(_status(robot, client), 100.15)
    device = world.device("xrp@test", "xrp")
    assert device.position == pytest.approx((0.2, 0.1, 0.0), abs=0.005)
    assert device.orientation == pytest.approx(
        (math.cos(math.pi / 4), 0, 0, math.sin(math.pi / 4)), abs=1e-6
    )
    t = device.telemetry
    assert t["encoder_0_distance"] == (pytest.approx(0.3, abs=0.002), "m")
    assert t["gyro_angle_z"] == (pytest.approx(90.0, abs=1e-4), "deg")
    assert t["accel_z"] == (1.0, "g")
    assert t["analog_2"][1] == "V" and t["range"][1] == "m"
    assert t["reflectance_left"][1] == "ratio"
    assert t["button"] == (0.0, "bool") and t["enabled"] == (0.0, "bool")
    assert t["packets_per_second"] == (4.0, "Hz")
    for name in ("motor_0", "motor_3", "servo_4", "servo_5", "led", "dropped", "gyro_rate_z"):
        assert name in t
