"""MCAP recording: the recorder against the mcap library alone, for a 10,000-drone VRSP show
and for many small updates (50 XRP robots: an update of one device each).

The input is real: `robowire sim vrsp --drones 10000` and a `VrspSource` run in this process
over loopback for a few seconds; every world update the receiver wrote is kept (a queue
subscriber, as the recorder has), and every datagram it received (its receive tap). Then:

* recorder: `McapRecorder.write` of those updates (each a `/robowire/<source>` message, the
  Foxglove channels at their 10 Hz, /tf /scene /location /telemetry) and its tap for the
  datagrams (`/raw/<source>`), into a chunked (lz4, 1 MiB or 1 s), indexed file;
* floor: the same messages (read back from that file: topic, schema, bytes, times) written
  with the `mcap` package's `Writer` alone, with the same chunks, into another file.

Printed: messages/s and drone updates/s of the recorder, the floor's messages/s, and the
ratio (recorder time / floor time: what building the messages costs on top of writing them),
each the fastest of `REPEATS` runs taken in turn;
how many seconds of the live show one second of recording work covers (>= 1: it keeps up), and
so the share of one core recording the show live takes (work time / show time); and both
again from after the first update on (a recording describes each device once, in its first
update: a cost a long recording does not see). Times are
this process's CPU time (`time.process_time`), so that other work on a shared machine counts
less than it would in wall time.

Small updates: `robowire sim xrp --count 50` and 50 `XrpSource`s in this process (each robot
reports at 20 Hz, an update of one device with 42 columns); the recorder (world channels only:
no raw tap, so that the figure is the updates' own cost) against the writer alone on the same
messages, as above, and the recorder's cost per update.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from mcap.reader import make_reader
from mcap.writer import Writer

from bench import rounds
from robowire.gateway import open_sim, open_source
from robowire.protocols.xrp.services import XrpSim
from robowire.recording import McapRecorder
from robowire.recording.writer import CHUNK_BYTES, COMPRESSION
from robowire.service import SimOptions
from robowire.transport.loop import run
from robowire.wire import Address
from robowire.world import LogEvent, Update, World

DRONES = 10_000
ROBOTS = 50
SECONDS = 3.0
REPEATS = rounds.ROUNDS
"""The recorder and the writer alone each run this many times, in turn; the absolute figures
keep each one's fastest run (the one the busy machine disturbed least), the "vs peer" ratio is
the median of the runs' ratios (bench/rounds.py)."""


async def capture(
    rate: float | None = None,
) -> tuple[World, list[Update | LogEvent], list[Any], float, Any]:
    """Run the show (at `rate` Hz, else the simulator's own) into a receiver; its world, every
    update, every datagram, the span."""
    world = World()
    source = open_source("vrsp://127.0.0.1:0")
    datagrams: list[tuple[bytes, float, str, Address]] = []
    source.tap = lambda data, now, transport, peer: datagrams.append((data, now, transport, peer))
    with world.subscribe(every_update=True, max_bytes=1 << 31) as changes:
        task = asyncio.create_task(source.run(world))
        await source.ready.wait()
        assert source.address is not None
        target = "{}:{}".format(*source.address)
        sim = open_sim("vrsp", SimOptions(count=DRONES, rate=rate, target=target))
        sending = asyncio.create_task(sim.run(World()))
        await asyncio.sleep(SECONDS)
        for t in (sending, task):
            t.cancel()
        await asyncio.gather(sending, task, return_exceptions=True)
        items = changes.pull()
    return world, items, datagrams, _span(items), source


async def capture_robots() -> tuple[World, list[Update | LogEvent], float]:
    """Run `ROBOTS` XRP robots, each read by its own source; the world, every update, the
    span."""
    world = World()
    sim = XrpSim(SimOptions(port=0, count=ROBOTS))
    serving = asyncio.create_task(sim.run(World()))
    await sim.ready.wait()
    sources = [
        open_source(f"xrp://{a[0]}:{a[1]}?enable=1&left=0.3&right=0.2") for a in sim.addresses if a
    ]
    with world.subscribe(every_update=True, max_bytes=1 << 31) as changes:
        tasks = [asyncio.create_task(s.run(world)) for s in sources]
        await asyncio.sleep(SECONDS)
        for t in (*tasks, serving):
            t.cancel()
        await asyncio.gather(*tasks, serving, return_exceptions=True)
        items = changes.pull()
    return world, items, _span(items)


def _span(items: list[Update | LogEvent]) -> float:
    updates = [i for i in items if isinstance(i, Update)]
    return updates[-1].receive_time - updates[0].receive_time if len(updates) > 1 else SECONDS


