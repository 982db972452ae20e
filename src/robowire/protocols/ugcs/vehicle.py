"""UgCS vehicles: `Vehicle`, a VSM for your own vehicle, and the registrations behind it.

`Vehicle` mirrors the UgCS VSM SDK's class of that name: declare the vehicle (serial, model,
type) and its telemetry fields, register commands with their parameters and a handler each,
set telemetry and command availability; `robowire.protocols.ugcs.vsm.serve(vehicle)` runs the
VSM (a UgCS server connects to it, or with `to=` it dials the server):

```python
from robowire.protocols.ugcs.vehicle import Vehicle, failed, ok

rover = Vehicle("ROVER-1", model="My rover", type="ground")

@rover.command("arm")
def arm(params):
    return ok() if rover.value("satellite_count", 0) >= 6 else failed("no GPS fix")

rover.set(latitude=56.9496, longitude=24.1052, altitude_amsl=12.0, satellite_count=9)
```

Values are in user units (degrees for angles; the wire's radians are converted both ways),
handlers get every registered parameter by name (None when the UCS sent none) and return
`ok()`, `failed(reason)` or `progress(fraction)` (then `report` the outcome later). Handlers run
on the VSM's event loop: keep them quick. robowire's own simulated multicopters (`robowire sim
ugcs`) run on the same VSM runner (`vsm_server.VsmSim`), a `model.Fleet` in place of a `Vehicle`.

`vehicle_spec(serial)` is the `DeviceSpec` of one vehicle: device properties `vehicle_type`
(ENUM, a `Vehicle_type`), `vehicle_name`, `vehicle_serial`, `frame_type`, `port_name`; a flight
controller subsystem with `autopilot_type` (`emulator` for the simulator), the telemetry fields
of `definitions.FIELDS` and the commands of `definitions.COMMANDS` (with their parameters and
`available_in_mission`); optionally a camera (`video_stream_uri`) and a gimbal (`roll`,
`pitch`, `heading`), as the SDK's `Vehicle` class has them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from robowire.protocols.ugcs import definitions
from robowire.protocols.ugcs.codec import Value, ValueKind
from robowire.protocols.ugcs.device import CommandSpec, DeviceSpec, FieldSpec, SubsystemSpec
from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs

__all__ = [
    "CAMERA",
    "GIMBAL",
    "Handler",
    "Member",
    "Result",
    "Vehicle",
    "failed",
    "field",
    "ok",
    "param",
    "progress",
    "semantic",
    "vehicle_spec",
]

Result = definitions.Result

_KINDS: dict[str, ValueKind] = {
    "double": ValueKind.DOUBLE,
    "float": ValueKind.FLOAT,
    "int": ValueKind.INT,
    "enum": ValueKind.INT,
    "bool": ValueKind.BOOL,
    "string": ValueKind.STRING,
}


def semantic(name: str) -> int:
    """A `Field_semantic` value from its enum name ("FIELD_SEMANTIC_LATITUDE")."""
    return int(defs.Field_semantic.Value(name))


def _field(f: definitions.FieldSpec) -> FieldSpec:
    return FieldSpec(
        name=f.name,
        semantic=semantic(f.semantic),
        kind=_KINDS[f.kind],
        enumeration=dict(f.enumeration),
    )


def _parameter(p: definitions.ParamSpec) -> FieldSpec:
    return FieldSpec(
        name=p.name,
        semantic=semantic(p.semantic),
        kind=_KINDS[p.kind],
        min=p.minimum,
        max=p.maximum,
        enumeration=dict(p.enumeration),
    )


def _command(c: definitions.CommandSpec) -> CommandSpec:
    return CommandSpec(
        name=c.name,
        parameters=tuple(_parameter(p) for p in c.parameters),
        available_in_mission=c.available_in_mission,
    )


_STRING = defs.FIELD_SEMANTIC_STRING
CAMERA = SubsystemSpec(
    type=defs.SUBSYSTEM_TYPE_CAMERA,
    telemetry=(FieldSpec("video_stream_uri", _STRING),),
)
GIMBAL = SubsystemSpec(
    type=defs.SUBSYSTEM_TYPE_GIMBAL,
    telemetry=(
        FieldSpec("roll", defs.FIELD_SEMANTIC_ROLL),
        FieldSpec("pitch", defs.FIELD_SEMANTIC_PITCH),
        FieldSpec("heading", defs.FIELD_SEMANTIC_HEADING),
    ),
)


def vehicle_spec(
    serial: str,
    *,
    name: str = str(definitions.PROPERTIES.get("vehicle_name", "robowire sim")),
    fields: Sequence[definitions.FieldSpec] = definitions.FIELDS,
    commands: Sequence[definitions.CommandSpec] = definitions.COMMANDS,
    autopilot_type: str = definitions.AUTOPILOT_TYPE,
    vehicle_type: int = defs.VEHICLE_TYPE_MULTICOPTER,
    frame_type: str = str(definitions.PROPERTIES.get("frame_type", "generic_quad_x")),
    port_name: str = str(definitions.PROPERTIES.get("port_name", "sim")),
    camera: bool = True,
    gimbal: bool = True,
    properties: Mapping[str, tuple[Value, int]] | None = None,
    controller_properties: Mapping[str, tuple[Value, int]] | None = None,
) -> DeviceSpec:
    """One vehicle's registration (see the module docstring). `properties` and
    `controller_properties` (name -> (value, semantic)) add to, or replace, the device's and
    the flight controller's properties (a relay registers what the original vehicle did)."""
    controller = SubsystemSpec(
        type=defs.SUBSYSTEM_TYPE_FLIGHT_CONTROLLER,
        properties={"autopilot_type": (autopilot_type, _STRING), **(controller_properties or {})},
        telemetry=tuple(_field(f) for f in fields),
        commands=tuple(_command(c) for c in commands),
    )
    subsystems = [controller]
    if camera:
        subsystems.append(CAMERA)
    if gimbal:
        subsystems.append(GIMBAL)
    return DeviceSpec(
        type=defs.DEVICE_TYPE_VEHICLE,
        properties={
            "vehicle_type": (vehicle_type, defs.FIELD_SEMANTIC_ENUM),
            "vehicle_name": (name, _STRING),
            "vehicle_serial": (serial, _STRING),
            "frame_type": (frame_type, _STRING),
            "port_name": (port_name, _STRING),
            **(properties or {}),
        },
        subsystems=tuple(subsystems),
    )


