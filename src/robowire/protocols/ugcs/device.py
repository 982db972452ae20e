"""A UgCS device's registration, both ways: what a VSM declares and what a UCS learns.

A VSM describes a device with specs (`DeviceSpec` of `SubsystemSpec`s of `FieldSpec`s and
`CommandSpec`s, no ids) and registers it with `register(spec, ids, begin_of_epoch)`, which gives
every telemetry field, command and command parameter an id from one counter (as the SDK does:
fields, then commands with their parameters, then the device id last) and returns a
`DeviceInfo`. `DeviceInfo.to_message()` is the `Register_device` payload; `DeviceInfo.from_message`
reads one back (the UCS side). Ids are per session: a UCS maps by name, never by number.

A field is named within its subsystem (`heading` is both the flight controller's and the
gimbal's); `FieldInfo.key` is unique within a device: the bare name on the flight controller,
`gimbal.heading` on others, `gimbal[1].heading` on a second one of a kind.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

from robowire.protocols.ugcs.codec import (
    Value,
    ValueKind,
    kind_of_semantic,
    read_value,
    write_value,
)
from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs
from robowire.protocols.ugcs.proto import ucs_vsm_pb2 as pb

__all__ = [
    "CommandInfo",
    "CommandSpec",
    "DeviceInfo",
    "DeviceSpec",
    "FieldInfo",
    "FieldSpec",
    "IdCounter",
    "SubsystemSpec",
    "register",
    "subsystem_name",
]


def subsystem_name(subsystem_type: int) -> str:
    """`flight_controller`, `camera`, `gimbal`, ... (the enum name, lower case, no prefix)."""
    try:
        name = defs.Subsystem_type.Name(defs.Subsystem_type.ValueType(subsystem_type))
    except ValueError:
        return f"subsystem_{subsystem_type}"
    return name.removeprefix("SUBSYSTEM_TYPE_").lower()


class IdCounter:
    """The one process-wide id counter of a VSM (fields, commands, parameters, devices)."""

    def __init__(self, start: int = 1) -> None:
        self._next = itertools.count(start)

    def __call__(self) -> int:
        return next(self._next)


# ---------------------------------------------------------------------------------------------
# specs (no ids)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """A telemetry field or a command parameter: name, semantic (a `Field_semantic`), the value
    member it travels in (from the semantic unless given), optional default/min/max and the
    enumeration (id -> description) of an ENUM field."""

    name: str
    semantic: int
    kind: ValueKind | None = None
    default: Value = None
    min: Value = None
    max: Value = None
    enumeration: Mapping[int, str] = field(default_factory=dict)

    @property
    def value_kind(self) -> ValueKind:
        return self.kind if self.kind is not None else kind_of_semantic(self.semantic)


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str
    parameters: tuple[FieldSpec, ...] = ()
    available_in_mission: bool = False


@dataclass(frozen=True, slots=True)
class SubsystemSpec:
    type: int
    properties: Mapping[str, tuple[Value, int]] = field(default_factory=dict)
    """name -> (value, Field_semantic)"""
    telemetry: tuple[FieldSpec, ...] = ()
    commands: tuple[CommandSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    type: int = defs.DEVICE_TYPE_VEHICLE
    properties: Mapping[str, tuple[Value, int]] = field(default_factory=dict)
    subsystems: tuple[SubsystemSpec, ...] = ()


# ---------------------------------------------------------------------------------------------
# registered (with ids)


@dataclass(frozen=True, slots=True)
class FieldInfo:
    """A registered field: its session id, name, semantic, value member, and where it is."""

    field_id: int
    name: str
    semantic: int
    kind: ValueKind
    subsystem: int = defs.SUBSYSTEM_TYPE_FLIGHT_CONTROLLER
    subsystem_index: int = 0
    """Which subsystem of this type (0 for the first)."""
    default: Value = None
    min: Value = None
    max: Value = None
    enumeration: Mapping[int, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """A name unique within the device: the name itself on the flight controller,
        `<subsystem>.<name>` on others (`gimbal.heading`), `<subsystem>[<n>].<name>` on a
        second one of a kind."""
        if self.subsystem == defs.SUBSYSTEM_TYPE_FLIGHT_CONTROLLER and self.subsystem_index == 0:
            return self.name
        where = subsystem_name(self.subsystem)
        if self.subsystem_index:
            where += f"[{self.subsystem_index}]"
        return f"{where}.{self.name}"


@dataclass(frozen=True, slots=True)
class CommandInfo:
    command_id: int
    name: str
    parameters: tuple[FieldInfo, ...] = ()
    available_in_mission: bool = False
    subsystem: int = defs.SUBSYSTEM_TYPE_FLIGHT_CONTROLLER
    subsystem_index: int = 0

    def parameter(self, name: str) -> FieldInfo | None:
        return next((p for p in self.parameters if p.name == name), None)


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """A registered device: what a Register_device says, indexed both ways."""

    device_id: int
    begin_of_epoch: int
    """ms since the Unix epoch; telemetry time = begin_of_epoch + ms_since_epoch"""
    type: int
    properties: Mapping[str, Value]
    subsystem_properties: tuple[tuple[int, Mapping[str, Value]], ...]
    """(subsystem type, its properties) per subsystem, in order"""
    fields: tuple[FieldInfo, ...]
    commands: tuple[CommandInfo, ...]
    property_semantics: Mapping[str, int] = field(default_factory=dict)
    fields_by_id: Mapping[int, FieldInfo] = field(init=False, repr=False, compare=False)
    fields_by_key: Mapping[str, FieldInfo] = field(init=False, repr=False, compare=False)
    commands_by_id: Mapping[int, CommandInfo] = field(init=False, repr=False, compare=False)
    commands_by_name: Mapping[str, CommandInfo] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields_by_id", {f.field_id: f for f in self.fields})
        object.__setattr__(self, "fields_by_key", {f.key: f for f in self.fields})
        object.__setattr__(self, "commands_by_id", {c.command_id: c for c in self.commands})
        # the first command of a name wins (a name is per subsystem in principle)
        by_name: dict[str, CommandInfo] = {}
        for c in self.commands:
            by_name.setdefault(c.name, c)
        object.__setattr__(self, "commands_by_name", by_name)

    def autopilot_type(self) -> str | None:
        for kind, props in self.subsystem_properties:
            if kind == defs.SUBSYSTEM_TYPE_FLIGHT_CONTROLLER:
                value = props.get("autopilot_type")
                return value if isinstance(value, str) else None
        return None

    def to_message(self) -> pb.Vsm_message:
        """The Vsm_message registering this device (the session sets message_id and
        response_required)."""
        msg = pb.Vsm_message(device_id=self.device_id)
        reg = msg.register_device
        reg.begin_of_epoch = self.begin_of_epoch
        reg.type = defs.Device_type.ValueType(self.type)
        _properties(reg.properties, self.properties, self.property_semantics)
        seen: dict[int, int] = {}
        for kind, props in self.subsystem_properties:
            index = seen.get(kind, 0)
            seen[kind] = index + 1
            sub = reg.subsystems.add(type=defs.Subsystem_type.ValueType(kind))
            _properties(sub.properties, props, {})
            for f in self.fields:
                if (f.subsystem, f.subsystem_index) == (kind, index):
                    _register_field(sub.telemetry_fields.add(), f)
            for c in self.commands:
                if (c.subsystem, c.subsystem_index) == (kind, index):
                    rc = sub.commands.add(name=c.name, id=c.command_id)
                    if c.available_in_mission:
                        rc.available_in_mission = True
                    for p in c.parameters:
                        _register_field(rc.parameters.add(), p)
        return msg

    @classmethod
    def from_message(cls, msg: pb.Vsm_message) -> DeviceInfo:
        """Read a Register_device (the UCS side)."""
        reg = msg.register_device
        fields: list[FieldInfo] = []
        commands: list[CommandInfo] = []
        subs: list[tuple[int, Mapping[str, Value]]] = []
        seen: dict[int, int] = {}
        for sub in reg.subsystems:
            kind = int(sub.type)
            index = seen.get(kind, 0)
            seen[kind] = index + 1
            subs.append((kind, {p.name: read_value(p.value) for p in sub.properties}))
            fields.extend(_field_info(f, kind, index) for f in sub.telemetry_fields)
            for c in sub.commands:
                params = tuple(_field_info(p, kind, index) for p in c.parameters)
                commands.append(
                    CommandInfo(c.id, c.name, params, c.available_in_mission, kind, index)
                )
        return cls(
            device_id=msg.device_id,
            begin_of_epoch=reg.begin_of_epoch,
            type=int(reg.type),
            properties={p.name: read_value(p.value) for p in reg.properties},
            subsystem_properties=tuple(subs),
            fields=tuple(fields),
            commands=tuple(commands),
            property_semantics={p.name: int(p.semantic) for p in reg.properties},
        )


def _semantic(semantic: int) -> defs.Field_semantic.ValueType:
    return defs.Field_semantic.ValueType(semantic)


def _properties(
    out: RepeatedCompositeFieldContainer[pb.Property_field],
    props: Mapping[str, Value],
    semantics: Mapping[str, int],
) -> None:
    for name, value in props.items():
        semantic = semantics.get(name, _guess_semantic(value))
        p = out.add(name=name, semantic=_semantic(semantic))
        write_value(p.value, value, kind_of_semantic(semantic))


def _guess_semantic(value: Value) -> int:
    if isinstance(value, bool):
        return defs.FIELD_SEMANTIC_BOOL
    if isinstance(value, int):
        return defs.FIELD_SEMANTIC_NUMERIC
    if isinstance(value, float):
        return defs.FIELD_SEMANTIC_NUMERIC
    return defs.FIELD_SEMANTIC_STRING


def _register_field(out: pb.Register_field, f: FieldInfo) -> None:
    out.name = f.name
    out.field_id = f.field_id
    out.semantic = _semantic(f.semantic)
    if f.default is not None:
        write_value(out.default_value, f.default, f.kind)
    if f.min is not None:
        write_value(out.min_value, f.min, f.kind)
    if f.max is not None:
        write_value(out.max_value, f.max, f.kind)
    for ident, description in f.enumeration.items():
        out.enumeration.add(id=ident, description=description)


def _field_info(f: pb.Register_field, subsystem: int, index: int) -> FieldInfo:
    semantic = int(f.semantic)
    return FieldInfo(
        field_id=f.field_id,
        name=f.name,
        semantic=semantic,
        kind=kind_of_semantic(semantic),
        subsystem=subsystem,
        subsystem_index=index,
        default=read_value(f.default_value) if f.HasField("default_value") else None,
        min=read_value(f.min_value) if f.HasField("min_value") else None,
        max=read_value(f.max_value) if f.HasField("max_value") else None,
        enumeration={e.id: e.description for e in f.enumeration},
    )


def register(spec: DeviceSpec, ids: IdCounter, begin_of_epoch: int) -> DeviceInfo:
    """Give `spec` ids from `ids` in the order seen from the SDK (hello world: fields 1-7,
    commands 8-11, parameters 12-19, device 20): per subsystem its telemetry fields, its
    commands, then their parameters; the device id last."""
    fields: list[FieldInfo] = []
    commands: list[CommandInfo] = []
    seen: dict[int, int] = {}
    subs: list[tuple[int, Mapping[str, Value]]] = []
    for sub in spec.subsystems:
        index = seen.get(sub.type, 0)
        seen[sub.type] = index + 1
        subs.append((sub.type, {name: value for name, (value, _) in sub.properties.items()}))
        for f in sub.telemetry:
            fields.append(_info(f, ids(), sub.type, index))
        command_ids = [ids() for _ in sub.commands]
        for command_id, c in zip(command_ids, sub.commands, strict=True):
            params = tuple(_info(p, ids(), sub.type, index) for p in c.parameters)
            commands.append(
                CommandInfo(command_id, c.name, params, c.available_in_mission, sub.type, index)
            )
    return DeviceInfo(
        device_id=ids(),
        begin_of_epoch=begin_of_epoch,
        type=spec.type,
        properties={name: value for name, (value, _) in spec.properties.items()},
        subsystem_properties=tuple(subs),
        fields=tuple(fields),
        commands=tuple(commands),
        property_semantics={name: semantic for name, (_, semantic) in spec.properties.items()},
    )


def _info(f: FieldSpec, field_id: int, subsystem: int, index: int) -> FieldInfo:
    return FieldInfo(
        field_id=field_id,
        name=f.name,
        semantic=f.semantic,
        kind=f.value_kind,
        subsystem=subsystem,
        subsystem_index=index,
        default=f.default,
        min=f.min,
        max=f.max,
        enumeration=dict(f.enumeration),
    )


def iter_parameters(info: DeviceInfo) -> Iterator[FieldInfo]:
    for c in info.commands:
        yield from c.parameters
