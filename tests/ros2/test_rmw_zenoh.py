"""rmw_zenoh's format (robowire.ros2.rmw_zenoh), field by field against the examples of
rmw_zenoh's docs/design.md (ros2/rmw_zenoh, "Topic and Service name mapping to Zenoh key
expressions", "Graph Cache", "Publishers"); hashes against rosbags' hash_rihs01."""

from __future__ import annotations

import struct

import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st
from rosbags.typesys import Stores, get_typestore

from robowire.errors import DecodeError
from robowire.ros2 import types
from robowire.ros2.dds import Profile
from robowire.ros2.rmw_zenoh import (
    NODE,
    PUBLISHER,
    SUBSCRIPTION,
    Entity,
    attachment,
    data_key,
    parse_attachment,
    parse_data_key,
    parse_qos_key,
    parse_token,
    qos_key,
)

STRING_HASH = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"
"""std_msgs/msg/String's hash, as the design document prints it."""
STORE = get_typestore(Stores.ROS2_KILTED)


def test_the_string_hash_is_the_design_documents_vector() -> None:
    assert types.rihs01("std_msgs/msg/String") == STRING_HASH


@pytest.mark.parametrize("name", sorted(types.MESSAGES))
def test_every_hash_is_rosbags_hash(name: str) -> None:
    if name not in STORE.types:
        pytest.fail(f"{name} is not in rosbags' Kilted typestore")
    assert types.rihs01(name) == STORE.hash_rihs01(name)


def test_data_keys_are_the_design_documents() -> None:
    assert (
        data_key(0, "/chatter", "std_msgs/msg/String", STRING_HASH)
        == f"0/chatter/std_msgs::msg::dds_::String_/{STRING_HASH}"
    )
    assert (
        data_key(0, "/robot1/chatter", "std_msgs/msg/String", STRING_HASH)
        == f"0/robot1/chatter/std_msgs::msg::dds_::String_/{STRING_HASH}"
    )
    parsed = parse_data_key(f"0/robot1/chatter/std_msgs::msg::dds_::String_/{STRING_HASH}")
    assert parsed is not None
    assert (parsed.domain, parsed.topic, parsed.ros_type, parsed.type_hash) == (
        0,
        "/robot1/chatter",
        "std_msgs/msg/String",
        STRING_HASH,
    )


@pytest.mark.parametrize(
    "key",
    ["", "x/tf/a::msg::dds_::B_/RIHS01_0", "0/tf/NotAType/RIHS01_0", "0/std_msgs::msg::dds_::S_/x"],
)
def test_what_is_not_a_data_key(key: str) -> None:
    assert parse_data_key(key) is None


LISTENER = "@ros2_lv/2/aac3178e146ba6f1fc6e6a4085e77f21/0/0/NN/%/%/listener"
SUBSCRIBER = (
    "@ros2_lv/2/aac3178e146ba6f1fc6e6a4085e77f21/0/10/MS/%/%/listener/%chatter/"
    f"std_msgs::msg::dds_::String_/{STRING_HASH}/::,10:,:,:,,"
)
TALKER = (
    "@ros2_lv/2/8b20917502ee955ac4476e0266340d5c/0/10/MP/%/%/talker/%chatter/"
    f"std_msgs::msg::dds_::String_/{STRING_HASH}/::,7:,:,:,,"
)


def test_a_node_token_is_the_design_documents() -> None:
    node = Entity(2, "aac3178e146ba6f1fc6e6a4085e77f21", 0, 0, NODE, "listener")
    assert node.token() == LISTENER
    assert parse_token(LISTENER) == node


@pytest.mark.parametrize(
    ("token", "session", "kind", "node", "depth"),
    [
        (SUBSCRIBER, "aac3178e146ba6f1fc6e6a4085e77f21", SUBSCRIPTION, "listener", 10),
        (TALKER, "8b20917502ee955ac4476e0266340d5c", PUBLISHER, "talker", 7),
    ],
)
def test_publisher_and_subscription_tokens_are_the_design_documents(
    token: str, session: str, kind: str, node: str, depth: int
) -> None:
    entity = Entity(
        domain=2,
        session=session,
        node_id=0,
        entity_id=10,
        kind=kind,
        node=node,
        topic="/chatter",
        ros_type="std_msgs/msg/String",
        type_hash=types.rihs01("std_msgs/msg/String"),
        qos=Profile(reliable=True, transient_local=False, depth=depth),
    )
    assert entity.token() == token
    parsed = parse_token(token)
    assert parsed == entity
    fields = token.split("/")  # field by field, as the document lists them
    assert fields[0] == "@ros2_lv" and fields[1] == "2" and fields[2] == session
    assert (fields[3], fields[4], fields[5]) == ("0", "10", kind)
    assert (fields[6], fields[7], fields[8], fields[9]) == ("%", "%", node, "%chatter")
    assert (fields[10], fields[11]) == ("std_msgs::msg::dds_::String_", STRING_HASH)


