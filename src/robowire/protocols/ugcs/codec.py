"""UgCS VSM framing and values: `<LEB128 length><Vsm_message>` both ways; Field_value <-> Python.

The wire is a stream of frames, each an unsigned LEB128 length (7 bits a byte, least significant
group first, 0x80 = more) followed by that many bytes of one serialized `Vsm_message` (the only
top-level message; schema in `proto/`). There is no other header, magic or checksum.

Rules (ugcs.md 1.2, the SDK's reader):
* a zero-length frame is skipped;
* a length over `MAX_FRAME` (1,000,000) bytes, or a length varint longer than 10 bytes or over
  2**64 - 1, is a `DecodeError` (the SDK closes the connection);
* a payload protobuf cannot parse, including one missing a proto2 *required* field, is a
  `DecodeError` (the SDK closes the connection on it too).

The protobuf runtime does all message encoding and decoding; this module only frames. `encode`
refuses a message whose required fields are not all set (the SDK's peers would close on it).

Values: `Field_value` carries one of several members; `read_value` gives the Python value
(None for `META_VALUE_NA` or nothing set) and `write_value` fills one from a Python value in the
member the SDK uses for a field's semantic (`ValueKind`, `kind_of_semantic`).

Size: one module over 600 lines because it is one thing, the codec of one wire format: the
framing, the columnar Device_status scan (`scan_telemetry`, in named steps) that reads the same
bytes protobuf would, and the values both read.
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, TypeAlias

import numpy as np
from google.protobuf.message import DecodeError as _ProtobufDecodeError
from google.protobuf.message import EncodeError as _ProtobufEncodeError

from robowire.errors import DecodeError
from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs
from robowire.protocols.ugcs.proto import ucs_vsm_pb2 as pb
from robowire.protocols.ugcs.proto.frames_pb2 import Frames as _Frames

__all__ = [
    "DEFAULT_PORT",
    "MAX_FRAME",
    "MAX_VARINT_BYTES",
    "NAME",
    "FrameReader",
    "Value",
    "ValueKind",
    "decode_frames",
    "decode_message",
    "defs",
    "encode",
    "encode_many",
    "frame",
    "kind_of_semantic",
    "leb128",
    "pb",
    "read_value",
    "split_frames",
    "write_value",
]

NAME = "ugcs"
DEFAULT_PORT = 5556
"""The SDK sample's and the ArduPilot VSM's `ucs.local_listening_port` (a convention)."""

MAX_FRAME = 1_000_000
"""Largest frame payload the SDK accepts (`PROTO_MAX_MESSAGE_LEN`)."""

MAX_VARINT_BYTES = 10
"""A LEB128 of a 64-bit number takes at most 10 bytes."""

_U64_LIMIT = 1 << 64

Value: TypeAlias = "float | int | str | bool | bytes | list[Value] | None"
"""A Field_value as Python: None = not available (META_VALUE_NA, or no member set)."""


# ---------------------------------------------------------------------------------------------
# encoding


def leb128(n: int) -> bytes:
    """The unsigned LEB128 encoding of `n` (0 <= n < 2**64)."""
    if n < 0x80:
        if n < 0:
            raise ValueError(f"ugcs: LEB128 of a negative number {n}")
        return bytes((n,))
    if n >= _U64_LIMIT:
        raise ValueError(f"ugcs: LEB128 of {n} does not fit 64 bits")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def frame(payload: bytes) -> bytes:
    """One frame: the LEB128 length of `payload`, then `payload`."""
    size = len(payload)
    if size > MAX_FRAME:
        raise ValueError(f"ugcs: a {size}-byte message is over the {MAX_FRAME}-byte frame limit")
    return leb128(size) + payload


def encode(msg: pb.Vsm_message) -> bytes:
    """`msg` as one frame. ValueError if a required field is unset (protobuf checks every
    nested message), or if the frame is too big."""
    try:
        payload = msg.SerializeToString()
    except _ProtobufEncodeError as exc:
        raise ValueError(f"ugcs: cannot encode: {exc}") from None
    return frame(payload)


def encode_many(msgs: Sequence[pb.Vsm_message]) -> bytes:
    """Several messages as consecutive frames (one write)."""
    return b"".join([encode(m) for m in msgs])


# ---------------------------------------------------------------------------------------------
# decoding


def _error(offset: int, reason: str) -> DecodeError:
    return DecodeError(NAME, offset, reason)


def decode_message(payload: bytes, offset: int = 0) -> pb.Vsm_message:
    """One frame's payload as a `Vsm_message`; DecodeError if protobuf cannot parse it
    (including a missing required field). `offset` is where the payload starts, for the error."""
    msg = pb.Vsm_message()
    try:
        msg.ParseFromString(payload)
    except _ProtobufDecodeError as exc:
        raise _error(offset, f"unparsable Vsm_message ({len(payload)} bytes): {exc}") from None
    if not msg.IsInitialized():
        raise _error(offset, f"Vsm_message ({len(payload)} bytes) without its required fields")
    return msg


def _read_length(buf: bytes | bytearray, pos: int, end: int) -> tuple[int, int] | None:
    """The frame length starting at `pos` and the position after it; None if the varint is not
    complete before `end`. DecodeError if it is too long, over 2**64 - 1 or over MAX_FRAME."""
    shift = 0
    value = 0
    start = pos
    while pos < end:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value >= _U64_LIMIT:
                raise _error(start, "frame length varint over 2**64 - 1")
            if value > MAX_FRAME:
                raise _error(start, f"frame length {value} over the {MAX_FRAME}-byte limit")
            return value, pos
        shift += 7
        if pos - start >= MAX_VARINT_BYTES:
            raise _error(start, f"frame length varint longer than {MAX_VARINT_BYTES} bytes")
    return None


def split_frames(buf: bytes, final: bool = True) -> Iterator[tuple[int, bytes]]:
    """(offset of the payload, payload) of every non-empty frame in `buf`, in order.

    With `final` (a whole capture), a frame cut short at the end is a DecodeError; without it
    the iteration just stops there. Payloads are not parsed (see `decode_message`)."""
    end = len(buf)
    pos = 0
    while pos < end:
        found = _read_length(buf, pos, end)
        if found is None:
            if final:
                raise _error(pos, "truncated frame length varint")
            return
        size, start = found
        stop = start + size
        if stop > end:
            if final:
                raise _error(pos, f"truncated frame: {size} bytes announced, {end - start} left")
            return
        pos = stop
        if size:
            yield start, buf[start:stop]


def decode_frames(buf: bytes) -> list[pb.Vsm_message]:
    """Every message of a buffer of whole frames; DecodeError on the first bad one, or if the
    buffer ends inside a frame."""
    reader = FrameReader()
    found, error = reader.feed(buf)
    if error is not None:
        raise error
    msgs = list(found)
    if reader.pending:
        tail = len(buf) - reader.pending
        try:
            list(split_frames(buf[tail:]))
        except DecodeError as exc:  # always: the tail is a frame cut short
            raise exc.shifted(tail) from None
    return msgs


class FrameReader:
    """The incremental frame reader of one connection: bytes in, whole messages out.

    `feed(data)` returns the messages the bytes complete and, if a bad frame was met, the
    DecodeError (its offset counts from the start of the stream). After an error the stream
    cannot be resynchronised: the reader is `failed` and ignores further bytes (close it).
    Every length is checked before any payload is buffered.
    """

    __slots__ = ("_buf", "_consumed", "_split", "error", "frames")

    def __init__(self) -> None:
        self._buf = b""
        self._consumed = 0  # stream offset of _buf[0]
        self._split = 0  # bytes the last `split` took whole
        self.error: DecodeError | None = None
        self.frames = 0

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def pending(self) -> int:
        """Bytes held waiting for the rest of their frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> tuple[Sequence[pb.Vsm_message], DecodeError | None]:
        """The messages `data` completes (a sequence to iterate once; it holds them all in one
        arena) and the DecodeError that stopped the stream, if one did."""
        buf, frames, error = self.split(data, slices=True)
        out, bad = parse_frames(frames, buf)
        return out, self.failing(error or bad, len(out))

    def split(self, data: bytes, slices: bool = False) -> tuple[bytes, Any, DecodeError | None]:
        """The whole frames `data` completes, unparsed: the buffer they are in and their
        spans in it, flat (an `array("q")` `[start, stop, start, stop, ...]`, length prefix
        included: numpy reads it without a copy), or with `slices` the frames themselves
        after an empty start (what `parse_frames` takes); and the DecodeError of a bad
        length, if one stopped the stream. Call `failing` with what the frames gave once
        they are parsed."""
        if self.error is not None:
            return b"", [b""] if slices else array("q"), None
        buf = self._buf + data if self._buf else data
        end = len(buf)
        pos = 0
        spans: Any = [b""] if slices else array("q")  # whole non-empty frames, prefix included
        add = spans.append
        error: DecodeError | None = None
        while pos < end:
            # fast path: one- and two-byte lengths (every frame under 16 KiB)
            b0 = buf[pos]
            if b0 < 0x80:
                if not b0:  # a zero-length frame: skipped
                    pos += 1
                    continue
                stop = pos + 1 + b0
            elif pos + 1 < end and buf[pos + 1] < 0x80:
                size = (b0 & 0x7F) | (buf[pos + 1] << 7)
                if not size:  # 0x80 0x00: a zero length, spelled long; skipped like 0x00
                    pos += 2  # (found by fuzzing: kept, it misaligned the slow path below)
                    continue
                stop = pos + 2 + size
            else:
                try:
                    found = _read_length(buf, pos, end)
                except DecodeError as exc:
                    error = exc
                    break
                if found is None:
                    break
                size, start = found
                stop = start + size
                if not size:
                    pos = stop
                    continue
            if stop > end:
                break
            if slices:
                add(buf[pos:stop])
            else:
                add(pos)
                add(stop)
            pos = stop
        self._buf = buf[pos:] if pos < end else b""
        self._split = pos
        return buf, spans, error

    def failing(self, error: DecodeError | None, frames: int) -> DecodeError | None:
        """After `split`: count the `frames` that parsed; a DecodeError (a bad length, or the
        first frame that did not parse) fails the reader, its offset from the stream's start."""
        self.frames += frames
        if error is None:
            self._consumed += self._split
            return None
        self.error = error.shifted(self._consumed)  # its offset counts from the buffer's start
        self._buf = b""
        return self.error


