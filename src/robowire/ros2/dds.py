"""DDS as a ROS 2 node puts it on the wire, with cyclonedds (the library `rmw_cyclonedds_cpp`
is built on): what `serve ros2://` writes with and `listen ros2://` reads with.

    Node            one participant of a domain (`ROS_DOMAIN_ID`, or `?domain=`), its discovery
                    range as ROS 2 sets it (`ROS_AUTOMATIC_DISCOVERY_RANGE`, older
                    `ROS_LOCALHOST_ONLY`), user data `enclave=/;`, and the `ros_discovery_info`
                    writer that names the node and its endpoints' GIDs, so `ros2 node list`
                    shows `/robowire` and `ros2 topic info -v` names it as the publisher
    RawWriter       a writer of one ROS topic (`rt/<name>`, type `pkg::msg::dds_::Name_`) that
                    writes bytes already CDR-encoded (`cdr`), user data `typehash=RIHS01_...;`
    RawReader       a reader that hands over each sample's bytes, undecoded
    QoS profiles    TF, TF_STATIC, RELIABLE, SENSOR (tf2's and rclcpp's own), DISCOVERY_INFO

cyclonedds-python's own `DataWriter.write` serialises a sample object and passes the bytes to
`_clayer.ddspy_write`; `RawWriter` passes ours there directly (padded to 4 bytes, as `write`
does). cyclonedds is imported only when a `Node` is made.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from robowire.errors import ConfigError, TransportError
from robowire.ros2 import names, types

DISCOVERY_TOPIC = "ros_discovery_info"  # literally, no `rt/`
DISCOVERY_TYPE = "rmw_dds_common/msg/ParticipantEntitiesInfo"
RANGES = ("SUBNET", "LOCALHOST", "OFF", "SYSTEM_DEFAULT")
MAX_DOMAIN = 232  # the largest domain id whose ports fit (ROS 2's "Domain ID" page)
BLOCKING_NS = 10_000_000  # a reliable write waits at most this long (keep-last writers here
# did not wait at all for a stopped reader: 90 writes of 1 MB, the longest 5 ms)


@dataclass(frozen=True, slots=True)
class Profile:
    """The QoS of an endpoint, in ROS 2's terms."""

    reliable: bool = True
    transient_local: bool = False
    depth: int = 10

    def policies(self) -> list[Any]:
        from cyclonedds.qos import Policy

        out: list[Any] = [
            Policy.Reliability.Reliable(max_blocking_time=BLOCKING_NS)
            if self.reliable
            else Policy.Reliability.BestEffort,
            Policy.History.KeepLast(self.depth),
            # XCDR1, as rmw_cyclonedds_cpp and rmw_fastrtps_cpp write
            Policy.DataRepresentation(use_cdrv0_representation=True),
        ]
        if self.transient_local:
            out.append(Policy.Durability.TransientLocal)
            out.append(
                Policy.DurabilityService(
                    cleanup_delay=0,
                    history=Policy.History.KeepLast(self.depth),
                    max_samples=-1,
                    max_instances=-1,
                    max_samples_per_instance=-1,
                )
            )
        else:
            out.append(Policy.Durability.Volatile)
        return out


TF = Profile(reliable=True, depth=100)  # tf2_ros::DynamicBroadcasterQoS / DynamicListenerQoS
TF_STATIC = Profile(reliable=True, transient_local=True, depth=1)  # StaticBroadcasterQoS
TF_STATIC_LISTENER = Profile(reliable=True, transient_local=True, depth=100)
RELIABLE = Profile(reliable=True, depth=10)  # rclcpp's default QoS
SENSOR = Profile(reliable=False, depth=5)  # rclcpp::SensorDataQoS (vrpn_mocap's default)
DISCOVERY_INFO = Profile(reliable=True, transient_local=True, depth=1)
ROSOUT = Profile(reliable=True, transient_local=True, depth=1000)  # rcl's /rosout QoS


