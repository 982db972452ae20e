"""VRSP bytes <-> typed packets, following the project's VRSP profile (docs/vrsp-profile.md).

Every number is little-endian. A packet is one UDP datagram:

    identifier   .NET length-prefixed string (0x08 "VRSP_DEF", 0x09 "VRSP_DATA"); decoders
                 also take it NUL-terminated or bare
    version      u8, 1
    instance     u32, one swarm configuration

VRSP_DEF: device count u32, root latitude/longitude/altitude f64, then definition blocks to the
end of the datagram: device count u32, JSON length u32, JSON (UTF-8), device ids u16[count].
A definition too large for one datagram is sent as several DEFs of the same instance whose
blocks together hold every device (`encode_def` splits, `DefinitionTable.add` merges).

VRSP_DATA (profile framing): frame u32, part u16, parts u16, records u16, then the records;
each record: device id u16, x y z f32, flags u8, [colour R G B u8 (0x1)], [heading f16 (0x2)],
[orientation w x y z f16 (0x4)], then each payload of the device's definition in order: Light
/ Laser R G B u8 (or one intensity u8 with a fixed `Color`), Pyro cue u8 + ms since trigger u16,
and after a gimballed payload's data its w x y z f16. The sheet's "implicit" DATA (no framing,
no ids, every device in DEF order) decodes too (`DefinitionTable.decode_implicit`).

DATA records are decoded in runs of the same layout (definition x flags): one numpy structured
dtype per layout and one `frombuffer` per run, never a Python step per record.

Size: one module over 600 lines because it is one thing, the codec: every message and the
definition JSON share the framing, the layouts and the limits (the typed definitions are
`definitions.py`).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from robowire.errors import DecodeError
from robowire.protocols.vrsp.definitions import (
    Cue,
    DefType,
    DeviceDefinition,
    MountType,
    Payload,
    Quaternion,
    Swarm,
)

PROTOCOL = "vrsp"
DEFAULT_PORT = 9742  # the project's choice (Verge documents no transport): see the profile
VERSION = 1
DEF_NAME = "VRSP_DEF"
DATA_NAME = "VRSP_DATA"
NAMES = (DEF_NAME, DATA_NAME)
MAX_DATAGRAM = 65_507  # the most a UDP/IPv4 datagram carries
DEFAULT_DATAGRAM = 1_472  # Ethernet MTU 1500 - IPv4 20 - UDP 8: no IP fragmentation
MAX_DEVICES = 65_536  # device ids are u16
MAX_PAYLOADS = 32  # payloads per definition (a drone carries a handful)
MAX_CUES = 255  # cue ids are u8
MAX_JSON = 60_000  # bytes of one definition's JSON

FLAG_COLOR = 0x1
FLAG_HEADING = 0x2
FLAG_ORIENTATION = 0x4
KNOWN_FLAGS = FLAG_COLOR | FLAG_HEADING | FLAG_ORIENTATION

IdentifierForm = Literal["prefixed", "nul", "bare"]

_HEADER_AFTER_NAME = struct.Struct("<BI")  # version, instance
_DEF_BODY = struct.Struct("<Iddd")  # device count, root lat, lon, alt
_BLOCK_HEAD = struct.Struct("<II")  # definition device count, JSON length
_FRAME = struct.Struct("<IHHH")  # frame, part, parts, records
_PREFIXED = {name: bytes([len(name)]) + name.encode() for name in NAMES}


# -- packets -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DefBlock:
    """One definition and the devices that use it."""

    definition: DeviceDefinition
    ids: NDArray[np.uint16]
    text: str = ""  # the JSON as received ("" when built here)


@dataclass(frozen=True, slots=True, kw_only=True)
class VrspDef:
    """VRSP_DEF: the swarm's static description (or one part of it, see the module doc)."""

    WIRE_NAME: ClassVar[str] = DEF_NAME
    instance: int
    device_count: int
    root: tuple[float, float, float]  # latitude deg, longitude deg, altitude m
    blocks: tuple[DefBlock, ...] = ()
    version: int = VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class VrspData:
    """VRSP_DATA: one datagram of a frame; its records stay bytes until a `DefinitionTable`
    (which knows each record's layout) decodes them. `frame` is None for implicit DATA."""

    WIRE_NAME: ClassVar[str] = DATA_NAME
    instance: int
    frame: int | None
    part: int = 0
    parts: int = 1
    count: int = 0  # records in this part
    body: bytes = b""
    body_offset: int = 0  # where `body` starts in the datagram (for error offsets)
    version: int = VERSION


Packet = VrspDef | VrspData


