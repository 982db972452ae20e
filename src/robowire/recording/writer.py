"""`robowire record URL… -o run.mcap`: the MCAP recorder (see docs/recording.md).

One unchunked MCAP file (the `mcap` package's writer; protobuf schemas and encodings from
foxglove-sdk's message classes), flushed every `FLUSH_SECONDS`, so a killed recording keeps
what it had written. Three kinds of channels:

* world, for Foxglove: `/tf`, `/scene`, `/location`, `/telemetry/<source>`, built by the
  shared `sinks.foxglove_messages` builder, at most `foxglove_rate` times a second per source
  from the latest state of what changed (as the live Foxglove sink does);
* world, for replay: `/robowire/<source>`, one JSON message per world update (every update:
  the devices as columns, with what is needed to rebuild them exactly), and `/robowire/log`;
* raw: `/raw/<source>`, every datagram or stream chunk the source received, as received
  (message encoding = the protocol, log time = receive time), one channel per transport and
  peer, described by the channel's metadata. The recorder taps the sources it is given
  (`tap_source`).
"""

from __future__ import annotations

import functools
from typing import IO, Any

import numpy as np
import orjson
from mcap.writer import Writer

from robowire.errors import ConfigError
from robowire.protocols.base import Address
from robowire.service import Sink, Source
from robowire.sinks.foxglove_messages import FoxgloveMessages
from robowire.sinks.jsonlines import log_line
from robowire.timebase import monotonic
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
FLUSH_SECONDS = 0.1
"""How often the recorder flushes the file: a killed recording loses at most this much."""
FOXGLOVE_RATE = 10.0
"""Foxglove world messages per source per second (the latest state of what changed)."""
VECTORS = (POSITION, ORIENTATION, VELOCITY, GEODETIC)
NUMPY = orjson.OPT_SERIALIZE_NUMPY
UPDATE_JSON_SCHEMA = orjson.dumps(
    {
        "title": UPDATE_SCHEMA,
        "type": "object",
        "description": "one world update of one source, devices as columns",
        "properties": {
            "devices": {"type": "array", "items": {"type": "string"}},
            "new": {"type": "object", "description": "rows first seen: kind, name"},
            "float32": {"type": "array", "description": "columns whose values are float32"},
            "position": {"type": "array"},
            "orientation": {"type": "array"},
            "velocity": {"type": "array"},
            "geodetic": {"type": "array"},
            "source_time": {"type": "array"},
            "telemetry": {"type": "object"},
            "attributes": {"type": "array"},
            "links": {"type": "array"},
        },
    }
)


