"""`listen BAG` / `replay BAG`: ROS 2 bags written by rosbags' Writer (MCAP and SQLite
storage, and a storage file alone) with values this test chooses, played into the world; bad
bags as one error line of the command."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from robowire.gateway import Gateway, open_source
from robowire.ros2.bag_source import BagSource
from robowire.world import World
from support import SRC

STORE = get_typestore(Stores.ROS2_KILTED)
T = STORE.types
T0 = 1_700_000_000
TF_TYPE, POSE, STRING = (
    "tf2_msgs/msg/TFMessage",
    "geometry_msgs/msg/PoseStamped",
    "std_msgs/msg/String",
)
RB1_Q = [0.0, 0.0, 0.6, 0.8]  # x y z w, a unit quaternion


def stamp(i: int) -> Any:
    return T["builtin_interfaces/msg/Time"](sec=T0 + i, nanosec=250_000_000)


def header(i: int) -> Any:
    return T["std_msgs/msg/Header"](stamp=stamp(i), frame_id="world")


def transform(child: str, xyz: list[float], i: int) -> Any:
    return T["geometry_msgs/msg/TransformStamped"](
        header=header(i),
        child_frame_id=child,
        transform=T["geometry_msgs/msg/Transform"](
            translation=T["geometry_msgs/msg/Vector3"](x=xyz[0], y=xyz[1], z=xyz[2]),
            rotation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        ),
    )


def drone_xyz(n: int, i: int) -> list[float]:
    return [n + 0.125 * i, -2.5 * n, 1.0 + 0.001 * i]


def write_flight(path: Path, plugin: StoragePlugin, steps: int = 20) -> None:
    """A flight by rosbags' Writer: /tf with drone1 and drone2 at 10 Hz, a PoseStamped of
    vrpn_mocap's rb1, and a /chatter of a type robowire does not read."""
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        tf = writer.add_connection("/tf", TF_TYPE, typestore=STORE)
        rb1 = writer.add_connection("/vrpn_mocap/rb1/pose", POSE, typestore=STORE)
        chatter = writer.add_connection("/chatter", STRING, typestore=STORE)
        for i in range(steps):
            at = T0 * 10**9 + i * 100_000_000
            transforms = [transform(f"drone{n}", drone_xyz(n, i), i) for n in (1, 2)]
            message = T[TF_TYPE](transforms=transforms)
            writer.write(tf, at, STORE.serialize_cdr(message, TF_TYPE))
            pose = T[POSE](
                header=header(i),
                pose=T["geometry_msgs/msg/Pose"](
                    position=T["geometry_msgs/msg/Point"](x=0.5, y=1.5, z=-0.25 * i),
                    orientation=T["geometry_msgs/msg/Quaternion"](
                        x=RB1_Q[0], y=RB1_Q[1], z=RB1_Q[2], w=RB1_Q[3]
                    ),
                ),
            )
            writer.write(rb1, at + 1000, STORE.serialize_cdr(pose, POSE))
            writer.write(chatter, at + 2000, STORE.serialize_cdr(T[STRING](data="hi"), STRING))


def device(world: World, source: str, device_id: str) -> dict[str, Any]:
    return world.device(source, device_id).to_json()


async def play(path: str) -> tuple[BagSource, World]:
    source = open_source(path)
    assert isinstance(source, BagSource)
    gateway = Gateway().add(source)
    await gateway.run(30.0)  # a file source ends at its end
    return source, gateway.world


@pytest.mark.parametrize("plugin", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
async def test_a_rosbags_bag_plays_into_the_world(tmp_path: Path, plugin: StoragePlugin) -> None:
    write_flight(tmp_path / "flight", plugin)
    source, world = await play(f"{tmp_path / 'flight'}?speed=0")
    name = source.name
    assert set(world.tables[name].ids) == {"drone1", "drone2", "vrpn_mocap/rb1"}
    for n in (1, 2):
        drone = device(world, name, f"drone{n}")
        assert np.allclose(drone["position"], drone_xyz(n, 19), rtol=0, atol=1e-9)
        assert drone["source_time"] == pytest.approx(T0 + 19.25, abs=1e-6)
    rb1 = device(world, name, "vrpn_mocap/rb1")
    assert np.allclose(rb1["position"], [0.5, 1.5, -0.25 * 19], rtol=0, atol=1e-9)
    w_first = [RB1_Q[3], *RB1_Q[:3]]
    assert np.allclose(rb1["orientation"], w_first, rtol=0, atol=1e-9)
    assert "/chatter: type std_msgs/msg/String is not read" in source.problems()
    assert source.stats.messages_in == 40  # /tf and the pose; /chatter is not read


async def test_a_bare_ros2_mcap_plays_too(tmp_path: Path) -> None:
    write_flight(tmp_path / "flight", StoragePlugin.MCAP, steps=3)
    alone = tmp_path / "flight.mcap"
    (tmp_path / "flight" / "flight.mcap").rename(alone)
    source, world = await play(f"{alone}?speed=0")
    drone = device(world, source.name, "drone2")
    assert np.allclose(drone["position"], drone_xyz(2, 2), rtol=0, atol=1e-9)


async def test_replay_keeps_the_recorded_pace(tmp_path: Path) -> None:
    write_flight(tmp_path / "flight", StoragePlugin.MCAP, steps=11)  # 1.0 s of flight
    source = open_source(f"{tmp_path / 'flight'}?speed=2")
    assert isinstance(source, BagSource)
    gateway = Gateway().add(source)
    loop_time = asyncio.get_running_loop().time
    began = loop_time()
    await gateway.run(30.0)
    took = loop_time() - began
    assert 0.45 <= took < 5.0  # half a second at twice the speed (at least)
    assert source.progress.duration == pytest.approx(1.0, abs=1e-5)  # (/chatter 2 us later)
    assert source.progress.position == pytest.approx(1.0, abs=1e-5)


def robowire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "robowire.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p.mkdir(), "no metadata.yaml, so not a rosbag2 bag"),
        (
            lambda p: (p.with_suffix(".bag")).write_bytes(b"#ROSBAG V2.0\n" + bytes(64)),
            "a ROS 1 bag",
        ),
    ],
)
def test_bad_bags_are_one_line(tmp_path: Path, make: Any, said: str) -> None:
    target = tmp_path / "x"
    make(target)
    path = target if target.exists() else target.with_suffix(".bag")
    done = robowire("replay", str(path), "--json", "--quiet")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_storage_plugin_and_unread_types_are_one_line(tmp_path: Path) -> None:
    write_flight(tmp_path / "flight", StoragePlugin.MCAP, steps=2)
    meta = tmp_path / "flight" / "metadata.yaml"
    meta.write_text(meta.read_text().replace("storage_identifier: mcap", "storage_identifier: x"))
    done = robowire("listen", str(tmp_path / "flight"), "--json", "--duration", "5")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "storage plugin 'x' is not one robowire reads" in lines[0], lines
    with Writer(tmp_path / "talk", version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        chatter = writer.add_connection("/chatter", STRING, typestore=STORE)
        writer.write(chatter, 1, STORE.serialize_cdr(T[STRING](data="hi"), STRING))
    done = robowire("replay", str(tmp_path / "talk"), "--json", "--quiet")
    assert done.returncode != 0
    assert "no topic of a type robowire reads (it has std_msgs/msg/String" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