# -- the Vehicle API --------------------------------------------------------------------------


def ok(text: str = "") -> Result:
    """The command was done (`STATUS_OK`)."""
    return Result(text=text)


def failed(reason: str) -> Result:
    """The vehicle refused or could not do the command (`STATUS_FAILED`, the reason shown in
    UgCS)."""
    return Result(code="STATUS_FAILED", text=reason)


def progress(fraction: float, text: str = "") -> Result:
    """The command is under way (`STATUS_IN_PROGRESS`, 0..1); `Vehicle.report` its outcome."""
    return Result(code="STATUS_IN_PROGRESS", text=text, progress=fraction)


def field(
    name: str, semantic: str = "NUMERIC", unit: str = "", kind: definitions.ValueKind = "float"
) -> definitions.FieldSpec:
    """A telemetry field of your own: `semantic` names a `Field_semantic` without its prefix
    (`"NUMERIC"`, `"BOOL"`, `"STRING"`, `"VOLTAGE"`, ...)."""
    return definitions.FieldSpec(
        name=name, semantic="FIELD_SEMANTIC_" + semantic, unit=unit, kind=kind
    )


def param(
    name: str,
    semantic: str = "NUMERIC",
    unit: str = "",
    kind: definitions.ValueKind = "float",
    *,
    required: bool = False,
    minimum: float | None = None,
    maximum: float | None = None,
) -> definitions.ParamSpec:
    """A command parameter of your own (see `field`)."""
    return definitions.ParamSpec(
        name=name,
        semantic="FIELD_SEMANTIC_" + semantic,
        unit=unit,
        kind=kind,
        required=required,
        minimum=minimum,
        maximum=maximum,
    )


