"""robowire's ROS 2 node on Zenoh (robowire.ros2.zenoh_node) at a router played by zenoh's
own router mode on 127.0.0.1 (a free port), seen by a subscriber written with zenoh alone as
an rmw_zenoh node would subscribe: the data key, the attachment of every sample, the
liveliness tokens, and the bytes (decoded by rosbags' typestore, not robowire's code)."""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import zenoh
import zenoh.ext
from rosbags.typesys import Stores, get_typestore

from robowire.ros2 import types
from robowire.ros2.dds import TF, TF_STATIC
from robowire.ros2.zenoh_node import ZenohNode
from support import free_port

STORE = get_typestore(Stores.ROS2_KILTED)
TF_TYPE = "tf2_msgs/msg/TFMessage"


def session(port: int, mode: str) -> Any:
    # no multicast scouting, so nothing to wait for (its default delay holds `open` 0.5 s)
    scouting = {"multicast": {"enabled": False}, "delay": 0}
    config: dict[str, Any] = {"mode": mode, "scouting": scouting}
    key = "listen" if mode == "router" else "connect"
    config[key] = {"endpoints": [f"tcp/127.0.0.1:{port}"]}
    return zenoh.open(zenoh.Config.from_json5(json.dumps(config)))


@pytest.fixture
def router() -> Iterator[int]:
    port = free_port()
    opened = session(port, "router")
    try:
        yield port
    finally:
        opened.close()


def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def tf_message(x: float, child: str = "drone1") -> bytes:
    t = STORE.types
    stamp = t["builtin_interfaces/msg/Time"](sec=1_700_000_000, nanosec=5)
    transform = t["geometry_msgs/msg/TransformStamped"](
        header=t["std_msgs/msg/Header"](stamp=stamp, frame_id="world"),
        child_frame_id=child,
        transform=t["geometry_msgs/msg/Transform"](
            translation=t["geometry_msgs/msg/Vector3"](x=x, y=2.0, z=3.0),
            rotation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        ),
    )
    return bytes(STORE.serialize_cdr(t[TF_TYPE](transforms=[transform]), TF_TYPE))


def test_samples_carry_rmw_zenohs_key_attachment_and_bytes(router: int) -> None:
    tf_hash = STORE.hash_rihs01(TF_TYPE)
    key = f"0/tf/tf2_msgs::msg::dds_::TFMessage_/{tf_hash}"  # docs/design.md's form
    got: list[Any] = []
    lock = threading.Lock()

    def received(sample: Any) -> None:
        with lock:
            got.append((str(sample.key_expr), sample.payload.to_bytes(), sample.attachment))

    peer = session(router, "peer")
    subscriber = peer.declare_subscriber(key, received)
    ours = session(router, "client")
    node = ZenohNode(ours, 0)
    try:
        writer = node.writer("/tf", TF_TYPE, TF)
        before = time.time_ns()
        time.sleep(0.5)  # the subscription reaches the publisher through the router
        for i in range(5):
            writer.write(tf_message(float(i)))
        until(lambda: len(got) == 5, "five /tf samples at the subscriber")
        after = time.time_ns()
        for i, (seen_key, payload, attachment) in enumerate(got):
            assert seen_key == key
            message = STORE.deserialize_cdr(payload, TF_TYPE)
            assert message.transforms[0].transform.translation.x == float(i)
            assert message.transforms[0].child_frame_id == "drone1"
            raw = attachment.to_bytes()
            sequence, nanos = struct.unpack_from("<qq", raw)
            assert sequence == i + 1  # rmw_zenoh numbers a publisher's samples from 1
            assert before <= nanos <= after
            assert raw[16] == 16 and raw[17:] == writer.gid and len(raw) == 33
    finally:
        node.close()
        subscriber.undeclare()
        ours.close()
        peer.close()


def test_the_node_and_its_publishers_are_in_the_graph(router: int) -> None:
    tokens: set[str] = set()
    lock = threading.Lock()

    def seen(sample: Any) -> None:
        with lock:
            if sample.kind == zenoh.SampleKind.PUT:
                tokens.add(str(sample.key_expr))
            else:
                tokens.discard(str(sample.key_expr))

    peer = session(router, "peer")
    watching = peer.liveliness().declare_subscriber("@ros2_lv/0/**", seen, history=True)
    ours = session(router, "client")
    node = ZenohNode(ours, 0)
    try:
        node.writer("/tf", TF_TYPE, TF)
        node.writer("/tf_static", TF_TYPE, TF_STATIC)
        zid = str(ours.info.zid())
        tf_hash = types.rihs01(TF_TYPE)
        dds = "tf2_msgs::msg::dds_::TFMessage_"
        expected = {
            f"@ros2_lv/0/{zid}/0/0/NN/%/%/robowire",
            f"@ros2_lv/0/{zid}/0/1/MP/%/%/robowire/%tf/{dds}/{tf_hash}/::,100:,:,:,,",
            f"@ros2_lv/0/{zid}/0/2/MP/%/%/robowire/%tf_static/{dds}/{tf_hash}/:1:,1:,:,:,,",
        }
        until(lambda: tokens == expected, f"the node's tokens (saw {tokens})")
        node.close()
        until(lambda: not tokens, "the tokens gone when the node closes")
    finally:
        watching.undeclare()
        ours.close()
        peer.close()


def test_a_late_subscriber_gets_tf_static_from_the_publishers_cache(router: int) -> None:
    ours = session(router, "client")
    node = ZenohNode(ours, 0)
    peer = None
    try:
        writer = node.writer("/tf_static", TF_TYPE, TF_STATIC)
        writer.write(tf_message(7.0, "base"))
        time.sleep(0.3)
        got: list[bytes] = []
        peer = session(router, "peer")
        key = f"0/tf_static/tf2_msgs::msg::dds_::TFMessage_/{types.rihs01(TF_TYPE)}"
        history = zenoh.ext.HistoryConfig(detect_late_publishers=True)
        late = zenoh.ext.declare_advanced_subscriber(
            peer, key, lambda s: got.append(s.payload.to_bytes()), history=history
        )
        until(lambda: len(got) == 1, "the cached /tf_static sample at a late subscriber")
        transform = STORE.deserialize_cdr(got[0], TF_TYPE).transforms[0]
        assert (transform.child_frame_id, transform.transform.translation.x) == ("base", 7.0)
        late.undeclare()
    finally:
        node.close()
        ours.close()
        if peer is not None:
            peer.close()
