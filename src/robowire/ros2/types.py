"""Every ROS 2 message type robowire reads or writes, as data, and what is derived from it.

`MESSAGES` holds each type's `.msg` fields as ROS 2 Jazzy/Kilted define them (constants and
comments left out: neither is on the wire nor in the type hash). From it:

    fields(name)        the parsed fields (`Field`)
    rihs01(name)        the type hash ROS 2 (Iron and later) advertises, `RIHS01_<sha256>`,
                        computed from the type description as REP 2011 / rosidl defines it
    definition(name)    the concatenated .msg text rosbag2 and MCAP store as a schema
    idl_class(name)     a cyclonedds `IdlStruct` with the DDS type name rmw gives it
                        (`pkg::msg::dds_::Name_`, nested types named the same way), final and
                        keyless: what a topic is created with (the bytes come from `cdr`)
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from robowire.ros2 import names

MESSAGES: dict[str, str] = {
    "builtin_interfaces/msg/Time": "int32 sec\nuint32 nanosec",
    "builtin_interfaces/msg/Duration": "int32 sec\nuint32 nanosec",
    "std_msgs/msg/Header": "builtin_interfaces/msg/Time stamp\nstring frame_id",
    "std_msgs/msg/ColorRGBA": "float32 r\nfloat32 g\nfloat32 b\nfloat32 a",
    "std_msgs/msg/String": "string data",
    "geometry_msgs/msg/Vector3": "float64 x\nfloat64 y\nfloat64 z",
    "geometry_msgs/msg/Point": "float64 x\nfloat64 y\nfloat64 z",
    "geometry_msgs/msg/Quaternion": "float64 x\nfloat64 y\nfloat64 z\nfloat64 w",
    "geometry_msgs/msg/Pose": "geometry_msgs/msg/Point position\n"
    "geometry_msgs/msg/Quaternion orientation",
    "geometry_msgs/msg/PoseStamped": "std_msgs/msg/Header header\ngeometry_msgs/msg/Pose pose",
    "geometry_msgs/msg/PoseWithCovariance": "geometry_msgs/msg/Pose pose\nfloat64[36] covariance",
    "geometry_msgs/msg/PoseWithCovarianceStamped": "std_msgs/msg/Header header\n"
    "geometry_msgs/msg/PoseWithCovariance pose",
    "geometry_msgs/msg/Transform": "geometry_msgs/msg/Vector3 translation\n"
    "geometry_msgs/msg/Quaternion rotation",
    "geometry_msgs/msg/TransformStamped": "std_msgs/msg/Header header\nstring child_frame_id\n"
    "geometry_msgs/msg/Transform transform",
    "geometry_msgs/msg/Twist": "geometry_msgs/msg/Vector3 linear\n"
    "geometry_msgs/msg/Vector3 angular",
    "geometry_msgs/msg/TwistStamped": "std_msgs/msg/Header header\ngeometry_msgs/msg/Twist twist",
    "geometry_msgs/msg/TwistWithCovariance": "geometry_msgs/msg/Twist twist\n"
    "float64[36] covariance",
    "nav_msgs/msg/Odometry": "std_msgs/msg/Header header\nstring child_frame_id\n"
    "geometry_msgs/msg/PoseWithCovariance pose\ngeometry_msgs/msg/TwistWithCovariance twist",
    "tf2_msgs/msg/TFMessage": "geometry_msgs/msg/TransformStamped[] transforms",
    "sensor_msgs/msg/NavSatStatus": "int8 status\nuint16 service",
    "sensor_msgs/msg/NavSatFix": "std_msgs/msg/Header header\nsensor_msgs/msg/NavSatStatus status\n"
    "float64 latitude\nfloat64 longitude\nfloat64 altitude\nfloat64[9] position_covariance\n"
    "uint8 position_covariance_type",
    "sensor_msgs/msg/BatteryState": "std_msgs/msg/Header header\nfloat32 voltage\n"
    "float32 temperature\nfloat32 current\nfloat32 charge\nfloat32 capacity\n"
    "float32 design_capacity\nfloat32 percentage\nuint8 power_supply_status\n"
    "uint8 power_supply_health\nuint8 power_supply_technology\nbool present\n"
    "float32[] cell_voltage\nfloat32[] cell_temperature\nstring location\nstring serial_number",
    "sensor_msgs/msg/CompressedImage": "std_msgs/msg/Header header\nstring format\nuint8[] data",
    "diagnostic_msgs/msg/KeyValue": "string key\nstring value",
    "diagnostic_msgs/msg/DiagnosticStatus": "byte level\nstring name\nstring message\n"
    "string hardware_id\ndiagnostic_msgs/msg/KeyValue[] values",
    "diagnostic_msgs/msg/DiagnosticArray": "std_msgs/msg/Header header\n"
    "diagnostic_msgs/msg/DiagnosticStatus[] status",
    "visualization_msgs/msg/UVCoordinate": "float32 u\nfloat32 v",
    "visualization_msgs/msg/MeshFile": "string filename\nuint8[] data",
    "visualization_msgs/msg/Marker": "std_msgs/msg/Header header\nstring ns\nint32 id\n"
    "int32 type\nint32 action\ngeometry_msgs/msg/Pose pose\ngeometry_msgs/msg/Vector3 scale\n"
    "std_msgs/msg/ColorRGBA color\nbuiltin_interfaces/msg/Duration lifetime\nbool frame_locked\n"
    "geometry_msgs/msg/Point[] points\nstd_msgs/msg/ColorRGBA[] colors\n"
    "string texture_resource\nsensor_msgs/msg/CompressedImage texture\n"
    "visualization_msgs/msg/UVCoordinate[] uv_coordinates\nstring text\nstring mesh_resource\n"
    "visualization_msgs/msg/MeshFile mesh_file\nbool mesh_use_embedded_materials",
    "visualization_msgs/msg/MarkerArray": "visualization_msgs/msg/Marker[] markers",
    "rcl_interfaces/msg/Log": "builtin_interfaces/msg/Time stamp\nuint8 level\nstring name\n"
    "string msg\nstring file\nstring function\nuint32 line",
    "rmw_dds_common/msg/Gid": "char[16] data",
    "rmw_dds_common/msg/NodeEntitiesInfo": "string<=256 node_namespace\nstring<=256 node_name\n"
    "rmw_dds_common/msg/Gid[] reader_gid_seq\nrmw_dds_common/msg/Gid[] writer_gid_seq",
    "rmw_dds_common/msg/ParticipantEntitiesInfo": "rmw_dds_common/msg/Gid gid\n"
    "rmw_dds_common/msg/NodeEntitiesInfo[] node_entities_info_seq",
}

# the field type ids of type_description_interfaces/msg/FieldType (REP 2011)
FIELD_TYPE_IDS = {
    "nested": 1,
    "int8": 2,
    "uint8": 3,
    "int16": 4,
    "uint16": 5,
    "int32": 6,
    "uint32": 7,
    "int64": 8,
    "uint64": 9,
    "float32": 10,
    "float64": 11,
    "float128": 12,
    "char": 13,
    "wchar": 14,
    "bool": 15,
    "byte": 16,
    "string": 17,
    "wstring": 18,
    "bounded_string": 21,
}
ARRAY_ID, BOUNDED_SEQUENCE_ID, SEQUENCE_ID = 48, 96, 144  # added to the element's id
PRIMITIVES = frozenset(FIELD_TYPE_IDS) - {"nested", "bounded_string"}
_FIELD = re.compile(
    r"(?P<type>[A-Za-z0-9_/]+?)(?:<=(?P<string_bound>\d+))?"
    r"(?:\[(?P<bounded><=)?(?P<count>\d*)\])?\s+(?P<name>[a-z][a-z0-9_]*)"
)


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message: `type` is a primitive's name or a nested type's full name."""

    name: str
    type: str
    string_bound: int = 0  # string<=N
    array: int = 0  # T[N]: a fixed-size array of N
    sequence: bool = False  # T[] or T[<=N]
    bound: int = 0  # T[<=N]

    @property
    def nested(self) -> bool:
        return self.type not in PRIMITIVES


