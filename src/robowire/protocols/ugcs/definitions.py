"""The UgCS VSM's wire vocabulary: what the simulated vehicle registers, and the command checker.
Pure data and checks: no clocks, no sockets, no protobuf.

* `FIELDS` -- the telemetry fields (flight-controller subsystem) with their UgCS names,
  semantics (enum names of `Field_semantic` as strings, e.g. "FIELD_SEMANTIC_LATITUDE"),
  units and the value member the SDK sends them in (`FieldSpec.kind`).
* `COMMANDS` -- the commands with their parameters (`CommandSpec`, `ParamSpec`), and which
  are mission items (`available_in_mission`). `COMMAND_NAMES`, `MISSION_ITEMS` for lookups.
* `PROPERTIES` / `AUTOPILOT_TYPE` -- the device and flight-controller properties.
* `Result(code, text, mission_id, command_map)`: `code` is a `Status_code` enum name
  ("STATUS_OK", "STATUS_FAILED" = the vehicle refused, "STATUS_INVALID_COMMAND" = unknown
  command, missing/bad parameter, item not allowed in a mission; "STATUS_INVALID_SESSION_ID"
  for an index out of range); `text` goes in `Device_response.status`; for `mission_upload`,
  `mission_id` (CRC32 of the mission's content) and `command_map` as (vehicle_command_id,
  mission_command_idx) pairs.
* `parse_params(spec, params)` checks one command's parameters against its `CommandSpec`
  (raises `InvalidCommand`, which the simulator answers with STATUS_INVALID_COMMAND).

Facts from `shared/protocols/ugcs.md` (sections 3.3-3.6) and the SDK's `Vehicle` class (command
and parameter names, which are mission items, the semantic a name gets by default). The
simulator (`model.py`) flies vehicles that answer to this vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

ParamValue = float | int | bool | str | None
"""A command parameter's value in wire units; None is META_VALUE_NA."""
Params = Mapping[str, ParamValue]
MissionItem = tuple[str, Params]
"""A `mission_upload` sub-command: (command name, its parameters)."""

ValueKind = Literal["double", "float", "int", "bool", "string"]
"""The `Field_value` member a value travels in, without its `_value` suffix (enums: int)."""

# -- the vocabulary the VSM registers --------------------------------------------------------

FC = "SUBSYSTEM_TYPE_FLIGHT_CONTROLLER"


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldSpec:
    """One telemetry field: UgCS name, semantic (`Field_semantic` enum name), unit, value
    member (`kind`), and the enumeration the SDK registers with it ((id, description))."""

    name: str
    semantic: str
    unit: str
    kind: ValueKind
    enumeration: tuple[tuple[int, str], ...] = ()
    subsystem: str = FC


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamSpec:
    """One command parameter. `required`: the model refuses NA (None) for it
    (INVALID_COMMAND); `minimum`/`maximum` are registered as the field's min/max values."""

    name: str
    semantic: str
    unit: str
    kind: ValueKind
    required: bool = False
    enumeration: tuple[tuple[int, str], ...] = ()
    minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSpec:
    """One command: UgCS name, parameters, whether it may be a mission item."""

    name: str
    parameters: tuple[ParamSpec, ...] = ()
    available_in_mission: bool = False
    subsystem: str = FC


def _f(name: str, semantic: str, unit: str, kind: ValueKind, **more: Any) -> FieldSpec:
    return FieldSpec(name=name, semantic="FIELD_SEMANTIC_" + semantic, unit=unit, kind=kind,
                     **more)  # fmt: skip


CONTROL_MODES = ((0, "CONTROL_MODE_MANUAL"), (1, "CONTROL_MODE_AUTO"),
                 (2, "CONTROL_MODE_CLICK_GO"), (3, "CONTROL_MODE_JOYSTICK"))  # fmt: skip
"""The enumeration the SDK registers with every CONTROL_MODE field."""

