"""A sink whose peer stops reading never slows the sources nor the other peers.

A VRSP simulator (another process) sends 1000 drones at 30 Hz into a gateway that serves them
over VRPN (one tracker) and SpyGlass. Healthy clients of both sinks (robowire's own sources, in
a second gateway) read all along; then a raw TCP client of each sink connects and never reads.
The test checks, with counts:

* the source ingests as many messages (datagrams) per frame the simulator sent with the
  stalled peers as without them (messages in / span of the sender's frame numbers);
* the healthy clients keep receiving while the stalled ones are connected;
* what is queued for a stalled peer stays bounded (its unsent bytes stay near the sink's skip
  threshold, 1 MiB), and the updates it misses are counted as the sink's drops in
  `Gateway.status()`.

The server side of each stalled connection gets a small kernel send buffer, so that the kernel
holds little and the sink's own bound is what is tested (the kernel would otherwise absorb
several MB first on loopback).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from websockets.typing import Subprotocol

from robowire.gateway import Gateway, open_sink, open_source
from robowire.protocols.vrpn.codec import encode_cookie
from robowire.protocols.vrsp.services import VrspSource
from robowire.service import Sink, Source
from robowire.transport.tcp import StreamDriver
from support import free_udp_port, until

pytestmark = pytest.mark.timeout(180)

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
DRONES = 1000
RATE = 30
PHASE = 3.0  # seconds of each phase (what is compared is per frame, not per second)
BOUND = 2 << 20  # the sinks skip a peer past 1 MiB unsent; one frame more may be queued
DEADLINE = 60.0


def status_of(gateway: Gateway, service: Sink | Source) -> tuple[str, int, int]:
    (status,) = [s for s in gateway.status() if s.name == service.name]
    return status.state, status.messages, status.dropped


def stalled_client(port: int, hello: bytes = b"") -> socket.socket:
    """A TCP client with a tiny receive window that never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    if hello:
        sock.sendall(hello)
    return sock


def server_side(drivers: list[StreamDriver], client: socket.socket) -> StreamDriver:
    """The sink's connection to `client`, with a small kernel send buffer."""
    local = client.getsockname()[1]
    (driver,) = [d for d in drivers if d.peer[1] == local]
    transport = driver._transport
    assert transport is not None
    sock = transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    return driver


