"""VRPN events -> world model (`VrpnAdapter`), and world -> VRPN messages (`WorldEncoder`).

* Each tracker sensor is a device `"<sender>/<sensor>"` (kind "tracker"): Pos_Quat gives its
  position and orientation, Velocity its velocity, Acceleration the telemetry fields
  `acceleration_x/_y/_z` (m/s2). VRPN's frame is the tracker's own right-handed frame in
  metres; robowire takes it as the world frame unchanged (no axis swap), and only reorders
  quaternions from the wire's (x, y, z, w) to the world's (w, x, y, z).
* Analog channels, button states and dials become telemetry of their sender's device
  (`"<sender>"`): `channel_<i>` (unit "1"), `button_<i>` ("bool"), `dial_<i>` (cumulated
  revolutions, unit "1").
* Text messages become log events of the sender's device.
* One `apply` (one driver wake-up: every datagram or TCP read it took) writes all its tracker
  reports, of every sender and kind, as one world update where the data allows (`trackers`).

Time: VRPN has no clock sync. With `time="sender"` (default) the header timestamp is the
source time; with `time="receive"` the receive time is used as source time too.

The other way (what `robowire serve vrpn://` and a `.vrpn` log send, `WorldEncoder`): the
inverse of this mapping for devices of VRPN sources (one sender per VRPN device, sensors as
sensors, every kind of message going out as itself), and for other devices a tracker named
after each (sensor 0), its numeric telemetry the channels of an analog device of the same
name; with `single` set, every device is one sensor of that one tracker instead.

Size: one module over 600 lines: the mapping between VRPN and the world both ways, as every
protocol's `adapter.py` has it; both directions share the device naming and field names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from robowire import units
from robowire.protocols.vrpn.codec import MAX_NAME, MAX_REMOTE_ID, PROTOCOL
from robowire.protocols.vrpn.events import MessageReceived, TrackerReports, VrpnEvent
from robowire.protocols.vrpn.messages import (
    MAX_BUTTONS,
    AnalogChannel,
    Body,
    ButtonChange,
    ButtonStates,
    DialUpdate,
    TrackerAcceleration,
    TrackerPosQuat,
    TrackerVelocity,
)
from robowire.protocols.vrpn.messages import TextMessage as Text
from robowire.protocols.vrpn.model import Frame
from robowire.protocols.vrpn.registry import ReportEncoder
from robowire.world import LogEvent, Update, World
from robowire.world.identity import SinkNames
from robowire.world.table import FloatArray, SourceTable

MAX_SENSOR = 4096  # sensor numbers above this are not devices anyone tracks
MAX_KNOWN = 4096  # sensor sets whose slots are remembered (forgotten all at once beyond)
LEVELS = {0: "info", 1: "warning", 2: "error"}
_XYZW_TO_WXYZ = [3, 0, 1, 2]
_XYZW_TO_WXYZ_INDEX = np.array(_XYZW_TO_WXYZ, dtype=np.intp)  # (`take` with it: no list copy)
_WXYZ_TO_XYZW = [1, 2, 3, 0]
POSE, VELOCITY, ACCEL = "pose", "velocity", "acceleration"
ACCEL_FIELDS = ("acceleration_x", "acceleration_y", "acceleration_z")
CHANNEL, BUTTON, DIAL = "channel_", "button_", "dial_"  # a sender's fields: "channel_0", ...
GROUPS = {
    TrackerPosQuat.WIRE_NAME: POSE,
    TrackerVelocity.WIRE_NAME: VELOCITY,
    TrackerAcceleration.WIRE_NAME: ACCEL,
}


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
        # (sender, sensor dtype, sensor bytes) -> their slots, for the sensor sets seen lately
        self._known: dict[tuple[str, np.dtype[np.int32], bytes], npt.NDArray[np.intp]] = {}
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

    def apply(self, events: Sequence[VrpnEvent], receive_time: float) -> int:
        """Write the events into the world; returns the messages taken in (a TrackerReports
        batch counts each report). Other events are the source's business.

        All tracker reports of one call, of every sender and kind, become one world update
        where the data allows (see `trackers`)."""
        taken = 0
        batches: list[TrackerReports] = []
        for event in events:
            if isinstance(event, TrackerReports):
                batches.append(event)
                taken += len(event)
            elif isinstance(event, MessageReceived):
                self.message(event, receive_time)
                taken += 1
        if batches:
            self.trackers(batches, receive_time)
        return taken

    def tracker(self, batch: TrackerReports, receive_time: float) -> None:
        self.trackers([batch], receive_time)

    def trackers(self, batches: Sequence[TrackerReports], receive_time: float) -> None:
        """Tracker reports of any senders and kinds -> as few world updates as possible.

        One update when one kind came, or when every kind came for the same sensors (a frame
        of pose, velocity and acceleration), or when the slots that got no pose never get
        one here: the union of the slots, each column given for all of them, the current
        values where a slot got no report of that kind (the world writes only what it is
        passed). Otherwise (some slots got a pose, others only a velocity) one update per
        kind, so that a slot without an orientation is not given one. A slot's source time
        is the newest header time among its reports.
        """
        groups: dict[str, list[tuple[npt.NDArray[np.intp], TrackerReports]]] = {}
        shared: npt.NDArray[np.intp] | None = None  # the slots, while every batch has them
        simple = True  # one batch per kind, all of the same slots (a tracker's whole frame)
        for batch in batches:
            if not len(batch) or (self.devices is not None and batch.sender not in self.devices):
                continue
            found = self._slots_of(batch)
            if found is None:
                continue
            batch, slots = found
            self.reports += len(batch)
            if shared is None:
                shared = slots
            elif slots is not shared:
                simple = False
            kind = batch.kind
            group = GROUPS.get(kind) or (
                POSE
                if kind.endswith("Pos_Quat")
                else VELOCITY
                if kind.endswith("Velocity")
                else ACCEL
            )
            parts = groups.get(group)
            if parts is None:
                groups[group] = [(slots, batch)]
            else:
                parts.append((slots, batch))
                simple = False
        if shared is None:
            return
        if simple:  # the common case, as the general one below would write it
            columns: dict[str, tuple[FloatArray, FloatArray]] = {
                g: (p[0][1].vector, p[0][1].quaternion) for g, p in groups.items()
            }
            times = _newest_of([p[0][1] for p in groups.values()]) if self.use_sender_time else None
            self._write(shared, receive_time, times, columns)
            return
        merged = {group: _merge(parts, self.use_sender_time) for group, parts in groups.items()}
        self._write_merged(merged, receive_time)

    def _slots_of(
        self, batch: TrackerReports
    ) -> tuple[TrackerReports, npt.NDArray[np.intp]] | None:
        """The world slots of a batch's sensors (out-of-range sensors left out; None if none
        is left). A tracker sends the same sensors frame after frame: their slots are looked
        up once."""
        sensor = batch.sensor
        key = (batch.sender, sensor.dtype, sensor.tobytes())
        slots = self._known.get(key)
        if slots is not None:
            return batch, slots
        if int(sensor.min()) < 0 or int(sensor.max()) >= MAX_SENSOR:
            batch = _subset(batch, (sensor >= 0) & (sensor < MAX_SENSOR))
            if not len(batch):
                return None
            return batch, self._sensor_slots(batch.sender, batch.sensor)
        slots = self._sensor_slots(batch.sender, sensor)
        slots.setflags(write=False)
        if len(self._known) >= MAX_KNOWN:
            self._known.clear()
        self._known[key] = slots
        return batch, slots

    def _write_merged(self, merged: dict[str, _Merged], receive_time: float) -> None:
        """Reports of several kinds, each merged over its batches (see `trackers`)."""
        if len(merged) == 1:
            ((group, (slots, vector, quaternion, times)),) = merged.items()
            self._write(slots, receive_time, times, {group: (vector, quaternion)})
            return
        first = next(iter(merged.values()))[0]
        if all(
            m[0] is first or (len(m[0]) == len(first) and np.array_equal(m[0], first))
            for m in merged.values()
        ):  # the same sensors got every kind, in the same order: one update as they are
            times = _newest([m[3] for m in merged.values()])
            self._write(first, receive_time, times, {g: (m[1], m[2]) for g, m in merged.items()})
            return
        union = np.unique(np.concatenate([m[0] for m in merged.values()]))
        if POSE in merged and len(np.unique(merged[POSE][0])) != len(union):
            for group, (slots, vector, quaternion, times) in merged.items():
                self._write(slots, receive_time, times, {group: (vector, quaternion)})
            return
        table = self.world.table(self.source)
        columns: dict[str, tuple[FloatArray, FloatArray]] = {}
        newest: FloatArray | None = None
        for group, (slots, vector, quaternion, times) in merged.items():
            at = np.searchsorted(union, slots)
            if group == POSE:
                full_vector = table.position[union]
                full_quaternion = table.orientation[union][:, _WXYZ_TO_XYZW]
                full_quaternion[at] = quaternion
            else:
                full_vector = (
                    table.velocity[union]
                    if group == VELOCITY
                    else np.stack(
                        [table.column(f, units.METRE_PER_SECOND2)[union] for f in ACCEL_FIELDS],
                        axis=1,
                    )
                )
                full_quaternion = quaternion
            full_vector[at] = vector
            columns[group] = (full_vector, full_quaternion)
            if times is not None:
                if newest is None:
                    newest = np.full(len(union), -np.inf)
                newest[at] = np.fmax(newest[at], times)
        self._write(union, receive_time, newest, columns)

    def _write(
        self,
        slots: npt.NDArray[np.intp],
        receive_time: float,
        times: FloatArray | None,
        columns: dict[str, tuple[FloatArray, FloatArray]],
    ) -> None:
        """One world update of the given kinds' columns (quaternions in wire order)."""
        pose = columns.get(POSE)
        velocity = columns.get(VELOCITY)
        accel = columns.get(ACCEL)
        self.world.update(
            self.source,
            slots,
            receive_time=receive_time,
            source_time=receive_time if times is None else times,
            position=None if pose is None else pose[0],
            orientation=None if pose is None else pose[1].take(_XYZW_TO_WXYZ_INDEX, axis=1),
            velocity=None if velocity is None else velocity[0],
            telemetry=None
            if accel is None
            else {
                name: (accel[0][:, i], units.METRE_PER_SECOND2)
                for i, name in enumerate(ACCEL_FIELDS)
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
                telemetry = {f"{CHANNEL}{i}": (v, units.COUNT) for i, v in enumerate(channels)}
            case ButtonChange(button=button, state=state):
                kind = "button"
                telemetry = {f"{BUTTON}{button}": (float(state), units.BOOLEAN)}
            case ButtonStates(states=states):
                kind = "button"
                telemetry = {
                    f"{BUTTON}{i}": (float(s), units.BOOLEAN) for i, s in enumerate(states)
                }
            case DialUpdate(delta=delta, dial=dial):
                kind = "dial"
                total = self._dials.get((event.sender, dial), 0.0) + delta
                self._dials[(event.sender, dial)] = total
                telemetry = {f"{DIAL}{dial}": (total, units.COUNT)}
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


_Merged = tuple[npt.NDArray[np.intp], FloatArray, FloatArray, FloatArray | None]
"""One kind's reports over a delivery: slots, vector, quaternion (wire order), header times."""


def _merge(parts: list[tuple[npt.NDArray[np.intp], TrackerReports]], sender_time: bool) -> _Merged:
    """One kind's batches as one set of columns: slots, vector, quaternion (wire order) and
    header times (None when the receive time is the source time)."""
    if len(parts) == 1:
        slots, batch = parts[0]
        return slots, batch.vector, batch.quaternion, batch.time if sender_time else None
    return (
        np.concatenate([slots for slots, _ in parts]),
        np.concatenate([batch.vector for _, batch in parts]),
        np.concatenate([batch.quaternion for _, batch in parts]),
        np.concatenate([batch.time for _, batch in parts]) if sender_time else None,
    )


def pose_rows(position: FloatArray, orientation: FloatArray) -> FloatArray:
    """Pos_Quat rows: position, then the world's wxyz quaternion in wire order (xyzw)."""
    out = np.empty((len(position), 7))
    out[:, :3] = position
    out[:, 3:6] = orientation[:, 1:]
    out[:, 6] = orientation[:, 0]
    return out


def _newest_of(batches: list[TrackerReports]) -> FloatArray:
    """The newest header time of each row of batches with the same rows: compared as the
    integers sec << 32 | usec where the batches view their bytes (fewer steps), the same
    float `sec + usec * 1e-6` as `TrackerReports.time` gives."""
    stamps = [stamp for stamp in (batch.stamps for batch in batches) if stamp is not None]
    if len(stamps) < len(batches):
        newest = _newest([batch.time for batch in batches])
        assert newest is not None
        return newest
    top = stamps[0]
    for stamp in stamps[1:]:
        top = np.maximum(top, stamp)
    return (top >> 32) + (top & 0xFFFFFFFF) * 1e-6


def _newest(times: list[FloatArray | None]) -> FloatArray | None:
    known = [t for t in times if t is not None]
    if not known:
        return None
    out = known[0]
    for t in known[1:]:
        out = np.fmax(out, t)
    return out


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


# -- world -> wire ---------------------------------------------------------------------------
#
# The inverse of the mapping above, for devices whose ids are VRPN's own names (their source's
# table says protocol "vrpn", `SinkNames.native`): a device "S/n" is sensor n of sender S, and
# goes out as S's Pos_Quat, Velocity and Acceleration (the `acceleration_*` fields) of sensor n;
# any other id is a sender S itself, whose `channel_<i>` fields go out as its analog channels,
# `button_<i>` as button states (on first sight and to each new client) then changes, and
# `dial_<i>` totals as the deltas since the last one sent; its log events as text messages.
# Devices of other protocols get the documented mapping: each a tracker named after its id
# (`vrpn_name`), sensor 0, its numeric fields the channels of an analog device of that name.

MAX_ANALOG_CHANNELS = 128
MAX_SENDERS = MAX_REMOTE_ID - 100  # C++ clients refuse ids >= 2000: leave room for the types
SENDER_FIELDS = (CHANNEL, BUTTON, DIAL)


def vrpn_name(text: str) -> str:
    """A device id as a VRPN sender name clients can type in `Name@host` (no '@', ':')."""
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", text)[:MAX_NAME]
    return name or "device"


def vrpn_address(device_id: str) -> tuple[str, int | None]:
    """The inverse of `tracker_device`: ("Tracker0", 1) for "Tracker0/1"; (id, None) for the
    device of a sender itself ("Analog0")."""
    sender, cut, sensor = device_id.rpartition("/")
    canonical = sensor.isascii() and sensor.isdigit() and str(int(sensor)) == sensor
    if cut and sender and canonical and int(sensor) < MAX_SENSOR:
        return sender, int(sensor)
    return device_id, None


def split_sender(device_id: str) -> tuple[str, str]:
    """A VRPN device id as (sender, the rest): what `SinkNames` keeps together (a sender's
    sensors collide, and are renamed, as one)."""
    sender, sensor = vrpn_address(device_id)
    return sender, "" if sensor is None else f"/{sensor}"


def sender_field(name: str) -> tuple[str, int] | None:
    """("channel_", 3) for the field "channel_3" a sender's analog, button or dial wrote."""
    for prefix in SENDER_FIELDS:
        if name.startswith(prefix):
            index = name[len(prefix) :]
            if index.isascii() and index.isdigit():
                return prefix, int(index)
    return None


@dataclass(frozen=True, slots=True)
class ReportColumns:
    """Tracker reports of one kind as columns: row i is sensor `sensors[i]` of the tracker
    `names[senders[i]]`, its f64 columns `values[i]` (vector[, quaternion]) at header time
    `times[i]`."""

    names: list[str]
    senders: npt.NDArray[np.intp]
    sensors: npt.NDArray[np.int32]
    values: npt.NDArray[np.float64]
    times: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.senders)


REPORTS = (TrackerPosQuat.WIRE_NAME, TrackerVelocity.WIRE_NAME, TrackerAcceleration.WIRE_NAME)
MOTION_DEFAULTS = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0)
"""A Velocity's or Acceleration's f64 columns before the vector: identity quaternion, dt 1 s."""

