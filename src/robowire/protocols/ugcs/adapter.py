"""UgCS adapters: the world -> VSM telemetry direction (`WorldVehicles`, the serve sink's), and
the UCS -> world direction (the listen source's, below it).

World -> VSM: every world device becomes a UgCS vehicle of one `VsmSession`, with the serial
`SinkNames` gives it: a UgCS source's vehicle its own serial and registered properties (the
attributes `properties` and `subsystem_properties` name them), any other device its id as
serial, read-only `robowire` autopilot. Position from the
device's geodetic column (degrees -> radians on the wire) or, without one, from its ENU position
and a configurable origin (pymap3d `enu2geodetic`); heading from its orientation (ENU yaw,
counter-clockwise from east -> UgCS heading, clockwise from north, 0..2pi); ground speed,
course and vertical speed from its velocity; any world telemetry column whose name is a UgCS
field name (`main_voltage`, `remaining_power_level`, ...) as it is. Devices new in one update
are registered together as one `DeviceGroup`; values are written as columns. The simulator's
fleet (`model.Fleet.telemetry`, world units) goes out through the same conversion
(`fleet_columns`, `wire_units`).

UCS -> world (`UcsAdapter`, the listen source's):

Every registered device is one world device (kind "ugcs"), keyed by its stable label (its
`vehicle_serial`, see `session_ucs.UcsDevice`), never by the per-session device id. Its
registration becomes attributes (properties, autopilot type, device type, the commands it has);
availability becomes the attribute `commands_enabled`; status messages become log lines.

Telemetry keeps the UgCS field names, each with its unit, converted from wire units:
radians -> degrees for latitude/longitude and every angle (heading, course, roll, pitch, yaw,
fields of view), metres, m/s, V, A, 0..1 ratios (link qualities, `remaining_power_level`, also
given as `battery` in %), booleans 0/1, enumerations and counts as numbers (their names as
attributes: `flight_mode`, `control_mode`, `gps_fix`, `autopilot_status`), strings as
attributes. NA (the VSM's `META_VALUE_NA`) is NaN: a value holds until the VSM changes it or
says NA. `mission_item` is the index of the uploaded mission's item the vehicle is on.

The frame: `geodetic` is (latitude deg, longitude deg, altitude m AMSL; `altitude_raw` when the
vehicle sends no AMSL altitude); `position` is ENU metres from the origin (given, or the first
fix), by pymap3d; `orientation` from heading (clockwise from north), pitch (nose up) and roll
(right wing down), body axes x forward, y left, z up; `velocity` ENU from `ground_speed` along
`course` (or heading) and `vertical_speed`. Source time is `begin_of_epoch + ms_since_epoch`.

One read's worth of events (a thousand vehicles' Device_status) is one world update: values are
grouped per field and written as columns. A session's `TelemetryColumns` (many Device_status
read as columns) is written from its columns, with no Python object per value (numbers; text
and enumerations, which become attributes, one at a time).

Size: one module over 600 lines: the mapping between UgCS and the world both ways, as every
protocol's `adapter.py` has it; both directions share the unit and frame conversions.
"""

from __future__ import annotations

import itertools
import logging
import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pymap3d

from robowire import units
from robowire.protocols.ugcs import definitions
from robowire.protocols.ugcs.codec import DEGREE_SEMANTICS, Kind, Value, column_value, defs
from robowire.protocols.ugcs.device import DeviceInfo, DeviceSpec
from robowire.protocols.ugcs.events import (
    AvailabilityChanged,
    DeviceRegistered,
    DeviceUnregistered,
    MissionProgress,
    StatusMessages,
    TelemetryColumns,
    TelemetryReceived,
    UcsSessionEvent,
)
from robowire.protocols.ugcs.session_ucs import device_label
from robowire.protocols.ugcs.session_vsm import VsmSession
from robowire.protocols.ugcs.vehicle import vehicle_spec
from robowire.wire import SITE, PacketDropped
from robowire.world import LogEvent, Update, World
from robowire.world.identity import SinkNames
from robowire.world.model import ATTRIBUTES
from robowire.world.table import SourceTable

__all__ = [
    "DEFAULT_ORIGIN",
    "UcsAdapter",
    "WorldVehicles",
    "fleet_columns",
    "heading_of_quaternions",
    "quaternions",
    "semantic_unit",
]

log = logging.getLogger("robowire.ugcs")

DEFAULT_ORIGIN = SITE
"""Where ENU devices are placed without `?origin=` (lat deg, lon deg, alt m): the simulator's."""

