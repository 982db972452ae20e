"""`robowire listen ros2://[?domain=N&topics=GLOB&frame=F]`: ROS 2 robots into the world.

It joins the DDS domain as a ROS 2 node (`/robowire_listen`, `robowire.ros2.dds`), learns the
topics from DDS discovery (the `DCPSPublication` built-in topic: each writer's topic, type
and QoS, as `ros2 topic list` does) and opens one reader per topic of a type it reads
(`decode.READABLE`), with the QoS that matches the writers (reliable when the first writer
is, best effort for a sensor-data publisher; transient-local for a transient-local writer,
tf2's static listener QoS on `/tf_static`); a reader whose QoS a later writer of its topic
cannot match is made again, lower. `?topics=` narrows what is read to ROS topics matching
one of its comma-separated globs (`/tf*,/vrpn_mocap/*`).

What becomes of each type (`?frame=` names the reference frame, `world` by default):

    tf2_msgs/TFMessage (/tf, /tf_static), TransformStamped
        each child frame a device (its id the frame's device name, `names.device_name`),
        its pose composed to the reference frame (`robowire.ros2.tf`)
    PoseStamped, PoseWithCovarianceStamped, Odometry, TwistStamped, NavSatFix
        one device per topic, named after the topic without its last token when that is
        one of `LEAVES` (`/vrpn_mocap/rb1/pose` and `/vrpn_mocap/rb1/twist` are the device
        `vrpn_mocap/rb1`), else after the whole topic; poses and velocities placed in the
        reference frame through the TF tree when stamped in another frame; a fix writes the
        geodetic position (not when its status says no fix)

Bad input never stops the source, and each kind is named once (a log line, and the status's
last drop): a topic of a type it does not read (with the type), a sample that does not
decode (counted, each, as an error), frames on a TF cycle or with no path to the reference
frame, transforms tf2 would refuse, a pose stamped in a frame with no path.

cyclonedds calls back on its own threads; a callback only marks its reader ready and wakes
the event loop (once per batch). The loop then takes, per turn, at most `DISCOVERY_TURN`
discovery samples (a participant that floods discovery is read a bounded slice at a time,
the rest at the next turns) and `READ_TURN` samples of each ready reader, `READ_BUDGET` of
all of them. What waits is
bounded where DDS keeps it: each reader's history (keep last N) and the discovery cache.
Samples decode when taken; each is a `Report` of its topic and frames, so a newer one of the
same sheds it while the gateway is behind (docs/architecture.md, "Overload").
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, DecodeError, RobowireError, TransportError
from robowire.quaternions import rotate
from robowire.ros2 import dds, decode, names
from robowire.ros2.decode import Decoded
from robowire.ros2.tf import TfTree, compose
from robowire.service import Source
from robowire.timebase import monotonic
from robowire.wire import PacketDropped, Report
from robowire.world import World

log = logging.getLogger("robowire")

SOURCE_OPTIONS = frozenset({"domain", "topics", "frame"})
NODE_NAME = "robowire_listen"
DISCOVERY_TURN = 32  # discovery samples taken at one wake-up at most
READ_TURN = 256  # samples of one reader taken at one wake-up at most
READ_BUDGET = 1024  # samples of all readers taken at one wake-up at most (the rest: next turn)
MAX_TOPICS = 1024  # readers at most (a flood of topics is named, not read)
TF_TYPES = frozenset({decode.TF, decode.TRANSFORM})
TF_STATIC = "/tf_static"
LEAVES = frozenset({"pose", "twist", "odom", "odometry", "fix", "gps", "navsat"})
FRAME_KIND = "frame"  # the kind of a device that is a TF frame
TOPIC_KIND = "robot"  # the kind of a device that is a pose topic's


@dataclass(frozen=True, slots=True)
class SampleRead(Report):
    """One sample of a topic, decoded: a newer one of the same topic and frames states all
    of it anew."""

    topic: str
    ros_type: str
    decoded: Decoded

    def covers(self) -> Hashable:
        return (self.topic, self.decoded.frames, self.decoded.children)


def topic_device(topic: str) -> str:
    """The device a pose topic stands for (see the module docstring)."""
    parts = [part for part in topic.split("/") if part]
    if len(parts) > 1 and parts[-1] in LEAVES:
        parts.pop()
    return names.device_name("/".join(parts))


def _unit(q: np.ndarray) -> np.ndarray | None:
    """Quaternion rows normalised; None if any is not finite or has no length (ROS's
    "orientation unknown": all zeros, or NaN)."""
    norm = np.sqrt((q * q).sum(axis=1))
    if not (np.isfinite(norm).all() and (norm > 1e-9).all()):
        return None
    result: np.ndarray = q / norm[:, None]
    return result


class Ros2Adapter:
    """Decoded samples -> world: the TF tree's frames, and the pose topics' devices."""

    def __init__(self, world: World, source: str, reference: str = "world") -> None:
        self.world = world
        self.source = source
        self.tree = TfTree(reference)
        self.unplaced: dict[str, str] = {}  # pose topic -> the frame with no path it names
        self._slots = np.zeros(0, dtype=np.intp)  # TF tree row -> slot (-1: none yet)

    def apply(self, events: Sequence[object], receive_time: float) -> int:
        taken = 0
        moved = False
        for event in events:
            if not isinstance(event, SampleRead):
                continue
            taken += 1
            if event.ros_type in TF_TYPES:
                self.tree.take(event.decoded)
                moved = True
            else:
                self._topic(event, receive_time)
        if moved:
            self._frames(receive_time)
        return taken

    def _frames(self, receive_time: float) -> None:
        poses = self.tree.poses()
        if not len(poses.rows):
            return
        table = self.world.table(self.source)
        if len(self._slots) < len(self.tree):
            grown = np.full(max(len(self.tree), 2 * len(self._slots)), -1, dtype=np.intp)
            grown[: len(self._slots)] = self._slots
            self._slots = grown
        slots = self._slots[poses.rows]
        for at in np.flatnonzero(slots < 0):  # frames seen for the first time
            frame = poses.names[poses.rows[at]]
            slots[at] = self._slots[poses.rows[at]] = table.slot(
                names.device_name(frame) or frame, FRAME_KIND
            )
        self.world.update(
            self.source,
            slots,
            receive_time=receive_time,
            source_time=poses.stamps,
            position=poses.position,
            orientation=poses.orientation,
        )

    def _topic(self, event: SampleRead, receive_time: float) -> None:
        sample = event.decoded
        columns: dict[str, Any] = {}
        if sample.geodetic is not None and sample.fix is not None and sample.fix[0] >= 0:
            columns["geodetic"] = sample.geodetic  # (not with STATUS_NO_FIX, -1)
        if sample.position is not None or sample.velocity is not None:
            found, where = self.tree.in_reference(sample.frames)
            if not found[0]:
                self.unplaced[event.topic] = sample.frames[0]
                if not columns:
                    return
            else:
                self.unplaced.pop(event.topic, None)
                self._placed(sample, where.position, where.orientation, columns)
        if not columns:
            return
        table = self.world.table(self.source)
        slot = table.slot(topic_device(event.topic), TOPIC_KIND)
        self.world.update(
            self.source,
            np.array([slot], dtype=np.intp),
            receive_time=receive_time,
            source_time=sample.stamps,
            **columns,
        )

    @staticmethod
    def _placed(
        sample: Decoded, at: np.ndarray, turned: np.ndarray, columns: dict[str, Any]
    ) -> None:
        """A sample's pose and velocity in the reference frame, from its frame's pose there."""
        body = turned  # what the velocity is expressed in (odometry: the child frame)
        if sample.position is not None and sample.orientation is not None:
            unit = _unit(sample.orientation)
            position, orientation = compose(
                at, turned, sample.position, unit if unit is not None else sample.orientation
            )
            if np.isfinite(position).all():
                columns["position"] = position
            if unit is not None:
                columns["orientation"] = orientation
                body = orientation
        if sample.velocity is not None:
            frame = body if sample.children[0] else turned
            velocity = rotate(frame, sample.velocity)
            if np.isfinite(velocity).all():
                columns["velocity"] = velocity


class Wake:
    """What cyclonedds' threads tell the event loop: discovery has news, readers have data
    (each marked once, the loop woken once per batch)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._event = asyncio.Event()
        self._signalled = False
        self.discovery = False
        self.ready: set[int] = set()  # handles of readers with data

    def _wake(self) -> None:
        if not self._signalled:
            self._signalled = True
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody listens any more
                self._loop.call_soon_threadsafe(self._event.set)

    def discovered(self, _reader: object) -> None:
        """The built-in reader's callback (a cyclonedds thread)."""
        with self._lock:
            self.discovery = True
            self._wake()

    def data(self, reader: Any) -> None:
        """A topic reader's callback (a cyclonedds thread); `reader` is None when the reader
        is being deleted (made again lower, or the node closing)."""
        handle = getattr(reader, "_ref", None)
        if handle is None:
            return
        with self._lock:
            self.ready.add(int(handle))
            self._wake()

    def again(self, *, discovery: bool = False, ready: Sequence[int] = ()) -> None:
        """More is waiting than a turn took (the event loop): wake again after it."""
        with self._lock:
            self.discovery |= discovery
            self.ready.update(ready)
            self._wake()

    async def wait(self) -> tuple[bool, set[int]]:
        await self._event.wait()
        with self._lock:
            self._event.clear()
            self._signalled = False
            news, self.discovery = self.discovery, False
            ready, self.ready = self.ready, set()
        return news, ready


