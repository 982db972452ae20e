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

The XRP firmware's rules stay robowire's (`session_robot`: sequence numbers, enable, the 500 ms
watchdog, status every 50 ms to whoever sent the latest command); a `Robot` only says what
its sensors read and hears what the firmware drives:

* `step(now, outputs) -> Sensors` runs every 50 ms while a WPILib program talks to the
  robot (at each status the robot sends), with what the firmware drives since the last change;
* `drive(now, outputs)`, optional, runs at every accepted command (50 times a second while
  WPILib runs) and at every enable, disable and watchdog expiry: set real motors there.

`now` is monotonic seconds (`robowire.timebase.monotonic`). `robowire sim xrp` is this API
too: each of its robots is a `Robot` (`services.FleetRobot`) whose `step` reads one row of the
vectorised differential-drive physics (`model.Fleet`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from robowire.protocols.xrp.codec import NO_PERIOD
from robowire.protocols.xrp.events import CommandReceived, EnabledChanged, Outputs, XrpEvent

__all__ = ["Outputs", "Robot", "Robots", "Sensors"]

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
        """The firmware's status values (`codec.STATUS_FIELDS` order, wire form): i32
        counts, period numerators `(ticks << 1) | forward` for `divisor` ticks a second or
        `codec.NO_PERIOD` (the left encoder's reads `NO_PERIOD - 1`: the firmware's negation
        flips its direction bit), the divisor, the button 0/1, then the floats."""
        values: list[float] = []
        for k, (count, period) in enumerate(
            zip(self.encoder_counts, self.encoder_periods, strict=True)
        ):
            if period is None:
                numerator = NO_PERIOD - 1 if k == 0 else NO_PERIOD
            else:
                ticks = min(round(abs(period) * divisor), MAX_TICKS)
                numerator = (ticks << 1) | (period >= 0)
            wrapped = (int(count) + 0x80000000) % 0x100000000 - 0x80000000  # i32 on the wire
            values.extend((wrapped, numerator, divisor))
        values.append(1 if self.button else 0)
        values.extend((*self.gyro_rates, *self.gyro_angles, *self.accel, *self.analog))
        return values


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
