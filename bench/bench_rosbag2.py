"""`record --format rosbag2` of 10,000 drones at 30 Hz against mcap-ros2-support's writer (the
peer) writing the same messages, in the same run.

The input is real: `robowire sim vrsp --drones 10000 --rate 30` and a `VrspSource` in this
process over loopback for a few seconds; every world update the receiver wrote is kept (a
queue subscriber, as the recorder has). Then, each `REPEATS` times in turn:

* robowire: `BagRecorder.write` of those updates into a rosbag2 bag (the topics of `serve
  ros2://`: /tf from the columns, the markers, the first devices' poses, /diagnostics; CDR
  built by robowire.ros2.cdr; MCAP chunks lz4, 1 MiB or 1 s), `finish` included;
* peer: mcap-ros2-support's `Writer` (its own CDR encoder, from message objects; its default
  zstd chunks) writing the same messages: those of robowire's bag, decoded beforehand by
  mcap-ros2-support's decoder (decoding is not timed), with the same topics, schemas and
  times.

Printed: messages and drone updates per second of each, the ratio (robowire's CPU time over
the peer's; the issue asks <= 1.5x), and the share of one core recording the show live takes.
Times are this process's CPU time (`time.process_time`), the fastest of the runs.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from mcap_ros2.writer import Writer as Ros2Writer

from bench.bench_mcap import DRONES, capture
from robowire.ros2.bag import BagWriter
from robowire.ros2.bag_recorder import BagRecorder
from robowire.transport.loop import run
from robowire.world import LogEvent, Update, World

RATE = 30.0
REPEATS = 3


def record(path: str, world: World, items: list[Update | LogEvent]) -> tuple[float, int]:
    """robowire's CPU time for every update, and how many messages it wrote."""
    recorder = BagRecorder(path)
    start = time.process_time()
    recorder.bag = BagWriter(path)
    recorder.write(world, items)
    recorder.finish(world)
    took = time.process_time() - start
    return took, recorder.messages


def peer(bag: str, path: str) -> tuple[float, int]:
    """mcap-ros2-support's writer's CPU time for the messages of robowire's `bag`."""
    storage = next(Path(bag).glob("*.mcap"))
    with open(storage, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        messages: list[tuple[Any, str, Any, int]] = [
            (schema, channel.topic, decoded, message.log_time)
            for schema, channel, message, decoded in reader.iter_decoded_messages()
        ]
    with open(path, "wb") as out:
        start = time.process_time()
        writer = Ros2Writer(out)
        schemas: dict[str, Any] = {}
        for schema, topic, decoded, log_time in messages:
            found = schemas.get(schema.name)
            if found is None:
                found = schemas[schema.name] = writer.register_msgdef(
                    schema.name, schema.data.decode()
                )
            writer.write_message(topic, found, decoded, log_time, log_time)
        writer.finish()
        return time.process_time() - start, len(messages)


def main() -> dict[str, float]:
    world, items, _, span, _ = run(capture(RATE))
    updates = [i for i in items if isinstance(i, Update)]
    drone_updates = sum(len(u) for u in updates)
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(REPEATS):
            bag = str(Path(tmp) / f"bag{n}")
            ours.append(record(bag, world, items))
            theirs.append(peer(bag, str(Path(tmp) / f"peer{n}.mcap")))
        size = sum(f.stat().st_size for f in (Path(tmp) / "bag0").iterdir())
    took, messages = min(r[0] for r in ours), ours[0][1]
    base = min(r[0] for r in theirs)
    print(
        f"   {DRONES} drones at {RATE:.0f} Hz, {span:.1f} s of show: {len(updates)} updates "
        f"({drone_updates:,} drone updates) -> {messages} ROS 2 messages, {size / 1e6:.1f} MB"
    )
    print(
        f"   record --format rosbag2: {messages / took:,.0f} messages/s, "
        f"{drone_updates / took:,.0f} drone updates/s"
    )
    print(f"   mcap-ros2-support's writer, same messages: {messages / base:,.0f} messages/s")
    print(f"   ratio robowire / mcap-ros2-support: {took / base:.2f}x the CPU (<= 1.5x asked)")
    print(f"   recording this show live: {took / span:.0%} of a core")
    return {"ratio": took / base, "cpu": took / span}


if __name__ == "__main__":
    main()