def domain_id(option: str | None = None, environ: Mapping[str, str] = os.environ) -> int:
    """`?domain=` if given, else `ROS_DOMAIN_ID`, else 0; ConfigError if not 0..232."""
    text = option if option is not None else environ.get("ROS_DOMAIN_ID", "").strip() or "0"
    where = "?domain=" if option is not None else "ROS_DOMAIN_ID"
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(
            f"{where}{'' if option is not None else '='}{text}: not a number"
        ) from None
    if not 0 <= value <= MAX_DOMAIN:
        raise ConfigError(f"{where}: {value} is not a ROS 2 domain id (0 to {MAX_DOMAIN})")
    return value


def discovery_range(environ: Mapping[str, str] = os.environ) -> str:
    """The discovery range as ROS 2 (Iron and later) reads it: `ROS_AUTOMATIC_DISCOVERY_RANGE`
    if set, else LOCALHOST when the older `ROS_LOCALHOST_ONLY=1`, else SUBNET."""
    text = environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "").strip().upper()
    if text:
        if text not in RANGES:
            raise ConfigError(
                f"ROS_AUTOMATIC_DISCOVERY_RANGE={text}: not one of {', '.join(RANGES)}"
            )
        return "SUBNET" if text == "SYSTEM_DEFAULT" else text
    if environ.get("ROS_LOCALHOST_ONLY", "").strip() == "1":
        return "LOCALHOST"
    return "SUBNET"


WRITER_LINGER = "<Internal><WriterLingerDuration>0s</WriterLingerDuration></Internal>"
"""How long a reliable writer being deleted waits for its readers' acknowledgements: none,
as `Node.close` has waited for all of them at once (`ACKS_AT_CLOSE`). Cyclone's default is 1 s
a writer, one writer after another, so a reader that died unannounced (killed, its machine
gone: no acknowledgement ever comes) held the gateway's Ctrl-C for a second per topic until
its lease ran out. A user's `CYCLONEDDS_URI` may still set its own."""

ACKS_AT_CLOSE = 0.5
"""Seconds a closing node waits for its live readers to acknowledge what it wrote last."""


def cyclone_config(scope: str, environ: Mapping[str, str] = os.environ) -> str:
    """The Cyclone DDS configuration: our `WRITER_LINGER`, then the user's `CYCLONEDDS_URI`
    (a later part overrides an earlier one), then the discovery range's own part (as
    rmw_cyclonedds_cpp adds its own after the user's): SUBNET is Cyclone's default; LOCALHOST
    keeps discovery and data on the loopback interface; OFF also sends no multicast, so only
    participants of this process meet."""
    if scope == "SUBNET":
        snippet = ""
    elif scope == "LOCALHOST":
        snippet = (
            "<General><Interfaces><NetworkInterface address='127.0.0.1' multicast='true'/>"
            "</Interfaces></General>"
        )
    else:
        snippet = (
            "<General><Interfaces><NetworkInterface address='127.0.0.1'/></Interfaces>"
            "<AllowMulticast>false</AllowMulticast></General>"
            "<Discovery><ParticipantIndex>none</ParticipantIndex></Discovery>"
        )
    parts = [_xml(WRITER_LINGER), environ.get("CYCLONEDDS_URI", "").strip(), _xml(snippet)]
    return ",".join(part for part in parts if part)


def _xml(settings: str) -> str:
    return f"<CycloneDDS><Domain Id='any'>{settings}</Domain></CycloneDDS>" if settings else ""


_domains: dict[int, Any] = {}
"""The cyclonedds `Domain` of each domain id this process configured: kept for the process's
life, shared by its nodes (deleting a Domain deletes every participant in it, another node's
too: a `serve` and a `listen` in one gateway share one)."""


def gid(entity: Any) -> bytes:
    """The ROS 2 GID of a DDS entity (Iron and later: its 16-byte GUID)."""
    return bytes(entity.guid.bytes)


