"""`robowire record URL… -o run.mcap`: the MCAP recorder (see docs/recording.md).

One MCAP file (the `mcap` package's writer; protobuf schemas and encodings from foxglove-sdk's
message classes), chunked and indexed with a summary (chunk and message indexes,
statistics), as that writer does by default, with lz4 chunks (`COMPRESSION`). A chunk is
closed and flushed to the file at most `CHUNK_SECONDS` after its first message (or at
`CHUNK_BYTES`), so a killed recording (which has no summary; `reader` reads it front to back)
loses at most about that much. Three kinds of channels:

* world, for Foxglove: `/tf`, `/scene`, `/location`, `/telemetry/<source>`, built by the
  shared `sinks.foxglove_messages` builder, at most `foxglove_rate` times a second per source
  from the latest state of what changed (as the live Foxglove sink does);
* world, for replay: `/robowire/<source>`, one protobuf `robowire.Update` (update.proto)
  per world update (every update: the devices as packed columns, with what is needed to
  rebuild them exactly), and `/robowire/log` (JSON);
* raw: `/raw/<source>`, every datagram or stream chunk the source received, as received
  (message encoding = the protocol, log time = receive time), one channel per transport and
  peer, described by the channel's metadata. The recorder taps the sources it is given
  (`tap_source`).
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import orjson
from google.protobuf.descriptor_pb2 import FileDescriptorProto, FileDescriptorSet
from mcap.data_stream import RecordBuilder
from mcap.records import ChunkIndex
from mcap.writer import CompressionType, Writer

from robowire import pbwire
from robowire.errors import TransportError
from robowire.pbwire import Heads, Part
from robowire.recording import update_pb2
from robowire.service import Sink, Source
from robowire.sinks.foxglove_messages import (
    TELEMETRY_SCHEMA,
    TELEMETRY_SCHEMA_NAME,
    FoxgloveMessages,
)
from robowire.sinks.foxglove_messages import schema as foxglove_schema
from robowire.sinks.jsonlines import log_line
from robowire.timebase import monotonic
from robowire.transport.target import FileTarget
from robowire.wire import Address
from robowire.world import LogEvent, Update, World
from robowire.world.feed import DEFAULT_BYTES
from robowire.world.model import (
    ATTRIBUTES,
    GEODETIC,
    LINKS,
    ORIENTATION,
    POSITION,
    SOURCE_TIME,
    VELOCITY,
)
from robowire.world.table import SourceTable

TOPIC_PREFIX = "/robowire/"
LOG_TOPIC = "/robowire/log"
RAW_PREFIX = "/raw/"
UPDATE_SCHEMA = "robowire.Update"
CHUNK_SECONDS = 1.0
"""A chunk is written at most this long after its first message: what a kill loses at most."""
CHUNK_BYTES = 4 << 20
"""...or once it holds this much (uncompressed; the `mcap` writer's default is 1 MiB: every
chunk adds to the index the writer holds until the file ends, see `PackedChunkIndexes`)."""
COMPRESSION = CompressionType.LZ4
"""Of each chunk: lz4 halves a show's file for a cost lost in `bench mcap`'s noise; the
writer's default zstd quarters it but made the recorder fall behind a 10,000-drone show."""
LOG_SCHEMA = "robowire.Log"
FOXGLOVE_RATE = 10.0
"""Foxglove world messages per source per second (the latest state of what changed)."""
VECTORS = (POSITION, ORIENTATION, VELOCITY, GEODETIC)
VECTOR_WIDTHS = {POSITION: 3, ORIENTATION: 4, VELOCITY: 3, GEODETIC: 3}
UPDATE_PROTO = FileDescriptorSet(
    file=[FileDescriptorProto.FromString(update_pb2.DESCRIPTOR.serialized_pb)]
).SerializeToString()
"""The schema of `/robowire/<source>`: `robowire.Update` (update.proto) as the
FileDescriptorSet MCAP readers build a protobuf decoder from."""
LOG_JSON_SCHEMA = orjson.dumps(
    {
        "title": LOG_SCHEMA,
        "type": "object",
        "description": "a log event (the line `listen --json` prints)",
        "properties": {
            "source": {"type": "string"},
            "device": {"type": ["string", "null"]},
            "log": {"type": "string"},
            "level": {"type": "string"},
            "time": {"type": "number"},
        },
    }
)
SAME = pbwire.key(6, pbwire.VARINT) + b"\x01"  # Column.same = true


