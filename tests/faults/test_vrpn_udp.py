"""VRPN's UDP under datagram faults. In UDP+TCP mode the reports travel as datagrams (the
reliable messages, descriptions and pings on TCP), to the port the receiving side names in
its UDP description. The fault proxy sits on that path: the receiver's UDP description is
pointed at the proxy, which relays to the real socket (as a NAT's port mapping would; the
hook is `route_udp`). TCP stays direct: its faults are the stream cells'.

The receivers: our client (`vrpn://Tracker0@...`) of our simulator and of the mainline
`vrpn_server`, and the mainline `vrpn_print_devices` of our server. A second client of the same
server, TCP only (`vrpn+tcp://`), is the reference: it receives every report the server sent.

What each cell shows: the client takes no report the server did not send (loss, duplication,
reordering, jitter); a report is taken only if it is newer on the wire than every one taken
(VRPN's header carries a per-channel message number, `seq`, written by every sender, the
mainline's too: the first message of each datagram says where the datagram falls), so a
duplicate changes nothing and a reordered older report never overwrites a newer one; the
datagrams dropped as copies or as late are counted (`duplicated`, `reordered`), exactly the
proxy's; after the fault every sensor's latest pose is the reference's; a truncated datagram
is dropped whole as bad (counted in `errors`), or taken as what it says where it was cut
between two messages; a flipped bit where it still decodes is what it says (VRPN has no
checksum: the kernel's UDP checksum drops such datagrams on a real wire).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from mainline import SERVER, needs_client, needs_server, start_print_devices, stop_print_devices
from robowire.gateway import Gateway, open_source
from robowire.protocols.vrpn import server as vrpn_server
from robowire.protocols.vrpn import services
from robowire.protocols.vrpn.events import TrackerReports
from robowire.protocols.vrpn.session import Role, VrpnSession
from robowire.sequence import DatagramOrder
from robowire.service import SimOptions, Source
from robowire.status import status_message
from robowire.status_client import status_table
from robowire.wire import Address
from support import free_port, open_fds, until

from .cycles import CYCLES, assert_flat, resident, until_faults
from .plan import DatagramFaults, DatagramPlan
from .proxy import UdpProxy
from .test_time import vrpn_sim
from .test_vrsp import FAULTS  # (the same datagram faults as VRSP's cells)

pytestmark = pytest.mark.timeout(90)
FULL = os.environ.get("ROBOWIRE_FAULT_MATRIX") == "full"  # make reliability: every cell
POSE = "vrpn_Tracker Pos_Quat"
RATE = 200.0  # reports/s of each sensor (one datagram a report time)
DATAGRAMS = 400  # faulty, each cell
CLEAN = {  # faults that change no byte: every report taken is one the server sent
    **{name: faults for name, faults in FAULTS.items() if name != "every 10th lost"},
    "jitter 0-50 ms": DatagramFaults(jitter=0.05),
}
DAMAGE = {
    "truncate 5%": DatagramFaults(truncate=0.05),
    "flip a bit 5%": DatagramFaults(flip=0.05),
}
FAST = ("loss 10%", "everything")  # the clean cells in make test


def route_udp(monkeypatch: pytest.MonkeyPatch, proxy: UdpProxy) -> None:
    """Our VRPN sessions' UDP data goes through `proxy`: a client names the proxy's port in its
    UDP description (the proxy relays to the client's socket), and a server sends to the
    proxy what a client's UDP description asked for (the proxy relays it there). Only the
    UDP+TCP sessions: a TCP-only one (the reference) is left alone."""
    assert proxy.address is not None
    front = proxy.address

    class Routed(VrpnSession):
        def __init__(self, role: Role, *, udp_inbound: Address | None = None, **kw: Any) -> None:
            if role is Role.CLIENT and udp_inbound is not None:  # the server sends to the proxy
                proxy.target = udp_inbound
                udp_inbound = (udp_inbound[0], front[1])
            super().__init__(role, udp_inbound=udp_inbound, **kw)

        def _handle_system(self, *args: Any) -> None:
            before = self.peer_udp
            super()._handle_system(*args)
            if self.role is Role.SERVER and self.peer_udp not in (before, front, None):
                proxy.target = self.peer_udp  # a server: the client's port, behind the proxy
                self.peer_udp = front

    monkeypatch.setattr(services, "VrpnSession", Routed)
    monkeypatch.setattr(vrpn_server, "VrpnSession", Routed)


class Poses:
    """The pose reports a source delivered, in order: (sender, sensor) -> [(time, pose)]."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.seen: dict[tuple[str, int], list[tuple[float, tuple[float, ...]]]] = {}
        deliver = source.deliver

        def watched(events: Sequence[object], now: float) -> None:
            for e in events:
                if isinstance(e, TrackerReports) and e.kind == POSE:
                    for sensor, t, v, q in zip(
                        e.sensor.tolist(), e.time.tolist(), e.vector.tolist(),
                        e.quaternion.tolist(), strict=True,
                    ):  # fmt: skip
                        self.seen.setdefault((e.sender, sensor), []).append((t, (*v, *q)))
            deliver(events, now)

        source.deliver = watched  # type: ignore[method-assign]

    def count(self) -> int:
        return sum(map(len, self.seen.values()))

    def latest(self) -> dict[tuple[str, int], tuple[float, tuple[float, ...]]]:
        return {key: reports[-1] for key, reports in self.seen.items()}


class Cell:
    """A VRPN server, our UDP+TCP client through the proxy and a TCP-only reference client."""

    def __init__(self, gateway: Gateway, proxy: UdpProxy, faulty: Poses, reference: Poses) -> None:
        self.gateway, self.proxy, self.faulty, self.reference = gateway, proxy, faulty, reference
        self.plan = proxy.up

    async def fault(self, datagrams: int, events: int = 0) -> None:
        """Faults on for `datagrams` datagrams and until the proxy did `events` faults (lost,
        duplicated, reordered), then off; then the latest poses agree."""
        self.proxy.set(enabled=True)
        await until(lambda: self.plan.counts["received"] >= datagrams, f"{datagrams} through")
        await until_faults(events, self.plan)
        self.proxy.set(enabled=False)  # (what it held back goes now, before the next)
        after = self.plan.counts["received"] + 10
        await until(lambda: self.plan.counts["received"] >= after, "10 clean datagrams after")

        def agreed() -> bool:
            latest = self.faulty.latest()
            return bool(latest) and latest == {
                key: pose for key, pose in self.reference.latest().items() if key in latest
            }

        await until(agreed, lambda: f"the same latest poses: {self.faulty.latest()} vs "
                    f"{self.reference.latest()}", 10)  # fmt: skip

    def status(self) -> Any:
        name = self.faulty.source.name
        return next(s for s in self.gateway.status() if s.name == name)


@asynccontextmanager
async def cell(
    monkeypatch: pytest.MonkeyPatch, faults: DatagramFaults, port: int
) -> AsyncIterator[Cell]:
    """Our two clients of the VRPN server at `port`, in a gateway (see `Cell`)."""
    plan = DatagramPlan(faults, seed=37, enabled=False)
    async with UdpProxy(("127.0.0.1", 0), up=plan) as proxy:
        route_udp(monkeypatch, proxy)
        gateway = Gateway()
        faulty = open_source(f"vrpn://Tracker0@127.0.0.1:{port}")
        reference = open_source(f"vrpn+tcp://Tracker0@127.0.0.1:{port}")
        watched = Cell(gateway, proxy, Poses(faulty), Poses(reference))
        gateway.add(faulty).add(reference)
        run = asyncio.create_task(gateway.run())
        try:
            await until(lambda: watched.faulty.count() > 30, "poses through the proxy", 20)
            yield watched
        finally:
            gateway.stop()
            await asyncio.gather(run, return_exceptions=True)


@asynccontextmanager
async def our_sim() -> AsyncIterator[int]:
    async with vrpn_sim(SimOptions(port=0, count=2, rate=RATE)) as (_, sim):
        assert sim.address is not None
        yield sim.address[1]


@asynccontextmanager
async def mainline_server(tmp_path: Path) -> AsyncIterator[int]:
    config = tmp_path / "vrpn.cfg"
    config.write_text(f"vrpn_Tracker_Spin\tTracker0\t2\t{RATE}  0.0 0.0 1.0  0.5\n")
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        str(SERVER), "-f", str(config), "-NIC", "127.0.0.1", str(port),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await asyncio.sleep(0.3)
        yield port
    finally:
        process.terminate()
        await process.wait()


def check_clean(run: Cell, name: str) -> None:
    """No report the server did not send, none older than one taken before it, and the copies
    and late datagrams dropped counted exactly."""
    sent = {key: set(reports) for key, reports in run.reference.seen.items()}
    for key, reports in run.faulty.seen.items():
        first = min(t for t, _ in run.reference.seen[key])  # (the reference connects later)
        invented = [r for r in reports if r[0] >= first and r not in sent[key]]
        assert not invented, f"{name}: {key} took reports the server did not send: {invented[:3]}"
        times = [t for t, _ in reports]
        back = [(a, b) for a, b in pairwise(times) if b <= a]
        assert not back, f"{name}: {key} went back in time (a copy or a late report): {back[:3]}"
    did, status = run.plan.counts, run.status()
    assert (status.duplicated, status.reordered) == (did["duplicated"], did["reordered"]), did
    assert status.errors == 0
    console = Console(width=200, record=True)
    console.print(status_table(status_message([status])))
    shown = console.export_text()  # `robowire status`'s wire column
    for kind, short in (("duplicated", "dup"), ("reordered", "reord")):
        assert (f"{short} {did[kind]:,}" in shown) == (did[kind] > 0), shown


@pytest.mark.parametrize("name", CLEAN if FULL else FAST)
@pytest.mark.timeout(90 + CYCLES / 5)
async def test_our_client_of_our_server_over_udp(name: str, monkeypatch: pytest.MonkeyPatch):
    """`ROBOWIRE_FAULT_CYCLES=N`: "everything" until the proxy did N faults, then flat."""
    cycles = CYCLES if name == "everything" else 1
    async with our_sim() as port, cell(monkeypatch, CLEAN[name], port) as run:
        fds, rss = open_fds(), resident()
        await run.fault(DATAGRAMS, cycles)
        if cycles > 1:  # (the poses both clients took are kept to compare: a few MiB)
            assert_flat(fds, rss, f"vrpn udp {name}: {dict(run.plan.counts)}")
        check_clean(run, name)
        assert max(run.plan.counts[k] for k in ("lost", "duplicated", "reordered")) > 0
        print(f"\nvrpn udp {name}: {dict(run.plan.counts)}")


@needs_server
@pytest.mark.parametrize("name", CLEAN if FULL else ("everything",))
async def test_our_client_of_the_mainline_server_over_udp(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with mainline_server(tmp_path) as port, cell(monkeypatch, CLEAN[name], port) as run:
        await run.fault(DATAGRAMS)
        check_clean(run, name)
        print(f"\nvrpn_server udp {name}: {dict(run.plan.counts)}")


@pytest.mark.parametrize("name", DAMAGE)
@pytest.mark.parametrize("server", ["ours", "vrpn_server"] if FULL else ["ours"])
async def test_damaged_datagrams_are_dropped_as_bad_or_taken_as_they_say(
    name: str, server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if server == "vrpn_server" and not SERVER.is_file():
        pytest.skip(f"no mainline vrpn_server at {SERVER}")  # (as `needs_server` says)
    serving = our_sim() if server == "ours" else mainline_server(tmp_path)
    async with serving as port, cell(monkeypatch, DAMAGE[name], port) as run:
        await run.fault(DATAGRAMS)
        did, status = run.plan.counts, run.status()
    damaged = did["truncated"] + did["flipped"]
    assert damaged > 10
    assert status.errors <= damaged and status.duplicated + status.reordered <= did["flipped"]
    if did["truncated"]:  # cut at a random byte: between two messages only now and then
        assert status.errors >= did["truncated"] // 2
    assert run.faulty.source.connections == 1  # a bad datagram is dropped, not the connection
    print(f"\n{server} udp {name}: {dict(did)}; errors {status.errors}")


# -- the order rule, sans I/O: datagrams of 3 messages each, numbered by their first ----------


@pytest.mark.parametrize("name", CLEAN)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_copies_and_late_datagrams_dropped_are_what_the_plan_did(name: str, seed: int):
    plan = DatagramPlan(CLEAN[name], seed=seed)
    came = through(plan, 3000, step=3)
    order = DatagramOrder()
    taken = [n for n in came if order.take(n)]
    assert taken == sorted(set(taken))  # never one older than one taken, never twice
    did = plan.counts
    assert (order.duplicated, order.reordered) == (did["duplicated"], did["reordered"]), name
    # read in batches (as a wake-up's datagrams): `take_run` takes an in-order batch at once,
    # else each is taken one by one; the same datagrams taken, the same counts
    batched, reads = DatagramOrder(), [came[i : i + 7] for i in range(0, len(came), 7)]
    again = []
    for read in reads:
        again += read if batched.take_run(read) else [n for n in read if batched.take(n)]
    assert again == taken
    assert (batched.duplicated, batched.reordered) == (order.duplicated, order.reordered)


def test_a_number_damaged_far_ahead_is_not_taken_and_one_a_little_ahead_is_resynced():
    order = DatagramOrder()
    numbers = [0, 3, 6, 6 + (1 << 20), 9, 12]  # a flipped high bit: a leap nobody follows
    assert [order.take(n) for n in numbers] == [True, True, True, False, True, True]
    order = DatagramOrder(resync=8)
    late = [order.take(n) for n in [15, 18, 18 + 4096, *range(21, 21 + 3 * 9, 3)]]
    # a flipped bit 12 (4096 ahead): taken; the next 7 are behind it, dropped; the 8th resyncs
    assert late == [True, True, True, *[False] * 7, True, True]
    assert order.newest == 21 + 3 * 8


def test_a_sender_that_numbers_nothing_has_every_datagram_taken() -> None:
    order = DatagramOrder()  # VRPN reads no seq: another implementation may write 0 in all
    assert all(order.take(0) for _ in range(100))
    assert (order.duplicated, order.reordered) == (0, 0)


def test_a_sender_that_numbers_each_device_from_0_has_every_datagram_taken_soon() -> None:
    """Not VRPN's rule (one counter a channel), but a sender could: two trackers' datagrams,
    each numbered from 0, frame after frame: copies, one after another; after 64 in a row,
    every datagram is taken as it comes."""
    order = DatagramOrder()
    frame = [*range(0, 30 * 16, 16), *range(0, 30 * 16, 16)]
    taken = [order.take(n) for _ in range(3) for n in frame]
    assert order.unordered and all(taken[-len(frame) :])
    assert order.take_run(frame)
    order = DatagramOrder()  # numbers that start again lower, and again: 3 restarts
    blocks = [range(base, base + 9 * 16, 16) for base in (4000, 3000, 2000, 1000, 100)]
    assert [order.take(n) for n in blocks[0]] == [True] * 9
    for block in blocks[1:4]:
        assert [order.take(n) for n in block] == [False] * 7 + [True, True]
    assert order.unordered and all(order.take(n) for n in blocks[4])


def test_a_sequence_wraps_at_2_to_the_32() -> None:
    order = DatagramOrder()
    numbers = [(1 << 32) - 6, (1 << 32) - 3, 0, 3]
    assert all(order.take(n) for n in numbers)
    assert not order.take((1 << 32) - 3)  # a copy across the wrap
    assert order.duplicated == 1


def through(plan: DatagramPlan, count: int, step: int) -> list[int]:
    """Datagrams numbered 0, step, 2 step, ... through `plan` (faults on after the first 20,
    held ones released before the last 20): their numbers in the order they came out."""
    out: list[bytes] = []
    now = 0.0
    for n in range(count):
        plan.enabled = 20 <= n < count - 20
        if n == count - 20:
            plan.release_all(now)
        plan.feed((n * step).to_bytes(4, "big"), now)
        out += plan.due(now)
        now += 0.001
    out += plan.due(now + 1.0)
    return [int.from_bytes(d, "big") for d in out]


@needs_client
@pytest.mark.parametrize("name", ["everything", "truncate 5%"] if FULL else ["everything"])
async def test_the_mainline_client_of_our_server_over_udp(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vrpn_print_devices (UDP+TCP) reading our simulator, its UDP through the proxy: it prints
    poses again within 2 s of the fault's end. (A truncated datagram makes the mainline client
    drop the whole connection, as its source says, and connect again about 2 s later.)"""
    faults = {**CLEAN, **DAMAGE}[name]
    plan = DatagramPlan(faults, seed=37, enabled=False)
    lines: list[float] = []  # when each pose line came

    def enough() -> bool:  # (each truncation costs the mainline client a new connection, ~2 s)
        return plan.counts["received"] >= DATAGRAMS or plan.counts["truncated"] >= 5

    async with UdpProxy(("127.0.0.1", 0), up=plan) as proxy, our_sim() as port:
        route_udp(monkeypatch, proxy)
        client = start_print_devices(f"Tracker0@127.0.0.1:{port}")
        reader = threading.Thread(target=poses, args=(client, lines), daemon=True)
        reader.start()
        try:
            await until(lambda: plan.counts["received"] > 30, "datagrams through", 20)
            proxy.set(enabled=True)
            await until(enough, lambda: f"the faults: {dict(plan.counts)}, {len(lines)} poses", 60)
            proxy.set(enabled=False)
            ended = time.monotonic()
            await until(lambda: lines[-1] > ended, "poses again", 20)
            took = min(t for t in lines if t > ended) - ended
        finally:
            out = stop_print_devices(client)
    print(f"\nvrpn_print_devices udp {name}: {dict(plan.counts)}; poses again in {took:.2f} s")
    assert took <= 2.0, out[-2000:]


def poses(client: Any, lines: list[float]) -> None:
    assert client.stdout is not None
    for line in client.stdout:
        if "pos (" in line:
            lines.append(time.monotonic())
