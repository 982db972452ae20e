"""Wire type names -> body classes, the names every VRPN connection registers, and the
vectorised codecs for tracker reports (the hot path: thousands of reports per second)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from robowire.errors import DecodeError
from robowire.protocols.vrpn.codec import HEADER_SIZE, PROTOCOL, split_time
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


def _stamped(fields: list[Any]) -> np.dtype[np.void]:
    """A message dtype plus `stamp`: its header's (sec, usec) read as one big-endian u64
    (sec << 32 | usec), whose order is the header times' order."""
    plain = np.dtype(fields)
    names = list(plain.names or ())
    assert plain.fields is not None
    return np.dtype(
        {
            "names": [*names, "stamp"],
            "formats": [*(plain.fields[n][0] for n in names), ">u8"],
            "offsets": [*(plain.fields[n][1] for n in names), 4],
            "itemsize": plain.itemsize,
        }
    )


REPORT_FRAMES: dict[str, np.dtype[np.void]] = {
    TrackerPosQuat.WIRE_NAME: _stamped([*_HEADER_DTYPE, *_REPORT_BODY]),
    TrackerVelocity.WIRE_NAME: _stamped([*_HEADER_DTYPE, *_REPORT_BODY, ("dt", ">f8")]),
    TrackerAcceleration.WIRE_NAME: _stamped([*_HEADER_DTYPE, *_REPORT_BODY, ("dt", ">f8")]),
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


@dataclass(frozen=True, slots=True)
class FrameBatch:
    """Whole messages encoded back to back in one buffer, for any number of sessions.

    Every header is final but its seq word, which each session writes with its own counter
    as it queues the batch (`VrpnSession.send_batch`): the batch is scratch for that.
    """

    data: npt.NDArray[np.uint8]
    seq_words: npt.NDArray[np.intp]  # index of each message's seq word in `data` as u32
    ends: npt.NDArray[np.int64]  # the byte offset after each message, in order
    words: npt.NDArray[np.uint32] = field(init=False, repr=False)  # `data` as big-endian u32
    counts: npt.NDArray[np.uint32] = field(init=False, repr=False)  # 0 .. n-1
    seqs: npt.NDArray[np.uint32] = field(init=False, repr=False)  # scratch for `number`
    parts: dict[int, list[FrameBatch]] = field(init=False, repr=False)  # `split`'s, by count
    # a part (`split`) is numbered through the batch it is part of: that batch, and the
    # index of the part's first message in it
    whole: FrameBatch | None = field(default=None, init=False, repr=False)
    start: int = field(default=0, init=False, repr=False)
    # the latest `number`: from which message to the end, with which first seq ([-1, 0]: none)
    run: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "words", self.data.view(_U32))
        object.__setattr__(self, "counts", np.arange(len(self.seq_words), dtype=np.uint32))
        object.__setattr__(self, "seqs", np.empty(len(self.seq_words), dtype=np.uint32))
        object.__setattr__(self, "parts", {})
        object.__setattr__(self, "run", [-1, 0])

    def __len__(self) -> int:
        return len(self.seq_words)

    def split(self, count: int) -> list[FrameBatch]:
        """The batch as `count` runs of as many messages and bytes each (e.g. one frame
        each, of a batch of several frames), in order: views of this batch's buffer, made
        once (whatever is encoded into the buffer later, they show)."""
        found = self.parts.get(count)
        if found is None:
            n, size = divmod(len(self), count), divmod(len(self.data), count)
            assert n[1] == size[1] == 0, "a batch splits into equal runs only"
            found = self.parts[count] = []
            for k in range(count):
                part = FrameBatch(
                    self.data[k * size[0] : (k + 1) * size[0]],
                    self.seq_words[k * n[0] : (k + 1) * n[0]] - k * size[0] // 4,
                    self.ends[k * n[0] : (k + 1) * n[0]] - k * size[0],
                )
                object.__setattr__(part, "whole", self)
                object.__setattr__(part, "start", k * n[0])
                found.append(part)
        return found

    def number(self, first: int) -> None:
        """Write seq numbers first, first + 1, ... (mod 2**32) into the messages.

        A part of a split batch numbers the rest of the batch too, as though the parts after
        it were sent next, so a session that sends them in turn with nothing between (a
        simulator's frames) finds each numbered already: nothing to write."""
        whole = self if self.whole is None else self.whole
        start, run = self.start, whole.run
        if 0 <= run[0] <= start and run[1] + (start - run[0]) == first:
            return  # numbered so by an earlier run
        rest = len(whole) - start
        seqs = np.add(whole.counts[:rest], first & 0xFFFFFFFF, out=whole.seqs[:rest])
        whole.words[whole.seq_words[start:]] = seqs
        run[:] = start, first

    def forget(self) -> None:
        """The buffer was written over, seq words and all: number every message anew."""
        self.run[:] = -1, 0


