"""VRPN on real sockets (127.0.0.1, ephemeral ports): golden replay, our client <-> our server
in both modes, the serve sink, the gateway, reconnects and bad peers."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robowire.addresses import parse_endpoint
from robowire.capture import read_pcap
from robowire.gateway import Gateway
from robowire.protocols.vrpn import Role, VrpnSession
from robowire.protocols.vrpn.dissect import decode_capture
from robowire.protocols.vrpn.driver import VrpnLink, connect
from robowire.protocols.vrpn.services import (
    VrpnSim,
    VrpnSink,
    VrpnSource,
    open_sim,
    open_sink,
)
from robowire.service import Service, SimOptions
from robowire.wire import Address
from robowire.world import LogEvent, World

from .test_session import client_reports, printed_reports


async def started(service: Service, world: World | None = None) -> asyncio.Task[None]:
    task = asyncio.create_task(service.run(world if world is not None else World()))
    await asyncio.wait_for(service.ready.wait(), 5.0)
    return task


async def stop(*tasks: asyncio.Task[None]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def wait_for(condition: object, timeout: float = 5.0) -> None:
    assert callable(condition)
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not condition():
        if loop.time() > end:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


@pytest.fixture
async def sim() -> AsyncIterator[VrpnSim]:
    simulator = open_sim(SimOptions(port=0, rate=200, count=3))
    assert isinstance(simulator, VrpnSim)
    task = await started(simulator)
    yield simulator
    await stop(task)


# -- golden: the real server's bytes, replayed on a socket, into our client ------------------


async def test_golden_replay_through_a_real_socket(captures: Path) -> None:
    # the server side's TCP chunks exactly as captured, written by a socket server
    chunks = [
        r.data
        for r in read_pcap(str(captures / "tcp_tracker.pcap"))
        if r.flow.startswith("127.0.0.1:3883>")
    ]
    received = bytearray()

    async def replay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
        received.extend(await reader.read(65536))
        writer.close()

    server = await asyncio.start_server(replay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    events: list[object] = []
    link = await connect(
        "127.0.0.1",
        port,
        lambda peer, udp: VrpnSession(Role.CLIENT, ping_senders=["Tracker0"]),
        lambda _link, new: events.extend(new),
        udp=False,
    )
    await asyncio.wait_for(link.closed, 5.0)
    server.close()
    assert link.session is not None and link.session.stats.dropped == 0
    expected = printed_reports(captures)
    got = client_reports(events)
    assert len(got) == len(expected) == 426
    assert [(s, k, " ".join(t.split())) for s, k, t in got] == [
        (s, k, " ".join(t.split())) for s, k, t in expected
    ]
    assert received.startswith(b"vrpn: ver. 07.38  0")  # our cookie went out first


# -- our client <-> our simulator ------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["vrpn", "vrpn+tcp"])
async def test_client_reads_simulator(sim: VrpnSim, scheme: str) -> None:
    host, port = sim.address  # type: ignore[misc]
    world = World()
    source = VrpnSource(parse_endpoint(f"{scheme}://Tracker0,Analog0,Button0,Dial0@{host}:{port}"))
    assert isinstance(source, VrpnSource)
    task = await started(source, world)
    try:
        table = world.table(source.name)
        await wait_for(lambda: {"Tracker0/2", "Analog0", "Dial0", "Button0"} <= set(table.ids))
        await wait_for(lambda: source.stats.messages_in > 100)
        device = world.device(source.name, "Tracker0/1")
        assert device.position is not None and abs(np.hypot(*device.position[:2]) - 1.25) < 1e-9
        assert device.orientation is not None
        assert abs(np.linalg.norm(device.orientation) - 1) < 1e-9
        assert device.velocity is not None
        assert "channel_3" in world.device(source.name, "Analog0").telemetry
        assert source.link is not None and source.link.session is not None
        if scheme == "vrpn":
            assert source.link.session.peer_udp is not None
            assert any(link.session and link.session.peer_udp for link in sim.server.links)  # type: ignore[union-attr]
        else:
            assert source.link.session.peer_udp is None
    finally:
        await stop(task)


async def test_many_clients_and_a_bad_one(sim: VrpnSim) -> None:
    host, port = sim.address  # type: ignore[misc]
    # a peer speaking garbage, one with a future major version, and a bad lob datagram
    bad_peers = [await asyncio.open_connection(host, port) for _ in range(2)]
    bad_peers[0][1].write(b"GET / HTTP/1.0\r\n\r\n" + bytes(64))
    bad_peers[1][1].write(b"vrpn: ver. 08.38  0" + bytes(5))
    lob = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    lob.sendto(b"127.0.0.1 80\0", (host, port))
    lob.sendto(b"\xff" * 40, (host, port))
    worlds = [World() for _ in range(4)]
    sources = [
        VrpnSource(parse_endpoint(f"vrpn{'' if i % 2 else '+tcp'}://Tracker0@{host}:{port}"))
        for i in range(4)
    ]
    tasks = [await started(s, w) for s, w in zip(sources, worlds, strict=True)]
    try:
        for source in sources:
            await wait_for(lambda s=source: s.stats.messages_in > 50)
        for reader, _writer in bad_peers:
            data = await asyncio.wait_for(reader.read(), 3.0)  # the server closes bad peers
            assert data == b"vrpn: ver. 07.38  0" + bytes(5)
        assert sim.server is not None and len(sim.server.connected()) >= 4
    finally:
        for _reader, writer in bad_peers:
            writer.close()
        lob.close()
        await stop(*tasks)


async def test_client_reconnects_when_the_server_restarts() -> None:
    first = open_sim(SimOptions(port=0, rate=100))
    task = await started(first)
    host, port = first.address  # type: ignore[misc]
    source = VrpnSource(parse_endpoint(f"vrpn+tcp://Tracker0@{host}:{port}?retry=0.2"))
    assert isinstance(source, VrpnSource)
    source_task = await started(source)
    try:
        await wait_for(lambda: source.stats.messages_in > 10)
        await stop(task)
        await wait_for(lambda: source.link is None)
        second = open_sim(SimOptions(port=port, rate=100))
        task = await started(second)
        before = source.stats.messages_in
        await wait_for(lambda: source.connections == 2 and source.stats.messages_in > before + 10)
    finally:
        await stop(task, source_task)


# -- the serve sink --------------------------------------------------------------------------


async def feed_world(world: World, stop_after: int = 400) -> None:
    for k in range(stop_after):
        for i in range(3):
            world.update_device(
                "test",
                f"drone {i}",
                receive_time=1_700_000_000.0 + k * 0.01,
                position=(i, k * 0.01, 2.0),
                orientation=(0.0, 0.0, 0.0, 1.0),  # w x y z: 180 deg about z
                velocity=(0.0, 1.0, 0.0),
                telemetry={"battery": (12.0 - i, "V")},
            )
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("scheme", ["vrpn", "vrpn+tcp"])
async def test_sink_serves_world_devices(scheme: str) -> None:
    world = World()
    sink = open_sink(parse_endpoint("vrpn://127.0.0.1:0"))
    assert isinstance(sink, VrpnSink)
    sink_task = await started(sink, world)
    host, port = sink.address  # type: ignore[misc]
    client_world = World()
    source = VrpnSource(parse_endpoint(f"{scheme}://drone_1@{host}:{port}"))
    source_task = await started(source, client_world)
    feeder = asyncio.create_task(feed_world(world))
    try:
        await wait_for(lambda: "drone_1/0" in client_world.table(source.name).ids)
        await wait_for(lambda: "drone_1" in client_world.table(source.name).ids)
        device = client_world.device(source.name, "drone_1/0")
        assert device.position is not None and device.position[0] == 1.0
        assert device.orientation == (0.0, 0.0, 0.0, 1.0)
        await wait_for(lambda: client_world.device(source.name, "drone_1/0").velocity is not None)
        assert client_world.device(source.name, "drone_1/0").velocity == (0.0, 1.0, 0.0)
        assert device.source_time is not None and device.source_time >= 1_700_000_000.0
        analog = client_world.device(source.name, "drone_1")
        assert analog.telemetry["channel_0"][0] == 11.0
        logs = client_world.feed.subscribe()
        world.log("test", "drone 1", "low battery", time=1_700_000_001.0, level="warning")
        got: list[LogEvent] = []
        await wait_for(
            lambda: bool(got.extend(e for e in logs.drain() if isinstance(e, LogEvent))) or got
        )
        assert (got[0].device_id, got[0].text, got[0].level) == (
            "drone_1",
            "low battery",
            "warning",
        )
        assert "drone_0/0" not in client_world.table(source.name).ids  # asked for drone_1 only
    finally:
        await stop(feeder, source_task, sink_task)


async def test_gateway_sim_to_sink_to_client() -> None:
    sim = open_sim(SimOptions(port=0, rate=100, count=2))
    sim_task = await started(sim)
    host, port = sim.address  # type: ignore[misc]
    gateway = Gateway()
    sink = open_sink(parse_endpoint("vrpn://127.0.0.1:0"))
    gateway.add(sink, VrpnSource(parse_endpoint(f"vrpn://Tracker0@{host}:{port}")))
    run = asyncio.create_task(gateway.run())
    await asyncio.wait_for(sink.ready.wait(), 5.0)
    sink_host, sink_port = sink.address  # type: ignore[misc]
    out = World()
    client = VrpnSource(parse_endpoint(f"vrpn+tcp://Tracker0_1@{sink_host}:{sink_port}"))
    client_task = await started(client, out)
    try:
        await wait_for(lambda: "Tracker0_1/0" in out.table(client.name).ids)
        await wait_for(lambda: client.stats.messages_in > 20)
        position = out.device(client.name, "Tracker0_1/0").position
        assert position is not None and abs(np.hypot(*position[:2]) - 1.25) < 1e-9
        assert not gateway.failures
    finally:
        gateway.stop()
        await stop(client_task, sim_task)
        await run


# -- decode command --------------------------------------------------------------------------


def test_decode_capture_pcap_and_raw(captures: Path, tmp_path: Path) -> None:
    records = list(decode_capture(str(captures / "tcp_tracker.pcap")))
    assert not [r for r in records if "error" in r]
    assert {r["direction"] for r in records} == {
        "127.0.0.1:48653>127.0.0.1:3883",
        "127.0.0.1:3883>127.0.0.1:48653",
    }
    json.dumps(records)  # JSON-ready
    pos = next(r for r in records if r["type"] == "vrpn_Tracker Pos_Quat")
    assert pos["sender"] == "Tracker0" and pos["quaternion"] == [0.0, 0.0, 0.0, 1.0]
    raw = list(decode_capture(str(captures / "tcp_tracker.s2c.bin")))
    assert len(raw) == 1 + 32 + 2 + 426 + 6 + 2 + 5 and not [r for r in raw if "error" in r]
    bad = tmp_path / "bad.bin"
    bad.write_bytes((captures / "tcp_tracker.s2c.bin").read_bytes()[:1856] + b"\xff" * 64)
    lines = list(decode_capture(str(bad)))
    errors = [line for line in lines if "error" in line]
    assert errors and errors[0]["offset"] == 1856
    assert [line for line in lines if "error" not in line][-1]["type"] == "vrpn_Button States"
    cut = tmp_path / "cut.bin"
    cut.write_bytes((captures / "tcp_tracker.s2c.bin").read_bytes()[:2000])
    assert "ends inside a message" in list(decode_capture(str(cut)))[-1]["error"]


async def test_udp_datagrams_are_decoded_with_sender_names(sim: VrpnSim, tmp_path: Path) -> None:
    """A UDP+TCP session recorded as records (not pcap): datagrams resolve via descriptions."""
    from robowire.capture import Record
    from robowire.protocols.vrpn.dissect import decode_records

    host, port = sim.address  # type: ignore[misc]
    tcp_in: list[bytes] = []
    grams: list[bytes] = []

    class Tap(VrpnSession):
        def feed(self, data: bytes, now: float) -> list[object]:
            tcp_in.append(data)
            return super().feed(data, now)

        def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[object]:
            grams.append(data)
            return super().feed_datagram(data, addr, now)

    link: VrpnLink = await connect(
        host,
        port,
        lambda peer, udp: Tap(Role.CLIENT, udp_inbound=udp),
        lambda _l, _e: None,
        udp=True,
    )
    await wait_for(lambda: len(grams) > 5)
    link.close()
    records = [Record(b"".join(tcp_in), 0.0, "tcp", ("s", 1), ("c", 2), "s:1>c:2")]
    records += [Record(g, 1.0, "udp", ("s", 3), ("c", 4), "s:3>c:4") for g in grams]
    decoded = list(decode_records(records))
    assert not [r for r in decoded if "error" in r]
    udp = [r for r in decoded if r["direction"] == "s:3>c:4"]
    assert udp and {r["sender"] for r in udp} >= {"Tracker0"}


@pytest.mark.parametrize("scheme", ["vrpn", "vrpn+tcp"])
def test_on_uvloop(scheme: str) -> None:
    """The CLI runs on uvloop, whose transports differ from asyncio's: run a pair there."""
    from robowire.transport import run

    async def main() -> int:
        sim = open_sim(SimOptions(port=0, rate=100))
        sim_task = await started(sim)
        host, port = sim.address  # type: ignore[misc]
        source = VrpnSource(parse_endpoint(f"{scheme}://Tracker0@{host}:{port}"))
        source_task = await started(source)
        try:
            await wait_for(lambda: source.stats.messages_in > 20)
            return source.stats.messages_in
        finally:
            await stop(source_task, sim_task)

    assert run(main()) > 20


