"""robowire's own recordings: world updates in an MCAP file, and their replay.

Each device update is one JSON message (the same object `listen --json` prints) on the topic
`/robowire/<source>`; log events go to `/robowire/log`. Log time is the update's receive time,
so a replay reproduces the original pacing (scaled by `speed`). Any MCAP tool (Foxglove, the
`mcap` CLI) can read the files.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from mcap.exceptions import McapError
from mcap.reader import NonSeekingReader
from mcap.writer import Writer

from robowire.capture import Record
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, DecodeError
from robowire.service import CaptureSource, Sink
from robowire.sinks.jsonlines import log_line
from robowire.timebase import monotonic
from robowire.world import LogEvent, Update, World
from robowire.world.feed import DEFAULT_BYTES

TOPIC_PREFIX = "/robowire/"
LOG_TOPIC = "/robowire/log"
SCHEMA = json.dumps(
    {
        "title": "robowire device update",
        "type": "object",
        "properties": {
            "source": {"type": "string"},
            "device": {"type": "string"},
            "kind": {"type": "string"},
            "position": {"type": "array", "items": {"type": "number"}},
            "orientation": {"type": "array", "items": {"type": "number"}},
            "telemetry": {"type": "object"},
        },
    }
).encode()


FLUSH_SECONDS = 0.1
"""How often the recorder flushes the file: a killed recording loses at most this much."""


class McapRecorder(Sink):
    """Writes every world update to an MCAP file until the run ends."""

    every_update = True  # a recording keeps every update, not only the latest state

    def __init__(self, path: str, max_bytes: int = DEFAULT_BYTES) -> None:
        super().__init__(f"record:{path}")
        self.path = path
        self.max_bytes = max_bytes
        self.messages = 0
        self._channels: dict[str, int] = {}
        self._stream: IO[bytes]
        self._writer: Writer
        self._schema = 0

    async def run(self, world: World) -> None:
        try:
            self._stream = open(self.path, "wb")  # noqa: SIM115 - closed in finish()
        except OSError as exc:
            raise ConfigError(f"cannot write {self.path}: {exc.strerror}") from None
        # unchunked: every message goes to the file as written, so a recording that is killed
        # keeps all it had flushed (chunks would hold up to a megabyte in memory)
        self._writer = Writer(self._stream, use_chunking=False)
        self._flushed = monotonic()
        self._writer.start(profile="", library="robowire")
        self._schema = self._writer.register_schema("robowire.DeviceUpdate", "jsonschema", SCHEMA)
        await super().run(world)

    def _channel(self, topic: str) -> int:
        channel = self._channels.get(topic)
        if channel is None:
            channel = self._channels[topic] = self._writer.register_channel(
                topic, "json", self._schema
            )
        return channel

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        for item in items:
            if isinstance(item, LogEvent):
                lines = [log_line(item)]
                topic, stamp = LOG_TOPIC, item.time
            else:
                lines = list(world.update_json(item))
                topic, stamp = TOPIC_PREFIX + item.source, item.receive_time
            nanos = int(stamp * 1e9)
            for line in lines:
                line.pop("changed", None)
                self._writer.add_message(
                    self._channel(topic), nanos, json.dumps(line).encode(), nanos
                )
                self.messages += 1
        if monotonic() - self._flushed >= FLUSH_SECONDS:
            self._stream.flush()
            self._flushed = monotonic()
        return True

    def finish(self, world: World) -> None:
        self._writer.finish()  # type: ignore[no-untyped-call]
        self._stream.close()


def read_recording(path: str) -> Iterator[tuple[float, dict[str, Any]]]:
    """(log time in seconds, JSON object) for every message of a robowire recording."""
    for record in recording_records(path):
        assert record.time is not None
        yield record.time, json.loads(record.data)


def recording_records(path: str) -> Iterator[Record]:
    """The messages of a robowire recording as capture records (time = log time), in file
    order (the recorder writes them in time order). Read front to back, so a recording that
    was killed gives every whole message, then a DecodeError for the cut end."""
    if not Path(path).is_file():
        raise ConfigError(f"no such file: {path}")
    with open(path, "rb") as stream:
        read = 0
        try:
            reader = NonSeekingReader(stream)
            for _schema, channel, message in reader.iter_messages(log_time_order=False):
                read += 1
                if channel.topic.startswith(TOPIC_PREFIX):
                    yield Record(message.data, message.log_time / 1e9, flow=channel.topic)
        except (McapError, ValueError, KeyError, EOFError) as exc:
            if not read:
                raise ConfigError(f"{path}: not a readable MCAP recording ({exc})") from None
            reason = f"recording cut after {read} messages"
            raise DecodeError("mcap", stream.tell(), reason) from None


class RecordingAdapter:
    """Recorded JSON objects (what `listen --json` prints) back into the world."""

    def __init__(self, world: World) -> None:
        self.world = world

    def apply(self, events: Sequence[dict[str, Any]], receive_time: float) -> int:
        for line in events:
            if "log" in line:
                self.world.log(
                    line["source"],
                    line["device"],
                    line["log"],
                    time=line["time"],
                    level=line.get("level", "info"),
                )
                continue
            self.world.update_device(
                line["source"],
                line["device"],
                receive_time=receive_time,
                kind=line.get("kind", "device"),
                name=line.get("name"),
                source_time=line.get("source_time"),
                position=line.get("position"),
                orientation=line.get("orientation"),
                velocity=line.get("velocity"),
                geodetic=line.get("geodetic"),
                telemetry={
                    k: (v["value"], v["unit"]) for k, v in line.get("telemetry", {}).items()
                },
                attributes=line.get("attributes"),
                links=line.get("links"),
            )
        return len(events)


class McapSource(CaptureSource):
    """Replays a recording into the world, with its recorded pacing divided by `?speed=`
    (1 unless given; `replay --speed` sets it)."""

    def __init__(self, endpoint: Endpoint, speed: float = 1.0) -> None:
        if "speed" not in endpoint.options:
            options = {**endpoint.options, "speed": str(speed)}
            endpoint = dataclasses.replace(endpoint, options=options)
        super().__init__("replay", endpoint, recording_records)
        if self.speed <= 0:
            raise ConfigError("replay speed must be positive")

    def new_adapter(self, world: World) -> RecordingAdapter:
        return RecordingAdapter(world)

    def feed(self, record: Record, now: float) -> list[dict[str, Any]]:
        return [json.loads(record.data)]
