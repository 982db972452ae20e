"""ROS 2 messages as CDR bytes: XCDR1, little-endian, final structs (what rmw writes). Pure.

A sample is the encapsulation header `00 01 00 00` then the payload; a primitive is aligned to
its size (at most 8) counted from the payload's start, a string is a uint32 length (with its
NUL) then the bytes and a NUL, a sequence a uint32 count then its elements.

    encode(type, value)     any message of `types.MESSAGES` from nested dicts (values not given
                            are zero or empty; a numpy array may stand for a sequence or array
                            of numbers, or of structs of one number type: Point, ColorRGBA).
                            For messages that are few (a fix, a battery, diagnostics).
    TfMessages              `tf2_msgs/TFMessage` from columns: the layout is fixed given the
                            frame names, so it is computed once (vectorised) for a set of
                            devices, and each message writes only the stamps and the 7 doubles
                            of each transform, through numpy views
    Template                one message whose strings are fixed (a device's fix): its bytes
                            made once, then its numbers written in place (`struct.pack_into`)
    Repeated                n elements of one type with the same strings (the markers of a
                            source, a batch of PoseStamped): one template per alignment, tiled,
                            and the numbers written as columns through strided views
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from robowire.ros2.types import Field, fields

HEADER = b"\x00\x01\x00\x00"  # CDR (XCDR1), little-endian, no options
FORMATS = {
    "int8": "b",
    "uint8": "B",
    "char": "B",
    "byte": "B",
    "bool": "?",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "uint64": "Q",
    "float32": "f",
    "float64": "d",
}
DTYPES = {name: np.dtype("<" + code) for name, code in FORMATS.items()}
U8 = npt.NDArray[np.uint8]


def _align(position: int, size: int) -> int:
    return position + (-position % size)


class _Writer:
    """Appends one value's CDR to `buf`, aligned from `start` (the payload offset where `buf`
    begins); `marks` records where each top-level-path primitive went (path -> (offset in
    `buf`, type)), for templates."""

    def __init__(self, start: int = 0) -> None:
        self.start = start
        self.buf = bytearray()
        self.marks: dict[str, tuple[int, str]] = {}

    def align(self, size: int) -> None:
        self.buf += bytes(-(self.start + len(self.buf)) % size)

    def primitive(self, type_name: str, value: Any, path: str | None) -> None:
        code = FORMATS[type_name]
        size = struct.calcsize(code)
        self.align(size)
        if path is not None:
            self.marks[path] = (len(self.buf), type_name)
        self.buf += struct.pack("<" + code, value if value is not None else 0)

    def string(self, value: str | None) -> None:
        data = (value or "").encode() + b"\0"
        self.align(4)
        self.buf += struct.pack("<I", len(data)) + data

    def struct(self, type_name: str, value: Any, path: str | None) -> None:
        for field in fields(type_name):
            got = _get(value, field.name)
            self.field(field, got, None if path is None else path + field.name)

    def field(self, field: Field, value: Any, path: str | None) -> None:
        if field.array or field.sequence:
            self.many(field, value)
        elif field.nested:
            self.struct(field.type, value, None if path is None else path + ".")
        elif field.type == "string":
            self.string(value)
        else:
            self.primitive(field.type, value, path)

    def many(self, field: Field, value: Any) -> None:
        count = field.array or (0 if value is None else len(value))
        if field.sequence:
            self.align(4)
            self.buf += struct.pack("<I", count)
        if count == 0:
            return
        if isinstance(value, np.ndarray):  # numbers, or structs of one number type
            code = FORMATS[field.type] if not field.nested else _uniform(field.type)
            dtype = DTYPES[{v: k for k, v in FORMATS.items()}[code]]
            self.align(dtype.itemsize)
            self.buf += np.ascontiguousarray(value, dtype=dtype).tobytes()
            return
        items = list(value) if value is not None else [None] * count
        for item in items:
            if field.nested:
                self.struct(field.type, item, None)
            elif field.type == "string":
                self.string(item)
            else:
                self.primitive(field.type, item, None)


def _get(value: Any, name: str) -> Any:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def _uniform(type_name: str) -> str:
    """The struct format letter of a type made of primitives all of one type (Point: `d`)."""
    codes = {FORMATS.get(f.type) for f in fields(type_name)}
    if len(codes) != 1 or None in codes or any(f.array or f.sequence for f in fields(type_name)):
        raise TypeError(f"{type_name} is not made of numbers of one type")
    code = codes.pop()
    assert code is not None
    return code


def encode(type_name: str, value: Any) -> bytes:
    """The CDR sample (header included) of one `type_name` message given as nested dicts."""
    writer = _Writer()
    writer.struct(type_name, value, None)
    return HEADER + bytes(writer.buf)


def encode_payload(type_name: str, value: Any, start: int) -> bytes:
    """The CDR of one value as it goes at payload offset `start` (no header): for a value that
    follows columns written by `Repeated`."""
    writer = _Writer(start)
    writer.struct(type_name, value, None)
    return bytes(writer.buf)


class Template:
    """A message of `type_name` with the strings and sequences of `value`, encoded once; `encode`
    writes numbers at their places in a copy (the paths of the primitives outside sequences)."""

    def __init__(self, type_name: str, value: Any) -> None:
        writer = _Writer()
        writer.struct(type_name, value, "")
        self.data = HEADER + bytes(writer.buf)
        self._at = {
            path: (offset + len(HEADER), struct.Struct("<" + FORMATS[kind]))
            for path, (offset, kind) in writer.marks.items()
        }

    def encode(self, values: Mapping[str, Any]) -> bytes:
        data = bytearray(self.data)
        for path, value in values.items():
            offset, packer = self._at[path]
            packer.pack_into(data, offset, value)
        return bytes(data)


def stamps(seconds: npt.NDArray[np.float64]) -> npt.NDArray[np.uint32]:
    """(n, 2) uint32 (sec as int32's bits, nanosec) of epoch seconds: builtin_interfaces/Time."""
    whole = np.floor(seconds)
    out = np.empty((len(seconds), 2), dtype=np.uint32)
    out[:, 0] = whole.astype(np.int64).astype(np.uint32)
    out[:, 1] = np.minimum(np.round((seconds - whole) * 1e9), 999_999_999).astype(np.uint32)
    return out


# -- /tf from columns --------------------------------------------------------------------------


class Names:
    """Device names as one byte buffer (each name's UTF-8 then a NUL) plus where each begins:
    gathering the names of many devices is numpy indexing, not a loop."""

    def __init__(self) -> None:
        self.data: U8 = np.zeros(0, dtype=np.uint8)
        self.starts = np.zeros(0, dtype=np.int64)
        self.lengths = np.zeros(0, dtype=np.int64)  # with the NUL

    def __len__(self) -> int:
        return len(self.starts)

    def extend(self, names: Sequence[str]) -> None:
        encoded = [n.encode() + b"\0" for n in names]
        lengths = np.array([len(e) for e in encoded], dtype=np.int64)
        starts = len(self.data) + np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        self.data = np.concatenate([self.data, np.frombuffer(b"".join(encoded), np.uint8)])
        self.starts = np.concatenate([self.starts, starts])
        self.lengths = np.concatenate([self.lengths, lengths])


def _ranges(starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> np.ndarray:
    """The indices start..start+length of each pair, concatenated (no loop)."""
    total = int(lengths.sum())
    before = np.cumsum(lengths) - lengths
    return np.repeat(starts - before, lengths) + np.arange(total)


@dataclass
class _TfLayout:
    slots: np.ndarray
    payload: U8
    stamps: np.ndarray  # uint32 index of each transform's sec (nanosec after it)
    doubles: np.ndarray  # float64 index of each transform's translation x (7 doubles)


class TfMessages:
    """`tf2_msgs/TFMessage` samples of the devices of one source, from columns.

    `names` holds the child frame of each slot; `parent` is the frame they are given in. The
    layout of a set of slots is kept until other slots are asked for.
    """

    def __init__(self, parent: str, names: Names) -> None:
        self.parent = parent.encode()
        self.names = names
        self._layout: _TfLayout | None = None

    def _lay_out(self, slots: np.ndarray) -> _TfLayout:
        n = len(slots)
        frame = len(self.parent) + 1
        child = self.names.lengths[slots]
        to_child = _align(12 + frame, 4)  # from a transform's start (4-aligned) to child length
        size = ((to_child + 4 + child + 7) // 8) * 8 + 56  # transforms 1..: starts 8-aligned
        first = _align(4 + to_child + 4 + int(child[0]), 8) + 56 - 4 if n else 0
        size[:1] = first
        starts = 4 + np.concatenate(([0], np.cumsum(size)[:-1])).astype(np.int64)
        total = int(starts[-1] + size[-1]) if n else 4
        payload = np.zeros(_align(total, 8), dtype=np.uint8)
        words = payload.view("<u4")
        words[0] = n
        words[(starts + 8) // 4] = frame
        words[(starts + to_child) // 4] = child
        payload[(starts + 12)[:, None] + np.arange(frame - 1)] = np.frombuffer(
            self.parent, np.uint8
        )
        where = _ranges(starts + to_child + 4, child)
        payload[where] = self.names.data[_ranges(self.names.starts[slots], child)]
        doubles = (starts + to_child + 4 + child + 7) // 8
        return _TfLayout(slots.copy(), payload[:total], starts // 4, doubles)

    def encode(
        self,
        slots: np.ndarray,
        times: npt.NDArray[np.float64],
        translation: npt.NDArray[np.float64],
        rotation_wxyz: npt.NDArray[np.float64],
    ) -> bytes:
        """One TFMessage: a transform per slot (stamps in epoch seconds, ENU metres, unit
        quaternions (w, x, y, z) as the world keeps them)."""
        layout = self._layout
        if layout is None or not np.array_equal(layout.slots, slots):
            layout = self._layout = self._lay_out(slots)
        words = layout.payload.view("<u4") if len(layout.payload) % 4 == 0 else None
        assert words is not None
        stamp = stamps(times)
        words[layout.stamps] = stamp[:, 0]
        words[layout.stamps + 1] = stamp[:, 1]
        doubles = layout.payload[: len(layout.payload) // 8 * 8].view("<f8")
        at = layout.doubles[:, None]
        doubles[at + np.arange(3)] = translation
        doubles[at + 3 + np.arange(3)] = rotation_wxyz[:, 1:]
        doubles[layout.doubles + 6] = rotation_wxyz[:, 0]
        return HEADER + layout.payload.tobytes()


# -- many elements with the same strings ------------------------------------------------------


@dataclass(frozen=True)
class _Template:
    data: bytes
    marks: dict[str, tuple[int, str]]


class Repeated:
    """`count` elements of `type_name`, all with the strings and sequences of `value`, laid out
    from payload offset `start` as one sequence's elements (`sequence=True`: after their
    uint32 count) or as the payloads of separate samples (`sequence=False`: each at 0).

    `buffer(count)` gives the bytes with every element's constant part in place; `fill` writes
    one numeric field (or a run of fields of one type) of every element from a column.
    """

    def __init__(self, type_name: str, value: Any, *, start: int = 4, sequence: bool = True):
        self.type_name = type_name
        self.value = value
        self.start = start
        self.sequence = sequence
        self._templates: dict[int, _Template] = {}
        self._count = -1
        self._starts: dict[int, np.ndarray] = {}  # alignment class -> element offsets
        self._indices: dict[int, np.ndarray] = {}  # alignment class -> element numbers
        self._buffer = bytearray()
        self.size = 0  # bytes the elements take (from `start`)

    def _template(self, alignment: int) -> _Template:
        found = self._templates.get(alignment)
        if found is None:
            writer = _Writer(alignment)
            writer.struct(self.type_name, self.value, "")
            found = self._templates[alignment] = _Template(bytes(writer.buf), writer.marks)
        return found

    def buffer(self, count: int) -> bytearray:
        """The elements' bytes, constants in place (kept and reused while `count` holds)."""
        if count == self._count:
            return self._buffer
        if not self.sequence:
            template = self._template(0)
            stride = _align(len(template.data), 8)
            self._starts = {0: np.arange(count, dtype=np.int64) * stride}
            self._indices = {0: np.arange(count, dtype=np.intp)}
            self._buffer = bytearray((template.data + bytes(stride - len(template.data))) * count)
            self.size, self._count = stride * count, count
            return self._buffer
        offsets: dict[int, list[int]] = {}
        indices: dict[int, list[int]] = {}
        position = self.start
        chunks = []
        for index in range(count):  # (alignments repeat within two elements; and cached)
            template = self._template(position % 8)
            offsets.setdefault(position % 8, []).append(position - self.start)
            indices.setdefault(position % 8, []).append(index)
            chunks.append(template.data)
            position += len(template.data)
        self._starts = {a: np.array(o, dtype=np.int64) for a, o in offsets.items()}
        self._indices = {a: np.array(i, dtype=np.intp) for a, i in indices.items()}
        self._buffer = bytearray(b"".join(chunks))
        self.size, self._count = len(self._buffer), count
        return self._buffer

    def fill(self, path: str, column: np.ndarray, width: int = 1) -> None:
        """Write `column` ((count,) or (count, width): `width` fields of one type that follow
        each other from `path`, e.g. `pose.position.x` and 7) into every element."""
        column = np.asarray(column)
        for alignment, starts in self._starts.items():
            offset, type_name = self._template(alignment).marks[path]
            dtype = DTYPES[type_name]
            rows = column if len(self._starts) == 1 else column[self._indices[alignment]]
            values = np.asarray(rows, dtype=dtype).reshape(len(starts), width)
            if len(starts) > 1 and np.all(np.diff(starts) == starts[1] - starts[0]):
                stride = int(starts[1] - starts[0])
            elif len(starts) == 1:
                stride = dtype.itemsize * width
            else:  # (not evenly spaced: one element at a time)
                for row, at in zip(values, starts.tolist(), strict=True):
                    self._view(dtype, at + offset, 1, 0, width)[0] = row
                continue
            self._view(dtype, int(starts[0]) + offset, len(starts), stride, width)[...] = values

    def _view(self, dtype: np.dtype[Any], offset: int, count: int, stride: int, width: int) -> Any:
        return np.ndarray(
            (count, width),
            dtype=dtype,
            buffer=self._buffer,
            offset=offset,
            strides=(stride, dtype.itemsize),
        )

    def element(self, index: int) -> bytes:
        """Element `index` of a `sequence=False` batch: one sample's payload."""
        stride = self.size // self._count
        return bytes(self._buffer[index * stride : index * stride + len(self._template(0).data)])
