from __future__ import annotations

import contextlib
import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from robowire.errors import DecodeError
from robowire.protocols.xrp import codec
from robowire.protocols.xrp.codec import (
    DIO,
    Accel,
    AnalogIn,
    Encoder,
    Gyro,
    Packet,
    UnknownBlock,
    XRPMotor,
    XRPServo,
    decode_packet,
    decode_status,
    encode_packet,
    encode_status,
)

f32 = st.floats(width=32, allow_nan=False)
u8 = st.integers(0, 255)
u32 = st.integers(0, 0xFFFFFFFF)
i32 = st.integers(-(2**31), 2**31 - 1)
KNOWN = {t.value for t in codec.Tag}

blocks = st.one_of(
    st.builds(XRPMotor, id=u8, value=f32),
    st.builds(XRPServo, id=u8, value=f32),
    st.builds(AnalogIn, id=u8, value=f32),
    st.builds(DIO, id=u8, value=u8),
    st.builds(Gyro, rate_x=f32, rate_y=f32, rate_z=f32, angle_x=f32, angle_y=f32, angle_z=f32),
    st.builds(Accel, x=f32, y=f32, z=f32),
    st.builds(Encoder, id=u8, count=i32, period=u32, divisor=u32),
    st.builds(Encoder, id=u8, count=i32),
    st.builds(
        UnknownBlock,
        tag=u8.filter(lambda t: t not in KNOWN),
        payload=st.binary(max_size=codec.MAX_PAYLOAD),
    ),
)
packets = st.builds(
    Packet, seq=st.integers(0, 0xFFFF), control=u8, blocks=st.lists(blocks, max_size=12).map(tuple)
)


@given(packets)
def test_round_trip(packet: Packet) -> None:
    data = encode_packet(packet)
    assert decode_packet(data) == packet
    assert encode_packet(decode_packet(data)) == data


@given(st.binary(max_size=300))
def test_random_bytes_raise_only_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode_packet(data)
    decode_status(data)  # the fast path never raises


@given(st.binary(min_size=3, max_size=200))
def test_random_blocks_raise_only_decode_error(body: bytes) -> None:
    try:
        decode_packet(b"\x00\x01\x01" + body)
    except DecodeError as exc:
        assert 0 <= exc.offset <= len(body) + 3


def test_fact_sheet_client_example() -> None:
    data = bytes.fromhex(
        "003b01"
        "0612003f000000"
        "061201be800000"
        "06120200000000"
        "06120300000000"
        "0613043ef73b80"
        "0613053f000000"
        "03140100"
    )
    packet = decode_packet(data)
    assert packet.seq == 0x3B and packet.control == 1
    assert packet.blocks[0] == XRPMotor(id=0, value=0.5)
    assert packet.blocks[1] == XRPMotor(id=1, value=-0.25)
    assert packet.blocks[-1] == DIO(id=1, value=0)
    assert encode_packet(packet) == data


def test_fact_sheet_robot_example() -> None:
    data = bytes.fromhex(
        "001d00"
        "0e1800000000e10000927d008f0d18"
        "0e1801ffffff94000124f8008f0d18"
        "0e180200000000ffffffff008f0d18"
        "0e180300000000ffffffff008f0d18"
        "03140001"
        "19163f000000bf000000412000004480a0004000000040a00000"
        "0d173c23d70a3ca3d70a3f800000"
        "0615003fa00000"
        "06150140200000"
        "06150240700000"
    )
    packet = decode_packet(data)
    enc0, enc1, enc2 = packet.blocks[:3]
    assert isinstance(enc0, Encoder) and enc0.count == 225
    assert enc0.period_seconds == pytest.approx((0x927D >> 1) / 9_375_000)
    assert isinstance(enc1, Encoder) and enc1.count == -108 and enc1.period_seconds < 0
    assert isinstance(enc2, Encoder) and enc2.period == codec.NO_PERIOD
    assert packet.blocks[5] == Gyro(
        rate_x=0.5, rate_y=-0.5, rate_z=10.0, angle_x=1029.0, angle_y=2.0, angle_z=5.0
    )
    assert packet.blocks[-1] == AnalogIn(id=2, value=3.75)
    fast = decode_status(data)
    assert fast is not None and fast[0] == 0x1D
    assert codec.status_blocks(fast[1]) == packet.blocks
    assert encode_status(fast[0], fast[1]) == data


