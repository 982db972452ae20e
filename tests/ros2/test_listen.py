"""`listen ros2://` against an independent ROS 2 publisher in another process (its types and
CDR bytes from rosbags' typestore, its topics made with cyclonedds as rmw_cyclonedds_cpp makes
them, tests/ros2/publisher.py): every type read lands in the world with positions and
orientations equal to what was published within 1e-9; a type it does not read and a sample
that does not decode are named in status and stop nothing. Both sides stay on loopback."""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.ros2 import publisher
from tests.ros2.subscriber import LOOPBACK

from robowire.addresses import parse_endpoint
from robowire.errors import ConfigError
from robowire.gateway import Gateway, open_source
from robowire.ros2.source import Ros2Source
from robowire.world import World
from support import until

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's DDS participants stay on loopback (ROS 2's own setting)."""
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


def domain() -> int:
    """A DDS domain of its own for each test (other engineers' tests run beside these)."""
    return random.randint(100, 232)


@contextmanager
def publishing(tmp_path: Path, spec: dict[str, Any]) -> Iterator[subprocess.Popen[str]]:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    env = {**os.environ, "CYCLONEDDS_URI": LOOPBACK, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.ros2.publisher", str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield process
    finally:
        process.terminate()
        process.wait(timeout=10)


@asynccontextmanager
async def listening(url: str) -> AsyncIterator[tuple[Ros2Source, World]]:
    source = open_source(parse_endpoint(url))
    assert isinstance(source, Ros2Source)
    gateway = Gateway().add(source)
    task = asyncio.create_task(gateway.run())
    try:
        yield source, gateway.world
    finally:
        gateway.stop()
        await task


def stamped(frame: str, sec: int = 1700000000, nanosec: int = 123456789) -> dict[str, Any]:
    return {"stamp": {"sec": sec, "nanosec": nanosec}, "frame_id": frame}


def pose(position: list[float], xyzw: list[float]) -> dict[str, Any]:
    return {
        "position": dict(zip("xyz", position, strict=True)),
        "orientation": dict(zip("xyzw", xyzw, strict=True)),
    }


def transform(parent: str, child: str, t: list[float], xyzw: list[float]) -> dict[str, Any]:
    return {
        "header": stamped(parent),
        "child_frame_id": child,
        "transform": {
            "translation": dict(zip("xyz", t, strict=True)),
            "rotation": dict(zip("xyzw", xyzw, strict=True)),
        },
    }


def tf_topic(*transforms: dict[str, Any]) -> dict[str, Any]:
    """A /tf topic of the publisher's spec, as tf2's broadcaster offers it."""
    return {
        "topic": "/tf",
        "type": "tf2_msgs/msg/TFMessage",
        "qos": "tf",
        "message": {"transforms": list(transforms)},
    }


def unit(*q: float) -> list[float]:
    norm = math.sqrt(sum(v * v for v in q))
    return [v / norm for v in q]


ROBOT_Q = unit(0.1, -0.2, 0.3, 0.9)  # x y z w
POSE_Q = unit(0.0, 0.0, 0.38268343236508984, 0.9238795325155866)
ODOM_Q = unit(0.05, 0.02, -0.7, 0.7)


def wxyz(xyzw: list[float]) -> list[float]:
    return [xyzw[3], *xyzw[:3]]


def spec(domain_id: int) -> dict[str, Any]:
    broken = publisher.serialize("geometry_msgs/msg/PoseStamped", {"header": stamped("world")})
    return {
        "domain": domain_id,
        "rate": 20,
        "topics": [
            tf_topic(
                transform("world", "robot1", [1.5, -2.25, 0.75], ROBOT_Q),
                transform("robot1", "robot1/arm", [0.1, 0.0, 0.2], [0, 0, 0, 1]),
            ),
            {
                "topic": "/tf_static",
                "type": "tf2_msgs/msg/TFMessage",
                "qos": "tf_static",
                "message": {"transforms": [transform("world", "dock", [5, 6, 0], [0, 0, 0, 1])]},
            },
            {
                "topic": "/vrpn_mocap/rb1/pose",
                "type": "geometry_msgs/msg/PoseStamped",
                "qos": "sensor",
                "message": {"header": stamped("world"), "pose": pose([0.125, 3.5, -1e-3], POSE_Q)},
            },
            {
                "topic": "/vrpn_mocap/rb1/twist",
                "type": "geometry_msgs/msg/TwistStamped",
                "qos": "sensor",
                "message": {
                    "header": stamped("world"),
                    "twist": {"linear": {"x": 0.5, "y": -0.25, "z": 0.125}},
                },
            },
            {
                "topic": "/rover/pose",
                "type": "geometry_msgs/msg/PoseWithCovarianceStamped",
                "qos": "reliable",
                "message": {
                    "header": stamped("world"),
                    "pose": {"pose": pose([7.0, 8.0, 9.0], [0, 0, 0, 1]), "covariance": [0.5] * 36},
                },
            },
            {
                "topic": "/car/odom",
                "type": "nav_msgs/msg/Odometry",
                "qos": "reliable",
                "message": {
                    "header": stamped("world"),
                    "child_frame_id": "car",
                    "pose": {"pose": pose([-3.0, 4.0, 0.0], ODOM_Q)},
                    "twist": {"twist": {"linear": {"x": 2.0, "y": 0.5}}},  # in the car's frame
                },
            },
            {
                "topic": "/boat/fix",
                "type": "sensor_msgs/msg/NavSatFix",
                "qos": "sensor",
                "message": {
                    "header": stamped("gps"),
                    "status": {"status": 0, "service": 1},
                    "latitude": 47.397742,
                    "longitude": 8.545594,
                    "altitude": 488.25,
                },
            },
            {
                "topic": "/chatter",
                "type": "std_msgs/msg/String",
                "qos": "reliable",
                "message": {"data": "hello"},
            },
            {
                "topic": "/broken/pose",
                "type": "geometry_msgs/msg/PoseStamped",
                "qos": "reliable",
                # Cyclone DDS itself drops bytes that are not CDR of the type (a cut sample
                # never reaches a reader); a frame id that is not UTF-8 passes it
                "raw": broken.replace(b"world", b"wor\xffd").hex(),
            },
        ],
    }


def device(world: World, source: str, device_id: str) -> dict[str, Any] | None:
    table = world.tables.get(source)
    if table is None or device_id not in table.index:
        return None
    return world.device(source, device_id).to_json()


def close(actual: Any, expected: list[float]) -> bool:
    return actual is not None and np.allclose(actual, expected, rtol=0, atol=1e-9)


def quaternion_rotate(q: list[float], v: list[float]) -> np.ndarray:
    w, x, y, z = q
    u = np.array([x, y, z])
    return np.asarray(v) + 2 * w * np.cross(u, v) + 2 * np.cross(u, np.cross(u, v))


async def test_listen_reads_what_an_independent_ros2_publisher_publishes(tmp_path: Path) -> None:
    domain_id = domain()
    with publishing(tmp_path, spec(domain_id)):
        async with listening(f"ros2://?domain={domain_id}") as (source, world):
            name = source.name
            expected_ids = {
                "robot1",
                "robot1/arm",
                "dock",
                "vrpn_mocap/rb1",
                "rover",
                "car",
                "boat",
            }

            def everything() -> bool:
                table = world.tables.get(name)
                if table is None or not expected_ids <= set(table.ids):
                    return False
                rb1 = device(world, name, "vrpn_mocap/rb1")
                return rb1 is not None and rb1.get("velocity") is not None

            await until(everything, "every published device")
            await until(lambda: len(source.problems()) >= 2, "the problems named")

            robot = device(world, name, "robot1")
            assert robot is not None
            assert close(robot["position"], [1.5, -2.25, 0.75])
            assert close(robot["orientation"], wxyz(ROBOT_Q))
            assert robot["source_time"] == pytest.approx(1700000000.123456789, abs=1e-6)
            arm = device(world, name, "robot1/arm")
            assert arm is not None  # composed through robot1: its rotation turns the offset
            offset = quaternion_rotate(wxyz(ROBOT_Q), [0.1, 0.0, 0.2])
            assert close(arm["position"], list(np.array([1.5, -2.25, 0.75]) + offset))
            assert close(arm["orientation"], wxyz(ROBOT_Q))
            dock = device(world, name, "dock")
            assert dock is not None and close(dock["position"], [5, 6, 0])
            rb1 = device(world, name, "vrpn_mocap/rb1")
            assert rb1 is not None
            assert close(rb1["position"], [0.125, 3.5, -1e-3])
            assert close(rb1["orientation"], wxyz(POSE_Q))
            assert close(rb1["velocity"], [0.5, -0.25, 0.125])
            rover = device(world, name, "rover")
            assert rover is not None and close(rover["position"], [7, 8, 9])
            car = device(world, name, "car")
            assert car is not None
            assert close(car["position"], [-3, 4, 0]) and close(car["orientation"], wxyz(ODOM_Q))
            assert close(car["velocity"], list(quaternion_rotate(wxyz(ODOM_Q), [2.0, 0.5, 0.0])))
            boat = device(world, name, "boat")
            assert boat is not None
            assert close(boat["geodetic"], [47.397742, 8.545594, 488.25])

            assert source.unreadable == {"/chatter": "std_msgs/msg/String"}
            problems = source.problems()
            assert "/chatter: type std_msgs/msg/String is not read" in problems
            assert any(p.startswith("/broken/pose: a sample is not") for p in problems)
            assert source.stats.dropped >= 2  # the broken samples, each counted
            assert source.live(0.0)  # and still up


async def test_topics_glob_and_another_reference_frame(tmp_path: Path) -> None:
    domain_id = domain()
    with publishing(tmp_path, spec(domain_id)):
        url = f"ros2://?domain={domain_id}&topics=/tf,/tf_static&frame=robot1"
        async with listening(url) as (source, world):
            await until(
                lambda: (
                    device(world, source.name, "robot1/arm") is not None
                    and device(world, source.name, "dock") is not None
                ),
                "the frames below and beside robot1",
            )
            arm = device(world, source.name, "robot1/arm")
            assert arm is not None and close(arm["position"], [0.1, 0.0, 0.2])
            assert close(arm["orientation"], [1, 0, 0, 0])
            await asyncio.sleep(0.5)
            assert set(source.topics) == {"/tf", "/tf_static"}
            assert source.unreadable == {}  # /chatter is outside the glob: not even listed
            assert set(world.tables[source.name].ids) == {"robot1/arm", "dock"}


def test_bad_urls_are_one_line_errors() -> None:
    for url, said in [
        ("ros2://?domain=999", "not a ROS 2 domain id"),
        ("ros2://?colour=red", "unknown option 'colour'"),
        ("ros2://somehost", "takes no host"),
        ("ros2://?frame=/", "names no frame"),
    ]:
        with pytest.raises(ConfigError, match=said):
            open_source(parse_endpoint(url))


async def test_a_participant_flooding_discovery_stops_nothing(tmp_path: Path) -> None:
    """Hundreds of topics at once (most of a type not read): each is listed once, a reader
    is made for each readable one, and /tf is read all along."""
    domain_id = domain()
    robot = transform("world", "robot1", [1.5, -2.25, 0.75], ROBOT_Q)
    flood = [tf_topic(robot)]
    flood += [
        {"topic": f"/flood/t{i}", "type": "std_msgs/msg/String", "qos": "reliable", "message": {}}
        for i in range(400)
    ]
    flood += [
        {
            "topic": f"/bot{i}/pose",
            "type": "geometry_msgs/msg/PoseStamped",
            "qos": "sensor",
            "message": {"header": stamped("world"), "pose": pose([i, 0.0, 0.0], [0, 0, 0, 1])},
        }
        for i in range(100)
    ]
    with publishing(tmp_path, {"domain": domain_id, "rate": 2, "topics": flood}):
        async with listening(f"ros2://?domain={domain_id}") as (source, world):
            await until(lambda: len(source.unreadable) == 400, "every flooding topic listed")
            wanted = {f"bot{i}" for i in range(100)} | {"robot1"}
            await until(
                lambda: wanted <= set(world.table(source.name).ids), "every readable topic read"
            )
            assert len(source.topics) == 101
            assert all(v == "std_msgs/msg/String" for v in source.unreadable.values())
            assert close(device(world, source.name, "bot42")["position"], [42, 0, 0])  # type: ignore[index]


async def test_what_serve_ros2_publishes_listen_ros2_reads_back() -> None:
    """Both halves together: one gateway's world on /tf (`serve ros2://`), another's
    `listen ros2://?topics=/tf`: the same devices (names through the ROS name table and back),
    positions and orientations equal within 1e-9."""
    from robowire.gateway import open_sink

    domain_id = domain()
    serving = Gateway().add(open_sink(f"ros2://?domain={domain_id}"))
    rng = np.random.default_rng(7)
    positions = rng.uniform(-50, 50, (3, 3))
    turns = rng.normal(size=(3, 4))
    turns /= np.linalg.norm(turns, axis=1, keepdims=True)
    ids = ["drone_1", "Tracker0/2", "rover"]
    served = asyncio.create_task(serving.run())
    try:
        async with listening(f"ros2://?domain={domain_id}&topics=/tf") as (source, world):

            def write() -> None:
                for i, name in enumerate(ids):
                    serving.world.update_device(
                        "site",
                        name,
                        receive_time=1.0,
                        position=positions[i],
                        orientation=turns[i],
                    )

            def arrived() -> bool:
                write()  # (again until read: the listener may join after the first)
                table = world.tables.get(source.name)
                return table is not None and set(ids) <= set(table.ids)

            await until(arrived, "the served devices")
            for i, name in enumerate(ids):
                got = device(world, source.name, name)
                assert got is not None
                assert close(got["position"], list(positions[i]))
                same_turn = close(got["orientation"], list(turns[i]))
                assert same_turn or close(got["orientation"], list(-turns[i]))  # q and -q
    finally:
        serving.stop()
        await served


def test_a_reader_is_made_again_lower_for_a_writer_that_offers_less() -> None:
    """A reliable reader matches no best-effort writer (nor a transient-local one a volatile
    writer): a later writer of the topic that offers less gets the reader made again."""
    from cyclonedds.qos import Policy, Qos

    from robowire.ros2 import dds

    source = open_source(parse_endpoint(f"ros2://?domain={domain()}"))
    assert isinstance(source, Ros2Source)
    node = source.node = dds.Node(source.domain, "OFF", "test_listen")
    source._listener = None
    try:
        pose_type = "geometry_msgs::msg::dds_::PoseStamped_"
        reliable = Qos(Policy.Reliability.Reliable(0), Policy.Durability.TransientLocal)
        source._writer_seen("rt/rb/pose", pose_type, reliable)
        first = source.topics["/rb/pose"]
        assert first.profile.reliable and first.profile.transient_local
        source._writer_seen("rt/rb/pose", pose_type, reliable)  # matched already: kept
        assert source.topics["/rb/pose"] is first
        source._writer_seen("rt/rb/pose", pose_type, Qos(Policy.Reliability.BestEffort))
        lower = source.topics["/rb/pose"]
        assert not lower.profile.reliable and not lower.profile.transient_local
        assert node.readers == [lower.reader]
    finally:
        node.close()
