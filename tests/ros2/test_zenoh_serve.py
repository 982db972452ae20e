"""`serve ros2+zenoh://HOST:PORT`: the world's ROS 2 topics at a router (zenoh's own router
mode, a free loopback port), read by a subscriber made of zenoh alone as an rmw_zenoh node
subscribes (the key of each topic, the attachment of each sample), bytes decoded by rosbags;
the node and its publishers in the graph as liveliness tokens."""

from __future__ import annotations

import asyncio
import struct
import threading
import time
from typing import Any

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore
from tests.ros2.test_zenoh_node import session

from robowire.errors import ConfigError
from robowire.gateway import Gateway, open_sink, open_source
from robowire.ros2.zenoh_sink import ZenohRos2Sink
from support import free_port, until

STORE = get_typestore(Stores.ROS2_KILTED)
TF_TYPE, POSE = "tf2_msgs/msg/TFMessage", "geometry_msgs/msg/PoseStamped"


def key(topic: str, ros_type: str) -> str:
    package, kind, name = ros_type.split("/")
    return f"0/{topic}/{package}::{kind}::dds_::{name}_/{STORE.hash_rihs01(ros_type)}"


async def test_serve_puts_the_worlds_topics_on_rmw_zenoh() -> None:
    port = free_port()
    router = session(port, "router")
    peer = session(port, "peer")
    got: dict[str, list[tuple[bytes, bytes]]] = {}
    tokens: set[str] = set()
    lock = threading.Lock()

    def received(sample: Any) -> None:
        with lock:
            got.setdefault(str(sample.key_expr), []).append(
                (sample.payload.to_bytes(), sample.attachment.to_bytes())
            )

    def token(sample: Any) -> None:
        with lock:
            tokens.add(str(sample.key_expr))

    subscriber = peer.declare_subscriber("0/**", received)
    watching = peer.liveliness().declare_subscriber("@ros2_lv/0/**", token, history=True)
    sink = open_sink(f"ros2+zenoh://127.0.0.1:{port}")
    assert isinstance(sink, ZenohRos2Sink)
    gateway = Gateway().add(sink)
    task = asyncio.create_task(gateway.run())
    try:
        await until(lambda: sink.ready.is_set(), "the sink at the router")
        await asyncio.sleep(0.5)
        began = time.time_ns()
        for i in range(5):
            gateway.world.update_device(
                "lab",
                "drone1",
                receive_time=time.time(),
                source_time=1_700_000_000.5 + i,
                kind="drone",
                position=[1.0 + i, 2.0, 3.0],
                orientation=[1.0, 0.0, 0.0, 0.0],
            )
            await asyncio.sleep(0.1)
        tf_key, pose_key = key("tf", TF_TYPE), key("robowire/drone1/pose", POSE)
        await until(lambda: len(got.get(tf_key, [])) >= 5, "five /tf samples")
        await until(lambda: len(got.get(pose_key, [])) >= 5, "five pose samples")
        with lock:
            tf_samples = list(got[tf_key])
        xs = []
        for n, (payload, attachment) in enumerate(tf_samples, start=1):
            message = STORE.deserialize_cdr(payload, TF_TYPE)
            (transform,) = message.transforms
            assert (transform.header.frame_id, transform.child_frame_id) == ("world", "drone1")
            xs.append(transform.transform.translation.x)
            sequence, nanos = struct.unpack_from("<qq", attachment)
            assert sequence == n and began <= nanos <= time.time_ns()
            assert attachment[16] == 16 and len(attachment) == 33
        assert xs == [1.0, 2.0, 3.0, 4.0, 5.0]
        pose = STORE.deserialize_cdr(got[pose_key][-1][0], POSE)
        assert pose.pose.position.x == 5.0 and pose.header.stamp.sec == 1_700_000_004
        node = "robowire"
        with lock:
            seen = set(tokens)
        assert any(t.endswith(f"/0/0/NN/%/%/{node}") for t in seen), seen
        tf_token = next(t for t in seen if "/MP/%/%/robowire/%tf/" in t)
        assert tf_token.endswith(
            f"/tf2_msgs::msg::dds_::TFMessage_/{STORE.hash_rihs01(TF_TYPE)}/::,100:,:,:,,"
        )
        assert any("/MP/%/%/robowire/%robowire%drone1%pose/" in t for t in seen), seen
    finally:
        gateway.stop()
        await task
        watching.undeclare()
        subscriber.undeclare()
        peer.close()
        router.close()


