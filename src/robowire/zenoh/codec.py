"""robowire's Zenoh payloads: bytes <-> typed frames (pure; no zenoh import).

Every payload starts with a 5-byte header, `b"RWZ"`, the version (1) and the frame type. All
numbers are little-endian.

STATE (type 1): the changed devices of one source, as columns (one message per source per
pull; decoded with one `numpy.frombuffer` per column, never a loop per device):

    f64 receive_time | u32 n (rows) | u16 m (columns) | u32 slot[n]
    then m columns:  u8 flags (bit 0: telemetry) | u8 width (1..4) | u8 len | name (UTF-8)
                     | u8 len | unit (UTF-8) | f64 value[n * width] (row-major)

`slot` is the publisher's row of each device (stable for the publisher's lifetime); the
DEVICES frame says which device a slot is. Vector columns are `position` (3), `orientation`
(4, w x y z; NaN rows: no orientation), `velocity` (3), `geodetic` (3: lat, lon, alt) and
`source_time` (1); telemetry columns have width 1 and a unit. NaN means "absent".

BATCH (type 4): the STATE frames of one tick of a publisher, of one or several sources, in
one message (small frames: one put, one wake-up of each side, for many):

    u16 k | k times: u16 len | source (UTF-8) | u32 size | a STATE payload of size bytes
    (with its own header)

DEVICES (type 2) and LOG (type 3): a JSON object after the header (they are rare, and their
attributes are free-form):

    DEVICES  {"slots": [int], "ids": [str], "kinds": [str], "names": [str],
              "links": [[str]], "attributes": [{...}], "protocol": str (optional)}
    LOG      {"device": str, "text": str, "level": str, "time": float}

`decode` checks every length against what is there before reading it and raises only
`DecodeError("zenoh", offset, reason)`. Decoded columns are read-only views of the payload
(no copy: the world copies them into its columns). `unpack` checks a STATE frame as fully but
reads no column (`Packed`: its slots and column names, what a newer frame would make stale,
known without them), so a frame shed as stale costs only that check; a frame with the
shape and column heads of the last one so checked is checked in one comparison.
"""

from __future__ import annotations

import functools
import itertools
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import orjson

from robowire.errors import DecodeError

PROTOCOL = "zenoh"
MAGIC = b"RWZ"
VERSION = 1
HEADER = struct.Struct("<3sBB")
STATE_HEAD = struct.Struct("<dIH")
MAX_ROWS = 1 << 24
MAX_COLUMNS = 4096
VECTOR_WIDTHS = {"position": 3, "orientation": 4, "velocity": 3, "geodetic": 3, "source_time": 1}

FloatArray = npt.NDArray[np.float64]
SlotArray = npt.NDArray[np.uint32]


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """One column of a STATE frame: (n,) for width 1, else (n, width)."""

    values: FloatArray
    unit: str = ""
    telemetry: bool = False

    @property
    def width(self) -> int:
        return 1 if self.values.ndim == 1 else int(self.values.shape[1])


@dataclass(frozen=True, slots=True, kw_only=True)
class State:
    """The latest values of some devices of one source."""

    TYPE: ClassVar[int] = 1
    receive_time: float
    slots: SlotArray
    columns: dict[str, Column] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Devices:
    """Who the publisher's slots are: one entry per slot."""

    TYPE: ClassVar[int] = 2
    slots: tuple[int, ...]
    ids: tuple[str, ...]
    kinds: tuple[str, ...]
    names: tuple[str, ...]
    links: tuple[tuple[str, ...], ...]
    attributes: tuple[dict[str, Any], ...]
    protocol: str | None = None  # whose native names the ids are (`SourceTable.protocol`)


@dataclass(frozen=True, slots=True, kw_only=True)
class Log:
    """One log event of a source."""

    TYPE: ClassVar[int] = 3
    device: str
    text: str
    level: str
    time: float


@dataclass(frozen=True, slots=True)
class Batch:
    """STATE frames of one tick, each with the name of its source, in order."""

    TYPE: ClassVar[int] = 4
    states: tuple[tuple[str, State], ...]


