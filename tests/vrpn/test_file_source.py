"""VRPN captures as sources: the world ends where the real C++ client saw the trackers end."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import socket
from pathlib import Path

import dpkt
import numpy as np

from robowire.addresses import parse_endpoint
from robowire.capture import read_capture
from robowire.gateway import Gateway, open_source
from robowire.protocols.vrpn.session import Role, VrpnSession
from robowire.world import Update

NUMBER = r"\s*(-?\d+\.\d+)"
POSE = re.compile(
    r"sensor (\d+):\n\s+pos \(" + f"{NUMBER},{NUMBER},{NUMBER}" + r"\); quat \("
    f"{NUMBER},{NUMBER},{NUMBER},{NUMBER}"
)


def printed_poses(captures: Path) -> tuple[int, dict[str, tuple[list[float], list[float]]]]:
    """What vrpn_print_devices printed: how many poses, and each sensor's last pose (the
    quaternion reordered from its x, y, z, w to the world's w, x, y, z)."""
    text = (captures / "tcp_tracker.client.txt").read_text()
    last: dict[str, tuple[list[float], list[float]]] = {}
    found = POSE.findall(text)
    for sensor, *numbers in found:
        x, y, z, qx, qy, qz, qw = map(float, numbers)
        last[f"Tracker0/{sensor}"] = ([x, y, z], [qw, qx, qy, qz])
    return len(found), last


async def read_into_world(path: Path, **options: str) -> tuple[Gateway, int]:
    endpoint = parse_endpoint(f"vrpn:{path}")
    source = open_source(dataclasses.replace(endpoint, options=options))
    gateway = Gateway().add(source)
    poses = 0
    subscription = gateway.world.feed.subscribe()

    async def count() -> None:
        nonlocal poses
        async for item in subscription:
            if isinstance(item, Update) and "position" in item.fields:
                poses += len(item)

    counting = asyncio.create_task(count())
    await asyncio.wait_for(gateway.run(), 20)  # ends by itself at the end of the file
    counting.cancel()
    poses += sum(
        len(i) for i in subscription.drain() if isinstance(i, Update) and "position" in i.fields
    )
    assert not gateway.failures
    return gateway, poses


def assert_world_matches_client(gateway: Gateway, captures: Path, poses: int) -> None:
    (source,) = gateway.services
    count, last = printed_poses(captures)
    assert poses == count
    assert source.stats.dropped == 0
    for device_id, (position, quaternion) in last.items():
        device = gateway.world.device(source.name, device_id)
        assert device is not None
        assert np.allclose(device.position, position, atol=0.005)  # printed with 2 decimals
        assert np.allclose(device.orientation, quaternion, atol=0.005)


async def test_pcap_source_ends_where_the_real_client_saw_the_trackers(captures):
    gateway, poses = await read_into_world(captures / "tcp_tracker.pcap")
    assert_world_matches_client(gateway, captures, poses)


async def test_raw_server_stream_gives_the_same(captures):
    gateway, poses = await read_into_world(captures / "tcp_tracker.s2c.bin")
    assert_world_matches_client(gateway, captures, poses)


async def test_garbled_capture_is_counted_and_dropped_not_fatal(captures, tmp_path):
    data = bytearray((captures / "tcp_tracker.s2c.bin").read_bytes())
    data[3000:3040] = b"\xff" * 40
    broken = tmp_path / "broken.bin"
    broken.write_bytes(bytes(data[: len(data) - 7]))
    gateway, poses = await read_into_world(broken)
    (source,) = gateway.services
    assert source.stats.dropped >= 1
    assert 0 < poses < printed_poses(captures)[0]


async def test_paced_replay_follows_the_capture_clock(captures):
    loop = asyncio.get_running_loop()
    start = loop.time()
    await read_into_world(captures / "tcp_tracker.pcap", speed="4")
    elapsed = loop.time() - start
    assert 1.58 / 4 * 0.9 <= elapsed < 1.58 / 4 + 1.5  # the capture spans 1.59 s


def _frame(src: tuple[str, int], dst: tuple[str, int], payload: bytes, seq: int | None) -> bytes:
    """An Ethernet frame of one UDP datagram (seq None) or TCP segment."""
    segment: dpkt.Packet
    if seq is None:
        segment = dpkt.udp.UDP(sport=src[1], dport=dst[1], data=payload)
        segment.ulen = 8 + len(payload)
        proto = dpkt.ip.IP_PROTO_UDP
    else:
        segment = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq, flags=dpkt.tcp.TH_ACK)
        segment.data = payload
        proto = dpkt.ip.IP_PROTO_TCP
    ip = dpkt.ip.IP(
        src=socket.inet_aton(src[0]), dst=socket.inet_aton(dst[0]), p=proto, data=segment
    )
    ip.len = len(bytes(ip))
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


async def test_udp_reports_reach_the_connection_that_announced_the_port(tmp_path):
    """UDP+TCP mode: datagrams to the port the client announced belong to its connection."""
    client_tcp, server_tcp = ("10.0.0.2", 40000), ("10.0.0.1", 3883)
    client_udp, server_udp = ("10.0.0.2", 5000), ("10.0.0.1", 6000)
    client = VrpnSession(Role.CLIENT, udp_inbound=client_udp, now=0.0)
    server = VrpnSession(Role.SERVER, senders=["Tracker0"], now=0.0)
    path = tmp_path / "udp.pcap"
    seqs = {"c": 1000, "s": 9000}
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f)
        when = 1.7e9

        def tcp(side: str, data: bytes) -> None:
            nonlocal when
            if data:
                src, dst = (client_tcp, server_tcp) if side == "c" else (server_tcp, client_tcp)
                writer.writepkt(_frame(src, dst, data, seqs[side]), ts=when)
                seqs[side] += len(data)
                when += 0.01

        for _ in range(3):  # cookies, descriptions, names announced back
            up = client.data_to_send()
            server.feed(up, 0.0)
            tcp("c", up)
            down = server.data_to_send()
            client.feed(down, 0.0)
            tcp("s", down)
        assert server.peer_udp == client_udp
        for step in range(5):  # poses go by UDP (TCP carries only the type's first description)
            server.send_poses("Tracker0", [0], [[step, 2.0, 3.0]], [[0.0, 0.0, 0.0, 1.0]])
            tcp("s", server.data_to_send())
            for datagram, _ in server.datagrams_to_send():
                writer.writepkt(_frame(server_udp, client_udp, datagram, None), ts=when)
                when += 0.01
    assert sum(r.transport == "udp" for r in read_capture(str(path))) == 5
    gateway, poses = await read_into_world(path)
    (source,) = gateway.services
    device = gateway.world.device(source.name, "Tracker0/0")
    assert device is not None and device.position == (4.0, 2.0, 3.0)
    assert poses == 5 and source.stats.dropped == 0, source.stats.last_drop_reason
