"""`robowire listen BAG` / `robowire replay BAG`: a ROS 2 bag into the world, as `listen
ros2://` would have put its topics there when they were live (docs/ros2.md, "Bags").

BAG is a rosbag2 directory (MCAP or SQLite storage) or one storage file alone (a bare ROS 2
`.mcap`, a `.db3`); `robowire.ros2.bag` reads it. Each message is decoded by its topic's type
(`decode`) into the listen side's `SampleRead` and written by its adapter (`Ros2Adapter`:
the TF tree's frames, one device per pose topic), so the devices, names and frames are the
same as live. The messages come at their recorded times divided by `?speed=` (1 unless
given; `replay --speed` sets it; `replay --loop` starts again at the end), through the file
source template (`CaptureSource`), which also says a cut bag's damage after playing what
came before it.

A topic of a type robowire does not read is named once (a log line and the status's last
drop), never an error; a bag with no topic of a type it reads is one error line at once. A
message that does not decode as its type is counted and dropped, its topic named once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from robowire.capture import Record
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, DecodeError
from robowire.recording.replay import Progress
from robowire.ros2 import decode
from robowire.ros2.bag import Bag, open_bag, read
from robowire.ros2.decode import Decoded
from robowire.ros2.said import Said
from robowire.ros2.source import Ros2Adapter, SampleRead
from robowire.service import CaptureSource
from robowire.wire import PacketDropped
from robowire.world import World

BAG_OPTIONS = frozenset({"speed", "time", "frame"})


class BagSource(CaptureSource):
    """Plays a ROS 2 bag's messages into the world (see the module docstring)."""

    def __init__(self, endpoint: Endpoint, bag: Bag) -> None:
        super().__init__(decode.PROTOCOL, endpoint, None)
        self.bag = bag
        self.reference = endpoint.option("frame", "world").strip("/") or "world"
        self.progress = Progress()
        if bag.start is not None:
            self.progress.start, self.progress.duration = bag.start / 1e9, bag.duration / 1e9
        self.types: dict[str, str] = {}  # topic -> its type, as the messages come
        self._decoders: dict[str, Callable[[bytes], Decoded] | None] = {}
        self.said = Said(self)

    def new_adapter(self, world: World) -> Ros2Adapter:
        return Ros2Adapter(world, self.name, self.reference)

    def problems(self) -> list[str]:
        """Everything named so far."""
        return sorted(self.said.said)

    def records(self) -> Iterator[Record]:
        types = self.types
        for message in read(self.bag):
            topic = message.topic
            types[topic.name] = topic.type
            record = Record(message.data, message.time / 1e9, flow=topic.name)
            self.progress.seen(record)
            yield record

    def feed(self, record: Record, now: float) -> list[Any]:
        topic = record.flow
        ros_type = self.types[topic]
        if topic not in self._decoders:
            self._decoders[topic] = decode.decoder(ros_type)
        decoder = self._decoders[topic]
        if decoder is None:
            self.said(f"{topic}: type {ros_type or 'unknown'} is not read")
            return []
        try:
            return [SampleRead(topic, ros_type, decoder(record.data))]
        except DecodeError as exc:
            self.said(f"{topic}: a message is not a {ros_type}")
            reason = f"{topic}: {exc.reason} (at byte {exc.offset})"
            return [PacketDropped(protocol=decode.PROTOCOL, reason=reason, size=len(record.data))]


def open_source(endpoint: Endpoint) -> BagSource:
    """`listen BAG` / `replay BAG`: the bag's readable topics, paced by `?speed=` (1 unless
    given); ConfigError (one line) when it is not a ROS 2 bag, or has nothing robowire reads."""
    endpoint.check_options(BAG_OPTIONS, "a ROS 2 bag")
    assert endpoint.path is not None
    bag = open_bag(endpoint.path)
    readable = {n for n, t in bag.topics.items() if t.type in decode.READABLE}
    if bag.topics and not readable:
        found = ", ".join(sorted({f"{t.type or '?'}" for t in bag.topics.values()}))
        known = ", ".join(sorted(decode.READABLE))
        raise ConfigError(f"{endpoint.path}: no topic of a type robowire reads (it has {found}; "
                          f"robowire reads {known})")  # fmt: skip
    if "speed" not in endpoint.options:
        endpoint = dataclasses.replace(endpoint, options={**endpoint.options, "speed": "1"})
    source = BagSource(endpoint, bag)
    if source.speed < 0:
        raise ConfigError("replay speed must be positive")
    return source