Frame = State | Devices | Log | Batch
BATCH_HEAD = struct.Struct("<H")
ENTRY_SIZE = struct.Struct("<I")
MAX_BATCH = 0xFFFF  # frames in one batch


def _header(kind: int) -> bytes:
    return HEADER.pack(MAGIC, VERSION, kind)


def _short(text: str, what: str) -> bytes:
    data = text.encode()
    if len(data) > 255:
        raise ValueError(f"{what} {text[:40]!r}… is longer than 255 bytes")
    return bytes([len(data)]) + data


F8 = np.dtype("<f8")
U4 = np.dtype("<u4")


def _raw(values: npt.NDArray[Any], dtype: np.dtype[Any]) -> memoryview:
    """The memory of an array in the wire's dtype, without a copy when it has it already."""
    if values.dtype != dtype or not values.flags.c_contiguous:
        values = np.ascontiguousarray(values, dtype=dtype)
    return values.data


@functools.lru_cache(maxsize=4096)
def _column_head(name: str, unit: str, telemetry: bool, width: int) -> bytes:
    """flags | width | name | unit (the same few heads again and again: made once each)."""
    head = bytes([int(telemetry), width])
    return head + _short(name, "column name") + _short(unit, "unit")


def encode_batch(entries: Sequence[tuple[str, bytes]]) -> bytes:
    """The BATCH payload of STATE payloads, each with its source's name (at most
    `MAX_BATCH`)."""
    if len(entries) > MAX_BATCH:
        raise ValueError(f"{len(entries)} frames is more than a batch holds")
    parts = [_header(Batch.TYPE), BATCH_HEAD.pack(len(entries))]
    for source, payload in entries:
        name = source.encode()
        if len(name) > 0xFFFF:
            raise ValueError(f"source {source[:40]!r}… is longer than 65535 bytes")
        parts += [BATCH_HEAD.pack(len(name)), name, ENTRY_SIZE.pack(len(payload)), payload]
    return b"".join(parts)


def encode(frame: Frame) -> bytes:
    """The payload of a frame."""
    match frame:
        case Batch():
            return encode_batch([(source, encode(state)) for source, state in frame.states])
        case State():
            n = len(frame.slots)
            parts: list[bytes | memoryview] = [
                _header(State.TYPE),
                STATE_HEAD.pack(frame.receive_time, n, len(frame.columns)),
                _raw(frame.slots, U4),
            ]
            for name, column in frame.columns.items():
                if len(column.values) != n:
                    raise ValueError(f"column {name!r} has {len(column.values)} rows, not {n}")
                parts += [
                    _column_head(name, column.unit, column.telemetry, column.width),
                    _raw(column.values, F8),
                ]
            return b"".join(parts)  # the one copy of the columns
        case Devices():
            body = {
                "slots": list(frame.slots),
                "ids": list(frame.ids),
                "kinds": list(frame.kinds),
                "names": list(frame.names),
                "links": [list(x) for x in frame.links],
                "attributes": list(frame.attributes),
            }
            if frame.protocol is not None:
                body["protocol"] = frame.protocol
            return _header(Devices.TYPE) + orjson.dumps(body, default=str)
        case Log():
            body = {"device": frame.device, "text": frame.text, "level": frame.level}
            return _header(Log.TYPE) + orjson.dumps({**body, "time": frame.time})


def decode(data: bytes) -> Frame:
    """The frame of a payload, or DecodeError."""
    frame = unpack(data)
    if isinstance(frame, Packed):
        return frame.state()
    if isinstance(frame, Batched):
        return Batch(tuple((source, packed.state()) for source, packed in frame.states))
    return frame


