"""SpyGlass packets <-> bytes. Pure functions: no I/O, no clocks.

A packet is a 19-byte big-endian header followed by a payload:

    offset  type     field
    0       uint16   length = total bytes - 2 (everything after the length field)
    2       uint8    version, always 2
    3       uint8    syntax type (0 std, 1..6 fixed-size lists, 7 variable list)
    4       uint8    semantic type (a routing key; its meaning comes from a `SemanticProfile`)
    5       uint16   sender node id
    7       uint32   time, Unix seconds
    11      uint16   milliseconds of that time
    13      int16x3  sender position x, y, z (unitless; see adapter for the world frame)

There is no packet-type field: the kind of packet (neighbourhood, trajectory, ...) follows from
the syntax type plus what the semantic type means, which is configuration, not wire. The
default profile is the one of the demo recording shipped with SpyGlass.

Entry points:
* `decode(buf)` one whole packet; `encode(packet)` its bytes; `frame(packets)` packets back
  to back, as the TCP transport carries them.
* `split(buf, offset)` finds the packets of a self-delimited stream (packets back to back),
  checking each header before trusting its length; `decode_batch` decodes many at once with
  vectorised numpy reads; `next_packet(buf, offset)` is the one-at-a-time form.
Only `DecodeError` is raised for bad bytes; `encode` raises `ValueError` for unencodable values.

Size: one module over 600 lines because it is one thing, the codec: the header, every
syntax type and the batch/column decoders share one packet layout.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

import numpy as np
import numpy.typing as npt

from robowire.errors import DecodeError
from robowire.protocols.spyglass.profile import DEFAULT_PROFILE as DEFAULT_PROFILE
from robowire.protocols.spyglass.profile import PLAIN_DATA as PLAIN_DATA
from robowire.protocols.spyglass.profile import PLAIN_NEIGHBORS as PLAIN_NEIGHBORS
from robowire.protocols.spyglass.profile import REQUIRED_SYNTAX
from robowire.protocols.spyglass.profile import Interpretation as Interpretation
from robowire.protocols.spyglass.profile import SemanticProfile as SemanticProfile
from robowire.protocols.spyglass.profile import SemanticRule as SemanticRule
from robowire.protocols.spyglass.profile import SyntaxType as SyntaxType

NAME = "spyglass"
VERSION = 2
HEADER = struct.Struct(">HBBBHIHhhh")
HEADER_SIZE = HEADER.size  # 19
MIN_LENGTH = HEADER_SIZE - 2  # smallest legal length field (empty payload)
MAX_PACKET_SIZE = 0xFFFF + 2  # the uint16 length field allows 65 537 bytes in all
WISEBED_PREFIX = 0x6F  # iSense/WISEBED UART message type "SpyGlass packet" (111)
_LENGTH = struct.Struct(">H")


# numpy big-endian element type of each fixed-size list syntax (also the variable-list tags).
DTYPES: dict[int, np.dtype[np.generic]] = {
    SyntaxType.UINT8_LIST: np.dtype(">u1"),
    SyntaxType.UINT16_LIST: np.dtype(">u2"),
    SyntaxType.INT16_LIST: np.dtype(">i2"),
    SyntaxType.UINT32_LIST: np.dtype(">u4"),
    SyntaxType.INT64_LIST: np.dtype(">i8"),
    SyntaxType.FLOAT_LIST: np.dtype(">f4"),
}
_STRUCT_CODES = {1: "B", 2: "H", 3: "h", 4: "I", 5: "q", 6: "f"}
_ITEM_SIZES = {code: dtype.itemsize for code, dtype in DTYPES.items()}
_VARIABLE_ITEMS = {code: struct.Struct(">" + c) for code, c in _STRUCT_CODES.items()}
_VALID_SYNTAX = bytes(1 if code <= SyntaxType.VARIABLE else 0 for code in range(256))
_SYNTAX_OF = tuple(SyntaxType(code) for code in range(8))

# The header as numpy records: (name, format, offset) of each field, big-endian.
_HEADER_FIELDS = (
    ("length", ">u2", 0),
    ("version", "u1", 2),
    ("syntax", "u1", 3),
    ("semantic", "u1", 4),
    ("sender", ">u2", 5),
    ("seconds", ">u4", 7),
    ("ms", ">u2", 11),
    ("x", ">i2", 13),
    ("y", ">i2", 15),
    ("z", ">i2", 17),
)


def _record(fields: tuple[tuple[str, str, int], ...], size: int) -> np.dtype[Any]:
    return np.dtype(
        {
            "names": [name for name, _, _ in fields],
            "formats": [form for _, form, _ in fields],
            "offsets": [offset for _, _, offset in fields],
            "itemsize": size,
        }
    )


HEADER_DTYPE = _record(_HEADER_FIELDS, HEADER_SIZE)  # many headers read in one call
# a float data packet with one value: a sink writes many at once
FLOAT_PACKET_DTYPE = _record((*_HEADER_FIELDS, ("value", ">f4", HEADER_SIZE)), HEADER_SIZE + 4)

Number: TypeAlias = int | float


# -- packets ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SpyglassPacket:
    """Header fields shared by every packet, in wire units (int16 position, s + ms time)."""

    TYPE: ClassVar[str] = "SpyGlass-Packet"

    semantic_type: int
    sender: int
    seconds: int = 0
    milliseconds: int = 0
    x: int = 0
    y: int = 0
    z: int = 0

    @property
    def time(self) -> float:
        """The sender's time stamp as Unix seconds."""
        return self.seconds + self.milliseconds / 1000.0

    @property
    def position(self) -> tuple[int, int, int]:
        return (self.x, self.y, self.z)


