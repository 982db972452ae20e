"""VRPN Imager bodies, as far as the fact sheet describes them (§9).

Pixel data of Region messages stays raw bytes: VRPN sends them little-endian for u16/f32
(unlike every other field), and `pixels_array()` gives a numpy view with the right dtype.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import ClassVar, Self

import numpy as np
import numpy.typing as npt

from robowire.errors import DecodeError
from robowire.protocols.vrpn.codec import PROTOCOL
from robowire.protocols.vrpn.messages import (
    MAX_IMAGER_CHANNELS,
    Body,
    ImagerValueType,
    _need,
)

_DESCRIPTION_HEAD = struct.Struct(">iiii")
_CHANNEL = struct.Struct(">ffffI100s100s")
_RANGE = struct.Struct(">6H")
_REGION_HEAD = struct.Struct(">h6HH")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")

PIXEL_DTYPES: dict[int, np.dtype[np.generic]] = {
    ImagerValueType.U8: np.dtype("u1"),
    ImagerValueType.U16: np.dtype("<u2"),
    ImagerValueType.U12IN16: np.dtype("<u2"),
    ImagerValueType.F32: np.dtype("<f4"),
}


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagerChannel:
    """One channel of an imager description (names are fixed 100-byte fields on the wire)."""

    name: str = ""
    units: str = ""
    minimum: float = 0.0
    maximum: float = 0.0
    offset: float = 0.0
    scale: float = 1.0
    compression: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagerDescription(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Imager Description"
    depth: int = 1
    rows: int = 0
    columns: int = 0
    channels: tuple[ImagerChannel, ...] = field(default=())

    def encode(self) -> bytes:
        n = len(self.channels)
        out = [_DESCRIPTION_HEAD.pack(self.depth, self.rows, self.columns, n)]
        for c in self.channels:
            out.append(
                _CHANNEL.pack(
                    c.minimum,
                    c.maximum,
                    c.offset,
                    c.scale,
                    c.compression,
                    c.name.encode()[:99],
                    c.units.encode()[:99],
                )
            )
        return b"".join(out)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 16, cls.WIRE_NAME)
        depth, rows, columns, n = _DESCRIPTION_HEAD.unpack_from(body)
        if not 0 <= n <= MAX_IMAGER_CHANNELS:
            raise DecodeError(PROTOCOL, 12, f"imager channel count {n} is not 0..10")
        _need(body, 16 + _CHANNEL.size * n, cls.WIRE_NAME)
        channels = []
        for i in range(n):
            lo, hi, off, scale, comp, name, units = _CHANNEL.unpack_from(body, 16 + 220 * i)
            channels.append(
                ImagerChannel(
                    name=_text(name),
                    units=_text(units),
                    minimum=lo,
                    maximum=hi,
                    offset=off,
                    scale=scale,
                    compression=comp,
                )
            )
        return cls(depth=depth, rows=rows, columns=columns, channels=tuple(channels))


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagerBeginFrame(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Imager Begin_Frame"
    d_min: int = 0
    d_max: int = 0
    r_min: int = 0
    r_max: int = 0
    c_min: int = 0
    c_max: int = 0

    def encode(self) -> bytes:
        return _RANGE.pack(self.d_min, self.d_max, self.r_min, self.r_max, self.c_min, self.c_max)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 12, cls.WIRE_NAME)
        d0, d1, r0, r1, c0, c1 = _RANGE.unpack_from(body)
        return cls(d_min=d0, d_max=d1, r_min=r0, r_max=r1, c_min=c0, c_max=c1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagerEndFrame(ImagerBeginFrame):
    WIRE_NAME: ClassVar[str] = "vrpn_Imager End_Frame"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagerDiscardedFrames(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Imager Discarded_Frames"
    count: int

    def encode(self) -> bytes:
        return _U16.pack(self.count)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 2, cls.WIRE_NAME)
        return cls(count=_U16.unpack_from(body)[0])


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagerThrottleFrames(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Imager Throttle_Frames"
    frames_to_send: int  # -1: no throttling

    def encode(self) -> bytes:
        return _I32.pack(self.frames_to_send)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 4, cls.WIRE_NAME)
        return cls(frames_to_send=_I32.unpack_from(body)[0])


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagerRegion(Body):
    """A block of pixels of one channel; `pixels` raw, little-endian for 16/32-bit values."""

    WIRE_NAME: ClassVar[str] = "vrpn_Imager Regionu8"
    VALUE_TYPE: ClassVar[int] = ImagerValueType.U8
    channel: int = 0
    d_min: int = 0
    d_max: int = 0
    r_min: int = 0
    r_max: int = 0
    c_min: int = 0
    c_max: int = 0
    value_type: int = ImagerValueType.U8
    pixels: bytes = b""

    def encode(self) -> bytes:
        head = _REGION_HEAD.pack(
            self.channel,
            self.d_min,
            self.d_max,
            self.r_min,
            self.r_max,
            self.c_min,
            self.c_max,
            self.value_type,
        )
        return head + self.pixels

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 16, cls.WIRE_NAME)
        ch, d0, d1, r0, r1, c0, c1, vt = _REGION_HEAD.unpack_from(body)
        return cls(
            channel=ch,
            d_min=d0,
            d_max=d1,
            r_min=r0,
            r_max=r1,
            c_min=c0,
            c_max=c1,
            value_type=vt,
            pixels=bytes(body[16:]),
        )

    def pixels_array(self) -> npt.NDArray[np.generic]:
        dtype = PIXEL_DTYPES.get(self.value_type, np.dtype("u1"))
        usable = len(self.pixels) - len(self.pixels) % dtype.itemsize
        return np.frombuffer(self.pixels[:usable], dtype=dtype)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagerRegionU16(ImagerRegion):
    WIRE_NAME: ClassVar[str] = "vrpn_Imager Regionu16"
    value_type: int = ImagerValueType.U16


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagerRegionU12In16(ImagerRegion):
    WIRE_NAME: ClassVar[str] = "vrpn_Imager Regionu12in16"
    value_type: int = ImagerValueType.U12IN16


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagerRegionF32(ImagerRegion):
    WIRE_NAME: ClassVar[str] = "vrpn_Imager Regionf32"
    value_type: int = ImagerValueType.F32


IMAGER_TYPES: tuple[type[Body], ...] = (
    ImagerDescription,
    ImagerBeginFrame,
    ImagerEndFrame,
    ImagerDiscardedFrames,
    ImagerThrottleFrames,
    ImagerRegion,
    ImagerRegionU16,
    ImagerRegionU12In16,
    ImagerRegionF32,
)
