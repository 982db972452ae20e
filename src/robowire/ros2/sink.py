"""`robowire serve ros2://[?domain=N&prefix=NS&frame=F&qos=reliable|sensor&device_topics=N&rate=HZ]`:
the world on ROS 2 over DDS, as a stock ROS 2 node (`/robowire`) would publish it.

`topics.Topics` turns each pull's updates into (topic, type, QoS, bytes); this sink writes
them through a `dds.Node`, making each topic's writer on first use (`rt/<topic>`, its `dds_`
type, its QoS, `typehash=` user data; announced in `ros_discovery_info`). `/diagnostics` goes
out at most once a second. A volatile topic gives a reader that joins nothing written before
it, so when a reader matches one of its writers the next pull sends that topic's state of
every device again (as Foxglove's sink does for a client that subscribes): a node started
after robowire sees parked vehicles and still trackers at once, not at their next change
(readers already there get those samples again). A write DDS refuses is counted and named in
status, never raised; a device renamed to a legal ROS name is named once in the log and in
status, and counted (status `errors`; `stats.extra["renamed"]`).

Options: `domain` (else `ROS_DOMAIN_ID`, else 0), `prefix` (the namespace of per-device
topics and the markers: `/robowire`, and `/vrpn_mocap` for VRPN trackers), `frame` (the
parent frame, `world`), `qos` of pose and twist topics (`reliable`, the default, as MAVROS
and PX4 need; or `sensor`: best effort, depth 5, as vrpn_mocap's default), `device_topics`
(how many devices of each source get topics of their own, 100), `rate` (pulls a second, 30).
The discovery range is ROS 2's: `ROS_AUTOMATIC_DISCOVERY_RANGE` or `ROS_LOCALHOST_ONLY`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, TransportError
from robowire.ros2 import dds, names
from robowire.ros2.topics import DEFAULT_DEVICES, Message, Topics, snapshot
from robowire.service import Sink
from robowire.world import LogEvent, Update, World

log = logging.getLogger("robowire")

SINK_OPTIONS = frozenset({"domain", "prefix", "frame", "qos", "device_topics", "rate"})
QOS = {"reliable": dds.RELIABLE, "sensor": dds.SENSOR}
DEFAULT_RATE = 30.0
DIAGNOSTICS_PERIOD = 1.0  # seconds between /diagnostics (diagnostic_updater's default rate)
# A joined topic is sent again this much later: discovery is two-sided, and what the writer
# sends between matching a new reader and that reader matching the writer is lost to it (a
# volatile reader starts at the writer's next sample)
REJOIN_AGAIN = 1.0


class Writing(Protocol):
    """A topic's writer: a DDS one (`dds.RawWriter`), or rmw_zenoh's (`zenoh_node`)."""

    def write(self, data: bytes) -> None: ...


class Publishing(Protocol):
    """A ROS 2 node that makes writers: over DDS (`dds.Node`), or rmw_zenoh's (`zenoh_node`)."""

    def writer(self, ros_topic: str, ros_type: str, profile: dds.Profile) -> Writing: ...

    def close(self) -> None: ...