async def test_source_stops_with_one_line_on_a_major_version_mismatch() -> None:
    from robowire.errors import SessionError

    async def future_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"vrpn: ver. 08.00  0" + bytes(5))
        await reader.read(24)
        await asyncio.sleep(0.5)
        writer.close()

    server = await asyncio.start_server(future_server, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    source = VrpnSource(parse_endpoint(f"vrpn+tcp://Tracker0@127.0.0.1:{port}"))
    with pytest.raises(SessionError) as error:
        await asyncio.wait_for(source.run(World()), 5.0)
    server.close()
    assert "major version mismatch" in str(error.value) and "\n" not in str(error.value)


async def test_silent_peer_is_dropped_and_others_served(
    sim: VrpnSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    from robowire.protocols.vrpn import session as session_module

    monkeypatch.setattr(session_module, "COOKIE_TIMEOUT", 0.3)
    host, port = sim.address  # type: ignore[misc]
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"vrpn: ver")  # a truncated cookie, then nothing
    data = await asyncio.wait_for(reader.read(), 3.0)  # until the server closes
    writer.close()
    assert data == b"vrpn: ver. 07.38  0" + bytes(5)  # our cookie, then a clean close
    source = VrpnSource(parse_endpoint(f"vrpn+tcp://Tracker0@{host}:{port}"))
    task = await started(source)
    try:
        await wait_for(lambda: source.stats.messages_in > 10)
    finally:
        await stop(task)


def write_pcap(path: Path, packets: list[tuple[str, Address, Address, bytes]]) -> None:
    """A little Ethernet/IPv4 pcap: ("tcp"|"udp", src, dst, payload), TCP with running seqs."""
    import dpkt

    seqs: dict[tuple[Address, Address], int] = {}
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f)
        for i, (kind, src, dst, payload) in enumerate(packets):
            if kind == "tcp":
                seq = seqs.get((src, dst), 1000)
                seqs[(src, dst)] = seq + len(payload)
                segment: Any = dpkt.tcp.TCP(
                    sport=src[1], dport=dst[1], seq=seq, flags=dpkt.tcp.TH_ACK, data=payload
                )
                proto = dpkt.ip.IP_PROTO_TCP
            else:
                segment = dpkt.udp.UDP(sport=src[1], dport=dst[1], data=payload)
                segment.ulen = 8 + len(payload)
                proto = dpkt.ip.IP_PROTO_UDP
            ip = dpkt.ip.IP(
                src=socket.inet_aton(src[0]), dst=socket.inet_aton(dst[0]), p=proto, data=segment
            )
            ip.len = len(bytes(ip))
            frame = dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
            writer.writepkt(bytes(frame), ts=1000.0 + i * 0.001)


