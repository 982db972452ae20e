"""CDR bytes of the ROS 2 messages `listen ros2://` reads -> columns (pure; no DDS import).

A sample is what a ROS 2 writer puts on DDS: the 4-byte encapsulation header `00 01 00 00`
(CDR, little-endian; XCDR1, as rmw_cyclonedds_cpp and rmw_fastrtps_cpp write it), then the
message, each primitive aligned to its size counted from the end of that header; a string is
a u32 length (its NUL included) and the bytes; a sequence a u32 count and its elements.

Every type decodes into one `Decoded`: rows of columns, one row per pose (a `TFMessage` has
one per transform, the other types one). Quaternions come out (w, x, y, z), robowire's order
(ROS writes x, y, z, w). Each length is checked against what is left before anything is read
or allocated; bad bytes raise only `DecodeError("ros2", offset, reason)`.

`/tf` is the hot path (1,000 transforms at 100 Hz is a normal load): a publisher sends the
same frames again and again, so `TfDecoder` remembers the layout of the last message it
parsed of each size (where each stamp and transform is, and the bytes of every string and
count) and reads the next one with the same layout in a few numpy gathers, after checking in
one comparison that those bytes are the same.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from robowire.errors import DecodeError

PROTOCOL = "ros2"
HEADER = 4  # the encapsulation header; alignment counts from its end
CDR_LE = b"\x00\x01"  # plain CDR, little-endian (XCDR1)
CDR_BE = b"\x00\x00"
TRANSFORM_MIN = 4 + 4 + 4 + 4 + 7 * 8  # the least bytes one TransformStamped takes
MAX_TRANSFORMS = 1 << 20

FloatArray = npt.NDArray[np.float64]

TF = "tf2_msgs/msg/TFMessage"
TRANSFORM = "geometry_msgs/msg/TransformStamped"
POSE = "geometry_msgs/msg/PoseStamped"
POSE_COVARIANCE = "geometry_msgs/msg/PoseWithCovarianceStamped"
ODOMETRY = "nav_msgs/msg/Odometry"
FIX = "sensor_msgs/msg/NavSatFix"
TWIST = "geometry_msgs/msg/TwistStamped"

_I32_U32 = struct.Struct("<iI")
_U32 = struct.Struct("<I")
_F64 = np.dtype("<f8")


@dataclass(frozen=True, slots=True)
class Decoded:
    """One sample's rows (n of them): what each pose is, where, and when.

    `frames` is each row's `header.frame_id` (the frame the values are in), `children` its
    `child_frame_id` (a transform's or odometry's; "" for the types that have none). A column
    the type does not have is None: `position` (n, 3) m, `orientation` (n, 4) w x y z,
    `velocity` (n, 3) m/s and `angular` (n, 3) rad/s (in `frames`, or for odometry in
    `children`), `geodetic` (n, 3) lat deg, lon deg, alt m, `fix` (n,) the NavSatFix status
    (-1: no fix)."""

    frames: tuple[str, ...]
    children: tuple[str, ...]
    stamps: FloatArray  # (n,) seconds (header.stamp)
    position: FloatArray | None = None
    orientation: FloatArray | None = None
    velocity: FloatArray | None = None
    angular: FloatArray | None = None
    geodetic: FloatArray | None = None
    fix: FloatArray | None = None

    def __len__(self) -> int:
        return len(self.stamps)


class _Reader:
    """A cursor over one sample's bytes that checks each read against the end."""

    __slots__ = ("at", "data")

    def __init__(self, data: bytes) -> None:
        if len(data) < HEADER:
            raise DecodeError(PROTOCOL, 0, f"{len(data)} bytes: no encapsulation header")
        kind = bytes(data[:2])
        if kind == CDR_BE:
            raise DecodeError(PROTOCOL, 0, "big-endian CDR is not read")
        if kind != CDR_LE:
            raise DecodeError(PROTOCOL, 0, f"encapsulation {kind.hex()}: not plain CDR (XCDR1)")
        self.data = data
        self.at = HEADER

    def need(self, size: int) -> int:
        """The offset of the next `size` bytes (the cursor moves past them)."""
        at = self.at
        if size > len(self.data) - at:
            raise DecodeError(PROTOCOL, at, f"{size} bytes wanted, {len(self.data) - at} left")
        self.at = at + size
        return at

    def align(self, size: int) -> None:
        self.at += -(self.at - HEADER) % size

    def u32(self) -> int:
        self.align(4)
        value: int = _U32.unpack_from(self.data, self.need(4))[0]
        return value

    def stamp(self) -> float:
        self.align(4)
        sec, nanosec = _I32_U32.unpack_from(self.data, self.need(8))
        return float(sec) + float(nanosec) * 1e-9

    def string(self) -> str:
        length = self.u32()
        at = self.need(length)
        raw = bytes(self.data[at : at + length])
        if raw.endswith(b"\x00"):
            raw = raw[:-1]
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise DecodeError(PROTOCOL, at + exc.start, "string is not UTF-8") from None

    def floats(self, count: int) -> FloatArray:
        self.align(8)
        at = self.need(8 * count)
        return np.frombuffer(self.data, _F64, count, at).copy()

    def octet(self) -> int:
        return self.data[self.need(1)]

    def header(self) -> tuple[float, str]:
        stamp = self.stamp()
        return stamp, self.string()


