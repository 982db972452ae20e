"""The binary state frame: its byte layout checked by hand with `struct` at offsets computed
here from the spec, the beam direction of a gimballed payload, and the decoder's handling of
bad bytes (only `DecodeError`)."""

from __future__ import annotations

import contextlib
import math
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from robowire.errors import DecodeError
from robowire.viewer.frames import BlockSource, KindColours, decode_frame, encode_frame
from robowire.world import World


def two_robots() -> World:
    world = World()
    world.update_device(
        "robots", "a", kind="robot", receive_time=1.0, position=(1.5, -2.0, 0.25),
        orientation=(0.0, 0.0, 0.0, 1.0),  # turned 180 degrees: facing west
        geodetic=(10.0, 20.0, 30.0),
    )  # fmt: skip
    world.update_device(
        "robots", "b", kind="drone", receive_time=1.0, position=(7.0, 8.0, 9.0),
        telemetry={"led_red": (1.0, "1"), "led_green": (2.0, "1"), "led_blue": (3.0, "1")},
    )  # fmt: skip
    return world


def test_the_layout_byte_by_byte() -> None:
    world = two_robots()
    table = world.tables["robots"]
    slots = np.array([0, 1], dtype=np.intp)
    data = encode_frame(5, 1700000000.25, [BlockSource(3, table, slots, KindColours().of(table))])
    assert len(data) == 16 + 8 + 2 * 52
    assert struct.unpack_from("<BBHId", data, 0) == (1, 0, 1, 5, 1700000000.25)
    assert struct.unpack_from("<HHI", data, 16) == (3, 0, 2)
    assert struct.unpack_from("<2I", data, 24) == (0, 1)
    assert struct.unpack_from("<6f", data, 32) == (1.5, -2.0, 0.25, 7.0, 8.0, 9.0)
    assert struct.unpack_from("<8f", data, 56) == (0, 0, 0, 1, 1, 0, 0, 0)
    assert struct.unpack_from("<8B", data, 88) == (255, 153, 26, 0, 1, 2, 3, 255)
    heading_a, heading_b = struct.unpack_from("<2f", data, 96)
    assert heading_a == pytest.approx(270.0)  # west, clockwise from north
    assert math.isnan(heading_b)
    geodetic = struct.unpack_from("<6f", data, 104)
    assert geodetic[:3] == (10.0, 20.0, 30.0)
    assert all(math.isnan(v) for v in geodetic[3:])


def test_decode_gives_back_the_columns() -> None:
    world = two_robots()
    table = world.tables["robots"]
    slots = np.array([1], dtype=np.intp)
    frame = decode_frame(
        encode_frame(0, 0.0, [BlockSource(0, table, slots, KindColours().of(table))])
    )
    (block,) = frame.blocks
    assert block.slot.tolist() == [1]
    assert block.position.tolist() == [[7.0, 8.0, 9.0]]
    assert block.colour.tolist() == [[1, 2, 3, 255]]
    assert block.beam is None


def test_a_lit_gimballed_spotlight_gets_a_beam_and_a_dark_one_none() -> None:
    world = World()
    down = (math.cos(-math.pi / 4), math.sin(-math.pi / 4), 0.0, 0.0)  # north axis -> down
    for device, level in (("lit", 200.0), ("dark", 0.0)):
        world.update_device(
            "show", device, kind="drone", receive_time=1.0, position=(0, 0, 10),
            orientation=(1.0, 0.0, 0.0, 0.0),
            telemetry={
                "payload0_level": (level, "1"),
                **{f"payload0_gimbal_{a}": (v, "1") for a, v in zip("wxyz", down, strict=True)},
            },
        )  # fmt: skip
    world.update_device("show", "plain", kind="drone", receive_time=1.0, position=(0, 0, 0))
    table = world.tables["show"]
    slots = np.arange(3, dtype=np.intp)
    data = encode_frame(0, 0.0, [BlockSource(0, table, slots, KindColours().of(table))])
    assert len(data) == 16 + 8 + 3 * 64
    assert struct.unpack_from("<HHI", data, 16) == (0, 1, 3)
    beam = struct.unpack_from("<9f", data, 16 + 8 + 3 * 52)
    assert beam[:3] == pytest.approx((0.0, 0.0, -1.0), abs=1e-6)
    assert all(math.isnan(v) for v in beam[3:])


def test_empty_frame() -> None:
    data = encode_frame(9, 2.5, [])
    assert data == struct.pack("<BBHId", 1, 0, 0, 9, 2.5)
    assert decode_frame(data).blocks == []


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "shorter than a frame header"),
        (struct.pack("<BBHId", 2, 0, 0, 0, 0.0), "frame kind 2"),
        (struct.pack("<BBHId", 1, 0, 1, 0, 0.0), "block header cut short"),
        (struct.pack("<BBHIdHHI", 1, 0, 1, 0, 0.0, 0, 0, 1000), "needs"),
        (struct.pack("<BBHId", 1, 0, 0, 0, 0.0) + b"\0", "after the last block"),
    ],
)
def test_bad_frames_raise_decode_error(data: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        decode_frame(data)


@given(st.binary(max_size=400))
def test_random_bytes_only_raise_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode_frame(data)


@given(st.binary(max_size=300))
def test_random_bytes_after_a_valid_header(tail: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode_frame(struct.pack("<BBHId", 1, 0, 1, 0, 0.0) + tail)
