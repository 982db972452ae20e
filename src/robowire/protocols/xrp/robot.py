"""An XRP robot for your own robot code: your hardware, or your physics, behind the XRP wire.

```python
from robowire.protocols.xrp import Robot, Sensors, serve

class Counter(Robot):  # wheels whose encoders count 500 a second at full output
    def __init__(self) -> None:
        self.counts = [0.0, 0.0]
        self.last: float | None = None

    def step(self, now, outputs):
        dt = 0.0 if self.last is None else now - self.last
        self.last = now
        self.counts[0] += 500 * outputs.motors[0] * dt
        self.counts[1] -= 500 * outputs.motors[1] * dt  # the right motor is mirrored
        return Sensors(encoder_counts=(int(self.counts[0]), int(self.counts[1]), 0, 0))

with serve(Counter(), port=0) as robot:
    print("a WPILib program's HALSIMXRP_PORT:", robot.address[1])
```

`serve(*robots, host="127.0.0.1", port=3540)` (from `robowire.protocols.xrp`; it lives in
`services`) runs robots on consecutive UDP ports until the returned handle is closed; port 0
picks free ones (`.address`). The XRP firmware's rules stay robowire's (`session_robot`:
sequence numbers, enable, the 500 ms watchdog, status every 50 ms to whoever sent the latest
command); a `Robot` only says what its sensors read and hears what the firmware drives:

* `step(now, outputs) -> Sensors` runs every 50 ms while a WPILib program talks to the
  robot (at each status the robot sends), with what the firmware drives since the last change;
* `drive(now, outputs)`, optional, runs at every accepted command (50 times a second while
  WPILib runs) and at every enable, disable and watchdog expiry: set real motors there.

`now` is monotonic seconds (`robowire.timebase.monotonic`). `robowire sim xrp` runs on the
same server (`services.RobotServer`) with its vectorised differential-drive physics
(`model.Fleet`) in place of `Robots`, and its statuses go out through the same encoding
(`status_rows`, all robots at once).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from robowire.protocols.xrp.codec import NO_PERIOD
from robowire.protocols.xrp.events import CommandReceived, EnabledChanged, Outputs, XrpEvent

__all__ = ["Outputs", "Robot", "Robots", "Sensors", "status_rows"]

Vector3 = tuple[float, float, float]
MAX_TICKS = 0x7FFFFFFE  # the longest period the firmware's 31 bits of ticks hold


@dataclass(frozen=True, slots=True, kw_only=True)
class Sensors:
    """What an XRP robot reports, in the units WPILib reads them in.

    `encoder_counts`: encoders 0..3 (left, right, motors 3 and 4), forward positive (the
    firmware negates the left one's hardware count, so both count up driving forward).
    `encoder_periods`: seconds per count, negative turning backward; None: no period (not
    counting, or stopped for a minute). `gyro_rates` deg/s and `gyro_angles` deg about x, y,
    z (yaw counter-clockwise positive); `accel` in g, body frame x forward, y left, z up
    (+1 at rest); `analog` volts of AnalogIn 0, 1 (the line sensors) and 2 (the rangefinder).
    """

    encoder_counts: tuple[int, int, int, int] = (0, 0, 0, 0)
    encoder_periods: tuple[float | None, float | None, float | None, float | None] = (
        None,
        None,
        None,
        None,
    )
    button: bool = False
    gyro_rates: Vector3 = (0.0, 0.0, 0.0)
    gyro_angles: Vector3 = (0.0, 0.0, 0.0)
    accel: Vector3 = (0.0, 0.0, 1.0)
    analog: Vector3 = (0.0, 0.0, 0.0)

    def status_values(self, divisor: int) -> list[float]:
        """The firmware's status values (see `status_rows`)."""
        periods = [np.nan if p is None else p for p in self.encoder_periods]
        floats = (*self.gyro_rates, *self.gyro_angles, *self.accel, *self.analog)
        [row] = status_rows(
            np.array([self.encoder_counts], dtype=np.int64),
            np.array([periods], dtype=np.float64),
            np.array([self.button]),
            np.array([floats], dtype=np.float64),
            divisor,
        )
        return row


def status_rows(
    counts: npt.NDArray[np.int64],
    periods: npt.NDArray[np.float64],
    button: npt.NDArray[np.bool_],
    floats: npt.NDArray[np.float64],
    divisor: int,
) -> list[list[float]]:
    """The firmware's status values of n robots, one row each in `codec.STATUS_FIELDS` order
    and wire form: per encoder its i32 count (wrapped), its period numerator `(ticks << 1) |
    forward` for `divisor` ticks a second or `codec.NO_PERIOD` (the left encoder's reads
    `NO_PERIOD - 1`: the firmware's negation flips its direction bit) and the divisor; the
    button 0/1; then `floats` (gyro rates, gyro angles, accel, analog: (n, 12)).

    `counts` (n, 4); `periods` (n, 4) seconds per count, negative backward, NaN for none.
    """
    wrapped = (counts + 0x80000000) % 0x100000000 - 0x80000000  # i32 on the wire
    none = np.isnan(periods)
    ticks = np.minimum(np.round(np.abs(np.where(none, 0.0, periods)) * divisor), MAX_TICKS)
    numerator = (ticks.astype(np.int64) << 1) | (periods >= 0)
    numerator = np.where(none, NO_PERIOD, numerator)
    numerator[:, 0] = np.where(none[:, 0], NO_PERIOD - 1, numerator[:, 0])
    ints = np.empty((len(counts), 13), dtype=np.int64)
    ints[:, 0:12:3] = wrapped
    ints[:, 1:12:3] = numerator
    ints[:, 2:12:3] = divisor
    ints[:, 12] = button
    return [i + f for i, f in zip(ints.tolist(), floats.tolist(), strict=True)]


class Robot:
    """Your robot: subclass it, write `step` (and `drive` to move real motors), and `serve`
    it (see the module docstring)."""

    def step(self, now: float, outputs: Outputs) -> Sensors:
        """What the sensors read at `now`; the firmware has driven `outputs` (motors -1..1,
        servo degrees, the LED, enabled) since the last change."""
        raise NotImplementedError

    def drive(self, now: float, outputs: Outputs) -> None:
        """From `now` on the firmware drives `outputs` (nothing to do by default: `step`
        gets them too)."""


class Robots:
    """Robots on their robot sessions: what each session reads its sensors from
    (`session_robot.StatusSource`), and where its events go (`apply`)."""

    def __init__(self, robots: Sequence[Robot]) -> None:
        self.robots = list(robots)
        self.outputs = [Outputs()] * len(self.robots)

    def apply(self, index: int, events: Iterable[XrpEvent]) -> None:
        """Robot `index`'s session events: each command and change of enable, in order."""
        for event in events:
            if isinstance(event, CommandReceived | EnabledChanged):
                self.outputs[index] = event.outputs
                self.robots[index].drive(event.time, event.outputs)

    def status_values(self, index: int, now: float, divisor: int) -> list[float]:
        return self.robots[index].step(now, self.outputs[index]).status_values(divisor)