FloatArray = npt.NDArray[np.float64]
_FIELD_NAMES = frozenset(definitions.FIELD_NAMES)


def heading_of_quaternions(q: FloatArray) -> FloatArray:
    """UgCS headings (radians clockwise from north, 0..2pi) of ENU orientations (w, x, y, z)."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    with np.errstate(invalid="ignore"):  # an infinite quaternion has no heading: NaN
        yaw = np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))  # from east, CCW
    return np.mod(math.pi / 2 - yaw, math.tau)


class WorldVehicles:
    """World devices -> vehicles of `session` (see the module docstring)."""

    def __init__(
        self,
        session: VsmSession,
        *,
        origin: tuple[float, float, float] = DEFAULT_ORIGIN,
        name: str = "robowire",
    ) -> None:
        self.session = session
        self.origin = origin
        self.name = name
        # per source: slot -> device group index and row (-1: not registered yet)
        self._group: dict[str, npt.NDArray[np.intp]] = {}
        self._row: dict[str, npt.NDArray[np.intp]] = {}
        self._placed = False  # an ENU device has been placed about the origin (said once)
        self.names = SinkNames("ugcs", where="ugcs serve")

    def _spec(self, table: SourceTable, slot: int, serial: str) -> DeviceSpec:
        """The registration of a world device: a UgCS vehicle's own properties (as its UCS
        adapter wrote them) with `serial`; any other device a read-only `robowire` vehicle."""
        name = table.names[slot] or table.ids[slot]
        common: dict[str, Any] = {"commands": (), "camera": False, "gimbal": False}
        if not self.names.native(table):
            return vehicle_spec(
                serial, name=name, autopilot_type="robowire", port_name=table.source, **common
            )
        attributes = table.attributes[slot]

        def registered(key: str) -> dict[str, tuple[Value, int]]:
            names = attributes.get(key, ())
            return {
                n: (attributes[n], _semantic_of(attributes[n])) for n in names if n in attributes
            }

        properties = registered("properties")
        properties["vehicle_serial"] = (serial, defs.FIELD_SEMANTIC_STRING)
        controller = registered("subsystem_properties")
        autopilot = controller.pop("autopilot_type", ("robowire", 0))[0]
        return vehicle_spec(
            serial,
            name=name,
            autopilot_type=str(autopilot),
            properties=properties,
            controller_properties=controller,
            **common,
        )

    def vehicles(self) -> int:
        return sum(len(g) for g in self.session.groups)

    def write(self, world: World, items: Sequence[Update | LogEvent], wall_ms: int) -> None:
        for item in items:
            if isinstance(item, Update) and len(item.slots):
                table = world.tables.get(item.source)
                if table is not None:
                    self._update(table, item, wall_ms)

    def _slots(self, table: SourceTable, slots: npt.NDArray[np.intp], wall_ms: int) -> None:
        """Register the slots seen for the first time, as one group."""
        source = table.source
        groups = self._group.get(source, np.zeros(0, dtype=np.intp))
        top = int(slots.max()) + 1
        if top > len(groups):
            grown = np.full(max(top, 2 * len(groups)), -1, dtype=np.intp)
            grown[: len(groups)] = groups
            rows = np.full(len(grown), -1, dtype=np.intp)
            rows[: len(groups)] = self._row.get(source, np.zeros(0, dtype=np.intp))
            self._group[source], self._row[source] = grown, rows
        groups, rows = self._group[source], self._row[source]
        new = np.unique(slots[groups[slots] < 0])
        if not len(new):
            return
        serials = self.names.names(table, new)
        specs = [self._spec(table, int(s), serial) for s, serial in zip(new, serials, strict=True)]
        self.session.register_group(specs, wall_ms)
        index = len(self.session.groups) - 1
        groups[new] = index
        rows[new] = np.arange(len(new))
        group = self.session.groups[index]
        n = len(new)
        group.update(
            {
                "gps_fix": np.full(n, 2.0),  # GPS_FIX_TYPE_3D: the world's positions are fixes
                "downlink_present": np.ones(n),
                "uplink_present": np.ones(n),
            },
            wall_ms,
        )

    def _update(self, table: SourceTable, update: Update, wall_ms: int) -> None:
        slots = update.slots
        self._slots(table, slots, wall_ms)
        groups = self._group[table.source][slots]
        rows = self._row[table.source][slots]
        columns = self._columns(table, slots, update.fields)
        if not columns:
            return
        for index in np.unique(groups).tolist():
            mine = groups == index
            self.session.groups[index].update(
                {k: v[mine] for k, v in columns.items()}, wall_ms, rows=rows[mine]
            )

    def _columns(
        self, table: SourceTable, slots: npt.NDArray[np.intp], fields: frozenset[str]
    ) -> dict[str, FloatArray]:
        out: dict[str, FloatArray] = {}
        if "geodetic" in fields or "position" in fields:
            geo = table.geodetic[slots]
            lat, lon, alt = geo[:, 0].copy(), geo[:, 1].copy(), geo[:, 2].copy()
            missing = np.isnan(lat) | np.isnan(lon)
            if missing.any():
                if not self._placed:
                    self._placed = True
                    lat0, lon0, alt0 = self.origin
                    log.info(
                        "ugcs: devices without a geodetic fix are placed about the origin "
                        "%.7g, %.7g, %.6g m (?origin=LAT,LON,ALT sets it)",
                        lat0,
                        lon0,
                        alt0,
                    )
                enu = table.position[slots][missing]
                with np.errstate(invalid="ignore"):  # an infinite point is nowhere: NaN
                    la, lo, al = pymap3d.enu2geodetic(
                        enu[:, 0], enu[:, 1], enu[:, 2], *self.origin, deg=True
                    )
                lat[missing], lon[missing] = la, lo
                alt[missing] = al
            out["latitude"] = wire_units(units.DEGREE, lat)
            out["longitude"] = wire_units(units.DEGREE, lon)
            out["altitude_amsl"] = alt
            out["altitude_raw"] = alt - self.origin[2]
        if "orientation" in fields:
            heading = heading_of_quaternions(table.orientation[slots])
            out["heading"] = np.where(table.has_orientation[slots], heading, np.nan)
        if "velocity" in fields:
            v = table.velocity[slots]
            out["ground_speed"] = np.hypot(v[:, 0], v[:, 1])
            out["vertical_speed"] = v[:, 2].copy()
            out["course"] = np.mod(np.arctan2(v[:, 0], v[:, 1]), math.tau)
        for name in fields & _FIELD_NAMES:
            column = table.telemetry.get(name)
            if column is None:
                continue
            values = column[slots]
            unit = table.units.get(name, "")
            if name in out:  # derived above from the world's own columns: fill gaps only
                values = np.where(np.isnan(out[name]), wire_units(unit, values), out[name])
            else:
                values = wire_units(unit, values)
            out[name] = values
        return out


def _semantic_of(value: Any) -> int:
    """The `Field_semantic` a property value of this Python type goes out with (the SDK's
    vehicle properties are strings and the `vehicle_type` ENUM)."""
    if isinstance(value, bool):
        return int(defs.FIELD_SEMANTIC_BOOL)
    if isinstance(value, int):
        return int(defs.FIELD_SEMANTIC_ENUM)
    if isinstance(value, float):
        return int(defs.FIELD_SEMANTIC_NUMERIC)
    return int(defs.FIELD_SEMANTIC_STRING)


def wire_units(unit: str, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """A world column in `unit` in the units of the UgCS field it goes out as: the wire's
    angles are radians, the world's degrees (a UgCS source writes `latitude`, `heading`, ...
    in deg); the rest as it is."""
    return np.radians(values) if unit == units.DEGREE else values


_ANGLES = frozenset(spec.name for spec in definitions.FIELDS if spec.unit == "rad")


def fleet_columns(columns: Mapping[str, npt.NDArray[Any]]) -> dict[str, npt.NDArray[Any]]:
    """The simulator's telemetry (`model.Fleet.telemetry`: the fields by name, in world units,
    angles in degrees) in the VSM's wire units, as the sink's world columns (`wire_units`)."""
    return {
        name: wire_units(units.DEGREE if name in _ANGLES else "", values)
        for name, values in columns.items()
    }


# --- UCS side -> world (the listen source) -------------------------------------------------


KIND = "ugcs"
Origin = tuple[float, float, float]  # latitude deg, longitude deg, altitude m

_S = defs
_DEGREES = DEGREE_SEMANTICS
_UNITS: dict[int, str] = {
    _S.FIELD_SEMANTIC_ALTITUDE_AMSL: units.METRE,
    _S.FIELD_SEMANTIC_ALTITUDE_AGL: units.METRE,
    _S.FIELD_SEMANTIC_ALTITUDE_RAW: units.METRE,
    _S.FIELD_SEMANTIC_GROUND_ELEVATION: units.METRE,
    _S.FIELD_SEMANTIC_ACCEPTANCE_RADIUS: units.METRE,
    _S.FIELD_SEMANTIC_LOITER_RADIUS: units.METRE,
    _S.FIELD_SEMANTIC_VOLTAGE: units.VOLT,
    _S.FIELD_SEMANTIC_CURRENT: "A",
    _S.FIELD_SEMANTIC_AIR_SPEED: units.METRE_PER_SECOND,
    _S.FIELD_SEMANTIC_GROUND_SPEED: units.METRE_PER_SECOND,
    _S.FIELD_SEMANTIC_VERTICAL_SPEED: units.METRE_PER_SECOND,
    _S.FIELD_SEMANTIC_RC_LINK_QUALITY: units.RATIO,
    _S.FIELD_SEMANTIC_GCS_LINK_QUALITY: units.RATIO,
    _S.FIELD_SEMANTIC_CAPACITY_LEVEL: units.RATIO,
    _S.FIELD_SEMANTIC_BOOL: units.BOOLEAN,
    _S.FIELD_SEMANTIC_MILLISECONDS: "ms",
    _S.FIELD_SEMANTIC_TIMESTAMP: "ms",
    _S.FIELD_SEMANTIC_TEMPERATURE: units.CELSIUS,
    _S.FIELD_SEMANTIC_HUMIDITY: units.PERCENT,
    _S.FIELD_SEMANTIC_PRECIPITATION: "mm/h",
    **dict.fromkeys(_DEGREES, units.DEGREE),
}


def semantic_unit(semantic: int) -> str:
    """The unit robowire gives a value of this `Field_semantic` (degrees for angles)."""
    return _UNITS.get(semantic, "")


_ENUM_NAMES: dict[int, Any] = {
    _S.FIELD_SEMANTIC_FLIGHT_MODE: _S.Flight_mode,
    _S.FIELD_SEMANTIC_CONTROL_MODE: _S.Control_mode,
    _S.FIELD_SEMANTIC_GPS_FIX_TYPE: _S.Gps_fix_type,
    _S.FIELD_SEMANTIC_AUTOPILOT_STATUS: _S.Autopilot_status,
}
_POSITION = frozenset({"latitude", "longitude", "altitude_amsl", "altitude_raw"})
_ATTITUDE = frozenset({"heading", "roll", "pitch"})
_MOTION = frozenset({"ground_speed", "course", "heading", "vertical_speed"})
_LEVELS = {0: "info", 1: "warning", 2: "error"}
_SCALE = 180.0 / math.pi


class _Column:
    """How one field of one device goes into the world: its column, unit and conversion."""

    __slots__ = ("enum", "name", "scale", "semantic", "text", "unit")

    def __init__(self, name: str, semantic: int) -> None:
        self.name = name
        self.semantic = semantic
        self.unit = _UNITS.get(semantic, units.COUNT)
        self.scale = _SCALE if semantic in _DEGREES else 1.0
        self.enum = _ENUM_NAMES.get(semantic)
        self.text = semantic in (
            _S.FIELD_SEMANTIC_STRING,
            _S.FIELD_SEMANTIC_BINARY,
            _S.FIELD_SEMANTIC_LIST,
            _S.FIELD_SEMANTIC_ANY,
        )

    def attribute(self, value: Value) -> Any:
        """The attribute a text field's value (bytes as hex) or an enumeration's value (its
        name, None for a number it does not name) becomes."""
        if self.text:
            return value if not isinstance(value, bytes) else value.hex()
        names = self.enum
        if names is not None and isinstance(value, int) and value in names.values():
            return names.Name(value).removeprefix(names.DESCRIPTOR.name.upper() + "_")
        return None


def _write_column(
    table: SourceTable, column: _Column, slots: Any, values: Any, changed: set[str]
) -> None:
    """One field's values (world units) at `slots`; a remaining power level is also
    `battery` in %."""
    table.column(column.name, column.unit)[slots] = values
    changed.add(column.name)
    if column.semantic == _S.FIELD_SEMANTIC_CAPACITY_LEVEL and column.name.startswith(
        "remaining_power"
    ):
        with np.errstate(over="ignore"):  # a level past a double's range / 100: inf, quietly
            table.column("battery", units.PERCENT)[slots] = np.asarray(values) * 100.0
        changed.add("battery")


def _device_type(number: int) -> str:
    try:
        return str(_S.Device_type.Name(_S.Device_type.ValueType(number)))
    except ValueError:
        return str(number)


def _number(value: Value) -> float:
    if value is None or isinstance(value, str | bytes | list):
        return math.nan
    return float(value)


def quaternions(heading: FloatArray, pitch: FloatArray, roll: FloatArray) -> FloatArray:
    """ENU (w, x, y, z) quaternions of body axes (x forward, y left, z up) from UgCS angles
    in radians: heading clockwise from north, pitch nose up, roll right wing down. A NaN
    pitch or roll counts as level; a NaN heading gives a NaN quaternion (no orientation)."""
    yaw = 0.5 * (math.pi / 2 - heading)  # counter-clockwise from east
    half_pitch = -0.5 * np.nan_to_num(pitch)  # nose up is a negative turn about y (left)
    half_roll = 0.5 * np.nan_to_num(roll)  # right wing down is positive about x (forward)
    cy, sy = np.cos(yaw), np.sin(yaw)
    cp, sp = np.cos(half_pitch), np.sin(half_pitch)
    cr, sr = np.cos(half_roll), np.sin(half_roll)
    return np.stack(
        (
            cy * cp * cr + sy * sp * sr,
            cy * cp * sr - sy * sp * cr,
            cy * sp * cr + sy * cp * sr,
            sy * cp * cr - cy * sp * sr,
        ),
        axis=-1,
    )


class _Lookup:
    """Where the values of one connection's registered fields go, found by device id and
    field id for many at once: the world slot, the column (`names`, `columns`) and scale."""

    def __init__(self, adapter: UcsAdapter, conn: int, table: SourceTable) -> None:
        keys, slots, codes, devices, device_slots = [], [], [], [], []
        self.names: list[str] = []
        self.columns: list[_Column] = []
        code_of: dict[str, int] = {}
        for (c, device_id), (label, fields) in adapter._keys.items():
            if c != conn:
                continue
            slot = table.slot(label, KIND)
            devices.append(device_id)
            device_slots.append(slot)
            columns = adapter._columns.get(label, {})
            for field_id, key in fields.items():
                column = columns.get(key)
                if column is None:
                    continue
                code = code_of.get(key)
                if code is None:
                    code = code_of[key] = len(self.names)
                    self.names.append(key)
                    self.columns.append(column)
                keys.append(device_id << 32 | field_id)
                slots.append(slot)
                codes.append(code)
        order = np.argsort(np.array(keys, np.int64), kind="stable")
        self.keys = np.array(keys, np.int64)[order]
        self.slots = np.array(slots, np.intp)[order]
        self.codes = np.array(codes, np.intp)[order]
        order = np.argsort(np.array(devices, np.int64))
        self.devices = np.array(devices, np.int64)[order]
        self.device_slots = np.array(device_slots, np.intp)[order]
        self.scale = np.array([c.scale for c in self.columns])
        self.plain = np.array([not c.text and c.enum is None for c in self.columns], bool)

    def device_slots_of(self, device_id: np.ndarray) -> np.ndarray:
        """The world slots of the registered ones of `device_id`."""
        if not len(self.devices):
            return np.zeros(0, np.intp)
        at = np.minimum(np.searchsorted(self.devices, device_id), len(self.devices) - 1)
        slots: np.ndarray = self.device_slots[at[self.devices[at] == device_id]]
        return slots

    def find(self, device_id: np.ndarray, field_id: np.ndarray) -> np.ndarray:
        """The index into `keys` of each (device id, field id), -1 for one not registered."""
        if not len(self.keys):
            return np.full(len(device_id), -1, np.intp)
        keys = (device_id.astype(np.int64) << 32) | field_id
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[at] == keys, at, -1)


def _text_values(
    lookup: _Lookup,
    batch: TelemetryColumns,
    known: np.ndarray,
    slot: np.ndarray,
    code: np.ndarray,
    number: np.ndarray,
) -> dict[int, dict[str, Any]]:
    """The values of `batch` (rows `known`) that are not plain numbers, one at a time:
    strings become attributes (their `code` is set to -1: no column), enumerations both a
    number (in `number`) and their name as an attribute. Returns slot -> attributes."""
    attributes: dict[int, dict[str, Any]] = {}
    text = np.flatnonzero(~lookup.plain[code] | (batch.kind[known] >= Kind.STRING))
    for i in text.tolist():
        column, row = lookup.columns[code[i]], int(known[i])
        value = column_value(
            int(batch.kind[row]), batch.integer[row], batch.number[row], batch.objects.get(row)
        )
        if column.text or column.enum is not None:
            attributes.setdefault(int(slot[i]), {})[column.name] = column.attribute(value)
        if column.text:
            code[i] = -1  # no column
        else:
            number[i] = _number(value) * column.scale  # (a string in a number's field: NaN)
    return attributes


class UcsAdapter:
    """Writes what a UCS session hears into `world` under `source` (see the module docstring).

    `origin` (latitude deg, longitude deg, altitude m) is the ENU origin; None: the first fix.
    """

    def __init__(self, world: World, source: str, origin: Origin | None = None) -> None:
        self.world = world
        self.source = source
        self.origin = origin
        self.dropped = 0
        self._columns: dict[str, dict[str, _Column]] = {}  # label -> field key -> column
        self._labels: dict[tuple[int, int], str] = {}  # (conn, session device id) -> label
        self._keys: dict[tuple[int, int], tuple[str, dict[int, str]]] = {}  # ... + field keys
        self._enabled: dict[str, dict[str, bool]] = {}  # label -> command -> usable now
        self._lookups: dict[int, _Lookup] = {}  # conn -> its fields' columns, for columns

    def apply(self, events: Sequence[UcsSessionEvent], receive_time: float) -> int:
        """Write `events` into the world (telemetry as one columnar update); returns how many
        reports it took in (registrations, unregistrations, telemetry, availability, status
        messages: a Device_status with telemetry and availability is two)."""
        taken = 0
        changes: dict[str, dict[str, Value]] = {}
        newest: dict[str, int] = {}
        mission: dict[str, int | None] = {}
        labels = self._labels
        writes: list[Any] = []  # telemetry, written in order once the rest is
        for event in events:
            match event:
                case TelemetryColumns(frames=frames):
                    taken += frames
                    if changes or mission:  # what came before it is older: written first
                        writes.append((changes, newest, mission))
                        changes, newest, mission = {}, {}, {}
                    writes.append(event)
                case TelemetryReceived():
                    taken += 1
                    self._gather(event, changes, newest)
                case MissionProgress(conn=conn, device_id=device_id, item=item):
                    label = labels.get((conn, device_id))
                    if label is not None:
                        mission[label] = item
                case DeviceRegistered(conn=conn, device=info):
                    taken += 1
                    self._register(conn, info, receive_time)
                case DeviceUnregistered(conn=conn, device_id=device_id):
                    taken += 1
                    self._unregister(conn, device_id, receive_time)
                case AvailabilityChanged():
                    taken += 1
                    self._availability(event, receive_time)
                case StatusMessages():
                    taken += 1
                    self._status_messages(event, receive_time)
                case PacketDropped():
                    self.dropped += 1
        if changes or mission:
            writes.append((changes, newest, mission))
        for write in writes:
            if isinstance(write, TelemetryColumns):
                self._write_columns(write, receive_time)
            else:
                written, times, items = write
                self._write(written, times, items, receive_time)
        return taken

    def _gather(
        self,
        event: TelemetryReceived,
        changes: dict[str, dict[str, Value]],
        newest: dict[str, int],
    ) -> None:
        """One Device_status's values into `changes` (vehicle -> field key -> value) and its
        newest time into `newest`, for one columnar write (`_write`)."""
        known = self._keys.get((event.conn, event.device_id))
        if known is None:
            return
        vehicle, keys = known
        held = changes.get(vehicle)
        if held is None:
            held = changes[vehicle] = {}
        latest = newest.get(vehicle, -(1 << 62))
        for tv in event.values:
            key = keys.get(tv.field_id)
            if key is not None:
                held[key] = tv.value
                if tv.time_ms > latest:
                    latest = tv.time_ms
        if latest > -(1 << 62):  # (values of unregistered fields only: no time)
            newest[vehicle] = latest

    def _unregister(self, conn: int, device_id: int, receive_time: float) -> None:
        label = self._labels.pop((conn, device_id), None)
        self._keys.pop((conn, device_id), None)
        self._lookups.pop(conn, None)
        # a vehicle found again (a VSM restarted, a link found again) may be registered under
        # its new id before its old id goes: it is still registered (rare: a scan is fine)
        if label is not None and label not in self._labels.values():
            self._attributes(label, {"registered": False}, receive_time)

    def _availability(self, event: AvailabilityChanged, receive_time: float) -> None:
        """The commands a vehicle has enabled now, as its `commands_enabled` attribute."""
        label = self._labels.get((event.conn, event.device_id))
        if label is None:
            return
        enabled = self._enabled.setdefault(label, {})
        usable = map(operator.and_, event.available, event.enabled)
        enabled.update(zip(event.names, usable, strict=True))
        names = sorted(n for n, on in enabled.items() if on and n)
        self._attributes(label, {"commands_enabled": names}, receive_time)

    def _status_messages(self, event: StatusMessages, receive_time: float) -> None:
        """A vehicle's status messages as log events (their severity as the level)."""
        label = self._labels.get((event.conn, event.device_id), f"device{event.device_id}")
        for message in event.messages:
            level = _LEVELS.get(message.severity, "info")
            self.world.log(self.source, label, message.text, time=receive_time, level=level)

    # -- registration -------------------------------------------------------------------------

    def _register(self, conn: int, device: DeviceInfo, receive_time: float) -> None:
        self._lookups.pop(conn, None)
        label = device_label(device)
        self._labels[(conn, device.device_id)] = label
        self._keys[(conn, device.device_id)] = (label, {f.field_id: f.key for f in device.fields})
        self._columns[label] = {f.key: _Column(f.key, f.semantic) for f in device.fields}
        self._enabled[label] = {}
        table = self.world.table(self.source)
        table.slot(label, KIND, label)
        attributes: dict[str, Any] = {
            "registered": True,
            "session_id": device.device_id,
            "device_type": _device_type(device.type),
            "commands": sorted(device.commands_by_name),
            "mission_items": sorted(c.name for c in device.commands if c.available_in_mission),
        }
        # the registered properties, and which they are (what a UgCS sink registers again)
        own = {k: v for k, v in device.properties.items() if not isinstance(v, bytes | list)}
        subsystems = {
            k: v
            for _kind, properties in device.subsystem_properties
            for k, v in properties.items()
            if not isinstance(v, bytes | list)
        }
        attributes.update(subsystems)
        attributes.update(own)
        attributes["properties"] = sorted(own)
        attributes["subsystem_properties"] = sorted(subsystems)
        self._attributes(label, attributes, receive_time)

    def _attributes(self, label: str, attributes: dict[str, Any], receive_time: float) -> None:
        self.world.update_device(
            self.source, label, receive_time=receive_time, kind=KIND, attributes=attributes
        )

    # -- telemetry ----------------------------------------------------------------------------

    def _write(
        self,
        changes: dict[str, dict[str, Value]],
        newest: dict[str, int],
        mission: dict[str, int | None],
        receive_time: float,
    ) -> None:
        table = self.world.table(self.source)
        labels = [*changes, *(m for m in mission if m not in changes)]  # arrival order
        slot_of = table.index
        slots = np.fromiter(
            (slot_of[x] if x in slot_of else table.slot(x, KIND) for x in labels),
            dtype=np.intp,
            count=len(labels),
        )
        grouped, attributes = self._group(labels, changes, mission)
        changed: set[str] = set()
        for column, rows, values in grouped.values():
            _write_column(table, column, slots[rows], values, changed)
        for row, texts in attributes.items():
            table.attributes[int(slots[row])].update(texts)
        if attributes:
            changed.add(ATTRIBUTES)
        source_time = table.source_time[slots]
        for row, label in enumerate(labels):
            ms = newest.get(label)
            if ms is not None:
                source_time[row] = ms / 1000.0
        self._update(table, slots, source_time, changed, receive_time)

    def _write_columns(self, batch: TelemetryColumns, receive_time: float) -> None:
        """A session's `TelemetryColumns`, written from its columns: the values of registered
        fields (text and enumerations as attributes, `_text_values`), each field's numbers as
        one column write, then every vehicle a frame came from is updated."""
        table = self.world.table(self.source)
        lookup = self._lookups.get(batch.conn)
        if lookup is None:
            lookup = self._lookups[batch.conn] = _Lookup(self, batch.conn, table)
        at = lookup.find(batch.device_id, batch.field_id)
        known = np.flatnonzero(at >= 0)
        at = at[known]
        slot, code = lookup.slots[at], lookup.codes[at]
        with np.errstate(over="ignore"):  # a double past its unit's range: inf, as a float's
            number = batch.number[known] * lookup.scale[code]  # product is one at a time
        attributes = _text_values(lookup, batch, known, slot, code, number)
        changed: set[str] = set()
        order = np.argsort(code, kind="stable")  # per column, in arrival order
        code, slot, number = code[order], slot[order], number[order]
        edges = np.flatnonzero(np.diff(code)) + 1
        bounds = [0, *edges.tolist(), len(code)] if len(code) else []
        for a, b in itertools.pairwise(bounds):
            if code[a] >= 0:
                _write_column(table, lookup.columns[code[a]], slot[a:b], number[a:b], changed)
        for row, texts in attributes.items():
            table.attributes[row].update(texts)
        if attributes:
            changed.add(ATTRIBUTES)
        # every vehicle a frame came from, as the per-message path (values or not)
        slots = np.unique(lookup.device_slots_of(batch.device_id))
        if not len(slots):
            return
        source_time = table.source_time[slots]
        newest = np.full(len(slots), -(1 << 62), np.int64)
        np.maximum.at(newest, np.searchsorted(slots, lookup.slots[at]), batch.time_ms[known])
        has = newest > -(1 << 62)
        source_time[has] = newest[has] / 1000.0
        self._update(table, slots, source_time, changed, receive_time)

    def _update(
        self,
        table: SourceTable,
        slots: npt.NDArray[np.intp],
        source_time: FloatArray,
        changed: set[str],
        receive_time: float,
    ) -> None:
        """The world update of `slots` whose `changed` columns were written: the frame
        derived from them (geodetic, position, orientation, velocity) and the source time."""
        geodetic = position = orientation = velocity = None
        if changed & _POSITION:
            geodetic, position = self._position(table, slots)
        if changed & _ATTITUDE:
            orientation = quaternions(
                self._held(table, "heading", slots, 1 / _SCALE),
                self._held(table, "pitch", slots, 1 / _SCALE),
                self._held(table, "roll", slots, 1 / _SCALE),
            )
        if changed & _MOTION:
            velocity = self._velocity(table, slots)
        self.world.update(
            self.source,
            slots,
            receive_time=receive_time,
            source_time=source_time,
            geodetic=geodetic,
            position=position,
            orientation=orientation,
            velocity=velocity,
            changed=changed,
        )

    def _group(
        self,
        labels: list[str],
        changes: dict[str, dict[str, Value]],
        mission: dict[str, int | None],
    ) -> tuple[dict[str, tuple[_Column, list[int], list[float]]], dict[int, dict[str, Any]]]:
        """The values per field, field -> (its column, rows of `labels`, values in world
        units), and the text attributes per row (strings, enumeration names)."""
        grouped: dict[str, tuple[_Column, list[int], list[float]]] = {}
        attributes: dict[int, dict[str, Any]] = {}
        for row, label in enumerate(labels):
            columns = self._columns.get(label, {})
            for name, value in changes.get(label, {}).items():
                column = columns.get(name)
                if column is None:
                    continue
                if column.text or column.enum is not None:
                    attributes.setdefault(row, {})[name] = column.attribute(value)
                if column.text:
                    continue
                entry = grouped.get(name)
                if entry is None:
                    entry = grouped[name] = (column, [], [])
                entry[1].append(row)
                entry[2].append(_number(value) * column.scale)
        for row, label in enumerate(labels):
            if label in mission:
                entry = grouped.get("mission_item")
                if entry is None:
                    entry = grouped["mission_item"] = (_Column("mission_item", -1), [], [])
                item = mission[label]
                entry[1].append(row)
                entry[2].append(math.nan if item is None else float(item))
        return grouped, attributes

    @staticmethod
    def _held(table: Any, name: str, slots: Any, scale: float = 1.0) -> FloatArray:
        """The values the frame is derived from: an infinite one (a broken vehicle's) is no
        value, NaN, as the telemetry column's NA is."""
        column = table.telemetry.get(name)
        if column is None:
            return np.full(len(slots), np.nan)
        values: FloatArray = column[slots] * scale
        values[np.isinf(values)] = np.nan
        return values

    def _position(self, table: Any, slots: Any) -> tuple[FloatArray, FloatArray]:
        lat = self._held(table, "latitude", slots)
        lon = self._held(table, "longitude", slots)
        alt = self._held(table, "altitude_amsl", slots)
        alt = np.where(np.isnan(alt), self._held(table, "altitude_raw", slots), alt)
        geodetic = np.stack((lat, lon, alt), axis=-1)
        # a fix off the globe is no fix: it would be no origin for every other vehicle
        geodetic[(np.abs(lat) > 90) | (np.abs(lon) > 180)] = np.nan
        if self.origin is None:
            fixed = np.flatnonzero(~np.isnan(geodetic).any(axis=1))
            if len(fixed):
                first = geodetic[fixed[0]]
                self.origin = (float(first[0]), float(first[1]), float(first[2]))
        if self.origin is None:
            return geodetic, np.full((len(slots), 3), np.nan)
        east, north, up = pymap3d.geodetic2enu(*geodetic.T, *self.origin)
        position: FloatArray = np.stack((east, north, up), axis=-1)
        return geodetic, position

    def _velocity(self, table: Any, slots: Any) -> FloatArray:
        speed = self._held(table, "ground_speed", slots)
        course = self._held(table, "course", slots, 1 / _SCALE)
        course = np.where(np.isnan(course), self._held(table, "heading", slots, 1 / _SCALE), course)
        climb = np.nan_to_num(self._held(table, "vertical_speed", slots))
        velocity: FloatArray = np.stack(
            (speed * np.sin(course), speed * np.cos(course), climb), axis=-1
        )
        return velocity
