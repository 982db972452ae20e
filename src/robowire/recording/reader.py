"""Reading robowire MCAP recordings: front to back, chunk by chunk, never through the summary
(a killed recording has none: it gives every message of its whole chunks, then a DecodeError
for the cut end), and what is in them."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lz4.frame  # mcap's own dependencies, for compressed chunks
import zstandard
from mcap.exceptions import McapError
from mcap.records import Channel, Chunk, McapRecord, Message
from mcap.stream_reader import StreamReader, breakup_chunk
from zstandard import ZstdError

from robowire.capture import BoundedFile, Record
from robowire.errors import ConfigError, DecodeError
from robowire.recording.writer import RAW_PREFIX, TOPIC_PREFIX

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


def messages(path: str) -> Iterator[tuple[Any, Any]]:
    """(channel, message) of every message of an MCAP file, in file order."""
    if not Path(path).is_file():
        raise ConfigError(f"no such file: {path}")
    with BoundedFile(path) as stream:
        read = 0
        channels: dict[int, Channel] = {}
        try:
            for record in _records(StreamReader(stream, emit_chunks=True)):
                if isinstance(record, Channel):
                    channels[record.id] = record
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


def read_recording(path: str) -> Iterator[tuple[float, dict[str, Any]]]:
    """(log time in seconds, JSON object) of every world message of a recording."""
    for number, record in enumerate(recording_records(path)):
        assert record.time is not None
        try:
            yield record.time, json.loads(record.data)
        except (ValueError, RecursionError) as exc:  # a damaged message (found by fuzzing)
            reason = f"world message {number} on {record.flow} is not JSON: {exc}"
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
