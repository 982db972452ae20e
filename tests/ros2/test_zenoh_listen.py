"""`listen ros2+zenoh://HOST:PORT`: samples put at a router (zenoh's own router mode on a free
loopback port) as an rmw_zenoh publisher puts them, by a publisher written here with zenoh
alone (keys and attachments as docs/design.md gives them, CDR by rosbags); a sample without
an attachment and one under a wrong hash are counted and named once."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

import numpy as np
import pytest
import zenoh.ext
from rosbags.typesys import Stores, get_typestore
from tests.ros2.test_zenoh_node import session

from robowire.gateway import Gateway, open_source
from robowire.ros2.zenoh_source import ZenohRos2Source
from support import free_port, until

STORE = get_typestore(Stores.ROS2_KILTED)
T = STORE.types
TF_TYPE, POSE = "tf2_msgs/msg/TFMessage", "geometry_msgs/msg/PoseStamped"
GID = bytes(range(16))


def key(topic: str, ros_type: str, type_hash: str | None = None) -> str:
    package, kind, name = ros_type.split("/")
    return f"0/{topic}/{package}::{kind}::dds_::{name}_/{type_hash or STORE.hash_rihs01(ros_type)}"


def attachment(sequence: int) -> bytes:
    return struct.pack("<qqB", sequence, time.time_ns(), 16) + GID


def transient_local(session: Any, key: str) -> Any:
    """A publisher as rmw_zenoh declares a transient-local topic's (/tf_static's): a cache
    of its last sample for late subscribers, publisher detection, miss detection."""
    return zenoh.ext.declare_advanced_publisher(
        session,
        key,
        cache=zenoh.ext.CacheConfig(1),
        publisher_detection=True,
        sample_miss_detection=zenoh.ext.MissDetectionConfig(heartbeat=None, sporadic_heartbeat=0.5),
    )


def tf(x: float, child: str = "drone7") -> bytes:
    stamp = T["builtin_interfaces/msg/Time"](sec=1_700_000_000, nanosec=0)
    transform = T["geometry_msgs/msg/TransformStamped"](
        header=T["std_msgs/msg/Header"](stamp=stamp, frame_id="world"),
        child_frame_id=child,
        transform=T["geometry_msgs/msg/Transform"](
            translation=T["geometry_msgs/msg/Vector3"](x=x, y=-1.0, z=2.0),
            rotation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0),
        ),
    )
    return bytes(STORE.serialize_cdr(T[TF_TYPE](transforms=[transform]), TF_TYPE))


async def test_listen_reads_rmw_zenoh_samples_and_names_the_bad_ones() -> None:
    port = free_port()
    router = session(port, "router")
    publisher = session(port, "peer")
    static = transient_local(publisher, key("tf_static", TF_TYPE))
    static.put(tf(4.0, "dock"), attachment=attachment(1))  # before the source comes
    source = open_source(f"ros2+zenoh://127.0.0.1:{port}")
    assert isinstance(source, ZenohRos2Source)
    gateway = Gateway().add(source)
    task = asyncio.create_task(gateway.run())
    try:
        await until(lambda: source.up, "the source at the router")
        await asyncio.sleep(0.5)  # its subscription reaches the publisher's session
        good = publisher.declare_publisher(key("tf", TF_TYPE))
        wrong = publisher.declare_publisher(key("tf", TF_TYPE, "RIHS01_" + "0" * 64))
        for i in range(1, 4):
            good.put(tf(0.5 * i), attachment=attachment(i))
        good.put(tf(99.0))  # no attachment: dropped, as rmw_zenoh drops it
        wrong.put(tf(98.0), attachment=attachment(1))
        good.put(tf(1.75), attachment=attachment(4))

        def seen() -> Any:
            table = gateway.world.tables.get(source.name)
            return table is not None and "drone7" in table.ids and source.stats.dropped >= 2

        await until(seen, "drone7 and the two bad samples")
        dock = "the /tf_static sent before the source came, from the publisher's cache"
        await until(lambda: "dock" in gateway.world.tables[source.name].ids, dock)
        assert np.allclose(gateway.world.device(source.name, "dock").position, [4.0, -1.0, 2.0])
        tokens = {str(r.ok.key_expr) for r in publisher.liveliness().get("@ros2_lv/0/**") if r.ok}
        assert any(
            "/MS/%/%/robowire_listen/%tf/tf2_msgs::msg::dds_::TFMessage_/" in t for t in tokens
        )
        assert any(t.endswith("/NN/%/%/robowire_listen") for t in tokens), tokens
        await until(
            lambda: np.allclose(
                gateway.world.device(source.name, "drone7").position, [1.75, -1.0, 2.0]
            ),
            "the last good position",
        )
        problems = source.problems()
        assert "/tf: a sample without the attachment rmw_zenoh requires" in problems
        assert any(p.startswith("/tf: type hash RIHS01_000") for p in problems)
        assert source.stats.dropped == 2
        for declared in (good, wrong, static):
            declared.undeclare()
    finally:
        gateway.stop()
        await task
        publisher.close()
        router.close()


def test_bad_urls_are_config_errors() -> None:
    from robowire.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown option"):
        open_source("ros2+zenoh://127.0.0.1:7447?domian=3")
    with pytest.raises(ConfigError, match="names no frame"):
        open_source("ros2+zenoh://127.0.0.1:7447?frame=/")
