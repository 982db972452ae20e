"""robowire's MCAP recordings (docs/recording.md): the recorder (`writer`), reading them
(`reader`) and replaying them at world or raw level, or re-emitting their raw messages to a
real peer (`replay`).

`open_recorder` and `open_source` are what the registries open (`robowire.sinks.RECORDERS`,
`robowire.addresses.SOURCES`): `record -o run.mcap` and `listen run.mcap`.
"""

from robowire.endpoints import Endpoint
from robowire.recording.reader import (
    Contents,
    NewDevice,
    WorldUpdate,
    contents,
    messages,
    raw_records,
    read_recording,
    recording_records,
)
from robowire.recording.replay import McapSource, RawEmitter, RecordingAdapter, raw_sources
from robowire.recording.writer import (
    CHUNK_SECONDS,
    LOG_TOPIC,
    RAW_PREFIX,
    TOPIC_PREFIX,
    McapRecorder,
)

__all__ = [
    "CHUNK_SECONDS",
    "LOG_TOPIC",
    "RAW_PREFIX",
    "TOPIC_PREFIX",
    "Contents",
    "McapRecorder",
    "McapSource",
    "NewDevice",
    "RawEmitter",
    "RecordingAdapter",
    "WorldUpdate",
    "contents",
    "messages",
    "open_recorder",
    "open_source",
    "raw_records",
    "raw_sources",
    "read_recording",
    "recording_records",
]


def open_recorder(path: str, foxglove_rate: float) -> McapRecorder:
    """`record -o run.mcap`: the world and every raw message into an MCAP file."""
    return McapRecorder(path, foxglove_rate=foxglove_rate)


def open_source(endpoint: Endpoint) -> McapSource:
    """`listen run.mcap` / `replay run.mcap`: a recording's world updates, paced by `speed`."""
    endpoint.check_options({"speed", "time"}, "a recording")
    return McapSource(endpoint)