async def test_decode_a_udp_tcp_pcap_resolves_datagram_names(sim: VrpnSim, tmp_path: Path) -> None:
    """A UDP+TCP session written as pcap: datagrams are named via the UDP descriptions."""
    host, port = sim.address  # type: ignore[misc]
    packets: list[tuple[str, Address, Address, bytes]] = []
    ends: dict[str, Address] = {}

    class Tap(VrpnSession):
        def feed(self, data: bytes, now: float) -> list[object]:
            packets.append(("tcp", ends["server"], ends["client"], data))
            return super().feed(data, now)

        def data_to_send(self) -> bytes:
            data = super().data_to_send()
            if data:
                packets.append(("tcp", ends["client"], ends["server"], data))
            return data

        def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[object]:
            packets.append(("udp", addr, ends["udp"], data))
            return super().feed_datagram(data, addr, now)

    def make(peer: Address, udp: Address | None) -> VrpnSession:
        assert udp is not None
        ends.update(server=peer, client=("127.0.0.1", 40000), udp=udp)
        return Tap(Role.CLIENT, udp_inbound=udp)

    link = await connect(host, port, make, lambda _l, _e: None, udp=True)
    await wait_for(lambda: sum(p[0] == "udp" for p in packets) > 5)
    link.close()
    capture = tmp_path / "udp.pcap"
    write_pcap(capture, packets)
    decoded = list(decode_capture(str(capture)))
    assert not [r for r in decoded if "error" in r]
    udp_records = [r for r in decoded if r["direction"].endswith(f">127.0.0.1:{ends['udp'][1]}")]
    assert udp_records
    assert "vrpn_Tracker Pos_Quat" in {r["type"] for r in udp_records}
    assert all(r["sender"] in {"Tracker0", "Analog0"} for r in udp_records)
    udp_desc = [r for r in decoded if r["type"] == "UDP_DESCRIPTION"]
    assert len(udp_desc) == 2  # each side announced where it receives


