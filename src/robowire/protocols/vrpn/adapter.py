"""VRPN events -> world model.

* Each tracker sensor is a device `"<sender>/<sensor>"` (kind "tracker"): Pos_Quat gives its
  position and orientation, Velocity its velocity, Acceleration the telemetry fields
  `acceleration_x/_y/_z` (m/s2). VRPN's frame is the tracker's own right-handed frame in
  metres; robowire takes it as the world frame unchanged (no axis swap), and only reorders
  quaternions from the wire's (x, y, z, w) to the world's (w, x, y, z).
* Analog channels, button states and dials become telemetry of their sender's device
  (`"<sender>"`): `channel_<i>` (unit "1"), `button_<i>` ("bool"), `dial_<i>` (cumulated
  revolutions, unit "1").
* Text messages become log events of the sender's device.

Time: VRPN has no clock sync. With `time="sender"` (default) the header timestamp is the
source time; with `time="receive"` the receive time is used as source time too.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from robowire import units
from robowire.protocols.vrpn.messages import AnalogChannel, ButtonChange, ButtonStates, DialUpdate
from robowire.protocols.vrpn.messages import TextMessage as Text
from robowire.protocols.vrpn.registry import TrackerReports
from robowire.protocols.vrpn.session import MessageReceived
from robowire.world import World

MAX_SENSOR = 4096  # sensor numbers above this are not devices anyone tracks
LEVELS = {0: "info", 1: "warning", 2: "error"}
_XYZW_TO_WXYZ = [3, 0, 1, 2]


def tracker_device(sender: str, sensor: int) -> str:
    return f"{sender}/{sensor}"


class VrpnAdapter:
    """Writes one VRPN source's events into the world under `source`."""

    def __init__(
        self,
        world: World,
        source: str,
        *,
        devices: Iterable[str] | None = None,
        time: str = "sender",
    ) -> None:
        if time not in ("sender", "receive"):
            raise ValueError(f"time must be 'sender' or 'receive', not {time!r}")
        self.world = world
        self.source = source
        self.devices = None if devices is None else frozenset(devices)
        self.use_sender_time = time == "sender"
        self._slots: dict[str, npt.NDArray[np.intp]] = {}  # sender -> slot per sensor (-1 none)
        self._dials: dict[tuple[str, int], float] = {}
        self.reports = 0

    def wanted(self, sender: str) -> bool:
        return self.devices is None or sender in self.devices

    def _sensor_slots(self, sender: str, sensors: npt.NDArray[np.int32]) -> npt.NDArray[np.intp]:
        table = self._slots.get(sender)
        top = int(sensors.max()) + 1
        if table is None or top > len(table):
            grown = np.full(max(top, 4), -1, dtype=np.intp)
            if table is not None:
                grown[: len(table)] = table
            table = self._slots[sender] = grown
        slots = table[sensors]
        missing = slots < 0
        if missing.any():
            source_table = self.world.table(self.source)
            for sensor in np.unique(sensors[missing]).tolist():
                table[sensor] = source_table.slot(tracker_device(sender, sensor), "tracker")
            slots = table[sensors]
        return slots

    def apply(self, events: Iterable[object], receive_time: float) -> None:
        for event in events:
            if isinstance(event, TrackerReports):
                self.tracker(event, receive_time)
            elif isinstance(event, MessageReceived):
                self.message(event, receive_time)

    def tracker(self, batch: TrackerReports, receive_time: float) -> None:
        if not self.wanted(batch.sender):
            return
        keep = (batch.sensor >= 0) & (batch.sensor < MAX_SENSOR)
        if not keep.all():
            batch = _subset(batch, keep)
        if not len(batch):
            return
        slots = self._sensor_slots(batch.sender, batch.sensor)
        source_time = batch.time if self.use_sender_time else receive_time
        self.reports += len(batch)
        if batch.kind.endswith("Pos_Quat"):
            self.world.update(
                self.source,
                slots,
                receive_time=receive_time,
                source_time=source_time,
                position=batch.vector,
                orientation=batch.quaternion[:, _XYZW_TO_WXYZ],
            )
        elif batch.kind.endswith("Velocity"):
            self.world.update(
                self.source,
                slots,
                receive_time=receive_time,
                source_time=source_time,
                velocity=batch.vector,
            )
        else:
            self.world.update(
                self.source,
                slots,
                receive_time=receive_time,
                source_time=source_time,
                telemetry={
                    "acceleration_x": (batch.vector[:, 0], units.METRE_PER_SECOND2),
                    "acceleration_y": (batch.vector[:, 1], units.METRE_PER_SECOND2),
                    "acceleration_z": (batch.vector[:, 2], units.METRE_PER_SECOND2),
                },
            )

    def message(self, event: MessageReceived, receive_time: float) -> None:
        if not self.wanted(event.sender):
            return
        message = event.message
        source_time = event.time if self.use_sender_time else receive_time
        telemetry: dict[str, tuple[float, str]] = {}
        kind = "device"
        match message:
            case AnalogChannel(channels=channels):
                kind = "analog"
                telemetry = {f"channel_{i}": (v, units.COUNT) for i, v in enumerate(channels)}
            case ButtonChange(button=button, state=state):
                kind = "button"
                telemetry = {f"button_{button}": (float(state), units.BOOLEAN)}
            case ButtonStates(states=states):
                kind = "button"
                telemetry = {f"button_{i}": (float(s), units.BOOLEAN) for i, s in enumerate(states)}
            case DialUpdate(delta=delta, dial=dial):
                kind = "dial"
                total = self._dials.get((event.sender, dial), 0.0) + delta
                self._dials[(event.sender, dial)] = total
                telemetry = {f"dial_{dial}": (total, units.COUNT)}
            case Text(text=text, severity=severity):
                self.world.log(
                    self.source,
                    event.sender,
                    text,
                    time=source_time,
                    level=LEVELS.get(severity, "info"),
                )
                return
            case _:
                return
        table = self.world.table(self.source)
        if event.sender not in table.index:
            table.slot(event.sender, kind)
        self.world.update_device(
            self.source,
            event.sender,
            receive_time=receive_time,
            source_time=source_time,
            telemetry=telemetry,
        )


def _subset(batch: TrackerReports, keep: npt.NDArray[np.bool_]) -> TrackerReports:
    return TrackerReports(
        sender=batch.sender,
        kind=batch.kind,
        sensor=batch.sensor[keep],
        vector=batch.vector[keep],
        quaternion=batch.quaternion[keep],
        dt=None if batch.dt is None else batch.dt[keep],
        time=batch.time[keep],
        order=batch.order[keep],
    )