def frames_of(buf: bytes, spans: Sequence[int]) -> list[bytes]:
    """The frames `spans` (flat start, stop pairs) cut from `buf`, after an empty start (what
    `parse_frames` takes)."""
    bounds = iter(spans)
    return [b"", *(buf[start:stop] for start, stop in zip(bounds, bounds))]  # noqa: B905


def parse_frames(
    frames: list[bytes], buf: bytes
) -> tuple[Sequence[pb.Vsm_message], DecodeError | None]:
    """Parse whole frames (prefix included; `frames[0]` is an empty start) in one runtime
    call: a 0x0a tag before each frame makes the run the encoding of `Frames` (field 1,
    repeated Vsm_message). Serializing the result checks every required field in C (the upb
    parser does not check them; its `IsInitialized` walk costs more than the parse). On any
    failure, frame by frame, to keep the good messages before the bad one and say which it
    is. The messages stay in the batch's container (iterating it makes each one's Python
    object, as parsing one would)."""
    if len(frames) == 1:
        return (), None
    joined = b"\n".join(frames)  # frames[0] is b"": a tag before every frame
    try:
        batch = _Frames.FromString(joined)
        batch.SerializeToString()
    except (_ProtobufDecodeError, _ProtobufEncodeError):
        pass
    else:
        return batch.messages, None
    out: list[pb.Vsm_message] = []
    for _, (offset, payload) in zip(frames[1:], split_frames(buf, final=False), strict=False):
        try:
            out.append(decode_message(payload, offset))
        except DecodeError as exc:
            return out, exc
    return out, None


