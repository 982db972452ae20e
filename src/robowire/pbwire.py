"""Protobuf wire encoding from numpy columns: what the recorder's `/robowire/<source>` channel
and the Foxglove messages are built with, so that 10,000 devices cost a few array operations
and no Python object per device.

The protobuf wire format (https://protobuf.dev/programming-guides/encoding/) puts each field
as a key (field number and wire type, a varint), then its value. A message with only
fixed-size fields (doubles, booleans, their constant keys and the constant lengths of nested
messages) has the same layout every time, so many of them are one numpy structured array
(`Layout`). Strings differ in length, but a device's frame id never changes, so its bytes
(with the lengths that depend on it) are made once per device and kept (`Heads`); each
message is then that device's head followed by its fixed part (`Heads.join`); for the same
devices again, those messages are kept laid out and only their doubles written
(`Heads.messages`). A repeated scalar field is one packed field: its key, its length, the
little-endian values (`packed`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5  # wire types
RUNS = 32
"""`Heads.join` lays out runs of equal-length heads with slices when there are fewer runs
than this (device ids of a few lengths, in order), else masks out each head's padding."""


SMALL = [bytes((i,)) for i in range(0x80)]  # the one-byte varints


def varint(value: int) -> bytes:
    """The base-128 varint of a non-negative integer."""
    if value < 0x80:
        return SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def header(number: int, size: int) -> bytes:
    """The key and length of a length-delimited field of `size` bytes."""
    if number < 16 and size < 0x80:  # one-byte key and length: most fields
        return bytes((number << 3 | LENGTH, size))
    return key(number, LENGTH) + varint(size)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: a string, bytes, or a nested message."""
    return header(number, len(payload)) + payload


Part = bytes | memoryview
"""A piece of a message, to be joined (`b"".join`) with the others: a memoryview is a
numpy array's own bytes, not copied until then."""


def nested(number: int, parts: list[Part]) -> list[Part]:
    """A length-delimited field made of `parts`, as parts (joined once, by the caller)."""
    return [header(number, sum(map(len, parts))), *parts]


def string(number: int, text: str) -> bytes:
    return field(number, text.encode())


def packed(number: int, values: np.ndarray, dtype: str) -> list[Part]:
    """A packed repeated scalar field of fixed size (`dtype`: "<f8" double, "<f4" float,
    "<u4" fixed32), values in order: its header and its bytes (a view of `values` when
    they are already those bytes: join the parts before `values` changes)."""
    data = np.ascontiguousarray(values, dtype=dtype).reshape(-1).view(np.uint8)
    return [header(number, len(data)), data.data]


def as_range(slots: np.ndarray) -> np.ndarray | slice:
    """`slots` as a slice when they are one ascending run (every device of a table, in
    order), so that indexing with them gives a view instead of a gathered copy; else
    `slots`."""
    n = len(slots)
    if not n or int(slots[-1]) - int(slots[0]) != n - 1 or not (np.diff(slots) == 1).all():
        return slots
    return slice(int(slots[0]), int(slots[0]) + n)


class Layout:
    """A run of fixed-size fields, laid out as a structured dtype: each part is either
    constant bytes (keys, lengths) or a named double (`"x"`). `fill(n, x=..., ...)` gives n
    copies, one row of bytes each."""

    def __init__(self, parts: Sequence[bytes | str]) -> None:
        fields: list[tuple[str, str]] = []
        constants: dict[str, bytes] = {}
        for i, part in enumerate(parts):
            if isinstance(part, bytes):
                name = f"_{i}"
                fields.append((name, f"V{len(part)}"))
                constants[name] = part
            else:
                fields.append((part, "<f8"))
        self.dtype = np.dtype(fields)  # packed: no alignment padding
        self.size = self.dtype.itemsize
        template = np.zeros((), self.dtype)
        for name, value in constants.items():
            template[name] = np.void(value)
        self.template = np.frombuffer(template.tobytes(), np.uint8)  # one row's bytes

    def fill(self, n: int, **columns: np.ndarray | float) -> np.ndarray:
        """(n, size) uint8: the layout with each named double taken from its column."""
        out = np.empty((n, self.size), np.uint8)
        out[:] = self.template  # as bytes: copying a structured row is many times slower
        rows = out.view(self.dtype).reshape(n)
        for name, values in columns.items():
            rows[name] = values
        return out


Block = tuple[int, int, np.ndarray]
"""Messages a..b of a layout (`Heads.messages`): their rows of doubles, in place."""


