"""SpyGlass decode rate: robowire's session (columns) against a bare struct loop (the peer).

The stream is 100k packets from the sensor-network simulation (neighbourhoods, uint8 data,
trajectories, coordinates lists), packets back to back as on TCP. Measured side by side in one
run: (a) `split` + `decode_batch` over the whole stream (typed packets, the slow form the
dissector uses), (b) `SpyglassSession.feed` in 64 KiB chunks (what a live source does: every
header checked, payloads that do not fit dropped, each read's packets as columns in one
`PacketsReceived`, with no object per packet), (c) a bare loop of `struct.unpack_from` reading
every header field and payload value into tuples kept in a list (like any decoder's output),
with no checks and no types. All three run with the cyclic GC on, as a process runs. Printed:
packets/s of each, and the session's rate over the bare loop's (the table's "vs peer",
target >= 0.8).

Ingest: `SpyglassSim` with 1,000 nodes (its default rates) in a child process, serving on
127.0.0.1; in this process the real `SpyglassSource` (TCP client -> session -> adapter ->
world). Over the window: packets/s applied, the latency from each packet's time stamp (the
sim's wall clock, ms resolution) to its world update here (p50/p99), and the CPU share of the
source's process and of the sim's.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import statistics
import struct
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection

import numpy as np

import bench
from bench import rounds
from robowire.protocols.spyglass.adapter import network_packets
from robowire.protocols.spyglass.codec import decode_batch, split
from robowire.protocols.spyglass.events import PacketsReceived
from robowire.protocols.spyglass.model import SensorNetworkSim, SimConfig
from robowire.protocols.spyglass.session import SpyglassSession

PACKETS = 100_000
NODES = 1000
NODES_SECONDS = 15.0
NODES_SECONDS_QUICK = 5.0
WARMUP = 2.0
HEADER = struct.Struct(">HBBBHIHhhh")
CODES = {1: ("B", 1), 2: ("H", 2), 3: ("h", 2), 4: ("I", 4), 5: ("q", 8), 6: ("f", 4)}


def make_stream(count: int = PACKETS) -> bytes:
    sim = SensorNetworkSim(np.random.default_rng(0), SimConfig(nodes=300, area=(600.0, 600.0)))
    packets: list[bytes] = []
    now = 1_700_000_000.0
    while len(packets) < count:
        packets += network_packets(sim.step(now))
        now += 0.1
    return b"".join(packets[:count])


def bare_loop(stream: bytes) -> int:
    """What a minimal hand-written reader does: header + payload values as tuples, kept in a
    list like any decoder's output, and nothing else (no checks, no types)."""
    structs: dict[tuple[int, int], struct.Struct] = {}
    offset, size = 0, len(stream)
    out: list[tuple[tuple[int, ...], tuple[int | float, ...]]] = []
    unpack = HEADER.unpack_from
    while offset < size:
        head = unpack(stream, offset)
        total = head[0] + 2
        key = (head[2], total - 19)
        payload = structs.get(key)
        if payload is None:
            code, width = CODES[key[0]]
            payload = structs[key] = struct.Struct(f">{key[1] // width}{code}")
        out.append((head, payload.unpack_from(stream, offset + 19)))
        offset += total
    return len(out)


def ours_batch(stream: bytes) -> int:
    starts, end, error = split(stream)
    assert error is None and end == len(stream)
    return len(decode_batch(stream, starts, end))


def ours_session(stream: bytes) -> int:
    session = SpyglassSession()
    count = 0
    for i in range(0, len(stream), 1 << 16):
        for event in session.feed(stream[i : i + (1 << 16)], 0.0):
            if type(event) is PacketsReceived:
                count += len(event)
    return count