# ---------------------------------------------------------------------------------------------
# telemetry as columns


class Kind(enum.IntEnum):
    """What a held or scanned telemetry value is (its Field_value member)."""

    NONE = 0  # META_VALUE_NA, or no member: not available
    INT = 1  # int_value (sint64)
    FLOAT = 2  # float_value
    DOUBLE = 3  # double_value
    BOOL = 4  # bool_value
    STRING = 5  # string_value
    BYTES = 6  # bytes_value
    LIST = 7  # list_value (never scanned: such a frame is left to protobuf)


def column_value(kind: int, integer: Any, number: Any, text: Value) -> Value:
    """One value of telemetry columns (`Scan`, `held.Held`, `events.TelemetryColumns`) as
    Python: `integer` for ints and bools, `number` for floats, `text` for strings, bytes and
    lists; None for NA (and for kind -1, a held field that has said nothing yet)."""
    if kind == Kind.INT:
        return int(integer)
    if kind == Kind.BOOL:
        return bool(integer)
    if kind in (Kind.FLOAT, Kind.DOUBLE):
        return float(number)
    return text if kind >= Kind.STRING else None


class Scan(NamedTuple):
    """What `scan_telemetry` read. Per frame: whether it was read (`plain`), its device id.
    Per telemetry value of those frames, in stream order: its frame, field id,
    ms_since_epoch, `Kind`, value (`number`: as a double, NaN when not a number; `integer`:
    the exact int or bool, else 0; a string or bytes value is `buf[start:start + size]`).
    Per command availability of those frames, in order: its frame, command id, is_available,
    is_enabled."""

    plain: np.ndarray
    device: np.ndarray
    frame: np.ndarray
    field: np.ndarray
    ms: np.ndarray
    kind: np.ndarray
    number: np.ndarray
    integer: np.ndarray
    start: np.ndarray
    size: np.ndarray
    command_frame: np.ndarray
    command: np.ndarray
    available: np.ndarray
    enabled: np.ndarray


