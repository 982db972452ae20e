"""XRP (WPILib `halsim_xrp`) datagrams: header, tagged blocks, every tag in both directions.

Wire layout of one datagram (all multi-byte fields big-endian, floats IEEE-754 binary32):

    u16 sequence     per direction, independent counters
    u8  control      client -> robot: 1 = enabled; robot -> client: 0 (never read)
    blocks           [u8 size][u8 tag][payload of size-1 bytes] ...

`size` counts the tag and payload but not itself, so a block takes size + 1 bytes and its
payload is at most 254 bytes. Unknown tags are skipped by size (kept as `UnknownBlock`).
Known tags shorter than their layout are an error; longer ones are read and the extra bytes
ignored, as WPILib does (forward compatible). See docs/xrp.md and the fact sheet.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from operator import itemgetter
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from robowire.errors import DecodeError

PROTOCOL = "xrp"
DEFAULT_PORT = 3540
HEADER_SIZE = 3
MAX_BLOCK_SIZE = 255  # the size byte (tag + payload)
MAX_PAYLOAD = MAX_BLOCK_SIZE - 1
MAX_DATAGRAM = 8192  # the firmware's receive buffer; longer datagrams are cut by the robot
NO_PERIOD = 0xFFFFFFFF  # encoder period numerator meaning "no valid period"

_HEADER = struct.Struct(">HB")
_ID_F32 = struct.Struct(">Bf")
_ID_U8 = struct.Struct(">BB")
_GYRO = struct.Struct(">6f")
_ACCEL = struct.Struct(">3f")
_ENCODER = struct.Struct(">BiII")
_ENCODER_LEGACY = struct.Struct(">Bi")


class Tag(IntEnum):
    """Block tags (W `XRP::HandleXRPUpdate`, F `_processTaggedData`)."""

    MOTOR = 0x12
    SERVO = 0x13
    DIO = 0x14
    ANALOG = 0x15
    GYRO = 0x16
    ACCEL = 0x17
    ENCODER = 0x18


# -- blocks ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class XRPMotor:
    """Motor output, client -> robot. ids 0 left, 1 right, 2 motor3, 3 motor4; value -1..1."""

    WIRE_NAME: ClassVar[str] = "XRPMotor"
    TAG: ClassVar[Tag] = Tag.MOTOR
    id: int
    value: float


@dataclass(frozen=True, slots=True, kw_only=True)
class XRPServo:
    """Servo position, client -> robot. ids 4..7; value 0..1 (= angle / 180 deg)."""

    WIRE_NAME: ClassVar[str] = "XRPServo"
    TAG: ClassVar[Tag] = Tag.SERVO
    id: int
    value: float


@dataclass(frozen=True, slots=True, kw_only=True)
class DIO:
    """A digital channel: client -> robot for outputs (1 = LED), robot -> client 0 = button."""

    WIRE_NAME: ClassVar[str] = "DIO"
    TAG: ClassVar[Tag] = Tag.DIO
    id: int
    value: int  # 1 = true; anything else is false


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalogIn:
    """An analog input in volts (0..5), robot -> client. 0/1 reflectance, 2 rangefinder."""

    WIRE_NAME: ClassVar[str] = "AnalogIn"
    TAG: ClassVar[Tag] = Tag.ANALOG
    id: int
    value: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Gyro:
    """Gyro rates (deg/s) then roll/pitch/yaw angles (deg), robot -> client. No id byte."""

    WIRE_NAME: ClassVar[str] = "Gyro"
    TAG: ClassVar[Tag] = Tag.GYRO
    rate_x: float
    rate_y: float
    rate_z: float
    angle_x: float
    angle_y: float
    angle_z: float

    def values(self) -> tuple[float, float, float, float, float, float]:
        """Rates x, y, z then angles x, y, z, in wire order."""
        return (self.rate_x, self.rate_y, self.rate_z, self.angle_x, self.angle_y, self.angle_z)


@dataclass(frozen=True, slots=True, kw_only=True)
class Accel:
    """Accelerations in g (resting z is +1 g), robot -> client."""

    WIRE_NAME: ClassVar[str] = "Accel"
    TAG: ClassVar[Tag] = Tag.ACCEL
    x: float
    y: float
    z: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Encoder:
    """An encoder, robot -> client: ids 0 left, 1 right, 2 motor3, 3 motor4.

    `period` is the raw numerator `(period_ticks << 1) | forward` and `divisor` the ticks per
    second; `NO_PERIOD` (0xFFFFFFFF) means no valid period. Both None = the legacy count-only
    block (pre-2024 firmware, size 6).
    """

    WIRE_NAME: ClassVar[str] = "Encoder"
    TAG: ClassVar[Tag] = Tag.ENCODER
    id: int
    count: int
    period: int | None = None
    divisor: int | None = None

    @property
    def period_seconds(self) -> float | None:
        """Seconds per count, negative when reversing; None without a period or divisor."""
        if self.period is None or self.period >= NO_PERIOD - 1 or not self.divisor:
            return None  # 0xFFFFFFFE is "no period" of the left encoder (direction bit flipped)
        seconds = (self.period >> 1) / self.divisor
        return seconds if self.period & 1 else -seconds


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownBlock:
    """A block whose tag this codec does not know; skipped by size, kept for dissection."""

    WIRE_NAME: ClassVar[str] = "unknown"
    tag: int
    payload: bytes


Block = XRPMotor | XRPServo | DIO | AnalogIn | Gyro | Accel | Encoder | UnknownBlock


@dataclass(frozen=True, slots=True, kw_only=True)
class Packet:
    """One datagram: sequence, control byte and its blocks in wire order."""

    WIRE_NAME: ClassVar[str] = "XRP"
    seq: int
    control: int
    blocks: tuple[Block, ...] = field(default_factory=tuple)


# -- encoding ----------------------------------------------------------------------------------


def encode_block(block: Block) -> bytes:
    """One block with its size byte."""
    match block:
        case XRPMotor() | XRPServo() | AnalogIn():
            body = _ID_F32.pack(block.id, block.value)
        case DIO():
            body = _ID_U8.pack(block.id, block.value)
        case Gyro():
            body = _GYRO.pack(*block.values())
        case Accel():
            body = _ACCEL.pack(block.x, block.y, block.z)
        case Encoder():
            if block.period is None or block.divisor is None:
                body = _ENCODER_LEGACY.pack(block.id, block.count)
            else:
                body = _ENCODER.pack(block.id, block.count, block.period, block.divisor)
        case UnknownBlock():
            if len(block.payload) > MAX_PAYLOAD:
                raise ValueError(f"block payload of {len(block.payload)} bytes > {MAX_PAYLOAD}")
            return bytes((len(block.payload) + 1, block.tag)) + block.payload
    return bytes((len(body) + 1, block.TAG)) + body


def encode_packet(packet: Packet) -> bytes:
    """The datagram for `packet`."""
    return _HEADER.pack(packet.seq, packet.control) + b"".join(map(encode_block, packet.blocks))


# -- decoding ----------------------------------------------------------------------------------


def _short(payload_size: int, needed: int, tag: int, offset: int) -> DecodeError:
    return DecodeError(
        PROTOCOL, offset, f"{Tag(tag).name} block has {payload_size} payload bytes, needs {needed}"
    )


# plain ints: comparing against IntEnum members costs an attribute lookup per block
_MOTOR, _SERVO, _DIO, _ANALOG, _GYRO_TAG, _ACCEL_TAG, _ENCODER_TAG = (int(t) for t in Tag)
_ID_VALUE_CLASSES: dict[int, type[XRPMotor] | type[XRPServo] | type[AnalogIn]] = {
    _MOTOR: XRPMotor,
    _SERVO: XRPServo,
    _ANALOG: AnalogIn,
}
_unpack_id_f32 = _ID_F32.unpack_from
_unpack_id_u8 = _ID_U8.unpack_from


def decode_block(data: bytes, offset: int) -> tuple[Block, int]:
    """The block starting at `offset` and the offset just past it."""
    size = data[offset]
    if size == 0:
        raise DecodeError(PROTOCOL, offset, "zero-size block")
    end = offset + 1 + size
    if end > len(data):
        raise DecodeError(
            PROTOCOL, offset, f"block size {size} runs {end - len(data)} bytes past the end"
        )
    tag = data[offset + 1]
    start = offset + 2
    payload_size = size - 1
    block: Block
    cls = _ID_VALUE_CLASSES.get(tag)
    if cls is not None:
        if payload_size < 5:
            raise _short(payload_size, 5, tag, offset)
        ident, value = _unpack_id_f32(data, start)
        block = cls(id=ident, value=value)
    elif tag == _ENCODER_TAG:
        if payload_size >= 13:
            ident, count, period, divisor = _ENCODER.unpack_from(data, start)
            block = Encoder(id=ident, count=count, period=period, divisor=divisor)
        elif payload_size >= 5:
            ident, count = _ENCODER_LEGACY.unpack_from(data, start)
            block = Encoder(id=ident, count=count)
        else:
            raise _short(payload_size, 5, tag, offset)
    elif tag == _DIO:
        if payload_size < 2:
            raise _short(payload_size, 2, tag, offset)
        ident, value = _unpack_id_u8(data, start)
        block = DIO(id=ident, value=value)
    elif tag == _GYRO_TAG:
        if payload_size < 24:
            raise _short(payload_size, 24, tag, offset)
        rx, ry, rz, ax, ay, az = _GYRO.unpack_from(data, start)
        block = Gyro(rate_x=rx, rate_y=ry, rate_z=rz, angle_x=ax, angle_y=ay, angle_z=az)
    elif tag == _ACCEL_TAG:
        if payload_size < 12:
            raise _short(payload_size, 12, tag, offset)
        x, y, z = _ACCEL.unpack_from(data, start)
        block = Accel(x=x, y=y, z=z)
    else:
        block = UnknownBlock(tag=tag, payload=bytes(data[start:end]))
    return block, end


def decode_header(data: bytes) -> tuple[int, int]:
    """(sequence, control) of a datagram, or DecodeError if it is shorter than 3 bytes."""
    if len(data) < HEADER_SIZE:
        raise DecodeError(PROTOCOL, 0, f"datagram of {len(data)} bytes is shorter than 3")
    seq, control = _HEADER.unpack_from(data, 0)
    return seq, control


def decode_packet(data: bytes) -> Packet:
    """One datagram -> Packet; DecodeError on a short header or a malformed block."""
    seq, control = decode_header(data)
    if len(data) > MAX_DATAGRAM:
        raise DecodeError(PROTOCOL, MAX_DATAGRAM, f"datagram of {len(data)} bytes > {MAX_DATAGRAM}")
    blocks: list[Block] = []
    offset, end = HEADER_SIZE, len(data)
    while offset < end:
        block, offset = decode_block(data, offset)
        blocks.append(block)
    return Packet(seq=seq, control=control, blocks=tuple(blocks))


def decode_datagram(data: bytes) -> list[Packet]:
    """The datagram-codec form: a list with the one packet a datagram carries."""
    return [decode_packet(data)]


# -- the firmware's status layout, decoded in one struct call ---------------------------------

# Robot status as the firmware sends it (F `main.cpp sendData()`): encoders 0..3, DIO 0,
# gyro, accel, analog 0..2. 128 bytes. The client sees this layout on every packet, so it gets
# a fast path: one unpack, then a check that every size/tag/id byte is where the layout says.
_STATUS_FORMAT = ">HB" + "BBBiII" * 4 + "BBBB" + "BB6f" + "BB3f" + "BBBf" * 3
STATUS_STRUCT = struct.Struct(_STATUS_FORMAT)
STATUS_SIZE = STATUS_STRUCT.size
_SKELETON_INDEX: list[int] = []
_SKELETON: list[int] = []
_FIELD_INDEX: list[int] = []


def _build_status_layout() -> None:
    i = 2  # index of the next unpacked value (after seq, control)
    for ident in range(4):
        _SKELETON_INDEX.extend((i, i + 1, i + 2))
        _SKELETON.extend((14, Tag.ENCODER, ident))
        _FIELD_INDEX.extend((i + 3, i + 4, i + 5))
        i += 6
    _SKELETON_INDEX.extend((i, i + 1, i + 2))
    _SKELETON.extend((3, Tag.DIO, 0))
    _FIELD_INDEX.append(i + 3)
    i += 4
    _SKELETON_INDEX.extend((i, i + 1))
    _SKELETON.extend((25, Tag.GYRO))
    _FIELD_INDEX.extend(range(i + 2, i + 8))
    i += 8
    _SKELETON_INDEX.extend((i, i + 1))
    _SKELETON.extend((13, Tag.ACCEL))
    _FIELD_INDEX.extend(range(i + 2, i + 5))
    i += 5
    for ident in range(3):
        _SKELETON_INDEX.extend((i, i + 1, i + 2))
        _SKELETON.extend((6, Tag.ANALOG, ident))
        _FIELD_INDEX.append(i + 3)
        i += 4
    assert i == len(STATUS_STRUCT.unpack(bytes(STATUS_STRUCT.size)))


_build_status_layout()
_skeleton_of = itemgetter(*_SKELETON_INDEX)
_fields_of = itemgetter(*_FIELD_INDEX)
_SKELETON_TUPLE = tuple(_SKELETON)

STATUS_FIELDS = (
    *(f"encoder{i}_{f}" for i in range(4) for f in ("count", "period", "divisor")),
    "button",
    "rate_x",
    "rate_y",
    "rate_z",
    "angle_x",
    "angle_y",
    "angle_z",
    "accel_x",
    "accel_y",
    "accel_z",
    "analog0",
    "analog1",
    "analog2",
)
"""Names of the values `decode_status` returns, in order."""


def decode_status(data: bytes) -> tuple[int, Sequence[float]] | None:
    """(seq, values in STATUS_FIELDS order) if `data` has the firmware's exact status layout,
    else None (use `decode_packet`)."""
    if len(data) != STATUS_SIZE:
        return None
    values = STATUS_STRUCT.unpack(data)
    if _skeleton_of(values) != _SKELETON_TUPLE:
        return None
    return values[0], _fields_of(values)


def _value_offsets() -> list[tuple[int, str]]:
    """(byte offset, struct code) of each value `STATUS_STRUCT` unpacks, in order."""
    out, offset = [], 0
    for code in _STATUS_FORMAT[1:].replace("6f", "f" * 6).replace("3f", "f" * 3):
        out.append((offset, code))
        offset += struct.calcsize(">" + code)
    return out


_VALUE_OFFSETS = _value_offsets()
_NUMPY_TYPES = {"B": "u1", "H": ">u2", "i": ">i4", "I": ">u4", "f": ">f4"}
STATUS_DTYPE = np.dtype(
    {
        "names": ["seq", *STATUS_FIELDS],
        "formats": [_NUMPY_TYPES[_VALUE_OFFSETS[i][1]] for i in (0, *_FIELD_INDEX)],
        "offsets": [_VALUE_OFFSETS[i][0] for i in (0, *_FIELD_INDEX)],
        "itemsize": STATUS_SIZE,
    }
)
"""One status datagram as a numpy record: "seq" and `STATUS_FIELDS` in wire types, at their
byte offsets (read from `STATUS_STRUCT`'s format, so the two cannot drift apart)."""
_SKELETON_POSITIONS = np.array([_VALUE_OFFSETS[i][0] for i in _SKELETON_INDEX], np.intp)
_SKELETON_BYTES = np.array(_SKELETON, np.uint8)


def decode_statuses(datagrams: Sequence[bytes]) -> npt.NDArray[np.void] | None:
    """Many datagrams at once, when every one has the firmware's exact status layout (what
    `decode_status` takes): one `STATUS_DTYPE` row each, in order (columns "seq" and
    `STATUS_FIELDS`, wire types); None if any has not (decode those one by one)."""
    buffer = b"".join(datagrams)
    if len(buffer) != len(datagrams) * STATUS_SIZE:
        return None
    raw = np.frombuffer(buffer, np.uint8).reshape(len(datagrams), STATUS_SIZE)
    if not (raw[:, _SKELETON_POSITIONS] == _SKELETON_BYTES).all():
        return None
    return np.frombuffer(buffer, STATUS_DTYPE)


def status_blocks(values: Sequence[float]) -> tuple[Block, ...]:
    """The blocks of a fast-decoded status (for callers that want messages after all)."""
    blocks: list[Block] = [
        Encoder(
            id=i,
            count=int(values[3 * i]),
            period=int(values[3 * i + 1]),
            divisor=int(values[3 * i + 2]),
        )
        for i in range(4)
    ]
    blocks.append(DIO(id=0, value=int(values[12])))
    blocks.append(
        Gyro(
            rate_x=values[13],
            rate_y=values[14],
            rate_z=values[15],
            angle_x=values[16],
            angle_y=values[17],
            angle_z=values[18],
        )
    )
    blocks.append(Accel(x=values[19], y=values[20], z=values[21]))
    blocks.extend(AnalogIn(id=i, value=values[22 + i]) for i in range(3))
    return tuple(blocks)


def block_to_json(block: Block) -> dict[str, object]:
    """A JSON-ready dict of one block: its type name, tag and every field."""
    out: dict[str, object] = {"type": block.WIRE_NAME}
    if isinstance(block, UnknownBlock):
        out["tag"] = f"0x{block.tag:02x}"
        out["payload"] = block.payload.hex()
        return out
    out["tag"] = f"0x{block.TAG:02x}"
    for name in block.__slots__:
        out[name] = getattr(block, name)
    if isinstance(block, Encoder) and block.period_seconds is not None:
        out["period_seconds"] = block.period_seconds
    return out


_STATUS_TEMPLATE: list[float] = [0] * (2 + len(_SKELETON_INDEX) + len(_FIELD_INDEX))
for _index, _value in zip(_SKELETON_INDEX, _SKELETON, strict=True):
    _STATUS_TEMPLATE[_index] = int(_value)


def encode_status(seq: int, values: Sequence[float], control: int = 0) -> bytes:
    """The firmware's status datagram from values in STATUS_FIELDS order (counts, periods,
    divisors and the button as ints). The inverse of `decode_status`."""
    args = _STATUS_TEMPLATE.copy()
    args[0] = seq
    args[1] = control
    for index, value in zip(_FIELD_INDEX, values, strict=True):
        args[index] = value
    return STATUS_STRUCT.pack(*args)