@dataclass(slots=True)
class Topic:
    """A topic being read: its reader, decoder and the QoS the reader asked for."""

    name: str
    ros_type: str
    profile: dds.Profile
    reader: dds.RawReader
    decode: Any  # Callable[[bytes], Decoded]


def _offered(qos: Any) -> tuple[bool, bool]:
    """(reliable, transient-local) of a writer's discovered QoS (DDS defaults if absent)."""
    from cyclonedds.qos import Policy

    reliable = True
    if qos is not None and Policy.Reliability in qos:
        reliable = not isinstance(qos[Policy.Reliability], type(Policy.Reliability.BestEffort))
    durable = False
    if qos is not None and Policy.Durability in qos:
        durable = qos[Policy.Durability] in (
            Policy.Durability.TransientLocal,
            Policy.Durability.Transient,
            Policy.Durability.Persistent,
        )
    return reliable, durable


def profile_for(topic: str, reliable: bool, durable: bool) -> dds.Profile:
    """The QoS a reader of `topic` asks for, to match a writer offering this."""
    if topic == TF_STATIC and reliable and durable:
        return dds.TF_STATIC_LISTENER
    if topic == "/tf" and reliable:
        return dds.TF
    depth = dds.RELIABLE.depth if reliable else dds.SENSOR.depth
    return dds.Profile(reliable=reliable, transient_local=durable, depth=depth)


