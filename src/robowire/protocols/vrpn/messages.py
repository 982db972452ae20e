"""Typed VRPN message bodies, one dataclass per wire message type (fact sheet §9).

Each class names its wire type string in `WIRE_NAME` (what sender/type descriptions carry),
keeps fields in wire units and order (quaternions are x, y, z, w as on the wire), and has
`encode() -> bytes` and `decode(body) -> instance`; `decode` raises only DecodeError.
System messages (negative types) are here too; they carry an id in the header's sender field.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, Self

from robowire.errors import DecodeError
from robowire.protocols.vrpn.codec import (
    PROTOCOL,
)

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]  # x, y, z, w (wire order)
IDENTITY: Quat = (0.0, 0.0, 0.0, 1.0)
ZERO3: Vec3 = (0.0, 0.0, 0.0)

MAX_ANALOG_CHANNELS = 128  # vrpn_CHANNEL_MAX
MAX_BUTTONS = 256  # vrpn_BUTTON_MAX_BUTTONS
TEXT_PAYLOAD = 1032  # u32 severity, u32 level, char text[1024]
TEXT_MAX = 1023
MAX_IMAGER_CHANNELS = 10


class TextSeverity(IntEnum):
    NORMAL = 0
    WARNING = 1
    ERROR = 2


class ButtonMode(IntEnum):
    MOMENTARY = 10
    TOGGLE_OFF = 20
    TOGGLE_ON = 21


class ImagerValueType(IntEnum):
    U8 = 1
    U16 = 4
    U12IN16 = 5
    F32 = 6


ALL_BUTTONS = -99


def _need(body: bytes, size: int, name: str) -> None:
    if len(body) < size:
        raise DecodeError(PROTOCOL, len(body), f"{name} body is {len(body)} bytes, needs {size}")


class Body:
    """Base of every message body."""

    WIRE_NAME: ClassVar[str] = ""
    __slots__ = ()

    def encode(self) -> bytes:
        raise NotImplementedError

    @classmethod
    def decode(cls, body: bytes) -> Self:
        raise NotImplementedError


# -- tracker ---------------------------------------------------------------------------------

_SENSOR_POSE = struct.Struct(">ii3d4d")
_SENSOR_MOTION = struct.Struct(">ii3d4dd")
_POSE = struct.Struct(">3d4d")
_WORKSPACE = struct.Struct(">6d")
_F64 = struct.Struct(">d")


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackerPosQuat(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Tracker Pos_Quat"
    sensor: int
    position: Vec3 = ZERO3
    quaternion: Quat = IDENTITY

    def encode(self) -> bytes:
        # the i32 after the sensor is alignment filler; C++ writes the sensor there again
        return _SENSOR_POSE.pack(self.sensor, self.sensor, *self.position, *self.quaternion)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 64, cls.WIRE_NAME)
        v = _SENSOR_POSE.unpack_from(body)
        return cls(sensor=v[0], position=v[2:5], quaternion=v[5:9])


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackerVelocity(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Tracker Velocity"
    sensor: int
    velocity: Vec3 = ZERO3
    velocity_quaternion: Quat = IDENTITY
    velocity_quaternion_dt: float = 0.0

    def encode(self) -> bytes:
        return _SENSOR_MOTION.pack(
            self.sensor,
            self.sensor,
            *self.velocity,
            *self.velocity_quaternion,
            self.velocity_quaternion_dt,
        )

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 72, cls.WIRE_NAME)
        v = _SENSOR_MOTION.unpack_from(body)
        return cls(
            sensor=v[0], velocity=v[2:5], velocity_quaternion=v[5:9], velocity_quaternion_dt=v[9]
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackerAcceleration(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Tracker Acceleration"
    sensor: int
    acceleration: Vec3 = ZERO3
    acceleration_quaternion: Quat = IDENTITY
    acceleration_quaternion_dt: float = 0.0

    def encode(self) -> bytes:
        return _SENSOR_MOTION.pack(
            self.sensor,
            self.sensor,
            *self.acceleration,
            *self.acceleration_quaternion,
            self.acceleration_quaternion_dt,
        )

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 72, cls.WIRE_NAME)
        v = _SENSOR_MOTION.unpack_from(body)
        return cls(
            sensor=v[0],
            acceleration=v[2:5],
            acceleration_quaternion=v[5:9],
            acceleration_quaternion_dt=v[9],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackerToRoom(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Tracker To_Room"
    position: Vec3 = ZERO3
    quaternion: Quat = IDENTITY

    def encode(self) -> bytes:
        return _POSE.pack(*self.position, *self.quaternion)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 56, cls.WIRE_NAME)
        v = _POSE.unpack_from(body)
        return cls(position=v[0:3], quaternion=v[3:7])


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackerUnitToSensor(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Tracker Unit_To_Sensor"
    sensor: int
    position: Vec3 = ZERO3
    quaternion: Quat = IDENTITY

    def encode(self) -> bytes:
        return _SENSOR_POSE.pack(self.sensor, 0, *self.position, *self.quaternion)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 64, cls.WIRE_NAME)
        v = _SENSOR_POSE.unpack_from(body)
        return cls(sensor=v[0], position=v[2:5], quaternion=v[5:9])


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackerWorkspace(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Tracker Workspace"
    minimum: Vec3 = ZERO3
    maximum: Vec3 = ZERO3

    def encode(self) -> bytes:
        return _WORKSPACE.pack(*self.minimum, *self.maximum)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 48, cls.WIRE_NAME)
        v = _WORKSPACE.unpack_from(body)
        return cls(minimum=v[0:3], maximum=v[3:6])


class _Empty(Body):
    """A message whose body is empty (requests, ping, pong)."""

    __slots__ = ()

    def encode(self) -> bytes:
        return b""

    @classmethod
    def decode(cls, body: bytes) -> Self:
        return cls()


@dataclass(frozen=True, slots=True)
class TrackerRequestToRoom(_Empty):
    WIRE_NAME: ClassVar[str] = "vrpn_Tracker Request_Tracker_To_Room"


@dataclass(frozen=True, slots=True)
class TrackerRequestUnitToSensor(_Empty):
    WIRE_NAME: ClassVar[str] = "vrpn_Tracker Request_Unit_To_Sensor"


@dataclass(frozen=True, slots=True)
class TrackerRequestWorkspace(_Empty):
    WIRE_NAME: ClassVar[str] = "vrpn_Tracker Request_Tracker_Workspace"


@dataclass(frozen=True, slots=True)
class TrackerResetOrigin(_Empty):
    WIRE_NAME: ClassVar[str] = "vrpn_Tracker Reset_Origin"


@dataclass(frozen=True, slots=True, kw_only=True)
class TrackerSetUpdateRate(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Tracker set_update_rate"
    rate: float  # samples per second

    def encode(self) -> bytes:
        return _F64.pack(self.rate)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 8, cls.WIRE_NAME)
        return cls(rate=_F64.unpack_from(body)[0])


# -- analog ----------------------------------------------------------------------------------


def _f64s(body: bytes, offset: int, count: int) -> tuple[float, ...]:
    return struct.unpack_from(f">{count}d", body, offset)


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalogChannel(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Analog Channel"
    channels: tuple[float, ...] = ()

    def encode(self) -> bytes:
        n = len(self.channels)
        if n > MAX_ANALOG_CHANNELS:
            raise ValueError(f"{n} analog channels exceed {MAX_ANALOG_CHANNELS}")
        return struct.pack(f">{n + 1}d", float(n), *self.channels)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 8, cls.WIRE_NAME)
        count = _F64.unpack_from(body)[0]  # the channel count travels as a double
        if not (0 <= count <= MAX_ANALOG_CHANNELS) or count != int(count):
            raise DecodeError(PROTOCOL, 0, f"analog channel count {count!r} is not 0..128")
        n = int(count)
        _need(body, 8 + 8 * n, cls.WIRE_NAME)
        return cls(channels=_f64s(body, 8, n))


_CHANNEL_VALUE = struct.Struct(">iid")
_I32 = struct.Struct(">i")
_I32_PAIR = struct.Struct(">ii")


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalogOutputChangeRequest(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Analog_Output Change_request"
    channel: int
    value: float

    def encode(self) -> bytes:
        return _CHANNEL_VALUE.pack(self.channel, 0, self.value)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 16, cls.WIRE_NAME)
        channel, _, value = _CHANNEL_VALUE.unpack_from(body)
        return cls(channel=channel, value=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalogOutputChangeChannelsRequest(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Analog_Output Change_Channels_request"
    values: tuple[float, ...] = ()

    def encode(self) -> bytes:
        n = len(self.values)
        if n > MAX_ANALOG_CHANNELS:
            raise ValueError(f"{n} analog output channels exceed {MAX_ANALOG_CHANNELS}")
        return _I32_PAIR.pack(n, 0) + struct.pack(f">{n}d", *self.values)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 8, cls.WIRE_NAME)
        n = _I32.unpack_from(body)[0]
        if not 0 <= n <= MAX_ANALOG_CHANNELS:
            raise DecodeError(PROTOCOL, 0, f"analog output channel count {n} is not 0..128")
        _need(body, 8 + 8 * n, cls.WIRE_NAME)
        return cls(values=_f64s(body, 8, n))


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalogOutputNumChannelsReport(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Analog_Output Num_Channels_report"
    num_channels: int

    def encode(self) -> bytes:
        return _I32.pack(self.num_channels)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 4, cls.WIRE_NAME)
        return cls(num_channels=_I32.unpack_from(body)[0])


# -- button, dial ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ButtonChange(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Button Change"
    button: int
    state: int

    def encode(self) -> bytes:
        return _I32_PAIR.pack(self.button, self.state)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 8, cls.WIRE_NAME)
        button, state = _I32_PAIR.unpack_from(body)
        return cls(button=button, state=state)


@dataclass(frozen=True, slots=True, kw_only=True)
class ButtonStates(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Button States"
    states: tuple[int, ...] = ()

    def encode(self) -> bytes:
        n = len(self.states)
        if n > MAX_BUTTONS:
            raise ValueError(f"{n} buttons exceed {MAX_BUTTONS}")
        return struct.pack(f">{n + 1}i", n, *self.states)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 4, cls.WIRE_NAME)
        n = _I32.unpack_from(body)[0]
        if not 0 <= n <= MAX_BUTTONS:
            raise DecodeError(PROTOCOL, 0, f"button count {n} is not 0..256")
        _need(body, 4 + 4 * n, cls.WIRE_NAME)
        return cls(states=struct.unpack_from(f">{n}i", body, 4))


@dataclass(frozen=True, slots=True, kw_only=True)
class ButtonAdmin(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Button Admin"
    button: int  # ALL_BUTTONS (-99) for every button
    mode: int  # ButtonMode

    def encode(self) -> bytes:
        return _I32_PAIR.pack(self.button, self.mode)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 8, cls.WIRE_NAME)
        button, mode = _I32_PAIR.unpack_from(body)
        return cls(button=button, mode=mode)


@dataclass(frozen=True, slots=True, kw_only=True)
class ButtonAlert(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Button Alert"
    button: int
    mode: int

    def encode(self) -> bytes:
        return _I32_PAIR.pack(self.button, self.mode)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 8, cls.WIRE_NAME)
        button, mode = _I32_PAIR.unpack_from(body)
        return cls(button=button, mode=mode)


_DIAL = struct.Struct(">di")


@dataclass(frozen=True, slots=True, kw_only=True)
class DialUpdate(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Dial update"
    delta: float  # revolutions
    dial: int

    def encode(self) -> bytes:
        return _DIAL.pack(self.delta, self.dial)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 12, cls.WIRE_NAME)
        delta, dial = _DIAL.unpack_from(body)
        return cls(delta=delta, dial=dial)


# -- base: text, ping, pong ------------------------------------------------------------------

_TEXT_HEAD = struct.Struct(">II")


@dataclass(frozen=True, slots=True, kw_only=True)
class TextMessage(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Base text_message"
    text: str
    severity: int = TextSeverity.NORMAL
    level: int = 0

    def encode(self) -> bytes:
        raw = self.text.encode("utf-8")[:TEXT_MAX]
        # the payload is always the full 1032 bytes, as C++ peers send and expect
        return _TEXT_HEAD.pack(self.severity, self.level) + raw.ljust(TEXT_PAYLOAD - 8, b"\0")

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 9, cls.WIRE_NAME)
        severity, level = _TEXT_HEAD.unpack_from(body)
        raw = body[8:TEXT_PAYLOAD].split(b"\0", 1)[0]
        return cls(text=raw.decode("utf-8", "replace"), severity=severity, level=level)


@dataclass(frozen=True, slots=True)
class Ping(_Empty):
    WIRE_NAME: ClassVar[str] = "vrpn_Base ping_message"


@dataclass(frozen=True, slots=True)
class Pong(_Empty):
    WIRE_NAME: ClassVar[str] = "vrpn_Base pong_message"


# -- poser -----------------------------------------------------------------------------------

_POSE_VEL = struct.Struct(">3d4dd")


@dataclass(frozen=True, slots=True, kw_only=True)
class PoserRequestPosQuat(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Poser Request Pos_Quat"
    position: Vec3 = ZERO3
    quaternion: Quat = IDENTITY

    def encode(self) -> bytes:
        return _POSE.pack(*self.position, *self.quaternion)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 56, cls.WIRE_NAME)
        v = _POSE.unpack_from(body)
        return cls(position=v[0:3], quaternion=v[3:7])


@dataclass(frozen=True, slots=True, kw_only=True)
class PoserRequestRelativePosQuat(PoserRequestPosQuat):
    WIRE_NAME: ClassVar[str] = "vrpn_Poser Request Relative Pos_Quat"


@dataclass(frozen=True, slots=True, kw_only=True)
class PoserRequestVelocity(Body):
    WIRE_NAME: ClassVar[str] = "vrpn_Poser Request Velocity"
    velocity: Vec3 = ZERO3
    quaternion: Quat = IDENTITY
    dt: float = 0.0

    def encode(self) -> bytes:
        return _POSE_VEL.pack(*self.velocity, *self.quaternion, self.dt)

    @classmethod
    def decode(cls, body: bytes) -> Self:
        _need(body, 64, cls.WIRE_NAME)
        v = _POSE_VEL.unpack_from(body)
        return cls(velocity=v[0:3], quaternion=v[3:7], dt=v[7])


@dataclass(frozen=True, slots=True, kw_only=True)
class PoserRequestRelativeVelocity(PoserRequestVelocity):
    WIRE_NAME: ClassVar[str] = "vrpn_Poser Request Relative Velocity"
