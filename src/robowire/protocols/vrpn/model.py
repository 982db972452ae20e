"""The pure VRPN simulator: what `robowire sim vrpn`'s devices report, and when (no sockets).

* the tracker: `count` sensors moving on circles (`sensor_poses`), in world units (metres,
  (w, x, y, z) quaternions); the adapter's `tracker_values` / `tracker_reports` (the sink's
  `pose_rows` and report kinds) make every frame Pos_Quat, plus Velocity and Acceleration
  unless `pose_only`;
* the analog: 4 channels of slow sine waves, every 0.1 s (analogs report on change);
* the buttons: 2 buttons toggling every second (their full states on connect and on every ping);
* the dials: 2 dials turning 0.25 revolution every half second.

Time `t` is seconds since the simulation started, given by the caller.

The analog, buttons and dials are given as their messages: their values are the same numbers
in the world and on the wire (channels, 0/1, revolutions), and what the simulator does with
them is a VRPN server's own (a Button_Filter's full states on connect and on every ping,
dials reporting each turn as a delta), which the sink, relaying world telemetry, does not.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from robowire.protocols.vrpn.messages import (
    AnalogChannel,
    ButtonChange,
    ButtonStates,
    DialUpdate,
)

MAX_RATE = 1000.0
ANALOG_PERIOD = 0.1
BUTTON_PERIOD = 1.0
DIAL_PERIOD = 0.5
ANGULAR_SPEED = 0.5  # rad/s around each sensor's circle
ANALOG_CHANNELS = 4
BUTTONS = 2
DIALS = 2


@functools.cache
def _circle_terms(
    count: int,
) -> tuple[
    npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.intp], npt.NDArray[np.float64]
]:
    """What turns times t into every sensor's 13 columns (position, wxyz quaternion,
    velocity, acceleration) in a few numpy calls: the angles (a, a - pi/2, h, h - pi/2) of
    each sensor are `base + rates * t` (a its angle on its circle, h half its yaw: facing
    along the travel), their cosines are (cos a, sin a, cos h, sin h), and column c of a
    sensor is a scale times one term of its (cos a, sin a, cos h, sin h, 1): flattened over a
    frame's sensors, the frame's columns are `basis[take] * scale`."""
    i = np.arange(count, dtype=np.float64)
    radius = 1.0 + 0.25 * i
    w = ANGULAR_SPEED
    one, zero = np.ones(count), np.zeros(count)
    columns = [  # (term, scale) per column
        (0, radius),  # x = r cos a
        (1, radius),  # y = r sin a
        (4, 1.0 + 0.1 * i),  # z
        (2, one),  # qw = cos h
        (4, zero),  # qx
        (4, zero),  # qy
        (3, one),  # qz = sin h
        (1, -radius * w),  # vx = -r w sin a
        (0, radius * w),  # vy = r w cos a
        (4, zero),  # vz
        (0, -radius * w * w),  # ax = -r w^2 cos a
        (1, -radius * w * w),  # ay = -r w^2 sin a
        (4, zero),  # az
    ]
    pick = np.array([term for term, _ in columns], dtype=np.intp)
    take = (np.arange(count)[:, None] * 5 + pick).reshape(-1)
    scale = np.stack([value for _, value in columns], axis=1).reshape(-1)
    phase = i * (2 * math.pi / max(count, 1))
    half = phase * 0.5 + math.pi / 4
    base = np.stack([phase, phase - math.pi / 2, half, half - math.pi / 2], axis=1)
    rates = np.array([w, w, w * 0.5, w * 0.5])
    return base, rates, take, scale


def sensor_block(times: float | npt.ArrayLike, count: int) -> npt.NDArray[np.float64]:
    """Every sensor at each of `times` (one time or several) as rows of 13 columns:
    position, wxyz quaternion, velocity, acceleration; time-major (the first time's
    `count` sensors, then the next time's)."""
    base, rates, take, scale = _circle_terms(count)
    t = np.asarray(times, dtype=np.float64).reshape(-1, 1, 1)
    basis = np.ones((len(t), count, 5))
    np.cos(base + rates * t, out=basis[:, :, :4])
    block: npt.NDArray[np.float64] = np.multiply(basis.reshape(len(t), -1)[:, take], scale)
    return block.reshape(-1, 13)


def sensor_poses(t: float, count: int) -> tuple[npt.NDArray[np.float64], ...]:
    """Positions, wxyz quaternions, velocities and accelerations of every sensor at time t."""
    block = sensor_block(t, count)
    return block[:, 0:3], block[:, 3:7], block[:, 7:10], block[:, 10:13]


@dataclass(frozen=True, slots=True)
class Frame:
    """Tracker frames as columns in world units, one row per sensor and frame (frame after
    frame): every sensor's pose (metres, the world's (w, x, y, z) quaternion), and unless
    pose-only its velocity and acceleration (m/s, m/s2). The adapter's `tracker_values` and
    `tracker_reports` make them the reports a tracker sends, as the sink does the world's."""

    sensors: npt.NDArray[np.int32]
    pose: npt.NDArray[np.float64]  # position, then quaternion w, x, y, z
    velocities: npt.NDArray[np.float64] | None
    accelerations: npt.NDArray[np.float64] | None

    @property
    def positions(self) -> npt.NDArray[np.float64]:
        return self.pose[:, 0:3]

    @property
    def orientations(self) -> npt.NDArray[np.float64]:
        return self.pose[:, 3:7]


class DeviceModel:
    """The simulated devices' state and schedules."""

    def __init__(self, count: int, rate: float, *, pose_only: bool = False) -> None:
        self.count = count
        self.rate = rate
        self.pose_only = pose_only
        self.buttons = [0] * BUTTONS
        self._next_analog = self._next_button = self._next_dial = 0.0

    def set_rate(self, rate: float) -> None:
        """A client's set_update_rate request: kept within 1..MAX_RATE Hz."""
        if math.isfinite(rate):
            self.rate = min(max(rate, 1.0), MAX_RATE)

    def button_states(self) -> ButtonStates:
        return ButtonStates(states=tuple(self.buttons))

    def frame(self, t: float) -> Frame:
        """Every sensor at t."""
        return self.frames([t])

    def frames(self, times: npt.ArrayLike) -> Frame:
        """Every sensor at each of `times`, in one pass: the frames, one after the other."""
        block = sensor_block(times, self.count)
        sensors = np.tile(np.arange(self.count, dtype=np.int32), len(block) // self.count)
        if self.pose_only:
            return Frame(sensors, block[:, 0:7], None, None)
        return Frame(sensors, block[:, 0:7], block[:, 7:10], block[:, 10:13])

    def analog(self, t: float) -> AnalogChannel | None:
        """The analog's channels, when a report is due at t."""
        if t < self._next_analog:
            return None
        self._next_analog += ANALOG_PERIOD
        return AnalogChannel(channels=tuple(math.sin(0.5 * t + k) for k in range(ANALOG_CHANNELS)))

    def button_changes(self, t: float) -> list[ButtonChange]:
        """Every button toggles once a second."""
        if t < self._next_button:
            return []
        self._next_button += BUTTON_PERIOD
        changes = []
        for b in range(len(self.buttons)):
            self.buttons[b] ^= 1
            changes.append(ButtonChange(button=b, state=self.buttons[b]))
        return changes

    def dial_updates(self, t: float) -> list[DialUpdate]:
        if t < self._next_dial:
            return []
        self._next_dial += DIAL_PERIOD
        return [DialUpdate(delta=0.25, dial=d) for d in range(DIALS)]
