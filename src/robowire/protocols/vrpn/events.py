"""The typed events a VRPN session returns: `VrpnEvent`, dispatched with `match`.

Besides the shared `PacketDropped` / `ConnectionLost`: `Connected` (the peer's cookie was
accepted), `TrackerReports` (a batch of tracker reports as columns: the hot path, no object per
report), `MessageReceived` (any other user message, typed), `Described` (the peer named a
sender or type), `PongReceived` and `PeerSilent` (the client's liveness check).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from robowire.protocols.vrpn.codec import Cookie, Frame
from robowire.protocols.vrpn.messages import (
    Body,
    TrackerAcceleration,
    TrackerPosQuat,
    TrackerVelocity,
)
from robowire.wire import ConnectionLost, PacketDropped, Report

__all__ = [
    "Connected",
    "ConnectionLost",
    "Described",
    "MessageReceived",
    "PacketDropped",
    "PeerSilent",
    "PongReceived",
    "TrackerReports",
    "VrpnEvent",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Connected:
    """The peer's cookie was accepted; descriptions went out."""

    cookie: Cookie


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageReceived:
    """One user message from the peer, with names resolved through its descriptions.

    `message` is the typed body, or the raw Frame for a type robowire does not know.
    """

    sender: str
    type: str
    message: Body | Frame
    time: float  # the sender's header timestamp, Unix seconds
    channel: str  # "tcp" or "udp"
    order: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Described:
    """The peer described one of its senders or types (name first seen or renamed)."""

    kind: str  # "sender" or "type"
    id: int
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PongReceived:
    sender: str
    round_trip: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerSilent:
    """No pong for a while: a warning (VRPN clients print one after 3 s)."""

    seconds: float


class TrackerReports(Report):
    """Many tracker reports of one sender and one kind, as columns (wire units, quat xyzw).

    `kind` is the wire type name; `dt` is NaN-free only for Velocity/Acceleration (else None).
    `order` numbers every message a session received, so reports can be merged back in order.

    Read-only like the other events, but a slotted class rather than a frozen dataclass: the
    session builds a batch of one sender's unpadded reports (`of_frames`) as zero-copy views of
    the received bytes, so a live-sized read costs no per-column copy, and the derived columns
    `time` and `order` are computed on first use.

    A `Report`: a newer batch of the same sender and kind for the same sensors makes it stale.
    """

    __slots__ = (
        "_frames",
        "_order",
        "_step",
        "_time",
        "dt",
        "kind",
        "quaternion",
        "sender",
        "sensor",
        "vector",
    )

    sender: str
    kind: str
    sensor: npt.NDArray[np.int32]
    vector: npt.NDArray[np.float64]  # (n, 3): position, velocity or acceleration
    quaternion: npt.NDArray[np.float64]  # (n, 4) x, y, z, w
    dt: npt.NDArray[np.float64] | None

    def __init__(
        self,
        *,
        sender: str,
        kind: str,
        sensor: npt.NDArray[np.int32],
        vector: npt.NDArray[np.float64],
        quaternion: npt.NDArray[np.float64],
        dt: npt.NDArray[np.float64] | None,
        time: npt.NDArray[np.float64],
        order: npt.NDArray[np.int64] | int,
    ) -> None:
        self.sender = sender
        self.kind = kind
        self.sensor = sensor
        self.vector = vector
        self.quaternion = quaternion
        self.dt = dt
        self._time: npt.NDArray[np.float64] | None = time
        self._order: npt.NDArray[np.int64] | int = order
        self._step = 1
        self._frames: npt.NDArray[np.void] | None = None

    @classmethod
    def of_frames(
        cls,
        sender: str,
        kind: str,
        frames: npt.NDArray[np.void],
        first_order: int,
        order_step: int = 1,
    ) -> TrackerReports:
        """A batch viewing whole report messages (a `REPORT_FRAMES` structured array, maybe
        strided over records of several messages: then the i-th report's order number is
        `first_order + i * order_step`)."""
        batch = cls.__new__(cls)
        batch.sender = sender
        batch.kind = kind
        batch.sensor = frames["sensor"]
        batch.vector = frames["vector"]
        batch.quaternion = frames["quat"]
        batch.dt = None if kind == TrackerPosQuat.WIRE_NAME else frames["dt"]
        batch._time = None
        batch._order = first_order
        batch._step = order_step
        batch._frames = frames
        return batch

    @property
    def time(self) -> npt.NDArray[np.float64]:
        """Header time, Unix seconds."""
        if self._time is None:
            assert self._frames is not None
            self._time = self._frames["sec"] + self._frames["usec"] * 1e-6
        return self._time

    @property
    def stamps(self) -> npt.NDArray[np.uint64] | None:
        """Header times as sec << 32 | usec (ordered as the times; `time` is sec + usec * 1e-6),
        a view of the received bytes; None for a batch not built from them."""
        return None if self._frames is None else self._frames["stamp"]

    @property
    def order(self) -> npt.NDArray[np.int64]:
        if isinstance(self._order, int):
            first, step = self._order, self._step
            self._order = np.arange(first, first + len(self.sensor) * step, step, dtype=np.int64)
        return self._order

    def __len__(self) -> int:
        return len(self.sensor)

    def covers(self) -> tuple[str, str, bytes]:
        return self.sender, self.kind, np.unique(self.sensor).tobytes()

    def message_count(self) -> int:
        return len(self)

    def __repr__(self) -> str:
        return f"TrackerReports(sender={self.sender!r}, kind={self.kind!r}, n={len(self)})"

    def messages(self) -> list[Body]:
        """The same reports as message objects (slow path, for tests and dissectors)."""
        out: list[Body] = []
        for i in range(len(self)):
            s = int(self.sensor[i])
            v = (float(self.vector[i, 0]), float(self.vector[i, 1]), float(self.vector[i, 2]))
            q = tuple(float(x) for x in self.quaternion[i])
            quat = (q[0], q[1], q[2], q[3])
            if self.kind == TrackerPosQuat.WIRE_NAME:
                out.append(TrackerPosQuat(sensor=s, position=v, quaternion=quat))
            elif self.kind == TrackerVelocity.WIRE_NAME:
                assert self.dt is not None
                out.append(
                    TrackerVelocity(
                        sensor=s,
                        velocity=v,
                        velocity_quaternion=quat,
                        velocity_quaternion_dt=float(self.dt[i]),
                    )
                )
            else:
                assert self.dt is not None
                out.append(
                    TrackerAcceleration(
                        sensor=s,
                        acceleration=v,
                        acceleration_quaternion=quat,
                        acceleration_quaternion_dt=float(self.dt[i]),
                    )
                )
        return out


VrpnEvent: TypeAlias = (
    Connected
    | TrackerReports
    | MessageReceived
    | Described
    | PongReceived
    | PeerSilent
    | PacketDropped
    | ConnectionLost
)
"""Everything a `VrpnSession` returns from `feed`, `feed_datagram`, `feed_eof` and `tick`."""
