"""The fault proxy: its decisions are seeded and counted exactly (a receiver counting from
sequence numbers, `robowire.sequence`, counts the same), and its sockets do what it decided."""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from robowire.sequence import Seen, SequenceCounts

from .plan import DatagramFaults, DatagramPlan, StreamPlan
from .proxy import TcpProxy, UdpProxy

ROOT = Path(__file__).resolve().parents[2]
COUNT = 3000
PRIME = 20  # datagrams before the faults start, and after they end (a receiver counts from
# the first number it saw, and cannot know of losses after the last)

FAULTS = {
    "loss 1%": DatagramFaults(loss=0.01),
    "loss 10%": DatagramFaults(loss=0.10),
    "loss 50%": DatagramFaults(loss=0.50),
    "burst of 100": DatagramFaults(burst=100, burst_every=1000),
    "duplicate 10%": DatagramFaults(duplicate=0.10),
    "reorder depth 8": DatagramFaults(reorder=0.2, reorder_depth=8),
    "jitter 0-50 ms": DatagramFaults(jitter=0.050),
    "everything": DatagramFaults(loss=0.05, duplicate=0.05, reorder=0.1, jitter=0.01),
}


def through(plan: DatagramPlan, count: int) -> list[int]:
    """Numbered datagrams through `plan` at 1 kHz (faults only between the primes): the
    numbers in the order they came out."""
    out: list[bytes] = []
    now = 0.0
    for n in range(count):
        plan.enabled = PRIME <= n < count - PRIME
        if n == count - PRIME:
            plan.release_all(now)
        plan.feed(struct.pack("!I", n), now)
        out += plan.due(now)
        now += 0.001
    out += plan.due(now + 1.0)
    return [struct.unpack("!I", d)[0] for d in out]


@pytest.mark.parametrize("name", FAULTS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_receivers_sequence_counts_equal_what_the_plan_did(name: str, seed: int) -> None:
    plan = DatagramPlan(FAULTS[name], seed=seed)
    counts = SequenceCounts(modulus=1 << 16)
    for n in through(plan, COUNT):
        counts.see(n)
    did = plan.counts
    assert did["received"] == COUNT
    assert did["sent"] == COUNT - did["lost"] + did["duplicated"]
    assert (counts.lost, counts.duplicated, counts.reordered) == (
        did["lost"],
        did["duplicated"],
        did["reordered"],
    ), name
    if name != "jitter 0-50 ms":  # at 1 kHz, 50 ms of jitter reorders: it is counted as such
        assert did[_main(name)] > 0, f"{name}: the fault never happened"


def _main(name: str) -> str:
    return {"dup": "duplicated", "reo": "reordered"}.get(name[:3], "lost")


def test_the_same_seed_makes_the_same_faults() -> None:
    faults = FAULTS["everything"]
    assert through(DatagramPlan(faults, seed=7), 500) == through(DatagramPlan(faults, seed=7), 500)
    assert through(DatagramPlan(faults, seed=7), 500) != through(DatagramPlan(faults, seed=8), 500)


def test_truncation_and_bit_flips_are_counted_and_change_the_bytes() -> None:
    plan = DatagramPlan(DatagramFaults(truncate=0.1, flip=0.1), seed=3)
    sent = [bytes(range(n % 200 + 8)) for n in range(1000)]
    got: list[bytes] = []
    for data in sent:
        plan.feed(data, 0.0)
        got += plan.due(0.0)
    changed = sum(a != b for a, b in zip(sent, got, strict=True))
    shorter = sum(len(b) < len(a) for a, b in zip(sent, got, strict=True))
    assert shorter == plan.counts["truncated"] > 50
    assert changed == plan.counts["truncated"] + plan.counts["flipped"] - _both(sent, got)
    assert plan.counts["flipped"] > 50


def _both(sent: list[bytes], got: list[bytes]) -> int:
    """Datagrams both cut and flipped (counted twice, changed once)."""
    return sum(len(b) < len(a) and b != a[: len(b)] for a, b in zip(sent, got, strict=True))


def test_an_outage_loses_everything_and_counts_it() -> None:
    plan = DatagramPlan(outage=True)
    for n in range(10):
        plan.feed(bytes([n]), 0.0)
    assert plan.due(1.0) == [] and plan.counts["lost"] == 10


def test_a_stream_plan_cuts_mid_chunk_with_rst_and_after_the_chunk_with_fin() -> None:
    rst = StreamPlan(cut_after=10, cut="rst")
    assert rst.feed(b"12345678") == (b"12345678", None)
    assert rst.feed(b"abcdef") == (b"ab", "rst")
    fin = StreamPlan(cut_after=10, cut="fin")
    assert fin.feed(b"12345678") == (b"12345678", None)
    assert fin.feed(b"abcdef") == (b"abcdef", "fin")


# -- the sockets ----------------------------------------------------------------------------


async def test_the_udp_proxy_relays_both_ways_with_its_faults_on_one_way() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.setblocking(False)
    loop = asyncio.get_running_loop()
    faults = DatagramFaults(loss=0.1, duplicate=0.1, reorder=0.1)
    up = DatagramPlan(faults, seed=5)
    async with UdpProxy(server.getsockname(), up) as proxy:
        assert proxy.address is not None
        client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        client.connect(proxy.address)  # as WPILib's XRP client: replies from the proxy only
        client.setblocking(False)
        counts = SequenceCounts()
        echoed = 0
        for n in range(1000):
            up.enabled = PRIME <= n < 1000 - PRIME
            if n == 1000 - PRIME:
                proxy.set(enabled=False)
            client.send(struct.pack("!I", n))
            await asyncio.sleep(0)
            while True:
                try:
                    data, addr = server.recvfrom(64)
                except BlockingIOError:
                    break
                counts.see(struct.unpack("!I", data)[0])
                server.sendto(data, addr)  # an echo, back through the proxy
            while True:
                try:
                    client.recv(64)
                    echoed += 1
                except BlockingIOError:
                    break
        await asyncio.sleep(0.1)
        while True:
            try:
                counts.see(struct.unpack("!I", server.recv(64))[0])
            except BlockingIOError:
                break
        did = up.counts
        assert (counts.lost, counts.duplicated, counts.reordered) == (
            did["lost"], did["duplicated"], did["reordered"],
        )  # fmt: skip
        assert min(did["lost"], did["duplicated"], did["reordered"]) > 0
        assert proxy.down.counts["sent"] > 0 and echoed > 0
        client.close()
    server.close()
    del loop


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1024):
        writer.write(data)
        await writer.drain()
    writer.close()


