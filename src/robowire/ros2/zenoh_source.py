"""`robowire listen ros2+zenoh://HOST:PORT[?domain=N&topics=GLOB&frame=F]`: ROS 2 robots on
rmw_zenoh into the world, as `listen ros2://` reads them over DDS (docs/ros2.md, "Zenoh").

The session connects to the router at HOST:PORT (rmw_zenohd; 7447 by default) and subscribes
to every data key of the domain (`<domain>/**`, `robowire.ros2.rmw_zenoh`), as one ROS 2
subscription per topic would (an advanced subscriber that also asks the publishers' caches,
so a transient-local /tf_static sent before it came arrives too), and its node and a
subscription per topic it reads are in the graph (`ZenohNode`). A sample is taken
when its key names a topic (narrowed by `?topics=`), a type robowire reads and that type's
RIHS01 hash (rmw_zenoh's keys carry it: a different hash is a different definition, which a
ROS 2 subscriber would not match either), and it carries the attachment rmw_zenoh requires;
it is decoded (`decode`) into the listen side's `SampleRead` and written by its adapter
(`Ros2Adapter`), so the devices are those `listen ros2://` makes.

What is not taken is counted and named once (a log line and the status's last drop): a
sample without a well-formed attachment, a hash that is not the type's, a type robowire does
not read, a key that is not rmw_zenoh's, a sample that does not decode. Zenoh delivers on its
own threads: the attachment is checked there, and the samples wait for the event loop in the
Zenoh source's bounded inbox (`robowire.zenoh.source.Inbox`: past its bounds the oldest go,
counted).
"""

from __future__ import annotations

import asyncio
import fnmatch
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, DecodeError
from robowire.ros2 import dds, decode, rmw_zenoh, types
from robowire.ros2.decode import Decoded
from robowire.ros2.said import Said
from robowire.ros2.source import TF_STATIC, Ros2Adapter, SampleRead, profile_for
from robowire.ros2.zenoh_node import ZenohNode
from robowire.service import Source
from robowire.timebase import monotonic
from robowire.wire import PacketDropped
from robowire.world import World
from robowire.zenoh.net import DEFAULT_PORT, Link, open_session
from robowire.zenoh.source import Inbox

if TYPE_CHECKING:
    import zenoh

SOURCE_OPTIONS = frozenset({"domain", "topics", "frame"})
NODE_NAME = "robowire_listen"


@dataclass
class _Key:
    """What a data key is to this source: its topic and type, and its decoder (None: not
    taken, `why` says why)."""

    topic: str
    ros_type: str
    decoder: Callable[[bytes], Decoded] | None
    why: str = ""  # said once
    drop: bool = False  # each sample counted as a drop (a type not read is not: as on DDS)