async def test_sink_single_tracker_mode() -> None:
    world = World()
    sink = open_sink(parse_endpoint("vrpn://127.0.0.1:0?tracker=All"))
    sink_task = await started(sink, world)
    host, port = sink.address  # type: ignore[misc]
    out = World()
    source = VrpnSource(parse_endpoint(f"vrpn+tcp://All@{host}:{port}"))
    source_task = await started(source, out)
    feeder = asyncio.create_task(feed_world(world))
    try:
        await wait_for(lambda: {"All/0", "All/1", "All/2"} <= set(out.table(source.name).ids))
        positions = {out.device(source.name, f"All/{i}").position[0] for i in range(3)}  # type: ignore[index]
        assert positions == {0.0, 1.0, 2.0}
    finally:
        await stop(feeder, source_task, sink_task)


async def test_client_asks_for_an_update_rate(sim: VrpnSim) -> None:
    host, port = sim.address  # type: ignore[misc]
    assert sim.rate == 200
    source = VrpnSource(parse_endpoint(f"vrpn+tcp://Tracker0@{host}:{port}?rate=50"))
    task = await started(source)
    try:
        await wait_for(lambda: sim.rate == 50)
    finally:
        await stop(task)


async def test_a_second_connect_back_leaves_the_first_links_udp_socket_alone() -> None:
    """A server that answers one lob twice: the extra connection is closed, and the UDP socket
    the first connection owns stays open and read (it used to be closed under it)."""
    loop = asyncio.get_running_loop()
    lobs = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    lobs.bind(("127.0.0.1", 0))
    lobs.setblocking(False)
    port = lobs.getsockname()[1]
    back: list[asyncio.StreamWriter] = []

    async def answer_twice() -> None:
        data = await loop.sock_recv(lobs, 256)
        host, tcp_port = data.rstrip(b"\0").decode().split()
        both = await asyncio.gather(  # at once: both are accepted before the first is taken
            *(asyncio.open_connection(host, int(tcp_port)) for _ in range(2)),
            return_exceptions=True,
        )
        back.extend(pair[1] for pair in both if isinstance(pair, tuple))

    answering = asyncio.create_task(answer_twice())
    link = await connect(
        "127.0.0.1",
        port,
        lambda peer, udp: VrpnSession(Role.CLIENT, udp_inbound=udp),
        lambda _l, _e: None,
        udp=True,
    )
    try:
        await asyncio.wait_for(answering, 5.0)
        await asyncio.sleep(0.2)  # the second connection is accepted and turned away
        assert link.sock is not None and link.sock.fileno() >= 0
        assert link.connected
    finally:
        link.close()
        for writer in back:
            writer.close()
        lobs.close()


async def test_a_flood_of_bad_lobs_is_said_once(
    sim: VrpnSim, caplog: pytest.LogCaptureFixture
) -> None:
    """A stray UDP sender must not flood the log: a server whose stderr nobody reads (a pipe)
    would block on it and stop serving."""
    host, port = sim.address  # type: ignore[misc]
    stray = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with caplog.at_level("WARNING", logger="robowire.vrpn"):
        for _ in range(200):
            stray.sendto(b"\x01 not a connection request", (host, port))
        await asyncio.sleep(0.3)
    stray.close()
    bad = [r for r in caplog.records if "bad connection request" in r.getMessage()]
    assert len(bad) == 1