_COMMANDS = definitions.COMMAND_BY_NAME
_KNOWN_FIELDS = {f.name: f for f in definitions.FIELDS}
_KNOWN_PARAMS = {p.name: p for c in definitions.COMMANDS for p in c.parameters}
DEFAULT_FIELDS = (
    "latitude",
    "longitude",
    "altitude_amsl",
    "altitude_raw",
    "heading",
    "ground_speed",
    "vertical_speed",
    "main_voltage",
    "satellite_count",
    "gps_fix",
    "is_armed",
    "downlink_present",
    "uplink_present",
)
"""The telemetry a `Vehicle` registers unless told otherwise (names of `definitions.FIELDS`)."""

Handler = Callable[[dict[str, Any]], Result | None]
"""A command handler: parameters by name in user units -> ok, failed or progress (None: ok)."""


def _field_of(item: str | definitions.FieldSpec) -> definitions.FieldSpec:
    if isinstance(item, definitions.FieldSpec):
        return item
    known = _KNOWN_FIELDS.get(item)
    if known is None:
        raise ValueError(f"unknown telemetry field {item!r}: declare it with field({item!r}, ...)")
    return known


def _param_of(item: str | definitions.ParamSpec) -> definitions.ParamSpec:
    if isinstance(item, definitions.ParamSpec):
        return item
    known = _KNOWN_PARAMS.get(item)
    if known is None:
        raise ValueError(f"unknown parameter {item!r}: declare it with param({item!r}, ...)")
    return known


def _user(unit: str, value: Any) -> Any:
    """A wire value in user units (radians -> degrees)."""
    if unit == "rad" and isinstance(value, float):
        return math.degrees(value)
    return value


def _wire(unit: str, value: Any) -> Any:
    if unit == "rad" and isinstance(value, int | float) and not isinstance(value, bool):
        return math.radians(value)
    return value


_FieldSpec = definitions.FieldSpec
_ParamSpec = definitions.ParamSpec
_CommandSpec = definitions.CommandSpec
_Params = definitions.Params
_MissionItem = definitions.MissionItem


class Member(Protocol):
    """What the VSM runner (`vsm_server.VsmSim`) drives: devices of one layout, one row each."""

    def specs(self) -> list[DeviceSpec]:
        """The devices' registrations, one per row."""
        ...

    def step(self, now: float) -> None:
        """Advance to monotonic `now` (a simulator flies; a real vehicle has nothing to do)."""
        ...

    def telemetry(self) -> Mapping[str, Any]:
        """Field columns by name, one value per row, wire units (NaN / None: not available)."""
        ...

    def availability(self) -> Mapping[str, Any]:
        """Whether each command is enabled now, one bool per row, by command name."""
        ...

    def handle(
        self,
        row: int,
        name: str,
        params: definitions.Params,
        items: Sequence[definitions.MissionItem],
    ) -> Result:
        """Handle command `name` for `row` (parameters in wire units)."""
        ...

    def outbox(self) -> list[tuple[int, str, Result | str]]:
        """Since the last call: (row, command, later result) for commands that answered
        `progress`, and (row, "", text) for status messages to the operator."""
        ...