def unpack(data: bytes) -> Packed | Devices | Log | Batched:
    """As `decode`, but a STATE frame is checked in full and its columns are not read yet
    (`Packed`), or DecodeError."""
    if len(data) < HEADER.size:
        raise DecodeError(PROTOCOL, 0, f"{len(data)} bytes is shorter than the header")
    magic, version, kind = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise DecodeError(PROTOCOL, 0, "not a robowire payload (no RWZ magic)")
    if version != VERSION:
        raise DecodeError(PROTOCOL, 3, f"unknown version {version}")
    if kind == State.TYPE:
        return _scan_state(data)
    if kind == Batch.TYPE:
        return _scan_batch(data)
    if kind in (Devices.TYPE, Log.TYPE):
        try:
            body = orjson.loads(data[HEADER.size :])
        except orjson.JSONDecodeError as exc:
            raise DecodeError(PROTOCOL, HEADER.size + exc.pos, f"bad JSON: {exc.msg}") from None
        if not isinstance(body, dict):
            raise DecodeError(PROTOCOL, HEADER.size, "the JSON body is not an object")
        return _devices(body) if kind == Devices.TYPE else _log(body)
    raise DecodeError(PROTOCOL, 4, f"unknown frame type {kind}")


def is_state(data: bytes) -> bool:
    """Whether a payload says it is a STATE or BATCH frame, latest state (its type byte;
    nothing else is checked)."""
    return len(data) > 4 and data[4] in (State.TYPE, Batch.TYPE)


SLOTS_AT = HEADER.size + STATE_HEAD.size  # where a STATE frame's slots start


@dataclass(frozen=True, slots=True)
class Packed:
    """A STATE payload checked in full (`unpack`) whose columns are not read yet: what it
    covers, its slots (`slots`, their bytes) and its columns (`names`), is known without
    them; `state()` reads them (views of the payload, no copy). A frame that a newer one
    made stale before it was written is never read."""

    payload: bytes
    rows: int
    slots: bytes
    names: tuple[str, ...]
    heads: tuple[tuple[str, bool, int, int], ...]  # unit, telemetry, width, offset per name

    def state(self) -> State:
        n, payload = self.rows, self.payload
        columns: dict[str, Column] = {}
        for name, (unit, telemetry, width, at) in zip(self.names, self.heads, strict=True):
            values = np.frombuffer(payload, dtype=F8, count=n * width, offset=at)
            columns[name] = Column(
                values=values if width == 1 else values.reshape(n, width),
                unit=unit,
                telemetry=telemetry,
            )
        (receive_time,) = struct.unpack_from("<d", payload, HEADER.size)
        slots = np.frombuffer(payload, dtype=U4, count=n, offset=SLOTS_AT)
        return State(receive_time=receive_time, slots=slots, columns=columns)


@dataclass(frozen=True, slots=True)
class _Layout:
    """The column heads of a STATE frame seen before: where their bytes are, those bytes, and
    what they say (`Packed.names`, `Packed.heads`)."""

    where: npt.NDArray[np.intp]
    heads: bytes
    names: tuple[str, ...]
    columns: tuple[tuple[str, bool, int, int], ...]


_layouts: dict[tuple[int, int, int], _Layout] = {}  # (rows, columns, size) -> the last seen