FIELDS: tuple[FieldSpec, ...] = (
    _f("latitude", "LATITUDE", "rad", "double"),
    _f("longitude", "LONGITUDE", "rad", "double"),
    _f("altitude_amsl", "ALTITUDE_AMSL", "m", "float"),
    _f("altitude_agl", "ALTITUDE_AGL", "m", "float"),
    _f("altitude_raw", "ALTITUDE_RAW", "m", "float"),
    _f("altitude_origin", "ALTITUDE_AMSL", "m", "float"),
    _f("heading", "HEADING", "rad", "float"),
    _f("course", "HEADING", "rad", "float"),
    _f("ground_speed", "GROUND_SPEED", "m/s", "float"),
    _f("air_speed", "AIR_SPEED", "m/s", "float"),
    _f("vertical_speed", "VERTICAL_SPEED", "m/s", "float"),
    _f("roll", "ROLL", "rad", "float"),
    _f("pitch", "PITCH", "rad", "float"),
    _f("main_voltage", "VOLTAGE", "V", "float"),
    _f("main_current", "CURRENT", "A", "float"),
    _f("remaining_power_level", "CAPACITY_LEVEL", "1", "float"),
    _f("satellite_count", "SATELLITE_COUNT", "", "int"),
    _f("gps_fix", "GPS_FIX_TYPE", "", "int"),
    _f("rc_link_quality", "RC_LINK_QUALITY", "1", "float"),
    _f("gcs_link_quality", "GCS_LINK_QUALITY", "1", "float"),
    _f("downlink_present", "BOOL", "", "bool"),
    _f("uplink_present", "BOOL", "", "bool"),
    _f("is_armed", "BOOL", "", "bool"),
    _f("fence_enabled", "BOOL", "", "bool"),
    _f("control_mode", "CONTROL_MODE", "", "int", enumeration=CONTROL_MODES),
    _f("flight_mode", "FLIGHT_MODE", "", "int"),
    _f("native_flight_mode", "STRING", "", "string"),
    _f("autopilot_status", "AUTOPILOT_STATUS", "", "int"),
    _f("home_latitude", "LATITUDE", "rad", "double"),
    _f("home_longitude", "LONGITUDE", "rad", "double"),
    _f("home_altitude_amsl", "ALTITUDE_AMSL", "m", "float"),
    _f("home_altitude_raw", "ALTITUDE_RAW", "m", "float"),
    _f("target_latitude", "LATITUDE", "rad", "double"),
    _f("target_longitude", "LONGITUDE", "rad", "double"),
    _f("target_altitude_amsl", "ALTITUDE_AMSL", "m", "float"),
    _f("target_altitude_raw", "ALTITUDE_RAW", "m", "float"),
    _f("current_command", "NUMERIC", "", "int"),
    _f("current_mission_id", "NUMERIC", "", "int"),
)
FIELD_NAMES = tuple(spec.name for spec in FIELDS)


def _p(name: str, semantic: str, unit: str, kind: ValueKind, **more: Any) -> ParamSpec:
    return ParamSpec(name=name, semantic="FIELD_SEMANTIC_" + semantic, unit=unit, kind=kind,
                     **more)  # fmt: skip


def _lat(required: bool = False) -> ParamSpec:
    return _p("latitude", "LATITUDE", "rad", "double", required=required)


def _lon(required: bool = False) -> ParamSpec:
    return _p("longitude", "LONGITUDE", "rad", "double", required=required)


def _alt(required: bool = False, name: str = "altitude_amsl") -> ParamSpec:
    return _p(name, "ALTITUDE_AMSL", "m", "float", required=required)


_RADIUS = _p("acceptance_radius", "ACCEPTANCE_RADIUS", "m", "float")
_HEADING = _p("heading", "HEADING", "rad", "float")
_ELEVATION = _p("ground_elevation", "GROUND_ELEVATION", "m", "float")
_TERRAIN = _p("follow_terrain", "BOOL", "", "bool")


def _stick(axis: str) -> ParamSpec:
    return _p(axis, "NUMERIC", "1", "float", minimum=-1.0, maximum=1.0)