def column(name: str, data: np.ndarray, unit: str = "") -> list[Part]:
    """A `robowire.Column` of `data` (a value per device, or a row of `width` each), in its
    most compact exact form (see update.proto), as parts to join."""
    width = 1 if data.ndim == 1 else data.shape[1]
    out: list[Part] = [_column_head(name, unit, width)]
    if not np.isnan(data.min()):  # no value missing (NaN propagates through min): the cheap way
        if (data[-1] == data[0]).all() and (data == data[0]).all():
            return [*out, *pbwire.packed(4, data[0], "<f8"), SAME]  # one value for every device
        return out + _floats(data)
    absent = np.isnan(data)
    missing = int(np.count_nonzero(absent))
    if missing == absent.size:
        return out  # written, as NaN (a payload these devices do not have)
    if width == 1 and missing * 2 > len(data):  # mostly absent: only the others
        rows = np.flatnonzero(~absent)
        return out + _floats(data[rows]) + pbwire.packed(7, rows, "<u4")
    with np.errstate(over="ignore", invalid="ignore"):  # (too large: not exact, not narrowed)
        single = data.astype(np.float32)
    if ((single == data) | absent).all():
        return out + pbwire.packed(5, single, "<f4")
    return out + pbwire.packed(4, data, "<f8")


def _floats(data: np.ndarray) -> list[Part]:
    """`data` (no NaN) as float32 when that holds every value exactly, else float64; the
    first row tells most columns apart (an orientation, a latitude) without converting all."""
    with np.errstate(over="ignore", invalid="ignore"):  # (too large: not exact, not narrowed)
        if (data[:1].astype(np.float32) == data[:1]).all():
            single = data.astype(np.float32)
            if (single == data).all():
                return pbwire.packed(5, single, "<f4")
    return pbwire.packed(4, data, "<f8")


@functools.lru_cache(maxsize=4096)
def _column_head(name: str, unit: str, width: int) -> bytes:
    """A column's name, unit and width fields (made once per column: the same each update)."""
    head = pbwire.string(1, name) + (pbwire.string(2, unit) if unit else b"")
    return head + pbwire.key(3, pbwire.VARINT) + pbwire.varint(width)


def scalar_columns(names: list[str], data: np.ndarray, units: list[str]) -> list[list[Part]]:
    """`column` of each row of `data` ((k, n): a value per device each): the same bytes as
    `column` gives for each; what is written found at once for all rows, each dense row
    checked on its own (a gathered copy of them costs more than the checks), the values of
    the sparse rows gathered at once."""
    n = data.shape[1]
    have = np.isnan(data)
    np.logical_not(have, out=have)  # a value written, per device
    counts = [np.count_nonzero(row) for row in have]  # (row by row: faster than axis=1)
    out: list[list[Part]] = [
        [_column_head(name, unit, 1)] for name, unit in zip(names, units, strict=True)
    ]
    sparse: list[int] = []
    for j, count in enumerate(counts):
        if count * 2 < n:
            if count:
                sparse.append(j)
            continue
        row = data[j]
        with np.errstate(over="ignore", invalid="ignore"):
            if count == n and row[0] == row[-1] and (row == row[0]).all():
                out[j] += [*pbwire.packed(4, row[:1], "<f8"), SAME]
                continue
            single = row.astype(np.float32)
            equal = single == row
            if count < n:
                equal |= ~have[j]
        if equal.all():
            out[j] += pbwire.packed(5, single, "<f4")
        else:
            out[j] += pbwire.packed(4, row, "<f8")
    if sparse:  # mostly absent: only the rows (devices) that have a value, all at once
        picked = np.array(sparse)
        flat = np.flatnonzero(have[picked])  # by row, devices in order
        sizes = [counts[j] for j in sparse]
        starts = np.cumsum([0, *sizes[:-1]])
        device = flat - np.repeat(np.arange(len(sparse)) * n, sizes)
        present = data.take(device + np.repeat(picked * n, sizes))
        where = device.astype(np.uint32)
        with np.errstate(over="ignore", invalid="ignore"):  # (too large: not exact)
            single = present.astype(np.float32)
            exact = np.logical_and.reduceat(single == present, starts).tolist()
        for j, a, size, narrow in zip(sparse, starts.tolist(), sizes, exact, strict=True):
            end = a + size
            if narrow:
                out[j] += pbwire.packed(5, single[a:end], "<f4")
            else:
                out[j] += pbwire.packed(4, present[a:end], "<f8")
            out[j] += pbwire.packed(7, where[a:end], "<u4")
    return out


