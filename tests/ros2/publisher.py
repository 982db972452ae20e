"""An independent ROS 2 publisher: what `listen ros2://` is tested against.

Nothing here comes from robowire. The messages are built from `rosbags`' ROS 2 typestore and
serialised by its `serialize_cdr` (the bytes a ROS 2 node puts on the wire, which rosbags
reads and writes in bags); the DDS topics are made with `cyclonedds` as rmw_cyclonedds_cpp
makes them: topic `rt/<name>`, type `<pkg>::msg::dds_::<Name>_`, a final struct whose members
are the typestore's fields (so its XTypes type information is the message's), and the QoS a
ROS 2 node offers (tf2's for /tf and /tf_static, reliable or sensor-data for the rest).

Run as a process (`python -m tests.ros2.publisher SPEC.json`, from the checkout): SPEC is
`{"domain": N, "rate": HZ, "topics": [{"topic": "/tf", "type": "tf2_msgs/msg/TFMessage",
"qos": "tf" | "tf_static" | "reliable" | "sensor", "message": {...}}]}` with each message as
nested dicts of its fields (or `"raw": HEX`, bytes to write as they are: a broken sample);
every topic's message is written `rate` times a second (a `tf_static` one once: it is
transient-local) until the process is stopped. It prints `ready` once its writers exist.
It joins the domain on loopback only (its `CYCLONEDDS_URI`: subscriber.LOOPBACK). The
tests import `message` and `serialize` to build the same values in-process. The cyclonedds
types come from rosbags' field definitions through the independent subscriber's `idl_class`
(tests/ros2/subscriber.py).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.topic import Topic
from rosbags.typesys.base import Nodetype
from tests.ros2.subscriber import STORE, idl_class  # rosbags' types, as rmw lays them


def message(ros_type: str, values: dict[str, Any]) -> Any:
    """A typestore message of `ros_type` from nested dicts (missing fields are zero)."""
    cls = STORE.types[ros_type]
    kwargs: dict[str, Any] = {}
    for field, node in STORE.fielddefs[ros_type][1]:
        given = values.get(field)
        kind, detail = node
        if kind == Nodetype.NAME:
            kwargs[field] = message(detail, given or {})
        elif kind == Nodetype.BASE:
            zero: Any = "" if detail[0] == "string" else 0
            kwargs[field] = given if given is not None else zero
        elif detail[0][0] == Nodetype.NAME:  # a sequence or array of messages
            kwargs[field] = [message(detail[0][1], item) for item in given or []]
        else:
            size = detail[1] or len(given or [])
            kwargs[field] = np.array(given if given is not None else [0] * size, dtype=np.float64)
    return cls(**kwargs)


def serialize(ros_type: str, values: dict[str, Any]) -> bytes:
    """The CDR bytes (encapsulation header first) of a message, by rosbags."""
    return bytes(STORE.serialize_cdr(message(ros_type, values), ros_type))


def qos(kind: str) -> Qos:
    """The QoS a ROS 2 node offers: tf2's broadcasters, a reliable or a sensor-data topic."""
    if kind == "tf":
        return Qos(
            Policy.Reliability.Reliable(max_blocking_time=100_000_000),
            Policy.Durability.Volatile,
            Policy.History.KeepLast(100),
        )
    if kind == "tf_static":
        return Qos(
            Policy.Reliability.Reliable(max_blocking_time=100_000_000),
            Policy.Durability.TransientLocal,
            Policy.History.KeepLast(1),
        )
    if kind == "sensor":
        return Qos(
            Policy.Reliability.BestEffort, Policy.Durability.Volatile, Policy.History.KeepLast(5)
        )
    return Qos(
        Policy.Reliability.Reliable(max_blocking_time=100_000_000),
        Policy.Durability.Volatile,
        Policy.History.KeepLast(10),
    )


def main(spec_path: str) -> None:
    from cyclonedds._clayer import ddspy_write  # cyclonedds' own raw write (its pub.py's)

    with open(spec_path) as file:
        spec = json.load(file)
    participant = DomainParticipant(int(spec["domain"]))
    writers = []
    for entry in spec["topics"]:
        name = "rt/" + entry["topic"].lstrip("/")
        topic = Topic(participant, name, idl_class(entry["type"]))
        writer = DataWriter(participant, topic, qos=qos(entry["qos"]))
        raw = entry.get("raw")
        data = bytes.fromhex(raw) if raw is not None else serialize(entry["type"], entry["message"])
        writers.append((writer, data, entry["qos"]))
    print("ready", flush=True)
    period = 1.0 / float(spec.get("rate", 20.0))
    first = True
    while True:
        for writer, data, kind in writers:
            if first or kind != "tf_static":
                ddspy_write(writer._ref, data)
        first = False
        time.sleep(period)


if __name__ == "__main__":
    main(sys.argv[1])
