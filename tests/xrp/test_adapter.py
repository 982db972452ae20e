from __future__ import annotations

import math

import pytest

from robowire.protocols.xrp import codec
from robowire.protocols.xrp.adapter import DeviceMirror, XrpAdapter
from robowire.protocols.xrp.events import Outputs, StatusReceived
from robowire.protocols.xrp.model import COUNTS_PER_METRE, Fleet
from robowire.protocols.xrp.session_robot import RobotSession
from robowire.protocols.xrp.session_wpilib import ClientSession
from robowire.transport.budget import Held
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


def test_a_relayed_robot_reports_the_robots_own_status_byte_for_byte() -> None:
    """`bridge xrp://A --to xrp://B`: what the serve sink's robot sends a WPILib program is the
    status robot A sent (through the WPILib side, the adapter and the world), moving or not."""
    fleet = Fleet(1)
    fleet.button[0] = True
    robot = RobotSession(fleet)
    robot.seq = 1
    fleet.drive(0, 0.0, Outputs(enabled=True, motors=(0.5, 0.2, -0.3, 0.0)))
    fleet.place(0, 0.3, -0.2, 0.7)
    client = ClientSession(ROBOT)
    world = World()
    world.table("xrp@a").protocol = "xrp"  # what the gateway's XRP source sets
    adapter = XrpAdapter(world, "xrp@a")
    mirror = DeviceMirror(Fleet(1))
    relayed = RobotSession(mirror)
    with world.subscribe() as changes:
        for now, outputs in ((1.3, None), (1.8, Outputs(enabled=False)), (2.3, None)):
            if outputs is not None:  # disabled: no periods any more
                fleet.drive(0, now - 0.2, outputs)
            seq = robot.seq
            status = robot.status_datagram(now)
            adapter.apply(client.feed_datagram(status, ROBOT, now), now)
            mirror.write(world, changes.pull())
            relayed.seq = seq
            assert relayed.status_datagram(now) == status
            decoded = codec.decode_status(status)
            assert decoded is not None
            values = dict(zip(codec.STATUS_FIELDS, decoded[1], strict=True))
            if now == 1.3:  # the case is not trivial: moving both ways, a pressed button
                assert values["encoder0_count"] > 0 > values["encoder1_count"]
                assert values["encoder2_period"] & 1 == 0 and values["button"] == 1
            else:
                assert values["encoder0_period"] == codec.NO_PERIOD - 1
    assert mirror.native and mirror.target == ("xrp@a", "xrp")


def test_a_device_of_another_protocol_is_followed_not_copied() -> None:
    world = World()
    mirror = DeviceMirror(Fleet(1))
    with world.subscribe() as changes:
        world.update_device(
            "tracker", "xrp", receive_time=1.0, position=(0.5, 0.0, 0.0),
            telemetry={"gyro_angle_z": (45.0, "deg")},
        )  # fmt: skip
        mirror.write(world, changes.pull())
    assert mirror.target == ("tracker", "xrp") and not mirror.native
    values = mirror.status_values(0, 1.0, 9_375_000)
    assert values[codec.STATUS_FIELDS.index("angle_z")] == 0.0  # the robot's own gyro


@pytest.mark.parametrize("updates_before_the_first_status", [1, 2, 3])
def test_a_followed_device_moved_before_its_placement_was_reported_keeps_the_far_end_true(
    updates_before_the_first_status: int,
) -> None:
    """A device going round a 1.25 m circle, mirrored by the serve sink's robot and read back by
    a far end (WPILib side + adapter) that had a status before the device came: the far end's
    odometry is the device's path from a point of the circle, facing as the device does, even
    when the device moved again before a status reported where it was put down (under load
    the gateway hands the sink several updates between two 50 ms statuses; the gyro's jump to
    the device's yaw at placement then bent the first move by half the jump, 3 cm here)."""
    world = World()
    fleet = Fleet(1)
    fleet.frozen = True  # as the serve sink's robot: only the device moves it
    fleet.drive(0, 0.0, Outputs(enabled=True))  # counting, as a far end enabling it
    mirror = DeviceMirror(fleet)
    robot = RobotSession(mirror)
    robot.seq = 1
    client = ClientSession(ROBOT)
    far = XrpAdapter(World(), "xrp@far")

    def report(now: float) -> None:
        far.apply(client.feed_datagram(robot.status_datagram(now), ROBOT, now), now)

    def circle(t: float) -> tuple[float, float, float]:  # x, y, yaw (tangent)
        angle = 2.0 + 0.5 * t
        return 1.25 * math.cos(angle), 1.25 * math.sin(angle), angle + math.pi / 2

    report(0.0)  # the robot before the device: at the origin, facing +x
    with world.subscribe() as changes:
        for k in range(1, 40):
            t = 0.05 * k
            x, y, yaw = circle(t)
            half = 0.5 * yaw
            world.update_device(
                "tracker", "Tracker0/1", receive_time=t, position=(x, y, 0.0),
                orientation=(math.cos(half), 0.0, 0.0, math.sin(half)),
            )  # fmt: skip
            mirror.write(world, changes.pull())
            if k >= updates_before_the_first_status:
                report(t)
    assert far.heading == pytest.approx(math.remainder(yaw, math.tau), abs=1e-4)
    origin = (x - far.x, y - far.y)  # where the far end's odometry began, in the world
    assert math.hypot(*origin) == pytest.approx(1.25, abs=0.002), origin


def test_a_source_behind_keeps_every_status_for_its_odometry() -> None:
    """While the gateway is behind, a source's held events lose the state reports a newer one
    made stale (`robowire.transport.budget.Held`). A status is not one: the pose integrates
    the path between statuses, so a robot driving a square arc by arc ends where it ends when
    the gateway keeps up, however many of its statuses waited."""
    fleet, client = Fleet(1), ClientSession(ROBOT)
    robot = RobotSession(fleet)
    robot.seq = 1
    statuses = _status(robot, client)  # (the first is where the odometry starts)
    for step in range(40):  # quarter turns, each after 0.5 m: a 0.5 m square, driven twice
        if step % 5 == 4:
            fleet.pose[0, 2] += math.pi / 2
        else:
            fleet.counts[0, :2] += 0.125 * COUNTS_PER_METRE
        fleet.invalidate()
        statuses += _status(robot, client)
    kept_up, behind = World(), World()
    XrpAdapter(kept_up, "xrp@test").apply(statuses, 100.0)
    held = Held()
    held.add(statuses, shed=True)
    XrpAdapter(behind, "xrp@test").apply(held.take(), 100.0)
    where = kept_up.device("xrp@test", "xrp").position
    assert where == pytest.approx((0.0, 0.0, 0.0), abs=0.01)  # back at the start
    assert behind.device("xrp@test", "xrp").position == pytest.approx(where, abs=1e-9)