_OFFSETS = np.arange(10)
_SHIFTS = (7 * _OFFSETS).astype(np.uint64)
_U32 = 1 << 32
_TELEMETRY, _AVAILABILITY = 0x12, 0x1A  # Device_status fields 2 and 3, length-delimited
_NONE, _INT, _FLOAT, _DOUBLE, _BOOL, _STRING, _BYTES = (int(k) for k in list(Kind)[:7])
_KIND_OF_TAG = np.full(256, -1, np.int8)  # a Field_value member's key -> its Kind
_SIZE_OF_TAG = np.full(256, -1, np.intp)  # -> the value's size, where the key sets it
_VARINT_TAG = np.zeros(256, bool)
for _tag, _kind, _size in (
    (0, _NONE, 0),  # an empty Field_value
    (0x08, _NONE, -1),  # meta_value: NA (a varint)
    (0x10, _INT, -1),
    (0x1D, _FLOAT, 5),
    (0x21, _DOUBLE, 9),
    (0x2A, _STRING, -1),
    (0x30, _BOOL, -1),
    (0x42, _BYTES, -1),
):
    _KIND_OF_TAG[_tag], _SIZE_OF_TAG[_tag] = _kind, _size
    _VARINT_TAG[_tag] = _tag in (0x08, 0x10, 0x30)
_WALK = 150  # frames whose records are followed in Python once no more are left
_MISSES = 4  # layouts that fitted no other frame of their size before `_walk` stops trying


def _u64(value: int) -> np.uint64:
    return np.uint64(value)


_HIGH, _LOW7, _ONE = _u64(0x8080808080808080), _u64(0x7F7F7F7F7F7F7F7F), _u64(1)
_PACK = (  # (keep, move, shift): 7-bit groups of 8 bytes packed into 56 bits in 3 steps
    (_u64(0x007F007F007F007F), _u64(0x7F007F007F007F00), _u64(1)),
    (_u64(0x00003FFF00003FFF), _u64(0x3FFF00003FFF0000), _u64(2)),
    (_u64(0x000000000FFFFFFF), _u64(0x0FFFFFFF00000000), _u64(4)),
)


def _unaligned(b: np.ndarray, dtype: str) -> np.ndarray:
    """`b` (bytes) as an array of `dtype` starting at every byte: element i is the value
    whose bytes start at b[i]."""
    size = np.dtype(dtype).itemsize
    return np.ndarray((len(b) - size + 1,), dtype, b, 0, (1,))


