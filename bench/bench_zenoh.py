"""Zenoh between two gateways: device updates/s, against Zenoh's own put/subscribe rate.

Two in-process gateways on loopback: A holds a synthetic swarm (position + orientation + one
telemetry field per drone, every drone moving every step) and serves `zenoh://127.0.0.1:P`;
B `listen`s to it. Counted: device updates that reach B's world per second (each STATE frame
received is one update of every drone in it). The floor, in the same run and process: two
bare Zenoh sessions, one `put` per message of the same payload (the encoded STATE frame) and
a callback that counts, with congestion control BLOCK so every message arrives.
Printed per swarm size: messages/s and device updates/s of both, and robowire's share. A
latest-state link may merge steps (B gets fewer, fresher frames); only what B took in counts.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import numpy as np

from robowire.gateway import Gateway, open_sink, open_source
from robowire.world import World
from robowire.zenoh import codec
from robowire.zenoh.sink import state_frame

SIZES = ((100, 2000), (10_000, 100))  # (drones, steps)
WAIT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


Step = tuple[np.ndarray, np.ndarray, np.ndarray]


def steps_of(n: int, count: int) -> list[Step]:
    """The swarm's columns for each step, made before the clock starts (the source's work
    is not what is measured)."""
    angle = np.linspace(0, 2 * np.pi, n)
    orientation = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    out = []
    for k in range(count + 1):
        turned = angle + k * 0.01
        position = np.stack([np.cos(turned) * 50, np.sin(turned) * 50, np.full(n, float(k))], 1)
        out.append((position, orientation, np.full(n, 12.0 - k * 1e-3)))
    return out


def step(world: World, slots: np.ndarray, columns: Step) -> None:
    position, orientation, battery = columns
    world.update(
        "show",
        slots,
        receive_time=time.time(),
        position=position,
        orientation=orientation,
        telemetry={"battery": (battery, "V")},
    )


def payload(n: int) -> bytes:
    world = World()
    slots = world.table("show").slots([str(i) for i in range(n)], "drone")
    step(world, slots, steps_of(n, 0)[0])
    table = world.tables["show"]
    fields = frozenset({"position", "orientation", "battery"})
    return codec.encode(state_frame(table, slots, fields))


def bare(n: int, steps: int) -> tuple[float, int]:
    """Zenoh alone: messages/s of `steps` puts of one STATE payload, and its size."""
    import zenoh

    port = free_port()
    scout = {"scouting": {"multicast": {"enabled": False}}}
    listen = {"mode": "peer", "listen": {"endpoints": [f"tcp/127.0.0.1:{port}"]}, **scout}
    connect = {"mode": "client", "connect": {"endpoints": [f"tcp/127.0.0.1:{port}"]}, **scout}
    a = zenoh.open(zenoh.Config.from_json5(json.dumps(listen)))
    b = zenoh.open(zenoh.Config.from_json5(json.dumps(connect)))
    data = payload(n)
    done = threading.Event()
    got = [0]

    def count(sample: zenoh.Sample) -> None:
        sample.payload.to_bytes()  # the subscriber has the bytes in Python, as robowire does
        got[0] += 1
        if got[0] == steps:
            done.set()

    subscriber = b.declare_subscriber("bench/show", count)
    publisher = a.declare_publisher("bench/show", congestion_control=zenoh.CongestionControl.BLOCK)
    time.sleep(0.3)  # the subscription reaches the publisher
    start = time.perf_counter()
    for _ in range(steps):
        publisher.put(data)
    done.wait(WAIT)
    took = time.perf_counter() - start
    subscriber.undeclare()
    a.close()
    b.close()
    return got[0] / took, len(data)


async def through_gateways(n: int, steps: int) -> tuple[float, float, int]:
    """robowire: (STATE frames/s, device updates/s, frames B took in) from A's world into
    B's world."""
    port = free_port()
    a, b = Gateway(), Gateway()
    sink = open_sink(f"zenoh://127.0.0.1:{port}")
    source = open_source(f"zenoh://127.0.0.1:{port}")
    a.add(sink)
    b.add(source)
    tasks = [asyncio.create_task(a.run())]
    await sink.ready.wait()
    tasks.append(asyncio.create_task(b.run()))
    columns = steps_of(n, steps)
    slots = a.world.table("show").slots([str(i) for i in range(n)], "drone")
    step(a.world, slots, columns[0])
    while len(b.world) < n:  # B has every drone: the DEVICES frame is through
        await asyncio.sleep(0.01)
    frames = source.stats.messages_in
    start = time.perf_counter()
    for k in range(1, steps + 1):
        step(a.world, slots, columns[k])
        await asyncio.sleep(0)  # A's sink pulls, B's source takes in what arrived
    table = b.world.tables["show"]
    deadline = time.perf_counter() + WAIT
    while table.position[n - 1, 2] != steps and time.perf_counter() < deadline:
        await asyncio.sleep(0.001)
    took = time.perf_counter() - start
    received = source.stats.messages_in - frames
    a.stop()
    b.stop()
    await asyncio.gather(*tasks)
    if table.position[n - 1, 2] != steps:
        print(f"     (B did not get the last step within {WAIT:.0f} s)")
    return received / took, received * n / took, received


def main() -> None:
    for n, steps in SIZES:
        floor, size = bare(n, steps)
        frames, updates, received = asyncio.run(through_gateways(n, steps))
        print(f"   {n} drones, STATE payload {size / 1e3:.1f} kB, {steps} steps:")
        print(f"     zenoh put/subscribe alone:  {floor:8.0f} msg/s  {floor * n:12.0f} dev/s")
        print(
            f"     gateway A -> zenoh -> B:    {frames:8.0f} msg/s  {updates:12.0f} dev/s"
            f"  ({updates / (floor * n):.2f}x zenoh alone; B took in {received} frames)"
        )


if __name__ == "__main__":
    main()