async def test_a_subscriber_that_joins_later_gets_devices_that_no_longer_change() -> None:
    """A volatile topic gives a new subscriber nothing put before it; when its liveliness
    token (rmw_zenoh's design document: a subscription of /tf) appears, the sink sends /tf
    again for every device, though the world has not changed."""
    port = free_port()
    router = session(port, "router")
    peer = session(port, "peer")
    sink = open_sink(f"ros2+zenoh://127.0.0.1:{port}")
    gateway = Gateway().add(sink)
    task = asyncio.create_task(gateway.run())
    got: list[bytes] = []
    declared: list[Any] = []
    try:
        await until(lambda: sink.ready.is_set(), "the sink at the router")
        gateway.world.update_device(
            "lab", "parked", receive_time=time.time(), kind="rover", position=[4.0, 5.0, 6.0]
        )
        await until(lambda: "/tf" in sink.writers, "the parked rover on /tf")
        declared.append(
            peer.declare_subscriber(key("tf", TF_TYPE), lambda s: got.append(s.payload.to_bytes()))
        )
        await asyncio.sleep(0.5)
        assert got == []  # nothing changed: nothing is sent
        zid, tf_hash = str(peer.info.zid()), STORE.hash_rihs01(TF_TYPE)
        token = f"@ros2_lv/0/{zid}/0/1/MS/%/%/listener/%tf/tf2_msgs::msg::dds_::TFMessage_/"
        declared.append(peer.liveliness().declare_token(f"{token}{tf_hash}/::,10:,:,:,,"))
        await until(lambda: len(got) >= 1, "/tf again once the subscription is in the graph")
        (transform,) = STORE.deserialize_cdr(got[0], TF_TYPE).transforms
        assert transform.child_frame_id == "parked"
        assert transform.transform.translation.z == 6.0
    finally:
        gateway.stop()
        await task
        for made in declared:
            made.undeclare()
        peer.close()
        router.close()


def test_bad_urls_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="qos must be one of"):
        open_sink("ros2+zenoh://127.0.0.1:7447?qos=fast")
    with pytest.raises(ConfigError, match="unknown option"):
        open_sink("ros2+zenoh://127.0.0.1:7447?domian=1")
    with pytest.raises(ConfigError, match="needs the router's port"):
        open_sink("ros2+zenoh://127.0.0.1:0")


async def test_serve_and_listen_meet_over_rmw_zenoh() -> None:
    """One gateway serves ros2+zenoh://, another listens at the same router: the devices come
    back under their names, positions and orientations within 1e-9."""
    port = free_port()
    router = session(port, "router")
    sink = open_sink(f"ros2+zenoh://127.0.0.1:{port}")
    source = open_source(f"ros2+zenoh://127.0.0.1:{port}")
    served, listened = Gateway().add(sink), Gateway().add(source)
    tasks = [asyncio.create_task(g.run()) for g in (served, listened)]
    q = [0.5, 0.5, 0.5, 0.5]
    try:
        await until(lambda: sink.ready.is_set() and source.up, "both at the router")
        await asyncio.sleep(0.5)

        def arrived() -> bool:
            table = listened.world.tables.get(source.name)
            return table is not None and "rover_3" in table.ids

        for i in range(50):
            served.world.update_device(
                "lab", "rover_3", receive_time=time.time(), kind="robot",
                position=[1.25, -3.5, 0.125 * i], orientation=q,
            )  # fmt: skip
            await asyncio.sleep(0.05)
            if arrived() and i > 5:
                break
        await until(arrived, "rover_3 at the listener")
        last = served.world.device("lab", "rover_3").position
        await until(
            lambda: np.allclose(
                listened.world.device(source.name, "rover_3").position, last, atol=1e-9, rtol=0
            ),
            "the last position",
        )
        got = listened.world.device(source.name, "rover_3").orientation
        assert np.allclose(got, q, atol=1e-9, rtol=0)
    finally:
        for g in (served, listened):
            g.stop()
        await asyncio.gather(*tasks)
        router.close()