class ZenohRos2Source(Source):
    """Reads ROS 2 topics on rmw_zenoh (see the module docstring)."""

    def __init__(
        self,
        link: Link,
        domain: int,
        globs: tuple[str, ...] = (),
        reference: str = "world",
    ) -> None:
        super().__init__(f"ros2+zenoh://{link.host}:{link.port}")
        self.link = link
        self.domain = domain
        self.globs = globs
        self.reference = reference
        self.node: ZenohNode | None = None
        self._keys: dict[str, _Key] = {}
        self._lock = threading.Lock()  # the attachment check runs on Zenoh's threads
        self._bad: Counter[str] = Counter()  # key -> samples without a good attachment
        self.said = Said(self)
        self._inbox_drops = 0

    def new_adapter(self, world: World) -> Ros2Adapter:
        return Ros2Adapter(world, self.name, self.reference)

    async def connect(self, world: World) -> None:
        import zenoh.ext

        session = await asyncio.to_thread(open_session, self.link)
        inbox = Inbox(asyncio.get_running_loop())
        declared: list[Any] = []
        try:
            self.node = ZenohNode(session, self.domain, NODE_NAME)

            def sample(received: zenoh.Sample) -> None:
                key = str(received.key_expr)
                attachment = received.attachment
                try:
                    rmw_zenoh.parse_attachment(
                        None if attachment is None else attachment.to_bytes()
                    )
                except DecodeError:
                    with self._lock:
                        self._bad[key] += 1
                    return
                inbox.put(key, received.payload.to_bytes())

            # an advanced subscriber, as rmw_zenoh's transient-local subscriptions are: it also
            # asks the publishers' caches (a transient-local /tf_static sent before it came)
            history = zenoh.ext.HistoryConfig(detect_late_publishers=True)
            declared.append(
                zenoh.ext.declare_advanced_subscriber(
                    session, f"{self.domain}/**", sample, history=history
                )
            )
            self.connected()
            while True:
                samples = await inbox.wait()
                self.deliver(self._decode(samples), monotonic())
                self._count_bad(inbox)
        finally:
            for entity in declared:
                entity.undeclare()
            if self.node is not None:
                self.node.close()
                self.node = None
            await asyncio.to_thread(cast(Callable[[], None], session.close))

    def _key(self, key: str) -> _Key:
        found = self._keys.get(key)
        if found is not None:
            return found
        parsed = rmw_zenoh.parse_data_key(key)
        if parsed is None or parsed.domain != self.domain:
            found = _Key(key, "", None, f"{key}: not an rmw_zenoh topic key", drop=True)
        elif self.globs and not any(fnmatch.fnmatchcase(parsed.topic, g) for g in self.globs):
            found = _Key(parsed.topic, parsed.ros_type, None)  # not asked for: quietly
        elif parsed.ros_type not in decode.READABLE:
            why = f"{parsed.topic}: type {parsed.ros_type} is not read"
            found = _Key(parsed.topic, parsed.ros_type, None, why)
        elif parsed.type_hash != types.rihs01(parsed.ros_type):
            why = (
                f"{parsed.topic}: type hash {parsed.type_hash} is not {parsed.ros_type}'s "
                f"({types.rihs01(parsed.ros_type)}): another definition, not read"
            )
            found = _Key(parsed.topic, parsed.ros_type, None, why, drop=True)
        else:
            found = _Key(parsed.topic, parsed.ros_type, decode.decoder(parsed.ros_type))
            if self.node is not None:  # in the graph as a ROS 2 subscription of it
                static = found.topic == TF_STATIC
                profile = profile_for(found.topic, reliable=True, durable=static)
                self.node.subscription(found.topic, found.ros_type, profile)
        self._keys[key] = found
        return found

    def _decode(self, samples: list[tuple[str, bytes]]) -> list[SampleRead | PacketDropped]:
        events: list[SampleRead | PacketDropped] = []
        for key, payload in samples:
            found = self._key(key)
            if found.decoder is None:
                if found.drop:
                    self.stats.dropped += 1
                if found.why:
                    self.said(found.why)
                continue
            try:
                events.append(SampleRead(found.topic, found.ros_type, found.decoder(payload)))
            except DecodeError as exc:
                reason = f"{found.topic}: {exc.reason} (at byte {exc.offset})"
                events.append(PacketDropped(protocol=decode.PROTOCOL, reason=reason))
                self.said(f"{found.topic}: a sample is not a {found.ros_type}")
        return events

    def _count_bad(self, inbox: Inbox) -> None:
        with self._lock:
            bad, self._bad = self._bad, Counter()
        for key, count in bad.items():
            self.stats.dropped += count
            topic = self._key(key).topic
            self.said(f"{topic}: a sample without the attachment rmw_zenoh requires")
        if inbox.dropped > self._inbox_drops:
            self.stats.dropped += inbox.dropped - self._inbox_drops
            self.stats.last_drop_reason = "fell behind: oldest samples dropped"
            self._inbox_drops = inbox.dropped

    def problems(self) -> list[str]:
        """Everything named so far."""
        return sorted(self.said.said)


def open_source(endpoint: Endpoint) -> ZenohRos2Source:
    """The source of a `ros2+zenoh://HOST:PORT[?domain=N&topics=GLOB[,GLOB]&frame=F]` URL."""
    endpoint.check_options(SOURCE_OPTIONS, "a ROS 2 (rmw_zenoh) listener")
    port = endpoint.port_or(DEFAULT_PORT)
    if port == 0:
        raise ConfigError(f"{endpoint.raw}: ros2+zenoh needs the router's port (rmw_zenohd: 7447)")
    domain = dds.domain_id(endpoint.options.get("domain"))
    globs = tuple(g.strip() for g in endpoint.option("topics", "").split(",") if g.strip())
    reference = endpoint.option("frame", "world").strip("/")
    if not reference:
        raise ConfigError(f"{endpoint.raw}: ?frame= names no frame")
    return ZenohRos2Source(Link(endpoint.host, port, "connect"), domain, globs, reference)
