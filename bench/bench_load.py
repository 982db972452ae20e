"""Latency against load: a sim datagram's send to its world update, VRPN and VRSP, 5 loads.

For each protocol and load (updates/s), a sender PROCESS sends over 127.0.0.1 UDP to the real
source in this process (`VrpnSource` / `VrspSource` -> session -> adapter -> `World`, no sink):

* VRPN: a minimal VRPN server (the handshake of bench_ingest: lob, TCP back, descriptions),
  one tracker; each 1 ms tick it sends the reports due (cycling over its sensors, <= 16 per
  datagram), each stamped with the wall time it is sent. Latency of every report: the wall
  time right after the world took it here - its stamp. Loads: 1k, 3k, 10k (10 sensors at
  1 kHz, the table's row), 30k, 100k updates/s.
* VRSP: drones at 30 Hz, N = 100 ... 10,000 (3k ... 300k updates/s, 10,000 at 30 Hz is the
  table's row); the sender notes the wall time before the first datagram of each frame;
  latency of a frame: the wall time right after its `SwarmFrame` reached the world - that.

Both processes read the same wall clock. Printed per load: updates/s received, p50/p99 ms and
this (receiving) process's CPU share over the window; the p50/p99 curves go to the PNG.
`--quick`: 3 loads per protocol (the table's among them), 2 s windows.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import socket
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

import bench
from bench.bench_ingest import drainer, vrpn_handshake

VRPN_LOADS = (1_000, 3_000, 10_000, 30_000, 100_000)
VRSP_RATE = 30.0
VRSP_LOADS = (3_000, 10_000, 30_000, 100_000, 300_000)  # drones = load / 30
WARMUP = 1.0
TICK = 0.001
PER_DATAGRAM = 16


def _window() -> float:
    return 2.0 if bench.QUICK else 4.0


def _percentiles(lags_s: np.ndarray) -> tuple[float, float]:
    if not lags_s.size:
        return float("nan"), float("nan")
    p50, p99 = np.percentile(lags_s * 1e3, [50, 99])
    return float(p50), float(p99)


# -- VRPN ------------------------------------------------------------------------------------


def _vrpn_sender(port_queue: Any, done: Any, load: int, seconds: float) -> None:
    from robowire.protocols.vrpn.registry import encode_pose_frames

    tcp, session, senders, type_id = vrpn_handshake(port_queue, ["Tracker0"])
    drain = drainer(tcp)
    sensors = max(10, load // 1000)  # 10 sensors up to 10k/s, then 1 kHz per sensor
    rng = np.random.default_rng(0)
    positions = rng.normal(size=(sensors, 3))
    quats = np.tile([0.0, 0.0, 0.0, 1.0], (sensors, 1))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    time.sleep(0.3)  # the descriptions are read before the first report arrives
    start = time.perf_counter()
    sent, next_drain = 0, start
    while (now := time.perf_counter()) - start < seconds:
        due = int((now - start) * load) - sent
        if due > 0:
            which = np.arange(sent, sent + due) % sensors
            frames = encode_pose_frames(
                senders["Tracker0"], type_id, which, positions[which], quats[which],
                time=time.time(), first_seq=sent,
            )  # fmt: skip
            raw = frames.tobytes()
            size = frames.dtype.itemsize * PER_DATAGRAM
            for i in range(0, len(raw), size):
                with contextlib.suppress(OSError):  # a full buffer: the datagram is lost
                    udp.sendto(raw[i : i + size], session.peer_udp)
            sent += due
        if now >= next_drain:
            drain()
            next_drain = now + 0.1
        time.sleep(TICK)
    done.put(sent)
    time.sleep(0.5)
    tcp.close()


async def _vrpn_level(load: int, window: float) -> dict[str, float]:
    from robowire.addresses import parse_endpoint
    from robowire.protocols.vrpn.events import TrackerReports
    from robowire.protocols.vrpn.services import VrpnSource
    from robowire.world import World

    class Measured(VrpnSource):
        measuring = False
        lags: list[np.ndarray]

        def deliver(self, events: Sequence[object], now: float) -> None:
            super().deliver(events, now)
            if self.measuring:
                applied = time.time()
                self.lags.extend(applied - e.time for e in events if type(e) is TrackerReports)

    ctx = multiprocessing.get_context("spawn")
    port_queue, done = ctx.Queue(), ctx.Queue()
    sender = ctx.Process(
        target=_vrpn_sender, args=(port_queue, done, load, window + 2 * WARMUP + 1)
    )
    sender.start()
    try:
        port = await asyncio.to_thread(port_queue.get, True, 30)
        source = Measured(parse_endpoint(f"vrpn://127.0.0.1:{port}"))
        source.lags = []
        task = asyncio.create_task(source.run(World()))
        while source.stats.messages_in == 0:
            await asyncio.sleep(0.01)
        await asyncio.sleep(WARMUP)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        source.measuring = True
        await asyncio.sleep(window)
        source.measuring = False
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        await asyncio.to_thread(done.get, True, 30)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finally:
        sender.join(10)
        if sender.is_alive():
            sender.kill()
    lags = np.concatenate(source.lags) if source.lags else np.zeros(0)
    p50, p99 = _percentiles(lags)
    return {"rate": lags.size / wall, "p50_ms": p50, "p99_ms": p99, "cpu": cpu / wall}


# -- VRSP ------------------------------------------------------------------------------------


def _vrsp_sender(target: tuple[str, int], done: Any, drones: int, seconds: float) -> None:
    from bench.bench_vrsp import PLAIN
    from robowire.protocols.vrsp.codec import DefinitionTable, empty_swarm, encode_data, encode_def

    ids = np.arange(drones, dtype=np.uint16)
    blocks = [(PLAIN, ids)]
    table = DefinitionTable.build(1, (47.0, 8.0, 400.0), blocks)
    swarm = empty_swarm(drones, 0)
    swarm.ids[:] = ids
    swarm.position[:] = np.random.default_rng(1).normal(0, 50, (drones, 3))
    swarm.has_color[:] = True
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
    definitions = encode_def(1, table.root, blocks)
    sent_at: dict[int, float] = {}
    start = time.perf_counter()
    frame, next_def = 1, start
    while (now := time.perf_counter()) - start < seconds:
        if now >= next_def:
            for datagram in definitions:
                udp.sendto(datagram, target)
            next_def = now + 1.0
        datagrams = encode_data(table, swarm, frame)
        sent_at[frame] = time.time()
        for datagram in datagrams:
            with contextlib.suppress(OSError):  # a full buffer: the datagram is lost
                udp.sendto(datagram, target)
        frame += 1
        delay = start + frame / VRSP_RATE - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    done.put(sent_at)


async def _vrsp_level(drones: int, window: float) -> dict[str, float]:
    from robowire.addresses import parse_endpoint
    from robowire.protocols.vrsp.events import SwarmFrame
    from robowire.protocols.vrsp.services import VrspSource
    from robowire.world import World

    class Measured(VrspSource):
        measuring = False
        arrived: dict[int, float]

        def deliver(self, events: Sequence[object], now: float) -> None:
            super().deliver(events, now)
            if self.measuring:
                applied = time.time()
                for e in events:
                    if type(e) is SwarmFrame and e.frame is not None:
                        self.arrived[e.frame] = applied

    source = Measured(parse_endpoint("vrsp://127.0.0.1:0"))
    source.arrived = {}
    task = asyncio.create_task(source.run(World()))
    await source.ready.wait()
    ctx = multiprocessing.get_context("spawn")
    done = ctx.Queue()
    target = ("127.0.0.1", source.port)
    sender = ctx.Process(target=_vrsp_sender, args=(target, done, drones, window + 2 * WARMUP + 1))
    sender.start()
    try:
        while source.session.stats.extra["frames"] == 0:
            await asyncio.sleep(0.01)
        await asyncio.sleep(WARMUP)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        source.measuring = True
        await asyncio.sleep(window)
        source.measuring = False
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        sent_at: dict[int, float] = await asyncio.to_thread(done.get, True, 30)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        sender.join(10)
        if sender.is_alive():
            sender.kill()
    lags = np.array([t - sent_at[f] for f, t in source.arrived.items() if f in sent_at])
    p50, p99 = _percentiles(lags)
    return {"rate": lags.size * drones / wall, "p50_ms": p50, "p99_ms": p99, "cpu": cpu / wall}


def main() -> dict[str, float]:
    from robowire.transport import run

    window = _window()
    figures: dict[str, float] = {}
    print(f"   sender process -> 127.0.0.1 UDP -> source -> world, {window:g} s per load")
    print("     protocol  offered/s   received/s    p50 ms    p99 ms   CPU (receiver)")
    for protocol, offered, level in _levels(window):
        result = run(level)
        for key, value in result.items():
            figures[f"{protocol}.{offered}.{key}"] = value
        p50, p99, cpu = result["p50_ms"], result["p99_ms"], result["cpu"]
        print(f"     {protocol:8s} {offered:>10,} {result['rate']:>12,.0f} "
              f"{p50:>9.2f} {p99:>9.2f}   {cpu:6.1%}")  # fmt: skip
    return figures


def _levels(window: float) -> Any:
    # --quick: 3 loads each, the table's (10k VRPN, 300k VRSP) among them
    for load in VRPN_LOADS[::2] if bench.QUICK else VRPN_LOADS:
        yield "vrpn", load, _vrpn_level(load, window)
    for load in VRSP_LOADS[::2] if bench.QUICK else VRSP_LOADS:
        yield "vrsp", load, _vrsp_level(round(load / VRSP_RATE), window)


if __name__ == "__main__":
    main()
