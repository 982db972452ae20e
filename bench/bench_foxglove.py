"""Foxglove live: the cost of one sink pull for a 10,000-drone show, against the SDK's floor.

The world holds 10,000 drones (position, orientation, geodetic, LED colour). One pull is
`FoxgloveSink.write` of one update touching all of them: /tf (FrameTransforms), /location
(one LocationFix per drone), /telemetry/<source> (one JSON message), and /scene only when a
colour changed. The sink's context also writes to an MCAP file, so every message is logged
to a real sink (the SDK skips a channel no sink reads). The floor, measured in the same run:
the same 10,000 transforms built the SDK's way, one `FrameTransform` object each, and
encoded with `FrameTransforms.encode`. A third pull has no geodetic fixes: what the 10,000
`LocationFix` messages (one SDK log each: the schema holds one fix) cost is the difference.
Printed: milliseconds per pull, the ratio to the floor, and the share of one core that
pulls at 30 Hz take (ms per pull x 30 / 1000). Times are this process's CPU time
(`time.process_time`, the SDK's own threads included), so that other work on a shared machine
counts less than it would in wall time.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import numpy as np

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


async def pulls(colours: bool, mcap: Path, fixes: bool = True) -> tuple[float, World]:
    import foxglove

    world = World()
    sink = FoxgloveSink(port=0)
    server = asyncio.create_task(sink.serve(world))
    await sink.ready.wait()
    writer = foxglove.open_mcap(mcap, allow_overwrite=True, context=sink.context)
    sink.write(world, [show(world, 0, colours, fixes)])  # first pull: every cube
    updates = [show(world, step, colours, fixes) for step in range(1, PULLS + 1)]
    start = time.process_time()
    for update in updates:
        sink.write(world, [update])
    took = (time.process_time() - start) / PULLS
    writer.close()
    server.cancel()
    await asyncio.gather(server, return_exceptions=True)
    sink.finish(world)
    return took, world


def main() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        steady, world = asyncio.run(pulls(False, Path(tmp) / "a.mcap"))
        lit, _ = asyncio.run(pulls(True, Path(tmp) / "b.mcap"))
        unlocated, _ = asyncio.run(pulls(False, Path(tmp) / "c.mcap", fixes=False))
    base = floor(world)
    print(f"   {DRONES} drones, one pull; floor (FrameTransforms alone): {base * 1e3:.1f} ms")
    for name, took in (
        ("pull, colours steady:  ", steady),
        ("pull, every LED change:", lit),
        ("pull, no /location:    ", unlocated),
    ):
        print(
            f"   {name} {took * 1e3:.1f} ms  ({took / base:.2f}x floor; "
            f"{took * 30:.0%} of a core at 30 Hz)"
        )
    return {
        "pull_ms": steady * 1e3,
        "cpu": steady * 30,
        "pull_lit_ms": lit * 1e3,
        "pull_unlocated_ms": unlocated * 1e3,
        "floor_ms": base * 1e3,
    }


if __name__ == "__main__":
    main()
