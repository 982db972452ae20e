"""Reading robowire MCAP recordings: front to back, chunk by chunk, never through the summary
(a killed recording has none: it gives every message of its whole chunks, then a DecodeError
for the cut end), and what is in them. The world channel `/robowire/<source>` is protobuf
(`robowire.Update`, update.proto) since the recorder went columnar, JSON before: both decode
to a `WorldUpdate`."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lz4.frame  # mcap's own dependencies, for compressed chunks
import numpy as np
import zstandard
from google.protobuf.message import DecodeError as ProtobufDecodeError
from mcap.exceptions import McapError
from mcap.records import Channel, Chunk, McapRecord, Message, Schema
from mcap.stream_reader import StreamReader, breakup_chunk
from zstandard import ZstdError

from robowire.capture import BoundedFile, Record
from robowire.errors import ConfigError, DecodeError
from robowire.recording import update_pb2
from robowire.recording.writer import RAW_PREFIX, TOPIC_PREFIX, VECTOR_WIDTHS
from robowire.world.model import ATTRIBUTES, LINKS, SOURCE_TIME

DAMAGED = (
    McapError,
    ValueError,
    KeyError,
    EOFError,
    struct.error,
    ZstdError,
    RuntimeError,
    OverflowError,
)
"""What the mcap library raises for a damaged file. Found by fuzzing, each escaped untyped:
ZstdError (a flipped bit in a zstd chunk), RuntimeError (lz4's), OverflowError (a record
length inside a chunk past 2**63)."""

MAX_CHUNK = 256 << 20
"""The most a chunk may say it holds uncompressed. robowire's hold about a megabyte
(`writer.CHUNK_BYTES` plus one message); another tool's are megabytes. The library
decompresses into a buffer of the size the chunk claims (found by fuzzing: a claim of
terabytes was a MemoryError), so a larger claim is damage."""


def _claimed_size(chunk: Chunk) -> int:
    """What a chunk says it holds: its own field, or its compressed frame's header if that
    says more (zstd and lz4 allocate what the frame header claims: found by fuzzing, a zstd
    frame claiming 2**61 bytes in a chunk that claimed 672 was a MemoryError)."""
    size = chunk.uncompressed_size
    if chunk.compression == "zstd":
        size = max(size, zstandard.frame_content_size(chunk.data))
    elif chunk.compression == "lz4":
        size = max(size, int(lz4.frame.get_frame_info(chunk.data)["content_size"]))
    return size


def _records(stream: StreamReader) -> Iterator[McapRecord]:
    """The file's records, a chunk's taken out of it once its claimed size is checked."""
    for record in stream.records:
        if not isinstance(record, Chunk):
            yield record
            continue
        claimed = _claimed_size(record)
        if claimed > MAX_CHUNK or claimed > record.uncompressed_size:
            raise McapError(f"a chunk of {record.uncompressed_size} bytes claims {claimed}")
        yield from breakup_chunk(record)


def messages(path: str, schemas: dict[int, Schema] | None = None) -> Iterator[tuple[Any, Any]]:
    """(channel, message) of every message of an MCAP file, in file order; `schemas` (when
    given) gets each schema record as it is read, by id (a ROS 2 bag's types are there)."""
    if not Path(path).is_file():
        raise ConfigError(f"no such file: {path}")
    with BoundedFile(path) as stream:
        read = 0
        channels: dict[int, Channel] = {}
        try:
            for record in _records(StreamReader(stream, emit_chunks=True)):
                if isinstance(record, Channel):
                    channels[record.id] = record
                elif isinstance(record, Schema) and schemas is not None:
                    schemas[record.id] = record
                elif isinstance(record, Message):
                    channel = channels.get(record.channel_id)
                    if channel is None:
                        raise McapError(f"message on unknown channel {record.channel_id}")
                    read += 1
                    yield channel, record
        except DAMAGED as exc:
            if not read:
                raise ConfigError(f"{path}: not a readable MCAP recording ({exc})") from None
            reason = f"recording cut after {read} messages"
            raise DecodeError("mcap", stream.tell(), reason) from None


def recording_records(path: str) -> Iterator[Record]:
    """The world messages (`/robowire/…`) of a recording as capture records (time = log
    time, flow = topic), in file order (the recorder writes them in time order)."""
    for channel, message in messages(path):
        if channel.topic.startswith(TOPIC_PREFIX):
            yield Record(message.data, message.log_time / 1e9, flow=channel.topic)


@dataclass
class NewDevice:
    """A device an update describes for the first time (row: its row in the update)."""

    row: int
    kind: str
    name: str
    attributes: dict[str, Any]
    links: list[str]


@dataclass
class WorldUpdate:
    """One recorded world update of one source, its devices as columns (a row each), as
    `world.update` takes them: what both formats of `/robowire/<source>` decode to."""

    devices: list[str]
    new: list[NewDevice] = field(default_factory=list)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)  # position, orientation...
    source_time: np.ndarray | None = None
    telemetry: dict[str, tuple[np.ndarray, str]] = field(default_factory=dict)  # values, unit
    attributes: list[dict[str, Any]] | None = None  # per row, when the update changed them
    links: list[list[str]] | None = None