def test_a_namespaced_node_and_topic_are_mangled() -> None:
    entity = Entity(
        0, "ab", 1, 3, PUBLISHER, "robowire", "/mocap/lab", "/", "/mocap/lab/tf",
        "tf2_msgs/msg/TFMessage", types.rihs01("tf2_msgs/msg/TFMessage"), Profile(True, False, 100),
    )  # fmt: skip
    token = entity.token()
    assert "/%mocap%lab/robowire/%mocap%lab%tf/tf2_msgs::msg::dds_::TFMessage_/" in token
    assert parse_token(token) == entity


@pytest.mark.parametrize(
    ("profile", "text"),
    [
        (Profile(True, False, 42), "::,:,:,:,,"),  # every field rmw_zenoh's default
        (Profile(True, False, 100), "::,100:,:,:,,"),  # /tf as tf2 broadcasts it
        (Profile(True, True, 1), ":1:,1:,:,:,,"),  # /tf_static: transient local, depth 1
        (Profile(False, False, 5), "2::,5:,:,:,,"),  # sensor data: best effort, depth 5
    ],
)
def test_qos_in_rmw_zenohs_compact_form(profile: Profile, text: str) -> None:
    assert qos_key(profile) == text
    assert parse_qos_key(text) == profile


def test_the_attachment_field_by_field() -> None:
    gid = bytes(range(1, 17))
    data = attachment(7, 1_700_000_000_123_456_789, gid)
    assert len(data) == 8 + 8 + 1 + 16
    assert struct.unpack_from("<q", data, 0)[0] == 7  # sequence number, int64 LE
    assert struct.unpack_from("<q", data, 8)[0] == 1_700_000_000_123_456_789  # ns, int64 LE
    assert data[16] == 16  # the GID's length
    assert data[17:] == gid
    parsed = parse_attachment(data)
    assert (parsed.sequence, parsed.nanos, parsed.gid) == (7, 1_700_000_000_123_456_789, gid)


def test_the_gid_is_xxh3_128_of_the_token_low_half_first() -> None:
    talker = parse_token(TALKER)
    assert talker is not None
    value = xxhash.xxh3_128_intdigest(TALKER.encode())
    low, high = value & (2**64 - 1), value >> 64
    assert talker.gid == low.to_bytes(8, "little") + high.to_bytes(8, "little")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (None, "without the attachment"),
        (b"", "0 bytes"),
        (bytes(32), "32 bytes"),
        (bytes(16) + b"\x08" + bytes(16), "a GID of 8 bytes"),
    ],
)
def test_a_bad_attachment_is_a_decode_error(data: bytes | None, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        parse_attachment(data)


@given(st.binary(max_size=64))
def test_random_attachments_decode_or_raise_decode_error(data: bytes) -> None:
    try:
        parsed = parse_attachment(data)
    except DecodeError:
        return
    assert attachment(parsed.sequence, parsed.nanos, parsed.gid) == data


@given(st.text(max_size=200))
def test_random_keys_are_tokens_or_none(text: str) -> None:
    entity = parse_token(text)
    if entity is not None:
        assert parse_token(entity.token()) == entity
    parse_data_key(text)


NAME = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


@given(
    st.integers(0, 232),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.sampled_from([PUBLISHER, SUBSCRIPTION]),
    st.lists(NAME, max_size=3),
    NAME,
    st.sampled_from(sorted(types.MESSAGES)),
    st.booleans(),
    st.booleans(),
    st.integers(1, 1000),
)
def test_entity_tokens_round_trip(
    domain: int,
    node_id: int,
    entity_id: int,
    kind: str,
    namespace: list[str],
    topic: str,
    ros_type: str,
    reliable: bool,
    transient: bool,
    depth: int,
) -> None:
    ns = "/" + "/".join(namespace)
    entity = Entity(
        domain, "0123abcd", node_id, entity_id, kind, "robowire", ns, "/",
        ns.rstrip("/") + "/" + topic, ros_type, types.rihs01(ros_type),
        Profile(reliable, transient, depth),
    )  # fmt: skip
    assert parse_token(entity.token()) == entity
