"""An independent ROS 2 subscriber, run in its own process: what a stock ROS 2 node sees.

It uses nothing of robowire. It joins a DDS domain with cyclonedds, watches discovery
(DCPSParticipant, DCPSPublication), and for every ROS 2 topic it finds (`rt/...`, and
`ros_discovery_info`) makes a reader whose type comes from `rosbags`' ROS 2 typestore (the
DDS type name parsed from the publication, the IDL struct built from the typestore's field
definitions), asking for the QoS the writer offers. Each sample's bytes are decoded with
`rosbags` `deserialize_cdr` for the advertised type (strict about trailing bytes), the last
one of each topic also with `mcap-ros2-support`'s own decoder (from rosbags' .msg text).

    python tests/ros2/subscriber.py --domain 42 --duration 3 [--localhost]

prints one JSON object: participants (user data), topics (type, QoS, user data, writer GUID,
samples, decode errors, the last sample as JSON, types the typestore does not know) and the
`ros_discovery_info` samples (nodes and their writers' GIDs).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", type=int, required=True)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--localhost", action="store_true", help="discover on loopback only")
    args = parser.parse_args()
    domain = Domain(args.domain, LOOPBACK) if args.localhost else None
    participant = DomainParticipant(args.domain)
    participants_reader = BuiltinDataReader(participant, BuiltinTopicDcpsParticipant)
    publications_reader = BuiltinDataReader(participant, BuiltinTopicDcpsPublication)
    own = str(participant.guid)
    participants: dict[str, Any] = {}
    topics: dict[str, dict[str, Any]] = {}
    readers: dict[str, tuple[Any, str]] = {}
    decoders: dict[str, Any] = {}
    discovery: list[Any] = []
    print("ready", file=sys.stderr, flush=True)
    end = time.monotonic() + args.duration
    while time.monotonic() < end:
        for found in participants_reader.take(N=100):
            if str(found.key) != own and hasattr(found, "qos"):
                participants[str(found.key)] = qos_json(found.qos)
        for pub in publications_reader.take(N=1000):
            if not hasattr(pub, "topic_name") or str(pub.participant_key) == own:
                continue
            name = pub.topic_name
            if not (name.startswith("rt/") or name == "ros_discovery_info"):
                continue
            parsed = DDS_TYPE.fullmatch(pub.type_name)
            ros_type = f"{parsed[1]}/msg/{parsed[3]}" if parsed else None
            offered = qos_json(pub.qos)
            entry = topics.setdefault(
                name, {"samples": 0, "errors": [], "writers": [], "type": pub.type_name}
            )
            entry.update(qos=offered, ros_type=ros_type, participant=str(pub.participant_key))
            entry["writers"].append(str(pub.key))
            if ros_type not in STORE.fielddefs:
                entry["unknown_type"] = True
                continue
            if name not in readers:
                topic = Topic(participant, name, idl_class(ros_type))
                readers[name] = (DataReader(participant, topic, qos=reader_qos(offered)), ros_type)
        for name, (reader, ros_type) in readers.items():
            got = ddspy_take(reader._ref, MASK, 1000)
            for data, info in got:
                if not info.valid_data:
                    continue
                entry = topics[name]
                entry["samples"] += 1
                entry["bytes"] = entry.get("bytes", 0) + len(data)
                try:
                    message = STORE.deserialize_cdr(bytes(data), ros_type)
                except Exception as exc:
                    entry["errors"].append(f"rosbags: {exc}")
                    continue
                entry["last"] = to_json(message)
                entry["last_raw"] = bytes(data)
                if name == "ros_discovery_info":
                    discovery.append(to_json(message, limit=1000))
        time.sleep(0.02)
    for entry in topics.values():
        raw = entry.pop("last_raw", None)
        if raw is None or entry.get("unknown_type"):
            continue
        ros_type = entry["ros_type"]
        try:
            if ros_type not in decoders:
                text = STORE.generate_msgdef(ros_type, ros_version=2)[0]
                decoders[ros_type] = generate_dynamic(ros_type, text)[ros_type]
            decoded = decoders[ros_type](raw)
            entry["mcap_ros2"] = "ok" if decoded is not None else "none"
        except Exception as exc:
            entry["errors"].append(f"mcap_ros2: {exc}")
    del domain
    result = {"participants": participants, "topics": topics, "discovery_info": discovery}
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