def _varints(b: np.ndarray, at: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The varints starting at each of `at` (at most `limit` bytes; `b` padded past its end
    by at least 16): their values (uint64) and lengths (0: none within `limit`). The 8 bytes
    at each are one little-endian word (an unaligned view of `b`), whose first byte without
    its top bit ends the varint, and whose 7-bit groups are packed with shifts: a few array
    operations, however long the varints (a 9- or 10-byte one a byte at a time)."""
    first = b[at]
    if not (first >= 0x80).any():  # all one byte long (lengths, booleans, small ids)
        return first.astype(np.uint64), np.ones(len(at), np.intp)
    words = _unaligned(b, "<u8")[at]
    ends = ~words & _HIGH  # the top bit of each byte that ends a varint
    last = ends & (~ends + _ONE)  # the first of them (0: none in these 8 bytes)
    mask = last | (last - _ONE)  # the varint's bytes (all 8 when none ended)
    length = np.bitwise_count(mask).astype(np.intp) >> 3
    value = words & mask & _LOW7
    for keep, move, shift in _PACK:
        value = (value & keep) | ((value & move) >> shift)
    length[length > limit] = 0
    longer = np.flatnonzero(ends == 0)
    if len(longer):  # no end in 8 bytes: longer than 8, or none at all
        length[longer] = 0
        if limit > 8:
            value[longer], length[longer] = _bytewise(b, at[longer], limit)
    return value, length


def _bytewise(b: np.ndarray, at: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """`_varints`, a byte at a time (for varints longer than 8 bytes)."""
    byte = b[at]
    value = (byte & 0x7F).astype(np.uint64)
    length = np.ones(len(at), np.intp)
    going = np.flatnonzero(byte >= 0x80)
    for k in range(1, limit):
        if not len(going):
            return value, length
        byte = b[at[going] + k]
        value[going] |= (byte & 0x7F).astype(np.uint64) << _SHIFTS[k]
        length[going] += 1
        going = going[byte >= 0x80]
    length[going] = 0  # still going after `limit` bytes
    return value, length


def _zigzag(value: np.ndarray) -> np.ndarray:
    half = (value >> np.uint64(1)).astype(np.int64)
    sign = (value & np.uint64(1)).astype(np.int64)
    out: np.ndarray = half ^ -sign
    return out


def _optional_varint(
    b: np.ndarray, at: np.ndarray, stop: np.ndarray, key: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An optional varint field `key` at each of `at` (its message ends at `stop`): its value
    (0 if absent), where the next field starts, and whether it was well formed."""
    present = (at < stop) & (b[at] == key)
    value, size = _varints(b, at + 1, 10)
    value = np.where(present, value, np.uint64(0))
    return value, np.where(present, at + 1 + size, at), ~present | (size > 0)


def scan_telemetry(buf: bytes, spans: array[int]) -> Scan:
    """Read the frames `spans` (flat start, stop pairs in `buf`, length prefix included) that
    are a Device_status, as columns, with numpy: no Python object per frame or value. A frame
    is read (`plain`) only in the layout the SDK writes: `device_id`, then `device_status`
    holding only `telemetry_fields` (each `field_id`, `ms_since_epoch`, `value` in that
    order, the value empty or one member: NA, int, float, double, bool, or an ASCII string or
    bytes) and `command_availability` (`id`, then `is_available`, `is_enabled` if set), every
    length one byte. Any other frame (lists, status messages, other messages, unknown or
    repeated fields, anything out of order) is left to protobuf, which reads it the same.

    The steps: each frame's envelope (`_envelopes`), the chain of its records (`_records`),
    the command availabilities (`_availabilities`), the telemetry fields (`_fields`) and their
    values (`_values`). Each step clears `ok` for a frame it cannot read."""
    b = np.concatenate((np.frombuffer(buf, np.uint8), np.zeros(32, np.uint8)))
    ok, device, first, stops = _envelopes(b, spans)
    record, frame = _records(buf, b, ok, first, stops)
    body, stop = record + 2, record + 2 + b[record + 1]
    commands = b[record] == _AVAILABILITY
    c_frame, command, available, enabled = _availabilities(
        b, ok, body[commands], stop[commands], frame[commands]
    )
    frame, field, ms, kind, member, varint, start, text_size = _fields(
        buf, b, ok, body[~commands], stop[~commands], frame[~commands]
    )
    number, integer = _values(b, kind, member, varint)
    keep = ok[c_frame]
    return Scan(
        ok, device, frame, field, ms, kind, number, integer, start, text_size,
        c_frame[keep], command[keep].astype(np.int64), available[keep] != 0, enabled[keep] != 0,
    )  # fmt: skip


def _envelopes(b: np.ndarray, spans: array[int]) -> tuple[np.ndarray, ...]:
    """Each frame's `device_id` and its `device_status` (the only two fields, in that order):
    (ok, device, where the status's records start, where the frame stops)."""
    n = len(spans) // 2
    bounds = np.frombuffer(spans, np.int64).astype(np.intp).reshape(n, 2)
    starts, stops = bounds[:, 0], bounds[:, 1]
    _, prefix = _varints(b, starts, 3)
    payload = starts + prefix
    device, size = _varints(b, payload + 1, 5)
    status = payload + 1 + size
    ok = (b[payload] == 0x08) & (size > 0) & (device < _U32) & (b[status] == 0x4A)
    length, size = _varints(b, status + 1, 3)
    first = status + 1 + size
    ok &= (size > 0) & (first + length.astype(np.intp) == stops)
    return ok, device, first, stops


def _records(
    buf: bytes, b: np.ndarray, ok: np.ndarray, first: np.ndarray, stops: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The records (Telemetry_field, Command_availability) of each frame: a chain (a tag and a
    one-byte length each), followed for every frame at once while many are left, the rest (a
    vehicle's first, full Device_status: sixty records) by `_walk`. Returns (where each
    record is, its frame), in buffer order; a frame whose chain does not end at its end, or
    with a record that is neither field or has a longer length, is not `ok`."""
    frames = np.flatnonzero(ok)
    at, end = first[frames], stops[frames]
    found_at: list[np.ndarray] = []
    found_frame: list[np.ndarray] = []
    going = np.flatnonzero(at < end)
    while len(going) > _WALK:  # a step costs about what _WALK steps in Python do
        here = at[going]
        found_at.append(here)
        found_frame.append(frames[going])
        here = here + 2 + b[here + 1]
        at[going] = here
        going = going[here < end[going]]
    if len(going):
        records, counts, at[going] = _walk(buf, b, at[going], end[going])
        found_at.append(records)
        found_frame.append(np.repeat(frames[going], counts))
    if not found_at:
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    record = np.concatenate(found_at)
    frame = np.concatenate(found_frame)
    tag = b[record]
    bad = ((tag != _TELEMETRY) & (tag != _AVAILABILITY)) | (b[record + 1] >= 0x80)
    ok[frames[at != end]] = False  # a record ran past its frame
    ok[frame[bad]] = False
    order = np.argsort(record, kind="stable")
    return record[order], frame[order]


def _walk(
    buf: bytes, b: np.ndarray, at: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The record chains from each of `at` to `end`: the records (frame after frame), how
    many each frame has, and where each chain ended (its `end` if it ended well). A chain is
    followed in Python; its records, moved to each other frame of the same size, are then
    tried there at once (a fleet's first Device_status frames mostly share a few layouts): a
    chain whose every record's length leads to the next, and the last to its end, is the
    chain a walk would follow. After `_MISSES` layouts that fit no other frame of their
    size, the rest are walked."""
    records: list[np.ndarray] = [np.zeros(0, np.intp)] * len(at)
    finals = end.copy()
    todo = np.arange(len(at))
    left = np.ones(len(at), bool)  # not walked or fitted yet
    sizes = end - at
    misses = 0
    while len(todo):
        g = int(todo[0])
        todo = todo[1:]
        chain, finals[g] = _chain(buf, int(at[g]), int(end[g]))
        records[g] = np.array(chain, np.intp)
        if misses >= _MISSES or finals[g] != end[g]:
            continue
        same = todo[sizes[todo] == sizes[g]]
        if not len(same):
            continue
        guess = at[same, None] + (records[g] - at[g])  # (frames, records)
        hops = guess + 2 + b[guess + 1]
        good = (hops[:, :-1] == guess[:, 1:]).all(axis=1) & (hops[:, -1] == end[same])
        if not good.any():
            misses += 1
            continue
        for f, rows in zip(same[good].tolist(), guess[good], strict=True):
            records[f] = rows
        left[same[good]] = False
        todo = todo[left[todo]]
    counts = [len(r) for r in records]
    return np.concatenate(records), np.array(counts, np.intp), finals


def _chain(buf: bytes, here: int, stop: int) -> tuple[list[int], int]:
    """The records of one chain from `here` to `stop`, and where it ended."""
    out: list[int] = []
    add = out.append
    while here < stop:
        add(here)
        here += 2 + buf[here + 1] if here + 1 < stop else stop + 1
    return out, here


def _availabilities(
    b: np.ndarray, ok: np.ndarray, body: np.ndarray, stop: np.ndarray, frame: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Command_availability records: id (1), is_available (2), is_enabled (3). Returns
    (frame, command, available, enabled) of every record; a frame with one it cannot read
    is not `ok`."""
    command, size = _varints(b, body + 1, 5)
    available, after, good_a = _optional_varint(b, body + 1 + size, stop, 0x10)
    enabled, after, good_e = _optional_varint(b, after, stop, 0x18)
    good = (b[body] == 0x08) & (size > 0) & (command < _U32) & good_a & good_e
    ok[frame[~(good & (after == stop))]] = False
    return frame, command, available, enabled


def _fields(
    buf: bytes,
    b: np.ndarray,
    ok: np.ndarray,
    body: np.ndarray,
    stop: np.ndarray,
    frame: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """Telemetry_field records: field_id (1), ms_since_epoch (2), value (3: one member).
    A frame with one it cannot read is not `ok`; returns the fields of the frames still `ok`:
    (frame, field, ms, `Kind`, where its member is, the member's varint (ints, bools), where
    its text starts, the text's size)."""
    field, size = _varints(b, body + 1, 5)
    good = (b[body] == 0x08) & (size > 0) & (field < _U32)
    time_at = body + 1 + size
    ms, size = _varints(b, time_at + 1, 10)
    value_at = time_at + 1 + size
    good &= (b[time_at] == 0x10) & (size > 0) & (b[value_at] == 0x1A)
    value_size = b[value_at + 1].astype(np.intp)
    member = value_at + 2
    good &= (value_size < 0x80) & (member + value_size == stop)
    tag = np.where(value_size > 0, b[member], 0)
    kind = _KIND_OF_TAG[tag]
    expected = _SIZE_OF_TAG[tag]  # the value's size its member needs (-1: no such member)
    varints = np.flatnonzero(_VARINT_TAG[tag])
    varint, size = _varints(b, member[varints] + 1, 10)
    expected[varints] = np.where(size > 0, size + 1, -1)
    texts = np.flatnonzero(kind >= _STRING)
    text_size = b[member[texts] + 1].astype(np.intp)
    expected[texts] = np.where(text_size < 0x80, text_size + 2, -1)
    good &= expected == value_size
    for i, start, n in zip(texts.tolist(), (member[texts] + 2).tolist(), text_size.tolist(),
                           strict=True):  # fmt: skip
        if good[i] and kind[i] == _STRING:  # ASCII (else protobuf's UTF-8)
            good[i] = buf[start : start + n].isascii()
    ok[frame[~good]] = False
    keep = ok[frame]
    values = np.zeros(len(tag), np.uint64)
    values[varints] = varint
    start = np.zeros(len(tag), np.intp)
    start[texts] = member[texts] + 2
    sizes = np.zeros(len(tag), np.intp)
    sizes[texts] = text_size
    if not keep.all():
        frame, field, ms, kind, member, values, start, sizes = (
            a[keep] for a in (frame, field, ms, kind, member, values, start, sizes)
        )
    return frame, field.astype(np.int64), _zigzag(ms), kind, member, values, start, sizes


def _values(
    b: np.ndarray, kind: np.ndarray, member: np.ndarray, varint: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The values' numbers: (number as float64, NaN for none and text; integer, for ints
    and bools)."""
    integer = np.where(kind == _INT, _zigzag(varint), (kind == _BOOL) & (varint != 0))
    number = np.where((kind == _INT) | (kind == _BOOL), integer, np.nan)
    for member_kind, dtype in ((_FLOAT, "<f4"), (_DOUBLE, "<f8")):
        rows = np.flatnonzero(kind == member_kind)
        if len(rows):  # (the value after the member's key, through an unaligned view of `b`)
            number[rows] = _unaligned(b, dtype)[member[rows] + 1]
    return number, integer


# ---------------------------------------------------------------------------------------------
# values


class ValueKind(enum.Enum):
    """The Field_value member a field's values travel in."""

    DOUBLE = "double_value"
    FLOAT = "float_value"
    INT = "int_value"
    BOOL = "bool_value"
    STRING = "string_value"
    BYTES = "bytes_value"
    LIST = "list_value"
    ANY = "any"


_S = defs
_INT_SEMANTICS = frozenset(
    {
        _S.FIELD_SEMANTIC_ENUM,
        _S.FIELD_SEMANTIC_ADSB_MODE,
        _S.FIELD_SEMANTIC_AUTOPILOT_STATUS,
        _S.FIELD_SEMANTIC_FLIGHT_MODE,
        _S.FIELD_SEMANTIC_CONTROL_MODE,
        _S.FIELD_SEMANTIC_GPS_FIX_TYPE,
        _S.FIELD_SEMANTIC_SATELLITE_COUNT,
        _S.FIELD_SEMANTIC_ICAO,
        _S.FIELD_SEMANTIC_SQUAWK,
        _S.FIELD_SEMANTIC_MILLISECONDS,
        _S.FIELD_SEMANTIC_TIMESTAMP,
    }
)
_OTHER_KINDS: dict[int, ValueKind] = {
    _S.FIELD_SEMANTIC_LATITUDE: ValueKind.DOUBLE,
    _S.FIELD_SEMANTIC_LONGITUDE: ValueKind.DOUBLE,
    _S.FIELD_SEMANTIC_BOOL: ValueKind.BOOL,
    _S.FIELD_SEMANTIC_STRING: ValueKind.STRING,
    _S.FIELD_SEMANTIC_BINARY: ValueKind.BYTES,
    _S.FIELD_SEMANTIC_LIST: ValueKind.LIST,
    _S.FIELD_SEMANTIC_ANY: ValueKind.ANY,
}


DEGREE_SEMANTICS = frozenset(
    {
        defs.FIELD_SEMANTIC_LATITUDE,
        defs.FIELD_SEMANTIC_LONGITUDE,
        defs.FIELD_SEMANTIC_HEADING,
        defs.FIELD_SEMANTIC_ROLL,
        defs.FIELD_SEMANTIC_PITCH,
        defs.FIELD_SEMANTIC_YAW,
        defs.FIELD_SEMANTIC_FOV_H,
        defs.FIELD_SEMANTIC_FOV_V,
    }
)
"""The semantics of angles: radians on the wire, degrees for people and the world."""


def kind_of_semantic(semantic: int) -> ValueKind:
    """The member the SDK writes a value of `semantic` in (ugcs-proto-table.md, value encoding):
    latitude/longitude double; enums and counts int; bool; string; binary; list; ANY by the
    value; every other numeric semantic float."""
    if semantic in _INT_SEMANTICS:
        return ValueKind.INT
    return _OTHER_KINDS.get(semantic, ValueKind.FLOAT)


def read_value(fv: pb.Field_value) -> Value:
    """The Python value of a Field_value: None for META_VALUE_NA or an empty one; a list for
    list_value. Order when several members are set (a sender's mistake): NA wins, then the
    order of the field numbers."""
    if fv.HasField("meta_value"):
        return None
    if fv.HasField("int_value"):
        return fv.int_value
    if fv.HasField("float_value"):
        return fv.float_value
    if fv.HasField("double_value"):
        return fv.double_value
    if fv.HasField("string_value"):
        return fv.string_value
    if fv.HasField("bool_value"):
        return fv.bool_value
    if fv.HasField("list_value"):
        return [read_value(v) for v in fv.list_value.values]
    if fv.HasField("bytes_value"):
        return fv.bytes_value
    return None


def write_value(fv: pb.Field_value, value: Value, kind: ValueKind = ValueKind.ANY) -> None:
    """Fill `fv` with `value` (None -> META_VALUE_NA) in the member of `kind`; ANY picks it
    from the Python type (bool, int, float as double, str, bytes, list)."""
    if value is None:
        fv.meta_value = defs.META_VALUE_NA
        return
    if kind is ValueKind.ANY or kind is ValueKind.LIST:
        if isinstance(value, bool):
            fv.bool_value = value
        elif isinstance(value, int):
            fv.int_value = value
        elif isinstance(value, float):
            fv.double_value = value
        elif isinstance(value, str):
            fv.string_value = value
        elif isinstance(value, bytes):
            fv.bytes_value = value
        else:
            values = fv.list_value.values
            fv.list_value.SetInParent()
            for item in value:
                write_value(values.add(), item)
        return
    if kind is ValueKind.BOOL:
        fv.bool_value = bool(value)
    elif kind is ValueKind.STRING:
        fv.string_value = value if isinstance(value, str) else str(value)
    elif kind is ValueKind.BYTES:
        fv.bytes_value = value if isinstance(value, bytes) else str(value).encode()
    elif not isinstance(value, int | float):
        raise ValueError(f"ugcs: {value!r} is not a number for a {kind.name.lower()} field")
    elif kind is ValueKind.DOUBLE:
        fv.double_value = float(value)
    elif kind is ValueKind.FLOAT:
        fv.float_value = float(value)
    else:
        fv.int_value = int(value)