def update_message(
    table: SourceTable, update: Update, described: np.ndarray, devices: Heads
) -> bytes:
    """One world update as the `robowire.Update` of `/robowire/<source>` (protobuf, see
    update.proto): what it wrote, as columns (the update's own values, else the table's),
    plus kind, name, attributes and links of the devices not yet described (`described`, a
    bool per slot, is updated). `devices` holds each device's encoded id field."""
    slots = update.slots
    parts: list[Part] = [devices.join(slots, np.zeros((len(slots), 0), np.uint8))[0]]
    fresh = np.flatnonzero(~described[slots])
    if len(fresh):
        described[slots[fresh]] = True
        for row, slot in zip(fresh.tolist(), slots[fresh].tolist(), strict=True):  # once each
            parts.append(new_device(table, row, slot))
    values = update.values
    for name in VECTORS:
        if name in update.fields:
            own = values.get(name)
            data = own if own is not None else getattr(table, name)[slots]
            parts += pbwire.nested(3, column(name, data))
    times = values.get(SOURCE_TIME)
    if times is not None:
        parts += pbwire.nested(4, column(SOURCE_TIME, times))
    names = [name for name in update.fields if name in table.telemetry]
    if names:  # all telemetry fields as one (k, n) array: each check once for all of them
        data = _scratch(len(names) * len(slots)).reshape(len(names), len(slots))
        for j, name in enumerate(names):
            own = values.get(name)
            data[j] = own if own is not None else table.telemetry[name][slots]
        units = [table.units[name] for name in names]
        for parts_of in scalar_columns(names, data, units):
            parts += pbwire.nested(5, parts_of)
    if ATTRIBUTES in update.fields or LINKS in update.fields:
        index = slots.tolist()
        if ATTRIBUTES in update.fields:
            every = table.attributes
            parts += [pbwire.field(6, orjson.dumps(every[s], default=str)) for s in index]
        if LINKS in update.fields:
            entry = _LINK_IDS.__getitem__
            parts += [pbwire.field(7, b"".join(map(entry, table.links[s]))) for s in index]
    return b"".join(parts)


class _LinkIds(dict[str, bytes]):
    """A linked device's id -> its encoded `Links.ids` entry, made once: a sensor network's
    links name the same devices again in every update (at most `MAX_LINK_IDS` kept)."""

    def __missing__(self, device: str) -> bytes:
        if len(self) >= MAX_LINK_IDS:
            self.clear()
        entry = self[device] = pbwire.string(1, device)
        return entry


MAX_LINK_IDS = 1 << 16
_LINK_IDS = _LinkIds()


def new_device(table: SourceTable, row: int, slot: int) -> bytes:
    """The `Update.new` field describing the device at `slot` (row `row` of its update)."""
    attributes = table.attributes[slot]
    return pbwire.field(
        2,
        pbwire.key(1, pbwire.VARINT) + pbwire.varint(row)
        + pbwire.string(2, table.kinds[slot]) + pbwire.string(3, table.names[slot])
        + (pbwire.string(4, attributes_json(attributes)) if attributes else b"")
        + b"".join(pbwire.string(5, link) for link in table.links[slot]),
    )  # fmt: skip


SMALL = 16
"""An update of at most this many devices is written from a layout (`SmallUpdate`)."""
MAX_LAYOUTS = 256
"""Layouts kept per source (sets of fields x device counts); more: made anew."""