def _userdata(text: str) -> Any:
    from cyclonedds.qos import Policy

    return Policy.Userdata(data=text.encode())


class Node:
    """A ROS 2 node on DDS: one participant, its topics, and what names them in the graph.

    `writer` and `reader` make endpoints; `announce` (re)writes the `ros_discovery_info`
    sample that lists them under the node `namespace`/`name`, and is called by each.
    `joined(ros_topic)`, if given, is called (on a DDS thread) each time a reader matches one
    of its writers (a volatile topic gives a new reader nothing written before it).
    """

    def __init__(
        self,
        domain: int,
        scope: str = "SUBNET",
        name: str = "robowire",
        namespace: str = "/",
        environ: Mapping[str, str] = os.environ,
        joined: Callable[[str], None] | None = None,
    ) -> None:
        from cyclonedds.core import DDSException
        from cyclonedds.domain import Domain, DomainParticipant
        from cyclonedds.pub import DataWriter, Publisher
        from cyclonedds.qos import Qos
        from cyclonedds.sub import Subscriber
        from cyclonedds.topic import Topic

        self.domain_id = domain
        self.joined = joined
        self.scope = scope
        self.name = name
        self.namespace = namespace
        config = cyclone_config(scope, environ)
        try:
            if domain not in _domains:
                # (fails if this process joined that domain already: it is shared as it is)
                with contextlib.suppress(DDSException):
                    _domains[domain] = Domain(domain, config)
            self.participant: Any = DomainParticipant(domain, qos=Qos(_userdata("enclave=/;")))
            self.publisher = Publisher(self.participant)
            self.subscriber = Subscriber(self.participant)
            info_type = types.idl_class(DISCOVERY_TYPE)
            info_topic = Topic(self.participant, DISCOVERY_TOPIC, info_type)
            self._info_writer = DataWriter(
                self.publisher, info_topic, qos=self._qos(DISCOVERY_INFO, DISCOVERY_TYPE)
            )
        except DDSException as exc:
            raise TransportError(f"ros2: cannot join DDS domain {domain}: {exc}") from None
        self._topics: dict[str, Any] = {}
        self.writers: list[RawWriter] = []
        self.readers: list[RawReader] = []

    def _qos(self, profile: Profile, ros_type: str) -> Any:
        from cyclonedds.qos import Qos

        return Qos(*profile.policies(), _userdata(f"typehash={types.rihs01(ros_type)};"))

    def topic(self, dds_name: str, ros_type: str) -> Any:
        """The DDS topic `dds_name` of `ros_type` (made once)."""
        from cyclonedds.topic import Topic

        found = self._topics.get(dds_name)
        if found is None:
            found = Topic(self.participant, dds_name, types.idl_class(ros_type))
            self._topics[dds_name] = found
        return found

    def writer(self, ros_topic: str, ros_type: str, profile: Profile) -> RawWriter:
        """A raw writer of the ROS topic `ros_topic` (absolute, e.g. `/tf`), announced;
        the node's `joined(ros_topic)` is called (on a DDS thread) when a reader matches it."""
        from cyclonedds.core import Listener
        from cyclonedds.pub import DataWriter

        listener = None
        if self.joined is not None:
            joined = self.joined

            def matched(_: Any, status: Any) -> None:
                if status.current_count_change > 0:
                    joined(ros_topic)

            listener = Listener(on_publication_matched=matched)  # type: ignore[no-untyped-call]
        topic = self.topic(names.dds_topic(ros_topic), ros_type)
        made = RawWriter(
            DataWriter(self.publisher, topic, qos=self._qos(profile, ros_type), listener=listener),
            ros_topic,
            ros_type,
            profile,
        )
        made.listener = listener  # (kept as long as the writer)
        self.writers.append(made)
        self.announce()
        return made

    def reader(self, dds_topic: str, ros_type: str, profile: Profile) -> RawReader:
        """A raw reader of the DDS topic `dds_topic` (e.g. `rt/tf`), announced."""
        from cyclonedds.sub import DataReader

        topic = self.topic(dds_topic, ros_type)
        made = RawReader(
            DataReader(self.subscriber, topic, qos=self._qos(profile, ros_type)),
            dds_topic,
            ros_type,
        )
        self.readers.append(made)
        self.announce()
        return made

    def announce(self) -> None:
        """Write the node's `ros_discovery_info` sample: this participant's GID, and the node
        with its readers' and writers' GIDs."""
        gid_type = types.idl_class("rmw_dds_common/msg/Gid")
        node_type = types.idl_class("rmw_dds_common/msg/NodeEntitiesInfo")
        info_type = types.idl_class(DISCOVERY_TYPE)
        node = node_type(
            node_namespace=self.namespace,
            node_name=self.name,
            reader_gid_seq=[gid_type(data=list(gid(r.reader))) for r in self.readers],
            writer_gid_seq=[gid_type(data=list(gid(w.writer))) for w in self.writers],
        )
        sample = info_type(
            gid=gid_type(data=list(gid(self.participant))), node_entities_info_seq=[node]
        )
        self._info_writer.write(sample)

    def close(self) -> None:
        """Leave the domain: every entity of the node is deleted with its participant, once
        its readers have acknowledged what it wrote (`ACKS_AT_CLOSE` at most, for all of its
        writers at once)."""
        from cyclonedds.core import DDSException

        participant, self.participant = self.participant, None
        if participant is not None:
            end = time.monotonic() + ACKS_AT_CLOSE  # (Cyclone waits per writer only)
            for writer in [self._info_writer, *(w.writer for w in self.writers)]:
                left = end - time.monotonic()
                if left <= 0.0:
                    break
                with contextlib.suppress(DDSException):
                    writer.wait_for_acks(int(left * 1e9))
            self.writers.clear()
            self.readers.clear()
            self._topics.clear()
            del self._info_writer, self.publisher, self.subscriber
            del participant