def _wxyz(xyzw: FloatArray) -> FloatArray:
    """ROS quaternions (…, x y z w) as robowire's (…, w x y z)."""
    return np.roll(xyzw, 1, axis=-1)


def _one(column: FloatArray) -> FloatArray:
    return column.reshape(1, -1)


def decode_pose(data: bytes) -> Decoded:
    """geometry_msgs/PoseStamped."""
    cursor = _Reader(data)
    stamp, frame = cursor.header()
    pose = cursor.floats(7)
    return Decoded((frame,), ("",), np.array([stamp]), _one(pose[:3]), _one(_wxyz(pose[3:])))


def decode_pose_covariance(data: bytes) -> Decoded:
    """geometry_msgs/PoseWithCovarianceStamped (the covariance is not kept)."""
    cursor = _Reader(data)
    stamp, frame = cursor.header()
    pose = cursor.floats(7 + 36)
    return Decoded((frame,), ("",), np.array([stamp]), _one(pose[:3]), _one(_wxyz(pose[3:7])))


def decode_transform(data: bytes) -> Decoded:
    """geometry_msgs/TransformStamped."""
    cursor = _Reader(data)
    stamp, frame = cursor.header()
    child = cursor.string()
    values = cursor.floats(7)
    return Decoded((frame,), (child,), np.array([stamp]), _one(values[:3]), _one(_wxyz(values[3:])))


def decode_odometry(data: bytes) -> Decoded:
    """nav_msgs/Odometry: the pose in `frames`, the twist in `children` (REP 105)."""
    cursor = _Reader(data)
    stamp, frame = cursor.header()
    child = cursor.string()
    values = cursor.floats(7 + 36 + 6 + 36)
    return Decoded(
        (frame,),
        (child,),
        np.array([stamp]),
        _one(values[:3]),
        _one(_wxyz(values[3:7])),
        velocity=_one(values[43:46]),
        angular=_one(values[46:49]),
    )


def decode_twist(data: bytes) -> Decoded:
    """geometry_msgs/TwistStamped."""
    cursor = _Reader(data)
    stamp, frame = cursor.header()
    values = cursor.floats(6)
    return Decoded(
        (frame,), ("",), np.array([stamp]), velocity=_one(values[:3]), angular=_one(values[3:])
    )


