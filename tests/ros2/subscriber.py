"""An independent ROS 2 subscriber, run in its own process: what a stock ROS 2 node sees.

It uses nothing of robowire. It joins a DDS domain with cyclonedds, watches discovery
(DCPSParticipant, DCPSPublication), and for every ROS 2 topic it finds (`rt/...`, and
`ros_discovery_info`) makes a reader whose type comes from `rosbags`' ROS 2 typestore (the
DDS type name parsed from the publication, the IDL struct built from the typestore's field
definitions), asking for the QoS the writer offers. Each sample's bytes are decoded with
`rosbags` `deserialize_cdr` for the advertised type (strict about trailing bytes), the last
one of each topic also with `mcap-ros2-support`'s own decoder (from rosbags' .msg text).

    python tests/ros2/subscriber.py --domain 42 --duration 3 [--localhost] [--stream]

prints one JSON object: participants (user data), topics (type, QoS, user data, writer GUID,
samples, decode errors, the last sample as JSON, types the typestore does not know) and the
`ros_discovery_info` samples (nodes and their writers' GIDs). With `--stream` it prints each
sample of an `rt/` topic as it comes instead, a JSON line each (the bridge matrix's far end,
tests/bridge/farend.py), until the duration is over or the process that started it is gone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from cyclonedds._clayer import ddspy_take
from cyclonedds.builtin import (
    BuiltinDataReader,
    BuiltinTopicDcpsParticipant,
    BuiltinTopicDcpsPublication,
)
from cyclonedds.core import InstanceState, SampleState, ViewState
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.idl import make_idl_struct
from cyclonedds.idl import types as t
from cyclonedds.idl.annotations import final
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from mcap_ros2._dynamic import generate_dynamic
from rosbags.typesys import Stores, get_typestore
from rosbags.typesys.base import Nodetype

STORE = get_typestore(Stores.LATEST)
DDS_TYPE = re.compile(r"(\w+)::(msg)::dds_::(\w+)_")
LOOPBACK = (
    "<CycloneDDS><Domain Id='any'><General><Interfaces>"
    "<NetworkInterface address='127.0.0.1' multicast='true'/>"
    "</Interfaces></General></Domain></CycloneDDS>"
)
MASK = SampleState.Any | ViewState.Any | InstanceState.Any
PRIMITIVE = {
    "bool": bool,
    "byte": t.byte,
    "char": t.uint8,
    "int8": t.int8,
    "uint8": t.uint8,
    "int16": t.int16,
    "uint16": t.uint16,
    "int32": t.int32,
    "uint32": t.uint32,
    "int64": t.int64,
    "uint64": t.uint64,
    "float32": t.float32,
    "float64": t.float64,
}
_classes: dict[str, Any] = {}


def idl_class(ros_type: str) -> Any:
    """The cyclonedds IDL struct of a ROS 2 type, from rosbags' field definitions."""
    if ros_type in _classes:
        return _classes[ros_type]
    package, _, name = ros_type.split("/")

    def element(node: tuple[Any, Any]) -> Any:
        kind, rest = node
        if kind == Nodetype.NAME:
            return idl_class(rest)
        base, bound = rest
        if base == "string":
            return t.bounded_str[bound] if bound else str
        return PRIMITIVE[base]

    members = {}
    for field, desc in STORE.fielddefs[ros_type][1]:
        kind, rest = desc
        if kind == Nodetype.ARRAY:
            members[field] = t.array[element(rest[0]), rest[1]]
        elif kind == Nodetype.SEQUENCE:
            inner = element(rest[0])
            members[field] = t.sequence[inner, rest[1]] if rest[1] else t.sequence[inner]
        else:
            members[field] = element(desc)
    made = final(
        make_idl_struct(ros_type.replace("/", "__"), f"{package}::msg::dds_::{name}_", members)
    )
    _classes[ros_type] = made
    return made


