"""The viewer's binary state frame: encoder (numpy columns -> bytes) and decoder (bytes -> arrays).

Little-endian, every section 4-byte aligned (see docs/viewer.md and the viewer spec):

    header (16 B): u8 kind=1, u8 flags=0, u16 block_count, u32 frame_number, f64 server_time
    block header (8 B): u16 source_index, u16 sections, u32 n
      u32 slot[n], f32 position[n*3], f32 orientation[n*4], u8 colour[n*4], f32 heading[n],
      f32 geodetic[n*3], and if sections & 1: f32 beam[n*3]

Colour: the device's LED (`led_red/green/blue` telemetry, 0..255) with alpha 255, else its
kind's colour with alpha 0. Heading: the `heading` telemetry (degrees clockwise from north),
else the yaw of the orientation, else NaN. Beam: sent for sources with gimballed payloads.

The encoder writes each section straight into one preallocated buffer through numpy views
(one gather + cast per column, no loop per device). The decoder, used by tests and the bench,
checks every length before it makes a view and raises `DecodeError` on short or bad input.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from robowire import quaternions
from robowire.errors import DecodeError
from robowire.world.table import SlotArray, SourceTable

PROTOCOL = "viewer"
FRAME_KIND = 1
HEADER = struct.Struct("<BBHId")
BLOCK = struct.Struct("<HHI")
SECTION_BEAM = 1
BYTES_PER_DEVICE = 52
BEAM_BYTES = 12
MAX_BLOCKS = 0xFFFF

HEADING_FIELD = "heading"  # degrees clockwise from north, where a protocol reports it
LED_FIELDS = ("led_red", "led_green", "led_blue")  # 0..255
GIMBAL_SUFFIX = "_gimbal_w"  # payload<k>_gimbal_w/x/y/z: a gimballed payload (VRSP)

KIND_COLOURS: dict[str, tuple[int, int, int]] = {
    "drone": (51, 153, 255),
    "robot": (255, 153, 26),
    "xrp": (255, 153, 26),
    "ugcs": (230, 77, 77),
    "vehicle": (230, 77, 77),
    "tracker": (77, 230, 77),
    "rigid_body": (77, 230, 77),
    "sensor_node": (200, 120, 255),
    "object": (255, 220, 60),
}
OTHER_COLOUR = (200, 200, 200)

U8Array = npt.NDArray[np.uint8]
F32Array = npt.NDArray[np.float32]
U32Array = npt.NDArray[np.uint32]


class KindColours:
    """Each slot's kind colour for one table, extended as the table grows (a device's kind is
    looked up once, when it first appears)."""

    def __init__(self) -> None:
        self.rgb: U8Array = np.zeros((0, 3), dtype=np.uint8)

    def of(self, table: SourceTable) -> U8Array:
        known = len(self.rgb)
        if len(table) > known:
            new = [KIND_COLOURS.get(kind, OTHER_COLOUR) for kind in table.kinds[known:]]
            self.rgb = np.concatenate([self.rgb, np.array(new, dtype=np.uint8).reshape(-1, 3)])
        return self.rgb


def headings(table: SourceTable, slots: SlotArray) -> npt.NDArray[np.float64]:
    """Degrees clockwise from north: the `heading` telemetry where a device has it, else the
    yaw of its orientation (where it has one), else NaN."""
    reported = table.telemetry.get(HEADING_FIELD)
    value = reported[slots] if reported is not None else None
    if value is not None and not np.isnan(value).any():
        return value  # every device says its heading: no yaw to work out
    q = table.orientation[slots]
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    yaw = np.degrees(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))
    out = np.where(table.has_orientation[slots], np.mod(90.0 - yaw, 360.0), np.nan)
    if value is not None:
        out = np.where(np.isnan(value), out, value)
    return out


def gimbal_payloads(table: SourceTable) -> list[int]:
    """The payload slots k that have gimbal columns (`payload<k>_gimbal_w/x/y/z`)."""
    found = []
    for name in table.telemetry:
        k = name.removeprefix("payload").removesuffix(GIMBAL_SUFFIX)
        if name.startswith("payload") and name.endswith(GIMBAL_SUFFIX) and k.isdigit():
            found.append(int(k))
    return sorted(found)


def has_beam(table: SourceTable) -> bool:
    return any(name.endswith(GIMBAL_SUFFIX) for name in table.telemetry)


def beams(table: SourceTable, slots: SlotArray) -> npt.NDArray[np.float64]:
    """The unit ENU direction of each device's first lit gimballed light or laser, NaN where
    it has none (or it is dark). A gimbal's quaternion is relative to the body and turns the
    payload's forward axis (the wire's +Z, North in ENU) onto its aim: aim = body x gimbal."""
    n = len(slots)
    out = np.full((n, 3), np.nan)
    body = table.orientation[slots]
    for k in gimbal_payloads(table):
        columns = [table.telemetry.get(f"payload{k}_gimbal_{axis}") for axis in "wxyz"]
        if any(c is None for c in columns):
            continue
        gimbal = np.stack([c[slots] for c in columns if c is not None], axis=1)
        light = [
            table.telemetry[name][slots]
            for name in (f"payload{k}_{part}" for part in ("level", "red", "green", "blue"))
            if name in table.telemetry
        ]
        lit: npt.NDArray[np.bool_] = np.ones(n, dtype=bool)
        if light:
            lit = np.asarray((np.nan_to_num(np.stack(light, axis=1)) > 0).any(axis=1))
        w, x, y, z = quaternions.multiply(body, gimbal).T
        aim = np.stack(
            [2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)], axis=1
        )  # the rotated +y (North) axis
        use = np.isnan(out[:, 0]) & ~np.isnan(gimbal).any(axis=1) & lit
        out[use] = aim[use]
    return out


def block_size(n: int, beam: bool) -> int:
    return BLOCK.size + n * (BYTES_PER_DEVICE + (BEAM_BYTES if beam else 0))


@dataclass(frozen=True, slots=True)
class BlockSource:
    """What one block is made of: a table, the slots to send, and their kind colours."""

    index: int
    table: SourceTable
    slots: SlotArray
    kind_rgb: U8Array  # (len(table) or more, 3): the kind colour of every slot


def encode_frame(frame_number: int, server_time: float, blocks: Sequence[BlockSource]) -> bytes:
    """One state frame holding `blocks` (empty blocks are left out)."""
    blocks = [b for b in blocks if len(b.slots)]
    if len(blocks) > MAX_BLOCKS:
        raise ValueError(f"{len(blocks)} sources do not fit in one frame")
    beams = [has_beam(b.table) for b in blocks]
    total = HEADER.size + sum(
        block_size(len(b.slots), m) for b, m in zip(blocks, beams, strict=True)
    )
    buf = bytearray(total)
    HEADER.pack_into(buf, 0, FRAME_KIND, 0, len(blocks), frame_number & 0xFFFFFFFF, server_time)
    offset = HEADER.size
    # a value past float32 goes as inf, an infinite quaternion's heading as NaN (IEEE's
    # answers, as any peer's reader would take them), quietly
    with np.errstate(over="ignore", invalid="ignore"):
        for block, beam in zip(blocks, beams, strict=True):
            offset = _encode_block(buf, offset, block, beam)
    return bytes(buf)


def _view(
    buf: bytearray, dtype: str, offset: int, shape: tuple[int, ...]
) -> npt.NDArray[np.generic]:
    count = int(np.prod(shape))
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset).reshape(shape)


def _encode_block(buf: bytearray, offset: int, block: BlockSource, beam: bool) -> int:
    table, slots = block.table, block.slots
    n = len(slots)
    BLOCK.pack_into(buf, offset, block.index, SECTION_BEAM if beam else 0, n)
    offset += BLOCK.size
    _view(buf, "<u4", offset, (n,))[:] = slots
    offset += 4 * n
    _view(buf, "<f4", offset, (n, 3))[:] = table.position[slots]
    offset += 12 * n
    _view(buf, "<f4", offset, (n, 4))[:] = table.orientation[slots]
    offset += 16 * n
    colour = _view(buf, "u1", offset, (n, 4))
    led = [table.telemetry.get(name) for name in LED_FIELDS]
    if all(column is not None for column in led):
        rgb = np.stack([c[slots] for c in led if c is not None], axis=1)
        lit = np.asarray(~np.isnan(rgb).any(axis=1))
        np.clip(np.nan_to_num(rgb), 0, 255, out=rgb)
        colour[:, :3] = np.where(lit[:, None], rgb, block.kind_rgb[slots])
        colour[:, 3] = lit * np.uint8(255)
    else:
        colour[:, :3] = block.kind_rgb[slots]
    offset += 4 * n
    _view(buf, "<f4", offset, (n,))[:] = headings(table, slots)
    offset += 4 * n
    _view(buf, "<f4", offset, (n, 3))[:] = table.geodetic[slots]
    offset += 12 * n
    if beam:
        _view(buf, "<f4", offset, (n, 3))[:] = beams(table, slots)
        offset += 12 * n
    return offset


# -- decoding (tests, bench) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """One decoded block: views into the frame's bytes."""

    source_index: int
    sections: int
    slot: U32Array
    position: F32Array  # (n, 3)
    orientation: F32Array  # (n, 4)
    colour: U8Array  # (n, 4)
    heading: F32Array  # (n,)
    geodetic: F32Array  # (n, 3)
    beam: F32Array | None  # (n, 3)

    def __len__(self) -> int:
        return len(self.slot)


