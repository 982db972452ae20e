"""rosbag2 bags as containers (robowire.ros2.bag), checked against third-party code only:
bags read are written by rosbags' Writer (MCAP and SQLite storage) with values this test
chooses; bags written are read back by rosbags' Reader and mcap-ros2-support's decoder."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from mcap_ros2.writer import Writer as McapRos2Writer
from rosbags.rosbag2 import CompressionFormat, CompressionMode, Reader, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from robowire.errors import ConfigError, DecodeError
from robowire.ros2.bag import BagWriter, Qos, Topic, open_bag, read

STORE = get_typestore(Stores.ROS2_KILTED)
POSE = "geometry_msgs/msg/PoseStamped"
TF = "tf2_msgs/msg/TFMessage"
T0 = 1_700_000_000 * 10**9


def pose(i: int) -> bytes:
    t = STORE.types
    msg = t[POSE](
        header=t["std_msgs/msg/Header"](
            stamp=t["builtin_interfaces/msg/Time"](sec=1_700_000_000 + i, nanosec=7),
            frame_id="world",
        ),
        pose=t["geometry_msgs/msg/Pose"](
            position=t["geometry_msgs/msg/Point"](x=1.5 * i, y=-2.0, z=3.25),
            orientation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        ),
    )
    return bytes(STORE.serialize_cdr(msg, POSE))


def empty_tf() -> bytes:
    return bytes(STORE.serialize_cdr(STORE.types[TF](transforms=[]), TF))


def write_bag(
    path: Path, plugin: StoragePlugin, poses: int = 5, version: Literal[8, 9] = 9
) -> list[tuple[int, str, bytes]]:
    """A bag by rosbags' Writer: `poses` poses on /drone1/pose and an empty /tf between them;
    returns what it wrote, in time order."""
    wrote: list[tuple[int, str, bytes]] = []
    with Writer(path, version=version, storage_plugin=plugin) as writer:
        poses_conn = writer.add_connection("/drone1/pose", POSE, typestore=STORE)
        tf_conn = writer.add_connection("/tf", TF, typestore=STORE)
        for i in range(poses):
            at = T0 + i * 100_000_000
            writer.write(poses_conn, at, pose(i))
            writer.write(tf_conn, at + 50_000_000, empty_tf())
            wrote += [(at, "/drone1/pose", pose(i)), (at + 50_000_000, "/tf", empty_tf())]
    return wrote


@pytest.mark.parametrize("version", [8, 9])  # Iron's metadata (QoS as a YAML string), Jazzy's
@pytest.mark.parametrize("plugin", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_a_rosbags_bag_reads_with_its_topics_times_and_bytes(
    tmp_path: Path, plugin: StoragePlugin, version: Literal[8, 9]
) -> None:
    wrote = write_bag(tmp_path / "flight", plugin, version=version)
    bag = open_bag(str(tmp_path / "flight"))
    assert bag.storage == ("mcap" if plugin == StoragePlugin.MCAP else "sqlite3")
    assert {n: t.type for n, t in bag.topics.items()} == {"/drone1/pose": POSE, "/tf": TF}
    assert bag.counts == {"/drone1/pose": 5, "/tf": 5}
    assert bag.start == T0
    assert bag.duration == 450_000_000
    got = [(m.time, m.topic.name, m.data) for m in read(bag)]
    assert got == wrote
    first = next(iter(read(bag)))
    assert first.topic.type == POSE
    assert first.topic.type_hash == STORE.hash_rihs01(POSE)


@pytest.mark.parametrize(
    ("plugin", "suffix"), [(StoragePlugin.MCAP, ".mcap"), (StoragePlugin.SQLITE3, ".db3")]
)
def test_a_storage_file_reads_alone(tmp_path: Path, plugin: StoragePlugin, suffix: str) -> None:
    wrote = write_bag(tmp_path / "flight", plugin)
    alone = tmp_path / f"alone{suffix}"
    shutil.copy(next((tmp_path / "flight").glob(f"*{suffix}")), alone)
    bag = open_bag(str(alone))
    assert bag.counts == {"/drone1/pose": 5, "/tf": 5}
    assert bag.start == T0 and bag.duration == 450_000_000
    assert [(m.time, m.topic.name, m.data) for m in read(bag)] == wrote
    assert {t.type for t in bag.topics.values()} == {POSE, TF}


def chunked_bag(storage: Path, poses: int = 2000) -> None:
    """A bare ROS 2 MCAP in small chunks. rosbags' Writer puts a whole bag in one chunk;
    mcap-ros2-support's writer closes one every `chunk_size` bytes, as rosbag2's MCAP storage
    does: the shape of a long recording."""
    definition = STORE.generate_msgdef(POSE, ros_version=2)[0]
    with open(storage, "wb") as f:
        writer = McapRos2Writer(f, chunk_size=4096)
        schema = writer.register_msgdef(POSE, definition)
        for i in range(poses):
            as_dict = {
                "header": {"stamp": {"sec": 1_700_000_000 + i, "nanosec": 7}, "frame_id": "world"},
                "pose": {
                    "position": {"x": 1.5 * i, "y": -2.0, "z": 3.25},
                    "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0},
                },
            }
            writer.write_message("/drone1/pose", schema, as_dict, T0 + i * 10**6)
        writer.finish()


def chunk_after(data: bytes, offset: int) -> int:
    """Where the first chunk record at or after `offset` starts (MCAP records: an opcode
    byte, a u64 length, the body; chunks are opcode 0x06)."""
    at = 8  # the magic
    while at < len(data):
        opcode, length = data[at], int.from_bytes(data[at + 1 : at + 9], "little")
        if opcode == 0x06 and at >= offset:
            return at
        at += 9 + length
    raise AssertionError("no chunk there")


@pytest.mark.parametrize("damage", ["cut", "corrupt"])
def test_a_damaged_mcap_plays_up_to_the_damage_and_says_where(tmp_path: Path, damage: str) -> None:
    storage = tmp_path / "flight.mcap"
    chunked_bag(storage)
    data = bytearray(storage.read_bytes())
    middle = len(data) // 2
    if damage == "cut":
        del data[middle:]  # the second half lost, as by a kill
    else:  # the compressed records of the chunk after the middle overwritten
        at = chunk_after(bytes(data), middle) + 9 + 60
        data[at : at + 64] = b"\xff" * 64
    storage.write_bytes(bytes(data))
    got: list[float] = []
    with pytest.raises(DecodeError) as cut:
        for message in read(open_bag(str(storage))):
            got.append(STORE.deserialize_cdr(message.data, POSE).pose.position.x)
    assert 100 < len(got) < 2000
    assert got == [1.5 * i for i in range(len(got))]
    assert storage.name in str(cut.value)
    assert f"cut or damaged here ({len(got)} messages of the bag played)" in str(cut.value)
    assert "at byte" in str(cut.value)


def test_a_damaged_sqlite_bag_says_so_in_one_line(tmp_path: Path) -> None:
    write_bag(tmp_path / "flight", StoragePlugin.SQLITE3)
    storage = next((tmp_path / "flight").glob("*.db3"))
    storage.write_bytes(b"SQLite format 3\0" + bytes(100))
    with pytest.raises(ConfigError, match=r"not a readable rosbag2 SQLite file"):
        list(read(open_bag(str(tmp_path / "flight"))))


def test_a_directory_without_metadata_is_not_a_bag(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    with pytest.raises(ConfigError, match=r"no metadata.yaml, so not a rosbag2 bag"):
        open_bag(str(tmp_path / "x"))


def test_an_unknown_storage_plugin_is_named(tmp_path: Path) -> None:
    write_bag(tmp_path / "flight", StoragePlugin.MCAP)
    meta = tmp_path / "flight" / "metadata.yaml"
    meta.write_text(
        meta.read_text().replace("storage_identifier: mcap", "storage_identifier: hdf5")
    )
    with pytest.raises(ConfigError, match=r"storage plugin 'hdf5' is not one robowire reads"):
        open_bag(str(tmp_path / "flight"))


def test_a_ros1_bag_is_named_as_one(tmp_path: Path) -> None:
    ros1 = tmp_path / "old.bag"
    ros1.write_bytes(b"#ROSBAG V2.0\n" + bytes(4096))  # the ROS 1 bag format's first line
    with pytest.raises(ConfigError, match=r"a ROS 1 bag; robowire reads ROS 2 bags"):
        open_bag(str(ros1))


def test_not_a_bag_at_all(tmp_path: Path) -> None:
    junk = tmp_path / "junk.mcap"
    junk.write_bytes(b"hello, world" * 10)
    with pytest.raises(ConfigError, match=r"not a ROS 2 bag"):
        open_bag(str(junk))


# -- writing -----------------------------------------------------------------------------------


def written_bag(path: Path) -> None:
    writer = BagWriter(str(path))
    definition = STORE.generate_msgdef(POSE, ros_version=2)[0]
    topic = Topic("/drone1/pose", POSE, definition, STORE.hash_rihs01(POSE))
    channel = writer.topic(topic, Qos("reliable", "volatile", 10))
    tf_definition = STORE.generate_msgdef(TF, ros_version=2)[0]
    tf = writer.topic(
        Topic("/tf_static", TF, tf_definition, STORE.hash_rihs01(TF)),
        Qos("reliable", "transient_local", 1),
    )
    for i in range(4):
        writer.write(channel, T0 + i * 10**9, pose(i))
    writer.write(tf, T0, empty_tf())
    writer.close()


def test_a_written_bag_reads_in_rosbags(tmp_path: Path) -> None:
    written_bag(tmp_path / "out")
    with Reader(tmp_path / "out") as reader:
        assert reader.message_count == 5
        assert {c.topic: (c.msgtype, c.msgcount) for c in reader.connections} == {
            "/drone1/pose": (POSE, 4),
            "/tf_static": (TF, 1),
        }
        static = next(c for c in reader.connections if c.topic == "/tf_static")
        qos = static.ext.offered_qos_profiles[0]
        assert (qos.durability.name, qos.depth) == ("TRANSIENT_LOCAL", 1)
        xs = []
        for connection, nanos, data in reader.messages():
            msg = STORE.deserialize_cdr(data, connection.msgtype)
            if connection.topic == "/drone1/pose":
                i = (nanos - T0) // 10**9
                xs.append(msg.pose.position.x)
                assert msg.header.stamp.sec == 1_700_000_000 + i
                assert msg.header.frame_id == "world"
        assert xs == [0.0, 1.5, 3.0, 4.5]
        assert reader.duration == 3 * 10**9 + 1


def test_a_written_bags_metadata_spells_every_value_out(tmp_path: Path) -> None:
    """rosbag2 writes the bag's and each file's duration and start in full; YAML anchors and
    aliases (`&id001`, `*id001`) are valid YAML that not every reader of metadata.yaml follows."""
    written_bag(tmp_path / "out")
    text = (tmp_path / "out" / "metadata.yaml").read_text()
    assert "&" not in text and "*" not in text
    assert text.count("nanoseconds:") == 2  # the bag's duration, and its one file's


def test_a_written_bag_decodes_in_mcap_ros2(tmp_path: Path) -> None:
    written_bag(tmp_path / "out")
    storage = tmp_path / "out" / "out_0.mcap"
    with open(storage, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        seen = [
            (channel.topic, schema.encoding, channel.message_encoding, decoded)
            for schema, channel, _, decoded in reader.iter_decoded_messages()
        ]
    poses = [d.pose.position.x for topic, *_, d in seen if topic == "/drone1/pose"]
    assert poses == [0.0, 1.5, 3.0, 4.5]
    assert {(s[1], s[2]) for s in seen} == {("ros2msg", "cdr")}


def test_a_written_bag_reads_back_with_its_hash_and_qos(tmp_path: Path) -> None:
    written_bag(tmp_path / "out")
    bag = open_bag(str(tmp_path / "out"))
    assert bag.counts == {"/drone1/pose": 4, "/tf_static": 1}
    assert bag.topics["/tf_static"].type_hash == STORE.hash_rihs01(TF)
    assert "transient_local" in next(m.topic.qos for m in read(bag) if m.topic.name == "/tf_static")


def test_writing_over_something_that_exists_is_refused(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(ConfigError, match=r"it exists"):
        BagWriter(str(tmp_path / "out"))


def test_sqlite_damage_midway_plays_what_came_before(tmp_path: Path) -> None:
    write_bag(tmp_path / "flight", StoragePlugin.SQLITE3, poses=2)
    storage = next((tmp_path / "flight").glob("*.db3"))
    with sqlite3.connect(storage) as db:  # a message of a topic the bag never declared
        db.execute(
            "INSERT INTO messages (topic_id, timestamp, data) VALUES (99, ?, x'00')", (T0 + 10**9,)
        )
    got = []
    with pytest.raises(DecodeError, match=r"unknown topic 99"):
        got.extend(read(open_bag(str(tmp_path / "flight"))))
    assert len(got) == 4


# -- damage, at random -------------------------------------------------------------------------

MCAP_BAG: dict[str, bytes] = {}


def storage_bytes(plugin: StoragePlugin, suffix: str) -> bytes:
    """A small bag's storage file by rosbags' Writer (made once)."""
    if suffix not in MCAP_BAG:
        with tempfile.TemporaryDirectory() as tmp:
            write_bag(Path(tmp) / "b", plugin, poses=3)
            MCAP_BAG[suffix] = next((Path(tmp) / "b").glob(f"*{suffix}")).read_bytes()
    return MCAP_BAG[suffix]


def play_all(path: Path) -> int:
    """How many messages a damaged file plays; only a one-line error is allowed besides."""
    played = 0
    try:
        for _ in read(open_bag(str(path))):
            played += 1
    except (ConfigError, DecodeError):
        pass
    return played


@pytest.mark.parametrize(
    ("plugin", "suffix"), [(StoragePlugin.MCAP, ".mcap"), (StoragePlugin.SQLITE3, ".db3")]
)
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_storage_files_play_or_say_so(
    tmp_path: Path, plugin: StoragePlugin, suffix: str, data: st.DataObject
) -> None:
    original = bytearray(storage_bytes(plugin, suffix))
    flips = data.draw(
        st.lists(st.tuples(st.integers(0, len(original) - 1), st.integers(0, 255)), max_size=8)
    )
    for at, value in flips:
        original[at] = value
    cut = data.draw(st.integers(0, len(original)))
    path = tmp_path / f"damaged{suffix}"
    path.write_bytes(bytes(original[:cut]))
    assert 0 <= play_all(path) <= 6


@given(st.binary(max_size=512))
@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_bytes_are_not_a_bag(tmp_path: Path, data: bytes) -> None:
    for head in (b"", b"\x89MCAP0\r\n", b"SQLite format 3\0"):
        path = tmp_path / "random.mcap"
        path.write_bytes(head + data)
        play_all(path)


def test_message_compressed_bags_read_and_file_compressed_say_so(tmp_path: Path) -> None:
    for mode, name in ((CompressionMode.MESSAGE, "messages"), (CompressionMode.FILE, "file")):
        writer = Writer(tmp_path / name, version=9, storage_plugin=StoragePlugin.SQLITE3)
        writer.set_compression(mode, CompressionFormat.ZSTD)
        with writer:
            connection = writer.add_connection("/drone1/pose", POSE, typestore=STORE)
            for i in range(3):
                writer.write(connection, T0 + i, pose(i))
    assert [m.data for m in read(open_bag(str(tmp_path / "messages")))] == [
        pose(i) for i in range(3)
    ]
    with pytest.raises(ConfigError, match=r"zstd file-compressed bags are not read"):
        open_bag(str(tmp_path / "file"))


def test_a_split_bag_reads_its_files_in_the_order_metadata_lists_them(tmp_path: Path) -> None:
    """rosbag2 splits a long recording (--max-bag-size) into storage files that metadata.yaml
    lists in order: two bags by rosbags' Writer, the second's file moved into the first."""
    first = write_bag(tmp_path / "split", StoragePlugin.MCAP, poses=2)
    later = [(t + 10**9, topic, data) for t, topic, data in first]
    with Writer(tmp_path / "part", version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connections = {
            "/drone1/pose": writer.add_connection("/drone1/pose", POSE, typestore=STORE),
            "/tf": writer.add_connection("/tf", TF, typestore=STORE),
        }
        for at, topic, data in later:
            writer.write(connections[topic], at, data)
    (tmp_path / "part" / "part.mcap").rename(tmp_path / "split" / "split_1.mcap")
    meta = tmp_path / "split" / "metadata.yaml"
    meta.write_text(meta.read_text().replace("  - split.mcap", "  - split.mcap\n  - split_1.mcap"))
    got = [(m.time, m.topic.name, m.data) for m in read(open_bag(str(tmp_path / "split")))]
    assert got == first + later