def _scan_state(data: bytes) -> Packed:
    """A STATE frame checked in full. A publisher sends the same columns frame after frame:
    one whose rows, column count and size are those of the last frame so scanned, and whose
    column heads are byte for byte the same at the same places, is that frame's layout
    (everything checked depends on those bytes alone), compared in one step."""
    at = HEADER.size
    if len(data) < at + STATE_HEAD.size:
        raise DecodeError(PROTOCOL, at, "STATE frame cut before its counts")
    _, n, m = STATE_HEAD.unpack_from(data, at)
    at += STATE_HEAD.size
    if n > MAX_ROWS or m > MAX_COLUMNS:
        raise DecodeError(PROTOCOL, at - 6, f"{n} rows x {m} columns is over the limit")
    if len(data) < at + 4 * n:
        raise DecodeError(PROTOCOL, at, f"STATE frame cut in its {n} slots")
    slots = data[at : at + 4 * n]
    at += 4 * n
    shape = (n, m, len(data))
    known = _layouts.get(shape)
    if known is not None and np.frombuffer(data, np.uint8)[known.where].tobytes() == known.heads:
        return Packed(data, n, slots, known.names, known.columns)
    heads: dict[str, tuple[str, bool, int, int]] = {}
    spans: list[npt.NDArray[np.intp]] = []
    for _ in range(m):
        start = at
        name, unit, telemetry, width, at = _column_at(data, at)
        spans.append(np.arange(start, at, dtype=np.intp))
        size = 8 * n * width
        if len(data) < at + size:
            raise DecodeError(PROTOCOL, at, f"STATE frame cut in column {name!r}")
        if name in heads:
            raise DecodeError(PROTOCOL, start, f"column {name!r} twice")
        heads[name] = (unit, telemetry, width, at)
        at += size
    if at != len(data):
        raise DecodeError(PROTOCOL, at, f"{len(data) - at} bytes after the last column")
    names, columns = tuple(heads), tuple(heads.values())
    where = np.concatenate(spans) if spans else np.empty(0, dtype=np.intp)
    if len(_layouts) >= 4096:  # made-up shapes, frame after frame: start again
        _layouts.clear()
    heads_bytes = np.frombuffer(data, np.uint8)[where].tobytes()
    _layouts[shape] = _Layout(where, heads_bytes, names, columns)
    return Packed(data, n, slots, names, columns)


@dataclass(frozen=True, slots=True)
class Batched:
    """A BATCH payload checked in full (`unpack`): its STATE frames, each `Packed`, with the
    name of its source."""

    states: tuple[tuple[str, Packed], ...]


def _scan_batch(data: bytes) -> Batched:
    at = HEADER.size
    if len(data) < at + BATCH_HEAD.size:
        raise DecodeError(PROTOCOL, at, "BATCH frame cut before its count")
    (k,) = BATCH_HEAD.unpack_from(data, at)
    at += BATCH_HEAD.size
    states = []
    for _ in range(k):
        if len(data) < at + BATCH_HEAD.size:
            raise DecodeError(PROTOCOL, at, "BATCH frame cut in a source name")
        (length,) = BATCH_HEAD.unpack_from(data, at)
        start = at + BATCH_HEAD.size
        at = start + length + ENTRY_SIZE.size
        if len(data) < at:
            raise DecodeError(PROTOCOL, start, "BATCH frame cut in a source name")
        try:
            source = data[start : start + length].decode()
        except UnicodeDecodeError:
            raise DecodeError(PROTOCOL, start, "source name is not UTF-8") from None
        (size,) = ENTRY_SIZE.unpack_from(data, at - ENTRY_SIZE.size)
        if len(data) < at + size:
            raise DecodeError(PROTOCOL, at, f"BATCH frame cut in the STATE frame of {source!r}")
        payload = data[at : at + size]
        if not (len(payload) > 4 and payload[:5] == _header(State.TYPE)):
            raise DecodeError(PROTOCOL, at, "a BATCH entry is not a STATE frame")
        try:
            states.append((source, _scan_state(payload)))
        except DecodeError as exc:
            raise exc.shifted(at) from None
        at += size
    if at != len(data):
        raise DecodeError(PROTOCOL, at, f"{len(data) - at} bytes after the last STATE frame")
    return Batched(tuple(states))


ColumnHead = tuple[str, str, bool, int]  # name, unit, telemetry, width
_heads: dict[bytes, ColumnHead] = {}  # the column heads seen (the same few, frame after frame)


def _column_at(data: bytes, at: int) -> tuple[str, str, bool, int, int]:
    """The column head at `at` (name, unit, telemetry, width) and where its values start;
    a head seen before is looked up, not parsed and checked again."""
    if len(data) >= at + 4:
        units = at + 3 + data[at + 2]
        end = units + 1 + data[units] if units < len(data) else units
        known = _heads.get(data[at:end])
        if known is not None:
            return (*known, end)
    head = _parse_head(data, at)
    name, unit, telemetry, width, end = head
    if len(_heads) >= 4096:  # made-up names, frame after frame: start again
        _heads.clear()
    _heads[data[at:end]] = (name, unit, telemetry, width)
    return head