_U32 = np.dtype(">u4")
_U64 = np.dtype(">u8")


def split_times(t: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.uint32], ...]:
    """`codec.split_time` for many times: (sec, usec) columns, the same numbers."""
    t = np.where(t > 0.0, t, 0.0)
    sec = np.floor(t)
    usec = np.rint((t - sec) * 1e6)
    carry = usec >= 1_000_000
    sec, usec = sec + carry, usec - 1_000_000 * carry
    return (sec.astype(np.uint64) & 0xFFFFFFFF).astype(np.uint32), usec.astype(np.uint32)


@dataclass(slots=True)
class _Layout:
    """A cached template (the fields that do not change from batch to batch) and the work
    buffer each batch is written into, with its word and f64 views."""

    base: npt.NDArray[np.uint8]
    work: npt.NDArray[np.uint8]
    words: npt.NDArray[np.uint32]
    doubles: npt.NDArray[np.float64]
    batch: FrameBatch
    times: npt.NDArray[np.uint64]  # each message's (sec << 32 | usec) header word pair in work
    time_index: npt.NDArray[np.intp]  # which of `times` are headers, in message order
    widths: tuple[int, ...] = ()  # the value columns the latest batch wrote, per kind


class ReportEncoder:
    """Tracker reports as whole messages, encoded in one vectorised step per batch.

    A batch has n rows (one per sensor); each row is one message of each of `kinds` (wire
    names of `REPORT_KINDS`), in that order: a row of Pos_Quat, Velocity and Acceleration is
    three messages, so a frame goes out sensor by sensor, as a C++ tracker reports it. Only
    the changing fields are written per batch (header times and the f64 columns) over a
    template cached per (sender ids, type ids, sensors); `defaults` are each kind's f64
    columns under the values given (e.g. an identity quaternion and its dt), the values a
    row's first columns. The batch returned lives in a buffer the next `encode` of the same
    layout overwrites: queue it (`VrpnSession.send_batch` copies it) before encoding again.
    """

    def __init__(
        self, kinds: Sequence[str], defaults: Sequence[Sequence[float] | None] = ()
    ) -> None:
        self.kinds = tuple(kinds)
        sizes = [HEADER_SIZE + REPORT_KINDS[k][0] for k in self.kinds]
        self.sizes = np.array(sizes, dtype=np.int64)
        self.starts = np.cumsum([0, *sizes[:-1]]).astype(np.int64)
        self.record = int(sum(sizes))  # every body is a multiple of 8: no padding
        given = [*defaults, *[None] * len(self.kinds)]
        self.defaults = [
            np.zeros(REPORT_KINDS[k][1]) if d is None else np.asarray(d, dtype=np.float64)
            for k, d in zip(self.kinds, given, strict=False)
        ]
        word = self.starts // 4
        self._sec_cols = word + 1
        self._usec_cols = word + 2
        self._value_cols = [(int(s) + HEADER_SIZE + 8) // 8 for s in self.starts]
        self._layouts: dict[tuple[int | bytes, tuple[int, ...], bytes], _Layout] = {}

    def _layout(
        self,
        sender: int | npt.NDArray[np.int32],
        types: tuple[int, ...],
        sensor: npt.NDArray[np.int32],
    ) -> _Layout:
        ids = sender if isinstance(sender, int) else sender.tobytes()
        key = (ids, types, sensor.tobytes())
        found = self._layouts.get(key)
        if found is not None:
            return found
        n, width = sensor.size, self.record // 4
        data = np.zeros(n * self.record, dtype=np.uint8)
        words = data.view(_U32).reshape(n, width)
        signed = data.view(I32).reshape(n, width)
        doubles = data.view(F64).reshape(n, self.record // 8)
        for k, kind in enumerate(self.kinds):
            w = int(self.starts[k]) // 4
            words[:, w] = HEADER_SIZE + REPORT_KINDS[kind][0]
            signed[:, w + 3] = sender
            signed[:, w + 4] = types[k]
            signed[:, w + 6] = sensor
            signed[:, w + 7] = sensor  # the filler repeats the sensor, as C++ writes it
            col = self._value_cols[k]
            doubles[:, col : col + len(self.defaults[k])] = self.defaults[k]
        rows = np.arange(n)[:, None]
        seq_words = (rows * width + (self.starts // 4 + 5)).reshape(-1).astype(np.intp)
        ends = (rows * self.record + self.starts + self.sizes).reshape(-1).astype(np.int64)
        work = data.copy()
        if len(self._layouts) >= 64:  # rows come and go (a sink): keep the cache small
            self._layouts.clear()
        # every message starts at a multiple of 8 bytes, so its sec and usec words (bytes 4..12)
        # are one big-endian u64 of the buffer shifted by 4
        starts = (rows * self.record + self.starts).reshape(-1)
        found = self._layouts[key] = _Layout(
            data,
            work,
            work.view(_U32).reshape(n, width),
            work.view(F64).reshape(n, self.record // 8),
            FrameBatch(work, seq_words, ends),
            work[4 : len(work) - 4].view(_U64),
            (starts // 8).astype(np.intp),
        )
        return found

    def encode(
        self,
        sender: int | npt.ArrayLike,
        type_ids: Sequence[int],
        sensors: npt.ArrayLike,
        values: Sequence[npt.ArrayLike],
        *,
        time: float | npt.ArrayLike,
    ) -> FrameBatch:
        """n rows of messages from `sender` (one id, or one per row) with kind k's type id
        `type_ids[k]`; `values[k]` are kind k's f64 columns (n x up to its count); `time`
        is one header time for all, or one per row."""
        sensor = np.asarray(sensors, dtype=np.int32).reshape(-1)
        ids = sender if isinstance(sender, int) else np.asarray(sender, dtype=np.int32).reshape(-1)
        layout = self._layout(ids, tuple(type_ids), sensor)
        blocks = [np.asarray(column, dtype=np.float64) for column in values]
        widths = tuple(b.shape[1] if b.ndim == 2 else b.size // max(sensor.size, 1) for b in blocks)
        if widths != layout.widths:  # the defaults under fewer columns than last time
            np.copyto(layout.work, layout.base)
            layout.batch.forget()
            layout.widths = widths
        words, doubles = layout.words, layout.doubles
        if not isinstance(time, float | int):
            times = np.asarray(time, dtype=np.float64).reshape(-1)
            if len(times) and (times == times[0]).all():  # a frame's one time (the usual case)
                time = float(times[0])
        if isinstance(time, float | int):
            sec, usec = split_time(float(time))
            layout.times[layout.time_index] = (sec << 32) | usec
        else:
            secs, usecs = split_times(times)
            words[:, self._sec_cols] = secs[:, None]
            words[:, self._usec_cols] = usecs[:, None]
        for k, (block, width) in enumerate(zip(blocks, widths, strict=True)):
            col = self._value_cols[k]
            doubles[:, col : col + width] = block if block.ndim == 2 else block.reshape(-1, width)
        return layout.batch
