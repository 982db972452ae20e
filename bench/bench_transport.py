"""UDP ingest: robowire's batched driver against asyncio's own datagram endpoint.

A sender process blasts small datagrams at 127.0.0.1; each receiver counts what it gets and
how long that took. Printed: datagrams/s for both and the ratio (same run, same sender).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import time

from robowire.transport import new_event_loop
from robowire.transport.udp import DatagramDriver, open_udp_socket
from robowire.wire import Address, SessionStats

DATAGRAMS = 300_000
PAYLOAD = b"x" * 40


def _blast(address: Address, count: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(address)
    for i in range(count):
        sock.send(PAYLOAD)
        if i % 64 == 0:
            time.sleep(0)  # yield the core now and then, as a real peer would
    sock.close()


class _Count:
    def __init__(self) -> None:
        self.stats = SessionStats()
        self.first = 0.0
        self.last = 0.0

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[object]:
        if not self.stats.messages_in:
            self.first = time.perf_counter()
        self.stats.messages_in += 1
        self.last = time.perf_counter()
        return []

    def tick(self, now: float) -> list[object]:
        return []

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        return []

    def next_deadline(self) -> float | None:
        return None


class _Plain(asyncio.DatagramProtocol):
    def __init__(self, counter: _Count) -> None:
        self.counter = counter

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.counter.feed_datagram(data, addr, 0.0)


async def _receive(batched: bool) -> tuple[int, float]:
    loop = asyncio.get_running_loop()
    counter = _Count()
    sock = open_udp_socket(("127.0.0.1", 0))
    address = sock.getsockname()
    if batched:
        driver = DatagramDriver(counter, lambda events: None, sock)
    else:
        transport, _ = await loop.create_datagram_endpoint(lambda: _Plain(counter), sock=sock)
    sender = multiprocessing.get_context("spawn").Process(target=_blast, args=(address, DATAGRAMS))
    sender.start()
    while sender.is_alive():
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)  # let the receiver empty the kernel queue
    if batched:
        driver.close()
    else:
        transport.close()
    elapsed = max(counter.last - counter.first, 1e-9)
    return counter.stats.messages_in, elapsed


def _run(batched: bool, uv: bool) -> tuple[int, float]:
    loop = new_event_loop() if uv else asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_receive(batched))
    finally:
        loop.close()


def main() -> None:
    results = {}
    for label, batched, uv in (
        ("asyncio datagram endpoint", False, False),
        ("robowire batched driver", True, False),
        ("robowire batched driver + uvloop", True, True),
    ):
        got, elapsed = _run(batched, uv)
        results[label] = got / elapsed
        print(f"   {label:34s} {got:8d} of {DATAGRAMS} datagrams, {got / elapsed:10,.0f}/s")
    base = results["asyncio datagram endpoint"]
    for label, rate in results.items():
        print(f"   ratio {label:28s} {rate / base:5.2f}x")