# -- header ------------------------------------------------------------------------------------


def _identifier(data: bytes) -> tuple[str, int]:
    """(name, bytes used) of the identifier in any of the three forms."""
    if not data:
        raise DecodeError(PROTOCOL, 0, "empty datagram")
    first = data[0]
    if 0 < first < 0x80 and data[1:6] == b"VRSP_":  # .NET 7-bit length prefix (one byte < 128)
        end = 1 + first
        if end > len(data):
            raise DecodeError(PROTOCOL, 0, f"identifier of {first} bytes past the end")
        name = data[1:end].decode("ascii", "replace")
        if name not in NAMES:
            raise DecodeError(PROTOCOL, 1, f"unknown packet identifier {name!r}")
        return name, end
    if data.startswith(b"VRSP_"):
        for name in NAMES:
            if data.startswith(name.encode()):
                used = len(name)
                if data[used : used + 1] == b"\x00":  # NUL-terminated (a version is never 0)
                    used += 1
                return name, used
        end = data.find(b"\x00", 0, 64)
        shown = data[: end if end > 0 else 24].decode("ascii", "replace")
        raise DecodeError(PROTOCOL, 0, f"unknown packet identifier {shown!r}")
    raise DecodeError(PROTOCOL, 0, "not a VRSP packet (no VRSP_ identifier)")


def encode_identifier(name: str, form: IdentifierForm = "prefixed") -> bytes:
    if form == "prefixed":
        return _PREFIXED[name]
    return name.encode() + (b"\x00" if form == "nul" else b"")


def decode_header(data: bytes) -> tuple[str, int, int, int]:
    """(identifier, version, instance, header length); DecodeError for anything else."""
    name, at = _identifier(data)
    if len(data) < at + _HEADER_AFTER_NAME.size:
        raise DecodeError(PROTOCOL, at, f"{name} header cut short ({len(data)} bytes)")
    version, instance = _HEADER_AFTER_NAME.unpack_from(data, at)
    if version != VERSION:
        raise DecodeError(PROTOCOL, at, f"{name} version {version}, only version 1 is known")
    return name, version, instance, at + _HEADER_AFTER_NAME.size


def decode_packet(data: bytes) -> Packet:
    """One datagram -> `VrspDef` or `VrspData` (records undecoded); DecodeError otherwise."""
    name, _, instance, at = decode_header(data)
    if name == DEF_NAME:
        return _decode_def(data, instance, at)
    if len(data) < at + _FRAME.size:
        raise DecodeError(PROTOCOL, at, f"VRSP_DATA frame header cut short ({len(data)} bytes)")
    frame, part, parts, count = _FRAME.unpack_from(data, at)
    return VrspData(
        instance=instance,
        frame=frame,
        part=part,
        parts=parts,
        count=count,
        body=data[at + _FRAME.size :],
        body_offset=at + _FRAME.size,
    )


def decode_implicit(data: bytes) -> VrspData:
    """A DATA datagram read as the sheet's implicit form (records right after the header)."""
    name, _, instance, at = decode_header(data)
    if name != DATA_NAME:
        raise DecodeError(PROTOCOL, 0, f"{name} is not a VRSP_DATA packet")
    return VrspData(instance=instance, frame=None, body=data[at:], body_offset=at)


# -- definitions (JSON) ------------------------------------------------------------------------


def _number(value: object, key: str, at: int) -> float:
    """A JSON number, or a string holding one (`"LightLumens": "900"`)."""
    if isinstance(value, bool):
        raise DecodeError(PROTOCOL, at, f"{key} must be a number, not {value!r}")
    if isinstance(value, int | float):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value.strip())
        except ValueError:
            raise DecodeError(PROTOCOL, at, f"{key} must be a number, not {value!r}") from None
    else:
        raise DecodeError(PROTOCOL, at, f"{key} must be a number, not {value!r}")
    if not math.isfinite(result):
        raise DecodeError(PROTOCOL, at, f"{key} must be finite, not {value!r}")
    return result


def _integer(value: object, key: str, at: int, low: int, high: int) -> int:
    number = _number(value, key, at)
    if number != int(number) or not low <= number <= high:
        raise DecodeError(PROTOCOL, at, f"{key} must be an integer {low}..{high}, not {value!r}")
    return int(number)


def _get(obj: Mapping[str, Any], *keys: str) -> tuple[str, Any] | None:
    """The first of `keys` present (case-insensitively)."""
    lowered = {k.lower(): k for k in obj}
    for key in keys:
        found = lowered.get(key.lower())
        if found is not None:
            return found, obj[found]
    return None


