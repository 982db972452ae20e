"""A ROS 2 node on Zenoh as rmw_zenoh_cpp makes one (`ros2+zenoh://HOST:PORT`): the same
`writer` face as the DDS `Node` (`robowire.ros2.dds`), so whatever publishes topics through
one publishes through the other; the format is `rmw_zenoh`'s.

The session connects to the router at HOST:PORT (rmw_zenohd, 7447 by default) as a Zenoh
client, with multicast scouting off (`robowire.zenoh.net`): every sample goes through the
router, which forwards it to the ROS 2 nodes there. The node's liveliness token puts it in
the graph (`ros2 node list`), each writer's token its publisher (`ros2 topic list`,
`ros2 topic info -v`). A writer is a Zenoh advanced publisher as rmw_zenoh declares it: a
cache of `depth` samples and publisher detection for a transient-local topic (/tf_static),
so a late subscriber gets them; every sample carries its attachment (sequence number from 1,
the source time, the writer's GID).

The graph (`Graph`) is what the node's liveliness subscriber has seen of the other
entities in its domain: which subscriptions a writer has (`matched`), and which publishers
there are (for `listen ros2+zenoh://`). `joined(ros_topic)`, if given, is called (on a Zenoh
thread) each time a subscription's token appears, as `dds.Node`'s is when a reader matches:
a volatile topic gives a new subscriber nothing put before it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from robowire.errors import TransportError
from robowire.ros2 import rmw_zenoh, types
from robowire.ros2.dds import Profile
from robowire.ros2.rmw_zenoh import Entity

if TYPE_CHECKING:
    import zenoh

MISS_HEARTBEAT_S = 0.5  # rmw_zenoh's SAMPLE_MISS_DETECTION_HEARTBEAT_PERIOD is of this order


class Graph:
    """The entities whose liveliness tokens are alive in the node's domain (updated on
    Zenoh's threads, read on the event loop: a lock around the dict)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._alive: dict[str, Entity] = {}
        self.ignored = 0  # tokens under @ros2_lv that are not an entity rmw_zenoh would take

    def seen(self, key: str, alive: bool) -> Entity | None:
        """Take a token that came (`alive`) or went; its entity (None: not one)."""
        entity = rmw_zenoh.parse_token(key)
        with self._lock:
            if entity is None:
                self.ignored += 1
            elif alive:
                self._alive[key] = entity
            else:
                self._alive.pop(key, None)
        return entity

    def entities(self, kind: str | None = None) -> list[Entity]:
        with self._lock:
            found = list(self._alive.values())
        return [e for e in found if kind is None or e.kind == kind]


class ZenohWriter:
    """Puts CDR bytes (encapsulation header included) as samples of one topic."""

    def __init__(self, node: ZenohNode, publisher: Any, entity: Entity, token: Any) -> None:
        self.node = node
        self.publisher = publisher
        self.entity = entity
        self.token = token
        self.gid = entity.gid
        self.ros_topic = entity.topic
        self.ros_type = entity.ros_type
        assert entity.qos is not None
        self.profile: Profile = entity.qos
        self.sequence = 0
        self.samples = 0

    def write(self, data: bytes, nanos: int | None = None) -> None:
        """Put one sample, its source time `nanos` (now when not given)."""
        import zenoh

        self.sequence += 1
        stamp = time.time_ns() if nanos is None else nanos
        try:
            self.publisher.put(
                data, attachment=rmw_zenoh.attachment(self.sequence, stamp, self.gid)
            )
        except zenoh.ZError as exc:  # (a closed session)
            raise TransportError(f"ros2+zenoh: writing {self.ros_topic} failed: {exc}") from None
        self.samples += 1

    def matched(self) -> int:
        """How many subscriptions of this topic and type the graph has (for status)."""
        return sum(
            1
            for e in self.node.graph.entities(rmw_zenoh.SUBSCRIPTION)
            if (e.topic, e.type_hash) == (self.ros_topic, self.entity.type_hash)
        )