def world_message(data: bytes) -> WorldUpdate | dict[str, Any]:
    """A `/robowire/…` message: a `WorldUpdate` (protobuf `robowire.Update`, or the JSON
    object older recordings wrote), or a JSON object (a log line, or a one-device line of the
    oldest recordings). A JSON object starts with `{`, which no `robowire.Update` can (0x7B
    would be field 15 as a group). Raises `DecodeError` for anything else."""
    if data[:1] == b"{":
        try:
            line = json.loads(data)
        except (ValueError, RecursionError) as exc:  # a damaged message (found by fuzzing)
            raise DecodeError("mcap", 0, f"not JSON: {exc}") from None
        if isinstance(line, dict) and "devices" in line:
            return from_json(line)
        if not isinstance(line, dict):
            raise DecodeError("mcap", 0, f"a JSON {type(line).__name__}, not an object")
        return line
    return from_protobuf(data)


def from_protobuf(data: bytes) -> WorldUpdate:
    """A `robowire.Update` (update.proto), checked: every column has a value per device."""
    try:
        message = update_pb2.Update.FromString(data)
        n = len(message.devices)
        update = WorldUpdate(devices=list(message.devices))
        for new in message.new:
            if new.row >= n:
                raise ValueError(f"new device row {new.row} of {n}")
            attributes = json.loads(new.attributes) if new.attributes else {}
            if not isinstance(attributes, dict):
                raise ValueError("attributes are not a JSON object")
            update.new.append(NewDevice(new.row, new.kind, new.name, attributes, list(new.links)))
        for vector in message.vectors:
            if vector.name not in VECTOR_WIDTHS:
                raise ValueError(f"no vector column {vector.name!r}")
            update.vectors[vector.name] = _values(vector, n, VECTOR_WIDTHS[vector.name])
        if message.HasField("source_time"):
            update.source_time = _values(message.source_time, n, 1)
        for tele in message.telemetry:
            update.telemetry[tele.name] = (_values(tele, n, 1), tele.unit)
        if message.attributes:
            update.attributes = [json.loads(a) for a in message.attributes]
            if len(update.attributes) != n or not all(
                isinstance(a, dict) for a in update.attributes
            ):
                raise ValueError("attributes are not a JSON object per device")
        if message.links:
            update.links = [list(links.ids) for links in message.links]
            if len(update.links) != n:
                raise ValueError("links are not a list per device")
    except (ProtobufDecodeError, ValueError, RecursionError) as exc:
        raise DecodeError("mcap", 0, f"not a robowire.Update: {exc}") from None
    return update


def _values(column: Any, n: int, width: int) -> np.ndarray:
    """A `robowire.Column` as float64, (n,) or (n, width)."""
    if (column.width or 1) != width:
        raise ValueError(f"{column.name}: {column.width} values per device, not {width}")
    shape = (n,) if width == 1 else (n, width)
    values = np.array(column.float64 if len(column.float64) else column.float32, np.float64)
    if column.same:
        return np.array(np.broadcast_to(values, shape))  # (a wrong count: ValueError)
    out = np.full(shape, np.nan)
    if column.rows:
        rows = np.array(column.rows, np.intp)
        if len(values) != len(rows) * width or (len(rows) and rows.max() >= n):
            raise ValueError(f"{column.name}: {len(values)} values for {len(rows)} rows")
        out[rows] = values.reshape(out[rows].shape)
    elif len(values):
        out[...] = values.reshape(shape)
    return out


def from_json(line: dict[str, Any]) -> WorldUpdate:
    """The JSON `robowire.Update` of older recordings (jsonschema; float32 where exact, one
    number for every device, null for none, `{"rows", "values"}` for a few)."""
    try:
        ids = line["devices"]
        if not isinstance(ids, list):
            raise TypeError("devices is not a list")
        n = len(ids)
        narrow = set(line.get("float32", ()))

        def values(name: str, data: Any) -> np.ndarray:
            if data is None or isinstance(data, float | int):  # NaN for all, or one value
                return np.full(n, np.nan if data is None else float(data))
            if isinstance(data, dict):  # only the rows that have a value
                out = np.full(n, np.nan)
                out[data["rows"]] = values(name, data["values"])
                return out
            if name in narrow:  # float32 values, written with float32's digits
                return np.array(data, dtype=np.float32).astype(np.float64)
            return np.array(data, dtype=np.float64)

        new = line.get("new") or {}
        described = [new.get(k, ()) for k in ("rows", "kind", "name", "attributes", "links")]
        update = WorldUpdate(
            devices=ids,
            new=[NewDevice(*device) for device in zip(*described, strict=True)],
            vectors={name: values(name, line[name]) for name in VECTOR_WIDTHS if name in line},
            telemetry={
                name: (values(name, tele["values"]), tele["unit"])
                for name, tele in line.get("telemetry", {}).items()
            },
            attributes=line.get(ATTRIBUTES),
            links=line.get(LINKS),
        )
        if SOURCE_TIME in line:
            update.source_time = values(SOURCE_TIME, line[SOURCE_TIME])
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise DecodeError("mcap", 0, f"not a robowire update: {exc!r}") from None
    return update


