"""Foxglove live: the cost of the sink for a 10,000-drone show at 30 Hz.

The world holds 10,000 drones (position, orientation, geodetic, LED colour). One pull is
`FoxgloveSink.write` of one update touching all of them: /tf (FrameTransforms), /location
(one LocationFixes holding every fix; with `?location=fix` one LocationFix per drone, one SDK
log each), /telemetry/<source> (one JSON message), and /scene only when a colour changed.

Pulls: the sink's context also writes to an MCAP file (zstd, the SDK's default), so every
message is logged to a real sink (the SDK skips a channel no sink reads). Printed:
milliseconds per pull (the median of 20), the ratio to a floor measured in the same run (the
same 10,000 transforms built the SDK's way, one `FrameTransform` object each, and encoded
with `FrameTransforms.encode`), and the share of one core that pulls at 30 Hz take (ms per
pull x 30 / 1000); for the default layout, with every LED changing, with a LocationFix per
drone, and with no geodetic fixes at all.

Live: what a user pays. The sink serves the show at 30 Hz to one Foxglove client in another
process that subscribes to every channel and reads everything (through the sink's relay);
the share of a core is this process's CPU time over the wall time, a few seconds, for the
default layout and for `?location=fix`. This is the table's CPU cell.

Times are this process's CPU time (`time.process_time`, the SDK's own threads included), so
that other work on a shared machine counts less than it would in wall time.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import bench
from robowire.sinks.foxglove import FoxgloveSink
from robowire.world import Update, World

DRONES = 10_000
PULLS = 20


def show(world: World, step: int, colours: bool, fixes: bool = True) -> Update:
    table = world.tables.get("show") or world.table("show")
    for i in range(len(table), DRONES):
        table.slot(str(i + 1), "drone")
    slots = np.arange(DRONES, dtype=np.intp)
    angle = np.linspace(0, 2 * np.pi, DRONES) + step * 0.01
    position = np.stack([np.cos(angle) * 50, np.sin(angle) * 50, np.full(DRONES, 20.0)], axis=1)
    orientation = np.tile([1.0, 0.0, 0.0, 0.0], (DRONES, 1))
    geodetic = np.stack([10 + position[:, 1] / 1e5, 20 + position[:, 0] / 1e5, position[:, 2]], 1)
    level = float(step * 10 % 256) if colours else 255.0
    led = np.full(DRONES, level)
    return world.update(
        "show",
        slots,
        receive_time=time.time(),
        position=position,
        orientation=orientation,
        geodetic=geodetic if fixes else np.full((DRONES, 3), np.nan),
        telemetry={name: (led, "1") for name in ("led_red", "led_green", "led_blue")},
    )


def floor(world: World) -> float:
    from foxglove.messages import FrameTransform, FrameTransforms, Quaternion, Vector3

    table = world.tables["show"]
    p = table.position[:DRONES].tolist()
    start = time.process_time()
    for _ in range(PULLS):
        FrameTransforms(
            transforms=[
                FrameTransform(
                    parent_frame_id="world",
                    child_frame_id=f"show/{i}",
                    translation=Vector3(x=p[i][0], y=p[i][1], z=p[i][2]),
                    rotation=Quaternion(w=1.0, x=0.0, y=0.0, z=0.0),
                )
                for i in range(DRONES)
            ]
        ).encode()
    return (time.process_time() - start) / PULLS


async def pulls(
    colours: bool, mcap: Path, fixes: bool = True, location: str = "fixes"
) -> tuple[float, World]:
    import foxglove

    world = World()
    sink = FoxgloveSink(port=0, location=location)
    server = asyncio.create_task(sink.serve(world))
    await sink.ready.wait()
    writer = foxglove.open_mcap(mcap, allow_overwrite=True, context=sink.context)
    sink.write(world, [show(world, 0, colours, fixes)])  # first pull: every cube
    updates = [show(world, step, colours, fixes) for step in range(1, PULLS + 1)]
    times = []
    for update in updates:
        start = time.process_time()
        sink.write(world, [update])
        times.append(time.process_time() - start)
    took = float(np.median(times))  # a pull another process's burst slowed counts least
    writer.close()
    server.cancel()
    await asyncio.gather(server, return_exceptions=True)
    sink.finish(world)
    return took, world


READER = """
import json, sys
from websockets.sync.client import connect
with connect(sys.argv[1], subprotocols=["foxglove.sdk.v1"], max_size=None) as ws:
    ws.recv()  # serverInfo
    channels = json.loads(ws.recv())["channels"]
    subscriptions = [{"id": i, "channelId": c["id"]} for i, c in enumerate(channels)]
    ws.send(json.dumps({"op": "subscribe", "subscriptions": subscriptions}))
    print(len(channels), flush=True)
    for message in ws:
        pass