def decode_fix(data: bytes) -> Decoded:
    """sensor_msgs/NavSatFix: latitude, longitude (degrees) and altitude (m, WGS84)."""
    cursor = _Reader(data)
    stamp, frame = cursor.header()
    status = cursor.octet()
    status -= 256 if status > 127 else 0  # NavSatStatus.status is an int8
    cursor.align(2)
    cursor.need(2)  # NavSatStatus.service
    values = cursor.floats(3 + 9)
    cursor.octet()  # position_covariance_type
    return Decoded(
        (frame,),
        ("",),
        np.array([stamp]),
        geodetic=_one(values[:3]),
        fix=np.array([status], dtype=np.float64),
    )


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where the numbers of a TFMessage are, given its strings (see `TfDecoder`)."""

    size: int
    fixed: npt.NDArray[np.intp]  # offsets of the bytes that must be the same (counts, strings)
    expected: npt.NDArray[np.uint8]  # and what they were
    stamps: npt.NDArray[np.intp]  # (n, 8): the bytes of each header.stamp
    values: npt.NDArray[np.intp]  # (n, 56): the bytes of each transform's 7 float64
    frames: tuple[str, ...]
    children: tuple[str, ...]


_STAMP_BYTES = np.arange(8, dtype=np.intp)
_VALUE_BYTES = np.arange(56, dtype=np.intp)


def _parse_tf(data: bytes) -> _Layout:
    """Read a TFMessage's layout with every length checked."""
    cursor = _Reader(data)
    fixed: list[range] = []

    def counted() -> int:
        cursor.align(4)
        fixed.append(range(cursor.at, cursor.at + 4))
        return cursor.u32()

    def string() -> str:
        cursor.align(4)
        start = cursor.at
        text = cursor.string()
        fixed.append(range(start, cursor.at))
        return text

    count = counted()
    if count > min(MAX_TRANSFORMS, (len(data) - cursor.at) // TRANSFORM_MIN):
        raise DecodeError(PROTOCOL, cursor.at - 4, f"{count} transforms cannot fit")
    stamps = np.empty(count, dtype=np.intp)
    values = np.empty(count, dtype=np.intp)
    frames: list[str] = []
    children: list[str] = []
    for row in range(count):
        cursor.align(4)
        stamps[row] = cursor.need(8)
        frames.append(string())
        children.append(string())
        cursor.align(8)
        values[row] = cursor.need(56)
    flat = np.fromiter((i for r in fixed for i in r), dtype=np.intp)
    return _Layout(
        len(data),
        flat,
        np.frombuffer(data, np.uint8)[flat],
        stamps[:, None] + _STAMP_BYTES,
        values[:, None] + _VALUE_BYTES,
        tuple(frames),
        tuple(children),
    )


class TfDecoder:
    """tf2_msgs/TFMessage, columnar: one per topic. It keeps the last layout it parsed of each
    message size (at most `LAYOUTS`): /tf usually has several publishers (a mocap bridge, a
    robot_state_publisher, a localiser), each sending its own frames again and again."""

    LAYOUTS = 64

    def __init__(self) -> None:
        self.layouts: dict[int, _Layout] = {}
        self.parsed = 0  # messages whose layout was read afresh (the rest reused one)

    def __call__(self, data: bytes) -> Decoded:
        octets = np.frombuffer(data, np.uint8)
        layout = self.layouts.get(len(data))
        if layout is None or not np.array_equal(octets[layout.fixed], layout.expected):
            layout = _parse_tf(data)
            if len(self.layouts) >= self.LAYOUTS and len(data) not in self.layouts:
                del self.layouts[next(iter(self.layouts))]  # the oldest size
            self.layouts[len(data)] = layout
            self.parsed += 1
        stamp = octets[layout.stamps]  # (n, 8), a contiguous copy: it views as numbers
        seconds = stamp.view("<i4")[:, 0] + stamp.view("<u4")[:, 1] * 1e-9
        values = octets[layout.values].view(_F64)
        return Decoded(
            layout.frames,
            layout.children,
            seconds,
            values[:, :3],
            _wxyz(values[:, 3:]),
        )


def decoder(ros_type: str) -> Callable[[bytes], Decoded] | None:
    """A decoder for samples of `ros_type` (`pkg/msg/Name`), None for a type not read. Take
    one per topic: the /tf decoder keeps state."""
    if ros_type == TF:
        return TfDecoder()
    return DECODERS.get(ros_type)


DECODERS: dict[str, Callable[[bytes], Decoded]] = {
    POSE: decode_pose,
    POSE_COVARIANCE: decode_pose_covariance,
    TRANSFORM: decode_transform,
    ODOMETRY: decode_odometry,
    FIX: decode_fix,
    TWIST: decode_twist,
}
"""The stateless decoders, by ROS type (`decoder` adds the /tf one)."""

READABLE = frozenset({TF, *DECODERS})
"""Every ROS type `listen ros2://` reads."""