async def test_the_tcp_proxy_cuts_with_rst_or_fin_and_stalls_without_closing() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    target = server.sockets[0].getsockname()[:2]
    async with TcpProxy(target) as proxy:
        assert proxy.address is not None
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(b"hello")
        assert await asyncio.wait_for(reader.readexactly(5), 5) == b"hello"
        proxy.pause("down")  # the echo server's answers are not read: nothing comes, open
        writer.write(b"again")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.readexactly(5), 0.3)
        proxy.resume("down")
        assert await asyncio.wait_for(reader.readexactly(5), 5) == b"again"
        proxy.cut("rst")
        with pytest.raises(ConnectionResetError):
            await asyncio.wait_for(reader.read(10), 5)
        writer.close()
        reader, writer = await asyncio.open_connection(*proxy.address)
        writer.write(b"x")
        assert await asyncio.wait_for(reader.readexactly(1), 5) == b"x"
        proxy.cut("fin")
        assert await asyncio.wait_for(reader.read(10), 5) == b""  # a clean end
        writer.close()
        assert proxy.counts["connections"] == 2
        assert (proxy.counts["rst"], proxy.counts["fin"]) == (1, 1)
    server.close()


def test_the_proxy_command_has_help_with_an_example() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tests.faults", "proxy", "--help"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "--loss" in run.stdout and "examples:" in run.stdout


def test_seen_says_what_each_number_was() -> None:
    counts = SequenceCounts(modulus=1 << 16)
    verdicts = [counts.see(n) for n in (65534, 65535, 2, 0, 0, 1, 3)]
    assert verdicts == [
        Seen.NEW, Seen.NEW, Seen.NEW, Seen.LATE, Seen.DUPLICATE, Seen.LATE, Seen.NEW,
    ]  # fmt: skip
    assert (counts.lost, counts.duplicated, counts.reordered) == (0, 1, 2)


def test_a_single_number_far_ahead_is_no_loss_of_millions_but_a_followed_leap_is_real() -> None:
    counts = SequenceCounts(modulus=1 << 32, window=1024)
    assert [counts.see(n) for n in (10, 11, 11 + (1 << 20), 12)] == [
        Seen.NEW, Seen.NEW, Seen.OLD, Seen.NEW,
    ]  # fmt: skip  # a flipped bit in one frame number
    assert counts.lost == 0 and counts.newest == 12
    assert [counts.see(n) for n in (5000, 5001)] == [Seen.OLD, Seen.NEW]  # 4,987 frames gone
    assert counts.lost == 4987 and counts.received == 5
