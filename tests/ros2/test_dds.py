"""The DDS settings as ROS 2 reads them (robowire.ros2.dds): domain, discovery range, the
Cyclone DDS configuration each range means; QoS profiles as tf2 and rclcpp offer them."""

import pytest

from robowire.errors import ConfigError
from robowire.ros2 import dds


def test_domain_from_the_url_then_the_environment() -> None:
    assert dds.domain_id(None, {}) == 0
    assert dds.domain_id(None, {"ROS_DOMAIN_ID": " 42 "}) == 42
    assert dds.domain_id("7", {"ROS_DOMAIN_ID": "42"}) == 7
    with pytest.raises(ConfigError, match="0 to 232"):
        dds.domain_id("233", {})
    with pytest.raises(ConfigError, match="ROS_DOMAIN_ID=x: not a number"):
        dds.domain_id(None, {"ROS_DOMAIN_ID": "x"})


@pytest.mark.parametrize(
    ("environ", "scope"),
    [
        ({}, "SUBNET"),
        ({"ROS_LOCALHOST_ONLY": "1"}, "LOCALHOST"),
        ({"ROS_LOCALHOST_ONLY": "0"}, "SUBNET"),
        ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "localhost"}, "LOCALHOST"),
        ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF", "ROS_LOCALHOST_ONLY": "1"}, "OFF"),
        ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT"}, "SUBNET"),
        ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "ROS_LOCALHOST_ONLY": "1"}, "SUBNET"),
    ],
)
def test_discovery_range_as_ros2_reads_it(environ: dict[str, str], scope: str) -> None:
    assert dds.discovery_range(environ) == scope


def test_a_bad_range_is_one_line() -> None:
    with pytest.raises(ConfigError, match="ROS_AUTOMATIC_DISCOVERY_RANGE=LAN: not one of"):
        dds.discovery_range({"ROS_AUTOMATIC_DISCOVERY_RANGE": "lan"})


def test_cyclone_configuration_of_each_range() -> None:
    linger = f"<CycloneDDS><Domain Id='any'>{dds.WRITER_LINGER}</Domain></CycloneDDS>"
    assert dds.cyclone_config("SUBNET", {}) == linger
    local = dds.cyclone_config("LOCALHOST", {})
    assert "address='127.0.0.1'" in local and "multicast='true'" in local
    off = dds.cyclone_config("OFF", {})
    assert "<AllowMulticast>false</AllowMulticast>" in off
    # the user's file overrides our linger, and the range overrides the user's interfaces
    user = dds.cyclone_config("LOCALHOST", {"CYCLONEDDS_URI": "file:///etc/dds.xml"})
    assert user.startswith(f"{linger},file:///etc/dds.xml,<CycloneDDS>")
    assert dds.cyclone_config("SUBNET", {"CYCLONEDDS_URI": "x.xml"}) == f"{linger},x.xml"


def test_profiles_are_tf2s_and_rclcpps() -> None:
    assert (dds.TF.reliable, dds.TF.transient_local, dds.TF.depth) == (True, False, 100)
    assert (dds.TF_STATIC.transient_local, dds.TF_STATIC.depth) == (True, 1)
    assert (dds.SENSOR.reliable, dds.SENSOR.depth) == (False, 5)
    assert (dds.DISCOVERY_INFO.transient_local, dds.DISCOVERY_INFO.depth) == (True, 1)


def test_closing_one_node_leaves_another_on_the_same_domain_working() -> None:
    """A serve and a listen in one gateway share a domain: one ending must not end the other
    (deleting a cyclonedds Domain deletes every participant in it)."""
    import os
    import random
    import time

    from rosbags.typesys import Stores, get_typestore

    from robowire.ros2 import cdr

    domain = random.Random(os.getpid()).randrange(100, 230)
    first = dds.Node(domain, "LOCALHOST", environ={})
    second = dds.Node(domain, "LOCALHOST", environ={})
    writer = second.writer("/chatter", "std_msgs/msg/String", dds.RELIABLE)
    reader = second.reader("rt/chatter", "std_msgs/msg/String", dds.RELIABLE)
    first.close()
    writer.write(cdr.encode("std_msgs/msg/String", {"data": "still here"}))
    for _ in range(100):
        got = reader.take()
        if got:
            break
        time.sleep(0.05)
    store = get_typestore(Stores.LATEST)  # (DDS pads a sample to 4 bytes: rosbags allows it)
    assert [store.deserialize_cdr(data, "std_msgs/msg/String").data for data, _ in got] == [
        "still here"
    ]
    second.close()