@dataclass(frozen=True, slots=True)
class Frame:
    frame_number: int
    server_time: float
    blocks: list[Block]


def decode_frame(data: bytes) -> Frame:
    """A state frame's blocks; DecodeError if it is short, of another kind, or has bytes left."""
    if len(data) < HEADER.size:
        raise DecodeError(PROTOCOL, 0, f"{len(data)} bytes is shorter than a frame header")
    kind, _flags, count, number, server_time = HEADER.unpack_from(data, 0)
    if kind != FRAME_KIND:
        raise DecodeError(PROTOCOL, 0, f"frame kind {kind}, expected {FRAME_KIND}")
    offset = HEADER.size
    blocks: list[Block] = []
    for _ in range(count):
        if len(data) - offset < BLOCK.size:
            raise DecodeError(PROTOCOL, offset, "block header cut short")
        index, sections, n = BLOCK.unpack_from(data, offset)
        beam = bool(sections & SECTION_BEAM)
        size = block_size(n, beam)
        if len(data) - offset < size:
            raise DecodeError(PROTOCOL, offset, f"block of {n} devices needs {size} bytes")
        offset += BLOCK.size

        def take(dtype: str, shape: tuple[int, ...]) -> npt.NDArray[np.generic]:
            nonlocal offset
            count = int(np.prod(shape))
            array = np.frombuffer(data, dtype=dtype, count=count, offset=offset).reshape(shape)
            offset += array.nbytes
            return array

        blocks.append(
            Block(
                index,
                sections,
                take("<u4", (n,)).astype(np.uint32),
                take("<f4", (n, 3)).astype(np.float32),
                take("<f4", (n, 4)).astype(np.float32),
                take("u1", (n, 4)).astype(np.uint8),
                take("<f4", (n,)).astype(np.float32),
                take("<f4", (n, 3)).astype(np.float32),
                take("<f4", (n, 3)).astype(np.float32) if beam else None,
            )
        )
    if offset != len(data):
        raise DecodeError(PROTOCOL, offset, f"{len(data) - offset} bytes after the last block")
    return Frame(number, server_time, blocks)