def _mapping(value: object, key: str, at: int) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise DecodeError(PROTOCOL, at, f"{key} must be a JSON object")
    return value


def _quaternion(value: object, key: str, at: int) -> Quaternion:
    obj = _mapping(value, key, at)
    parts = []
    for axis in "wxyz":
        found = _get(obj, axis)
        parts.append(0.0 if found is None else _number(found[1], f"{key}.{axis}", at))
    return Quaternion(*parts)


def _color(value: object, at: int) -> tuple[int, int, int]:
    obj = _mapping(value, "Color", at)
    out = []
    for channel in "rgb":
        found = _get(obj, channel)
        out.append(0 if found is None else _integer(found[1], f"Color.{channel}", at, 0, 255))
    return out[0], out[1], out[2]


PAYLOAD_KEYS = {"deftype", "mounttype", "mountdef", "lightlumens", "color", "lighttype"}
PAYLOAD_KEYS |= {"spotangle", "cues"}
DEVICE_KEYS = {"definitionid", "devicemodel", "modelname", "lightlumens", "payloaddefinitions"}


def _payload(obj: Mapping[str, Any], at: int) -> Payload:
    found = _get(obj, "DefType")
    if found is None:
        raise DecodeError(PROTOCOL, at, "payload definition without DefType")
    try:
        def_type = DefType(str(found[1]))
    except ValueError:
        raise DecodeError(PROTOCOL, at, f"unknown DefType {found[1]!r}") from None
    mount = MountType.STATIC
    found = _get(obj, "MountType", "MountDef")
    if found is not None:
        try:
            mount = MountType(str(found[1]))
        except ValueError:
            raise DecodeError(PROTOCOL, at, f"unknown {found[0]} {found[1]!r}") from None
    lumens = _get(obj, "LightLumens")
    color = _get(obj, "Color")
    light_type = _get(obj, "LightType")
    spot = _get(obj, "SpotAngle")
    cues: list[Cue] = []
    found = _get(obj, "Cues")
    if found is not None:
        if not isinstance(found[1], list) or len(found[1]) > MAX_CUES:
            raise DecodeError(PROTOCOL, at, f"Cues must be a list of at most {MAX_CUES}")
        for cue in found[1]:
            cue_obj = _mapping(cue, "a cue", at)
            cue_id = _get(cue_obj, "ID")
            if cue_id is None:
                raise DecodeError(PROTOCOL, at, "a cue without ID")
            vdl = _get(cue_obj, "VDL")
            direction = _get(cue_obj, "MountDirection")
            cues.append(
                Cue(
                    id=_integer(cue_id[1], "cue ID", at, 1, MAX_CUES),
                    vdl="" if vdl is None else str(vdl[1]),
                    mount_direction=Quaternion()
                    if direction is None
                    else _quaternion(direction[1], "MountDirection", at),
                )
            )
    return Payload(
        def_type=def_type,
        mount=mount,
        lumens=None if lumens is None else _number(lumens[1], "LightLumens", at),
        color=None if color is None else _color(color[1], at),
        light_type=None if light_type is None else str(light_type[1]),
        spot_angle=None if spot is None else _number(spot[1], "SpotAngle", at),
        cues=tuple(cues),
        extra={k: v for k, v in obj.items() if k.lower() not in PAYLOAD_KEYS},
    )


def definition_from_json(obj: object, at: int = 0) -> DeviceDefinition:
    """A definition JSON object (either key spelling, numbers as strings) -> typed."""
    device = _mapping(obj, "a definition", at)
    found = _get(device, "DefinitionID")
    if found is None:
        raise DecodeError(PROTOCOL, at, "definition without DefinitionID")
    definition_id = _integer(found[1], "DefinitionID", at, 0, 2**31 - 1)
    model = _get(device, "DeviceModel", "ModelName")
    lumens = _get(device, "LightLumens")
    payloads: list[Payload] = []
    found = _get(device, "PayloadDefinitions")
    if found is not None and found[1] is not None:
        if not isinstance(found[1], list) or len(found[1]) > MAX_PAYLOADS:
            raise DecodeError(
                PROTOCOL, at, f"PayloadDefinitions must be a list of at most {MAX_PAYLOADS}"
            )
        payloads = [_payload(_mapping(p, "a payload definition", at), at) for p in found[1]]
    return DeviceDefinition(
        definition_id=definition_id,
        model="" if model is None else str(model[1]),
        lumens=None if lumens is None else _number(lumens[1], "LightLumens", at),
        payloads=tuple(payloads),
        extra={k: v for k, v in device.items() if k.lower() not in DEVICE_KEYS},
    )