class RawWriter:
    """Writes CDR bytes (encapsulation header included) as samples of one topic."""

    def __init__(self, writer: Any, ros_topic: str, ros_type: str, profile: Profile) -> None:
        from cyclonedds._clayer import ddspy_write

        self._write = ddspy_write
        self.writer = writer
        self._ref = writer._ref
        self.ros_topic = ros_topic
        self.ros_type = ros_type
        self.profile = profile
        self.samples = 0
        self.listener: Any = None

    def write(self, data: bytes) -> None:
        """Write one sample; TransportError if DDS refuses it."""
        if len(data) & 3:  # DDS samples are a multiple of 4 bytes (`DataWriter.write` pads too)
            data = data + bytes(4 - (len(data) & 3))
        result = self._write(self._ref, data)
        if result < 0:
            raise TransportError(f"ros2: writing {self.ros_topic} failed (DDS error {result})")
        self.samples += 1


class RawReader:
    """Takes the samples of one topic as bytes (encapsulation header included)."""

    def __init__(self, reader: Any, dds_topic: str, ros_type: str) -> None:
        from cyclonedds._clayer import ddspy_take
        from cyclonedds.core import InstanceState, SampleState, ViewState

        self._take = ddspy_take
        self._mask = SampleState.Any | ViewState.Any | InstanceState.Any
        self.reader = reader
        self._ref = reader._ref
        self.dds_topic = dds_topic
        self.ros_type = ros_type

    def take(self, limit: int = 256) -> list[tuple[bytes, Any]]:
        """Up to `limit` samples waiting: (bytes, cyclonedds SampleInfo) of each valid one."""
        got = self._take(self._ref, self._mask, limit)
        if isinstance(got, int):
            raise TransportError(f"ros2: reading {self.dds_topic} failed (DDS error {got})")
        return [(bytes(data), info) for data, info in got if info.valid_data]
