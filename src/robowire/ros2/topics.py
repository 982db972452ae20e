"""What the world is on ROS 2: world updates -> (topic, type, QoS, CDR bytes). Pure: no DDS.

    /tf                         tf2_msgs/TFMessage: a transform per moved device, parent
                                `frame` (`world`), child the device's frame; from columns
    /tf_static                  tf2_msgs/TFMessage: every device whose attribute `static` is
                                true, all in one sample (sent again when one is added or moves)
    <ns>/<device>/pose          geometry_msgs/PoseStamped, `twist` geometry_msgs/TwistStamped
                                (velocity in ENU) when the device has one; VRPN trackers as
                                vrpn_mocap names them: /vrpn_mocap/<tracker>/pose, pose<N> and
                                twist<N> for sensor N > 0
    <ns>/<device>/fix           sensor_msgs/NavSatFix, devices with a geodetic position
    <ns>/<device>/battery       sensor_msgs/BatteryState, devices with a battery (UgCS)
    /diagnostics                diagnostic_msgs/DiagnosticArray, once a second: a status per
                                device whose telemetry changed, or that was last sent 4 s ago
                                (before diagnostic_aggregator's 5 s makes it stale), at most
                                1,000, in turn; a value per field, units in the keys
    /rosout                     rcl_interfaces/Log: the sources' log lines (VRPN text, UgCS
                                status messages), logger `robowire.<source>`
    <ns>/markers                visualization_msgs/MarkerArray: each source's devices in their
                                kind's shape and LED colour (one SPHERE_LIST per kind for swarm
                                kinds, a marker per device for kinds with a heading), and its
                                sensor-network links as a LINE_LIST

`<ns>` is `?prefix=` (`/robowire` by default; `/vrpn_mocap` for VRPN trackers unless a prefix
is given). Device names become ROS names by `names.ros_name` (a VRPN tracker's sensor 0 is the
tracker's name, sensor N `<tracker>_<N>`; a VRSP drone `12` is `drone_12`); of two sources'
devices that would share a name, the first seen keeps it and the second is `<source>/<name>`
(said once in the log), as `identity.SinkNames` does for the protocol sinks. Per-device topics
are made for the first `devices` devices of each source (a 10,000-drone show does not make
10,000 DDS writers; a mocap system's trackers all get theirs); /tf and the markers carry
every device.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from robowire.protocols.vrpn.adapter import vrpn_address
from robowire.ros2 import cdr, names
from robowire.sinks.foxglove_messages import KIND_COLOURS, LED_FIELDS, OTHER_COLOUR
from robowire.world import LogEvent, Update
from robowire.world.model import ATTRIBUTES, GEODETIC, LINKS, ORIENTATION, POSITION, VELOCITY
from robowire.world.table import SourceTable

TF_TOPIC = "/tf"
TF_STATIC_TOPIC = "/tf_static"
DIAGNOSTICS_TOPIC = "/diagnostics"
ROSOUT_TOPIC = "/rosout"
DEFAULT_NAMESPACE = "/robowire"
VRPN_NAMESPACE = "/vrpn_mocap"
WORLD = "world"
MAX_STATUSES = 1000  # device statuses in one /diagnostics message (one a second)
DIAGNOSTICS_REFRESH = 4.0  # seconds after which an unchanged device's status is sent again
NOT_TELEMETRY = frozenset({POSITION, ORIENTATION, VELOCITY, GEODETIC, LINKS, ATTRIBUTES})
DEFAULT_DEVICES = 100  # devices with topics of their own (10,000 drones: /tf and the markers)
STATIC_ATTRIBUTE = "static"
TF = "tf2_msgs/msg/TFMessage"
POSE = "geometry_msgs/msg/PoseStamped"
TWIST = "geometry_msgs/msg/TwistStamped"
FIX = "sensor_msgs/msg/NavSatFix"
BATTERY = "sensor_msgs/msg/BatteryState"
DIAGNOSTICS = "diagnostic_msgs/msg/DiagnosticArray"
MARKERS = "visualization_msgs/msg/MarkerArray"
MARKER = "visualization_msgs/msg/Marker"
LOG = "rcl_interfaces/msg/Log"
LOG_LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50}
VOLTAGE, CURRENT, CHARGE = "main_voltage", "main_current", "remaining_power_level"
BATTERY_FIELDS = (VOLTAGE, CURRENT, CHARGE)
# Marker.type: SPHERE_LIST and CUBE_LIST draw a whole swarm as one object (RViz draws 10,000
# separate markers slowly); kinds with a heading get a marker each, an ARROW along body x
ARROW, CUBE, SPHERE, CYLINDER, LINE_LIST, CUBE_LIST, SPHERE_LIST = 0, 1, 2, 3, 5, 6, 7
LIST_SHAPES = {"drone": SPHERE_LIST, "sensor_node": SPHERE_LIST, "object": CUBE_LIST}
POSED_SHAPES = {"tracker": ARROW, "rigid_body": ARROW, "ugcs": ARROW, "xrp": CUBE, "robot": CUBE}
SCALES = {ARROW: (0.4, 0.08, 0.08), CUBE: (0.2, 0.2, 0.2), SPHERE_LIST: (0.2, 0.2, 0.2)}
DEFAULT_SCALE = (0.2, 0.2, 0.2)
LINK_COLOUR = (0.6, 0.6, 0.6, 0.8)
LINK_WIDTH = 0.02
FloatArray = npt.NDArray[np.float64]
log = logging.getLogger("robowire")


@dataclass(frozen=True, slots=True)
class Message:
    """One sample for one topic. `qos`: `tf`, `tf_static`, `pose` (`?qos=`) or `reliable`."""

    topic: str
    type: str
    qos: str
    data: bytes


def vrpn_split(device_id: str) -> tuple[str, int]:
    """A VRPN device id as (ROS name of its tracker, its sensor): `Tracker0/2` ->
    (`Tracker0`, 2); an analog or button sender, (its name, 0)."""
    sender, sensor = vrpn_address(device_id)
    return names.ros_name(sender), sensor or 0


@dataclass
class _Source:
    """What one source's devices are called on ROS 2 and the builders kept for them."""

    frames: cdr.Names
    tf: cdr.TfMessages
    bases: list[str] = field(default_factory=list)  # per slot: `<ns>/<device>`
    suffixes: list[str] = field(default_factory=list)  # per slot: `` or a VRPN sensor's N
    links: tuple[np.ndarray, np.ndarray] | None = None  # slot pairs of the links drawn
    posed: cdr.Repeated | None = None
    kinds: list[str] = field(default_factory=list)
    members: dict[str, np.ndarray] = field(default_factory=dict)  # kind -> its slots
    posed_mask: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    list_code: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    list_kinds: list[str] = field(default_factory=list)  # the swarm kinds, by code
    own: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # own topics
    static: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    fixes: dict[int, cdr.Template] = field(default_factory=dict)  # slot -> its NavSatFix