class SmallUpdate:
    """The columns of a `robowire.Update` of `n` devices for one set of fields, laid out once:
    every column's constant bytes (keys, names, units, lengths) with a place for its values,
    each column as float64 (NaN where a device has no value: a form update.proto allows, a few
    bytes more than the compact forms `update_message` picks). `encode` gathers the values
    (one `itemgetter`, one `concatenate`) into a copy of that layout, with no check of their
    form: for the many small updates of a show (a robot, a node, a VRPN tracker's sensors),
    a fraction of `update_message`'s cost."""

    def __init__(self, table: SourceTable, fields: frozenset[str], times: bool, n: int) -> None:
        vectors = [name for name in VECTORS if name in fields]
        scalars = [name for name in fields if name in table.telemetry]
        columns = [
            *((3, name, "", VECTOR_WIDTHS[name]) for name in vectors),
            *([(4, SOURCE_TIME, "", 1)] if times else []),
            *((5, name, table.units[name], 1) for name in scalars),
        ]
        self._get = _getter([*vectors, *[SOURCE_TIME] * times, *scalars])
        self._units_of = _getter(scalars)
        self._units = self._units_of(table.units)
        parts: list[bytes] = []
        places: list[np.ndarray] = [np.zeros(0, np.intp)]
        size = 0
        for number, name, unit, width in columns:
            head = _column_head(name, unit, width)
            values = pbwire.header(4, 8 * n * width)
            body = head + values + bytes(8 * n * width)
            outer = pbwire.header(number, len(body))
            start = size + len(outer) + len(head) + len(values)
            places.append(np.arange(start, start + 8 * n * width))
            parts.append(outer + body)
            size += len(parts[-1])
        self._template = np.frombuffer(b"".join(parts), np.uint8)
        self._places = np.concatenate(places)

    def fits(self, table: SourceTable) -> bool:
        """Whether the table's units are still those laid out."""
        return bool(self._units_of(table.units) == self._units)

    def encode(self, values: Mapping[str, np.ndarray]) -> bytes | None:
        """The columns' part of the message, or None where the general path must write it (a
        column without the update's own values)."""
        if not len(self._places):
            return self._template.tobytes()
        try:
            flat = np.concatenate(self._get(values), axis=None, dtype=np.float64)
        except KeyError:
            return None
        if len(flat) * 8 != len(self._places):
            return None
        out = self._template.copy()
        out[self._places] = flat.view(np.uint8)
        return out.tobytes()