def best_rate(function: Callable[[bytes], int], stream: bytes, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        count = function(stream)
        best = min(best, time.perf_counter() - start)
    assert count == PACKETS, (function.__name__, count)
    return PACKETS / best


# -- ingest: 1,000 nodes over loopback TCP ---------------------------------------------------


def _sim(pipe: Connection, count: int) -> None:
    from robowire.protocols.spyglass.services import SpyglassSim
    from robowire.service import SimOptions
    from robowire.transport import new_event_loop
    from robowire.world import World

    async def run() -> None:
        sim = SpyglassSim(SimOptions(port=0, count=count))
        task = asyncio.create_task(sim.run(World()))
        await sim.ready.wait()
        pipe.send(sim.address)
        loop = asyncio.get_running_loop()
        while True:  # "mark" -> (cpu, wall, packets sent); "stop" -> the same, then end
            command = await loop.run_in_executor(None, pipe.recv)
            pipe.send((time.process_time(), time.perf_counter(), sim.stats.messages_out))
            if command == "stop":
                break
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    loop = new_event_loop()
    try:
        loop.run_until_complete(run())
    finally:
        loop.close()


async def _ingest(seconds: float) -> dict[str, float]:
    from robowire.addresses import parse_endpoint
    from robowire.protocols.spyglass.services import SpyglassSource
    from robowire.world import World

    class Measured(SpyglassSource):
        measuring = False
        lags: list[float]
        read_lags: list[float]

        def deliver(self, events: Sequence[object], now: float) -> None:
            super().deliver(events, now)
            if self.measuring:
                applied = time.time()
                for event in events:
                    if type(event) is PacketsReceived:
                        head = event.packets.head
                        sent = head["seconds"] + head["ms"] / 1000.0  # each packet's stamp
                        self.lags.extend((applied - sent).tolist())
                        self.read_lags.extend((self.clock.wall(event.time) - sent).tolist())

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_sim, args=(child, NODES), daemon=True)
    process.start()
    loop = asyncio.get_running_loop()
    try:
        host, port = await loop.run_in_executor(None, parent.recv)
        world = World()
        source = Measured(parse_endpoint(f"spyglass://{host}:{port}"))
        source.lags, source.read_lags = [], []
        task = asyncio.create_task(source.run(world))

        async def mark(command: str) -> tuple[float, float, int]:
            parent.send(command)
            result: tuple[float, float, int] = await loop.run_in_executor(None, parent.recv)
            return result

        await asyncio.sleep(WARMUP)
        sim0 = await mark("mark")
        cpu0, wall0, in0 = time.process_time(), time.perf_counter(), source.stats.messages_in
        source.measuring = True
        await asyncio.sleep(seconds)
        source.measuring = False
        cpu1, wall1, in1 = time.process_time(), time.perf_counter(), source.stats.messages_in
        sim1 = await mark("stop")
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        process.join(5.0)
        if process.is_alive():
            process.kill()
    wall = wall1 - wall0
    lags = np.asarray(source.lags) * 1e3
    p50, p99 = np.percentile(lags, [50, 99]) if lags.size else (np.nan, np.nan)
    reads = np.asarray(source.read_lags) * 1e3
    r50, r99 = np.percentile(reads, [50, 99]) if reads.size else (np.nan, np.nan)
    return {
        "ingest_rate": len(source.lags) / wall,
        "ingest_applied_rate": (in1 - in0) / wall,
        "sim_sent_rate": (sim1[2] - sim0[2]) / (sim1[1] - sim0[1]),
        "lag_p50_ms": float(p50),
        "lag_p99_ms": float(p99),
        "read_lag_p50_ms": float(r50),
        "read_lag_p99_ms": float(r99),
        "source_cpu": (cpu1 - cpu0) / wall,
        "sim_cpu": (sim1[0] - sim0[0]) / (sim1[1] - sim0[1]),
        "devices": float(len(world)),
    }


def ingest(seconds: float) -> dict[str, float]:
    from robowire.transport import run

    result = run(_ingest(seconds))
    print(f"   ingest: sim spyglass {NODES} nodes -> SpyglassSource -> world, {seconds:g} s "
          f"on 127.0.0.1, {result['devices']:.0f} devices")  # fmt: skip
    print(f"     packets sent by the sim         {result['sim_sent_rate']:11,.0f}/s")
    print(f"     packets into the world          {result['ingest_rate']:11,.0f}/s")
    print(f"     latency packet time -> world    p50 {result['lag_p50_ms']:7.1f} ms   "
          f"p99 {result['lag_p99_ms']:7.1f} ms (the packet's time has ms resolution)")  # fmt: skip
    print(f"       of which until our read       p50 {result['read_lag_p50_ms']:7.1f} ms   "
          f"p99 {result['read_lag_p99_ms']:7.1f} ms (the sim's step after its stamp, "
          "the socket)")  # fmt: skip
    print(f"     CPU share  source {result['source_cpu']:6.1%}   sim {result['sim_cpu']:6.1%}"
          "   (of one core)")  # fmt: skip
    return result


def main() -> dict[str, float]:
    stream = make_stream()
    print(f"   stream: {PACKETS} packets, {len(stream) / 1e6:.1f} MB (sim, 300 nodes)")
    bares, sessions = [], []
    for _ in range(rounds.ROUNDS):  # side by side, the ratio per run (bench/rounds.py)
        bares.append(best_rate(bare_loop, stream))
        sessions.append(best_rate(ours_session, stream))
    ratios = [s / b for s, b in zip(sessions, bares, strict=True)]
    bare, session = statistics.median(bares), statistics.median(sessions)
    batch = best_rate(ours_batch, stream)
    print(f"   bare struct loop (tuples):         {bare:11,.0f} packets/s")
    for label, rate in (
        ("split + decode_batch (packets):", batch),
        ("SpyglassSession.feed (columns):", session),
    ):
        print(f"   {label}    {rate:11,.0f} packets/s  {rate / bare:.2f}x the bare loop")
    print(f"   session / bare loop                {rounds.text(ratios)}  (target >= 0.8)")
    figures = {
        "decode_bare_rate": bare,
        "decode_batch_rate": batch,
        "decode_rate": session,
        **rounds.figures("decode_ratio", ratios),
    }
    return figures | ingest(NODES_SECONDS_QUICK if bench.QUICK else NODES_SECONDS)


if __name__ == "__main__":
    main()
