"""Write the pcaps of tests/data/captures/ that no peer recorded as a pcap (see its README).

    PYTHONPATH=src python tools/make_pcaps.py [--out DIR]   # default tests/data/captures

Frames captured payloads in Ethernet/IPv4/UDP or TCP on 127.0.0.1 (dpkt), so that Wireshark
and `robowire decode` read the same traffic:

* xrp/capture_normal.pcap: each datagram of `xrp/capture_normal.txt` (WPILib on port 3540
  <-> the robot), at its time after a fixed epoch.
* ugcs/capture_hello_basic.pcap: each connection of `ugcs/capture_hello_basic.jsonl` as one
  TCP connection to the VSM's port 5556 (handshake, both directions with their sequence
  numbers, FIN), cut into segments of at most 256 bytes so that frames span segments.
* spyglass/recording-2009-05-28.pcap: the packets of the 2009 `.rec` as the TCP stream a
  SpyGlass server on port 7870 sends (1,448-byte segments, packets cut across them), each
  segment at the time of the last packet it completes.
* vrsp/lightshow.pcap: robowire's light-show simulator (6 drones, seed 0, root `VRSP_ROOT`)
  as its sender sends it (DEF at once and every second, DATA at 10 frames/s for 1.5 s), then
  Verge's example definition in a DEF of its own (devices 1 and 2) and one DATA frame of
  those two drones.

`--out` may be anywhere; what it writes is the committed files byte for byte
(tests/core/test_make_pcaps.py).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator
from pathlib import Path

import dpkt
import numpy as np

from robowire import protocols
from robowire.protocols.spyglass.rec import iter_rec
from robowire.protocols.vrsp.adapter import show_swarm
from robowire.protocols.vrsp.codec import (
    DefinitionTable,
    definition_from_json,
    empty_swarm,
    encode_data,
    encode_def,
)
from robowire.protocols.vrsp.events import FrameDue
from robowire.protocols.vrsp.services import make_show, show_blocks
from robowire.protocols.vrsp.session import SenderSession

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "tests" / "data" / "captures"
EPOCH = 1_795_336_000.0  # the text captures' times are relative: they start here
HOST = b"\x7f\x00\x00\x01"
CLIENT_MAC = b"\x02\x00\x00\x00\x00\x01"
SERVER_MAC = b"\x02\x00\x00\x00\x00\x02"

VRSP_ROOT = (47.3769, 8.5417, 406.0)  # the capture's swarm root (the simulator's own root,
# `services.DEFAULT_ROOT`, has moved to the shared site since the capture was written)

Packet = tuple[float, bytes]
XRP_PORT, UGCS_PORT, SPYGLASS_PORT, VRSP_PORT = (
    protocols.get(name).default_port for name in ("xrp", "ugcs", "spyglass", "vrsp")
)


def ethernet(ip: dpkt.ip.IP) -> bytes:
    frame = dpkt.ethernet.Ethernet(
        src=CLIENT_MAC, dst=SERVER_MAC, type=dpkt.ethernet.ETH_TYPE_IP, data=ip
    )
    return bytes(frame)


def udp(sport: int, dport: int, payload: bytes) -> bytes:
    datagram = dpkt.udp.UDP(sport=sport, dport=dport, data=payload)
    datagram.ulen = len(datagram)
    ip = dpkt.ip.IP(src=HOST, dst=HOST, p=dpkt.ip.IP_PROTO_UDP, ttl=64, data=datagram)
    ip.len = len(ip)
    return ethernet(ip)


class TcpConnection:
    """One TCP connection's frames, with real sequence and acknowledgement numbers."""

    def __init__(self, client_port: int, server_port: int, mss: int) -> None:
        self.ports = {"c": (client_port, server_port), "s": (server_port, client_port)}
        self.seq = {"c": 1_000_000 + client_port, "s": 7_000_000 + server_port}
        self.mss = mss

    def _segment(self, side: str, flags: int, payload: bytes = b"") -> bytes:
        other = "s" if side == "c" else "c"
        sport, dport = self.ports[side]
        segment = dpkt.tcp.TCP(
            sport=sport,
            dport=dport,
            seq=self.seq[side] & 0xFFFFFFFF,
            ack=self.seq[other] & 0xFFFFFFFF if flags & dpkt.tcp.TH_ACK else 0,
            flags=flags,
            win=65535,
            data=payload,
        )
        ip = dpkt.ip.IP(src=HOST, dst=HOST, p=dpkt.ip.IP_PROTO_TCP, ttl=64, data=segment)
        ip.len = len(ip)
        self.seq[side] += len(payload) + (1 if flags & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_FIN) else 0)
        return ethernet(ip)

    def open(self, time: float) -> list[Packet]:
        syn, ack = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK
        return [
            (time, self._segment("c", syn)),
            (time, self._segment("s", syn | ack)),
            (time, self._segment("c", ack)),
        ]

    def send(self, time: float, side: str, data: bytes) -> list[Packet]:
        """`data` from `side` ("c" client, "s" server) in segments of at most `mss` bytes."""
        flags = dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH
        return [
            (time, self._segment(side, flags, data[i : i + self.mss]))
            for i in range(0, len(data), self.mss)
        ]

    def close(self, time: float) -> list[Packet]:
        fin, ack = dpkt.tcp.TH_FIN | dpkt.tcp.TH_ACK, dpkt.tcp.TH_ACK
        return [
            (time, self._segment("c", fin)),
            (time, self._segment("s", fin)),
            (time, self._segment("c", ack)),
        ]