POSES = ReportEncoder([TrackerPosQuat.WIRE_NAME])
# a Velocity's and Acceleration's rotation: the identity over dt 1 s, what the mainline's
# trackers send unless they measure one (the world keeps no rotation rate)
VELOCITIES = ReportEncoder([TrackerVelocity.WIRE_NAME], [MOTION_DEFAULTS])
ACCELERATIONS = ReportEncoder([TrackerAcceleration.WIRE_NAME], [MOTION_DEFAULTS])


def tracker_kinds(frame: Frame) -> tuple[str, ...]:
    """The wire names of each sensor's reports in the simulator's frames, in sending order."""
    return REPORTS if frame.velocities is not None else REPORTS[:1]


def tracker_values(frame: Frame) -> list[FloatArray]:
    """The simulator's frames (`model.Frame`, world units) as each kind's f64 columns
    (`ReportEncoder` rows): Pos_Quat through `pose_rows` (the sink's), then the vectors."""
    poses = pose_rows(frame.positions, frame.orientations)
    if frame.velocities is None or frame.accelerations is None:
        return [poses]
    return [poses, frame.velocities, frame.accelerations]


def tracker_reports(frame: Frame) -> list[Body]:
    """The same reports one message object each (what the per-report encoder sends)."""
    out: list[Body] = []
    values = tracker_values(frame)
    poses = values[0]
    for k, sensor in enumerate(frame.sensors.tolist()):
        out.append(
            TrackerPosQuat(
                sensor=sensor,
                position=tuple(poses[k, 0:3].tolist()),
                quaternion=tuple(poses[k, 3:7].tolist()),
            )
        )
        if len(values) == 3:
            out.append(
                TrackerVelocity(
                    sensor=sensor, velocity=tuple(values[1][k].tolist()), velocity_quaternion_dt=1.0
                )
            )
            out.append(
                TrackerAcceleration(
                    sensor=sensor,
                    acceleration=tuple(values[2][k].tolist()),
                    acceleration_quaternion_dt=1.0,
                )
            )
    return out


