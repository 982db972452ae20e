"""The XRP sessions' typed events: what the robot side and the WPILib side tell their callers.

Robot side (`session_robot.RobotSession`, the firmware):

* `CommandReceived`: a command packet was accepted; `outputs` is what the firmware drives now.
* `EnabledChanged`: enabled or disabled (by the control byte, or the watchdog); `outputs` is
  what the firmware drives after the change (motors off, servos centred).

Whoever moves the robot (the simulator's `model.Fleet`, or nothing for the serve sink's mirror)
applies `outputs` at `time`, in order. Both carry the session's `now` of the change (the
watchdog's expiry time for an expiry), so the physics integrates the old outputs up to it.

WPILib side (`session_wpilib.ClientSession`, halsim_xrp):

* `StatusReceived`: a robot status packet was accepted; `status` is all the side knows of it.
* `StatusBatch`: a run of status packets was accepted at once (a wake-up's worth, decoded as
  one batch): `rows` holds their values as columns, `status` what the side knows after the
  last. The columnar form of as many `StatusReceived`s, as VRPN's column batches are.
* `CommandSent`: the side sent (or, in a capture, was seen sending) a command packet; its
  values are what the robot is being told.

Both sides also emit the shared `PacketDropped`. XRP is UDP with no connection, so no XRP
session ever emits `ConnectionLost`; it is in the union because every protocol's is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from robowire.protocols.xrp.codec import Packet
from robowire.sequence import PeerRestarted
from robowire.wire import ConnectionLost, PacketDropped, Report

__all__ = [
    "CommandReceived",
    "CommandSent",
    "ConnectionLost",
    "EnabledChanged",
    "Outputs",
    "PacketDropped",
    "RobotEvent",
    "RobotStatus",
    "StatusBatch",
    "StatusReceived",
    "WpilibEvent",
    "XrpEvent",
]

MotorValues: TypeAlias = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outputs:
    """What the robot's firmware drives: motor outputs -1..1 (ids 0..3; 0 unless enabled and
    the watchdog is fed), servo angles in degrees (ids 4..7), the LED (DIO 1), and whether it
    is enabled (the encoders count only then)."""

    enabled: bool = False
    motors: MotorValues = (0.0, 0.0, 0.0, 0.0)
    servos: MotorValues = (90.0, 90.0, 90.0, 90.0)
    led: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandReceived:
    """The robot accepted a packet from the WPILib side."""

    time: float
    packet: Packet
    outputs: Outputs

    @property
    def enabled(self) -> bool:
        return self.outputs.enabled


@dataclass(frozen=True, slots=True, kw_only=True)
class EnabledChanged:
    """The robot was enabled or disabled (`reason`: "control byte" or "watchdog")."""

    time: float
    enabled: bool
    reason: str
    outputs: Outputs


@dataclass(frozen=True, slots=True, kw_only=True)
class RobotStatus:
    """What the WPILib side knows of the robot after one accepted status packet."""

    seq: int
    encoder_counts: tuple[int | None, ...]  # ids 0..3, None if never reported
    encoder_periods: tuple[float | None, ...]  # seconds per count, signed; None: no period
    button: bool | None
    gyro: tuple[float, ...] | None  # rate x, y, z (deg/s), angle x, y, z (deg)
    accel: tuple[float, ...] | None  # g
    analog: tuple[float | None, ...]  # volts, channels 0..2 (None if never reported)
    dio: dict[int, bool] = field(default_factory=dict)

    def encoder_rate(self, index: int) -> float:
        """Counts per second of encoder `index` (0 without a period)."""
        period = self.encoder_periods[index]
        return 0.0 if not period else 1.0 / period


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusReceived:
    """The WPILib side accepted a status packet from the robot: its whole sensor state, yet
    not a `Report` a newer one makes stale, as the pose is integrated over the path from one
    status to the next (the encoders' distance along the gyro's mean heading): a status shed
    while the gateway is behind would bend the robot's odometry."""

    status: RobotStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusBatch:
    """The WPILib side accepted a run of status packets at once, in order: `rows` has one
    `codec.STATUS_DTYPE` row each ("seq" and `codec.STATUS_FIELDS`, as on the wire), `status`
    is what the side knows after the last (`StatusReceived`'s, for that one)."""

    rows: npt.NDArray[np.void]
    status: RobotStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSent(Report):
    """What the WPILib side tells the robot, all of it (a newer one makes it stale). The
    defaults are what it sends before anything is set: disabled, motors off, servos 4 and 5
    centred, no DIO outputs."""

    seq: int = 0
    enabled: bool = False
    motors: MotorValues = (0.0, 0.0, 0.0, 0.0)  # -1..1, ids 0..3
    servos: Mapping[int, float] = field(default_factory=lambda: {4: 0.5, 5: 0.5})  # 0..1
    dio: Mapping[int, bool] = field(default_factory=dict)  # outputs; 1 is the LED

    def message_count(self) -> int:
        return 0  # what the gateway sent, not a message received


RobotEvent: TypeAlias = CommandReceived | EnabledChanged | PacketDropped
"""What the robot side emits."""

WpilibEvent: TypeAlias = StatusReceived | StatusBatch | CommandSent | PacketDropped | PeerRestarted
"""What the WPILib side emits (`PeerRestarted`: the robot rebooted)."""

XrpEvent: TypeAlias = RobotEvent | WpilibEvent | ConnectionLost
"""Every XRP event."""