def _parse_head(data: bytes, at: int) -> tuple[str, str, bool, int, int]:
    start = at
    if len(data) < at + 3:
        raise DecodeError(PROTOCOL, at, "STATE frame cut in a column header")
    flags, width = data[at], data[at + 1]
    if not 1 <= width <= 4 or flags > 1:
        raise DecodeError(PROTOCOL, at, f"bad column flags {flags} or width {width}")
    name, at = _text(data, at + 2, "column name")
    unit, at = _text(data, at, "unit")
    telemetry = bool(flags)
    if not telemetry and VECTOR_WIDTHS.get(name) != width:
        raise DecodeError(PROTOCOL, start, f"unknown column {name!r} of width {width}")
    if telemetry and width != 1:
        raise DecodeError(PROTOCOL, start, f"telemetry {name!r} has width {width}")
    return name, unit, telemetry, width, at


def _text(data: bytes, at: int, what: str) -> tuple[str, int]:
    if len(data) < at + 1 or len(data) < at + 1 + data[at]:
        raise DecodeError(PROTOCOL, at, f"STATE frame cut in a {what}")
    end = at + 1 + data[at]
    try:
        return data[at + 1 : end].decode(), end
    except UnicodeDecodeError:
        raise DecodeError(PROTOCOL, at + 1, f"{what} is not UTF-8") from None


def _only(values: Iterable[Any], kind: type) -> bool:
    """Whether every value is of exactly that type (one pass in C: a DEVICES frame of a
    thousand nodes has tens of thousands of link ids)."""
    return set(map(type, values)) <= {kind}


def _strings(body: dict[str, Any], name: str) -> tuple[str, ...]:
    value = body.get(name)
    if not isinstance(value, list) or not _only(value, str):
        raise DecodeError(PROTOCOL, HEADER.size, f"DEVICES {name!r} is not a list of strings")
    return tuple(value)


def _devices(body: dict[str, Any]) -> Devices:
    slots = body.get("slots")
    if (
        not isinstance(slots, list)
        or not _only(slots, int)
        or not 0 <= min(slots, default=0) <= max(slots, default=0) < MAX_ROWS
    ):
        raise DecodeError(PROTOCOL, HEADER.size, "DEVICES 'slots' is not a list of slot numbers")
    links = body.get("links")
    if (
        not isinstance(links, list)
        or not _only(links, list)
        or not _only(itertools.chain.from_iterable(links), str)
    ):
        raise DecodeError(PROTOCOL, HEADER.size, "DEVICES 'links' is not a list of id lists")
    attributes = body.get("attributes")
    if not isinstance(attributes, list) or not _only(attributes, dict):
        raise DecodeError(PROTOCOL, HEADER.size, "DEVICES 'attributes' is not a list of objects")
    protocol = body.get("protocol")
    if protocol is not None and not isinstance(protocol, str):
        raise DecodeError(PROTOCOL, HEADER.size, "DEVICES 'protocol' is not a string")
    frame = Devices(
        slots=tuple(slots),
        ids=_strings(body, "ids"),
        kinds=_strings(body, "kinds"),
        names=_strings(body, "names"),
        links=tuple(map(tuple, links)),
        attributes=tuple(attributes),
        protocol=protocol,
    )
    columns = (frame.ids, frame.kinds, frame.names, frame.links, frame.attributes)
    if any(len(c) != len(slots) for c in columns):
        raise DecodeError(PROTOCOL, HEADER.size, "DEVICES lists differ in length")
    return frame


def _log(body: dict[str, Any]) -> Log:
    texts = [body.get(k) for k in ("device", "text", "level")]
    time = body.get("time")
    if not all(isinstance(t, str) for t in texts) or not isinstance(time, int | float):
        raise DecodeError(PROTOCOL, HEADER.size, "LOG needs device, text, level and time")
    device, text, level = (str(t) for t in texts)
    return Log(device=device, text=text, level=level, time=float(time))
