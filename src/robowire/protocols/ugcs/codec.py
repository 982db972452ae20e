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
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from typing import TypeAlias

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

    __slots__ = ("_buf", "_consumed", "error", "frames")

    def __init__(self) -> None:
        self._buf = b""
        self._consumed = 0  # stream offset of _buf[0]
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
        if self.error is not None:
            return (), None
        buf = self._buf + data if self._buf else data
        end = len(buf)
        pos = 0
        frames: list[bytes] = [b""]  # whole non-empty frames, length prefix included
        add = frames.append
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
            add(buf[pos:stop])
            pos = stop
        out, bad = _parse_frames(frames, buf)
        if bad is not None:
            error = bad
        self.frames += len(out)
        if error is not None:
            self.error = error.shifted(self._consumed)
            self._buf = b""
            return out, self.error
        self._buf = buf[pos:] if pos < end else b""
        self._consumed += pos
        return out, None


def _parse_frames(
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