@cache
def fields(name: str) -> tuple[Field, ...]:
    """The fields of the message type `name` (`pkg/msg/Name`), parsed from `MESSAGES`."""
    text = MESSAGES.get(name)
    if text is None:
        raise KeyError(f"robowire has no definition of the ROS 2 type {name!r}")
    out = []
    for line in text.splitlines():
        found = _FIELD.fullmatch(line.strip())
        if found is None:
            raise ValueError(f"{name}: cannot read the field {line!r}")
        count = found["count"]
        sequence = found["count"] is not None and (not count or bool(found["bounded"]))
        out.append(
            Field(
                name=found["name"],
                type=found["type"],
                string_bound=int(found["string_bound"] or 0),
                array=int(count) if count and not found["bounded"] else 0,
                sequence=sequence,
                bound=int(count) if found["bounded"] else 0,
            )
        )
    return tuple(out)


def nested_types(name: str) -> list[str]:
    """Every type `name` refers to, directly or not, each once, sorted by name."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        for field in fields(todo.pop()):
            if field.nested and field.type not in seen:
                seen.add(field.type)
                todo.append(field.type)
    return sorted(seen - {name})


def _field_description(field: Field) -> dict[str, Any]:
    if field.nested:
        element = FIELD_TYPE_IDS["nested"]
    elif field.type == "string" and field.string_bound:
        element = FIELD_TYPE_IDS["bounded_string"]
    else:
        element = FIELD_TYPE_IDS[field.type]
    if field.array:
        type_id, capacity = element + ARRAY_ID, field.array
    elif field.sequence and field.bound:
        type_id, capacity = element + BOUNDED_SEQUENCE_ID, field.bound
    elif field.sequence:
        type_id, capacity = element + SEQUENCE_ID, 0
    else:
        type_id, capacity = element, 0
    return {
        "name": field.name,
        "type": {
            "type_id": type_id,
            "capacity": capacity,
            "string_capacity": field.string_bound,
            "nested_type_name": field.type if field.nested else "",
        },
    }


def _type_description(name: str) -> dict[str, Any]:
    return {"type_name": name, "fields": [_field_description(f) for f in fields(name)]}


@cache
def rihs01(name: str) -> str:
    """The RIHS01 hash of `name`: sha256 of the JSON of its type description and those of
    every type it refers to (sorted by name), in the field order and form rosidl hashes
    (`rosidl_generator_type_description`); default values and constants are not in it."""
    description = {
        "type_description": _type_description(name),
        "referenced_type_descriptions": [_type_description(n) for n in nested_types(name)],
    }
    text = json.dumps(description, separators=(", ", ": "))
    return "RIHS01_" + hashlib.sha256(text.encode()).hexdigest()


def _msg_line(field: Field) -> str:
    base = field.type.replace("/msg/", "/")  # a field's type as a .msg file names it: pkg/Name
    if field.string_bound:
        base += f"<={field.string_bound}"
    if field.array:
        base += f"[{field.array}]"
    elif field.sequence:
        base += f"[<={field.bound}]" if field.bound else "[]"
    return f"{base} {field.name}"


def definition(name: str) -> str:
    """The .msg text of `name` followed by each type it refers to, as rosbag2 stores a schema
    (`ros2msg`, rosbag2's docs/message_definition_encoding.md: fields typed `pkg/Name` as in a
    .msg file; blocks separated by a line of 80 `=` and `MSG: pkg/msg/Name`)."""
    blocks = ["\n".join(_msg_line(f) for f in fields(name))]
    for nested in nested_types(name):
        body = "\n".join(_msg_line(f) for f in fields(nested))
        blocks.append(f"MSG: {nested}\n{body}")
    return ("\n" + "=" * 80 + "\n").join(blocks) + "\n"


@cache
def idl_class(name: str) -> Any:
    """The cyclonedds `IdlStruct` of `name` (DDS type `pkg::msg::dds_::Name_`, final)."""
    from cyclonedds.idl import make_idl_struct
    from cyclonedds.idl import types as idl_types
    from cyclonedds.idl.annotations import final

    types: Any = idl_types  # (its generic aliases are subscripted at run time)

    primitive: dict[str, Any] = {
        "int8": types.int8,
        "uint8": types.uint8,
        "char": types.uint8,  # a ROS `char` is an IDL uint8
        "byte": types.byte,
        "int16": types.int16,
        "uint16": types.uint16,
        "int32": types.int32,
        "uint32": types.uint32,
        "int64": types.int64,
        "uint64": types.uint64,
        "float32": types.float32,
        "float64": types.float64,
        "bool": bool,
        "string": str,
    }

    def annotation(field: Field) -> Any:
        if field.nested:
            element = idl_class(field.type)
        elif field.string_bound:
            element = types.bounded_str[field.string_bound]
        else:
            element = primitive[field.type]
        if field.array:
            return types.array[element, field.array]
        if field.sequence:
            return types.sequence[element, field.bound] if field.bound else types.sequence[element]
        return element

    members = {f.name: annotation(f) for f in fields(name)}
    class_name = name.replace("/", "_")
    return final(make_idl_struct(class_name, names.dds_type(name), members))
