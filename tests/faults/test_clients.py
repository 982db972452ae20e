"""Bad clients that stay: one that sends garbage all along, one that connects and says nothing
and reads nothing, against every TCP server role of the gateway (`serve vrpn://`,
`serve ugcs://`, `serve spyglass://`, the web viewer's WebSocket, `serve foxglove://`), while
each server's healthy client is measured.

`tests/reliability/test_churn.py` covers clients that come and go (garbage and half handshakes
included, by the thousand); `tests/core/test_stalled.py` clients that stop reading after a
good start (VRPN, SpyGlass, the viewer, Foxglove). Here the bad client stays:

* garbage: random bytes, 4 KiB every 10 ms, from its first byte (`raw`), or after the
  protocol's own greeting, as its framed messages (`framed`: a VRPN cookie then random
  messages; UgCS length-prefixed random protobuf; WebSocket messages of random text and
  bytes);
* silent: connects, sends nothing, never reads (a 4 KiB receive window);
* the UgCS sink's UCS that stops reading once its vehicles are registered (its connection
  through the fault proxy, whose relay stops reading the VSM: `test_stalled.py` has not this
  one).

Checks: the healthy clients keep receiving all along (their counts grow, they never reconnect;
the VRPN sink's client at its rate, reports per frame of the feed), the bad client is dropped
(when, said) or held bounded (what it costs: its unsent bytes at the server), and once the bad
clients have gone every server has its one healthy client and the descriptors are back.
`ROBOWIRE_FAULT_MATRIX=full`: each phase 30 s instead of 3. `ROBOWIRE_FAULT_CYCLES=N` (N > 1):
then N more bad clients come and go at every server (raw garbage, framed garbage, silent in
turn, `BATCH` at a time, as test_churn.py), the healthy ones unaffected, descriptors back and
resident memory flat (measured after a first N/2: what a burst of clients allocates once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import select
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from reliability.test_churn import HealthyBrowser, churn_once
from robowire.gateway import Gateway, open_sim, open_sink, open_source
from robowire.protocols.spyglass.services import SpyglassSink
from robowire.protocols.ugcs.codec import frame
from robowire.protocols.ugcs.services import UcsSource, UgcsSink
from robowire.protocols.vrpn.codec import encode_cookie
from robowire.protocols.vrpn.services import VrpnSim, VrpnSink
from robowire.service import Service, SimOptions, Source
from robowire.sinks.foxglove import FoxgloveSink
from robowire.viewer.server import SUBPROTOCOL, ViewerSink
from support import free_port, open_fds, until

from .cycles import CYCLES, RSS_BOUND, resident
from .proxy import TcpProxy

FULL = os.environ.get("ROBOWIRE_FAULT_MATRIX") == "full"
PHASE = 30.0 if FULL else 3.0  # seconds a bad client stays
CHUNK = 4096  # bytes of garbage a send
HANDSHAKE = 10.0  # seconds a server waits for a client's greeting
STREAM_BOUND = 2 << 20  # bytes: SpyGlass skips a peer past 1 MiB unsent (test_stalled.py)
BAD_CLIENTS = 16  # raw, framed, silent for each of the 5 servers, and the stalled UCS
EVERY = 0.01  # seconds between sends
BATCH = 10  # bad clients coming and going at once (ROBOWIRE_FAULT_CYCLES)
pytestmark = pytest.mark.timeout(240 + 20 * PHASE + (CYCLES if CYCLES > 1 else 0))


@dataclass
class Bad:
    """What a bad client saw: bytes it sent, and when (after it connected) the server
    dropped it, if it did."""

    sent: int = 0
    dropped: float | None = None
    started: float = field(default_factory=time.monotonic)

    def drop(self) -> None:
        if self.dropped is None:
            self.dropped = time.monotonic() - self.started


async def garbage_stream(port: int, hello: bytes, message: Callable[[random.Random], bytes],
                         bad: Bad, seed: int) -> None:  # fmt: skip
    """A TCP client that sends `hello`, then `message`s of garbage until dropped."""
    rng = random.Random(seed)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    drain = asyncio.create_task(_discard(reader, bad))  # (it reads: only its bytes are bad)
    try:
        writer.write(hello)
        while not drain.done():
            data = message(rng)
            writer.write(data)
            bad.sent += len(data)
            await writer.drain()
            await asyncio.sleep(EVERY)
    except OSError:
        bad.drop()
    finally:
        drain.cancel()
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _discard(reader: asyncio.StreamReader, bad: Bad) -> None:
    with contextlib.suppress(OSError):
        while await reader.read(65536):
            pass
    bad.drop()


async def garbage_websocket(url: str, subprotocol: str, bad: Bad, seed: int) -> None:
    """A WebSocket client that sends random text and binary messages until dropped."""
    rng = random.Random(seed)
    try:
        async with connect(url, subprotocols=[Subprotocol(subprotocol)], max_size=None) as ws:
            drain = asyncio.create_task(_discard_ws(ws))
            try:
                while not drain.done():
                    data = rng.randbytes(rng.randint(1, CHUNK))
                    await ws.send(data if rng.random() < 0.5 else data.hex()[: len(data)])
                    bad.sent += len(data)
                    await asyncio.sleep(EVERY)
            finally:
                drain.cancel()
    except (ConnectionClosed, OSError):
        pass
    bad.drop()


async def _discard_ws(ws: Any) -> None:
    with contextlib.suppress(ConnectionClosed):
        async for _ in ws:
            pass


def silent_socket(port: int) -> socket.socket:
    """A connected client that will send nothing and read nothing (a 4 KiB window)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    sock.connect_ex(("127.0.0.1", port))
    return sock