@dataclass(frozen=True, slots=True, kw_only=True)
class StdPacket(SpyglassPacket):
    """Syntax 0 ("std"): no payload semantics, the payload bytes are kept as they are."""

    TYPE: ClassVar[str] = "Std-Packet"
    payload: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataPacket(SpyglassPacket):
    """A list of numbers of one syntax type (1..6); the generic reading of any semantic type."""

    TYPE: ClassVar[str] = "Data-Packet"
    syntax_type: SyntaxType
    values: tuple[Number, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class VariableListPacket(SpyglassPacket):
    """Syntax 7: a sequence of (type tag 1..6, value of that type) items."""

    TYPE: ClassVar[str] = "Variable-List-Packet"
    items: tuple[tuple[SyntaxType, Number], ...] = ()

    @property
    def values(self) -> tuple[Number, ...]:
        return tuple(value for _, value in self.items)


@dataclass(frozen=True, slots=True, kw_only=True)
class NeighborhoodPacket(SpyglassPacket):
    """uint16 list: the ids of the sender's neighbour nodes."""

    TYPE: ClassVar[str] = "Neighborhood-Packet"
    neighbors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeLinkPacket(SpyglassPacket):
    """uint16 list: a link sender -> `destination`; `values` is the rest (first one = value)."""

    TYPE: ClassVar[str] = "Node-Link-Packet"
    destination: int
    values: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatesList2Packet(SpyglassPacket):
    """int16 list of (x, y) points: a polyline, independent of node positions."""

    TYPE: ClassVar[str] = "Coordinates-List-Packet-2"
    points: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatesList3Packet(SpyglassPacket):
    """int16 list of (x, y, z) points."""

    TYPE: ClassVar[str] = "Coordinates-List-Packet-3"
    points: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TrajectoryPacket2(SpyglassPacket):
    """int16 list x1,y1,d1, ..., xn,yn: n >= 2 points, d = seconds from one point to the next."""

    TYPE: ClassVar[str] = "Trajectory-Packet-2"
    points: tuple[tuple[int, int], ...]
    durations: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrajectoryPacket3(SpyglassPacket):
    """int16 list x1,y1,z1,d1, ..., xn,yn,zn: n >= 2 points, d = seconds to the next point."""

    TYPE: ClassVar[str] = "Trajectory-Packet-3"
    points: tuple[tuple[int, int, int], ...]
    durations: tuple[int, ...]


Packet: TypeAlias = (
    StdPacket
    | DataPacket
    | VariableListPacket
    | NeighborhoodPacket
    | NodeLinkPacket
    | CoordinatesList2Packet
    | CoordinatesList3Packet
    | TrajectoryPacket2
    | TrajectoryPacket3
)
PACKET_TYPES: tuple[type[SpyglassPacket], ...] = (
    StdPacket,
    DataPacket,
    VariableListPacket,
    NeighborhoodPacket,
    NodeLinkPacket,
    CoordinatesList2Packet,
    CoordinatesList3Packet,
    TrajectoryPacket2,
    TrajectoryPacket3,
)


_SYNTAX_OF_CLASS: dict[type[SpyglassPacket], SyntaxType] = {
    StdPacket: SyntaxType.STD,
    VariableListPacket: SyntaxType.VARIABLE,
    NeighborhoodPacket: SyntaxType.UINT16_LIST,
    NodeLinkPacket: SyntaxType.UINT16_LIST,
    CoordinatesList2Packet: SyntaxType.INT16_LIST,
    CoordinatesList3Packet: SyntaxType.INT16_LIST,
    TrajectoryPacket2: SyntaxType.INT16_LIST,
    TrajectoryPacket3: SyntaxType.INT16_LIST,
}


def syntax_type_of(packet: SpyglassPacket) -> SyntaxType:
    """The syntax type a packet is sent with."""
    if isinstance(packet, DataPacket):
        return packet.syntax_type
    return _SYNTAX_OF_CLASS[type(packet)]


# -- decoding --------------------------------------------------------------------------------


def _error(offset: int, reason: str) -> DecodeError:
    return DecodeError(NAME, offset, reason)


def check_header(buf: bytes | bytearray | memoryview, offset: int = 0) -> None:
    """Raise DecodeError if the header at `offset` cannot start a packet (needs 4 bytes)."""
    if buf[offset + 2] != VERSION:
        raise _error(offset + 2, f"version {buf[offset + 2]}, expected {VERSION}")
    if not _VALID_SYNTAX[buf[offset + 3]]:
        raise _error(offset + 3, f"unknown syntax type {buf[offset + 3]}")


def _check_length(length: int, offset: int, max_size: int) -> None:
    if length < MIN_LENGTH:
        raise _error(offset, f"length field {length} is shorter than the header ({MIN_LENGTH})")
    if length + 2 > max_size:
        raise _error(offset, f"packet of {length + 2} bytes exceeds the limit of {max_size}")


def split(
    buf: bytes | bytearray | memoryview, offset: int = 0, *, max_size: int = MAX_PACKET_SIZE
) -> tuple[list[int], int, DecodeError | None]:
    """The whole packets of a self-delimited stream: (start offsets, end, error).

    Packets run from each start to the next one (the last to `end`); bytes after `end` are an
    incomplete packet. `error` is set when the header at `end` is broken (bad length, version
    or syntax type): the framing is lost there and nothing after it can be trusted.
    """
    # Walk the length fields first (the only per-packet Python work), then check every
    # header seen, the one of the incomplete packet too, at once: the first broken one cuts.
    starts: list[int] = []
    append = starts.append
    size = len(buf)
    seen = offset
    while seen + 4 <= size:
        after = seen + ((buf[seen] << 8) | buf[seen + 1]) + 2
        if after > size:
            break
        append(seen)
        seen = after
    heads = [*starts, seen] if seen + 4 <= size else starts
    if not heads:
        return starts, seen, None
    raw = np.frombuffer(buf, np.uint8)
    at = np.asarray(heads, dtype=np.intp)
    length = (raw[at].astype(np.intp) << 8) | raw[at + 1]
    bad = (
        (length < MIN_LENGTH)
        | (length + 2 > max_size)
        | (raw[at + 2] != VERSION)
        | (raw[at + 3] > SyntaxType.VARIABLE)
    )
    if not bad.any():
        return starts, seen, None
    first = int(np.argmax(bad))
    cut = heads[first]
    try:
        _check_length(int(length[first]), cut, max_size)
        check_header(buf, cut)
    except DecodeError as exc:
        return starts[:first], cut, exc
    raise AssertionError("unreachable: the header was found broken")  # pragma: no cover


def next_packet(
    buf: bytes | bytearray | memoryview,
    offset: int = 0,
    *,
    max_size: int = MAX_PACKET_SIZE,
    profile: SemanticProfile = DEFAULT_PROFILE,
) -> tuple[Packet, int] | None:
    """The packet at `offset` of a self-delimited stream and the bytes it used, or None for
    "need more". A broken header or payload raises DecodeError (offsets into `buf`)."""
    if len(buf) - offset < 4:
        return None
    length = _LENGTH.unpack_from(buf, offset)[0]
    _check_length(length, offset, max_size)
    check_header(buf, offset)
    if len(buf) - offset < length + 2:
        return None
    data = bytes(buf[offset : offset + length + 2])
    try:
        return decode(data, profile=profile), length + 2
    except DecodeError as exc:
        raise exc.shifted(offset) from None


def decode(
    buf: bytes | bytearray | memoryview,
    *,
    profile: SemanticProfile = DEFAULT_PROFILE,
    strict_length: bool = True,
    wisebed: bool = False,
    max_size: int = MAX_PACKET_SIZE,
) -> Packet:
    """One whole packet (the buffer holds exactly one).

    `strict_length`: the length field must equal len(buf) - 2 (what SpyGlass checks); False
    trusts the buffer and ignores the field. `wisebed`: the packet starts with the 0x6F byte
    WISEBED/iSense put in front of SpyGlass packets, which is checked and stripped.
    """
    base = 0
    if wisebed:
        if not buf or buf[0] != WISEBED_PREFIX:
            raise _error(0, "missing WISEBED 0x6F prefix")
        base = 1
    size = len(buf) - base
    if size > max_size:
        raise _error(base, f"packet of {size} bytes exceeds the limit of {max_size}")
    if size < HEADER_SIZE:
        raise _error(base, f"{size} bytes are too short for the {HEADER_SIZE}-byte header")
    head = HEADER.unpack_from(buf, base)
    check_header(buf, base)
    if strict_length and head[0] != size - 2:
        raise _error(base, f"length field {head[0]} does not match {size - 2} bytes after it")
    payload = bytes(buf[base + HEADER_SIZE :])
    values: list[Number] | None = None
    dtype = DTYPES.get(head[2])
    if dtype is not None:
        if len(payload) % dtype.itemsize:
            raise _error(
                base + HEADER_SIZE,
                f"{len(payload)} payload bytes are not a whole {SyntaxType(head[2]).name} list",
            )
        values = np.frombuffer(payload, dtype).tolist()
    try:
        return _build(head[2], head[3:], payload, values, profile)
    except DecodeError as exc:
        raise exc.shifted(base) from None


_BASE_FIELDS = ("semantic", "sender", "seconds", "ms", "x", "y", "z")  # HEADER_DTYPE names
_HEADER_NAMES = ("semantic_type", "sender", "seconds", "milliseconds", "x", "y", "z")
Head: TypeAlias = tuple[int, int, int, int, int, int, int]  # semantic type .. z


def decode_batch(
    buf: bytes | bytearray | memoryview,
    starts: Sequence[int],
    end: int,
    *,
    profile: SemanticProfile = DEFAULT_PROFILE,
) -> list[Packet | DecodeError]:
    """Decode the packets `split` found (headers already checked), vectorised per payload shape.

    Returns one entry per start: the packet, or the DecodeError (offset into `buf`) of a packet
    whose payload does not fit its syntax or semantic type.
    """
    count = len(starts)
    if count == 0:
        return []
    raw = np.frombuffer(buf, np.uint8)
    begin = np.asarray(starts, dtype=np.intp)
    stop = np.empty_like(begin)
    stop[:-1] = begin[1:]
    stop[-1] = end
    fields = raw[begin[:, None] + np.arange(HEADER_SIZE)].view(HEADER_DTYPE).ravel()
    heads: list[Head] = list(zip(*(fields[name].tolist() for name in _BASE_FIELDS), strict=True))
    sizes = stop - begin - HEADER_SIZE
    syntax = fields["syntax"].astype(np.intp)
    # Group packets by (syntax, payload size): each group's payloads are read in one call.
    key = syntax * 0x20000 + sizes
    order = np.argsort(key, kind="stable")
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    out: list[Packet | DecodeError | None] = [None] * count
    for group in np.split(order, cuts):
        indices = group.tolist()
        code = int(syntax[indices[0]])
        size = int(sizes[indices[0]])
        dtype = DTYPES.get(code)
        if dtype is None or size % dtype.itemsize or size == 0:
            for i in indices:
                payload = bytes(buf[starts[i] + HEADER_SIZE : int(stop[i])])
                out[i] = _decode_one(code, heads[i], payload, profile, starts[i])
            continue
        block = raw[begin[group][:, None] + (HEADER_SIZE + np.arange(size))]
        rows = block.view(dtype).tolist()
        _decode_rows(code, indices, rows, heads, starts, profile, out)
    return out  # type: ignore[return-value]  # every slot was filled above


def _decode_rows(
    code: int,
    indices: list[int],
    rows: list[Any],
    heads: list[Head],
    starts: Sequence[int],
    profile: SemanticProfile,
    out: list[Packet | DecodeError | None],
) -> None:
    """Packets `indices` of one syntax `code` and payload size, their payloads already read as
    `rows` of numbers, into `out`: the two common cases inline, the rest through `_build`."""
    table = profile._table
    syntax_type = _SYNTAX_OF[code]
    neighborhood_ok = code == SyntaxType.UINT16_LIST
    for i, row in zip(indices, rows, strict=True):
        head = heads[i]
        semantic, sender, seconds, millis, x, y, z = head
        meaning = table[semantic]
        # The two common cases inline; the rest (and every error) through _build.
        if meaning is Interpretation.NEIGHBORHOOD and neighborhood_ok:
            out[i] = NeighborhoodPacket(
                semantic_type=semantic,
                sender=sender,
                seconds=seconds,
                milliseconds=millis,
                x=x,
                y=y,
                z=z,
                neighbors=tuple(row),
            )
        elif meaning is Interpretation.DATA or REQUIRED_SYNTAX[meaning] != code:
            out[i] = DataPacket(
                semantic_type=semantic,
                sender=sender,
                seconds=seconds,
                milliseconds=millis,
                x=x,
                y=y,
                z=z,
                syntax_type=syntax_type,
                values=tuple(row),
            )
        else:
            try:
                out[i] = _build(code, head, b"", row, profile)
            except DecodeError as exc:
                out[i] = exc.shifted(starts[i])


# -- the columnar decoder (the hot path: no object per packet) ---------------------------------

_HEADER_RANGE = np.arange(HEADER_SIZE)
_ITEM_SIZE = np.array([_ITEM_SIZES.get(code, 1) for code in range(256)], dtype=np.intp)
IntArray: TypeAlias = npt.NDArray[np.intp]


@dataclass(frozen=True, slots=True)
class ValueList:
    """Packets (`rows` of a `PacketColumns`) whose payloads are plain number lists of one
    syntax type and length: their values as one (rows, length) array in native byte order."""

    rows: IntArray
    values: npt.NDArray[Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class PacketColumns:
    """Many whole packets as columns, in wire units: what `decode_columns` gives a session.

    `head` holds every header (`HEADER_DTYPE` records: `semantic`, `sender`, `seconds`, `ms`,
    `x`, `y`, `z`, ...), one row per packet in stream order; `data[starts[i]:stops[i]]` is
    packet i's bytes. Neighbourhood and data lists (the bulk of a stream) are read for many
    packets at once into `lists`; every other packet (std, variable lists, node links,
    coordinates, trajectories) is a typed packet in `objects`, by row.
    """

    data: bytes
    starts: IntArray
    stops: IntArray
    head: npt.NDArray[Any]
    lists: tuple[ValueList, ...]
    objects: Mapping[int, Packet]
    profile: SemanticProfile = DEFAULT_PROFILE

    def __len__(self) -> int:
        return len(self.starts)

    def packets(self) -> list[Packet]:
        """Every packet as a typed object, in order (built on demand: the slow form)."""
        return [
            self.objects.get(i) or decode(self.data[a:b], profile=self.profile)
            for i, (a, b) in enumerate(zip(self.starts.tolist(), self.stops.tolist(), strict=True))
        ]


def decode_columns(
    buf: bytes,
    starts: Sequence[int],
    end: int,
    *,
    profile: SemanticProfile = DEFAULT_PROFILE,
) -> tuple[PacketColumns, list[tuple[int, int, DecodeError]]]:
    """The packets `split` found (headers already checked) as columns, and the ones dropped:
    (start, stop, DecodeError with its offset into `buf`) of each packet whose payload does
    not fit its syntax or semantic type. Per-packet Python work only for the rare kinds."""
    raw = np.frombuffer(buf, np.uint8)
    begin = np.asarray(starts, dtype=np.intp)
    stop = np.empty_like(begin)
    stop[:-1] = begin[1:]
    stop[-1:] = end
    head = raw[begin[:, None] + _HEADER_RANGE].view(HEADER_DTYPE).ravel()
    sizes = stop - begin - HEADER_SIZE
    syntax = head["syntax"].astype(np.intp)
    plain = profile._plain[head["semantic"], syntax]
    fast = (plain != 0) & (sizes % _ITEM_SIZE[syntax] == 0)  # empty lists too
    objects: dict[int, Packet] = {}
    drops: list[tuple[int, int, DecodeError]] = []
    dropped: list[int] = []
    for i in np.flatnonzero(~fast).tolist():
        a, b = int(begin[i]), int(stop[i])
        item = _decode_one(int(syntax[i]), head[i].item()[3:], buf[a + HEADER_SIZE : b], profile, a)
        if isinstance(item, DecodeError):
            drops.append((a, b, item))
            dropped.append(i)
        else:
            objects[i] = item
    if dropped:
        keep = np.ones(len(begin), dtype=bool)
        keep[dropped] = False
        new_row = np.cumsum(keep) - 1
        objects = {int(new_row[i]): packet for i, packet in objects.items()}
        begin, stop, head, sizes, syntax, fast = (
            column[keep] for column in (begin, stop, head, sizes, syntax, fast)
        )
    lists: list[ValueList] = []
    rows = np.flatnonzero(fast)
    if rows.size:
        key = syntax[rows] * 0x20000 + sizes[rows]
        order = np.argsort(key, kind="stable")
        rows, key = rows[order], key[order]
        cuts = np.flatnonzero(np.diff(key)) + 1
        for group in np.split(rows, cuts):
            first = int(group[0])
            dtype = DTYPES[int(syntax[first])]
            block = raw[begin[group][:, None] + (HEADER_SIZE + np.arange(int(sizes[first])))]
            lists.append(ValueList(group, block.view(dtype).astype(dtype.newbyteorder("="))))
    columns = PacketColumns(
        data=buf,
        starts=begin,
        stops=stop,
        head=head,
        lists=tuple(lists),
        objects=objects,
        profile=profile,
    )
    return columns, drops


def _decode_one(
    code: int, head: Head, payload: bytes, profile: SemanticProfile, start: int
) -> Packet | DecodeError:
    """The slow path of decode_batch: std, variable, empty or ragged payloads."""
    try:
        dtype = DTYPES.get(code)
        values: list[Number] | None = None
        if dtype is not None:
            if len(payload) % dtype.itemsize:
                raise _error(
                    HEADER_SIZE,
                    f"{len(payload)} payload bytes are not a whole {SyntaxType(code).name} list",
                )
            values = np.frombuffer(payload, dtype).tolist()
        return _build(code, head, payload, values, profile)
    except DecodeError as exc:
        return exc.shifted(start)


def _build(
    syntax: int,
    head: Head,
    payload: bytes,
    values: list[Number] | None,
    profile: SemanticProfile,
) -> Packet:
    """The typed packet from the header fields and its payload (values, for list syntaxes)."""
    header = dict(zip(_HEADER_NAMES, head, strict=True))
    if values is None:
        if syntax == SyntaxType.STD:
            return StdPacket(**header, payload=payload)
        return VariableListPacket(**header, items=decode_variable(payload, HEADER_SIZE))
    meaning = profile._table[head[0]]
    if meaning is Interpretation.DATA or REQUIRED_SYNTAX[meaning] != syntax:
        return DataPacket(**header, syntax_type=_SYNTAX_OF[syntax], values=tuple(values))
    ints: list[int] = values  # type: ignore[assignment]  # interpreted syntaxes hold ints
    if meaning is Interpretation.NEIGHBORHOOD:
        return NeighborhoodPacket(**header, neighbors=tuple(ints))
    count = len(ints)
    if meaning is Interpretation.NODE_LINK:
        if not count:
            raise _error(HEADER_SIZE, "node-link packet without a destination node id")
        return NodeLinkPacket(**header, destination=ints[0], values=tuple(ints[1:]))
    if meaning is Interpretation.COORDINATES_2D:
        if count % 2:
            raise _error(HEADER_SIZE, f"{count} int16 values are not (x, y) pairs")
        return CoordinatesList2Packet(
            **header, points=tuple(zip(ints[0::2], ints[1::2], strict=True))
        )
    if meaning is Interpretation.COORDINATES_3D:
        if count % 3:
            raise _error(HEADER_SIZE, f"{count} int16 values are not (x, y, z) triples")
        points3 = tuple(zip(ints[0::3], ints[1::3], ints[2::3], strict=True))
        return CoordinatesList3Packet(**header, points=points3)
    # Trajectories: x1,y1,(z1,)d1, ..., xn,yn(,zn): n >= 2 points, n - 1 durations.
    dims = 2 if meaning is Interpretation.TRAJECTORY_2D else 3
    step = dims + 1
    if count < dims * 2 + 1 or (count - dims) % step:
        raise _error(HEADER_SIZE, f"{count} int16 values are not a {dims}-D trajectory")
    durations = tuple(ints[dims::step])
    if min(durations) < 0:
        raise _error(HEADER_SIZE, "negative trajectory duration")
    if dims == 2:
        points2 = tuple(zip(ints[0::3], ints[1::3], strict=True))
        return TrajectoryPacket2(**header, points=points2, durations=durations)
    points3 = tuple(zip(ints[0::4], ints[1::4], ints[2::4], strict=True))
    return TrajectoryPacket3(**header, points=points3, durations=durations)


def decode_variable(payload: bytes, base: int = 0) -> tuple[tuple[SyntaxType, Number], ...]:
    """(tag, value) items of a variable-list payload; `base` shifts error offsets."""
    items: list[tuple[SyntaxType, Number]] = []
    offset = 0
    size = len(payload)
    while offset < size:
        tag = payload[offset]
        item = _VARIABLE_ITEMS.get(tag)
        if item is None:
            raise _error(base + offset, f"unknown variable-list type tag {tag}")
        if offset + 1 + item.size > size:
            raise _error(base + offset, f"variable-list item of type {tag} is cut off")
        items.append((_SYNTAX_OF[tag], item.unpack_from(payload, offset + 1)[0]))
        offset += 1 + item.size
    return tuple(items)


# -- encoding --------------------------------------------------------------------------------


def _pack_list(syntax: int, values: Sequence[Number]) -> bytes:
    try:
        return struct.pack(f">{len(values)}{_STRUCT_CODES[syntax]}", *values)
    except struct.error as exc:
        raise ValueError(f"{SyntaxType(syntax).name} value out of range: {exc}") from None


def _payload(packet: SpyglassPacket) -> tuple[int, bytes]:
    """(syntax type, payload bytes) of a packet."""
    match packet:
        case StdPacket():
            return SyntaxType.STD, packet.payload
        case DataPacket():
            if packet.syntax_type not in _STRUCT_CODES:
                raise ValueError(f"a DataPacket cannot have syntax type {packet.syntax_type!r}")
            return packet.syntax_type, _pack_list(packet.syntax_type, packet.values)
        case VariableListPacket():
            out = bytearray()
            for tag, value in packet.items:
                if tag not in _STRUCT_CODES:
                    raise ValueError(f"variable-list tag {tag} is not 1..6")
                out.append(tag)
                out += _pack_list(tag, (value,))
            return SyntaxType.VARIABLE, bytes(out)
        case NeighborhoodPacket():
            return SyntaxType.UINT16_LIST, _pack_list(2, packet.neighbors)
        case NodeLinkPacket():
            return SyntaxType.UINT16_LIST, _pack_list(2, (packet.destination, *packet.values))
        case CoordinatesList2Packet() | CoordinatesList3Packet():
            coords = [v for point in packet.points for v in point]
            return SyntaxType.INT16_LIST, _pack_list(3, coords)
        case TrajectoryPacket2() | TrajectoryPacket3():
            points, durations = packet.points, packet.durations
            if len(points) < 2 or len(durations) != len(points) - 1:
                raise ValueError("a trajectory needs n >= 2 points and n - 1 durations")
            if min(durations) < 0:
                raise ValueError("trajectory durations must be >= 0")
            flat: list[int] = []
            for point, duration in zip(points, durations, strict=False):
                flat += [*point, duration]
            flat += points[-1]
            return SyntaxType.INT16_LIST, _pack_list(3, flat)
    raise TypeError(f"not a SpyGlass packet: {packet!r}")


def encode(packet: SpyglassPacket, *, wisebed: bool = False) -> bytes:
    """The bytes of one packet (with the WISEBED 0x6F prefix if asked)."""
    syntax, payload = _payload(packet)
    total = HEADER_SIZE + len(payload)
    if total > MAX_PACKET_SIZE:
        raise ValueError(f"packet of {total} bytes exceeds the limit of {MAX_PACKET_SIZE}")
    try:
        head = HEADER.pack(
            total - 2,
            VERSION,
            syntax,
            packet.semantic_type,
            packet.sender,
            packet.seconds,
            packet.milliseconds,
            packet.x,
            packet.y,
            packet.z,
        )
    except struct.error as exc:
        raise ValueError(f"header field out of range: {exc}") from None
    prefix = b"\x6f" if wisebed else b""
    return prefix + head + payload


def time_fields(unix_time: float) -> tuple[int, int]:
    """(seconds, milliseconds) header fields for a Unix time."""
    millis = round(unix_time * 1000.0)
    return millis // 1000, millis % 1000


def frame(packets: Iterable[SpyglassPacket]) -> bytes:
    """Packets encoded back to back: the self-delimited stream the TCP transport carries."""
    return b"".join(encode(p) for p in packets)
