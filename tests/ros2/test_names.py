"""Device names <-> ROS names and frames, and ROS <-> DDS names (robowire.ros2.names)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from robowire.ros2 import names


@pytest.mark.parametrize(
    ("device", "ros"),
    [
        ("drone_12", "drone_12"),
        ("Tracker0/1", "Tracker0/_1"),
        ("12", "_12"),
        ("rigid body.left", "rigid_body_left"),
        ("a--b", "a_b"),
        ("", "unnamed"),
        ("/", "unnamed"),
        ("//x//y/", "x/y"),
        ("héllo", "h_llo"),
    ],
)
def test_the_documented_table(device: str, ros: str) -> None:
    assert names.ros_name(device) == ros
    assert names.is_legal(ros)


@given(st.text(max_size=40))
def test_every_name_becomes_a_legal_ros_name(device: str) -> None:
    assert names.is_legal(names.ros_name(device))


@given(st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9]|_(?!_))*(/[A-Za-z0-9]+)*", fullmatch=True))
def test_names_made_of_letters_digits_and_slashes_come_back(device: str) -> None:
    if device.endswith("_"):
        return
    assert names.device_name(names.ros_name(device)) == device
    assert not names.changed(device)


def test_changed_names_are_said_to_be() -> None:
    assert names.changed("rigid body")
    assert not names.changed("Tracker0/0")


@pytest.mark.parametrize("bad", ["1abc", "a__b", "a//b", "a b", "a/", ""])
def test_illegal_names(bad: str) -> None:
    assert not names.is_legal(bad)


def test_dds_names() -> None:
    assert names.dds_topic("/tf") == "rt/tf"
    assert names.dds_topic("/vrpn_mocap/Tracker0/pose") == "rt/vrpn_mocap/Tracker0/pose"
    assert names.ros_topic("rt/tf") == "/tf"
    assert names.ros_topic("ros_discovery_info") is None
    assert names.dds_type("tf2_msgs/msg/TFMessage") == "tf2_msgs::msg::dds_::TFMessage_"
    assert names.dds_type("geometry_msgs/PoseStamped") == "geometry_msgs::msg::dds_::PoseStamped_"
    assert names.ros_type("tf2_msgs::msg::dds_::TFMessage_") == "tf2_msgs/msg/TFMessage"
    assert names.ros_type("DCPSParticipant") is None


def test_namespaces() -> None:
    assert names.namespace("robowire") == "/robowire"
    assert names.namespace("/lab/1/") == "/lab/_1"
    assert names.namespace("") == ""
    assert names.join("/robowire", "drone_1", "pose") == "/robowire/drone_1/pose"
    assert names.join("", "tf") == "/tf"