@pytest.mark.parametrize(
    ("hex_data", "reason"),
    [
        ("0001", "shorter than 3"),
        ("00010100", "zero-size"),
        ("0001010612003f00", "past the end"),
        ("0001010316aabb", "GYRO block"),
        ("00010102140a", "DIO block"),
    ],
)
def test_bad_input(hex_data: str, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        decode_packet(bytes.fromhex(hex_data))


def test_longer_blocks_are_read_and_extra_bytes_ignored() -> None:
    data = bytes.fromhex("0001000812013f800000aaaa")
    assert decode_packet(data).blocks == (XRPMotor(id=1, value=1.0),)


def test_legacy_encoder_block() -> None:
    data = bytes.fromhex("00020006180100000010")
    assert decode_packet(data).blocks == (Encoder(id=1, count=16),)


def test_status_fast_path_refuses_other_layouts() -> None:
    packet = Packet(seq=1, control=0, blocks=(AnalogIn(id=0, value=1.0),) * 18)
    data = encode_packet(packet)[: codec.STATUS_SIZE]
    assert len(data) == codec.STATUS_SIZE
    assert decode_status(data) is None


def _golden_block(block: dict[str, object]) -> object:
    tag = int(str(block["tag"]), 16)
    if tag == codec.Tag.GYRO:
        return Gyro(
            **dict(
                zip(
                    ("rate_x", "rate_y", "rate_z", "angle_x", "angle_y", "angle_z"),
                    block["v"],
                    strict=True,
                )
            )
        )  # type: ignore[arg-type]
    if tag == codec.Tag.ACCEL:
        return Accel(**dict(zip("xyz", block["v"], strict=True)))  # type: ignore[arg-type]
    if tag == codec.Tag.ENCODER:
        return Encoder(
            id=block["id"], count=block["count"], period=block["period"], divisor=block["divisor"]
        )  # type: ignore[arg-type]
    cls = {0x12: XRPMotor, 0x13: XRPServo, 0x14: DIO, 0x15: AnalogIn}[tag]
    return cls(id=block["id"], value=block["value"])  # type: ignore[arg-type]


def _flat(block: object) -> tuple[object, ...]:
    """Type name and field values; the golden file rounds floats to 6 decimals."""
    names = block.__slots__  # type: ignore[attr-defined]
    return (type(block).__name__, *(getattr(block, n) for n in names))


def test_golden_capture(captures) -> None:  # type: ignore[no-untyped-def]
    lines = (captures / "capture_normal.txt").read_text().splitlines()
    golden = [json.loads(x) for x in (captures / "capture_normal.jsonl").read_text().splitlines()]
    assert len(lines) == len(golden) > 700
    fast_hits = 0
    for line, expected in zip(lines, golden, strict=True):
        _t, direction, length, hex_data = line.split()
        data = bytes.fromhex(hex_data)
        assert len(data) == int(length)
        assert direction == expected["dir"]
        packet = decode_packet(data)
        assert packet.seq == expected["seq"] and packet.control == expected["ctrl"]
        want = [_flat(_golden_block(b)) for b in expected["blocks"]]
        got = [_flat(b) for b in packet.blocks]
        assert [g[0] for g in got] == [w[0] for w in want]
        for g, w in zip(got, want, strict=True):
            assert g[1:] == pytest.approx(w[1:], rel=1e-6, abs=5.01e-7)
        assert encode_packet(packet) == data
        if direction == "R>W":
            fast = decode_status(data)
            assert fast is not None
            assert codec.status_blocks(fast[1]) == packet.blocks
            fast_hits += 1
    assert fast_hits > 100


def test_struct_sizes() -> None:
    assert codec.STATUS_SIZE == 128
    assert struct.calcsize(">HB") == codec.HEADER_SIZE
    client = Packet(
        seq=0,
        control=0,
        blocks=(
            *(XRPMotor(id=i, value=0.0) for i in range(4)),
            XRPServo(id=4, value=0.5),
            XRPServo(id=5, value=0.5),
            DIO(id=1, value=0),
        ),
    )
    assert len(encode_packet(client)) == 49