def to_json(value: Any, limit: int = 16) -> Any:
    """A decoded message as JSON (sequences longer than `limit`: their length and first items)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        items = [to_json(v, limit) for v in value[:limit]]
        return items if len(value) <= limit else {"length": len(value), "first": items}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "__msgtype__") or hasattr(value, "__dataclass_fields__"):
        names = [n for n in getattr(value, "__dataclass_fields__", {}) if n != "__msgtype__"]
        return {n: to_json(getattr(value, n), limit) for n in names}
    if isinstance(value, bytes):
        return value.hex()
    return value


def qos_json(qos: Qos) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for policy in qos:
        text = repr(policy)
        if text.startswith("Policy.Reliability."):
            out["reliability"] = "reliable" if "Reliable" in text else "best_effort"
        elif text.startswith("Policy.Durability."):
            out["durability"] = text.split(".")[2].lower()
        elif text.startswith("Policy.History."):
            out["history"] = "keep_last" if "KeepLast" in text else "keep_all"
            out["depth"] = getattr(policy, "depth", None)
        elif text.startswith("Policy.Userdata"):
            out["user_data"] = policy.data.decode(errors="replace")
        elif text.startswith("Policy.DataRepresentation"):
            out["xcdr2"] = bool(policy.use_xcdrv2_representation)
    return out


def reader_qos(offered: dict[str, Any]) -> Qos:
    policies: list[Any] = [
        Policy.Reliability.Reliable(max_blocking_time=100_000_000)
        if offered.get("reliability") == "reliable"
        else Policy.Reliability.BestEffort,
        Policy.History.KeepLast(1000),
    ]
    if offered.get("durability") == "transientlocal":
        policies.append(Policy.Durability.TransientLocal)
    return Qos(*policies)


class Subscriber:
    """A participant of `domain` that finds the ROS 2 topics through discovery, opens a reader
    of each topic whose type the typestore knows (asking for the QoS the writer offers) and
    decodes every sample with rosbags. `topics` holds, per DDS topic, what was offered and how
    many samples came; `participants` the other participants' user data."""

    def __init__(self, domain: int, localhost: bool) -> None:
        self._domain = Domain(domain, LOOPBACK) if localhost else None
        self.participant = DomainParticipant(domain)
        self._participants_reader = BuiltinDataReader(self.participant, BuiltinTopicDcpsParticipant)
        self._publications_reader = BuiltinDataReader(self.participant, BuiltinTopicDcpsPublication)
        self._own = str(self.participant.guid)
        self.participants: dict[str, Any] = {}
        self.topics: dict[str, dict[str, Any]] = {}
        self._readers: dict[str, tuple[Any, str]] = {}

    def discover(self) -> None:
        """Take what discovery found: participants, and a reader for each new topic."""
        for found in self._participants_reader.take(N=100):
            if str(found.key) != self._own and hasattr(found, "qos"):
                self.participants[str(found.key)] = qos_json(found.qos)
        for pub in self._publications_reader.take(N=1000):
            if not hasattr(pub, "topic_name") or str(pub.participant_key) == self._own:
                continue
            name = pub.topic_name
            if not (name.startswith("rt/") or name == "ros_discovery_info"):
                continue
            parsed = DDS_TYPE.fullmatch(pub.type_name)
            ros_type = f"{parsed[1]}/msg/{parsed[3]}" if parsed else None
            offered = qos_json(pub.qos)
            entry = self.topics.setdefault(
                name, {"samples": 0, "errors": [], "writers": [], "type": pub.type_name}
            )
            entry.update(qos=offered, ros_type=ros_type, participant=str(pub.participant_key))
            entry["writers"].append(str(pub.key))
            if ros_type not in STORE.fielddefs:
                entry["unknown_type"] = True
                continue
            if name not in self._readers:
                topic = Topic(self.participant, name, idl_class(ros_type))
                reader = DataReader(self.participant, topic, qos=reader_qos(offered))
                self._readers[name] = (reader, ros_type)

    def take(self) -> Iterator[tuple[str, bytes, Any]]:
        """(DDS topic, bytes, the message rosbags decoded) of each sample that came; a sample
        rosbags cannot decode is an error of its topic (and not yielded)."""
        for name, (reader, ros_type) in self._readers.items():
            for data, info in ddspy_take(reader._ref, MASK, 1000):
                if not info.valid_data:
                    continue
                entry = self.topics[name]
                entry["samples"] += 1
                entry["bytes"] = entry.get("bytes", 0) + len(data)
                try:
                    message = STORE.deserialize_cdr(bytes(data), ros_type)
                except Exception as exc:
                    entry["errors"].append(f"rosbags: {exc}")
                    continue
                yield name, bytes(data), message


def stream(subscriber: Subscriber, end: float) -> None:
    """Print each sample as it comes, one JSON line: {"topic": ROS topic, "type": ROS type,
    "message": ...}, and {"topic": ..., "errors": [...]} for samples rosbags refused since; until
    `end` or until the process that started this one is gone."""
    parent = os.getppid()
    errors: dict[str, int] = {}
    while time.monotonic() < end and os.getppid() == parent:
        subscriber.discover()
        lines = []
        for name, _, message in subscriber.take():
            entry = subscriber.topics[name]
            if name.startswith("rt/"):
                sample = {"topic": name[2:], "type": entry["ros_type"]}
                message = to_json(message, limit=10**6)
                lines.append(json.dumps({**sample, "message": message}, default=str))
        for name, entry in subscriber.topics.items():
            new = entry["errors"][errors.get(name, 0) :]
            if new:
                errors[name] = len(entry["errors"])
                lines.append(json.dumps({"topic": name[2:], "errors": new}))
        if lines:
            print("\n".join(lines), flush=True)
        time.sleep(0.02)


def report(subscriber: Subscriber, end: float) -> dict[str, Any]:
    """What came until `end`: participants, topics (the last sample of each as JSON, also
    decoded by mcap-ros2-support) and the `ros_discovery_info` samples."""
    topics = subscriber.topics
    discovery: list[Any] = []
    last: dict[str, bytes] = {}
    while time.monotonic() < end:
        subscriber.discover()
        for name, data, message in subscriber.take():
            topics[name]["last"] = to_json(message)
            last[name] = data
            if name == "ros_discovery_info":
                discovery.append(to_json(message, limit=1000))
        time.sleep(0.02)
    decoders: dict[str, Any] = {}
    for name, raw in last.items():
        entry = topics[name]
        ros_type = entry["ros_type"]
        try:
            if ros_type not in decoders:
                text = STORE.generate_msgdef(ros_type, ros_version=2)[0]
                decoders[ros_type] = generate_dynamic(ros_type, text)[ros_type]
            decoded = decoders[ros_type](raw)
            entry["mcap_ros2"] = "ok" if decoded is not None else "none"
        except Exception as exc:
            entry["errors"].append(f"mcap_ros2: {exc}")
    return {"participants": subscriber.participants, "topics": topics, "discovery_info": discovery}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", type=int, required=True)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--localhost", action="store_true", help="discover on loopback only")
    parser.add_argument("--stream", action="store_true", help="print each sample as it comes")
    args = parser.parse_args()
    subscriber = Subscriber(args.domain, args.localhost)
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + args.duration
    if args.stream:
        stream(subscriber, end)
    else:
        print(json.dumps(report(subscriber, end), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
