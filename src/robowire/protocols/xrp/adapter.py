"""XRP <-> world model, both directions.

Wire -> world (`XrpAdapter`, the WPILib side's events): the robot is one device (kind "xrp").
Its pose comes from odometry: distance from the mean of the left and right encoder deltas
(counts -> metres with the real XRP's 585 counts per turn of a 60 mm wheel), heading from the
gyro's yaw (angle_z, counter-clockwise positive, our simulator's convention). The world frame is
ENU with the robot starting at the origin facing East (+x); heading is measured from where the
robot faced at the first status.

Telemetry, every value with its unit: the motor outputs, servo positions, LED and enabled the
WPILib side sends (its `CommandSent` events), encoder counts, rates (counts/s) and wheel
distances, gyro rates and angles, accelerations (g), analog volts with the reflectance (0..1)
and rangefinder (m) readings derived from them, button, status packets per second and dropped
packets.

World -> wire (`DeviceMirror`, for the serve sink, whose robot session reads its sensors from
it): picks one world device. A device of an XRP source (its table's protocol is "xrp") is an
XRP robot: the sink's robot reports that robot's own sensor values, rebuilt from the telemetry
`XrpAdapter` wrote (`reported_status`), so a relay `xrp -> xrp` is transparent. Any other device
moves a simulated robot (a `model.Fleet` row) along it: its yaw (from the ENU quaternion) drives
the gyro, and the distance it moves and turns drives the encoders (`Fleet.follow`). Either way
the values go into wire form through `robot.status_rows`, the simulator's encoding too.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from robowire import units
from robowire.protocols.xrp.codec import PROTOCOL
from robowire.protocols.xrp.events import (
    CommandSent,
    RobotStatus,
    StatusBatch,
    StatusReceived,
    XrpEvent,
)
from robowire.protocols.xrp.model import COUNTS_PER_METRE, RANGE_MAX, Fleet
from robowire.protocols.xrp.robot import status_rows
from robowire.sequence import PeerRestarted
from robowire.wire import PacketDropped
from robowire.world import LogEvent, Update, World
from robowire.world.model import ORIENTATION, POSITION

log = logging.getLogger("robowire.xrp")

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
        self.command = CommandSent()  # what the WPILib side sends (its defaults until it says)
        self.dropped = 0
        self._yaw0: float | None = None
        self._last_counts: tuple[int, int] | None = None
        self._rebase = False  # the robot rebooted: its new gyro zero is the heading so far
        self._times: deque[float] = deque()

    def apply(self, events: Sequence[XrpEvent], receive_time: float) -> int:
        """Each status moves the odometry and is written to the world (with the latest command
        values); returns how many statuses were taken in."""
        taken = 0
        for event in events:
            match event:
                case StatusReceived(status=status):
                    taken += 1
                    self._times.append(receive_time)
                    self._write(status, *self._odometry(status), receive_time)
                case StatusBatch(rows=rows, status=status):  # one write, for the last
                    taken += len(rows)
                    self._times.extend([receive_time] * len(rows))
                    self._write(status, *self._odometry_rows(rows, status), receive_time)
                case CommandSent():
                    self.command = event
                case PacketDropped():
                    self.dropped += 1
                case PeerRestarted():  # its encoders and gyro begin again at 0: the pose
                    self._last_counts = None  # goes on from where it was
                    self._yaw0 = None
                    self._rebase = True
        return taken

    def _odometry(self, status: RobotStatus) -> tuple[float, float]:
        """Advance the pose; returns (forward speed m/s, yaw rad) for velocity and orientation."""
        yaw = math.radians(status.gyro[5]) if status.gyro else self.heading
        if self._yaw0 is None:
            self._yaw0 = yaw - self.heading if self._rebase else yaw
            self._rebase = False
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

    def _odometry_rows(
        self, rows: npt.NDArray[np.void], status: RobotStatus
    ) -> tuple[float, float]:
        """`_odometry` over a batch's rows at once (`status` is its last row's): the same arcs,
        summed by numpy."""
        yaw = np.radians(rows["angle_z"].astype(np.float64))
        if self._yaw0 is None:
            self._yaw0 = float(yaw[0]) - self.heading if self._rebase else float(yaw[0])
            self._rebase = False
        heading = yaw - self._yaw0
        left = rows["encoder0_count"].astype(np.int64)
        right = rows["encoder1_count"].astype(np.int64)
        before = self._last_counts or (int(left[0]), int(right[0]))  # the first moves nothing
        moved = np.diff(left, prepend=before[0]) + np.diff(right, prepend=before[1])
        distance = 0.5 * moved / COUNTS_PER_METRE
        middle = 0.5 * (np.concatenate(([self.heading], heading[:-1])) + heading)
        self.x += float(np.dot(distance, np.cos(middle)))
        self.y += float(np.dot(distance, np.sin(middle)))
        self._last_counts = (int(left[-1]), int(right[-1]))
        self.heading = float(heading[-1])
        speed = 0.5 * (status.encoder_rate(0) + status.encoder_rate(1)) / COUNTS_PER_METRE
        return speed, self.heading

    def _write(
        self, status: RobotStatus, speed: float, heading: float, receive_time: float
    ) -> None:
        times = self._times
        while times and times[0] < receive_time - RATE_WINDOW:
            times.popleft()
        command = self.command
        telemetry: dict[str, tuple[float, str]] = {}
        for i, value in enumerate(command.motors):
            telemetry[f"motor_{i}"] = (value, units.RATIO)
        for i, value in command.servos.items():
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
        telemetry["led"] = (float(command.dio.get(1, False)), units.BOOLEAN)
        telemetry["enabled"] = (float(command.enabled), units.BOOLEAN)
        telemetry["packets_per_second"] = (len(times) / RATE_WINDOW, units.HERTZ)
        telemetry["dropped"] = (float(self.dropped), units.COUNT)
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


STATUS_TELEMETRY: tuple[tuple[int, str, str], ...] = (
    *((3 * i, f"encoder_{i}_count", units.COUNT) for i in range(4)),
    (12, "button", units.BOOLEAN),
    *((13 + k, f"gyro_rate_{axis}", units.DEGREE_PER_SECOND) for k, axis in enumerate("xyz")),
    *((16 + k, f"gyro_angle_{axis}", units.DEGREE) for k, axis in enumerate("xyz")),
    *((19 + k, f"accel_{axis}", units.G) for k, axis in enumerate("xyz")),
    *((22 + k, f"analog_{k}", units.VOLT) for k in range(3)),
)
"""(index in `codec.STATUS_FIELDS`, telemetry name, unit) of the status values `XrpAdapter`
writes as they came; the encoder periods come back from `encoder_<i>_rate`."""


def reported_status(
    telemetry: Mapping[str, tuple[float, str]], base: Sequence[float], divisor: int
) -> list[float]:
    """The status an XRP robot reported, rebuilt from what `XrpAdapter` wrote of it: values in
    `codec.STATUS_FIELDS` order and wire form (through `robot.status_rows`, the simulated
    robots' encoding too), periods for `divisor` ticks per second (exact when the robot's
    divisor is the same, else within half a tick). A value `telemetry` lacks, or holds in
    another unit, is `base`'s."""
    counts = np.zeros((1, 4), dtype=np.int64)
    periods = np.full((1, 4), np.nan)
    button = np.zeros(1, dtype=np.bool_)
    floats = np.zeros((1, 12))
    given: list[int] = []  # the status values `telemetry` gives
    for index, name, unit in STATUS_TELEMETRY:
        found = telemetry.get(name)
        if found is None or found[1] != unit or not math.isfinite(found[0]):
            continue
        value = found[0]
        if unit == units.COUNT:
            counts[0, index // 3] = int(value) % 0x100000000  # (any size; i32 in status_rows)
        elif unit == units.BOOLEAN:
            button[0] = bool(value)
        else:
            floats[0, index - 13] = value
        given.append(index)
    for i in range(4):
        found = telemetry.get(f"encoder_{i}_rate")
        if found is not None and found[1] == COUNTS_PER_SECOND and math.isfinite(found[0]):
            periods[0, i] = 1.0 / found[0] if found[0] else np.nan  # 0: no period
            given += [3 * i + 1, 3 * i + 2]
    (row,) = status_rows(counts, periods, button, floats, divisor)
    values = list(base)
    for index in given:
        values[index] = row[index]
    return values


def yaw_of(orientation: tuple[float, float, float, float]) -> float:
    """Rotation about +z (rad, counter-clockwise from +x) of an ENU quaternion (w, x, y, z)."""
    w, x, y, z = orientation
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


class DeviceMirror:
    """The serve sink's robot: mirrors one world device, `device` (an id) of `source` (a
    source name), either may be empty; without both, the first device that has a pose. It is
    the robot session's `StatusSource`: an XRP robot's own values (`native`), else those of robot
    `index` of `fleet`, moved along the device."""

    def __init__(self, fleet: Fleet, device: str = "", source: str = "", index: int = 0) -> None:
        self.fleet = fleet
        self.device = device
        self.source = source
        self.index = index
        self.target: tuple[str, str] | None = None  # (source, device id) once one is chosen
        self.native = False  # the target is an XRP robot (its table's protocol is "xrp")
        self.reported: Mapping[str, tuple[float, str]] | None = None  # its latest telemetry
        # Placed: the robot was put down at the device's pose (its gyro jumped to the device's
        # yaw); Settled: a status has reported it there since. Until then each move puts it
        # down again: a far end's odometry integrates the moves between two statuses along
        # their mean gyro heading, so a move sharing a status interval with the placement's
        # jump would go the wrong way (by half the jump), and the far end's origin with it.
        self._placed = False
        self._settled = False

    def _matches(self, source: str, device_id: str) -> bool:
        if self.target is not None:
            return self.target == (source, device_id)
        if self.device and device_id != self.device:
            return False
        return not self.source or source == self.source

    def write(self, world: World, items: Sequence[Update | LogEvent]) -> None:
        """Follow what the world's updates say of the mirrored device."""
        for item in items:
            if isinstance(item, Update):
                self._update(world, item)

    def status_values(self, index: int, now: float, divisor: int) -> list[float]:
        """What the robot reports now (`session_robot.StatusSource`)."""
        self._settled = self._placed
        values = self.fleet.status_values(index, now, divisor)
        if self.reported is None:
            return values
        return reported_status(self.reported, values, divisor)

    def _update(self, world: World, update: Update) -> None:
        moved = POSITION in update.fields or ORIENTATION in update.fields
        if not moved and not self.native:
            return
        if self.target is not None and update.source != self.target[0]:
            return
        table = world.tables[update.source]
        for slot in update.slots.tolist():
            device_id = table.ids[slot]
            if not self._matches(update.source, device_id):
                continue
            device = world.device(update.source, device_id)
            if self.target is None:
                if device.position is None:
                    continue
                self.target = (update.source, device_id)
                self.native = table.protocol == PROTOCOL
                what = "its own sensor values" if self.native else "its motion"
                log.info("xrp: the robot mirrors %s/%s (%s)", update.source, device_id, what)
            if self.native:
                self.reported = device.telemetry
            if moved and device.position is not None:
                yaw = yaw_of(device.orientation) if device.orientation is not None else 0.0
                x, y = device.position[0], device.position[1]
                self.fleet.follow(
                    self.index, x, y, yaw, update.receive_time, place=not self._settled
                )
                self._placed = True
            return
