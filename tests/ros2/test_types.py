"""ROS 2 message types as data: RIHS01 hashes and definitions checked against rosbags'
ROS 2 typestore (independent code), IDL classes against rosbags' CDR."""

import pytest
from rosbags.typesys import Stores, get_typestore

from robowire.ros2 import types

STORE = get_typestore(Stores.LATEST)


@pytest.mark.parametrize("name", sorted(types.MESSAGES))
def test_type_hash_equals_rosbags(name: str) -> None:
    assert types.rihs01(name) == STORE.hash_rihs01(name)


def test_type_hash_of_rmw_zenohs_test_vector() -> None:
    # ros2/rmw_zenoh docs/design.md: the key of std_msgs/String on `chatter`
    expected = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
    assert types.rihs01("std_msgs/msg/String") == expected


@pytest.mark.parametrize("name", sorted(types.MESSAGES))
def test_fields_are_rosbags_fields(name: str) -> None:
    theirs = [field for field, _ in STORE.fielddefs[name][1]]
    assert [f.name for f in types.fields(name)] == theirs


def test_definition_is_read_by_rosbags() -> None:
    from rosbags.typesys import get_types_from_msg

    text = types.definition("geometry_msgs/msg/PoseStamped")
    top = text.split("=" * 80)[0]
    found = get_types_from_msg(top, "geometry_msgs/msg/PoseStamped")
    assert [f for f, _ in found["geometry_msgs/msg/PoseStamped"][1]] == ["header", "pose"]
    assert "MSG: std_msgs/msg/Header\nbuiltin_interfaces/Time stamp\nstring frame_id" in text


def test_idl_class_names_and_bytes() -> None:
    cls = types.idl_class("geometry_msgs/msg/PoseStamped")
    assert cls.__idl_typename__ == "geometry_msgs::msg::dds_::PoseStamped_"
    point = types.idl_class("geometry_msgs/msg/Point")(x=1.0, y=2.0, z=3.0)
    quat = types.idl_class("geometry_msgs/msg/Quaternion")(x=0.0, y=0.0, z=0.0, w=1.0)
    header = types.idl_class("std_msgs/msg/Header")(
        stamp=types.idl_class("builtin_interfaces/msg/Time")(sec=5, nanosec=6), frame_id="world"
    )
    pose = types.idl_class("geometry_msgs/msg/Pose")(position=point, orientation=quat)
    data = cls(header=header, pose=pose).serialize(use_version_2=False)
    assert data[:4] == b"\x00\x01\x00\x00"  # XCDR1, little-endian: what rmw writes
    msg = STORE.deserialize_cdr(data, "geometry_msgs/msg/PoseStamped")
    assert (msg.header.stamp.sec, msg.header.frame_id, msg.pose.position.z) == (5, "world", 3.0)


def test_unknown_type() -> None:
    with pytest.raises(KeyError, match="no definition"):
        types.fields("foo_msgs/msg/Bar")
