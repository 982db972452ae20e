"""Capture readers: pcapng reads like pcap; file sources batch and pace records."""

from __future__ import annotations

import asyncio
from pathlib import Path

import dpkt
import pytest

from robowire.capture import Record, batches, read_capture, read_lines, read_pcap
from robowire.errors import DecodeError

VRPN_PCAP = Path(__file__).parents[1] / "data" / "captures" / "vrpn" / "tcp_tracker.pcap"


def test_pcapng_gives_the_same_records_as_pcap(tmp_path):
    converted = tmp_path / "same.pcapng"
    with open(VRPN_PCAP, "rb") as f, open(converted, "wb") as out:
        reader = dpkt.pcap.Reader(f)
        writer = dpkt.pcapng.Writer(out, linktype=reader.datalink())
        for timestamp, frame in reader:
            writer.writepkt(frame, ts=timestamp)
    original = list(read_pcap(str(VRPN_PCAP)))
    again = list(read_capture(str(converted)))
    assert len(original) > 10
    assert [(r.data, r.flow, r.transport) for r in again] == [
        (r.data, r.flow, r.transport) for r in original
    ]
    assert all(abs(a.time - b.time) < 1e-5 for a, b in zip(again, original, strict=True))


async def test_batches_unpaced_come_in_bulk():
    records = [Record(bytes([i % 256]), time=float(i)) for i in range(2500)]
    sizes = [len(b) async for b in batches(records)]
    assert sizes == [1024, 1024, 452]


async def test_batches_paced_follow_record_times_divided_by_speed():
    records = [Record(b"x", time=t) for t in (100.0, 100.0, 100.4, 100.8)]
    loop = asyncio.get_running_loop()
    seen: list[tuple[int, float]] = []
    start = loop.time()
    async for batch in batches(records, speed=2.0):
        seen.append((len(batch), loop.time() - start))
    assert [n for n, _ in seen] == [2, 1, 1]
    assert seen[1][1] == pytest.approx(0.2, abs=0.05) and seen[2][1] == pytest.approx(0.4, abs=0.05)


def test_a_text_capture_skips_comments_and_names_each_bad_line_with_its_offset(tmp_path):
    path = tmp_path / "capture.txt"
    path.write_bytes(b"# header\n\n1.5 ab\nnonsense\n" + b"x" * 40 + b"\n2.5 cd\n")
    errors: list[DecodeError] = []

    def parse(line: bytes) -> Record:
        time, hex_data = line.decode().split()
        return Record(bytes.fromhex(hex_data), float(time))

    records = list(read_lines(str(path), "demo", parse, "`<t> <hex>`", errors.append, 32))
    assert [(r.data, r.time) for r in records] == [(b"\xab", 1.5), (b"\xcd", 2.5)]
    assert [(e.offset, e.reason.split(":")[0]) for e in errors] == [(17, "line 4"), (26, "line 5")]
    assert "not `<t> <hex>`" in errors[0].reason and "longer than 32 bytes" in errors[1].reason
