"""`record … --format rosbag2`: the bags robowire writes, read by third-party code only —
rosbags' Reader (rosbag2: metadata.yaml, topics, counts, QoS) with its own CDR decoder, and
mcap-ros2-support's decoder on the storage file — with the values the world had."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from robowire.errors import ConfigError
from robowire.gateway import Gateway
from robowire.ros2.bag_recorder import BagRecorder
from robowire.sinks import open_recorder
from support import Process, free_port

STORE = get_typestore(Stores.ROS2_KILTED)
TF_TYPE, POSE, TWIST = (
    "tf2_msgs/msg/TFMessage",
    "geometry_msgs/msg/PoseStamped",
    "geometry_msgs/msg/TwistStamped",
)
STEPS = 6


def position(i: int) -> list[float]:
    return [1.0 + 0.5 * i, -2.0, 0.25 * i]


async def record_world(path: Path) -> BagRecorder:
    recorder = open_recorder(str(path), format="rosbag2")
    assert isinstance(recorder, BagRecorder)
    gateway = Gateway().add(recorder)
    task = asyncio.create_task(gateway.run())
    await asyncio.sleep(0.2)
    for i in range(STEPS):
        gateway.world.update_device(
            "lab",
            "drone1",
            receive_time=time.time(),
            source_time=1_700_000_000.25 + i,
            kind="drone",
            position=position(i),
            orientation=[1.0, 0.0, 0.0, 0.0],
            velocity=[0.5, 0.0, 0.25],
            telemetry={"battery": (90.0 - i, "%")},
        )
        await asyncio.sleep(0.02)
    gateway.world.log("lab", "drone1", "battery low", time=time.time(), level="warning")
    await asyncio.sleep(0.2)
    gateway.stop()
    await task
    return recorder


async def test_rosbags_reads_every_message_with_the_worlds_values(tmp_path: Path) -> None:
    recorder = await record_world(tmp_path / "flight")
    with Reader(tmp_path / "flight") as reader:
        topics = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
        assert topics["/tf"] == (TF_TYPE, STEPS)
        assert topics["/robowire/drone1/pose"] == (POSE, STEPS)
        assert topics["/robowire/drone1/twist"] == (TWIST, STEPS)
        assert topics["/diagnostics"][0] == "diagnostic_msgs/msg/DiagnosticArray"
        assert "/robowire/markers" in topics
        assert topics["/rosout"] == ("rcl_interfaces/msg/Log", 1)
        assert reader.message_count == sum(count for _, count in topics.values())
        assert reader.message_count == recorder.messages
        for connection in reader.connections:  # the hash of every topic's type is rosbags'
            assert connection.digest == STORE.hash_rihs01(connection.msgtype)
        xs, stamps = [], []
        for connection, _, data in reader.messages():
            message = STORE.deserialize_cdr(data, connection.msgtype)
            if connection.topic == "/tf":
                (transform,) = message.transforms
                assert (transform.header.frame_id, transform.child_frame_id) == ("world", "drone1")
                t = transform.transform.translation
                xs.append([t.x, t.y, t.z])
                stamps.append((transform.header.stamp.sec, transform.header.stamp.nanosec))
            elif connection.topic == "/rosout":
                assert (message.msg, message.level) == ("drone1: battery low", 30)  # WARN
            elif connection.topic == "/robowire/drone1/twist":
                assert message.twist.linear.x == 0.5 and message.twist.linear.z == 0.25
        assert xs == [position(i) for i in range(STEPS)]
        assert stamps == [(1_700_000_000 + i, 250_000_000) for i in range(STEPS)]


async def test_mcap_ros2_decodes_every_message(tmp_path: Path) -> None:
    recorder = await record_world(tmp_path / "flight")
    storage = tmp_path / "flight" / "flight_0.mcap"
    with open(storage, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        decoded = [
            (c.topic, s.encoding, c.message_encoding, m)
            for s, c, _, m in reader.iter_decoded_messages()
        ]
    assert len(decoded) == recorder.messages
    assert {(e, m) for _, e, m, _ in decoded} == {("ros2msg", "cdr")}
    poses = [m.pose.position for t, _, _, m in decoded if t == "/robowire/drone1/pose"]
    assert [[p.x, p.y, p.z] for p in poses] == [position(i) for i in range(STEPS)]


def test_an_existing_directory_is_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="it exists"):
        open_recorder(str(tmp_path), format="rosbag2")
    with pytest.raises(ConfigError, match="no such directory"):
        open_recorder(str(tmp_path / "no" / "bag"), format="rosbag2")


def test_record_cli_writes_a_bag_rosbags_reads(tmp_path: Path) -> None:
    """`robowire sim vrpn` and `robowire record vrpn://… -o DIR --format rosbag2`: the
    trackers as vrpn_mocap names them, /tf, in a bag rosbags reads (topics and counts)."""
    port = free_port()
    sim = Process("sim", "vrpn", "--port", str(port), "--count", "2", "--rate", "50")
    try:
        sim.wait_for("listening|serving|vrpn")
        bag = tmp_path / "flight"
        rec = Process(
            "record", f"vrpn://Tracker0@127.0.0.1:{port}", "-o", str(bag),
            "--format", "rosbag2", "--duration", "3",
        )  # fmt: skip
        rec.proc.wait(60)
        assert rec.proc.returncode == 0, rec.lines
        assert any(line.startswith("record: ") and "written to" in line for line in rec.lines)
    finally:
        sim.stop()
    with Reader(bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
    assert counts["/tf"] > 50
    poses = {t: n for t, n in counts.items() if t.startswith("/vrpn_mocap/")}
    assert all(n > 50 for n in poses.values()) and "/vrpn_mocap/Tracker0/pose" in poses, counts