FAILSAFE_ACTIONS = ((0, "rth"), (1, "land"))  # Failsafe_action RTH, LAND
RTH_ACTIONS = ((0, "land"), (1, "wait"))  # Rth_action LAND, WAIT
TURN_TYPES = ((0, "stop_and_turn"), (1, "straight"), (2, "spline"), (3, "bank_turn"))


def _c(name: str, *parameters: ParamSpec, mission: bool = False) -> CommandSpec:
    return CommandSpec(name=name, parameters=parameters, available_in_mission=mission)


COMMANDS: tuple[CommandSpec, ...] = (
    _c("arm"),
    _c("disarm"),
    _c("auto"),
    _c("manual"),
    _c("guided"),
    _c("joystick"),
    _c("direct_vehicle_control",
       *(_stick(axis) for axis in ("pitch", "roll", "yaw", "throttle"))),
    _c("emergency_land"),
    _c("land_command"),
    _c("takeoff_command", _p("relative_altitude", "ALTITUDE_RAW", "m", "float", required=True)),
    _c("return_to_home"),
    _c("mission_upload",
       _alt(True, "altitude_origin"),
       _p("name", "STRING", "", "string"),
       _alt(False, "safe_altitude"),
       _alt(False, "rth_wait_altitude"),
       _p("rc_loss_action", "ENUM", "", "int", enumeration=FAILSAFE_ACTIONS),
       _p("gps_loss_action", "ENUM", "", "int", enumeration=FAILSAFE_ACTIONS),
       _p("low_battery_action", "ENUM", "", "int", enumeration=FAILSAFE_ACTIONS),
       _p("rth_action", "ENUM", "", "int", enumeration=RTH_ACTIONS)),
    _c("mission_clear"),
    _c("mission_pause", _p("additional_altitude", "NUMERIC", "m", "float"), mission=True),
    _c("mission_resume"),
    _c("waypoint", _lat(True), _lon(True), _alt(True), _RADIUS, _alt(False, "altitude_origin"),
       _p("ground_speed", "GROUND_SPEED", "m/s", "float"),
       _p("vertical_speed", "VERTICAL_SPEED", "m/s", "float"),
       _HEADING),
    _c("move",
       _p("turn_type", "ENUM", "", "int", enumeration=TURN_TYPES),
       _lat(True), _lon(True), _alt(True), _RADIUS,
       _p("loiter_radius", "NUMERIC", "m", "float"),
       _p("wait_time", "NUMERIC", "s", "float"),
       _HEADING, _ELEVATION, _TERRAIN, mission=True),
    _c("wait", _p("time", "NUMERIC", "s", "float"), mission=True),
    _c("set_speed", _p("ground_speed", "GROUND_SPEED", "m/s", "float"),
       _p("vertical_speed", "VERTICAL_SPEED", "m/s", "float"), mission=True),
    _c("set_home", _lat(True), _lon(True), _alt(True), _ELEVATION, mission=True),
    _c("set_heading", _p("heading", "HEADING", "rad", "float", required=True), mission=True),
    _c("takeoff_mission", _lat(), _lon(), _alt(True), _RADIUS, _HEADING,
       _p("climb_rate", "VERTICAL_SPEED", "m/s", "float"), _ELEVATION, mission=True),
    _c("land_mission", _lat(), _lon(), _alt(), _RADIUS, _HEADING,
       _p("descent_rate", "VERTICAL_SPEED", "m/s", "float"), _ELEVATION, _TERRAIN,
       mission=True),
)  # fmt: skip
COMMAND_BY_NAME: dict[str, CommandSpec] = {spec.name: spec for spec in COMMANDS}
COMMAND_NAMES = tuple(COMMAND_BY_NAME)
MISSION_ITEMS = tuple(spec.name for spec in COMMANDS if spec.available_in_mission)