def update_message(
    table: SourceTable, update: Update, described: np.ndarray, ids: np.ndarray
) -> bytes:
    """One world update as the JSON of `/robowire/<source>`: what it wrote, as columns (the
    update's own values, else the table's), plus kind, name, attributes and links of the
    devices not yet described (`described`, a bool per slot, is updated). `ids` is the
    table's ids as an object array (kept by the caller, so not rebuilt per update)."""
    slots = update.slots
    message: dict[str, Any] = {"devices": ids[slots].tolist()}
    fresh = np.flatnonzero(~described[slots])
    if len(fresh):
        described[slots[fresh]] = True
        rows = fresh.tolist()
        first = slots[fresh].tolist()
        message["new"] = {
            "rows": rows,
            "kind": [table.kinds[s] for s in first],
            "name": [table.names[s] for s in first],
            "attributes": [table.attributes[s] for s in first],
            "links": [list(table.links[s]) for s in first],
        }
    values = update.values
    narrow: list[str] = []  # columns written as float32 (exactly their values: fewer digits)

    def column(name: str, data: np.ndarray) -> Any:
        absent = np.isnan(data)
        if absent.all():
            return None  # written, as NaN (a payload these devices do not have)
        if data.ndim == 1 and (data == data[0]).all():
            return float(data[0])  # one value for every device (a frame's time)
        single = data.astype(np.float32)
        if np.array_equal(single, data, equal_nan=True):
            narrow.append(name)
            data = single
        if data.ndim == 1 and absent.sum() * 2 > len(data):  # mostly absent: only the others
            rows = np.flatnonzero(~absent)
            return {"rows": rows, "values": data[rows]}
        return data

    for name in VECTORS:
        if name in update.fields:
            own = values.get(name)
            message[name] = column(name, own if own is not None else getattr(table, name)[slots])
            if message[name] is None:  # (a vector column has a row per device)
                message[name] = np.full((len(slots), 3 if name != ORIENTATION else 4), np.nan)
    times = values.get(SOURCE_TIME)
    if times is not None:
        message[SOURCE_TIME] = column(SOURCE_TIME, times)
    telemetry = {
        name: {
            "unit": table.units[name],
            "values": column(name, values.get(name, table.telemetry[name][slots])),
        }
        for name in update.fields
        if name in table.telemetry
    }
    if narrow:
        message["float32"] = narrow
    if telemetry:
        message["telemetry"] = telemetry
    index = slots.tolist()
    if ATTRIBUTES in update.fields:
        message[ATTRIBUTES] = [table.attributes[s] for s in index]
    if LINKS in update.fields:
        message[LINKS] = [list(table.links[s]) for s in index]
    return orjson.dumps(message, option=NUMPY, default=str)  # odd attribute values: as text


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
        self._stream: IO[bytes] | None = None
        self._writer: Writer | None = None
        self._channels: dict[Any, int] = {}
        self._schemas: dict[str, int] = {}
        self._builder = FoxgloveMessages(batch_locations=True)
        self._described: dict[str, np.ndarray] = {}  # source -> bool per slot
        self._ids: dict[str, np.ndarray] = {}  # source -> its device ids (object array)
        self._dirty: dict[str, tuple[np.ndarray, set[str]]] = {}  # source -> slots, fields
        self._foxglove_due: dict[str, float] = {}  # source -> next log time to write at
        self._latest = 0.0  # the newest receive time written
        self._flushed = 0.0

    # -- the file ----------------------------------------------------------------------------

    async def run(self, world: World) -> None:
        self.open()
        await super().run(world)

    def open(self) -> None:
        """Create the file and start the MCAP (`run` does; `write` and `finish` follow)."""
        try:
            self._stream = open(self.path, "wb")  # noqa: SIM115 - closed in finish()
        except OSError as exc:
            raise ConfigError(f"cannot write {self.path}: {exc.strerror}") from None
        # unchunked: every message goes to the file as written, so a recording that is killed
        # keeps all it had flushed (chunks would hold up to a megabyte in memory)
        self._writer = Writer(self._stream, use_chunking=False)
        self._writer.start(profile="", library="robowire")
        self._flushed = monotonic()

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

    def _add(self, channel: int, nanos: int, data: bytes) -> None:
        assert self._writer is not None
        self._writer.add_message(channel, nanos, data, nanos)

    def _maybe_flush(self) -> None:
        if self._stream is not None and monotonic() - self._flushed >= FLUSH_SECONDS:
            self._stream.flush()
            self._flushed = monotonic()

    def finish(self, world: World) -> None:
        if self._writer is not None and self.foxglove_rate > 0:
            for source in list(self._dirty):  # what changed since the last Foxglove messages
                table = world.tables.get(source)
                if table is not None:
                    self._write_foxglove(table, force=True)
        if self._writer is not None:
            self._writer.finish()  # type: ignore[no-untyped-call]
            self._writer = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    # -- raw messages ------------------------------------------------------------------------

    def tap_source(self, source: Source, protocol: str, url: str = "") -> None:
        """Record what `source` (speaking `protocol`, opened from `url`) receives."""
        source.tap = functools.partial(self._raw, source, protocol, url)

    def _raw(
        self, source: Source, protocol: str, url: str, data: bytes, now: float, transport: str,
        peer: Address,
    ) -> None:  # fmt: skip
        if self._writer is None:
            return
        key = (source.name, transport, peer)
        channel = self._channels.get(key)
        if channel is None:
            metadata = {
                "protocol": protocol,
                "transport": transport,
                "direction": "received",
                "peer": f"{peer[0]}:{peer[1]}",
                "source": source.name,
                "url": url,
            }
            channel = self._channel(key, RAW_PREFIX + source.name, protocol, 0, metadata)
        self._add(channel, int(source.clock.wall(now) * 1e9), data)
        self.raw_messages += 1
        self._maybe_flush()

    # -- world updates -----------------------------------------------------------------------

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        if self._writer is None:
            return True
        for item in items:
            if isinstance(item, LogEvent):
                channel = self._channel(LOG_TOPIC, LOG_TOPIC, "json", 0, {})
                self._add(channel, int(item.time * 1e9), orjson.dumps(log_line(item), default=str))
                self.messages += 1
                continue
            table = world.tables.get(item.source)
            if table is None or not len(item):
                continue
            self._write_update(table, item)
            if self.foxglove_rate > 0:
                self._mark(table, item)
        if self.foxglove_rate > 0:
            for source in list(self._dirty):
                table = world.tables.get(source)
                if table is not None:
                    self._write_foxglove(table)
        self._maybe_flush()
        return True

    def _write_update(self, table: SourceTable, update: Update) -> None:
        described = self._described.get(table.source)
        if described is None or len(described) < len(table):
            grown = np.zeros(max(len(table), 16) * 2, dtype=bool)
            if described is not None:
                grown[: len(described)] = described
            described = self._described[table.source] = grown
        ids = self._ids.get(table.source)
        if ids is None or len(ids) < len(table):
            ids = self._ids[table.source] = np.array(table.ids, dtype=object)
        schema = self._schema(UPDATE_SCHEMA, "jsonschema", UPDATE_JSON_SCHEMA)
        topic = TOPIC_PREFIX + table.source
        metadata = {"source": table.source}
        if table.protocol is not None:  # whose native names the ids are (replay keeps them)
            metadata["protocol"] = table.protocol
        channel = self._channel(topic, topic, "json", schema, metadata)
        message = update_message(table, update, described, ids)
        self._add(channel, int(update.receive_time * 1e9), message)
        self.messages += 1

    def _mark(self, table: SourceTable, update: Update) -> None:
        """Remember what changed, for the next Foxglove messages of this source."""
        dirty = self._dirty.get(table.source)
        if dirty is None:
            dirty = self._dirty[table.source] = (np.zeros(len(table), dtype=bool), set())
            self._foxglove_due.setdefault(table.source, update.receive_time)
        mask, fields = dirty
        if len(mask) < len(table):
            grown = np.zeros(len(table) * 2, dtype=bool)
            grown[: len(mask)] = mask
            mask = grown
            self._dirty[table.source] = (mask, fields)
        mask[update.slots] = True
        fields.update(update.fields)
        self._latest = max(self._latest, update.receive_time)

    def _write_foxglove(self, table: SourceTable, force: bool = False) -> None:
        """The Foxglove messages of what changed in `table`, once they are due."""
        latest = self._latest
        if not force and latest < self._foxglove_due.get(table.source, 0.0):
            return
        mask, fields = self._dirty.pop(table.source)
        self._foxglove_due[table.source] = latest + 1.0 / self.foxglove_rate
        slots = np.flatnonzero(mask[: len(table)]).astype(np.intp)
        update = Update(table.source, slots, frozenset(fields), latest)
        nanos = int(latest * 1e9)
        for topic, message in self._builder.build(table, update):
            if isinstance(message, bytes):  # a source's telemetry (JSON)
                channel = self._channel(topic, topic, "json", 0, {})
                self._add(channel, nanos, message)
            else:
                kind = type(message)
                schema_of = kind.get_schema()
                schema = self._schema(schema_of.name, schema_of.encoding, schema_of.data)
                channel = self._channel(topic, topic, "protobuf", schema, {})
                self._add(channel, nanos, message.encode())
            self.foxglove_messages += 1