class Heads:
    """The variable-length start of each device's message (its strings and the lengths that
    depend on them), made once per device by `make(slot)` and kept right-aligned in one
    padded array, so that `join` lays out many messages with array operations."""

    def __init__(self, make: Callable[[int], bytes]) -> None:
        self.make = make
        self._heads: list[bytes] = []
        self._padded = np.zeros((0, 0), np.uint8)
        self._keep = np.zeros((0, 0), bool)
        self._lengths = np.zeros(0, np.intp)
        self._tail = -1  # the tail size `_keep` was made for
        self._last: tuple[np.ndarray, bytes, np.ndarray] | None = None  # slots, heads alone
        self._out = np.zeros(0, np.uint8)  # where `join` lays out messages before copying
        self._laid: tuple[Layout, np.ndarray, np.ndarray, list[Block], np.ndarray] | None = None
        self._asked: np.ndarray | None = None  # the slots `messages` was last asked for

    def head(self, slot: int) -> bytes:
        """One slot's head, made once."""
        heads = self._heads
        if slot >= len(heads):
            heads.extend(self.make(s) for s in range(len(heads), slot + 1))
        return heads[slot]

    def _grow(self, count: int, tail: int) -> None:
        if len(self._heads) < count:
            self._heads.extend(self.make(slot) for slot in range(len(self._heads), count))
        elif len(self._padded) >= count and self._tail == tail:
            return
        lengths = np.array([len(h) for h in self._heads], np.intp)
        width = int(lengths.max())
        columns = np.arange(width + tail)
        keep = columns >= (width - lengths)[:, None]  # right-aligned: padding first
        padded = np.zeros((len(self._heads), width), np.uint8)
        padded[keep[:, :width]] = np.frombuffer(b"".join(self._heads), np.uint8)
        self._padded, self._keep, self._tail, self._lengths = padded, keep, tail, lengths

    def join(self, slots: np.ndarray, tails: np.ndarray) -> tuple[bytes, np.ndarray]:
        """Each slot's head followed by its row of `tails` ((len(slots), k) uint8), all
        concatenated; and where each message ends in it."""
        if not len(slots):
            return b"", np.zeros(0, np.intp)
        if len(slots) == 1:  # one device (a robot): no layout to make
            joined = self.head(int(slots[0])) + tails.tobytes()
            return joined, np.array([len(joined)], np.intp)
        if not tails.shape[1] and self._last is not None and np.array_equal(slots, self._last[0]):
            return self._last[1], self._last[2]  # the same heads alone again (ids of a swarm)
        self._grow(int(slots.max()) + 1, tails.shape[1])
        tail = tails.shape[1]
        lengths = self._lengths[slots]
        ends = np.cumsum(lengths + tail)
        runs = np.flatnonzero(np.diff(lengths)) + 1  # where the head length changes
        if len(runs) < RUNS:  # a few runs of equal heads (ids "1".."10000"): slices only
            if len(self._out) < int(ends[-1]):  # kept: a fresh megabyte is page faults
                self._out = np.empty(int(ends[-1]), np.uint8)
            out = self._out[: int(ends[-1])]
            width = self._padded.shape[1]
            bounds = [0, *runs.tolist(), len(slots)]
            pick = as_range(slots)
            for a, b in itertools.pairwise(bounds):
                head = int(lengths[a])
                start = int(ends[a - 1]) if a else 0
                block = out[start : int(ends[b - 1])].reshape(b - a, head + tail)
                rows = (
                    slice(pick.start + a, pick.start + b) if isinstance(pick, slice) else slots[a:b]
                )
                block[:, :head] = self._padded[rows, width - head :]
                block[:, head:] = tails[a:b]
            joined = out.tobytes()
        else:  # heads of many lengths: all padded alike, the padding masked out
            width = self._padded.shape[1]
            rows = np.empty((len(slots), width + tail), np.uint8)
            rows[:, :width] = self._padded[slots]
            rows[:, width:] = tails
            joined = rows[self._keep[slots]].tobytes()
        if not tails.shape[1]:
            self._last = (slots.copy(), joined, ends)
        return joined, ends

    def messages(
        self, slots: np.ndarray, layout: Layout, **columns: np.ndarray | float
    ) -> tuple[bytes, np.ndarray]:
        """`join(slots, layout.fill(len(slots), **columns))`; the messages of slots asked for
        twice in a row are laid out in place and kept (heads and constants), so that the same
        slots again (every device of a swarm, each time) cost only their doubles written and
        one copy, while slots that change each time cost what `join` costs."""
        if len(slots) < 2:  # one device (a robot): nothing worth keeping
            return self.join(slots, layout.fill(len(slots), **columns))
        laid = self._laid
        if laid is None or laid[0] is not layout or not np.array_equal(laid[1], slots):
            again = self._asked is not None and np.array_equal(self._asked, slots)
            self._asked = slots.copy()
            laid = self._lay_out(slots, layout) if again else None
            if laid is None:  # new slots, or heads of many lengths: no runs to keep
                return self.join(slots, layout.fill(len(slots), **columns))
        _, _, out, blocks, ends = laid
        for a, b, rows in blocks:
            for name, values in columns.items():
                rows[name] = values[a:b] if isinstance(values, np.ndarray) else values
        return out.tobytes(), ends

    def _lay_out(
        self, slots: np.ndarray, layout: Layout
    ) -> tuple[Layout, np.ndarray, np.ndarray, list[Block], np.ndarray] | None:
        """The messages of `slots` with `layout`'s constants, and a view of each run of equal
        heads' doubles (kept as `_laid`); None where `join` lays them out by masks."""
        self._grow(int(slots.max()) + 1, layout.size)
        lengths = self._lengths[slots]
        runs = (np.flatnonzero(np.diff(lengths)) + 1).tolist()
        if len(runs) >= RUNS:
            return None
        constants = np.broadcast_to(layout.template, (len(slots), layout.size))
        joined, ends = self.join(slots, constants)
        out = np.frombuffer(joined, np.uint8).copy()
        blocks: list[Block] = []
        for a, b in itertools.pairwise([0, *runs, len(slots)]):
            head, start = int(lengths[a]), int(ends[a - 1]) if a else 0
            block = out[start : int(ends[b - 1])].reshape(b - a, head + layout.size)
            blocks.append((a, b, block[:, head:].view(layout.dtype)[:, 0]))
        self._laid = (layout, slots.copy(), out, blocks, ends)
        return self._laid