def write(path: Path, packets: list[Packet]) -> None:
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_EN10MB)
        for time, frame in packets:
            writer.writepkt(frame, ts=time)
    shown = path.relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
    print(f"{shown}: {len(packets)} frames")


def xrp(source: Path) -> Iterator[Packet]:
    client_port = 50_540
    for line in source.read_text().splitlines():
        time, direction, _, hex_data = line.split()
        data = bytes.fromhex(hex_data)
        if direction == "W>R":
            yield EPOCH + float(time), udp(client_port, XRP_PORT, data)
        else:
            yield EPOCH + float(time), udp(XRP_PORT, client_port, data)


def ugcs(source: Path) -> list[Packet]:
    packets: list[Packet] = []
    connections: dict[str, TcpConnection] = {}
    last = 0.0
    for line in source.read_text().splitlines():
        item = json.loads(line)
        time = EPOCH + float(item["t"])
        last = time
        conn = connections.get(item["conn"])
        if conn is None:
            conn = connections[item["conn"]] = TcpConnection(
                41_000 + len(connections), UGCS_PORT, mss=256
            )
            packets += conn.open(time)
        side = "c" if item["dir"] == "ucs->vsm" else "s"  # the UCS connects to the VSM
        packets += conn.send(time, side, bytes.fromhex(item["hex"]))
    for conn in connections.values():
        packets += conn.close(last)
    return packets


def spyglass(source: Path) -> list[Packet]:
    conn = TcpConnection(42_000, SPYGLASS_PORT, mss=1448)
    stream = bytearray()
    ends: list[tuple[int, float]] = []  # (stream offset after a packet, its time)
    for entry in iter_rec(str(source)):
        data = entry.data
        seconds = int.from_bytes(data[7:11], "big")
        milliseconds = int.from_bytes(data[11:13], "big")
        stream += data
        ends.append((len(stream), seconds + milliseconds / 1000))
    packets = conn.open(ends[0][1])
    at = 0
    for start in range(0, len(stream), conn.mss):
        chunk = bytes(stream[start : start + conn.mss])
        while at + 1 < len(ends) and ends[at + 1][0] <= start + len(chunk):
            at += 1
        packets += conn.send(ends[at][1], "s", chunk)
    return packets + conn.close(ends[-1][1])


def vrsp(example: Path) -> list[Packet]:
    sender_port = 50_742
    show = make_show(6, 0, {})
    session = SenderSession(rate=10.0, rng=random.Random(0))
    session.define(VRSP_ROOT, show_blocks(show), 0.0)
    packets: list[Packet] = []
    for step in range(16):
        now = step / 10
        for event in session.tick(now):
            if isinstance(event, FrameDue):
                session.send(show_swarm(show.state(event.time)))
        for data, _ in session.datagrams_to_send():
            packets.append((EPOCH + now, udp(sender_port, VRSP_PORT, data)))
    # Verge's example definition (pyro with two cues, a 2DOF red laser) for drones 1 and 2
    definition = definition_from_json(json.loads(example.read_text()))
    ids = np.array([1, 2], np.uint16)
    instance = 0x56455247
    root = VRSP_ROOT
    table = DefinitionTable.build(instance, root, [(definition, ids)])
    swarm = empty_swarm(2, len(definition.payloads))
    swarm.ids[:] = ids
    swarm.position[:] = [[1.5, 20.0, -3.25], [-1.5, 22.5, 4.0]]
    swarm.has_color[:] = True
    swarm.color[:] = [[255, 128, 0], [0, 64, 255]]
    swarm.has_heading[:] = [True, False]
    swarm.heading[:] = [90.0, 0.0]
    swarm.cue[:, 0] = [4, 0]
    swarm.cue_ms[:, 0] = [1250, 0]
    swarm.light[:, 1] = [[200, 0, 0], [0, 0, 0]]
    swarm.gimbal[:, 1] = [[1.0, 0.0, 0.0, 0.0], [0.70703125, 0.70703125, 0.0, 0.0]]
    time = EPOCH + 2.0
    for data in encode_def(instance, root, [(definition, ids)]):
        packets.append((time, udp(sender_port, VRSP_PORT, data)))
    for data in encode_data(table, swarm, 0):
        packets.append((time + 0.1, udp(sender_port, VRSP_PORT, data)))
    return packets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CAPTURES)
    out: Path = parser.parse_args().out
    data = ROOT / "tests" / "data"
    for name in ("xrp", "ugcs", "spyglass", "vrsp"):
        (out / name).mkdir(parents=True, exist_ok=True)
    write(out / "xrp" / "capture_normal.pcap", list(xrp(CAPTURES / "xrp" / "capture_normal.txt")))
    write(
        out / "ugcs" / "capture_hello_basic.pcap",
        ugcs(CAPTURES / "ugcs" / "capture_hello_basic.jsonl"),
    )
    write(
        out / "spyglass" / "recording-2009-05-28.pcap",
        spyglass(data / "spyglass" / "recording-2009-05-28.rec"),
    )
    write(
        out / "vrsp" / "lightshow.pcap", vrsp(CAPTURES / "vrsp" / "verge_example_definition.json")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