class Topics:
    """Builds the messages of the changed devices of each world update (see the module)."""

    def __init__(
        self, prefix: str | None = None, frame: str = WORLD, devices: int = DEFAULT_DEVICES
    ) -> None:
        self.prefix = None if prefix is None else names.namespace(prefix)
        self.frame = names.ros_name(frame)
        self.devices = devices
        self._owners: dict[str, tuple[str, str]] = {}  # ROS name -> (source, what took it)
        self.renamed: list[tuple[str, str]] = []  # (device, its ROS name): said once each
        self.skipped = 0  # devices beyond a source's `devices`: on /tf and markers only
        self._sources: dict[str, _Source] = {}
        self._static: dict[str, tuple[float, np.ndarray]] = {}  # frame -> (time, x y z w x y z)
        self._static_dirty = False
        self._diagnosed: dict[str, np.ndarray] = {}  # source -> telemetry changed, per slot
        self._diagnosed_at: dict[str, np.ndarray] = {}  # source -> when last sent (NaN: never)
        self._diagnosed_last: tuple[str, int] = ("", -1)  # the last (source, slot) sent
        header = {"frame_id": self.frame}
        self._poses = cdr.Repeated(POSE, {"header": header}, sequence=False)
        self._twists = cdr.Repeated(TWIST, {"header": header}, sequence=False)

    # -- names ------------------------------------------------------------------------------

    def _source(self, table: SourceTable) -> _Source:
        state = self._sources.get(table.source)
        if state is None:
            frames = cdr.Names()
            state = self._sources[table.source] = _Source(
                frames, cdr.TfMessages(self.frame, frames)
            )
        if len(state.frames) < len(table):
            self._name(table, state)
        return state

    def _name(self, table: SourceTable, state: _Source) -> None:
        vrpn = table.protocol == "vrpn"
        namespace = self.prefix
        if namespace is None:
            namespace = VRPN_NAMESPACE if vrpn else DEFAULT_NAMESPACE
        frames = []
        for slot in range(len(state.frames), len(table)):
            device, kind = table.ids[slot], table.kinds[slot]
            if vrpn:
                head, sensor = vrpn_split(device)
                original = vrpn_address(device)[0]
            else:
                head, sensor, original = names.ros_name(device, kind), 0, device
            head = self._own_name(table.source, head, original)
            if names.changed(original) and not (kind and device[:1].isdigit()):
                self.renamed.append((f"{table.source}/{device}", head))
            frames.append(f"{head}_{sensor}" if sensor else head)
            state.bases.append(names.join(namespace, head))
            state.suffixes.append(str(sensor) if sensor else "")
            state.kinds.append(kind)
        state.frames.extend(frames)
        kinds = np.array(state.kinds)
        state.members = {kind: np.flatnonzero(kinds == kind) for kind in set(state.kinds)}
        state.posed_mask = np.isin(kinds, list(POSED_SHAPES))
        state.list_kinds = sorted(set(state.kinds) - set(POSED_SHAPES))
        state.list_code = np.searchsorted(state.list_kinds, kinds) if state.list_kinds else kinds
        own = min(len(table) - len(state.own), max(0, self.devices - int(state.own.sum())))
        self.skipped += len(table) - len(state.own) - own
        state.own = np.concatenate([state.own, np.arange(len(table) - len(state.own)) < own])
        _find_static(table, state)

    def _own_name(self, source: str, name: str, device: str) -> str:
        """`name`, or `<source>/<name>` when another source's device has it already."""
        owner = self._owners.setdefault(name, (source, device))
        if owner == (source, device):
            return name
        qualified = names.ros_name(f"{source}/{name}")
        if self._owners.setdefault(qualified, (source, device)) == (source, device):
            log.warning(
                "ros2: %s of %s and %s of %s would both be %s; the second is %s",
                owner[1], owner[0], device, source, name, qualified,
            )  # fmt: skip
        return qualified

    def frame_of(self, table: SourceTable, slot: int) -> str:
        """The TF frame of a device."""
        state = self._source(table)
        start, length = int(state.frames.starts[slot]), int(state.frames.lengths[slot])
        return state.frames.data[start : start + length - 1].tobytes().decode()

    def topic_of(self, table: SourceTable, slot: int, what: str) -> str:
        """A device's own topic `what` (`pose`, `twist`, `fix`, `battery`)."""
        state = self._source(table)
        suffix = state.suffixes[slot] if what in ("pose", "twist") else ""
        return f"{state.bases[slot]}/{what}{suffix}"

    def markers_topic(self) -> str:
        return names.join(self.prefix if self.prefix is not None else DEFAULT_NAMESPACE, "markers")

    # -- messages ---------------------------------------------------------------------------

    def build(self, table: SourceTable, update: Update) -> list[Message]:
        """The messages of one update of `table` (its changed slots' latest values)."""
        if not len(update):
            return []
        state = self._source(table)
        slots = update.slots
        out: list[Message] = []
        moved = bool(update.fields & {POSITION, ORIENTATION})
        if ATTRIBUTES in update.fields:
            _find_static(table, state)
        times = _times(table, slots)
        if moved:
            out.extend(self._transforms(table, state, slots, times))
        own = slots[state.own[slots]]
        if len(own):
            out.extend(self._device_topics(table, update, own))
        if update.fields - NOT_TELEMETRY:
            dirty = self._diagnosed.get(table.source)
            if dirty is None or len(dirty) < len(table):
                dirty = self._diagnosed[table.source] = _grown(dirty, len(table), False)
                self._diagnosed_at[table.source] = _grown(
                    self._diagnosed_at.get(table.source), len(table), np.nan
                )
            dirty[slots] = True
        if moved or LINKS in update.fields or update.fields & set(LED_FIELDS):
            marker = self._markers(table, state, slots, update)
            if marker is not None:
                out.append(marker)
        return out

    def _transforms(
        self, table: SourceTable, state: _Source, slots: np.ndarray, times: FloatArray
    ) -> list[Message]:
        position = table.position[slots]
        known = ~np.isnan(position).any(axis=1)
        out: list[Message] = []
        if len(state.static) and (static := np.isin(slots, state.static)).any():
            for i in np.flatnonzero(static & known).tolist():
                slot = int(slots[i])
                pose = np.concatenate([position[i], table.orientation[slot]])
                frame = self.frame_of(table, slot)
                before = self._static.get(frame)
                if before is None or not np.array_equal(before[1], pose):
                    self._static[frame] = (float(times[i]), pose)
                    self._static_dirty = True
            known &= ~static
        if self._static_dirty:
            out.append(self.tf_static())
            self._static_dirty = False
        if known.any():
            pick = slots if known.all() else slots[known]
            data = state.tf.encode(pick, times[known], position[known], table.orientation[pick])
            out.append(Message(TF_TOPIC, TF, "tf", data))
        return out

    def tf_static(self) -> Message:
        """Every static frame, in one TFMessage (tf2's static broadcaster sends them so)."""
        transforms = []
        for frame, (time, pose) in sorted(self._static.items()):
            sec, nanosec = cdr.stamps(np.array([time]))[0].tolist()
            transforms.append(
                {
                    "header": {"stamp": {"sec": sec, "nanosec": nanosec}, "frame_id": self.frame},
                    "child_frame_id": frame,
                    "transform": {
                        "translation": dict(zip("xyz", pose[:3].tolist(), strict=True)),
                        "rotation": dict(zip("wxyz", pose[3:].tolist(), strict=True)),
                    },
                }
            )
        return Message(TF_STATIC_TOPIC, TF, "tf_static", cdr.encode(TF, {"transforms": transforms}))

    def _device_topics(
        self, table: SourceTable, update: Update, slots: np.ndarray
    ) -> Iterable[Message]:
        times = _times(table, slots)
        stamp = cdr.stamps(times)
        position = table.position[slots]
        if update.fields & {POSITION, ORIENTATION}:
            known = ~np.isnan(position).any(axis=1)
            orientation = table.orientation[slots[known]]
            pose = np.concatenate([position[known], orientation[:, 1:], orientation[:, :1]], 1)
            yield from self._stamped(table, slots[known], stamp[known], "pose", pose)
        if VELOCITY in update.fields:
            velocity = table.velocity[slots]
            known = ~np.isnan(velocity).any(axis=1)
            yield from self._stamped(table, slots[known], stamp[known], "twist", velocity[known])
        if GEODETIC in update.fields:
            geodetic = table.geodetic[slots]
            for i in np.flatnonzero(~np.isnan(geodetic).any(axis=1)).tolist():
                yield self._fix(table, int(slots[i]), stamp[i], geodetic[i])
        if update.fields & set(BATTERY_FIELDS):
            for i, slot in enumerate(slots.tolist()):
                battery = self._battery(table, slot, stamp[i])
                if battery is not None:
                    yield battery

    def _stamped(
        self, table: SourceTable, slots: np.ndarray, stamp: np.ndarray, what: str, rows: FloatArray
    ) -> Iterable[Message]:
        """A PoseStamped (`pose`: rows of x y z qx qy qz qw) or TwistStamped (`twist`: rows of
        linear x y z) for each of `slots`, encoded as one batch."""
        if not len(slots):
            return
        batch, kind, path = (
            (self._poses, POSE, "pose.position.x")
            if what == "pose"
            else (self._twists, TWIST, "twist.linear.x")
        )
        batch.buffer(len(slots))
        batch.fill("header.stamp.sec", stamp, 2)
        batch.fill(path, rows, rows.shape[1])
        for i, slot in enumerate(slots.tolist()):
            yield Message(
                self.topic_of(table, slot, what), kind, "pose", cdr.HEADER + batch.element(i)
            )

    def _header(self, stamp: np.ndarray, frame: str) -> dict[str, Any]:
        sec, nanosec = stamp.tolist()
        return {"stamp": {"sec": sec, "nanosec": nanosec}, "frame_id": frame}

    def _fix(self, table: SourceTable, slot: int, stamp: np.ndarray, at: FloatArray) -> Message:
        fixes = self._source(table).fixes
        template = fixes.get(slot)
        if template is None:
            value = {
                "header": {"frame_id": self.frame_of(table, slot)},
                "status": {"status": 0, "service": 1},  # STATUS_FIX, SERVICE_GPS
                "position_covariance_type": 0,  # COVARIANCE_TYPE_UNKNOWN
            }
            template = fixes[slot] = cdr.Template(FIX, value)
        sec, nanosec = stamp.tolist()
        latitude, longitude, altitude = at.tolist()
        data = template.encode(
            {
                "header.stamp.sec": sec,
                "header.stamp.nanosec": nanosec,
                "latitude": latitude,
                "longitude": longitude,
                "altitude": altitude,
            }
        )
        return Message(self.topic_of(table, slot, "fix"), FIX, "reliable", data)

    def _battery(self, table: SourceTable, slot: int, stamp: np.ndarray) -> Message | None:
        values = {
            n: float(table.telemetry[n][slot]) for n in BATTERY_FIELDS if n in table.telemetry
        }
        if all(math.isnan(v) for v in values.values()):
            return None
        nan = math.nan
        value = {
            "header": self._header(stamp, self.frame_of(table, slot)),
            "voltage": values.get(VOLTAGE, nan),
            "temperature": nan,
            "current": -values.get(CURRENT, nan),  # ROS: negative while discharging
            "charge": nan,
            "capacity": nan,
            "design_capacity": nan,
            "percentage": values.get(CHARGE, nan),  # 0..1, as UgCS gives it
            "power_supply_status": 0,  # UNKNOWN
            "power_supply_health": 0,
            "power_supply_technology": 0,
            "present": True,
            "location": "",
            "serial_number": table.ids[slot],
        }
        topic = self.topic_of(table, slot, "battery")
        return Message(topic, BATTERY, "reliable", cdr.encode(BATTERY, value))

    def diagnostics(self, tables: dict[str, SourceTable], time: float) -> Message | None:
        """A DiagnosticArray of the devices whose telemetry changed since they were last in
        one, or that were last in one `DIAGNOSTICS_REFRESH` ago: at most `MAX_STATUSES`, taken
        in turn from where the last one ended (a 10,000-drone show's every device comes round
        in ten)."""
        waiting = [
            (source, slot)
            for source, dirty in sorted(self._diagnosed.items())
            if source in tables
            for slot in np.flatnonzero(
                dirty | (self._diagnosed_at[source] <= time - DIAGNOSTICS_REFRESH)
            ).tolist()
        ]
        if not waiting:
            return None
        first = bisect.bisect_right(waiting, self._diagnosed_last)
        chosen = (waiting[first:] + waiting[:first])[:MAX_STATUSES]
        self._diagnosed_last = chosen[-1]
        statuses = []
        for source, slot in chosen:
            table = tables[source]
            self._diagnosed[source][slot] = False
            self._diagnosed_at[source][slot] = time
            values = [
                {"key": f"{name} [{table.units[name]}]" if table.units[name] else name,
                 "value": number(value)}
                for name, (value, _) in sorted(table.telemetry_of(slot).items())
            ]  # fmt: skip
            statuses.append(
                {
                    "level": 0,  # OK
                    "name": f"robowire: {self.frame_of(table, slot)}",
                    "message": table.kinds[slot],
                    "hardware_id": f"{source}/{table.ids[slot]}",
                    "values": values,
                }
            )
        stamp = cdr.stamps(np.array([time]))[0]
        value = {"header": self._header(stamp, ""), "status": statuses}
        return Message(DIAGNOSTICS_TOPIC, DIAGNOSTICS, "reliable", cdr.encode(DIAGNOSTICS, value))

    def log(self, event: LogEvent) -> Message:
        """A log line of a source on /rosout (rcl_interfaces/Log), as a node's logger puts it:
        level as ROS numbers it, logger `robowire.<source>`, the device before the text."""
        sec, nanosec = cdr.stamps(np.array([event.time]))[0].tolist()
        value = {
            "stamp": {"sec": sec, "nanosec": nanosec},
            "level": LOG_LEVELS.get(event.level.lower(), 20),
            "name": f"robowire.{names.token(event.source)}",
            "msg": f"{event.device_id}: {event.text}" if event.device_id else event.text,
        }
        return Message(ROSOUT_TOPIC, LOG, "rosout", cdr.encode(LOG, value))

    # -- markers ----------------------------------------------------------------------------

    def _markers(
        self, table: SourceTable, state: _Source, slots: np.ndarray, update: Update
    ) -> Message | None:
        """One MarkerArray: the changed devices of kinds with a heading (a marker each), every
        device of each swarm kind (one list marker per kind), and the links."""
        is_posed = state.posed_mask[slots]
        codes = np.unique(state.list_code[slots[~is_posed]])
        lists = [state.list_kinds[c] for c in codes.tolist()]
        count = 0
        parts: list[bytes] = []
        position = table.position
        if is_posed.any():
            pick = slots[is_posed]
            known = pick[~np.isnan(position[pick]).any(axis=1)]
            if len(known):
                parts.append(self._posed(table, state, known))
                count += len(known)
        offset = 4 + sum(len(p) for p in parts)
        for kind in lists:
            members = state.members[kind]
            members = members[~np.isnan(position[members]).any(axis=1)]
            if not len(members):
                continue
            shape = LIST_SHAPES.get(kind, SPHERE_LIST)
            scale = SCALES.get(shape, DEFAULT_SCALE)
            value = self._marker(table, f"{table.source}/{kind}", 0, shape, scale)
            value["points"] = position[members]
            value["colors"] = _colours(table, members, kind).astype(np.float32)
            parts.append(cdr.encode_payload(MARKER, value, offset))
            offset += len(parts[-1])
            count += 1
        if LINKS in update.fields or state.links is None:
            state.links = _link_pairs(table)
        first, second = state.links
        known = ~(np.isnan(position[first]).any(axis=1) | np.isnan(position[second]).any(axis=1))
        if known.any():
            ends = np.stack([position[first[known]], position[second[known]]], 1).reshape(-1, 3)
            value = self._marker(table, f"{table.source}/links", 0, LINE_LIST, (LINK_WIDTH, 0, 0))
            value["color"] = dict(zip("rgba", LINK_COLOUR, strict=True))
            value["points"] = ends
            parts.append(cdr.encode_payload(MARKER, value, offset))
            count += 1
        if not count:
            return None
        data = cdr.HEADER + np.uint32(count).tobytes() + b"".join(parts)
        return Message(self.markers_topic(), MARKERS, "reliable", data)

    def _marker(
        self, table: SourceTable, ns: str, ident: int, shape: int, scale: tuple[float, ...]
    ) -> dict[str, Any]:
        stamp = cdr.stamps(np.array([float(np.nanmax(table.receive_time[: len(table)]))]))[0]
        return {
            "header": self._header(stamp, self.frame),
            "ns": ns,
            "id": ident,
            "type": shape,
            "pose": {"orientation": {"w": 1.0}},
            "scale": dict(zip("xyz", scale, strict=True)),
            "color": {"r": 1.0, "g": 1.0, "b": 1.0, "a": 1.0},
        }

    def _posed(self, table: SourceTable, state: _Source, slots: np.ndarray) -> bytes:
        """A marker per device, each in its kind's shape, at its pose."""
        if state.posed is None:
            header = {"frame_id": self.frame}
            state.posed = cdr.Repeated(MARKER, {"header": header, "ns": table.source})
        batch = state.posed
        buffer = batch.buffer(len(slots))
        batch.fill("header.stamp.sec", cdr.stamps(_times(table, slots)), 2)
        shapes = np.array([POSED_SHAPES[state.kinds[s]] for s in slots.tolist()], dtype=np.int32)
        batch.fill("id", slots.astype(np.int32))
        batch.fill("type", shapes)
        orientation = table.orientation[slots]
        pose = np.concatenate([table.position[slots], orientation[:, 1:], orientation[:, :1]], 1)
        batch.fill("pose.position.x", pose, 7)
        batch.fill("scale.x", np.array([SCALES.get(int(s), DEFAULT_SCALE) for s in shapes]), 3)
        kinds = [state.kinds[s] for s in slots.tolist()]
        batch.fill("color.r", _colours(table, slots, kinds), 4)
        return bytes(buffer)