async def test_stalled_tcp_peers_of_the_vrpn_and_spyglass_sinks() -> None:
    udp = free_udp_port()
    gateway = Gateway()
    source = open_source(f"vrsp://127.0.0.1:{udp}")
    vrpn = open_sink("vrpn://127.0.0.1:0?tracker=Swarm")
    spyglass = open_sink("spyglass://127.0.0.1:0")
    gateway.add(source, vrpn, spyglass)
    run = asyncio.create_task(gateway.run())
    sim = subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", "sim", "vrsp", "--drones", str(DRONES),
         "--rate", str(RATE), "--to", f"127.0.0.1:{udp}", "--duration", "150"],
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    clients = Gateway()
    stalled: list[socket.socket] = []
    try:
        await until(lambda: vrpn.address is not None and spyglass.address is not None, "bound")
        assert vrpn.address is not None and spyglass.address is not None
        healthy_vrpn = open_source(f"vrpn+tcp://Swarm@127.0.0.1:{vrpn.address[1]}")
        healthy_spyglass = open_source(f"spyglass://127.0.0.1:{spyglass.address[1]}")
        clients.add(healthy_vrpn, healthy_spyglass)
        client_run = asyncio.create_task(clients.run())
        assert isinstance(source, VrspSource)
        receiver = source.session  # the VRSP receiver: its newest frame number
        await until(lambda: len(gateway.world.tables.get(source.name, ())) == DRONES, "drones")
        await until(lambda: healthy_vrpn.stats.messages_in > 0, "VRPN client receives")
        await until(lambda: healthy_spyglass.stats.messages_in > 0, "SpyGlass client receives")

        async def phase() -> tuple[float, int, int]:
            """(datagrams in per frame sent, VRPN and SpyGlass client messages) over a phase.
            The frames sent are the span of the sender's frame numbers: a frame lost (the
            gateway too slow to read) lowers the first figure."""
            m0, f0 = source.stats.messages_in, int(receiver.latest or 0)
            v0, s0 = healthy_vrpn.stats.messages_in, healthy_spyglass.stats.messages_in
            await asyncio.sleep(PHASE)
            m1, f1 = source.stats.messages_in, int(receiver.latest or 0)
            v1, s1 = healthy_vrpn.stats.messages_in, healthy_spyglass.stats.messages_in
            assert f1 > f0, "the simulator's frames arrive"
            return (m1 - m0) / (f1 - f0), v1 - v0, s1 - s0

        free_per_frame, free_vrpn, free_spyglass = await phase()
        assert free_per_frame > 0
        _, _, vrpn_drops_before = status_of(gateway, vrpn)
        _, _, spyglass_drops_before = status_of(gateway, spyglass)

        # the stalled peers: they connect (the VRPN one says its cookie) and never read
        stalled.append(stalled_client(vrpn.address[1], encode_cookie()))
        stalled.append(stalled_client(spyglass.address[1]))
        await until(lambda: len(vrpn.server.links) == 2, "the VRPN sink has both clients")
        await until(lambda: len(spyglass.viewers) == 2, "the SpyGlass sink has both clients")
        vrpn_stalled = server_side(list(vrpn.server.links), stalled[0])
        spyglass_stalled = server_side(list(spyglass.viewers), stalled[1])
        await until(lambda: status_of(gateway, vrpn)[2] > vrpn_drops_before, "VRPN drops")
        await until(lambda: status_of(gateway, spyglass)[2] > spyglass_drops_before, "drops")

        stalled_per_frame, stalled_vrpn, stalled_spyglass = await phase()
        # the source ingests as much of every frame as before
        assert stalled_per_frame >= 0.9 * free_per_frame
        # the healthy clients keep receiving
        assert stalled_vrpn > 0 and stalled_spyglass > 0
        # memory: what waits for each stalled peer is bounded; its misses are drops
        assert vrpn_stalled.write_buffer_size() <= BOUND
        assert spyglass_stalled.write_buffer_size() <= BOUND
        assert vrpn_stalled.connected and spyglass_stalled.connected  # skipped, not dropped
        vrpn_state, _, vrpn_drops = status_of(gateway, vrpn)
        spyglass_state, _, spyglass_drops = status_of(gateway, spyglass)
        assert (vrpn_state, spyglass_state) == ("listening", "listening")
        assert vrpn_drops > vrpn_drops_before and spyglass_drops > spyglass_drops_before
        assert vrpn.stats.last_drop_reason and spyglass.stats.last_drop_reason
        print(  # the figures, for a human reading -s output
            f"per frame: {free_per_frame:.0f} free, {stalled_per_frame:.0f} stalled; "
            f"healthy VRPN {free_vrpn}->{stalled_vrpn}, SpyGlass {free_spyglass}->"
            f"{stalled_spyglass}; drops VRPN {vrpn_drops}, SpyGlass {spyglass_drops}"
        )
        clients.stop()
        await asyncio.wait_for(client_run, DEADLINE)
    finally:
        for sock in stalled:
            sock.close()
        sim.terminate()
        sim.wait(30)
        clients.stop()
        gateway.stop()
        await asyncio.wait_for(run, DEADLINE)


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def small_window_socket(port: int) -> socket.socket:
    """A connected TCP socket with a tiny receive window (for a client that will not read)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    return sock


async def test_a_browser_that_never_says_ready_and_a_foxglove_client_that_never_reads() -> None:
    """The web viewer and the Foxglove sink, each with a healthy client that reads and a
    stalled one: a browser that never says `ready` (and never reads), and a Foxglove client
    subscribed to every channel that never reads. The source ingests as before, the healthy
    clients keep receiving, and this process's memory does not grow with the stall (the viewer
    sends a browser nothing it did not ask for; the Foxglove SDK holds `BACKLOG` messages per
    client at most)."""
    from websockets.asyncio.client import connect

    from robowire.sinks.foxglove import BACKLOG, FoxgloveSink
    from robowire.viewer.server import SUBPROTOCOL, ViewerSink

    udp = free_udp_port()
    gateway = Gateway()
    source = open_source(f"vrsp://127.0.0.1:{udp}")
    assert isinstance(source, VrspSource)
    viewer = ViewerSink("127.0.0.1", 0)
    foxglove = FoxgloveSink("127.0.0.1", 0)
    gateway.add(source, viewer, foxglove)
    run = asyncio.create_task(gateway.run())
    sim = subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", "sim", "vrsp", "--drones", str(DRONES),
         "--rate", str(RATE), "--to", f"127.0.0.1:{udp}", "--duration", "150"],
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    counts = {"viewer": 0, "foxglove": 0}
    tasks: list[asyncio.Task[None]] = []
    stalled: list[Any] = []
    try:
        await until(lambda: viewer.address is not None and foxglove.address is not None, "bound")
        assert viewer.address is not None and foxglove.address is not None
        viewer_url = f"ws://127.0.0.1:{viewer.address[1]}/ws"
        foxglove_url = f"ws://127.0.0.1:{foxglove.address[1]}"

        async def healthy_browser() -> None:
            async with connect(viewer_url, subprotocols=[Subprotocol(SUBPROTOCOL)]) as ws:
                while True:
                    await ws.send('{"type": "ready"}')
                    while not isinstance(await ws.recv(), bytes):
                        pass
                    counts["viewer"] += 1

        async def foxglove_client(sock: socket.socket | None = None, read: bool = True) -> Any:
            ws = await connect(
                foxglove_url, subprotocols=[Subprotocol("foxglove.sdk.v1")], sock=sock,
                max_queue=None if read else 1, max_size=None,
            )  # fmt: skip
            channels: list[int] = []
            while len(channels) < 3:
                message = json.loads(await asyncio.wait_for(ws.recv(), DEADLINE))
                if message["op"] == "advertise":
                    channels += [c["id"] for c in message["channels"]]
            subscriptions = [{"id": i, "channelId": c} for i, c in enumerate(channels, 1)]
            await ws.send(json.dumps({"op": "subscribe", "subscriptions": subscriptions}))
            if not read:
                return ws
            while True:
                if isinstance(await ws.recv(), bytes):
                    counts["foxglove"] += 1

        receiver = source.session
        tasks += [asyncio.create_task(healthy_browser()), asyncio.create_task(foxglove_client())]
        await until(lambda: len(gateway.world.tables.get(source.name, ())) == DRONES, "drones")
        await until(lambda: counts["viewer"] > 0 and counts["foxglove"] > 0, "clients receive")

        async def phase() -> tuple[float, int, int]:
            m0, f0 = source.stats.messages_in, int(receiver.latest or 0)
            v0, x0 = counts["viewer"], counts["foxglove"]
            await asyncio.sleep(PHASE)
            m1, f1 = source.stats.messages_in, int(receiver.latest or 0)
            assert f1 > f0, "the simulator's frames arrive"
            return (m1 - m0) / (f1 - f0), counts["viewer"] - v0, counts["foxglove"] - x0

        free_per_frame, free_viewer, free_foxglove = await phase()
        assert free_per_frame > 0
        memory_before = rss_bytes()

        # a browser that connects and then neither says ready nor reads
        stalled.append(
            await connect(
                viewer_url, subprotocols=[Subprotocol(SUBPROTOCOL)], max_queue=1,
                sock=small_window_socket(viewer.address[1]),
            )
        )  # fmt: skip
        # a Foxglove client subscribed to everything that stops reading
        stalled.append(await foxglove_client(small_window_socket(foxglove.address[1]), False))
        await asyncio.sleep(PHASE)  # its buffers fill

        stalled_per_frame, stalled_viewer, stalled_foxglove = await phase()
        growth = rss_bytes() - memory_before
        assert stalled_per_frame >= 0.9 * free_per_frame
        assert stalled_viewer > 0 and stalled_foxglove > 0
        assert len(viewer.clients) == 2  # the stalled browser costs a subscriber, no frames
        assert growth < 64 << 20, f"memory grew {growth / 2**20:.0f} MiB during the stall"
        print(
            f"per frame: {free_per_frame:.0f} free, {stalled_per_frame:.0f} stalled; "
            f"healthy viewer {free_viewer}->{stalled_viewer} frames, Foxglove "
            f"{free_foxglove}->{stalled_foxglove} messages; memory +{growth / 2**20:.1f} MiB "
            f"(Foxglove backlog {BACKLOG} messages a client)"
        )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for ws in stalled:
            ws.transport.abort()
        sim.terminate()
        sim.wait(30)
        gateway.stop()
        await asyncio.wait_for(run, DEADLINE)


async def test_a_ucs_that_stops_reading_is_closed_and_counted(monkeypatch: Any) -> None:
    """The UgCS sink (a VSM) with a healthy UCS and one that registers, acknowledges its
    vehicles, then never reads again: past the VSM's backlog bound the stalled connection is
    closed and counted as a drop in the status; the healthy UCS keeps receiving."""
    import time

    from robowire.protocols.ugcs import services as ugcs_services
    from robowire.protocols.ugcs import vsm_server
    from robowire.protocols.ugcs.session_ucs import UcsSession

    monkeypatch.setattr(vsm_server, "MAX_BACKLOG", 64 << 10)  # reached in seconds, not minutes
    gateway = Gateway()
    sink = open_sink("ugcs://127.0.0.1:0")
    gateway.add(sink)
    run = asyncio.create_task(gateway.run())
    clients = Gateway()
    stalled: socket.socket | None = None

    async def fly() -> None:  # 300 devices moving at 20 Hz: every field changes every window
        step = 0
        while True:
            step += 1
            for i in range(300):
                gateway.world.update_device(
                    "swarm", f"d{i}", kind="drone", receive_time=time.time(),
                    position=(i + step * 0.1, step * 0.05, 10.0 + step % 7),
                    telemetry={"battery": (100.0 - step % 50, "%")},
                )  # fmt: skip
            await asyncio.sleep(0.05)

    flying = asyncio.create_task(fly())
    try:
        await until(lambda: sink.address is not None, "bound")
        assert sink.address is not None
        healthy = open_source(f"ugcs://127.0.0.1:{sink.address[1]}")
        clients.add(healthy)
        client_run = asyncio.create_task(clients.run())
        await until(lambda: healthy.stats.messages_in > 0, "the healthy UCS receives")

        # the stalled UCS: a real UCS session until its vehicles are registered, then silence
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.setblocking(False)
        await asyncio.get_running_loop().sock_connect(stalled, ("127.0.0.1", sink.address[1]))
        session = UcsSession(time.monotonic(), peer_id=7)
        stalled.send(session.data_to_send())
        while len(session.devices) < 300:
            data = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(stalled, 65536), 30)
            session.feed(data, time.monotonic())
            stalled.send(session.data_to_send())
        assert isinstance(sink, ugcs_services.UgcsSink)
        (driver,) = [
            d for d in sink.server.drivers.values() if d.peer[1] == stalled.getsockname()[1]
        ]
        transport = driver._transport
        assert transport is not None  # a small kernel buffer: the VSM's own bound is tested
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        _, _, drops_before = status_of(gateway, sink)
        await until(lambda: not driver.connected, "the stalled UCS is closed")
        state, _, drops = status_of(gateway, sink)
        assert state == "listening" and drops > drops_before
        assert sink.stats.last_drop_reason == "a UCS stopped reading"
        received = healthy.stats.messages_in
        await until(lambda: healthy.stats.messages_in > received, "the healthy UCS still receives")
        clients.stop()
        await asyncio.wait_for(client_run, DEADLINE)
    finally:
        flying.cancel()
        if stalled is not None:
            stalled.close()
        clients.stop()
        gateway.stop()
        await asyncio.wait_for(run, DEADLINE)
