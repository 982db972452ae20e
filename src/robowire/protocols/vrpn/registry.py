"""Wire type names -> body classes, the names every VRPN connection registers, and the
vectorised codecs for tracker reports (the hot path: thousands of reports per second)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from robowire.errors import DecodeError
from robowire.protocols.vrpn.codec import HEADER_SIZE, PROTOCOL
from robowire.protocols.vrpn.imager import IMAGER_TYPES
from robowire.protocols.vrpn.messages import (
    AnalogChannel,
    AnalogOutputChangeChannelsRequest,
    AnalogOutputChangeRequest,
    AnalogOutputNumChannelsReport,
    Body,
    ButtonAdmin,
    ButtonAlert,
    ButtonChange,
    ButtonStates,
    DialUpdate,
    Ping,
    Pong,
    PoserRequestPosQuat,
    PoserRequestRelativePosQuat,
    PoserRequestRelativeVelocity,
    PoserRequestVelocity,
    TextMessage,
    TrackerAcceleration,
    TrackerPosQuat,
    TrackerRequestToRoom,
    TrackerRequestUnitToSensor,
    TrackerRequestWorkspace,
    TrackerResetOrigin,
    TrackerSetUpdateRate,
    TrackerToRoom,
    TrackerUnitToSensor,
    TrackerVelocity,
    TrackerWorkspace,
)

CONTROL_SENDER = "VRPN Control"
GOT_FIRST_CONNECTION = "VRPN_Connection_Got_First_Connection"
GOT_CONNECTION = "VRPN_Connection_Got_Connection"
DROPPED_CONNECTION = "VRPN_Connection_Dropped_Connection"
DROPPED_LAST_CONNECTION = "VRPN_Connection_Dropped_Last_Connection"
CONNECTION_EVENT_TYPES = (
    GOT_FIRST_CONNECTION,
    GOT_CONNECTION,
    DROPPED_CONNECTION,
    DROPPED_LAST_CONNECTION,
)
"""Registered as types 0-3 by every connection; described on the wire, never sent."""

TRACKER_TYPES: tuple[type[Body], ...] = (
    TrackerPosQuat,
    TrackerVelocity,
    TrackerAcceleration,
    TrackerToRoom,
    TrackerUnitToSensor,
    TrackerRequestToRoom,
    TrackerRequestUnitToSensor,
    TrackerWorkspace,
    TrackerRequestWorkspace,
    TrackerSetUpdateRate,
    TrackerResetOrigin,
)
BASE_TYPES: tuple[type[Body], ...] = (TextMessage, Ping, Pong)
BUTTON_TYPES: tuple[type[Body], ...] = (ButtonChange, ButtonStates, ButtonAdmin, ButtonAlert)
ANALOG_OUTPUT_TYPES: tuple[type[Body], ...] = (
    AnalogOutputChangeRequest,
    AnalogOutputChangeChannelsRequest,
    AnalogOutputNumChannelsReport,
)
POSER_TYPES: tuple[type[Body], ...] = (
    PoserRequestPosQuat,
    PoserRequestRelativePosQuat,
    PoserRequestVelocity,
    PoserRequestRelativeVelocity,
)
ALL_BODY_TYPES: tuple[type[Body], ...] = (
    *TRACKER_TYPES,
    *BASE_TYPES,
    AnalogChannel,
    *BUTTON_TYPES,
    DialUpdate,
    *ANALOG_OUTPUT_TYPES,
    *POSER_TYPES,
    *IMAGER_TYPES,
)
BODY_TYPES: dict[str, type[Body]] = {cls.WIRE_NAME: cls for cls in ALL_BODY_TYPES}

SERVER_TYPE_NAMES: tuple[str, ...] = (
    *CONNECTION_EVENT_TYPES,
    *(cls.WIRE_NAME for cls in TRACKER_TYPES),
    *(cls.WIRE_NAME for cls in BASE_TYPES),
    *(cls.WIRE_NAME for cls in BUTTON_TYPES),
    DialUpdate.WIRE_NAME,
    AnalogChannel.WIRE_NAME,
)
"""What a robowire server describes on connect, in the mainline vrpn_server's order."""


def decode_body(type_name: str, body: bytes) -> Body | None:
    """The typed body of a message named `type_name`, or None for a type we do not know."""
    cls = BODY_TYPES.get(type_name)
    return None if cls is None else cls.decode(body)