async def watch_silent(sock: socket.socket, bad: Bad) -> None:
    """Note when the server drops a silent client."""
    while not closed_by_server(sock):
        await asyncio.sleep(0.1)
    bad.drop()


def closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed (FIN or RST) a silent client's connection; nothing is
    read (POLLRDHUP: the peer's end, seen behind unread data)."""
    poller = select.poll()
    poller.register(sock, select.POLLRDHUP)
    ended = select.POLLRDHUP | select.POLLHUP | select.POLLERR
    return any(events & ended for _, events in poller.poll(0))


async def bad_once(target: Server, mode: str, rng: random.Random) -> None:
    """One bad client that comes and goes: `raw` garbage, `framed` garbage (one message in the
    server's framing), or `silent` (connects, says nothing, leaves)."""
    if mode == "framed" and target.websocket is not None:
        path = "/ws" if isinstance(target.service, ViewerSink) else ""
        url = f"ws://127.0.0.1:{target.port}{path}"
        with contextlib.suppress(ConnectionClosed, OSError):  # (dropped before its close)
            async with connect(url, subprotocols=[Subprotocol(target.websocket)]) as ws:
                await ws.send(_random(rng))
        return
    if mode != "framed":  # test_churn.py's garbage (random bytes) and clean (nothing said)
        await churn_once(target.port, "garbage" if mode == "raw" else "clean", b"", rng)
        return
    _, writer = await asyncio.open_connection("127.0.0.1", target.port)
    writer.write(target.hello + target.message(rng))
    writer.close()
    with contextlib.suppress(OSError):  # the server reset first (it refused the garbage)
        await writer.wait_closed()


async def bad_churn(target: Server, cycles: int, seed: int) -> None:
    """`cycles` bad clients, `BATCH` at a time, the three kinds in turn."""
    rng = random.Random(seed)
    modes = ("raw", "framed", "silent")
    for start in range(0, cycles, BATCH):
        batch = range(start, min(cycles, start + BATCH))
        await asyncio.gather(*(bad_once(target, modes[i % 3], rng) for i in batch))


class HealthyFoxglove:
    """A Foxglove client subscribed to every channel, counting the messages it reads."""

    def __init__(self, port: int) -> None:
        self.url = f"ws://127.0.0.1:{port}"
        self.messages = 0
        self.connections = 0

    async def run(self) -> None:
        async with connect(
            self.url, subprotocols=[Subprotocol("foxglove.sdk.v1")], max_size=None
        ) as ws:
            self.connections += 1
            async for message in ws:
                if isinstance(message, bytes):
                    self.messages += 1
                    continue
                parsed = json.loads(message)
                if parsed["op"] == "advertise":
                    subscriptions = [
                        {"id": c["id"], "channelId": c["id"]} for c in parsed["channels"]
                    ]
                    await ws.send(json.dumps({"op": "subscribe", "subscriptions": subscriptions}))


@dataclass
class Server:
    """A server role under bad clients: how its clients greet it and frame their messages,
    and how many clients it holds."""

    name: str
    service: Service
    hello: bytes  # what its client sends first (b"": nothing); for a WebSocket, its subprotocol
    message: Callable[[random.Random], bytes]  # one framed message of garbage
    peers: Callable[[], int] | None  # its clients now (None: it does not say)
    websocket: str | None = None  # the subprotocol, for a WebSocket server
    bad: dict[str, Bad] = field(default_factory=dict)

    @property
    def port(self) -> int:
        assert self.service.address is not None
        return self.service.address[1]


class Lines(logging.Handler):
    """Counts the robowire log lines that came, by their text's start."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _random(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(1, CHUNK))


def _vrpn_message(rng: random.Random) -> bytes:
    """A VRPN message header of a plausible length, then random bytes (VRPN frames by the
    header's length, padded to 8)."""
    body = rng.randbytes(rng.randint(0, 200))
    length = 24 + len(body)
    return struct.pack(">IIIii", length, rng.getrandbits(32), rng.getrandbits(32),
                       rng.randint(-4, 40), rng.randint(-4, 40)) + b"\0" * 4 + body + \
        b"\0" * (-length % 8)  # fmt: skip


async def test_clients_that_send_garbage_or_nothing_cost_the_healthy_ones_nothing() -> None:
    lines = Lines()
    logger = logging.getLogger("robowire")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(lines)
    sdk = logging.getLogger("foxglove")  # the Foxglove SDK's (Rust) log
    sdk_level = sdk.level
    sdk.addHandler(lines)
    logging.getLogger("websockets").setLevel(logging.ERROR)
    feed_port = free_port()
    servers = Gateway()
    feed_sim = open_sim("vrpn", SimOptions(port=feed_port, count=4, rate=100))
    assert isinstance(feed_sim, VrpnSim)
    feed = open_source(f"vrpn+tcp://Tracker0@127.0.0.1:{feed_port}")
    vrpn = open_sink("vrpn://127.0.0.1:0?tracker=Swarm")
    ugcs = open_sink("ugcs://127.0.0.1:0")
    spyglass = open_sink("spyglass://127.0.0.1:0")
    viewer = ViewerSink("127.0.0.1", 0)
    foxglove = FoxgloveSink("127.0.0.1", 0, rate=30.0)
    assert isinstance(vrpn, VrpnSink) and isinstance(ugcs, UgcsSink)
    assert isinstance(spyglass, SpyglassSink)
    servers.add(feed_sim, feed, vrpn, ugcs, spyglass, viewer, foxglove)
    run = asyncio.create_task(servers.run())
    clients = Gateway()
    client_run: asyncio.Task[None] | None = None
    tasks: list[asyncio.Task[None]] = []
    silent: list[socket.socket] = []
    try:
        sinks: list[Service] = [vrpn, ugcs, spyglass, viewer, foxglove]
        await until(lambda: all(s.address is not None for s in sinks), "the sinks listen")
        await until(lambda: feed.stats.messages_in > 0, "the sinks' source receives")
        cookie = encode_cookie()
        targets = [
            Server("VRPN", vrpn, cookie, _vrpn_message, lambda: len(vrpn.server.links)),
            Server("UgCS", ugcs, b"", lambda r: frame(_random(r)),
                   lambda: len(ugcs.server.drivers)),
            Server("SpyGlass", spyglass, b"", _random, lambda: len(spyglass.viewers)),
            Server("viewer", viewer, b"", _random, lambda: len(viewer.clients), SUBPROTOCOL),
            Server("Foxglove", foxglove, b"", _random, None, "foxglove.sdk.v1"),
        ]  # fmt: skip
        healthy: list[Source] = [
            open_source(f"vrpn+tcp://Swarm@127.0.0.1:{targets[0].port}"),
            open_source(f"ugcs://127.0.0.1:{targets[1].port}"),
            open_source(f"spyglass://127.0.0.1:{targets[2].port}"),
        ]
        clients.add(*healthy)
        client_run = asyncio.create_task(clients.run())
        browser = HealthyBrowser(targets[3].port)
        app = HealthyFoxglove(targets[4].port)
        tasks += [asyncio.create_task(browser.run()), asyncio.create_task(app.run())]

        def counts() -> list[int]:
            return [s.stats.messages_in for s in healthy] + [browser.frames, app.messages]

        def connections() -> list[int]:
            return [s.connections for s in healthy] + [browser.connections, app.connections]

        await until(lambda: all(c > 0 for c in counts()), lambda: f"healthy counts {counts()}")
        for target in targets:
            if target.peers is not None:
                await until(lambda t=target: t.peers() == 1, f"{target.name}: one healthy peer")

        async def per_frame(seconds: float) -> tuple[float, list[int]]:
            """The VRPN sink's healthy client: reports per frame of the feed; every count's
            growth."""
            c0, m0, f0 = counts(), healthy[0].stats.messages_in, feed_sim.frames
            await asyncio.sleep(seconds)
            c1, m1, f1 = counts(), healthy[0].stats.messages_in, feed_sim.frames
            return (m1 - m0) / max(1, f1 - f0), [b - a for a, b in zip(c0, c1, strict=True)]

        await asyncio.sleep(1.0)
        fds, joined = open_fds(), connections()
        quiet, quiet_growth = await per_frame(PHASE)
        del lines.lines[:]

        # a UCS that stops reading the UgCS sink once its vehicles are registered
        async with TcpProxy(("127.0.0.1", targets[1].port)) as proxy:
            assert proxy.address is not None
            stalled_ucs = open_source(f"ugcs://127.0.0.1:{proxy.address[1]}")
            assert isinstance(stalled_ucs, UcsSource)  # another UgCS server than the healthy
            stalled_ucs.peer_id ^= 1  # one: the VSM sends to the newest connection of each
            clients.add(stalled_ucs)
            await until(
                lambda: len(clients.world.tables.get(stalled_ucs.name, ())) > 0,
                "the stalled UCS has the vehicles",
            )
            proxy.pause("down")
            for seed, target in enumerate(targets):
                for mode in ("raw", "framed"):
                    bad = target.bad[mode] = Bad()
                    if target.websocket is not None and mode == "framed":
                        path = "/ws" if target.service is viewer else ""
                        url = f"ws://127.0.0.1:{target.port}{path}"
                        job = garbage_websocket(url, target.websocket, bad, seed)
                    else:
                        hello = target.hello if mode == "framed" else b""
                        make = target.message if mode == "framed" else _random
                        job = garbage_stream(target.port, hello, make, bad, seed)
                    tasks.append(asyncio.create_task(job))
                silent.append(silent_socket(target.port))
                target.bad["silent"] = Bad()
                tasks.append(asyncio.create_task(watch_silent(silent[-1], target.bad["silent"])))
            busy, growth = await per_frame(PHASE)
            streamed = max(d.write_buffer_size() for d in spyglass.viewers)
            # the silent clients of the servers that wait for a greeting are dropped after
            # 10 s (VRPN's cookie, UgCS's Register_peer, the WebSocket handshakes)
            waiting = [t.bad["silent"] for t in targets if t.service is not spyglass]
            await until(lambda: all(b.dropped is not None for b in waiting),
                        "silent clients dropped", HANDSHAKE + 5)  # fmt: skip
            unsent = max((d.write_buffer_size() for d in ugcs.server.drivers.values()), default=0)
            print(f"\nhealthy growth in {PHASE:.0f} s: quiet {quiet_growth}, with bad clients "
                  f"{growth}; VRPN reports per frame {quiet:.1f} -> {busy:.1f}")  # fmt: skip
            for target in targets:
                said = ", ".join(
                    f"{mode} " + (f"dropped after {b.dropped:.2f} s" if b.dropped is not None
                                  else f"held (sent {b.sent:,} bytes)")
                    for mode, b in target.bad.items()
                )  # fmt: skip
                print(f"{target.name}: {said}")
            said = list(lines.lines)
            errors = {s.name: s.errors for s in servers.status() if s.role == "sink"}
            print(f"the sinks' errors: {errors}")
            print(f"SpyGlass's silent client: {streamed:,} bytes unsent at the sink; "
                  f"UgCS sink's stalled UCS: {unsent:,} bytes unsent at the sink; "
                  f"{len(said)} log lines: {sorted(set(said))[:20]}")  # fmt: skip
        for sock in silent:
            sock.close()
        for task in tasks[2:]:
            task.cancel()
        await asyncio.gather(*tasks[2:], return_exceptions=True)
        if CYCLES > 1:  # bad clients by the thousand, coming and going
            logger.setLevel(logging.ERROR)  # (pytest keeps every log record of a test: lines
            sdk.setLevel(logging.CRITICAL)  # per client, by the thousand, would be its memory)
            rss = resident()  # a first N/2, not counted: a burst of clients allocates some
            churns = [bad_churn(t, CYCLES // 2, seed) for seed, t in enumerate(targets)]
            await asyncio.gather(*churns)  # 12 MiB once (300 or 3,000 clients a server alike)
            warm, rss, before = resident() - rss, resident(), counts()
            began = time.monotonic()
            await asyncio.gather(*(bad_churn(t, CYCLES, seed) for seed, t in enumerate(targets)))
            took = time.monotonic() - began
            await until(  # they kept receiving (and do: a short churn gives them little time)
                lambda: all(b > a for a, b in zip(before, counts(), strict=True)),
                lambda: f"a healthy client stalled: {before} -> {counts()}",
                5.0,
            )
            churned = [b - a for a, b in zip(before, counts(), strict=True)]
            for target in targets:
                if target.peers is not None:
                    await until(lambda t=target: t.peers() == 1, f"{target.name}: churn gone")
            await until(lambda: open_fds() <= fds + 2, lambda: f"descriptors {open_fds()} > {fds}")
            grown = resident() - rss
            print(f"bad clients x{CYCLES} per server in {took:.1f} s: "
                  f"healthy growth {churned}, fds {fds} -> {open_fds()}, "
                  f"RSS {grown >> 10:+} KiB (the first N/2: {warm >> 10:+} KiB)")  # fmt: skip
            assert grown < RSS_BOUND, f"RSS +{grown >> 20} MiB"
        assert all(g > 0 for g in growth), f"a healthy client stalled: {growth}"
        assert connections() == joined, "a healthy client was disconnected"
        assert busy >= 0.9 * quiet, f"VRPN sink's client: {busy:.1f} < {quiet:.1f} per frame"
        for target in targets:  # garbage from the first byte: dropped at once
            assert target.bad["raw"].dropped is not None, target.name
        assert all(b.dropped is not None and b.dropped <= HANDSHAKE + 1 for b in waiting)
        assert streamed <= STREAM_BOUND  # a silent SpyGlass client is held: its outbox bounded
        for target in targets:
            if target.peers is not None:
                await until(lambda t=target: t.peers() == 1, f"{target.name}: bad clients gone")
        await until(lambda: open_fds() <= fds + 2, lambda: f"descriptors {open_fds()} > {fds}")
        assert not servers.failures and not clients.failures
        # every bad client is said in a line or two, never a line per message: the Foxglove
        # SDK's one line per unreadable message becomes one per client, the rest counted
        unreadable = [line for line in said if "Invalid message" in line or "cannot read" in line]
        assert len(unreadable) == 1, unreadable[:5]
        assert sum("unknown channel" in line for line in said) <= 1, said[:40]  # once a minute
        assert len(said) <= 3 * BAD_CLIENTS, said[:40]
        for sink in (vrpn, viewer, foxglove):  # the garbage of the clients they held, counted
            assert errors[sink.name] > 10, errors
    finally:
        logger.removeHandler(lines)
        sdk.removeHandler(lines)
        sdk.setLevel(sdk_level)
        logger.setLevel(level)
        for sock in silent:
            sock.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        clients.stop()
        if client_run is not None:
            await asyncio.wait_for(client_run, 60)
        servers.stop()
        await asyncio.wait_for(run, 60)
