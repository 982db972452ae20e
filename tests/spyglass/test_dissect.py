"""`robowire decode spyglass FILE`: .rec, raw streams and pcap captures, with bad bytes."""

from __future__ import annotations

import json
import socket
import tempfile
from collections import Counter
from pathlib import Path

import dpkt
from hypothesis import given, settings
from hypothesis import strategies as st
from spyglass_strategies import DATA, DEMO

from robowire.errors import ConfigError
from robowire.protocols.spyglass import codec as c
from robowire.protocols.spyglass.dissect import decode_capture
from robowire.protocols.spyglass.rec import looks_like_rec

TRAJECTORY = c.TrajectoryPacket3(
    semantic_type=40, sender=1, points=((0, 0, 0), (1, 2, 3)), durations=(4,)
)
BAD_PAYLOAD = bytes.fromhex("0014 02 02 0a 0001 00000000 0000 0000 0000 0000 000102")


def test_demo_recording() -> None:
    out = list(decode_capture(str(DEMO)))
    assert len(out) == 3773 and not any("error" in d for d in out)
    assert Counter(d["type"] for d in out) == {
        "Neighborhood-Packet": 3298,
        "Data-Packet": 329,
        "Coordinates-List-Packet-2": 83,
        "Trajectory-Packet-3": 63,
    }
    first = out[0]
    assert first == {
        "type": "Neighborhood-Packet",
        "offset": 0,
        "length": 27,
        "version": 2,
        "syntax_type": "uint16_list",
        "semantic_type": 10,
        "sender": 21,
        "seconds": 1243547390,
        "milliseconds": 944,
        "x": 748,
        "y": 621,
        "z": 0,
        "packet_time": 1243547390.944,
        "neighbors": [37, 40, 17, 8, 26],
    }
    assert out[1]["offset"] == 30
    trajectory = next(d for d in out if d["type"] == "Trajectory-Packet-3")
    assert trajectory["durations"] == [10, 10, 10] and len(trajectory["points"]) == 4
    json.dumps(out)


def test_rec_recognised_without_extension(tmp_path: Path) -> None:
    copy = tmp_path / "capture.bin"
    copy.write_bytes(DEMO.read_bytes()[:3000])
    assert looks_like_rec(copy.read_bytes()[:4])
    out = list(decode_capture(str(copy)))
    assert out[0]["type"] == "Neighborhood-Packet"
    assert "error" in out[-1] and "cut off" in out[-1]["error"]


def test_rec_bad_record_then_goes_on(tmp_path: Path) -> None:
    good = bytes([20]) + c.encode(DATA)
    bad_size = bytes([21]) + c.encode(DATA) + b"\x00"
    bad_payload = bytes([len(BAD_PAYLOAD)]) + BAD_PAYLOAD
    path = tmp_path / "x.rec"
    path.write_bytes(good + bad_size + bad_payload + good)
    out = list(decode_capture(str(path)))
    assert [d.get("type", "error") for d in out] == ["Data-Packet", "error", "error", "Data-Packet"]
    assert out[1]["offset"] == 21 and "does not match" in out[1]["error"]
    assert out[2]["offset"] == 43 + 1 + 19 and "UINT16_LIST" in out[2]["error"]
    assert out[3]["offset"] == 43 + 1 + len(BAD_PAYLOAD)


def test_raw_stream_payload_error_and_lost_framing(tmp_path: Path) -> None:
    broken = bytearray(c.encode(DATA))
    broken[3] = 9
    stream = c.encode(DATA) + BAD_PAYLOAD + c.encode(TRAJECTORY) + bytes(broken) + c.encode(DATA)
    path = tmp_path / "stream.bin"
    path.write_bytes(stream)
    out = list(decode_capture(str(path)))
    assert [d.get("type", "error") for d in out] == [
        "Data-Packet",
        "error",
        "Trajectory-Packet-3",
        "error",
    ]
    assert out[2]["offset"] == 20 + len(BAD_PAYLOAD)
    assert out[2]["points"] == [[0, 0, 0], [1, 2, 3]]
    assert "framing lost" in out[3]["error"] and "unknown syntax type 9" in out[3]["error"]
    assert out[3]["offset"] == out[2]["offset"] + out[2]["length"] + 2 + 3


