"""robowire's own recordings: world updates in an MCAP file, and their replay.

Each device update is one JSON message (the same object `listen --json` prints) on the topic
`/robowire/<source>`; log events go to `/robowire/log`. Log time is the update's receive time,
so a replay reproduces the original pacing (scaled by `speed`). Any MCAP tool (Foxglove, the
`mcap` CLI) can read the files.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from mcap.exceptions import McapError
from mcap.reader import make_reader
from mcap.writer import Writer

from robowire.endpoints import Endpoint
from robowire.errors import ConfigError
from robowire.service import Sink, Source
from robowire.world import LogEvent, World

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


class McapRecorder(Sink):
    """Writes every world update to an MCAP file until the run ends."""

    def __init__(self, path: str, queue: int = 100_000) -> None:
        super().__init__(f"record:{path}")
        self.path = path
        self.queue = queue
        self.messages = 0

    async def run(self, world: World) -> None:
        try:
            stream: IO[bytes] = open(self.path, "wb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise ConfigError(f"cannot write {self.path}: {exc.strerror}") from None
        writer = Writer(stream)
        writer.start(profile="", library="robowire")
        schema = writer.register_schema("robowire.DeviceUpdate", "jsonschema", SCHEMA)
        channels: dict[str, int] = {}

        def channel(topic: str) -> int:
            if topic not in channels:
                channels[topic] = writer.register_channel(topic, "json", schema)
            return channels[topic]

        def write(items: list[Any]) -> None:
            for item in items:
                if isinstance(item, LogEvent):
                    lines = [
                        {
                            "source": item.source,
                            "device": item.device_id,
                            "log": item.text,
                            "level": item.level,
                            "time": item.time,
                        }
                    ]
                    topic, stamp = LOG_TOPIC, item.time
                else:
                    lines = list(world.update_json(item))
                    topic, stamp = TOPIC_PREFIX + item.source, item.receive_time
                nanos = int(stamp * 1e9)
                for line in lines:
                    line.pop("changed", None)
                    writer.add_message(channel(topic), nanos, json.dumps(line).encode(), nanos)
                    self.messages += 1

        with world.feed.subscribe(self.queue) as sub:
            self.ready.set()
            try:
                async for item in sub:
                    write([item, *sub.drain()])
            finally:
                write(sub.drain())
                self.stats.dropped = sub.dropped
                writer.finish()  # type: ignore[no-untyped-call]
                stream.close()


def read_recording(path: str) -> Iterator[tuple[float, dict[str, Any]]]:
    """(log time in seconds, JSON object) for every message of a robowire recording."""
    if not Path(path).is_file():
        raise ConfigError(f"no such file: {path}")
    with open(path, "rb") as stream:
        try:
            for _schema, channel, message in make_reader(stream).iter_messages(log_time_order=True):
                if channel.topic.startswith(TOPIC_PREFIX):
                    yield message.log_time / 1e9, json.loads(message.data)
        except (McapError, ValueError, KeyError) as exc:
            raise ConfigError(f"{path}: not a readable MCAP recording ({exc})") from None


class McapSource(Source):
    """Replays a recording into the world with its original pacing divided by `speed`."""

    def __init__(self, endpoint: Endpoint, speed: float = 1.0) -> None:
        super().__init__(f"replay:{endpoint.path}")
        assert endpoint.path is not None
        self.path = endpoint.path
        self.speed = float(endpoint.option("speed", str(speed)))
        if self.speed <= 0:
            raise ConfigError("replay speed must be positive")

    async def run(self, world: World) -> None:
        loop = asyncio.get_running_loop()
        start_wall: float | None = None
        start_loop = loop.time()
        for stamp, line in read_recording(self.path):
            if start_wall is None:
                start_wall = stamp
            delay = start_loop + (stamp - start_wall) / self.speed - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self.stats.messages_in += 1
            if "log" in line:
                world.log(
                    line["source"],
                    line["device"],
                    line["log"],
                    time=line["time"],
                    level=line.get("level", "info"),
                )
                continue
            world.update_device(
                line["source"],
                line["device"],
                receive_time=time.time(),
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