@dataclass(slots=True)
class Outgoing:
    """What one batch of world changes becomes: senders to announce first, then messages
    (sender, body, header time, reliable), then the tracker reports as columns (each one
    vectorised send): poses, velocities, accelerations."""

    new_devices: list[str] = field(default_factory=list)
    messages: list[tuple[str, Body, float | None, bool]] = field(default_factory=list)
    poses: ReportColumns | None = None  # values: position, quaternion x, y, z, w
    velocities: ReportColumns | None = None
    accelerations: ReportColumns | None = None

    def reports(self) -> list[tuple[ReportEncoder, ReportColumns]]:
        """Each kind's columns with the encoder that frames them."""
        kinds = (
            (POSES, self.poses),
            (VELOCITIES, self.velocities),
            (ACCELERATIONS, self.accelerations),
        )
        return [(encoder, columns) for encoder, columns in kinds if columns is not None]


class _Rows:
    """Report rows gathered from several updates, as arrays (joined once at the end)."""

    def __init__(self) -> None:
        self.targets: list[npt.NDArray[np.intp]] = []
        self.values: list[npt.NDArray[np.float64]] = []
        self.times: list[npt.NDArray[np.float64]] = []

    def add(
        self,
        targets: npt.NDArray[np.intp],
        values: npt.NDArray[np.float64],
        times: npt.NDArray[np.float64],
    ) -> None:
        if len(targets):
            self.targets.append(targets)
            self.values.append(values)
            self.times.append(times)

    def columns(self, encoder: WorldEncoder) -> ReportColumns | None:
        if not self.targets:
            return None
        one = len(self.targets) == 1  # one update's rows (a sink's usual pull): as they are
        targets = self.targets[0] if one else np.concatenate(self.targets)
        names = encoder._name_of[targets]
        first = int(names[0])
        if (names == first).all():  # one tracker (`?tracker=`, a VRPN source's): no sort
            used, senders = [first], np.zeros(len(names), dtype=np.intp)
        else:
            unique, inverse = np.unique(names, return_inverse=True)
            used, senders = unique.tolist(), inverse.reshape(-1).astype(np.intp)
        return ReportColumns(
            names=[encoder.senders[k] for k in used],
            senders=senders,
            sensors=encoder._sensor_of[targets],
            values=self.values[0] if one else np.concatenate(self.values),
            times=self.times[0] if one else np.concatenate(self.times),
        )