class ZenohNode:
    """A ROS 2 node on an open Zenoh session (see the module docstring)."""

    def __init__(
        self,
        session: zenoh.Session,
        domain: int,
        name: str = "robowire",
        namespace: str = "/",
        joined: Callable[[str], None] | None = None,
    ) -> None:
        self.session = session
        self.joined = joined
        self.domain_id = domain
        self.name = name
        self.namespace = namespace
        self.zid = str(session.info.zid())
        self.entity = Entity(domain, self.zid, 0, 0, rmw_zenoh.NODE, name, namespace)
        self.graph = Graph()
        self.writers: list[ZenohWriter] = []
        self._next_id = 1  # rmw_zenoh numbers a context's entities from 1 (the node took 0)
        liveliness = session.liveliness()
        self._declared: list[Any] = [
            liveliness.declare_subscriber(
                f"{rmw_zenoh.ADMIN_SPACE}/{domain}/**", self._token_seen, history=True
            ),
            liveliness.declare_token(self.entity.token()),
        ]

    def _token_seen(self, sample: Any) -> None:
        import zenoh

        alive = sample.kind == zenoh.SampleKind.PUT
        entity = self.graph.seen(str(sample.key_expr), alive)
        if not alive or entity is None or self.joined is None:
            return
        if entity.kind == rmw_zenoh.SUBSCRIPTION:  # a subscriber came: its topic again
            self.joined(entity.topic)

    def _entity(self, kind: str, ros_topic: str, ros_type: str, profile: Profile) -> Entity:
        entity = Entity(
            self.domain_id,
            self.zid,
            0,
            self._next_id,
            kind,
            self.name,
            self.namespace,
            "/",
            ros_topic,
            ros_type,
            types.rihs01(ros_type),
            profile,
        )
        self._next_id += 1
        return entity

    def subscription(self, ros_topic: str, ros_type: str, profile: Profile) -> None:
        """Put a subscription of `ros_topic` in the graph (its token: `ros2 topic info`
        counts it); the samples are the caller's to take (a wildcard subscriber reads them)."""
        entity = self._entity(rmw_zenoh.SUBSCRIPTION, ros_topic, ros_type, profile)
        self._declared.append(self.session.liveliness().declare_token(entity.token()))

    def writer(self, ros_topic: str, ros_type: str, profile: Profile) -> ZenohWriter:
        """A writer of the ROS topic `ros_topic` (absolute, e.g. `/tf`), in the graph."""
        import zenoh
        import zenoh.ext

        entity = self._entity(rmw_zenoh.PUBLISHER, ros_topic, ros_type, profile)
        key = rmw_zenoh.data_key(self.domain_id, ros_topic, ros_type, entity.type_hash)
        options: dict[str, Any] = {
            "congestion_control": zenoh.CongestionControl.DROP,
            "reliability": zenoh.Reliability.RELIABLE
            if profile.reliable
            else zenoh.Reliability.BEST_EFFORT,
        }
        if profile.transient_local:
            options["publisher_detection"] = True
            options["cache"] = zenoh.ext.CacheConfig(profile.depth)
            if profile.reliable:
                options["sample_miss_detection"] = zenoh.ext.MissDetectionConfig(
                    heartbeat=None, sporadic_heartbeat=MISS_HEARTBEAT_S
                )
        publisher = zenoh.ext.declare_advanced_publisher(self.session, key, **options)
        token = self.session.liveliness().declare_token(entity.token())
        made = ZenohWriter(self, publisher, entity, token)
        self.writers.append(made)
        return made

    def close(self) -> None:
        """Leave the graph: every token and publisher undeclared (the session is the
        caller's)."""
        for writer in self.writers:
            for declared in (writer.token, writer.publisher):
                declared.undeclare()
        self.writers.clear()
        for declared in self._declared:
            declared.undeclare()
        self._declared.clear()