class Vehicle:
    """One vehicle of yours as a UgCS VSM device (see the module docstring).

    `type` is a `Vehicle_type` without its prefix (`multicopter`, `fixed_wing`, `helicopter`,
    `vtol`, `ground`, `surface`); `telemetry` the fields it reports (names of the simulator's
    fields, or `field(...)` for your own).
    """

    def __init__(
        self,
        serial: str,
        *,
        model: str = "robowire vehicle",
        type: str = "multicopter",
        telemetry: Iterable[str | _FieldSpec] = DEFAULT_FIELDS,
        autopilot: str = "python",
        frame_type: str = "generic",
        camera: bool = False,
        gimbal: bool = False,
    ) -> None:
        self.serial = serial
        self.model = model
        try:
            self.vehicle_type = int(defs.Vehicle_type.Value("VEHICLE_TYPE_" + type.upper()))
        except ValueError:
            raise ValueError(f"unknown vehicle type {type!r}") from None
        self.fields = tuple(_field_of(f) for f in telemetry)
        self._units = {f.name: f.unit for f in self.fields}
        self.autopilot = autopilot
        self.frame_type = frame_type
        self.camera = camera
        self.gimbal = gimbal
        self._commands: dict[str, tuple[_CommandSpec, Handler]] = {}
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}  # wire units
        self._enabled: dict[str, bool] = {}
        self._outbox: list[tuple[int, str, Result | str]] = []

    # -- declaring ------------------------------------------------------------------------

    def command(
        self, name: str, *parameters: str | _ParamSpec, mission: bool = False
    ) -> Callable[[Handler], Handler]:
        """Register command `name` with `handler` (a decorator). A command the simulator
        knows (`waypoint`, `takeoff_command`, `mission_upload`, ...) gets its parameters
        unless `parameters` are given; `mission` makes it a mission item too."""
        known = _COMMANDS.get(name)
        if parameters or known is None:
            spec = _CommandSpec(
                name=name,
                parameters=tuple(_param_of(p) for p in parameters),
                available_in_mission=mission,
            )
        else:
            spec = known

        def register(handler: Handler) -> Handler:
            self._commands[name] = (spec, handler)
            self._enabled.setdefault(name, True)
            return handler

        return register

    def spec(self) -> DeviceSpec:
        """This vehicle's registration."""
        return vehicle_spec(
            self.serial,
            name=self.model,
            fields=self.fields,
            commands=[spec for spec, _ in self._commands.values()],
            autopilot_type=self.autopilot,
            vehicle_type=self.vehicle_type,
            frame_type=self.frame_type,
            port_name="python",
            camera=self.camera,
            gimbal=self.gimbal,
        )

    # -- running (any thread) -------------------------------------------------------------

    def set(self, **values: float | bool | str | None) -> None:
        """Set telemetry fields (user units: degrees, metres, m/s, V; None: not available);
        sent at the VSM's next commit."""
        wire: dict[str, Any] = {}
        for name, value in values.items():
            unit = self._units.get(name)
            if unit is None:
                raise ValueError(f"{self.serial}: no telemetry field {name!r} was declared")
            wire[name] = math.nan if value is None else _wire(unit, value)
        with self._lock:
            self._values.update(wire)

    def value(self, name: str, default: Any = None) -> Any:
        """The value last `set` for a field (user units), or `default`."""
        with self._lock:
            value = self._values.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return default
        return _user(self._units.get(name, ""), value)

    def enable(self, **commands: bool) -> None:
        """Which commands UgCS may send now (the SDK's `Set_enabled`); all are at first."""
        for name in commands:
            if name not in self._commands:
                raise ValueError(f"{self.serial}: no command {name!r} was registered")
        with self._lock:
            self._enabled.update(commands)

    def message(self, text: str) -> None:
        """A status message for the operator's log in UgCS."""
        with self._lock:
            self._outbox.append((0, "", text))

    def report(self, command: str, result: Result) -> None:
        """The next progress or the outcome of `command`, which answered `progress(...)`."""
        with self._lock:
            self._outbox.append((0, command, result))

    # -- the runner's side (Member) -------------------------------------------------------

    def specs(self) -> list[DeviceSpec]:
        return [self.spec()]

    def step(self, now: float) -> None:
        pass

    def telemetry(self) -> Mapping[str, Any]:
        with self._lock:
            return {name: [value] for name, value in self._values.items()}

    def availability(self) -> Mapping[str, Any]:
        with self._lock:
            return {name: [on] for name, on in self._enabled.items()}

    def outbox(self) -> list[tuple[int, str, Result | str]]:
        with self._lock:
            out, self._outbox = self._outbox, []
        return out

    def handle(self, row: int, name: str, params: _Params, items: Sequence[_MissionItem]) -> Result:
        """Run the handler of `name` with `params` (wire units)."""
        found = self._commands.get(name)
        if found is None:
            return Result(code="STATUS_INVALID_COMMAND", text=f"unknown command {name!r}")
        spec, handler = found
        units = {p.name: p.unit for p in spec.parameters}
        values = {key: _user(units.get(key, ""), value) for key, value in params.items()}
        for p in spec.parameters:
            values.setdefault(p.name, None)
            if p.required and values[p.name] is None:
                return Result(code="STATUS_INVALID_COMMAND", text=f"{name}: {p.name} is required")
        result = handler(values)
        return ok() if result is None else result
