"""The listen side's parts that need no DDS: the adapter (decoded samples -> world), how pose
topics name their devices, which reports a newer one makes stale, and discovery read a
bounded slice per turn (a participant flooding discovery)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from robowire.ros2 import decode
from robowire.ros2.decode import Decoded
from robowire.ros2.source import (
    DISCOVERY_TURN,
    Ros2Adapter,
    Ros2Source,
    SampleRead,
    profile_for,
    topic_device,
)
from robowire.world import World

QUARTER_Z = [math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)]  # w x y z


def tf(parent: str, child: str, t: list[float], q: list[float]) -> SampleRead:
    decoded = Decoded((parent,), (child,), np.array([2.0]), np.array([t]), np.array([q]))
    return SampleRead("/tf", decode.TF, decoded)


def pose(topic: str, frame: str, t: list[float], q: list[float]) -> SampleRead:
    decoded = Decoded((frame,), ("",), np.array([3.0]), np.array([t]), np.array([q]))
    return SampleRead(topic, decode.POSE, decoded)


def test_pose_topics_name_their_robot() -> None:
    assert topic_device("/vrpn_mocap/rb1/pose") == "vrpn_mocap/rb1"
    assert topic_device("/vrpn_mocap/rb1/twist") == "vrpn_mocap/rb1"
    assert topic_device("/car/odom") == "car"
    assert topic_device("/pose") == "pose"
    assert topic_device("/drone_7/_3/pose") == "drone_7/3"  # names' inverse: `_` before a digit


def test_a_pose_in_another_frame_is_placed_through_tf() -> None:
    world = World()
    adapter = Ros2Adapter(world, "ros2://")
    adapter.apply([pose("/rb/pose", "map", [1.0, 0.0, 0.0], [1, 0, 0, 0])], 10.0)
    assert "rb" not in world.table("ros2://").index  # no path from map to world yet
    assert adapter.unplaced == {"/rb/pose": "map"}
    adapter.apply([tf("world", "map", [10.0, 0.0, 0.0], QUARTER_Z)], 10.0)
    adapter.apply([pose("/rb/pose", "map", [1.0, 0.0, 0.0], [1, 0, 0, 0])], 10.0)
    robot = world.device("ros2://", "rb").to_json()
    np.testing.assert_allclose(robot["position"], [10.0, 1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(robot["orientation"], QUARTER_Z, atol=1e-12)
    assert robot["kind"] == "robot"
    assert world.device("ros2://", "map").to_json()["kind"] == "frame"
    assert adapter.unplaced == {}


def test_an_unknown_orientation_is_not_written() -> None:
    world = World()
    adapter = Ros2Adapter(world, "ros2://")
    adapter.apply([pose("/rb/pose", "world", [1.0, 2.0, 3.0], [0, 0, 0, 0])], 10.0)
    robot = world.device("ros2://", "rb").to_json()
    assert robot["position"] == [1.0, 2.0, 3.0]
    assert robot.get("orientation") is None


def test_odometry_velocity_is_turned_from_the_body_frame() -> None:
    world = World()
    adapter = Ros2Adapter(world, "ros2://")
    decoded = Decoded(
        ("world",),
        ("car",),
        np.array([1.0]),
        np.array([[0.0, 0.0, 0.0]]),
        np.array([QUARTER_Z]),
        velocity=np.array([[2.0, 0.0, 0.0]]),
        angular=np.zeros((1, 3)),
    )
    adapter.apply([SampleRead("/car/odom", decode.ODOMETRY, decoded)], 1.0)
    velocity = world.device("ros2://", "car").to_json()["velocity"]
    np.testing.assert_allclose(velocity, [0.0, 2.0, 0.0], atol=1e-12)


def test_a_fix_without_a_fix_writes_no_position() -> None:
    world = World()
    adapter = Ros2Adapter(world, "ros2://")

    def fix(status: int) -> SampleRead:
        decoded = Decoded(
            ("gps",),
            ("",),
            np.array([1.0]),
            geodetic=np.array([[47.0, 8.0, 400.0]]),
            fix=np.array([float(status)]),
        )
        return SampleRead("/boat/fix", decode.FIX, decoded)

    adapter.apply([fix(-1)], 1.0)
    assert "boat" not in world.table("ros2://").index
    adapter.apply([fix(0)], 1.0)
    assert world.device("ros2://", "boat").to_json()["geodetic"] == [47.0, 8.0, 400.0]


def test_a_newer_sample_of_the_same_frames_makes_an_older_stale() -> None:
    a = tf("world", "r1", [0, 0, 0], [1, 0, 0, 0])
    b = tf("world", "r1", [1, 0, 0], [1, 0, 0, 0])
    c = tf("world", "r2", [1, 0, 0], [1, 0, 0, 0])
    assert a.covers() == b.covers() != c.covers()
    assert pose("/a/pose", "world", [0, 0, 0], [1, 0, 0, 0]).covers() != a.covers()


def test_readers_ask_for_what_their_writers_offer() -> None:
    assert profile_for("/tf_static", True, True).depth == 100  # tf2's static listener
    assert profile_for("/tf_static", True, True).transient_local
    assert profile_for("/tf", True, False).depth == 100
    sensor = profile_for("/vrpn_mocap/rb1/pose", False, False)
    assert not sensor.reliable and not sensor.transient_local


class FloodingDiscovery:
    """A DCPSPublication reader holding many writers of a type not read."""

    def __init__(self, count: int) -> None:
        self.samples = [
            SimpleNamespace(
                topic_name=f"rt/flood/t{i}", type_name="std_msgs::msg::dds_::String_", qos=None
            )
            for i in range(count)
        ]
        self.largest = 0

    def take(self, N: int) -> list[Any]:
        taken, self.samples = self.samples[:N], self.samples[N:]
        self.largest = max(self.largest, len(taken))
        return taken


def test_discovery_is_read_a_bounded_slice_per_turn() -> None:
    source = Ros2Source("ros2://", 0, "LOCALHOST")
    source.node = SimpleNamespace()  # type: ignore[assignment]  (no reader is made here)
    flood = FloodingDiscovery(10 * DISCOVERY_TURN + 5)
    turns = 1
    while source._discover(flood):
        turns += 1
    assert flood.largest == DISCOVERY_TURN
    assert turns == 11
    assert len(source.unreadable) == 10 * DISCOVERY_TURN + 5
    assert source.stats.dropped == len(source.unreadable)  # each named once
