"""Churn: peers that come and go by the thousand leak nothing and hurt no one else.

Servers: against every TCP server role (the VRPN, UgCS VSM and SpyGlass servers, each as a
simulator and as a gateway's sink, and the web viewer's WebSocket), `CYCLES` connections
(1,000 by default; `ROBOWIRE_CHURN_CYCLES=N` for more or fewer) open and end, a mix of
clean closes, resets (SO_LINGER 0: an RST, no FIN), half handshakes (the first half of what
the peer's client would send first) and garbage (seeded random bytes), `BATCH` at a time.
Meanwhile one long-lived healthy client of each server keeps receiving: it never reconnects,
and its count keeps growing in every server's churn phase (the VRPN simulator's client: as
many reports per frame the simulator sent as before the churn).

Clients: each client role (VRPN over TCP, the UgCS UCS, the SpyGlass source) reconnects to a
peer restarted `RESTARTS` times on the same port (`ROBOWIRE_CHURN_RESTARTS=N`), and its
messages flow again each time.

Both measure what is left after the churn, against a baseline taken after a warm-up:
open file descriptors (/proc/self/fd), asyncio tasks, and the memory allocated since the
warm-up and still alive after a full collection (tracemalloc; for the restarts, over the
second half only: the live peers of the first half were allocated after the baseline too).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import random
import socket
import struct
import tracemalloc
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from robowire.gateway import Gateway, open_sim, open_sink, open_source
from robowire.protocols.spyglass.services import SpyglassSim, SpyglassSink
from robowire.protocols.ugcs.codec import frame
from robowire.protocols.ugcs.services import FREEZE_AFTER, UgcsSim, UgcsSink
from robowire.protocols.vrpn.codec import encode_cookie
from robowire.protocols.vrpn.services import VrpnSim, VrpnSink
from robowire.service import Service, SimOptions, Source
from robowire.viewer.server import SUBPROTOCOL, ViewerSink
from support import free_port, open_fds, until

pytestmark = pytest.mark.timeout(300)

CYCLES = int(os.environ.get("ROBOWIRE_CHURN_CYCLES", "1000"))  # per server
BATCH = 10  # churning connections open at once
WARMUP = 50  # cycles per server before the baseline is taken
RESTARTS = int(os.environ.get("ROBOWIRE_CHURN_RESTARTS", "20"))
DEADLINE = 60.0
FD_SLACK = 2  # descriptors: a lazily opened file (e.g. /dev/urandom) is not a leak
TASK_SLACK = 0
MEMORY_BOUND = 5 << 20  # bytes allocated after the warm-up and still alive at the end
MODES = ("clean", "reset", "half", "garbage")
SILENT = 2  # the UgCS simulator's client: a parked fleet sends nothing after its first
# seconds (telemetry goes on change only), so that client is checked by its connection only


def quiet_logs() -> None:
    logging.getLogger("robowire").setLevel(logging.ERROR)
    logging.getLogger("websockets").setLevel(logging.ERROR)


@pytest.fixture(autouse=True)
def restore_logs() -> Iterator[None]:
    levels = {name: logging.getLogger(name).level for name in ("robowire", "websockets")}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


@contextmanager
def traced() -> Iterator[Callable[[], int]]:
    """Memory allocated since entering and still alive: a function to call at the end
    (after a full collection: garbage the collector has not reached yet is no leak)."""

    def alive() -> int:
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        yield alive
    finally:
        tracemalloc.stop()


@dataclass
class Target:
    """A server under churn: its port, what its client says first, how many peers it has."""

    name: str
    service: Service
    hello: bytes
    peers: Callable[[], int]

    @property
    def port(self) -> int:
        assert self.service.address is not None
        return self.service.address[1]


async def churn_once(port: int, mode: str, hello: bytes, rng: random.Random) -> None:
    """One connection that opens and ends in `mode`."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:  # a refused connection is a failure of the server
        raise AssertionError(f"port {port}: cannot connect ({exc})") from None
    if mode == "half":
        writer.write(hello[: max(1, len(hello) // 2)])
    elif mode == "garbage":
        writer.write(rng.randbytes(rng.randint(1, 4096)))
    if mode == "reset":
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        return
    await asyncio.sleep(0)
    writer.close()
    with contextlib.suppress(OSError):  # the server reset first (it refused the garbage)
        await writer.wait_closed()


async def churn(target: Target, cycles: int, seed: int) -> None:
    rng = random.Random(seed)
    for start in range(0, cycles, BATCH):
        await asyncio.gather(
            *(
                churn_once(target.port, MODES[i % len(MODES)], target.hello, rng)
                for i in range(start, min(cycles, start + BATCH))
            )
        )


class HealthyBrowser:
    """A web viewer client that says `ready` and reads every frame, all along."""

    def __init__(self, port: int) -> None:
        self.url = f"ws://127.0.0.1:{port}/ws"
        self.frames = 0
        self.connections = 0

    async def run(self) -> None:
        async with connect(self.url, subprotocols=[Subprotocol(SUBPROTOCOL)]) as ws:
            self.connections += 1
            while True:
                await ws.send('{"type": "ready"}')
                while not isinstance(await ws.recv(), bytes):
                    pass
                self.frames += 1


async def test_churn_against_every_tcp_server_leaks_nothing_and_spares_the_healthy_client() -> None:
    quiet_logs()  # thousands of "bad cookie" lines would be kept by pytest's log capture
    vrpn_port, ugcs_port, spyglass_port = free_port(), free_port(), free_port()
    servers = Gateway()
    vrpn_sim = open_sim("vrpn", SimOptions(port=vrpn_port, count=4, rate=100))
    ugcs_sim = open_sim("ugcs", SimOptions(port=ugcs_port, count=5, rate=5))
    spyglass_sim = open_sim("spyglass", SimOptions(port=spyglass_port, count=20))
    assert isinstance(vrpn_sim, VrpnSim) and isinstance(ugcs_sim, UgcsSim)
    assert isinstance(spyglass_sim, SpyglassSim)
    feed = open_source(f"vrpn+tcp://Tracker0@127.0.0.1:{vrpn_port}")  # what the sinks serve
    vrpn_sink = open_sink("vrpn://127.0.0.1:0?tracker=Swarm")
    ugcs_sink = open_sink("ugcs://127.0.0.1:0")
    spyglass_sink = open_sink("spyglass://127.0.0.1:0")
    viewer = ViewerSink("127.0.0.1", 0)
    assert isinstance(vrpn_sink, VrpnSink) and isinstance(ugcs_sink, UgcsSink)
    assert isinstance(spyglass_sink, SpyglassSink)
    servers.add(vrpn_sim, ugcs_sim, spyglass_sim, feed, vrpn_sink, ugcs_sink, spyglass_sink)
    servers.add(viewer)
    run = asyncio.create_task(servers.run())
    clients = Gateway()
    client_run: asyncio.Task[None] | None = None
    browser_task: asyncio.Task[None] | None = None
    try:
        sinks: list[Service] = [vrpn_sink, ugcs_sink, spyglass_sink, viewer]
        await until(lambda: all(s.address is not None for s in sinks), "the sinks listen")
        await until(lambda: feed.stats.messages_in > 0, "the sinks' source receives")
        cookie = encode_cookie()
        vrpn_hello = cookie + b"\0" * 8
        ugcs_hello = frame(b"\x08\x01" * 40)
        ws_hello = b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n\r\n"
        targets = [  # each has one healthy peer (the sinks' source is the VRPN sim's)
            Target("VRPN sim", vrpn_sim, vrpn_hello, lambda: len(vrpn_sim.server.links) - 1),
            Target("VRPN sink", vrpn_sink, vrpn_hello, lambda: len(vrpn_sink.server.links)),
            Target("UgCS sim", ugcs_sim, ugcs_hello, lambda: len(ugcs_sim.server.drivers)),
            Target("UgCS sink", ugcs_sink, ugcs_hello, lambda: len(ugcs_sink.server.drivers)),
            Target("SpyGlass sim", spyglass_sim, b"\0", lambda: len(spyglass_sim.viewers)),
            Target("SpyGlass sink", spyglass_sink, b"\0", lambda: len(spyglass_sink.viewers)),
            Target("viewer", viewer, ws_hello, lambda: len(viewer.clients)),
        ]
        healthy: list[Source] = [
            open_source(f"vrpn+tcp://Tracker0@127.0.0.1:{vrpn_port}"),
            open_source(f"vrpn+tcp://Swarm@127.0.0.1:{targets[1].port}"),
            open_source(f"ugcs://127.0.0.1:{ugcs_port}"),
            open_source(f"ugcs://127.0.0.1:{targets[3].port}"),
            open_source(f"spyglass://127.0.0.1:{spyglass_port}"),
            open_source(f"spyglass://127.0.0.1:{targets[5].port}"),
        ]
        clients.add(*healthy)
        client_run = asyncio.create_task(clients.run())
        browser = HealthyBrowser(targets[6].port)
        browser_task = asyncio.create_task(browser.run())

        def counts() -> list[int]:
            return [s.stats.messages_in for s in healthy] + [browser.frames]

        def connections() -> list[int]:
            return [s.connections for s in healthy] + [browser.connections]

        await until(lambda: all(c > 0 for c in counts()), "every healthy client receives")
        for target in targets:
            await until(lambda t=target: t.peers() == 1, f"{target.name}: one healthy peer")

        async def per_frame(seconds: float) -> float:
            """The VRPN simulator's healthy client: reports received per frame sent."""
            m0, f0 = healthy[0].stats.messages_in, vrpn_sim.frames
            await asyncio.sleep(seconds)
            m1, f1 = healthy[0].stats.messages_in, vrpn_sim.frames
            assert f1 > f0
            return (m1 - m0) / (f1 - f0)

        quiet = await per_frame(1.0)
        for seed, target in enumerate(targets):  # the warm-up: first allocations, caches
            await churn(target, WARMUP, seed)
        for target in targets:
            await until(lambda t=target: t.peers() == 1, f"{target.name}: warm-up over")
        await asyncio.sleep(0.5)
        fds, tasks, joined = open_fds(), len(asyncio.all_tasks()), connections()

        with traced() as allocated:
            for seed, target in enumerate(targets, 100):
                before_counts, m0, f0 = counts(), healthy[0].stats.messages_in, vrpn_sim.frames
                await churn(target, CYCLES, seed)
                await asyncio.sleep(0.3)  # the healthy clients get what was sent meanwhile
                growing = [b > a for a, b in zip(before_counts, counts(), strict=True)]
                del growing[SILENT]
                assert all(growing), f"{target.name}: a healthy client stalled: {growing}"
                busy = (healthy[0].stats.messages_in - m0) / (vrpn_sim.frames - f0)
                assert busy >= 0.9 * quiet, f"{target.name}: {busy:.1f} < {quiet:.1f}/frame"
                await until(lambda t=target: t.peers() == 1, f"{target.name}: churn peers gone")
            await until(lambda: open_fds() <= fds + FD_SLACK, f"descriptors back to {fds}")
            await until(lambda: len(asyncio.all_tasks()) <= tasks + TASK_SLACK, "tasks back")
            grown = allocated()
        assert connections() == joined, "a healthy client was disconnected"
        assert not servers.failures and not clients.failures
        print(
            f"{CYCLES} cycles x {len(targets)} servers: fds {fds} -> {open_fds()}, tasks "
            f"{tasks} -> {len(asyncio.all_tasks())}, memory +{grown / 2**20:.2f} MiB; VRPN "
            f"reports per frame {quiet:.1f} quiet"
        )
        assert grown < MEMORY_BOUND, f"{grown / 2**20:.1f} MiB still allocated after churn"
    finally:
        if browser_task is not None:
            browser_task.cancel()
            await asyncio.gather(browser_task, return_exceptions=True)
        clients.stop()
        if client_run is not None:
            await asyncio.wait_for(client_run, DEADLINE)
        servers.stop()
        await asyncio.wait_for(run, DEADLINE)


@dataclass
class Restarting:
    """A source and a simulator on a fixed port that is stopped and started again."""

    protocol: str
    url: str  # {port}
    count: int = 3  # devices of the simulator
    port: int = 0
    source: Source | None = None
    sim_gateway: Gateway | None = None
    sim_task: asyncio.Task[None] | None = None

    async def start_sim(self, seed: int) -> None:
        options = SimOptions(port=self.port, count=self.count, rate=5, seed=seed)
        sim = open_sim(self.protocol, options)
        self.sim_gateway = Gateway().add(sim)
        task = self.sim_task = asyncio.create_task(self.sim_gateway.run())
        await until(lambda: sim.ready.is_set() or task.done(), f"{self.protocol} sim starts")
        assert not task.done(), self.sim_gateway.failures

    async def stop_sim(self) -> None:
        if self.sim_gateway is not None and self.sim_task is not None:
            self.sim_gateway.stop()
            await asyncio.wait_for(self.sim_task, DEADLINE)
        self.sim_gateway = self.sim_task = None

    async def restart(self, times: int) -> None:
        """Stop and start the peer `times` times; messages flow again after each."""
        source = self.source
        assert source is not None
        for seed in range(1, times + 1):
            joined = source.connections
            await self.stop_sim()
            before = source.stats.messages_in
            await self.start_sim(seed)
            await until(
                lambda b=before, j=joined: (
                    source.stats.messages_in > b + 5 and source.connections > j
                ),
                f"{self.protocol}: back after restart {seed}",
            )


async def test_every_client_role_reconnects_to_a_restarting_peer_and_leaks_nothing() -> None:
    cases = [
        Restarting("vrpn", "vrpn+tcp://Tracker0@127.0.0.1:{port}?retry=0.1"),
        # a fleet over FREEZE_AFTER: the source freezes its registrations (gc.freeze)
        Restarting("ugcs", "ugcs://127.0.0.1:{port}", count=FREEZE_AFTER + 20),
        Restarting("spyglass", "spyglass://127.0.0.1:{port}?retry=0.1"),
    ]
    quiet_logs()
    gateway = Gateway()
    for case in cases:
        case.port = free_port()
        case.source = open_source(case.url.format(port=case.port))
        gateway.add(case.source)
    run = asyncio.create_task(gateway.run())
    try:
        for case in cases:
            await case.start_sim(0)
        await until(
            lambda: all(c.source is not None and c.source.stats.messages_in > 5 for c in cases),
            "every source receives",
        )
        await asyncio.gather(*(case.restart(2) for case in cases))  # the warm-up
        await asyncio.sleep(0.3)
        fds, tasks = open_fds(), len(asyncio.all_tasks())
        with traced() as allocated:  # what the first half's peers left is alive: the
            # growth is measured over the second half (a leak grows in both)
            await asyncio.gather(*(case.restart(RESTARTS // 2) for case in cases))
            halfway = allocated()
            await asyncio.gather(*(case.restart(RESTARTS - RESTARTS // 2) for case in cases))
            await asyncio.sleep(0.3)
            await until(lambda: open_fds() <= fds + FD_SLACK, f"descriptors back to {fds}")
            await until(lambda: len(asyncio.all_tasks()) <= tasks + TASK_SLACK, "tasks back")
            grown = allocated() - halfway
        states = {s.name: s.state for s in gateway.status()}
        assert set(states.values()) == {"connected"}, states
        assert not gateway.failures
        print(
            f"{RESTARTS} restarts x {len(cases)} client roles: fds {fds} -> {open_fds()}, "
            f"tasks {tasks} -> {len(asyncio.all_tasks())}, memory +{grown / 2**20:.2f} MiB over "
            f"the last {RESTARTS - RESTARTS // 2} restarts"
        )
        assert grown < MEMORY_BOUND, f"{grown / 2**20:.1f} MiB still allocated after restarts"
    finally:
        for case in cases:
            await case.stop_sim()
        gateway.stop()
        await asyncio.wait_for(run, DEADLINE)


async def test_a_stopped_ugcs_sim_and_a_lost_ucs_connection_leave_nothing_frozen() -> None:
    """Regression (found by the restart churn: 45 kB more per restart): the UgCS simulator
    and the UCS source `gc.freeze()` their big registrations, and frozen objects in a
    reference cycle were never freed, a whole fleet per restart. Once the simulator and the
    connection have ended, the simulator is collectable and nothing is frozen."""
    quiet_logs()
    port = free_port()
    sim = open_sim("ugcs", SimOptions(port=port, count=FREEZE_AFTER + 5))
    source = open_source(f"ugcs://127.0.0.1:{port}")
    sims, sources = Gateway().add(sim), Gateway().add(source)
    sim_run = asyncio.create_task(sims.run())
    await until(sim.ready.is_set, "the sim listens")
    source_run = asyncio.create_task(sources.run())
    try:
        await until(lambda: len(sources.world.tables.get(source.name, ())) > FREEZE_AFTER, "fleet")
        assert gc.get_freeze_count() > 0  # what the fleets' registrations did
        sims.stop()
        await asyncio.wait_for(sim_run, DEADLINE)
        await until(lambda: source.stats.messages_in > 0 and not source.sessions, "lost")
        assert gc.get_freeze_count() == 0
        gone = weakref.ref(sim)
        del sim, sims
        gc.collect()
        assert gone() is None, "the stopped simulator is still in memory"
    finally:
        sources.stop()
        await asyncio.wait_for(source_run, DEADLINE)
