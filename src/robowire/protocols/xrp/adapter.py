"""WPILib-side XRP state -> world model.

The robot is one device (kind "xrp"). Its pose comes from odometry: distance from the mean of
the left and right encoder deltas (counts -> metres with the real XRP's 585 counts per turn of
a 60 mm wheel), heading from the gyro's yaw (angle_z, counter-clockwise positive, our
simulator's convention). The world frame is ENU with the robot starting at the origin facing
East (+x); heading is measured from where the robot faced at the first status.

Telemetry, every value with its unit: motor outputs and servo positions we send, encoder
counts, rates (counts/s) and wheel distances, gyro rates and angles, accelerations (g), analog
volts with the reflectance (0..1) and rangefinder (m) readings derived from them, button, LED,
enabled, status packets per second and dropped packets.
"""

from __future__ import annotations

import math
from collections import deque

from robowire import units
from robowire.protocols.xrp.physics import COUNTS_PER_METRE, RANGE_MAX
from robowire.protocols.xrp.session import ClientSession, RobotStatus
from robowire.world import World

KIND = "xrp"
RATE_WINDOW = 1.0  # s over which packets per second are counted
COUNTS_PER_SECOND = units.HERTZ  # encoder rate: counts per second


class XrpAdapter:
    """Writes one robot's status into `world` under (`source`, `device_id`)."""

    def __init__(self, world: World, source: str, device_id: str = "xrp") -> None:
        self.world = world
        self.source = source
        self.device_id = device_id
        self.x = 0.0
        self.y = 0.0
        self.heading = 0.0
        self._yaw0: float | None = None
        self._last_counts: tuple[int, int] | None = None
        self._times: deque[float] = deque()

    def _odometry(self, status: RobotStatus) -> tuple[float, float]:
        """Advance the pose; returns (forward speed m/s, yaw rad) for velocity and orientation."""
        yaw = math.radians(status.gyro[5]) if status.gyro else self.heading
        if self._yaw0 is None:
            self._yaw0 = yaw
        heading = yaw - self._yaw0
        left, right = status.encoder_counts[0], status.encoder_counts[1]
        if left is not None and right is not None:
            if self._last_counts is not None:
                moved = ((left - self._last_counts[0]) + (right - self._last_counts[1])) / 2
                distance = moved / COUNTS_PER_METRE
                middle = 0.5 * (self.heading + heading)  # arc approximated at its mid heading
                self.x += distance * math.cos(middle)
                self.y += distance * math.sin(middle)
            self._last_counts = (left, right)
        self.heading = heading
        speed = 0.5 * (status.encoder_rate(0) + status.encoder_rate(1)) / COUNTS_PER_METRE
        return speed, heading

    def apply(self, status: RobotStatus, session: ClientSession, receive_time: float) -> None:
        times = self._times
        times.append(receive_time)
        while times and times[0] < receive_time - RATE_WINDOW:
            times.popleft()
        speed, heading = self._odometry(status)
        telemetry: dict[str, tuple[float, str]] = {}
        for i, value in enumerate(session.motors):
            telemetry[f"motor_{i}"] = (value, units.RATIO)
        for i, value in session.servos.items():
            telemetry[f"servo_{i}"] = (value, units.RATIO)
        for i in range(4):
            count = status.encoder_counts[i]
            if count is not None:
                telemetry[f"encoder_{i}_count"] = (float(count), units.COUNT)
                telemetry[f"encoder_{i}_rate"] = (status.encoder_rate(i), COUNTS_PER_SECOND)
                telemetry[f"encoder_{i}_distance"] = (count / COUNTS_PER_METRE, units.METRE)
        if status.gyro is not None:
            for axis, value in zip("xyz", status.gyro[:3], strict=True):
                telemetry[f"gyro_rate_{axis}"] = (value, units.DEGREE_PER_SECOND)
            for axis, value in zip("xyz", status.gyro[3:], strict=True):
                telemetry[f"gyro_angle_{axis}"] = (value, units.DEGREE)
        if status.accel is not None:
            for axis, value in zip("xyz", status.accel, strict=True):
                telemetry[f"accel_{axis}"] = (value, units.G)
        for i, volts in enumerate(status.analog):
            if volts is None:
                continue
            telemetry[f"analog_{i}"] = (volts, units.VOLT)
            if i < 2:
                name = "reflectance_left" if i == 0 else "reflectance_right"
                telemetry[name] = (volts / 5.0, units.RATIO)
            else:
                telemetry["range"] = (volts / 5.0 * RANGE_MAX, units.METRE)
        if status.button is not None:
            telemetry["button"] = (float(status.button), units.BOOLEAN)
        telemetry["led"] = (float(session.dio_out.get(1, False)), units.BOOLEAN)
        telemetry["enabled"] = (float(session.enabled), units.BOOLEAN)
        telemetry["packets_per_second"] = (len(times) / RATE_WINDOW, units.HERTZ)
        telemetry["dropped"] = (float(session.stats.dropped), units.COUNT)
        half = 0.5 * heading
        self.world.update_device(
            self.source,
            self.device_id,
            receive_time=receive_time,
            kind=KIND,
            position=(self.x, self.y, 0.0),
            orientation=(math.cos(half), 0.0, 0.0, math.sin(half)),
            velocity=(speed * math.cos(heading), speed * math.sin(heading), 0.0),
            telemetry=telemetry,
        )