class WorldEncoder:
    """World updates -> VRPN messages; keeps each device's (sender, sensor) on the wire.

    Names come from `SinkNames` (native ids kept, others mapped by `vrpn_name`, a collision
    between sources renamed once per sender); with `single` every device is instead a sensor
    of that one tracker, numbered in order of first sight (poses and velocities only).
    Reports are built from the update's columns (all rows at once); only a device seen for
    the first time, a sender's own fields and other protocols' telemetry take a step per
    device.
    """

    def __init__(self, single: str = "") -> None:
        self.single = single
        self.names = SinkNames(PROTOCOL, vrpn_name, where="vrpn sink", split=split_sender)
        self.senders: list[str] = []  # sender names, in order of first use
        self._sender_index: dict[str, int] = {}
        self._sensors: dict[str, int] = {}  # sender -> its highest sensor + 1
        self._slot_targets: dict[str, npt.NDArray[np.intp]] = {}  # source -> target per slot
        self._name_of = np.zeros(0, dtype=np.intp)  # target -> index in `senders`
        self._sensor_of = np.zeros(0, dtype=np.int32)  # target -> sensor
        self._native_of = np.zeros(0, dtype=bool)  # target -> a VRPN device (its own names)
        self._channels: dict[tuple[str, str], list[str]] = {}  # other devices' analog fields
        self._fields: dict[str, tuple[int, dict[str, list[tuple[int, str]]]]] = {}
        self.buttons: dict[str, tuple[int, ...]] = {}  # button senders -> the states sent
        self._dials: dict[tuple[str, int], float] = {}  # (sender, dial) -> the total sent

    def devices(self) -> list[str]:
        """The tracker names served before any device is known."""
        return [self.single] if self.single else []

    def sensor_count(self, name: str) -> int:
        return max(1, self._sensors.get(name, 0))

    def _sender(self, name: str, out: Outgoing) -> int:
        index = self._sender_index.get(name)
        if index is None:
            index = self._sender_index[name] = len(self.senders)
            self.senders.append(name)
            out.new_devices.append(name)
        return index

    def _targets(
        self, table: SourceTable, slots: npt.NDArray[np.intp], out: Outgoing
    ) -> npt.NDArray[np.intp]:
        """Each slot's target (an index into the name and sensor columns), -1 for a device
        that cannot be served; new devices are named here, once."""
        known = self._slot_targets.get(table.source)
        top = int(slots.max()) + 1 if len(slots) else 0
        if known is None or top > len(known):
            grown = np.full(max(top, 16, 2 * len(known) if known is not None else 0), -2)
            if known is not None:
                grown[: len(known)] = known
            known = self._slot_targets[table.source] = grown.astype(np.intp)
        targets = known[slots]
        new = targets == -2
        if new.any():
            for slot in np.unique(slots[new]).tolist():
                known[slot] = self._new_target(table, slot, out)
            targets = known[slots]
        return targets

    def _new_target(self, table: SourceTable, slot: int, out: Outgoing) -> int:
        native = False
        if self.single:
            name, sensor = self.single, self._sensors.get(self.single, 0)
        else:
            name, sensor = self.names.name(table, slot), 0
            if self.names.native(table):
                name, number = vrpn_address(name)
                native, sensor = True, number or 0
            if name not in self._sender_index and len(self.senders) >= MAX_SENDERS:
                return -1
        index = self._sender(name, out)
        self._sensors[name] = max(self._sensors.get(name, 0), sensor + 1)
        self._name_of = np.append(self._name_of, index)
        self._sensor_of = np.append(self._sensor_of, np.int32(sensor))
        self._native_of = np.append(self._native_of, native)
        return len(self._name_of) - 1

    def encode(self, world: World, items: Iterable[Update | LogEvent]) -> Outgoing:
        out = Outgoing()
        rows = _Rows(), _Rows(), _Rows()
        for item in items:
            if isinstance(item, LogEvent):
                self._text(world, item, out)
                continue
            table = world.tables.get(item.source)
            if table is not None and len(item.slots):
                self._update(table, item, out, *rows)
        out.poses, out.velocities, out.accelerations = (r.columns(self) for r in rows)
        return out

    def _update(
        self,
        table: SourceTable,
        item: Update,
        out: Outgoing,
        poses: _Rows,
        velocities: _Rows,
        accelerations: _Rows,
    ) -> None:
        values, slots = item.values, item.slots
        targets = self._targets(table, slots, out)
        served = targets >= 0
        when = values.get("source_time")
        if when is None:  # a latest-state pull: the table holds the values
            when = table.source_time[slots]
        times = np.where(np.isnan(when), item.receive_time, when)
        if "position" in item.fields or "orientation" in item.fields:
            position = values.get("position")
            if position is None:
                position = table.position[slots]
            orientation = values.get("orientation")
            if orientation is None:
                orientation = table.orientation[slots]
            keep = served & ~np.isnan(position).any(axis=1)
            if keep.all():  # every row (the usual case): no copies of the rows kept
                poses.add(targets, pose_rows(position, orientation), times)
            elif keep.any():
                poses.add(targets[keep], pose_rows(position[keep], orientation[keep]), times[keep])
        velocity = values.get("velocity")
        if velocity is None and "velocity" in item.fields:
            velocity = table.velocity[slots]
        if velocity is not None:
            keep = served & ~np.isnan(velocity).any(axis=1)
            if keep.all():
                velocities.add(targets, velocity, times)
            elif keep.any():
                velocities.add(targets[keep], velocity[keep], times[keep])
        telemetry = [f for f in item.fields if f in table.telemetry]
        if not telemetry or self.single:
            return
        native = np.zeros(len(slots), dtype=bool)
        native[served] = self._native_of[targets[served]]
        if native.any() and any(f in item.fields for f in ACCEL_FIELDS):
            accel = np.stack([_column(table, item, f, slots) for f in ACCEL_FIELDS], axis=1)
            keep = native & ~np.isnan(accel).any(axis=1)
            if keep.any():
                accelerations.add(targets[keep], accel[keep], times[keep])
        senders = self.senders
        if native.any() and any(sender_field(f) for f in telemetry):
            for row in np.flatnonzero(native).tolist():
                name = senders[int(self._name_of[targets[row]])]
                self._sender_fields(table, item, row, name, float(times[row]), out)
        for row in np.flatnonzero(served & ~native).tolist():
            name = senders[int(self._name_of[targets[row]])]
            self._analog(table, item.source, int(slots[row]), name, telemetry, out)

    def _columns(self, table: SourceTable) -> dict[str, list[tuple[int, str]]]:
        """A VRPN source's sender fields by prefix, as (index, field) in index order."""
        cached = self._fields.get(table.source)
        if cached is not None and cached[0] == len(table.telemetry):
            return cached[1]
        found: dict[str, list[tuple[int, str]]] = {prefix: [] for prefix in SENDER_FIELDS}
        for name in table.telemetry:
            parsed = sender_field(name)
            if parsed is not None:
                found[parsed[0]].append((parsed[1], name))
        for entries in found.values():
            entries.sort()
        self._fields[table.source] = (len(table.telemetry), found)
        return found

    def _sender_fields(
        self, table: SourceTable, item: Update, row: int, name: str, time: float, out: Outgoing
    ) -> None:
        """A VRPN sender's analog channels, buttons and dials, as the messages they came as."""
        slot = int(item.slots[row])

        def value(field_name: str) -> float:
            given = item.values.get(field_name)
            return float(table.telemetry[field_name][slot] if given is None else given[row])

        columns = self._columns(table)
        present = {
            prefix: [(i, f, v) for i, f in entries if not np.isnan(v := value(f))]
            for prefix, entries in columns.items()
        }
        changed = item.fields
        channels = present[CHANNEL]
        if channels and any(f in changed for _, f, _ in channels):
            width = min(channels[-1][0] + 1, MAX_ANALOG_CHANNELS)
            values = [0.0] * width
            for i, _, v in channels:
                if i < width:
                    values[i] = v
            out.messages.append((name, AnalogChannel(channels=tuple(values)), time, False))
        buttons = present[BUTTON]
        if buttons and any(f in changed for _, f, _ in buttons):
            states = [0] * min(buttons[-1][0] + 1, MAX_BUTTONS)
            for i, _, v in buttons:
                if i < len(states):
                    states[i] = int(v)
            sent = self.buttons.get(name)
            if sent is None:  # first sight: the states, as a Button_Filter sends on connect
                out.messages.append((name, ButtonStates(states=tuple(states)), time, True))
            else:
                for i, state in enumerate(states):
                    if i >= len(sent) or sent[i] != state:
                        out.messages.append((name, ButtonChange(button=i, state=state), time, True))
            self.buttons[name] = tuple(states)
        for i, field_name, total in present[DIAL]:
            if field_name in changed:
                delta = total - self._dials.get((name, i), 0.0)
                self._dials[(name, i)] = total
                if delta:
                    out.messages.append((name, DialUpdate(delta=delta, dial=i), time, True))

    def _text(self, world: World, event: LogEvent, out: Outgoing) -> None:
        """World log events go out as VRPN text messages from the device's sender."""
        table = world.tables.get(event.source)
        if self.single:
            name = self.single
        elif table is None:
            name = vrpn_name(event.device_id)
        else:
            name = self.names.name_of(table, event.device_id)
            if self.names.native(table):
                name = vrpn_address(name)[0]
        self._sender(name, out)
        severity = {"warning": 1, "error": 2}.get(event.level, 0)
        out.messages.append((name, Text(text=event.text, severity=severity), event.time, True))

    def _analog(
        self,
        table: SourceTable,
        source: str,
        slot: int,
        name: str,
        fields: list[str],
        out: Outgoing,
    ) -> None:
        """Another protocol's device: its numeric fields as the channels of an analog device
        of its name, in the order they first appeared (sorted within one update)."""
        channels = self._channels.setdefault((source, table.ids[slot]), [])
        for name_ in sorted(fields):
            if name_ not in channels and len(channels) < MAX_ANALOG_CHANNELS:
                channels.append(name_)
        values = tuple(float(table.telemetry[f][slot]) for f in channels)
        out.messages.append((name, AnalogChannel(channels=values), None, False))


def _column(table: SourceTable, item: Update, name: str, slots: npt.NDArray[np.intp]) -> FloatArray:
    """One telemetry field of an update's rows: its own values, else the table's."""
    given = item.values.get(name)
    if given is not None:
        return given
    column = table.telemetry.get(name)
    return np.full(len(slots), np.nan) if column is None else column[slots]
