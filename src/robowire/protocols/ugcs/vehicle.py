"""UgCS vehicles as the SDK's `Vehicle` registers them, from the simulator's vocabulary.

`vehicle_spec(serial)` is the `DeviceSpec` of one vehicle: device properties `vehicle_type`
(ENUM, a `Vehicle_type`), `vehicle_name`, `vehicle_serial`, `frame_type`, `port_name`; a flight
controller subsystem with `autopilot_type` (`emulator` for the simulator), the telemetry fields
of `model.FIELDS` and the commands of `model.COMMANDS` (with their parameters and
`available_in_mission`); optionally a camera (`video_stream_uri`) and a gimbal (`roll`,
`pitch`, `heading`), as the SDK's `Vehicle` class has them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from robowire.protocols.ugcs import model
from robowire.protocols.ugcs.codec import Value, ValueKind
from robowire.protocols.ugcs.device import CommandSpec, DeviceSpec, FieldSpec, SubsystemSpec
from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs

__all__ = ["CAMERA", "GIMBAL", "semantic", "vehicle_spec"]

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


def _field(f: model.FieldSpec) -> FieldSpec:
    return FieldSpec(
        name=f.name,
        semantic=semantic(f.semantic),
        kind=_KINDS[f.kind],
        enumeration=dict(f.enumeration),
    )


def _parameter(p: model.ParamSpec) -> FieldSpec:
    return FieldSpec(
        name=p.name,
        semantic=semantic(p.semantic),
        kind=_KINDS[p.kind],
        min=p.minimum,
        max=p.maximum,
        enumeration=dict(p.enumeration),
    )


def _command(c: model.CommandSpec) -> CommandSpec:
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
    name: str = str(model.PROPERTIES.get("vehicle_name", "robowire sim")),
    fields: Sequence[model.FieldSpec] = model.FIELDS,
    commands: Sequence[model.CommandSpec] = model.COMMANDS,
    autopilot_type: str = model.AUTOPILOT_TYPE,
    vehicle_type: int = defs.VEHICLE_TYPE_MULTICOPTER,
    frame_type: str = str(model.PROPERTIES.get("frame_type", "generic_quad_x")),
    port_name: str = str(model.PROPERTIES.get("port_name", "sim")),
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