def number(value: float) -> str:
    """A diagnostics value: the shortest text that reads back as the same double (`%g`, what
    diagnostic_updater writes, keeps six digits: an encoder count of 1234567 would be 1.23457e+06),
    without a trailing `.0` (`2`)."""
    text = repr(float(value))
    return text.removesuffix(".0")


def snapshot(table: SourceTable) -> Update:
    """An update touching every device of `table` with everything it has (for a reader that
    joins: DDS gives a volatile topic's new reader nothing written before)."""
    fields = {POSITION, ORIENTATION, VELOCITY, GEODETIC, *table.telemetry}
    return Update(table.source, np.arange(len(table), dtype=np.intp), frozenset(fields), 0.0)


def _times(table: SourceTable, slots: np.ndarray) -> FloatArray:
    """Each device's time: the source's own where it gives one, else when it was received."""
    times: FloatArray = table.source_time[slots]
    missing = np.isnan(times)
    if missing.any():
        times = np.where(missing, table.receive_time[slots], times)
    return np.nan_to_num(times, nan=0.0)


def _colours(table: SourceTable, slots: np.ndarray, kinds: str | list[str]) -> FloatArray:
    """(n, 4) RGBA 0..1: the LED colour where a device has one lit, else its kind's colour."""
    if isinstance(kinds, str):
        rgb = np.tile(KIND_COLOURS.get(kinds, OTHER_COLOUR), (len(slots), 1))
    else:
        rgb = np.array([KIND_COLOURS.get(k, OTHER_COLOUR) for k in kinds]).reshape(-1, 3)
    if all(f in table.telemetry for f in LED_FIELDS):
        led = np.stack([table.telemetry[f][slots] for f in LED_FIELDS], axis=1)
        lit = ~np.isnan(led).any(axis=1)
        rgb[lit] = np.clip(led[lit] / 255.0, 0.0, 1.0)
    out: FloatArray = np.concatenate([rgb, np.ones((len(slots), 1))], axis=1)
    return out


def _link_pairs(table: SourceTable) -> tuple[np.ndarray, np.ndarray]:
    """The slots at both ends of each link of `table` (a link both ends name, once)."""
    index = table.index
    pairs = sorted(
        {
            (min(slot, peer), max(slot, peer))
            for slot, links in enumerate(table.links)
            for other in links
            if (peer := index.get(other, slot)) != slot
        }
    )
    ends = np.array(pairs, dtype=np.intp).reshape(-1, 2)
    return ends[:, 0], ends[:, 1]


def _find_static(table: SourceTable, state: _Source) -> None:
    """The slots of `table` whose attribute `static` is true (their frames go to /tf_static)."""
    attributes = table.attributes
    found = [s for s in range(len(table)) if attributes[s].get(STATIC_ATTRIBUTE)]
    state.static = np.array(found, dtype=np.intp)


def _grown(column: np.ndarray | None, size: int, fill: object) -> np.ndarray:
    """`column` (or nothing) grown to `size` rows, the new ones `fill`."""
    grown = np.full(size, fill)
    if column is not None:
        grown[: len(column)] = column
    return grown