"""
"""A Foxglove client in its own process: subscribes to every channel and reads all."""


async def live(location: str, seconds: float) -> float:
    """The share of a core this process takes serving the show at 30 Hz to one reading client
    (the sink's pulls, the SDK's server threads and the relay), `seconds` long."""
    world = World()
    sink = FoxgloveSink(port=0, location=location)
    server = asyncio.create_task(sink.serve(world))
    await sink.ready.wait()
    assert sink.address is not None
    url = f"ws://127.0.0.1:{sink.address[1]}"
    updates = [show(world, step, False) for step in range(30)]
    client = subprocess.Popen(
        [sys.executable, "-c", READER, url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert client.stdout is not None
        await asyncio.to_thread(client.stdout.readline)  # subscribed
        for step in range(30):  # a second to settle: every channel read, its first cubes sent
            sink.write(world, [updates[step]])
            await asyncio.sleep(1 / 30)
        start, cpu, step = time.monotonic(), time.process_time(), 0
        while time.monotonic() - start < seconds:
            sink.write(world, [updates[step % 30]])
            step += 1
            await asyncio.sleep(max(0.0, start + step / 30 - time.monotonic()))
        share = (time.process_time() - cpu) / (time.monotonic() - start)
    finally:
        client.kill()
        client.wait()
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
        sink.finish(world)
    return share


def main() -> dict[str, float]:
    seconds = 2.0 if bench.QUICK else 4.0
    with tempfile.TemporaryDirectory() as tmp:
        steady, world = asyncio.run(pulls(False, Path(tmp) / "a.mcap"))
        lit, _ = asyncio.run(pulls(True, Path(tmp) / "b.mcap"))
        each, _ = asyncio.run(pulls(False, Path(tmp) / "c.mcap", location="fix"))
        unlocated, _ = asyncio.run(pulls(False, Path(tmp) / "d.mcap", fixes=False))
    base = floor(world)
    live_fixes = asyncio.run(live("fixes", seconds))
    live_each = asyncio.run(live("fix", seconds))
    print(f"   {DRONES} drones, one pull; floor (FrameTransforms alone): {base * 1e3:.1f} ms")
    for name, took in (
        ("pull, colours steady:          ", steady),
        ("pull, every LED change:        ", lit),
        ("pull, a LocationFix per drone: ", each),
        ("pull, no /location:            ", unlocated),
    ):
        print(
            f"   {name} {took * 1e3:.1f} ms  ({took / base:.2f}x floor; "
            f"{took * 30:.0%} of a core at 30 Hz)"
        )
    print(
        f"   live, one client reading at 30 Hz: {live_fixes:.0%} of a core "
        f"(a LocationFix per drone, ?location=fix: {live_each:.0%}; "
        f"{live_each / live_fixes:.2f}x)"
    )
    return {
        "pull_ms": steady * 1e3,
        "cpu": live_fixes,
        "pull_lit_ms": lit * 1e3,
        "pull_each_fix_ms": each * 1e3,
        "pull_unlocated_ms": unlocated * 1e3,
        "floor_ms": base * 1e3,
        "live_cpu": live_fixes,
        "live_each_fix_cpu": live_each,
    }


if __name__ == "__main__":
    main()