class Ros2Sink(Sink):
    """Publishes the world on ROS 2 topics over DDS (see the module docstring)."""

    announce = "publishing on"

    def __init__(
        self,
        domain: int,
        scope: str,
        topics: Topics,
        pose_qos: dds.Profile = dds.RELIABLE,
        rate: float = DEFAULT_RATE,
    ) -> None:
        super().__init__("ros2://")
        self.domain = domain
        self.scope = scope
        self.topics = topics
        self.profiles = {
            "tf": dds.TF,
            "tf_static": dds.TF_STATIC,
            "pose": pose_qos,
            "reliable": dds.RELIABLE,
            "rosout": dds.ROSOUT,
        }
        self._joined: set[str] = set()  # topics a reader joined since the last pull (DDS adds)
        self._again: dict[str, float] = {}  # joined topics to send again, and when
        self.max_rate = rate
        self.url = f"ROS 2 domain {domain} (discovery {scope.lower()}) as node /robowire"
        self.node: Publishing | None = None
        self.writers: dict[str, Writing] = {}
        self._diagnosed = 0.0
        self._failed: set[str] = set()  # topics whose writer DDS refused (said once)

    async def serve(self, world: World) -> None:
        loop = asyncio.get_running_loop()
        self.node = await loop.run_in_executor(
            None, lambda: dds.Node(self.domain, self.scope, joined=self._joined.add)
        )
        self.listening(("domain", self.domain))
        await asyncio.Future()

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        if self.node is None:
            return True
        for item in items:
            if isinstance(item, LogEvent):
                self._send(self.topics.log(item))
            elif len(item) and (table := world.tables.get(item.source)) is not None:
                for message in self.topics.build(table, item):
                    self._send(message)
        now = time.time()
        if self._joined or (self._again and now >= min(self._again.values())):
            self._send_state(world, now)
        if now - self._diagnosed >= DIAGNOSTICS_PERIOD:
            self._diagnosed = now
            diagnostics = self.topics.diagnostics(world.tables, now)
            if diagnostics is not None:
                self._send(diagnostics)
        self._report_renamed()
        return True

    def _send_state(self, world: World, now: float) -> None:
        """The topics a reader joined, again, from every device's latest values: now, and
        once more `REJOIN_AGAIN` later."""
        joined = {topic for topic, at in self._again.items() if at <= now}
        for topic in joined:
            del self._again[topic]
        while self._joined:  # (DDS's threads add to it meanwhile)
            topic = self._joined.pop()
            joined.add(topic)
            self._again[topic] = now + REJOIN_AGAIN
        for table in list(world.tables.values()):
            if len(table):
                for message in self.topics.build(table, snapshot(table)):
                    if message.topic in joined:
                        self._send(message)

    def _send(self, message: Message) -> None:
        writer = self.writers.get(message.topic)
        if writer is None:
            writer = self._writer(message)
            if writer is None:
                return
        try:
            writer.write(message.data)
        except TransportError as exc:
            self.stats.drop(str(exc))
            return
        self.stats.messages_out += 1
        self.stats.bytes_out += len(message.data)

    def _writer(self, message: Message) -> Writing | None:
        assert self.node is not None
        if message.topic in self._failed:
            return None
        if len(names.dds_topic(message.topic)) > names.MAX_DDS_TOPIC or not names.is_legal(
            message.topic
        ):
            reason = f"ros2: {message.topic} is not a topic ROS 2 can name; not published"
        else:
            try:
                writer = self.node.writer(message.topic, message.type, self.profiles[message.qos])
            except Exception as exc:  # DDS refused it: said once, the rest goes on
                reason = f"ros2: cannot publish {message.topic}: {exc}"
            else:
                self.writers[message.topic] = writer
                return writer
        self._failed.add(message.topic)
        self.stats.drop(reason)
        log.warning("%s", reason)
        return None

    def _report_renamed(self) -> None:
        renamed = self.topics.renamed
        if not renamed:
            return
        for device, ros in renamed:
            log.warning("ros2: %s is not a legal ROS name; published as %s", device, ros)
        extra = self.stats.extra  # bad input: status shows `errors` and the last one named
        extra["renamed"] = extra.get("renamed", 0) + len(renamed)
        extra["errors"] = extra.get("errors", 0) + len(renamed)
        device, ros = renamed[-1]
        self.stats.last_drop_reason = f"ros2: {device} renamed {ros} (not a legal ROS name)"
        renamed.clear()

    def finish(self, world: World) -> None:
        if self.node is not None:
            self.node.close()
            self.node = None
        self.writers.clear()


def open_sink(endpoint: Endpoint) -> Ros2Sink:
    """The sink of a `ros2://?domain=N&prefix=NS&frame=F&qos=Q&device_topics=N&rate=HZ` URL."""
    endpoint.check_options(SINK_OPTIONS, "a ROS 2 publisher")
    if endpoint.host_given or endpoint.port is not None:
        raise ConfigError(f"{endpoint.raw}: ros2:// takes no host or port (DDS discovers peers)")
    qos = endpoint.option("qos", "reliable")
    if qos not in QOS:
        raise ConfigError(f"{endpoint.raw}: qos must be one of {', '.join(QOS)}")
    frame = endpoint.option("frame", "world")
    if not names.is_legal(frame):
        raise ConfigError(f"{endpoint.raw}: frame {frame!r} is not a legal ROS frame name")
    devices = endpoint.float_option("device_topics", DEFAULT_DEVICES)
    if devices != int(devices):
        raise ConfigError(f"{endpoint.raw}: device_topics must be a whole number")
    topics = Topics(endpoint.options.get("prefix"), frame, int(devices))
    return Ros2Sink(
        dds.domain_id(endpoint.options.get("domain")),
        dds.discovery_range(),
        topics,
        QOS[qos],
        endpoint.float_option("rate", DEFAULT_RATE) or DEFAULT_RATE,
    )