def _getter(names: list[str]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """What gives the values of `names` in a mapping as a tuple, in one call."""
    if not names:
        return lambda values: ()
    if len(names) == 1:
        only = names[0]
        return lambda values: (values[only],)
    return operator.itemgetter(*names)


class UpdateEncoder:
    """One source's `/robowire/<source>` messages: which devices it has described, each
    device's id field, and for updates of a few devices (many small updates) the layout of
    each set of fields and count (`SmallUpdate`); larger updates take `update_message`."""

    def __init__(self, table: SourceTable) -> None:
        self.described = np.zeros(16, bool)
        self.devices = Heads(lambda slot: pbwire.string(1, table.ids[slot]))  # Update.devices
        self._small: dict[tuple[frozenset[str], bool, int], SmallUpdate] = {}

    def encode(self, table: SourceTable, update: Update) -> bytes:
        if len(self.described) < len(table):
            grown = np.zeros(len(table) * 2, dtype=bool)
            grown[: len(self.described)] = self.described
            self.described = grown
        slots, fields = update.slots, update.fields
        if len(slots) <= SMALL and ATTRIBUTES not in fields and LINKS not in fields:
            key = (fields, SOURCE_TIME in update.values, len(slots))
            small = self._small.get(key)
            if small is None or not small.fits(table):
                if len(self._small) >= MAX_LAYOUTS:
                    self._small.clear()
                small = self._small[key] = SmallUpdate(table, *key)
            columns = small.encode(update.values)
            if columns is not None:
                index = slots.tolist()
                parts = list(map(self.devices.head, index))
                fresh = np.flatnonzero(~self.described[slots])
                if len(fresh):
                    self.described[slots[fresh]] = True
                    parts += [new_device(table, row, index[row]) for row in fresh.tolist()]
                parts.append(columns)
                return b"".join(parts)
        return update_message(table, update, self.described, self.devices)


_SCRATCH = [np.zeros(0)]


def _scratch(size: int) -> np.ndarray:
    """A float64 buffer of `size`, kept from call to call: a fresh one of a megabyte or more
    costs its page faults every update. (Its contents are copied out before it is reused.)"""
    if len(_SCRATCH[0]) < size:
        _SCRATCH[0] = np.empty(size)
    return _SCRATCH[0][:size]


def attributes_json(attributes: dict[str, Any]) -> str:
    """A device's attributes as a JSON object (odd values as text)."""
    return orjson.dumps(attributes, default=str).decode()


class McapRecorder(Sink):
    """Writes the world (Foxglove and robowire channels) and the tapped sources' raw
    messages to an MCAP file until the run ends."""

    every_update = True  # a recording keeps every update, not only the latest state

    def __init__(
        self, path: str, max_bytes: int = DEFAULT_BYTES, foxglove_rate: float = FOXGLOVE_RATE
    ) -> None:
        super().__init__(f"record:{path}")
        self.path = path
        self.max_bytes = max_bytes
        self.foxglove_rate = foxglove_rate
        self.messages = 0  # world updates and log events written
        self.raw_messages = 0  # raw datagrams / stream chunks written
        self.foxglove_messages = 0
        self._stream: FileTarget | None = None
        self._writer: Writer | None = None
        self._channels: dict[Any, int] = {}
        self._schemas: dict[str, int] = {}
        self._builder = FoxgloveMessages(batch_locations=True)
        self._updates: dict[str, tuple[int, UpdateEncoder]] = {}  # source -> channel, encoder
        self._dirty: dict[str, tuple[np.ndarray, set[str]]] = {}  # source -> slots, fields
        self._foxglove_due: dict[str, float] = {}  # source -> next log time to write at
        self._due: list[tuple[float, str]] = []  # heap of (that time, source) of the dirty ones
        self._latest = 0.0  # the newest receive time written
        self._chunk_opened: float | None = None  # when the open chunk got its first message
        self._chunk_timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.error: str | None = None  # the file could not be written (full): said once

    # -- the file ----------------------------------------------------------------------------

    async def run(self, world: World) -> None:
        self._loop = asyncio.get_running_loop()  # closes chunks on time while nothing comes
        self.open()
        await super().run(world)

    def open(self) -> None:
        """Create the file and start the MCAP (`run` does; `write` and `finish` follow)."""
        self._stream = FileTarget(self.path, "chunk")  # (whole records: cut after the last)
        self._writer = Writer(
            self._stream,  # type: ignore[arg-type]  # (it writes, tells and flushes: all it uses)
            chunk_size=CHUNK_BYTES,
            compression=COMPRESSION,
        )
        PackedChunkIndexes.install(self._writer)
        self._writer.start(profile="", library="robowire")

    def _channel(
        self, key: Any, topic: str, encoding: str, schema: int, metadata: dict[str, str]
    ) -> int:
        channel = self._channels.get(key)
        if channel is None:
            assert self._writer is not None
            channel = self._channels[key] = self._writer.register_channel(
                topic, encoding, schema, metadata
            )
        return channel

    def _schema(self, name: str, encoding: str, data: bytes) -> int:
        schema = self._schemas.get(name)
        if schema is None:
            assert self._writer is not None
            schema = self._schemas[name] = self._writer.register_schema(name, encoding, data)
        return schema

    def _broke(self, exc: TransportError) -> None:
        """The file cannot be written (its disk is full, or RLIMIT_FSIZE: `FileTarget` cut it
        after its last whole record): stop writing, once, and keep what is on disk (every
        chunk closed so far: replay reads up to the last)."""
        if self.error is None:
            self.error = f"{exc} (replay reads that far)"
        if self._chunk_timer is not None:
            self._chunk_timer.cancel()
            self._chunk_timer = None
        self._writer = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _add(self, channel: int, nanos: int, data: bytes) -> None:
        assert self._writer is not None
        self._writer.add_message(channel, nanos, data, nanos)
        self._added()

    def _added(self) -> None:
        """After a message: the open chunk's timer started with its first message."""
        if self._chunk_opened is None:
            self._chunk_opened = monotonic()
            if self._loop is not None:
                self._chunk_timer = self._loop.call_later(CHUNK_SECONDS, self.close_chunk)
        elif self._loop is None and monotonic() - self._chunk_opened >= CHUNK_SECONDS:
            self.close_chunk()  # (without an event loop: no timer)

    def close_chunk(self) -> None:
        """Write the open chunk (compressed, with its message indexes) and flush the file.
        The writer also closes a chunk by itself at `CHUNK_BYTES`; the next one is then
        closed early, which costs a little compression and nothing else."""
        if self._chunk_timer is not None:
            self._chunk_timer.cancel()
            self._chunk_timer = None
        self._chunk_opened = None
        if self._writer is not None:
            try:
                self._writer.flush()  # type: ignore[no-untyped-call]
            except TransportError as exc:
                self._broke(exc)  # (a timer's call: the next `write` says it)

    def finish(self, world: World) -> None:
        try:
            self._finish(world)
        except TransportError as exc:
            self._broke(exc)
        if self.error is not None:
            raise TransportError(self.error)

    def _finish(self, world: World) -> None:
        if self._writer is not None and self.foxglove_rate > 0:
            for source in list(self._dirty):  # what changed since the last Foxglove messages
                table = world.tables.get(source)
                if table is not None:
                    self._write_foxglove(table)
        if self._chunk_timer is not None:
            self._chunk_timer.cancel()
            self._chunk_timer = None
        if self._writer is not None:
            self._writer.finish()  # type: ignore[no-untyped-call]  # last chunk, summary
            self._writer = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    # -- raw messages ------------------------------------------------------------------------

    def tap_source(self, source: Source, protocol: str, url: str = "") -> None:
        """Record what `source` (speaking `protocol`, opened from `url`) receives: its tap
        writes each datagram or chunk with one call to the writer (a show's datagrams are
        the most messages of a recording)."""
        channels: dict[tuple[str, Address], int] = {}  # (transport, peer) -> channel

        def tap(data: bytes, now: float, transport: str, peer: Address) -> None:
            writer = self._writer
            if writer is None:
                return
            channel = channels.get((transport, peer))
            if channel is None:
                channel = channels[transport, peer] = self._raw_channel(
                    source, protocol, url, transport, peer
                )
            nanos = int(source.clock.wall(now) * 1e9)
            try:
                writer.add_message(channel, nanos, data, nanos)
            except TransportError as exc:  # (the source goes on; the next `write` says it)
                self._broke(exc)
                return
            self.raw_messages += 1
            if self._chunk_opened is None or self._loop is None:
                self._added()

        source.tap = tap

    def _raw_channel(
        self, source: Source, protocol: str, url: str, transport: str, peer: Address
    ) -> int:
        metadata = {
            "protocol": protocol,
            "transport": transport,
            "direction": "received",
            "peer": f"{peer[0]}:{peer[1]}",
            "source": source.name,
            "url": url,
        }
        key = (source.name, transport, peer)
        return self._channel(key, RAW_PREFIX + source.name, protocol, 0, metadata)

    # -- world updates -----------------------------------------------------------------------

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        if self.error is not None:
            raise TransportError(self.error)
        try:
            return self._write(world, items)
        except TransportError as exc:
            self._broke(exc)
            raise TransportError(self.error) from None

    def _write(self, world: World, items: list[Update | LogEvent]) -> bool:
        if self._writer is None:
            return True
        for item in items:
            if isinstance(item, LogEvent):
                schema = self._schema(LOG_SCHEMA, "jsonschema", LOG_JSON_SCHEMA)
                channel = self._channel(LOG_TOPIC, LOG_TOPIC, "json", schema, {})
                self._add(channel, int(item.time * 1e9), orjson.dumps(log_line(item), default=str))
                self.messages += 1
                continue
            table = world.tables.get(item.source)
            if table is None or not len(item):
                continue
            self._write_update(table, item)
            if self.foxglove_rate > 0:
                self._mark(table, item)
        due = self._due
        while due and due[0][0] <= self._latest:  # the sources whose Foxglove messages are due
            source = heapq.heappop(due)[1]
            table = world.tables.get(source)
            if table is not None:
                self._write_foxglove(table)
            else:
                del self._dirty[source]
        return True

    def _write_update(self, table: SourceTable, update: Update) -> None:
        stream = self._updates.get(table.source)
        if stream is None:
            schema = self._schema(UPDATE_SCHEMA, "protobuf", UPDATE_PROTO)
            topic = TOPIC_PREFIX + table.source
            metadata = {"source": table.source}
            if table.protocol is not None:  # whose native names the ids are (replay keeps them)
                metadata["protocol"] = table.protocol
            channel = self._channel(topic, topic, "protobuf", schema, metadata)
            stream = self._updates[table.source] = (channel, UpdateEncoder(table))
        channel, encoder = stream
        self._add(channel, int(update.receive_time * 1e9), encoder.encode(table, update))
        self.messages += 1

    def _mark(self, table: SourceTable, update: Update) -> None:
        """Remember what changed, for the next Foxglove messages of this source."""
        dirty = self._dirty.get(table.source)
        if dirty is None:
            dirty = self._dirty[table.source] = (np.zeros(len(table), dtype=bool), set())
            due = self._foxglove_due.setdefault(table.source, update.receive_time)
            heapq.heappush(self._due, (due, table.source))
        mask, fields = dirty
        if len(mask) < len(table):
            grown = np.zeros(len(table) * 2, dtype=bool)
            grown[: len(mask)] = mask
            mask = grown
            self._dirty[table.source] = (mask, fields)
        mask[update.slots] = True
        fields.update(update.fields)
        self._latest = max(self._latest, update.receive_time)

    def _write_foxglove(self, table: SourceTable) -> None:
        """The Foxglove messages of what changed in `table` (due, or the last)."""
        latest = self._latest
        mask, fields = self._dirty.pop(table.source)
        self._foxglove_due[table.source] = latest + 1.0 / self.foxglove_rate
        slots = np.flatnonzero(mask[: len(table)])
        update = Update(table.source, slots, frozenset(fields), latest)
        nanos = int(latest * 1e9)
        for topic, message in self._builder.build(table, update):
            assert isinstance(message, bytes)  # (batch_locations: one /location message)
            channel = self._channels.get(topic)
            if channel is None:
                name = self._builder.schemas.get(topic)
                if name is None:  # a source's telemetry (JSON)
                    schema = self._schema(TELEMETRY_SCHEMA_NAME, "jsonschema", TELEMETRY_SCHEMA)
                    channel = self._channel(topic, topic, "json", schema, {})
                else:
                    schema = self._schema(*foxglove_schema(name))
                    channel = self._channel(topic, topic, "protobuf", schema, {})
            self._add(channel, nanos, message)
            self.foxglove_messages += 1


class PackedChunkIndexes(list[Any]):
    """The `mcap` writer's chunk indexes, each kept as its record's bytes until the summary is
    written: the writer keeps one `ChunkIndex` object per chunk until the file ends (2.5 KB
    each with its message index offsets; a full-load recording closed 38 chunks a second, and
    the gateway's memory grew by 5.6 MiB a minute for it), as bytes it is about 0.4 KB."""

    def append(self, index: ChunkIndex) -> None:
        record = RecordBuilder()
        index.write(record)
        super().append(_Written(record.end()))  # type: ignore[no-untyped-call]

    @classmethod
    def install(cls, writer: Writer) -> None:
        """Keep `writer`'s chunk indexes packed (the list is private to the writer: the test
        of this module checks that it is still there by that name)."""
        if not isinstance(getattr(writer, "_Writer__chunk_indices", None), list):
            raise TypeError("mcap's Writer no longer keeps its chunk indexes where expected")
        writer._Writer__chunk_indices = cls()  # type: ignore[attr-defined]


class _Written:
    """A record already written to bytes (what the summary's `index.write(builder)` takes)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def write(self, stream: RecordBuilder) -> None:
        stream.write(self.data)