class Ros2Source(Source):
    """Reads ROS 2 topics over DDS (see the module docstring)."""

    def __init__(
        self,
        name: str,
        domain: int,
        scope: str,
        topics: tuple[str, ...] = (),
        reference: str = "world",
    ) -> None:
        super().__init__(name)
        self.domain = domain
        self.scope = scope
        self.globs = topics
        self.reference = reference
        self.topics: dict[str, Topic] = {}  # ROS topic -> what reads it
        self.unreadable: dict[str, str] = {}  # ROS topic -> its type (not read)
        self.node: dds.Node | None = None
        self._handles: dict[int, Topic] = {}  # reader handle -> its topic
        self._said: set[tuple[str, str]] = set()  # (what, name) already named
        self._wake: Wake | None = None
        self._listener: Any = None  # the topic readers' (one for all)

    def new_adapter(self, world: World) -> Ros2Adapter:
        return Ros2Adapter(world, self.name, self.reference)

    async def connect(self, world: World) -> None:
        from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication
        from cyclonedds.core import DDSException, Listener

        node = await asyncio.to_thread(dds.Node, self.domain, self.scope, NODE_NAME)
        wake = self._wake = Wake(asyncio.get_running_loop())
        self.node = node
        try:
            discovery = BuiltinDataReader(
                node.participant,
                BuiltinTopicDcpsPublication,
                listener=Listener(on_data_available=wake.discovered),  # type: ignore[no-untyped-call]
            )
            self._listener = Listener(on_data_available=wake.data)  # type: ignore[no-untyped-call]
            self.connected()
            wake.again(discovery=True)  # writers discovered before the listener was set
            while True:
                news, ready = await wake.wait()
                if news and self._discover(discovery):
                    wake.again(discovery=True)
                events = self._read(ready)
                if events:
                    self.deliver(events, monotonic())
                self._name_problems()
        except DDSException as exc:  # the domain failed under us: join it again
            raise TransportError(f"ros2: DDS domain {self.domain}: {exc}") from None
        finally:
            self._wake = None
            self.node = None
            self.topics.clear()
            self._handles.clear()
            node.close()

    def _discover(self, discovery: Any) -> bool:
        """Take a turn's discovery samples; True if more may be waiting."""
        samples = discovery.take(N=DISCOVERY_TURN)
        for sample in samples:
            topic_name = getattr(sample, "topic_name", None)
            type_name = getattr(sample, "type_name", None)
            if topic_name is None or type_name is None:
                continue  # a writer gone (an invalid sample): its reader stays for the next
            self._writer_seen(topic_name, type_name, sample.qos)
        return len(samples) >= DISCOVERY_TURN

    def _writer_seen(self, dds_topic: str, dds_type: str, qos: Any) -> None:
        topic = names.ros_topic(dds_topic)
        if topic is None or self.node is None:
            return  # not a ROS topic (ros_discovery_info, a bare DDS application's)
        if self.globs and not any(fnmatch.fnmatchcase(topic, g) for g in self.globs):
            return
        ros_type = names.ros_type(dds_type) or dds_type
        known = self.topics.get(topic)
        if known is not None and known.ros_type != ros_type:
            self._unreadable(topic, f"{ros_type} (its readers read {known.ros_type})")
            return
        if ros_type not in decode.READABLE:
            self._unreadable(topic, ros_type)
            return
        reliable, durable = _offered(qos)
        if known is not None:
            if (known.profile.reliable <= reliable) and (known.profile.transient_local <= durable):
                return  # its reader matches this writer too
            reliable &= known.profile.reliable
            durable &= known.profile.transient_local
            self._drop_reader(known)
        elif len(self.topics) >= MAX_TOPICS:
            self._unreadable(topic, f"{ros_type} (more than {MAX_TOPICS} topics: not read)")
            return
        profile = profile_for(topic, reliable, durable)
        try:
            reader = self.node.reader(dds_topic, ros_type, profile)
        except Exception as exc:
            self._unreadable(topic, f"{ros_type} (no reader: {exc})")
            return
        reader.reader.set_listener(self._listener)
        decoder = decode.decoder(ros_type)
        found = self.topics[topic] = Topic(topic, ros_type, profile, reader, decoder)
        self._handles[int(reader.reader._ref)] = found
        log.info("%s: reading %s (%s)", self.name, topic, ros_type)
        if self._wake is not None:  # (samples may have come before the listener was set)
            self._wake.again(ready=[int(reader.reader._ref)])

    def _drop_reader(self, topic: Topic) -> None:
        self._handles.pop(int(topic.reader.reader._ref), None)
        self.topics.pop(topic.name, None)
        if self.node is not None:
            self.node.readers.remove(topic.reader)
        topic.reader.reader.set_listener(None)
        # the DataReader is deleted once nothing holds it (cyclonedds' entities are weak)

    def _unreadable(self, topic: str, what: str) -> None:
        if self.unreadable.get(topic) == what:
            return
        self.unreadable[topic] = what
        self._name("type", f"{topic}: type {what} is not read")

    def _read(self, ready: set[int]) -> list[SampleRead | PacketDropped]:
        events: list[SampleRead | PacketDropped] = []
        more: list[int] = []
        for handle in ready:
            topic = self._handles.get(handle)
            if topic is None:
                continue
            if len(events) >= READ_BUDGET:  # enough for a turn: this one after the loop went round
                more.append(handle)
                continue
            try:
                samples = topic.reader.take(READ_TURN)
            except TransportError as exc:
                self._name("read", str(exc))
                continue
            if len(samples) >= READ_TURN:
                more.append(handle)
            for data, _info in samples:
                try:
                    events.append(SampleRead(topic.name, topic.ros_type, topic.decode(data)))
                except DecodeError as exc:
                    reason = f"{topic.name}: {exc.reason} (at byte {exc.offset})"
                    events.append(PacketDropped(protocol=decode.PROTOCOL, reason=reason))
                    self._name("sample", f"{topic.name}: a sample is not a {topic.ros_type}")
        if more and self._wake is not None:
            self._wake.again(ready=more)
        return events

    def _name(self, what: str, text: str) -> None:
        """Say `text` once: a log line, and in status (counted in its errors, named as its
        last drop; a sample that does not decode is counted each time, by the template)."""
        if (what, text) in self._said:
            return
        self._said.add((what, text))
        log.info("%s: %s", self.name, text)
        if what == "sample":
            self.stats.last_drop_reason = text
        else:
            self.stats.drop(text)

    def _name_problems(self) -> None:
        adapter = self.adapter
        if not isinstance(adapter, Ros2Adapter):
            return
        tree = adapter.tree
        for frame in sorted(tree.cyclic):
            self._name("cycle", f"tf: frame {frame!r} is on a cycle (or below one)")
        for frame in sorted(tree.unrooted):
            self._name("path", f"tf: frame {frame!r} has no path to {tree.reference!r}")
        for frame in sorted(tree.refused):
            self._name("refused", f"tf: a transform of {frame!r} is refused (not finite/unit)")
        for topic, frame in sorted(adapter.unplaced.items()):
            self._name("unplaced", f"{topic}: frame {frame!r} has no path to {tree.reference!r}")

    def problems(self) -> list[str]:
        """Everything named so far (the status's last drop shows the newest)."""
        return sorted(text for _, text in self._said)


def open_source(endpoint: Endpoint) -> Ros2Source:
    """The source of a `ros2://[?domain=N&topics=GLOB[,GLOB]&frame=F]` URL."""
    endpoint.check_options(SOURCE_OPTIONS, "a ROS 2 listener")
    if endpoint.host_given or endpoint.port is not None:
        raise ConfigError(
            f"{endpoint.raw}: ros2:// takes no host or port (DDS discovers its peers; "
            "?domain= picks the domain)"
        )
    domain = dds.domain_id(endpoint.options.get("domain"))
    scope = dds.discovery_range()
    globs = tuple(g.strip() for g in endpoint.option("topics", "").split(",") if g.strip())
    reference = endpoint.option("frame", "world").strip("/")
    if not reference:
        raise ConfigError(f"{endpoint.raw}: ?frame= names no frame")
    try:
        import cyclonedds  # noqa: F401  (a missing extra: one line, not a traceback)
    except ImportError:
        raise RobowireError("listen ros2:// needs cyclonedds (pip install cyclonedds)") from None
    return Ros2Source(endpoint.raw, domain, scope, globs, reference)