def test_stream_ending_inside_a_packet(tmp_path: Path) -> None:
    path = tmp_path / "cut.bin"
    path.write_bytes(c.encode(DATA) + c.encode(DATA)[:7])
    out = list(decode_capture(str(path)))
    assert out[0]["type"] == "Data-Packet"
    assert out[1] == {"error": "capture ended inside a packet (7 bytes)", "offset": 20}


def _frame(payload: bytes, sport: int, dport: int, seq: int = 0, udp: bool = False) -> bytes:
    if udp:
        segment: dpkt.Packet = dpkt.udp.UDP(sport=sport, dport=dport, data=payload)
        segment.ulen = 8 + len(payload)
        proto = dpkt.ip.IP_PROTO_UDP
    else:
        segment = dpkt.tcp.TCP(
            sport=sport, dport=dport, seq=seq, flags=dpkt.tcp.TH_ACK, data=payload
        )
        proto = dpkt.ip.IP_PROTO_TCP
    ip = dpkt.ip.IP(
        src=socket.inet_aton("127.0.0.1"), dst=socket.inet_aton("127.0.0.2"), p=proto, data=segment
    )
    ip.len = len(bytes(ip))
    return bytes(dpkt.ethernet.Ethernet(src=b"\x00" * 6, dst=b"\x00" * 6, type=0x0800, data=ip))


def test_pcap_tcp_reassembled_and_udp(tmp_path: Path) -> None:
    stream = c.encode(DATA) + c.encode(TRAJECTORY) + c.encode(DATA)
    path = tmp_path / "cap.pcap"
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f)
        writer.writepkt(_frame(stream[:25], 5000, 7870, seq=1000), ts=10.0)
        writer.writepkt(_frame(c.encode(DATA), 6000, 7870, udp=True), ts=10.5)
        writer.writepkt(_frame(stream[25:], 5000, 7870, seq=1025), ts=11.0)
    out = list(decode_capture(str(path)))
    assert [(d["type"], d["offset"], d["time"]) for d in out] == [
        ("Data-Packet", 0, 10.0),
        ("Data-Packet", 0, 10.5),
        ("Trajectory-Packet-3", 20, 11.0),
        ("Data-Packet", 20 + len(c.encode(TRAJECTORY)), 11.0),
    ]
    assert out[0]["direction"] == "127.0.0.1:5000>127.0.0.2:7870"
    assert out[1]["direction"] == "127.0.0.1:6000>127.0.0.2:7870"


@given(st.binary(max_size=300), st.sampled_from([".rec", ".bin"]))
@settings(max_examples=60)
def test_random_files_give_only_dicts(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / f"random{suffix}"
        path.write_bytes(data)
        try:
            for item in decode_capture(str(path)):
                assert "type" in item or "error" in item
                json.dumps(item)
        except ConfigError as exc:  # the shared pcap reader on a file with a pcap magic
            assert "not a pcap" in str(exc)


def test_cut_pcap_gives_the_whole_frames_then_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcap"
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f)
        for i in range(3):
            writer.writepkt(_frame(c.encode(DATA), 6000, 7870, udp=True), ts=10.0 + i)
    frame_size = (len(path.read_bytes()) - 24) // 3  # after the 24-byte file header
    path.write_bytes(path.read_bytes()[: 24 + 2 * frame_size + 8])  # cut in the third header
    out = list(decode_capture(str(path)))
    assert [d.get("type", "error") for d in out] == ["Data-Packet", "Data-Packet", "error"]
    assert "cut" in out[-1]["error"] and out[-1]["offset"] > 0
