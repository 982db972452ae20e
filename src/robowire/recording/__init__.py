"""robowire's MCAP recordings (docs/recording.md): the recorder (`writer`), reading them
(`reader`) and replaying them at world or raw level, or re-emitting their raw messages to a
real peer (`replay`)."""

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
    "raw_records",
    "raw_sources",
    "read_recording",
    "recording_records",
]