# -- vectorised tracker reports -------------------------------------------------------------

F64 = np.dtype(">f8")
I32 = np.dtype(">i4")
REPORT_KINDS: dict[str, tuple[int, int]] = {
    # wire name -> (body size, number of f64 after the two i32: vector 3 + quat 4 [+ dt])
    TrackerPosQuat.WIRE_NAME: (64, 7),
    TrackerVelocity.WIRE_NAME: (72, 8),
    TrackerAcceleration.WIRE_NAME: (72, 8),
}


def gather_reports(
    buf: bytes,
    offsets: npt.NDArray[np.int64],
    kind: str,
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float64]]:
    """Sensors and the f64 columns of tracker reports whose messages start at `offsets`.

    `buf` must hold whole messages at 8-aligned `offsets` (true for any VRPN stream from its
    start, since the cookie and every padded message are multiples of 8 bytes).
    """
    _, count = REPORT_KINDS[kind]
    if offsets.size and int(offsets.min()) % 8:
        raise DecodeError(PROTOCOL, int(offsets.min()), "tracker report is not 8-aligned")
    words = np.frombuffer(buf, dtype=I32, count=len(buf) // 4)
    doubles = np.frombuffer(buf, dtype=F64, count=len(buf) // 8)
    sensor = words[(offsets + HEADER_SIZE) // 4].astype(np.int32)
    first = (offsets + HEADER_SIZE + 8) // 8
    values = doubles[first[:, None] + np.arange(count)].astype(np.float64)
    return sensor, values


_HEADER_DTYPE = [
    ("length", ">u4"),
    ("sec", ">u4"),
    ("usec", ">u4"),
    ("sender", ">i4"),
    ("type", ">i4"),
    ("seq", ">u4"),
]
_REPORT_BODY = [("sensor", ">i4"), ("pad", ">i4"), ("vector", ">f8", 3), ("quat", ">f8", 4)]
REPORT_FRAMES: dict[str, np.dtype[np.void]] = {
    TrackerPosQuat.WIRE_NAME: np.dtype([*_HEADER_DTYPE, *_REPORT_BODY]),
    TrackerVelocity.WIRE_NAME: np.dtype([*_HEADER_DTYPE, *_REPORT_BODY, ("dt", ">f8")]),
    TrackerAcceleration.WIRE_NAME: np.dtype([*_HEADER_DTYPE, *_REPORT_BODY, ("dt", ">f8")]),
}
"""Whole tracker report messages (header and body, no padding: 88 or 96 bytes) as read: a
run of them decodes as one zero-copy structured view (`TrackerReports.of_frames`)."""

POSE_FRAME = np.dtype(
    [*_HEADER_DTYPE, ("sensor", ">i4"), ("sensor2", ">i4"), ("pos", ">f8", 3), ("quat", ">f8", 4)]
)
"""One whole Pos_Quat message (88 bytes, no padding needed): the batch encoder's layout."""


def encode_pose_frames(
    sender: int | npt.ArrayLike,
    type_id: int,
    sensors: npt.ArrayLike,
    positions: npt.ArrayLike,
    quaternions_xyzw: npt.ArrayLike,
    *,
    time: float | npt.ArrayLike,
    first_seq: int,
) -> npt.NDArray[np.void]:
    """n whole Pos_Quat messages (header and body) built in one vectorised step."""
    sensor = np.asarray(sensors, dtype=np.int32).reshape(-1)
    n = sensor.size
    frames = np.zeros(n, dtype=POSE_FRAME)
    t = np.maximum(np.asarray(time, dtype=np.float64).reshape(-1), 0.0)
    sec = np.floor(t)
    frames["sec"] = sec.astype(np.uint64) & 0xFFFFFFFF
    frames["usec"] = np.minimum(np.rint((t - sec) * 1e6), 999_999).astype(np.uint32)
    frames["length"] = HEADER_SIZE + 64
    frames["sender"] = sender
    frames["type"] = type_id
    frames["seq"] = np.arange(first_seq, first_seq + n) & 0xFFFFFFFF
    frames["sensor"] = sensor
    frames["sensor2"] = sensor  # the filler repeats the sensor, as C++ writes it
    frames["pos"] = np.asarray(positions, dtype=np.float64).reshape(n, 3)
    frames["quat"] = np.asarray(quaternions_xyzw, dtype=np.float64).reshape(n, 4)
    return frames