def read_recording(path: str) -> Iterator[tuple[float, WorldUpdate | dict[str, Any]]]:
    """(log time in seconds, message) of every world message of a recording: a
    `WorldUpdate`, or a JSON object (log lines; one-device lines of the oldest recordings)."""
    for number, record in enumerate(recording_records(path)):
        assert record.time is not None
        try:
            yield record.time, world_message(record.data)
        except DecodeError as exc:
            reason = f"world message {number} on {record.flow}: {exc.reason}"
            raise DecodeError("mcap", 0, reason) from None


@dataclass
class RawChannel:
    """What a `/raw/<source>` channel says about itself (its metadata)."""

    source: str
    protocol: str
    transport: str
    peer: tuple[str, int]
    url: str = ""
    ids: set[int] = field(default_factory=set)


@dataclass
class Contents:
    """What a recording holds: its time span and its raw channels, by source."""

    start: float | None = None
    end: float | None = None
    world_messages: int = 0
    native: dict[str, str] = field(default_factory=dict)  # source -> its ids' protocol
    raw: dict[str, list[RawChannel]] = field(default_factory=dict)  # source -> its channels

    @property
    def duration(self) -> float:
        return 0.0 if self.start is None or self.end is None else self.end - self.start

    def protocols(self) -> set[str]:
        return {c.protocol for channels in self.raw.values() for c in channels}


def raw_channel(channel: Any) -> RawChannel:
    metadata = channel.metadata
    host, _, port = metadata.get("peer", ":0").rpartition(":")
    return RawChannel(
        source=metadata.get("source", channel.topic.removeprefix(RAW_PREFIX)),
        protocol=metadata.get("protocol", channel.message_encoding),
        transport=metadata.get("transport", "udp"),
        peer=(host, int(port or 0)),
        url=metadata.get("url", ""),
    )


def contents(path: str) -> Contents:
    """One pass over the file: its span and raw channels (a cut end is not an error here)."""
    found = Contents()
    seen: dict[int, RawChannel] = {}
    try:
        for channel, message in messages(path):
            t = message.log_time / 1e9
            if channel.topic.startswith(RAW_PREFIX):
                if channel.id not in seen:
                    raw = seen[channel.id] = raw_channel(channel)
                    same = [
                        c
                        for c in found.raw.setdefault(raw.source, [])
                        if (c.transport, c.peer) == (raw.transport, raw.peer)
                    ]
                    if same:
                        raw = seen[channel.id] = same[0]
                    else:
                        found.raw[raw.source].append(raw)
                    raw.ids.add(channel.id)
            elif channel.topic.startswith(TOPIC_PREFIX):
                found.world_messages += 1
                if "protocol" in channel.metadata:
                    source = channel.topic.removeprefix(TOPIC_PREFIX)
                    found.native[source] = channel.metadata["protocol"]
            else:
                continue
            found.start = t if found.start is None else min(found.start, t)
            found.end = t if found.end is None else max(found.end, t)
    except DecodeError:
        pass
    return found


def raw_records(path: str, source: str, default_port: int) -> Iterator[Record]:
    """The raw messages one source received, as the capture records a pcap of them would
    give: the peer's port is the protocol's `default_port` (what the capture readers use to
    tell a direction: "from the robot", "from the VSM"), the local end is 127.0.0.1:0."""
    local = ("127.0.0.1", 0)
    peers: dict[int, tuple[str, str, tuple[str, int]]] = {}
    for channel, message in messages(path):
        if not channel.topic.startswith(RAW_PREFIX):
            continue
        found = peers.get(channel.id)
        if found is None:
            raw = raw_channel(channel)
            if raw.source != source:
                peers[channel.id] = ("", "", local)
                continue
            peer = (raw.peer[0], default_port)
            flow = f"{raw.peer[0]}:{raw.peer[1]}>{local[0]}:{local[1]}"
            found = peers[channel.id] = (raw.transport, flow, peer)
        transport, flow, peer = found
        if not transport:
            continue
        yield Record(
            message.data,
            message.log_time / 1e9,
            "udp" if transport == "udp" else "tcp",
            src=peer,
            dst=local,
            flow=flow,
        )
