"""SpyGlass decode rate: robowire's splitter + batch decoder against a bare struct loop.

The stream is 100k packets from the sensor-network simulation (neighbourhoods, uint8 data,
trajectories, coordinates lists), packets back to back as on TCP. Measured side by side in one
run: (a) `split` + `decode_batch` over the whole stream, (b) `SpyglassSession.feed` in 64 KiB
chunks (what a live source does, events included), (c) a bare loop of `struct.unpack_from`
reading every header field and payload value into tuples kept in a list (like any decoder's
output), with no checks and no types. All three run with the cyclic GC on, as a process runs.
Printed: packets/s of each, and how many times faster the bare loop is.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

import numpy as np

from robowire.protocols.spyglass.codec import decode_batch, split
from robowire.protocols.spyglass.model import SensorNetworkSim, SimConfig
from robowire.protocols.spyglass.session import SpyglassSession

PACKETS = 100_000
HEADER = struct.Struct(">HBBBHIHhhh")
CODES = {1: ("B", 1), 2: ("H", 2), 3: ("h", 2), 4: ("I", 4), 5: ("q", 8), 6: ("f", 4)}


def make_stream(count: int = PACKETS) -> bytes:
    sim = SensorNetworkSim(np.random.default_rng(0), SimConfig(nodes=300, area=(600.0, 600.0)))
    packets: list[bytes] = []
    now = 1_700_000_000.0
    while len(packets) < count:
        packets += sim.step(now)
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
        count += len(session.feed(stream[i : i + (1 << 16)], 0.0))
    return count


def best_rate(function: Callable[[bytes], int], stream: bytes, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        count = function(stream)
        best = min(best, time.perf_counter() - start)
    assert count == PACKETS, (function.__name__, count)
    return PACKETS / best


def main() -> None:
    stream = make_stream()
    print(f"   stream: {PACKETS} packets, {len(stream) / 1e6:.1f} MB (sim, 300 nodes)")
    bare = best_rate(bare_loop, stream)
    batch = best_rate(ours_batch, stream)
    session = best_rate(ours_session, stream)
    print(f"   bare struct loop (tuples):         {bare:11,.0f} packets/s")
    for label, rate in (
        ("split + decode_batch (packets):", batch),
        ("SpyglassSession.feed (events): ", session),
    ):
        print(f"   {label}    {rate:11,.0f} packets/s  bare loop {bare / rate:.2f}x faster")


if __name__ == "__main__":
    main()
