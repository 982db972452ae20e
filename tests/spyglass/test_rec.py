"""`.rec` files: the demo recording made by the original SpyGlass as a golden vector, and the
reader/writer on their own."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spyglass_strategies import DEMO, PROFILE, packets

from robowire.errors import DecodeError
from robowire.protocols.spyglass import codec as c
from robowire.protocols.spyglass import rec


def test_demo_recording_golden() -> None:
    """The fact sheet's figures for the recording SpyGlass itself wrote in 2009."""
    packets = list(rec.read_rec(DEMO))
    assert len(packets) == 3773
    by_kind = Counter((type(p).__name__, p.semantic_type) for p in packets)
    assert by_kind == {
        ("NeighborhoodPacket", 10): 3298,
        ("DataPacket", 20): 329,
        ("CoordinatesList2Packet", 30): 83,
        ("TrajectoryPacket3", 40): 63,
    }
    senders = {
        sem: {p.sender for p in packets if p.semantic_type == sem} for sem in (10, 20, 30, 40)
    }
    assert {sem: len(s) for sem, s in senders.items()} == {10: 49, 20: 97, 30: 1, 40: 1}
    assert senders[30] == {150} and senders[40] == {1}
    data = [p for p in packets if isinstance(p, c.DataPacket)]
    assert all(p.syntax_type == c.SyntaxType.UINT8_LIST and len(p.values) == 1 for p in data)
    trajectories = [p for p in packets if isinstance(p, c.TrajectoryPacket3)]
    assert all(d == 10 for p in trajectories for d in p.durations)
    coordinates = [p for p in packets if isinstance(p, c.CoordinatesList2Packet)]
    assert all(len(p.points) == 5 for p in coordinates)
    assert packets[0].seconds == 1243547390
    assert packets[-1].time - packets[0].time == pytest.approx(380.03, abs=0.01)
    # Byte for byte: our encoder writes the same file.
    out = io.BytesIO()
    assert rec.write_rec(out, packets) == 3773
    assert out.getvalue() == DEMO.read_bytes()


def test_demo_recording_as_a_live_stream() -> None:
    records = list(rec.rec_records(DEMO))
    assert len(records) == 3773 and records[0].time == pytest.approx(1243547390.944)
    stream = b"".join(r.data for r in records)
    starts, end, error = c.split(stream)
    assert error is None and end == len(stream) == 112319 - 3773
    decoded = c.decode_batch(stream, starts, end)
    assert decoded == list(rec.read_rec(DEMO))


def test_writer_refuses_big_packets(tmp_path: Path) -> None:
    big = c.DataPacket(
        semantic_type=1, sender=1, syntax_type=c.SyntaxType.UINT8_LIST, values=(0,) * 237
    )
    small = c.DataPacket(
        semantic_type=1, sender=1, syntax_type=c.SyntaxType.UINT8_LIST, values=(0,) * 236
    )
    path = tmp_path / "x.rec"
    with rec.RecWriter(path) as writer:
        writer.write(small)
        with pytest.raises(rec.RecordTooLarge, match=r"256 bytes does not fit a \.rec record"):
            writer.write(c.encode(big) + b"")
    assert path.read_bytes() == bytes([255]) + c.encode(small)
    with pytest.raises(ValueError, match="not a whole SpyGlass packet"):
        rec.rec_record(b"\x00\x05" + bytes(17))
    rec.write_rec(path, [small], append=True)
    assert list(rec.read_rec(str(path))) == [small, small]


def test_reader_errors() -> None:
    good = rec.rec_record(
        c.decode(bytes.fromhex("0011 02 00 05 0001 00000001 0002 0000 0000 0000"))
    )
    entries = list(rec.iter_rec(io.BytesIO(good + bytes([20]) + good[1:] + b"\x00")))
    assert [e.offset for e in entries] == [0, 20]
    entries[0].check()
    with pytest.raises(DecodeError, match="does not match"):
        entries[1].check()
    with pytest.raises(DecodeError, match="cut off") as info:
        list(rec.iter_rec(io.BytesIO(good + good[:5])))
    assert info.value.offset == 20
    with pytest.raises(DecodeError, match="shorter than a header"):
        list(rec.read_rec(io.BytesIO(b"\x02\x00\x00")))


def test_reader_streams_across_chunks() -> None:
    data = DEMO.read_bytes()
    entries = list(rec.iter_rec(io.BytesIO(data), chunk_size=7))
    assert len(entries) == 3773 and entries[-1].offset + 1 + len(entries[-1].data) == len(data)


@given(st.lists(packets(), max_size=10))
def test_round_trip(batch: list[c.SpyglassPacket]) -> None:
    small = [p for p in batch if len(c.encode(p)) <= 255]
    out = io.BytesIO()
    rec.write_rec(out, small)
    out.seek(0)
    assert list(rec.read_rec(out, profile=PROFILE)) == small


@given(st.binary(max_size=200))
def test_random_bytes_raise_only_decode_error(data: bytes) -> None:
    try:
        for _ in rec.read_rec(io.BytesIO(data), profile=PROFILE):
            pass
    except DecodeError:
        pass
