"""What ROS 2 puts on Zenoh with rmw_zenoh_cpp (its docs/design.md), as pure functions: the
data key of a topic, the attachment every sample carries, and the liveliness tokens that put
a node and its publishers and subscriptions in the ROS graph. No zenoh import here.

    data key     <domain>/<topic without its leading />/<DDS type name>/<RIHS01 hash>
    attachment   int64 LE sequence number, int64 LE source time (ns since the epoch), one
                 length byte (16), the 16-byte GID of the publisher
    node token   @ros2_lv/<domain>/<session id>/<node id>/<node id>/NN/<enclave>/<namespace>/<node>
    entity token @ros2_lv/<domain>/<session id>/<node id>/<entity id>/MP|MS/<enclave>/<namespace>/
                 <node>/<topic>/<DDS type name>/<hash>/<qos>

In tokens a name has each `/` replaced by `%` (an empty enclave or namespace, `/`, is `%`);
the QoS is rmw_zenoh's compact form (`qos_key`), a field left empty when it is rmw_zenoh's
default. An entity's GID is the XXH3-128 hash of its token (low 64 bits first, each
little-endian), as rmw_zenoh computes it, so the GID in our samples is the one ROS 2 tools
see in the graph.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import xxhash

from robowire.errors import DecodeError
from robowire.ros2 import names
from robowire.ros2.dds import Profile

ADMIN_SPACE = "@ros2_lv"
NODE = "NN"
PUBLISHER = "MP"
SUBSCRIPTION = "MS"
KINDS = (NODE, PUBLISHER, SUBSCRIPTION, "SS", "SC")
ATTACHMENT = struct.Struct("<qqB16s")
GID_BYTES = 16
PROTOCOL = "ros2+zenoh"

# rmw_qos_profile_t's enum values (rmw/types.h) and rmw_zenoh's defaults (detail/qos.cpp)
RELIABLE, BEST_EFFORT = 1, 2
TRANSIENT_LOCAL, VOLATILE = 1, 2
KEEP_LAST, KEEP_ALL = 1, 2
DEFAULT_DEPTH = 42


def mangle(name: str) -> str:
    """A name as a token carries it: every `/` as `%`."""
    return name.replace("/", "%")


def demangle(name: str) -> str:
    return name.replace("%", "/")


def data_key(domain: int, topic: str, ros_type: str, type_hash: str) -> str:
    """The key expression a topic's samples are put on: `0/chatter/std_msgs::msg::dds_::
    String_/RIHS01_…` for `/chatter` (`std_msgs/msg/String`) in domain 0."""
    return f"{domain}/{topic.strip('/')}/{names.dds_type(ros_type)}/{type_hash}"


@dataclass(frozen=True, slots=True)
class DataKey:
    domain: int
    topic: str  # absolute: /tf
    ros_type: str  # pkg/msg/Name
    type_hash: str


def parse_data_key(key: str) -> DataKey | None:
    """The parts of a data key, or None when it is not one (the topic may have `/`s: the type
    and hash are the last two chunks)."""
    first, _, rest = key.partition("/")
    topic, _, tail = rest.rpartition("/")
    topic, _, dds = topic.rpartition("/")
    ros_type = names.ros_type(dds)
    if not first.isdigit() or not topic or ros_type is None or not tail.startswith("RIHS"):
        return None
    return DataKey(int(first), "/" + topic, ros_type, tail)


def qos_key(profile: Profile) -> str:
    """rmw_zenoh's compact QoS (`qos_to_keyexpr`): `reliability:durability:history,depth:
    deadline s,ns:lifespan s,ns:liveliness,lease s,ns`, a field empty when it is the default
    (reliable, volatile, keep last 42, infinite durations, automatic liveliness)."""
    reliability = "" if profile.reliable else str(BEST_EFFORT)
    durability = str(TRANSIENT_LOCAL) if profile.transient_local else ""
    depth = "" if profile.depth == DEFAULT_DEPTH else str(profile.depth)
    return f"{reliability}:{durability}:,{depth}:,:,:,,"


def parse_qos_key(text: str) -> Profile | None:
    """The profile of a compact QoS, or None when it is not one."""
    parts = text.split(":")
    if len(parts) < 6:
        return None
    history = parts[2].split(",")
    if len(history) < 2 or parts[0] not in ("", "1", "2") or parts[1] not in ("", "1", "2"):
        return None
    try:
        depth = int(history[1]) if history[1] else DEFAULT_DEPTH
    except ValueError:
        return None
    return Profile(parts[0] != str(BEST_EFFORT), parts[1] == str(TRANSIENT_LOCAL), depth)


@dataclass(frozen=True, slots=True)
class Entity:
    """A node, publisher or subscription as its liveliness token says it (topic fields
    empty for a node)."""

    domain: int
    session: str  # the Zenoh session id, as zenoh prints it
    node_id: int
    entity_id: int
    kind: str
    node: str
    namespace: str = "/"
    enclave: str = "/"
    topic: str = ""
    ros_type: str = ""
    type_hash: str = ""
    qos: Profile | None = None

    def token(self) -> str:
        parts = [
            ADMIN_SPACE,
            str(self.domain),
            self.session,
            str(self.node_id),
            str(self.entity_id),
            self.kind,
            mangle(self.enclave),
            mangle(self.namespace),
            mangle(self.node),
        ]
        if self.kind != NODE:
            assert self.qos is not None
            dds = names.dds_type(self.ros_type)
            parts += [mangle(self.topic), dds, self.type_hash, qos_key(self.qos)]
        return "/".join(parts)

    @property
    def gid(self) -> bytes:
        return xxhash.xxh3_128_intdigest(self.token().encode()).to_bytes(GID_BYTES, "little")


def parse_token(key: str) -> Entity | None:
    """The entity of a liveliness token, or None when it is not one rmw_zenoh would take."""
    parts = key.split("/")
    if len(parts) < 9 or parts[0] != ADMIN_SPACE or parts[5] not in KINDS or "" in parts:
        return None
    if not (parts[1].isdigit() and parts[3].isdigit() and parts[4].isdigit()):
        return None
    domain, session, node_id, entity_id, kind = parts[1:6]
    enclave, namespace, node = (demangle(p) for p in parts[6:9])
    if kind == NODE:
        return Entity(
            int(domain), session, int(node_id), int(entity_id), kind, node, namespace, enclave
        )
    if len(parts) < 13:
        return None
    ros_type = names.ros_type(parts[10])
    qos = parse_qos_key(parts[12])
    if ros_type is None or qos is None:
        return None
    return Entity(
        int(domain),
        session,
        int(node_id),
        int(entity_id),
        kind,
        node,
        namespace,
        enclave,
        demangle(parts[9]),
        ros_type,
        parts[11],
        qos,
    )


def attachment(sequence: int, nanos: int, gid: bytes) -> bytes:
    """The attachment of one sample: its sequence number, source time and publisher GID."""
    return ATTACHMENT.pack(sequence, nanos, GID_BYTES, gid)


@dataclass(frozen=True, slots=True)
class Attachment:
    sequence: int
    nanos: int
    gid: bytes


def parse_attachment(data: bytes | None) -> Attachment:
    """The fields of a sample's attachment; DecodeError when it has none or it is not one."""
    if data is None:
        raise DecodeError(PROTOCOL, 0, "a sample without the attachment rmw_zenoh requires")
    if len(data) != ATTACHMENT.size:
        reason = f"an attachment of {len(data)} bytes, not {ATTACHMENT.size}"
        raise DecodeError(PROTOCOL, 0, reason)
    sequence, nanos, length, gid = ATTACHMENT.unpack(data)
    if length != GID_BYTES:
        raise DecodeError(PROTOCOL, 16, f"a GID of {length} bytes, not {GID_BYTES}")
    return Attachment(sequence, nanos, gid)
