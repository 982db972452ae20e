"""The XRP simulator: differential-drive physics for many robots at once (numpy, one row per
robot), and the arena their sensors see. Pure: no clocks (time is an argument), no sockets.

`Fleet` is driven by the robot sessions' output events (`apply`) and is their `StatusSource`
(`status_values`); the serve sink moves its one robot along a world device (`follow`).

Figures of the real XRP (WPILib XRP docs "Hardware" page and the XRP examples' Drivetrain
classes, e.g. allwpilib `XRPReference` `Drivetrain.h`; read for the numbers only):

* wheel diameter 60 mm, track width 155 mm;
* gearbox 48.75:1, encoder 12 counts per motor-shaft revolution -> 585 counts per wheel turn;
* no-load output speed 90 rpm at 4.5 V -> 0.283 m/s wheel surface speed at full output;
* the right motor turns backwards for a positive output (WPILib programs invert it), and the
  firmware negates the left encoder, so both encoders count up when the robot drives forward.

Our own choices (not from any source; see docs/xrp.md): wheel speed follows the commanded
speed with a first-order lag of 0.1 s; motors 3 and 4 are free shafts with the same gearbox;
the arena is a rectangle of walls centred on the origin (2.4 m x 2.4 m); the line for the
reflectance sensors is a circle of 0.5 m radius, 19 mm wide (3/4" tape), centred on the origin;
the rangefinder looks straight ahead from 70 mm in front of the axle centre; the reflectance
sensors sit 65 mm ahead, 8 mm either side of the centre line.

Frame: x East, y North, yaw counter-clockwise from +x (ENU, right-handed). Every robot starts at
the origin facing +x unless placed elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from robowire.endpoints import number
from robowire.protocols.xrp.events import CommandReceived, EnabledChanged, Outputs, XrpEvent
from robowire.protocols.xrp.robot import status_rows

FloatArray = npt.NDArray[np.float64]

WHEEL_DIAMETER = 0.060  # m
TRACK_WIDTH = 0.155  # m
COUNTS_PER_REVOLUTION = 585.0  # 12 CPR x 48.75:1
FREE_SPEED_RPM = 90.0  # wheel rpm at full output, no load
COUNTS_PER_METRE = COUNTS_PER_REVOLUTION / (math.pi * WHEEL_DIAMETER)
MAX_WHEEL_SPEED = FREE_SPEED_RPM / 60.0 * math.pi * WHEEL_DIAMETER  # m/s
MOTOR_LAG = 0.1  # s, first-order time constant (our choice)
RANGE_MAX = 4.0  # m, the firmware's rangefinder saturates here
GRAVITY = 9.80665
MAX_STEP = 0.02  # s, longest integration step for the pose
STALE_PERIOD = 60.0  # s without a tick -> "no period"


@dataclass(frozen=True, slots=True, kw_only=True)
class Arena:
    """The world the sensors see: walls and a line (our choices, configurable)."""

    width: float = 2.4  # m, walls at x = +-width/2
    height: float = 2.4  # m, walls at y = +-height/2
    line_radius: float = 0.5  # m, circle centred on the origin; 0 = no line
    line_width: float = 0.019  # m
    range_offset: float = 0.070  # m ahead of the axle centre
    reflect_forward: float = 0.065  # m
    reflect_side: float = 0.008  # m either side
    white_volts: float = 0.25
    black_volts: float = 4.5

    @classmethod
    def from_settings(cls, settings: Mapping[str, str], where: str = "xrp") -> Arena:
        """The arena with the `ARENA_KEYS` that `settings` names (URL options, `--set`)."""
        base = cls()
        given = {name: number(settings, key, getattr(base, name), where)
                 for key, name in ARENA_KEYS.items()}  # fmt: skip
        return cls(**given)


ARENA_KEYS = {
    "arena_width": "width",
    "arena_height": "height",
    "line_radius": "line_radius",
    "line_width": "line_width",
}
"""Arena setting a user can give -> `Arena` field (the rest are the robot's own figures)."""


class Fleet:
    """State of `n` XRP robots; `advance(now)` integrates all of them to `now` in one go.

    The robot sessions' output events set `command` (motor outputs -1..1, already gated by
    enable and watchdog), `servo`, `led` and `counting` (encoders run only while enabled, as
    the firmware's PIO counters do) through `apply`; the sessions read the sensors through
    `status_values` (this is their `session_robot.StatusSource`).
    """

    def __init__(
        self,
        n: int,
        *,
        arena: Arena | None = None,
        lag: float = MOTOR_LAG,
        quantum: float = 0.002,
    ) -> None:
        self.n = n
        # calls closer than `quantum` to the last step are folded into the next one, so that
        # many robots ticking within a few ms share one vectorised step and one snapshot
        self.quantum = quantum
        self.frozen = False  # True: something else moves the robots (the serve sink)
        self._snapshot: tuple[float, int, list[list[float]]] | None = None
        self.arena = arena or Arena()
        self.lag = lag
        self.time: float | None = None
        self.command = np.zeros((n, 4))  # motor outputs as received, 0 when gated
        self.counting = np.zeros(n, dtype=bool)
        self.speed = np.zeros((n, 4))  # m/s surface speed: left, right fwd; motor3/4 shafts
        self.pose = np.zeros((n, 3))  # x, y, yaw (rad, unwrapped)
        self.yaw_rate = np.zeros(n)  # rad/s
        self.accel = np.zeros((n, 3))  # body frame m/s2: forward, left, up (without gravity)
        self.counts = np.zeros((n, 4))  # forward-positive encoder counts (float)
        self.count_rate = np.zeros((n, 4))  # counts/s
        self.last_tick = np.zeros((n, 4))  # time the integer count last changed
        self.servo = np.full((n, 4), 90.0)  # degrees, servos 4..7
        self.led = np.zeros(n, dtype=bool)
        self.button = np.zeros(n, dtype=bool)
        self._followed: dict[int, tuple[float, float, float]] = {}  # index -> time, x, y

    # -- time -----------------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Integrate every robot from the last call to `now` with the current commands."""
        if self.time is None:
            self.time = now
            self.last_tick[:] = now
            return
        dt_total = now - self.time
        if dt_total <= 0.0 or dt_total < self.quantum:
            return
        if self.frozen:
            self.time = now
            return
        steps = max(1, math.ceil(dt_total / MAX_STEP))
        dt = dt_total / steps
        for k in range(steps):
            self._step(dt, self.time + (k + 1) * dt)
        self.time = now

    def _step(self, dt: float, end: float) -> None:
        target = self.command * MAX_WHEEL_SPEED
        target[:, 1] *= -1.0  # the right motor is mounted mirrored
        decay = math.exp(-dt / self.lag) if self.lag > 0 else 0.0
        start = self.speed
        # exact mean of a first-order response over the step, so long steps stay right
        mean_factor = (self.lag / dt) * (1.0 - decay) if self.lag > 0 else 0.0
        mean = target + (start - target) * mean_factor
        new = target + (start - target) * decay
        v0 = 0.5 * (start[:, 0] + start[:, 1])
        v = 0.5 * (mean[:, 0] + mean[:, 1])
        w = (mean[:, 1] - mean[:, 0]) / TRACK_WIDTH
        heading = self.pose[:, 2] + 0.5 * w * dt
        self.pose[:, 0] += v * dt * np.cos(heading)
        self.pose[:, 1] += v * dt * np.sin(heading)
        self.pose[:, 2] += w * dt
        v1 = 0.5 * (new[:, 0] + new[:, 1])
        self.yaw_rate = (new[:, 1] - new[:, 0]) / TRACK_WIDTH
        self.accel[:, 0] = (v1 - v0) / dt
        self.accel[:, 1] = v1 * self.yaw_rate
        self.speed = new
        rate = mean * COUNTS_PER_METRE
        before = np.floor(self.counts)
        self.counts += np.where(self.counting[:, None], rate * dt, 0.0)
        self.count_rate = np.where(self.counting[:, None], new * COUNTS_PER_METRE, 0.0)
        ticked = np.floor(self.counts) != before
        self.last_tick[ticked] = end

    # -- sensors (what the firmware would report) -------------------------------------------

    def encoder_counts(self) -> npt.NDArray[np.int64]:
        """(n, 4) integer counts, forward positive (the firmware's left negation applied)."""
        return np.floor(self.counts).astype(np.int64)

    def encoder_periods(self) -> FloatArray:
        """(n, 4) seconds per count, negative turning backward; NaN without a period (not
        counting, or no count for `STALE_PERIOD`). A slow wheel's period is the time since
        its last count, as the firmware's is."""
        now = self.time or 0.0
        rate = np.abs(self.count_rate)
        since = now - self.last_tick
        moving = rate * STALE_PERIOD > 1.0
        seconds = np.where(moving, 1.0 / np.maximum(rate, 1e-9), since)
        seconds = np.where(self.count_rate >= 0, seconds, -seconds)
        valid = self.counting[:, None] & (moving | (since < STALE_PERIOD))
        return np.where(valid, seconds, np.nan)

    def gyro(self) -> FloatArray:
        """(n, 6): rates x, y, z (deg/s) and angles roll, pitch, yaw (deg, yaw unwrapped)."""
        out = np.zeros((self.n, 6))
        out[:, 2] = np.degrees(self.yaw_rate)
        out[:, 5] = np.degrees(self.pose[:, 2])
        return out

    def accelerometer(self) -> FloatArray:
        """(n, 3) in g, body frame x forward, y left, z up; resting z = +1 g."""
        out = self.accel / GRAVITY
        out[:, 2] = 1.0 + self.accel[:, 2] / GRAVITY
        return out

    def rangefinder(self) -> FloatArray:
        """(n,) metres to the arena wall straight ahead, 0..4 m."""
        a = self.arena
        yaw = self.pose[:, 2]
        c, s = np.cos(yaw), np.sin(yaw)
        px = self.pose[:, 0] + a.range_offset * c
        py = self.pose[:, 1] + a.range_offset * s
        with np.errstate(divide="ignore", invalid="ignore"):
            tx = np.where(c > 1e-12, (a.width / 2 - px) / c, np.inf)
            tx = np.where(c < -1e-12, (-a.width / 2 - px) / c, tx)
            ty = np.where(s > 1e-12, (a.height / 2 - py) / s, np.inf)
            ty = np.where(s < -1e-12, (-a.height / 2 - py) / s, ty)
        distance = np.minimum(tx, ty)
        inside = (np.abs(px) <= a.width / 2) & (np.abs(py) <= a.height / 2)
        return np.where(inside, np.clip(distance, 0.0, RANGE_MAX), 0.0)

    def reflectance(self) -> FloatArray:
        """(n, 2) volts of the left and right line sensors (white low, black high)."""
        a = self.arena
        yaw = self.pose[:, 2]
        c, s = np.cos(yaw), np.sin(yaw)
        out = np.full((self.n, 2), a.white_volts)
        if a.line_radius <= 0:
            return out
        for k, side in enumerate((a.reflect_side, -a.reflect_side)):  # left is +y in body
            px = self.pose[:, 0] + a.reflect_forward * c - side * s
            py = self.pose[:, 1] + a.reflect_forward * s + side * c
            off = np.abs(np.hypot(px, py) - a.line_radius)
            # a sensor sees about 4 mm; blend across the tape edge over that width
            cover = np.clip((a.line_width / 2 - off) / 0.004 + 0.5, 0.0, 1.0)
            out[:, k] = a.white_volts + (a.black_volts - a.white_volts) * cover
        return out

    def analog(self) -> FloatArray:
        """(n, 3) volts of AnalogIn 0, 1 (reflectance) and 2 (range: m / 4 * 5)."""
        out = np.empty((self.n, 3))
        out[:, :2] = self.reflectance()
        out[:, 2] = self.rangefinder() / RANGE_MAX * 5.0
        return out

    def snapshot(self, divisor: int) -> list[list[float]]:
        """Every robot's status values at the current step (`robot.status_rows`), computed
        once per step however many robots ask."""
        key = self.time if self.time is not None else -1.0
        cached = self._snapshot
        if cached is not None and cached[0] == key and cached[1] == divisor:
            return cached[2]
        floats = np.concatenate([self.gyro(), self.accelerometer(), self.analog()], axis=1)
        rows = status_rows(
            self.encoder_counts(), self.encoder_periods(), self.button, floats, divisor
        )
        self._snapshot = (key, divisor, rows)
        return rows

    def place(self, index: int, x: float, y: float, yaw: float) -> None:
        """Put robot `index` at (x, y) facing `yaw` radians."""
        self.pose[index] = (x, y, yaw)
        self.invalidate()

    def invalidate(self) -> None:
        """Forget the cached snapshot (state changed outside a step)."""
        self._snapshot = None

    # -- what the robot sessions drive and read ----------------------------------------------

    def apply(self, index: int, events: Iterable[XrpEvent]) -> None:
        """Robot `index`'s session events: each output change at its time, in order."""
        for event in events:
            if isinstance(event, CommandReceived | EnabledChanged):
                self.drive(index, event.time, event.outputs)

    def drive(self, index: int, time: float, outputs: Outputs) -> None:
        """From `time` on, robot `index`'s firmware drives `outputs` (the old ones up to it)."""
        self.advance(time)
        self.command[index] = outputs.motors
        self.servo[index] = outputs.servos
        self.led[index] = outputs.led
        if bool(self.counting[index]) != outputs.enabled:
            self.counting[index] = outputs.enabled
            self.invalidate()

    def status_values(self, index: int, now: float, divisor: int) -> list[float]:
        """Robot `index`'s sensors at `now` as its firmware reports them (the robot
        session's `StatusSource`)."""
        self.advance(now)
        return self.snapshot(divisor)[index]

    def follow(
        self, index: int, x: float, y: float, yaw: float, time: float, *, place: bool = False
    ) -> None:
        """Move robot `index` to (x, y) facing `yaw` (rad) at `time`, as something else moved
        it (the serve sink's world device; set `frozen` so its motors move nothing): the gyro
        follows the yaw (kept continuous), and the encoders count the forward distance and the
        turn as a 155 mm-track robot's wheels would (while counting, as on the robot). The
        first call, or one with `place`, puts the robot down there instead: nothing counts."""
        last = self._followed.get(index)
        self._followed[index] = (time, x, y)
        if last is None or place:
            self.place(index, x, y, yaw)
            return
        t0, x0, y0 = last
        previous = float(self.pose[index, 2])
        turn = math.remainder(yaw - previous, math.tau)  # keep the gyro angle continuous
        heading = previous + 0.5 * turn
        forward = (x - x0) * math.cos(heading) + (y - y0) * math.sin(heading)
        wheels = np.array((forward - 0.5 * turn * TRACK_WIDTH, forward + 0.5 * turn * TRACK_WIDTH))
        dt = time - t0
        self.pose[index] = (x, y, previous + turn)
        if self.counting[index]:
            self.counts[index, :2] += wheels * COUNTS_PER_METRE
        if dt > 0:
            self.yaw_rate[index] = turn / dt
            self.count_rate[index, :2] = wheels * COUNTS_PER_METRE / dt
            self.last_tick[index, :2] = self.time or 0.0
        self.invalidate()