def _json_number(value: float) -> float | int:
    """Whole numbers as JSON integers (`900`, as the example writes them), others as floats."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


def _quaternion_json(q: Quaternion) -> dict[str, float | int]:
    return {axis: _json_number(getattr(q, axis)) for axis in "wxyz"}


def payload_to_json(payload: Payload) -> dict[str, Any]:
    out: dict[str, Any] = {"DefType": payload.def_type.value, "MountType": payload.mount.value}
    if payload.lumens is not None:
        out["LightLumens"] = _json_number(payload.lumens)
    if payload.color is not None:
        out["Color"] = dict(zip("rgb", payload.color, strict=True))
    if payload.light_type is not None:
        out["LightType"] = payload.light_type
    if payload.spot_angle is not None:
        out["SpotAngle"] = _json_number(payload.spot_angle)
    if payload.cues:
        out["Cues"] = [
            {"ID": c.id, "VDL": c.vdl, "MountDirection": _quaternion_json(c.mount_direction)}
            for c in payload.cues
        ]
    return {**payload.extra, **out}


def definition_to_json(definition: DeviceDefinition) -> dict[str, Any]:
    """The profile's spelling: the example's keys (`DeviceModel`), `MountType`, numbers."""
    out: dict[str, Any] = {
        "DefinitionID": definition.definition_id,
        "DeviceModel": definition.model,
    }
    if definition.lumens is not None:
        out["LightLumens"] = _json_number(definition.lumens)
    out["PayloadDefinitions"] = [payload_to_json(p) for p in definition.payloads]
    return {**definition.extra, **out}


# -- VRSP_DEF ----------------------------------------------------------------------------------


def _decode_def(data: bytes, instance: int, at: int) -> VrspDef:
    if len(data) < at + _DEF_BODY.size:
        raise DecodeError(PROTOCOL, at, f"VRSP_DEF cut short ({len(data)} bytes)")
    device_count, lat, lon, alt = _DEF_BODY.unpack_from(data, at)
    if device_count > MAX_DEVICES:
        raise DecodeError(PROTOCOL, at, f"device count {device_count} > {MAX_DEVICES}")
    if not (math.isfinite(lat) and math.isfinite(lon) and math.isfinite(alt)):
        raise DecodeError(PROTOCOL, at + 4, "root latitude/longitude/altitude not finite")
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 360.0):
        raise DecodeError(PROTOCOL, at + 4, f"root ({lat}, {lon}) is not a latitude/longitude")
    at += _DEF_BODY.size
    blocks: list[DefBlock] = []
    total = 0
    end = len(data)
    while at < end:
        if end - at < _BLOCK_HEAD.size:
            raise DecodeError(PROTOCOL, at, "definition block header cut short")
        count, length = _BLOCK_HEAD.unpack_from(data, at)
        start = at
        at += _BLOCK_HEAD.size
        if length > min(end - at, MAX_JSON):
            raise DecodeError(PROTOCOL, start + 4, f"JSON length {length} past the datagram")
        raw = data[at : at + length]
        at += length
        if count * 2 > end - at:
            raise DecodeError(PROTOCOL, start, f"{count} device ids past the datagram")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(PROTOCOL, start + 8 + exc.start, "definition is not UTF-8") from None
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:  # JSON nested past the recursion limit
            raise DecodeError(PROTOCOL, start + 8, f"definition is not JSON: {exc}") from None
        definition = definition_from_json(obj, start + 8)
        ids = np.frombuffer(data, "<u2", count, at).astype(np.uint16)
        at += 2 * count
        total += count
        blocks.append(DefBlock(definition=definition, ids=ids, text=text))
    if total > device_count:
        raise DecodeError(
            PROTOCOL, at, f"definition blocks hold {total} devices, device count is {device_count}"
        )
    if blocks:
        every = np.concatenate([b.ids for b in blocks])
        if len(np.unique(every)) != len(every):
            raise DecodeError(PROTOCOL, at, "a device id appears twice in VRSP_DEF")
    return VrspDef(instance=instance, device_count=device_count, root=(lat, lon, alt),
                   blocks=tuple(blocks))  # fmt: skip


def encode_def(
    instance: int,
    root: tuple[float, float, float],
    blocks: Sequence[tuple[DeviceDefinition, NDArray[np.uint16]]],
    *,
    max_size: int = DEFAULT_DATAGRAM,
    identifier: IdentifierForm = "prefixed",
) -> list[bytes]:
    """VRSP_DEF datagrams: one when it fits in `max_size`, else several of the same instance
    whose blocks (a definition's ids split where needed) together hold every device."""
    device_count = sum(len(ids) for _, ids in blocks)
    head = (
        encode_identifier(DEF_NAME, identifier)
        + _HEADER_AFTER_NAME.pack(VERSION, instance)
        + _DEF_BODY.pack(device_count, *root)
    )
    out: list[bytes] = []
    current = [head]
    size = len(head)
    for definition, ids in blocks:
        text = json.dumps(definition_to_json(definition), separators=(",", ":")).encode()
        fixed = _BLOCK_HEAD.size + len(text)
        if len(head) + fixed + 2 > max_size:
            raise ValueError(f"definition {definition.definition_id} does not fit {max_size}")
        wire_ids = np.asarray(ids, dtype="<u2")
        start = 0
        while start < len(wire_ids) or start == 0:
            room = (max_size - size - fixed) // 2
            if room < 1 and size > len(head):
                out.append(b"".join(current))
                current, size = [head], len(head)
                continue
            chunk = wire_ids[start : start + room]
            current += [_BLOCK_HEAD.pack(len(chunk), len(text)), text, chunk.tobytes()]
            size += fixed + 2 * len(chunk)
            start += len(chunk)
            if start >= len(wire_ids):
                break
    out.append(b"".join(current))
    return out


# -- record layouts ----------------------------------------------------------------------------

LIGHT_RGB, LIGHT_LEVEL, PYRO = 1, 2, 3  # what a payload puts on the wire


def payload_kind(payload: Payload) -> int:
    if payload.def_type is DefType.PYRO:
        return PYRO
    return LIGHT_LEVEL if payload.color is not None else LIGHT_RGB


def record_dtype(
    definition: DeviceDefinition, flags: int, *, ids: bool = True, rgba: bool = False
) -> np.dtype[Any]:
    """The packed structured dtype of one record layout (the module docstring's order)."""
    fields: list[tuple[str, str] | tuple[str, str, tuple[int, ...]]] = []
    if ids:
        fields.append(("id", "<u2"))
    fields += [("pos", "<f4", (3,)), ("flags", "u1")]
    if flags & FLAG_COLOR:
        fields.append(("color", "u1", (4 if rgba else 3,)))
    if flags & FLAG_HEADING:
        fields.append(("heading", "<f2"))
    if flags & FLAG_ORIENTATION:
        fields.append(("orientation", "<f2", (4,)))
    for k, payload in enumerate(definition.payloads):
        kind = payload_kind(payload)
        if kind == PYRO:
            fields += [(f"cue{k}", "u1"), (f"ms{k}", "<u2")]
        elif kind == LIGHT_LEVEL:
            fields.append((f"level{k}", "u1"))
        else:
            fields.append((f"rgb{k}", "u1", (3,)))
        if payload.mount is not MountType.STATIC:
            fields.append((f"gimbal{k}", "<f2", (4,)))
    return np.dtype(fields)


def empty_swarm(n: int, k: int) -> Swarm:
    return Swarm(
        ids=np.zeros(n, np.uint16),
        position=np.zeros((n, 3), np.float32),
        has_color=np.zeros(n, np.bool_),
        color=np.zeros((n, 3), np.uint8),
        has_heading=np.zeros(n, np.bool_),
        heading=np.zeros(n, np.float32),
        has_orientation=np.zeros(n, np.bool_),
        orientation=np.zeros((n, 4), np.float32),
        light=np.zeros((n, k, 3), np.uint8),
        cue=np.zeros((n, k), np.uint8),
        cue_ms=np.zeros((n, k), np.uint16),
        gimbal=np.zeros((n, k, 4), np.float32),
    )


@dataclass(slots=True)
class _Run:
    records: NDArray[Any]
    definition: int  # index into the table's definitions
    flags: int
    ids: NDArray[np.uint16] | None = None  # implicit DATA: the ids from DEF order


@dataclass
class DefinitionTable:
    """What one instance's VRSP_DEF (all its parts) says: the root, each device's definition,
    and the record layouts built from them. Decodes and encodes DATA records."""

    instance: int
    device_count: int
    root: tuple[float, float, float]
    rgba: bool = False  # the 0x1 colour as 4 bytes R, G, B, A (the profile's option)
    definitions: list[DeviceDefinition] = field(default_factory=list)
    index_of: NDArray[np.int32] = field(
        default_factory=lambda: np.full(MAX_DEVICES, -1, dtype=np.int32)
    )  # device id -> index into `definitions`, -1 unknown
    order: NDArray[np.uint16] = field(default_factory=lambda: np.zeros(0, np.uint16))
    _layouts: dict[tuple[int, int, bool], np.dtype[Any]] = field(default_factory=dict)
    _sizes: dict[bool, NDArray[np.int64]] = field(default_factory=dict)
    kinds: NDArray[np.int8] = field(default_factory=lambda: np.zeros((0, 0), np.int8))
    gimballed: NDArray[np.bool_] = field(default_factory=lambda: np.zeros((0, 0), np.bool_))

    @classmethod
    def from_def(cls, packet: VrspDef, *, rgba: bool = False) -> DefinitionTable:
        table = cls(packet.instance, packet.device_count, packet.root, rgba=rgba)
        table.add(packet)
        return table

    @classmethod
    def build(
        cls,
        instance: int,
        root: tuple[float, float, float],
        blocks: Sequence[tuple[DeviceDefinition, NDArray[np.uint16]]],
        *,
        rgba: bool = False,
    ) -> DefinitionTable:
        """The table a sender describes with `encode_def(instance, root, blocks)`."""
        count = sum(len(ids) for _, ids in blocks)
        packet = VrspDef(
            instance=instance,
            device_count=count,
            root=root,
            blocks=tuple(DefBlock(definition=d, ids=np.asarray(i, np.uint16)) for d, i in blocks),
        )
        return cls.from_def(packet, rgba=rgba)

    @property
    def complete(self) -> bool:
        return len(self.order) >= self.device_count

    @property
    def slots(self) -> int:
        """K: the most payloads any definition has."""
        return max((len(d.payloads) for d in self.definitions), default=0)

    def add(self, packet: VrspDef) -> None:
        """Merge one DEF (part) of this instance: its blocks' devices join the table."""
        for block in packet.blocks:
            found = next(
                (
                    i
                    for i, d in enumerate(self.definitions)
                    if d.definition_id == block.definition.definition_id
                ),
                None,
            )
            if found is None:
                found = len(self.definitions)
                self.definitions.append(block.definition)
            else:
                self.definitions[found] = block.definition
            new = block.ids[self.index_of[block.ids] < 0]
            self.index_of[block.ids] = found
            self.order = np.concatenate([self.order, new])
        self._layouts.clear()
        self._sizes.clear()
        k = self.slots
        self.kinds = np.zeros((len(self.definitions), k), np.int8)
        self.gimballed = np.zeros((len(self.definitions), k), np.bool_)
        for i, d in enumerate(self.definitions):
            for j, p in enumerate(d.payloads):
                self.kinds[i, j] = payload_kind(p)
                self.gimballed[i, j] = p.mount is not MountType.STATIC

    def layout(self, definition: int, flags: int, ids: bool = True) -> np.dtype[Any]:
        key = (definition, flags, ids)
        dtype = self._layouts.get(key)
        if dtype is None:
            dtype = self._layouts[key] = record_dtype(
                self.definitions[definition], flags, ids=ids, rgba=self.rgba
            )
        return dtype

    def sizes(self, ids: bool = True) -> NDArray[np.int64]:
        """Record size by definition * 8 + flags."""
        sizes = self._sizes.get(ids)
        if sizes is None:
            sizes = np.array(
                [
                    self.layout(d, f, ids).itemsize
                    for d in range(len(self.definitions))
                    for f in range(8)
                ],
                dtype=np.int64,
            )
            self._sizes[ids] = sizes
        return sizes

    # -- decoding ------------------------------------------------------------------------------

    def decode(self, body: bytes, count: int | None = None, offset: int = 0) -> Swarm:
        """Profile records (each with its id) -> columns. `count` records must fill `body`
        exactly (None: as many as there are). `offset` places errors in the datagram."""
        runs = self._scan(body, offset, ids=True, count=count)
        return self._columns(runs)

    def decode_implicit(self, body: bytes, offset: int = 0) -> Swarm:
        """The sheet's implicit records (no ids, DEF order) -> columns."""
        return self._columns(self._scan(body, offset, ids=False, count=None))

    def _scan(self, body: bytes, offset: int, *, ids: bool, count: int | None) -> list[_Run]:
        """Split `body` into runs of records of one layout; one `frombuffer` per run."""
        runs: list[_Run] = []
        end = len(body)
        at = 0
        done = 0
        head = 2 if ids else 0  # where a record's position starts
        flag_at = head + 12
        minimum = flag_at + 1
        sizes = self.sizes(ids) if self.definitions else np.zeros(0, np.int64)
        index_of = self.index_of
        order = self.order
        while at < end:
            if count is not None and done >= count:
                raise DecodeError(PROTOCOL, offset + at, f"bytes after the {count} records")
            if end - at < minimum:
                raise DecodeError(PROTOCOL, offset + at, "record cut short")
            if ids:
                device = body[at] | body[at + 1] << 8
            else:
                if done >= len(order):
                    raise DecodeError(PROTOCOL, offset + at, "more records than DEF devices")
                device = int(order[done])
            definition = int(index_of[device])
            if definition < 0:
                raise DecodeError(PROTOCOL, offset + at, f"device id {device} is not in VRSP_DEF")
            flags = body[at + flag_at]
            if flags & ~KNOWN_FLAGS:
                raise DecodeError(
                    PROTOCOL, offset + at + flag_at, f"unknown option flags {flags:#x}"
                )
            code = definition * 8 + flags
            size = int(sizes[code])
            room = (end - at) // size
            if room < 1:
                raise DecodeError(PROTOCOL, offset + at, "record cut short")
            limit = room if count is None else min(room, count - done)
            n = self._same_layout(body, at, size, limit, (definition, flags), ids, done)
            records = np.frombuffer(body, self.layout(definition, flags, ids), n, at)
            run_ids = None if ids else order[done : done + n]
            runs.append(_Run(records, definition, flags, run_ids))
            at += n * size
            done += n
        if count is not None and done != count:
            raise DecodeError(PROTOCOL, offset + at, f"{done} records, the header says {count}")
        return runs

    def _same_layout(
        self,
        body: bytes,
        at: int,
        size: int,
        limit: int,
        layout: tuple[int, int],
        ids: bool,
        done: int,
    ) -> int:
        """How many records from `at` (at most `limit`, at least the first) have `layout`
        (definition, flags): a look-ahead in growing steps, one numpy compare each."""
        definition, flags = layout
        index_of, order = self.index_of, self.order
        flag_at = (2 if ids else 0) + 12
        n = 1
        step = 16
        while n < limit:
            m = min(limit, n + step)
            if ids:
                look = np.ndarray((m - n,), "<u2", body, at + n * size, (size,))
                defs = index_of[look]
            else:
                defs = index_of[order[done + n : done + m]]
                if len(defs) < m - n:  # past the DEF's devices
                    m = n + len(defs)
                    if m == n:
                        break
            flag_look = np.ndarray((m - n,), "u1", body, at + n * size + flag_at, (size,))
            same = (defs == definition) & (flag_look == flags)
            if same.all():
                n = m
                step *= 4
                continue
            return n + int(np.argmin(same))
        return n

    def _columns(self, runs: list[_Run]) -> Swarm:
        n = sum(len(r.records) for r in runs)
        k = self.slots
        out = empty_swarm(n, k)
        start = 0
        for run in runs:
            records, flags = run.records, run.flags
            stop = start + len(records)
            rows = slice(start, stop)
            out.ids[rows] = records["id"] if run.ids is None else run.ids
            out.position[rows] = records["pos"]
            if flags & FLAG_COLOR:
                out.has_color[rows] = True
                out.color[rows] = records["color"][:, :3]
            if flags & FLAG_HEADING:
                out.has_heading[rows] = True
                out.heading[rows] = records["heading"]
            if flags & FLAG_ORIENTATION:
                out.has_orientation[rows] = True
                out.orientation[rows] = records["orientation"]
            for j, payload in enumerate(self.definitions[run.definition].payloads):
                kind = payload_kind(payload)
                if kind == PYRO:
                    out.cue[rows, j] = records[f"cue{j}"]
                    out.cue_ms[rows, j] = records[f"ms{j}"]
                elif kind == LIGHT_LEVEL:
                    out.light[rows, j, 0] = records[f"level{j}"]
                else:
                    out.light[rows, j] = records[f"rgb{j}"]
                if payload.mount is not MountType.STATIC:
                    out.gimbal[rows, j] = records[f"gimbal{j}"]
            start = stop
        return out

    # -- encoding ------------------------------------------------------------------------------

    def definition_rows(self, ids: NDArray[np.uint16]) -> NDArray[np.int32]:
        """Each id's definition index; ValueError if one is not in this table."""
        found = self.index_of[ids]
        if len(found) and int(found.min()) < 0:
            missing = ids[found < 0][0]
            raise ValueError(f"device id {missing} is not in the definition")
        return found

    def records(self, swarm: Swarm, *, ids: bool = True) -> tuple[bytes, NDArray[np.int64]]:
        """The swarm's records as bytes, grouped by layout (rows sorted by definition and
        flags, so decoders meet long runs), and each record's end offset in those bytes."""
        n = len(swarm.ids)
        if n == 0:
            return b"", np.zeros(0, np.int64)
        definitions = self.definition_rows(swarm.ids)
        flags = (
            swarm.has_color.astype(np.int64) * FLAG_COLOR
            | swarm.has_heading.astype(np.int64) * FLAG_HEADING
            | swarm.has_orientation.astype(np.int64) * FLAG_ORIENTATION
        )
        code = definitions.astype(np.int64) * 8 + flags
        order = np.argsort(code, kind="stable") if ids else np.arange(n)
        sorted_code = code[order]
        edges = np.flatnonzero(np.diff(sorted_code)) + 1
        starts = np.concatenate([[0], edges])
        stops = np.concatenate([edges, [n]])
        chunks: list[bytes] = []
        for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
            rows = order[a:b]
            c = int(sorted_code[a])
            chunks.append(self._encode_run(swarm, rows, c // 8, c % 8, ids))
        sizes = self.sizes(ids)[sorted_code]
        return b"".join(chunks), np.cumsum(sizes)

    def _encode_run(
        self, swarm: Swarm, rows: NDArray[np.intp], definition: int, flags: int, ids: bool
    ) -> bytes:
        dtype = self.layout(definition, flags, ids)
        out = np.zeros(len(rows), dtype)
        if ids:
            out["id"] = swarm.ids[rows]
        out["pos"] = swarm.position[rows]
        out["flags"] = flags
        if flags & FLAG_COLOR:
            out["color"][:, :3] = swarm.color[rows]
            if self.rgba:
                out["color"][:, 3] = 255
        if flags & FLAG_HEADING:
            out["heading"] = swarm.heading[rows]
        if flags & FLAG_ORIENTATION:
            out["orientation"] = swarm.orientation[rows]
        for j, payload in enumerate(self.definitions[definition].payloads):
            kind = payload_kind(payload)
            if kind == PYRO:
                out[f"cue{j}"] = swarm.cue[rows, j]
                out[f"ms{j}"] = swarm.cue_ms[rows, j]
            elif kind == LIGHT_LEVEL:
                out[f"level{j}"] = swarm.light[rows, j, 0]
            else:
                out[f"rgb{j}"] = swarm.light[rows, j]
            if payload.mount is not MountType.STATIC:
                out[f"gimbal{j}"] = swarm.gimbal[rows, j]
        return out.tobytes()


def encode_data(
    table: DefinitionTable,
    swarm: Swarm,
    frame: int,
    *,
    max_size: int = DEFAULT_DATAGRAM,
    identifier: IdentifierForm = "prefixed",
) -> list[bytes]:
    """One frame as VRSP_DATA datagrams of at most `max_size` bytes each (records are never
    split; a part holds at most 65,535 records)."""
    body, ends = table.records(swarm)
    head = encode_identifier(DATA_NAME, identifier) + _HEADER_AFTER_NAME.pack(
        VERSION, table.instance
    )
    room = max_size - len(head) - _FRAME.size
    if len(ends) and int(np.diff(ends, prepend=0).max()) > room:
        raise ValueError(f"a record does not fit a {max_size}-byte datagram")
    cuts = [0]  # record indices where parts start
    taken = 0  # bytes before the current part
    n = len(ends)
    while cuts[-1] < n:
        first = cuts[-1]
        stop = int(np.searchsorted(ends, taken + room, side="right"))
        stop = min(max(stop, first + 1), first + 0xFFFF, n)
        cuts.append(stop)
        taken = int(ends[stop - 1])
    parts = max(1, len(cuts) - 1)
    if parts > 0xFFFF:
        raise ValueError("a frame of more than 65,535 datagrams")
    if n == 0:
        return [head + _FRAME.pack(frame & 0xFFFFFFFF, 0, 1, 0)]
    out = []
    for part in range(parts):
        a, b = cuts[part], cuts[part + 1]
        begin = int(ends[a - 1]) if a else 0
        out.append(
            head
            + _FRAME.pack(frame & 0xFFFFFFFF, part, parts, b - a)
            + body[begin : int(ends[b - 1])]
        )
    return out


def encode_implicit(
    table: DefinitionTable, swarm: Swarm, *, identifier: IdentifierForm = "prefixed"
) -> bytes:
    """The sheet's implicit DATA: header, then every record without id (rows as given,
    which must be the DEF's device order)."""
    body, _ = table.records(swarm, ids=False)
    return (
        encode_identifier(DATA_NAME, identifier)
        + _HEADER_AFTER_NAME.pack(VERSION, table.instance)
        + body
    )