def record(
    path: str, world: World, items: list[Any], datagrams: list[Any], source: Any
) -> tuple[float, float, int]:
    """The recorder's CPU time for everything, and from after its first update on (once it
    has described every device); and the log time (ns) of that first update. `source`: the
    source whose `datagrams` are tapped, or None."""
    recorder = McapRecorder(path)
    recorder.open()
    if source is not None:
        recorder.tap_source(source, "vrsp", "vrsp://127.0.0.1:0")
    tap = source.tap if source is not None else None
    # the datagrams that came before each update, then the update (merged before timing)
    times = [source.clock.wall(d[1]) for d in datagrams]
    order: list[tuple[Any, ...] | None] = []
    d = 0
    for item in items:
        while d < len(datagrams) and times[d] <= getattr(item, "receive_time", 0.0):
            order.append(datagrams[d])
            d += 1
        order.append(None)
    order += datagrams[d:]
    updates = iter(items)
    start = time.process_time()
    steady, first = 0.0, 0
    for datagram in order:
        if datagram is not None:
            assert tap is not None
            tap(*datagram)
            continue
        item = next(updates)
        recorder.write(world, [item])
        if not first and isinstance(item, Update):
            steady, first = time.process_time(), int(item.receive_time * 1e9)
    recorder.finish(world)
    end = time.process_time()
    return end - start, end - steady, first


def floor(recorded: str, path: str, after: int) -> tuple[float, float, int]:
    """The writer's CPU time for every message, and for those logged after `after` (ns)."""
    with open(recorded, "rb") as stream:
        reader = make_reader(stream)
        messages = [(s, c, m.log_time, m.data) for s, c, m in reader.iter_messages()]
    with open(path, "wb") as out:
        start = steady = time.process_time()
        writer = Writer(out, chunk_size=CHUNK_BYTES, compression=COMPRESSION)
        writer.start(profile="", library="floor")
        schemas: dict[int, int] = {}
        channels: dict[int, int] = {}
        for schema, channel, log_time, data in messages:
            if log_time > after > 0:
                steady, after = time.process_time(), 0
            if channel.id not in channels:
                sid = 0
                if schema is not None:
                    if schema.id not in schemas:
                        schemas[schema.id] = writer.register_schema(
                            schema.name, schema.encoding, schema.data
                        )
                    sid = schemas[schema.id]
                channels[channel.id] = writer.register_channel(
                    channel.topic, channel.message_encoding, sid, channel.metadata
                )
            writer.add_message(channels[channel.id], log_time, data, log_time)
        writer.finish()  # type: ignore[no-untyped-call]
        end = time.process_time()
        return end - start, end - steady, len(messages)


def small() -> dict[str, float]:
    """The small updates' figures (see the module's docstring)."""
    world, items, span = run(capture_robots())
    updates = sum(isinstance(i, Update) for i in items)
    runs, floors = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(REPEATS):
            runs.append(record(str(Path(tmp) / "run.mcap"), world, items, [], None))
            floors.append(floor(str(Path(tmp) / "run.mcap"), str(Path(tmp) / "floor.mcap"), 0))
    took, base, messages = min(r[0] for r in runs), min(f[0] for f in floors), floors[0][2]
    print(
        f"   {ROBOTS} XRP robots, {span:.1f} s: {updates} updates of one device "
        f"({updates / span:,.0f}/s) -> {messages} messages"
    )
    print(
        f"   recorder: {took / updates * 1e6:.1f} us per update; mcap Writer alone, same "
        f"messages: {base / updates * 1e6:.1f} us per update"
    )
    print(f"   ratio recorder / writer alone: {took / base:.2f}x the time")
    print(f"   recording these robots live: {took / span:.1%} of a core")
    return {"small_ratio": took / base, "small_cpu": took / span, "small_us": took / updates * 1e6}


def main() -> dict[str, float]:
    world, items, datagrams, span, source = run(capture())
    updates = [i for i in items if isinstance(i, Update)]
    drone_updates = sum(len(u) for u in updates)
    runs, floors = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(REPEATS):
            runs.append(record(str(Path(tmp) / "run.mcap"), world, items, datagrams, source))
            first = runs[-1][2]
            floors.append(floor(str(Path(tmp) / "run.mcap"), str(Path(tmp) / "floor.mcap"), first))
        size = (Path(tmp) / "run.mcap").stat().st_size
    took, steady = min(r[0] for r in runs), min(r[1] for r in runs)
    base, messages = min(f[0] for f in floors), floors[0][2]
    steady_ratios = [r[1] / f[1] for r, f in zip(runs, floors, strict=True)]  # per run
    print(
        f"   {DRONES} drones, {span:.1f} s of show: {len(updates)} updates "
        f"({drone_updates:,} drone updates), {len(datagrams)} datagrams -> {messages} "
        f"messages, {size / 1e6:.1f} MB"
    )
    print(
        f"   recorder: {messages / took:,.0f} messages/s, {drone_updates / took:,.0f} drone "
        f"updates/s ({span / took:.2f} s of show per second of work)"
    )
    print(f"   mcap Writer alone, same messages: {messages / base:,.0f} messages/s")
    print(f"   ratio recorder / writer alone: {took / base:.2f}x the time")
    print(f"   recording this show live: {took / span:.0%} of a core")
    rest = span - (first / 1e9 - updates[0].receive_time)
    print(
        f"   after the first update (every device described once): ratio "
        f"{rounds.text(steady_ratios)}, {steady / rest:.0%} of a core"
    )
    return {
        "ratio": took / base,
        "cpu": took / span,
        **rounds.figures("steady_ratio", steady_ratios),
        "steady_cpu": steady / rest,
        **small(),
    }


if __name__ == "__main__":
    main()
