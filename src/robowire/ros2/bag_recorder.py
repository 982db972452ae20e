"""`robowire record URL… -o DIR --format rosbag2`: the world as a ROS 2 bag (docs/ros2.md,
"Bags"), with the topics `serve ros2://` publishes (`robowire.ros2.topics` builds both), in
a rosbag2 directory `ros2 bag play`, `ros2 bag info` and Foxglove open (`robowire.ros2.bag`).

Every world update is written (a recording keeps every update, not only the latest state),
at its receive time; `/diagnostics` once a second of it; the sources' log lines on
`/rosout` at their own times. The open chunk is closed and written
to the file at most `CHUNK_SECONDS` after its first message, so a killed recording loses at
most about that much (its `metadata.yaml`, written at the start, still names the storage).
"""

from __future__ import annotations

from pathlib import Path

from robowire.errors import ConfigError
from robowire.recording.writer import CHUNK_SECONDS
from robowire.ros2 import dds, types
from robowire.ros2.bag import BagWriter, Qos, Topic
from robowire.ros2.topics import Message, Topics
from robowire.service import Sink
from robowire.timebase import monotonic
from robowire.world import LogEvent, Update, World

DIAGNOSTICS_EVERY = 1.0  # seconds of receive time between /diagnostics messages
PROFILES = {
    "tf": dds.TF,
    "tf_static": dds.TF_STATIC,
    "pose": dds.RELIABLE,
    "reliable": dds.RELIABLE,
    "rosout": dds.ROSOUT,
}
"""The QoS a bag says each topic was offered with (`ros2 bag play` offers it again)."""


def bag_qos(profile: dds.Profile) -> Qos:
    reliability = "reliable" if profile.reliable else "best_effort"
    durability = "transient_local" if profile.transient_local else "volatile"
    return Qos(reliability, durability, profile.depth)


class BagRecorder(Sink):
    """Writes the world's ROS 2 topics into a new rosbag2 bag at `path` until the run ends."""

    every_update = True

    def __init__(self, path: str) -> None:
        super().__init__(f"record:{path}")
        where = Path(path)
        if where.exists():  # said before the sources connect, as `record` says its errors
            raise ConfigError(f"cannot write {path}: it exists (a rosbag2 bag is a new directory)")
        if not where.parent.is_dir():
            raise ConfigError(f"cannot write {path}: no such directory: {where.parent}")
        self.path = path
        self.topics = Topics()
        self.messages = 0
        self.bag: BagWriter | None = None
        self._channels: dict[str, int] = {}
        self._flushed = 0.0
        self._diagnosed = 0.0  # receive time of the last /diagnostics
        self._latest = 0.0  # the newest receive time written

    async def run(self, world: World) -> None:
        self.bag = BagWriter(self.path)
        self._flushed = monotonic()
        await super().run(world)

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        bag = self.bag
        if bag is None:
            return True
        latest = 0.0
        for item in items:
            if isinstance(item, LogEvent):  # on /rosout, as serve ros2:// puts it
                self._write(bag, self.topics.log(item), int(item.time * 1e9))
                continue
            table = world.tables.get(item.source)
            if table is None:
                continue
            nanos = int(item.receive_time * 1e9)
            for message in self.topics.build(table, item):
                self._write(bag, message, nanos)
            latest = max(latest, item.receive_time)
        self._latest = max(self._latest, latest)
        if latest - self._diagnosed >= DIAGNOSTICS_EVERY:
            self._diagnostics(world, latest)
        if monotonic() - self._flushed >= CHUNK_SECONDS:
            bag.flush()
            self._flushed = monotonic()
        return True

    def _diagnostics(self, world: World, time: float) -> None:
        self._diagnosed = time
        message = self.topics.diagnostics(world.tables, time)
        if message is not None and self.bag is not None:
            self._write(self.bag, message, int(time * 1e9))

    def _write(self, bag: BagWriter, message: Message, nanos: int) -> None:
        channel = self._channels.get(message.topic)
        if channel is None:
            topic = Topic(
                message.topic,
                message.type,
                types.definition(message.type),
                types.rihs01(message.type),
            )
            channel = bag.topic(topic, bag_qos(PROFILES.get(message.qos, dds.RELIABLE)))
            self._channels[message.topic] = channel
        bag.write(channel, nanos, message.data)
        self.messages += 1

    def finish(self, world: World) -> None:
        if self.bag is not None:
            if self._latest:  # what changed since the last /diagnostics
                self._diagnostics(world, self._latest)
            self.bag.close()
            self.bag = None


def open_recorder(path: str) -> BagRecorder:
    """`record -o DIR --format rosbag2`."""
    return BagRecorder(path)