AUTOPILOT_TYPE = "emulator"
"""The flight controller's `autopilot_type` property."""
PROPERTIES: Mapping[str, str] = {
    "vehicle_type": "VEHICLE_TYPE_MULTICOPTER",  # int_value of enum Vehicle_type, sem ENUM
    "vehicle_name": "robowire sim",
    "frame_type": "generic_quad_x",
    "port_name": "sim",
}
"""Device properties (vehicle_serial comes from `Fleet.serial`)."""


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """What a command did: a `Status_code` name and the text for `Device_response.status`;
    for a mission_upload also the mission id and (vehicle_command_id, mission_command_idx)."""

    code: str = "STATUS_OK"
    text: str = ""
    mission_id: int | None = None
    command_map: tuple[tuple[int, int], ...] = ()
    progress: float | None = None  # STATUS_IN_PROGRESS: how far (0..1)

    @property
    def ok(self) -> bool:
        return self.code == "STATUS_OK"


OK = Result()


def failed(text: str) -> Result:
    return Result(code="STATUS_FAILED", text=text)


def invalid(text: str) -> Result:
    return Result(code="STATUS_INVALID_COMMAND", text=text)


class InvalidCommand(Exception):
    """A command or mission item that does not parse (-> STATUS_INVALID_COMMAND)."""


# -- parameters ---------------------------------------------------------------------------------


def all_params(command: str, **given: ParamValue) -> dict[str, ParamValue]:
    """Every parameter of `command`: those `given`, the rest not available."""
    return {p.name: given.get(p.name) for p in COMMAND_BY_NAME[command].parameters}


def parse_params(spec: CommandSpec, params: Params) -> dict[str, Any]:
    """Check `params` against `spec`: every registered parameter present, of its kind, in
    range; NA only where allowed. Numbers come back as float (NaN = NA), enums as int or None,
    bools as bool or None, strings as str or None."""
    if not isinstance(params, Mapping):
        raise InvalidCommand(f"{spec.name}: parameters are not a mapping")
    for name in params:
        if not any(p.name == name for p in spec.parameters):
            raise InvalidCommand(f"{spec.name}: unknown parameter {name!r}")
    values: dict[str, Any] = {}
    for p in spec.parameters:
        if p.name not in params:
            raise InvalidCommand(f"{spec.name}: missing parameter {p.name}")
        value = params[p.name]
        if value is None:
            if p.required:
                raise InvalidCommand(f"{spec.name}: {p.name} is not available")
            numeric = p.kind in ("double", "float", "int") and not p.enumeration
            values[p.name] = math.nan if numeric else None
            continue
        values[p.name] = _check(spec.name, p, value)
    return values


def _check(command: str, p: ParamSpec, value: object) -> object:
    where = f"{command}: {p.name}"
    if p.semantic == "FIELD_SEMANTIC_ENUM":
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidCommand(f"{where} must be an enum id, not {value!r}")
        if all(value != id_ for id_, _ in p.enumeration):
            raise InvalidCommand(f"{where}: {value} is not one of its enumeration")
        return value
    if p.kind in ("double", "float", "int"):  # numbers: the SDK takes any numeric member
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidCommand(f"{where} must be a number, not {value!r}")
        number = float(value)
        if not math.isfinite(number):
            raise InvalidCommand(f"{where} must be finite, not {value!r}")
        if p.minimum is not None and number < p.minimum:
            raise InvalidCommand(f"{where}: {number:g} is below the minimum {p.minimum:g}")
        if p.maximum is not None and number > p.maximum:
            raise InvalidCommand(f"{where}: {number:g} exceeds the maximum {p.maximum:g}")
        if p.semantic in _NOT_NEGATIVE and number < 0:
            raise InvalidCommand(f"{where} must not be negative, not {number:g}")
        return number
    if p.kind == "bool":
        if not isinstance(value, bool):
            raise InvalidCommand(f"{where} must be true or false, not {value!r}")
        return value
    if not isinstance(value, str):
        raise InvalidCommand(f"{where} must be a string, not {value!r}")
    return value


_NOT_NEGATIVE = frozenset({"FIELD_SEMANTIC_ACCEPTANCE_RADIUS", "FIELD_SEMANTIC_GROUND_SPEED",
                           "FIELD_SEMANTIC_VERTICAL_SPEED"})  # fmt: skip
