"""ROS 2 bags as containers, both ways (docs/ros2.md, "Bags"): what is in one and its
messages as (time, topic, CDR bytes), and writing one. No message is decoded here.

Read: a rosbag2 directory (`metadata.yaml` and its storage files, MCAP or SQLite), or one
storage file alone (a bare ROS 2 `.mcap`, a `.db3`). A cut or damaged storage file gives its
messages up to the damage, then a `DecodeError` that says where (`CaptureSource` plays what
came before it). What is not a ROS 2 bag is one `ConfigError` line: a directory without
`metadata.yaml`, a storage plugin other than mcap/sqlite3, a ROS 1 bag.

Write: `BagWriter` makes a rosbag2 directory with one MCAP storage file (profile `ros2`,
`ros2msg` schemas, `cdr` messages, each channel's offered QoS and type hash) and its
`metadata.yaml` (version 9, what Jazzy and Kilted write), rewritten at the end with the
counts; written at the start too, so a killed recording is still a bag.
"""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard
from mcap.records import Schema
from mcap.stream_reader import StreamReader
from mcap.writer import Writer
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from robowire.capture import BoundedFile
from robowire.errors import ConfigError, DecodeError
from robowire.recording.reader import DAMAGED
from robowire.recording.reader import messages as mcap_messages
from robowire.recording.writer import COMPRESSION, PackedChunkIndexes
from robowire.transport.target import FileTarget
from robowire.version import __version__

METADATA = "metadata.yaml"
STORAGES = ("mcap", "sqlite3")
"""The storage plugins robowire reads: rosbag2's default since Iron (MCAP), and before it."""
BAG_SUFFIXES = (".mcap", ".db3", ".bag")
"""Files a bag source opens alone (`.bag`: to say it is ROS 1's)."""
ROS1_MAGIC = b"#ROSBAG V"
METADATA_VERSION = 9
CHUNK_BYTES = 1 << 20  # the mcap writer's default; a chunk is also closed by `flush`
PROTOCOL = "rosbag2"  # (what a DecodeError names)


@dataclass(frozen=True, slots=True)
class Topic:
    """A topic of a bag: its ROS type (`pkg/msg/Name`), message definition (`ros2msg` text,
    when the bag has it), RIHS01 type hash and offered QoS (as the bag has them, YAML)."""

    name: str
    type: str
    definition: str = ""
    type_hash: str = ""
    qos: str = ""
    encoding: str = "cdr"


@dataclass(frozen=True, slots=True)
class BagMessage:
    time: int  # log time, nanoseconds since the epoch
    topic: Topic
    data: bytes  # CDR with its encapsulation header


@dataclass
class Bag:
    """What `open_bag` found: the storage files to read, in order, and what the bag says
    about itself (start and duration in nanoseconds; counts per topic name)."""

    path: str
    storage: str
    files: list[Path]
    topics: dict[str, Topic] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    start: int | None = None
    duration: int = 0
    compression: str = ""  # "zstd" when each message is compressed (mode "message")


def open_bag(path: str) -> Bag:
    """The bag at `path` (a rosbag2 directory, or a `.mcap` / `.db3` file), or a one-line
    `ConfigError` saying why it is not one robowire reads."""
    where = Path(path)
    if where.is_dir():
        return _directory(where)
    if not where.is_file():
        raise ConfigError(f"no such file or directory: {path}")
    head = _head(where)
    if head.startswith(ROS1_MAGIC):
        raise ConfigError(_ros1(path))
    if where.suffix.lower() == ".db3" or head.startswith(b"SQLite format 3\0"):
        bag = Bag(path, "sqlite3", [where])
        _sqlite_summary(bag, where)
        return bag
    profile = mcap_profile(where)
    if profile is None:
        raise ConfigError(f"{path}: not a ROS 2 bag (neither MCAP nor SQLite, nor a directory)")
    if profile == "ros1":
        raise ConfigError(_ros1(path))
    bag = Bag(path, "mcap", [where])
    _mcap_summary(bag)
    return bag


def _ros1(path: str) -> str:
    return (
        f"{path}: a ROS 1 bag; robowire reads ROS 2 bags (convert it: "
        f"rosbags-convert --src {path} --dst DIR)"
    )


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(16)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None


def mcap_profile(path: Path) -> str | None:
    """The profile in an MCAP file's header (`ros2`, `ros1`, "" for robowire's own), or None
    when it is not MCAP."""
    try:
        with BoundedFile(str(path)) as f:  # (a damaged length is not an allocation)
            header = next(iter(StreamReader(f).records))
    except (*DAMAGED, StopIteration, OSError):
        return None
    profile = getattr(header, "profile", None)
    return profile if isinstance(profile, str) else None


def _directory(where: Path) -> Bag:
    meta_path = where / METADATA
    if not meta_path.is_file():
        raise ConfigError(
            f"{where}: no {METADATA}, so not a rosbag2 bag (a storage file in it, .mcap or "
            ".db3, can be read alone)"
        )
    try:
        loaded = YAML(typ="safe").load(meta_path.read_text())
        info = loaded["rosbag2_bagfile_information"]
        storage = str(info["storage_identifier"])
        names = [str(n) for n in info["relative_file_paths"]]
    except (YAMLError, KeyError, TypeError, UnicodeDecodeError, OSError) as exc:
        raise ConfigError(f"{meta_path}: not rosbag2 metadata ({type(exc).__name__})") from None
    if storage not in STORAGES:
        known = ", ".join(STORAGES)
        raise ConfigError(
            f"{where}: storage plugin {storage!r} is not one robowire reads ({known})"
        )
    compression = str(info.get("compression_format") or "")
    mode = str(info.get("compression_mode") or "").lower()
    if compression and (compression != "zstd" or mode != "message"):
        raise ConfigError(
            f"{where}: {compression} {mode}-compressed bags are not read (decompress it: "
            f"ros2 bag convert, or rosbags-convert)"
        )
    files = [where / n for n in names]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ConfigError(
            f"{where}: {METADATA} names a storage file that is not there: {missing[0]}"
        )
    bag = Bag(str(where), storage, files, compression=compression)
    for entry in info.get("topics_with_message_count") or []:
        meta = entry.get("topic_metadata", {})
        name = str(meta.get("name", ""))
        qos = meta.get("offered_qos_profiles", "")
        bag.topics[name] = Topic(
            name,
            str(meta.get("type", "")),
            type_hash=str(meta.get("type_description_hash", "")),
            qos=qos if isinstance(qos, str) else _yaml_text(qos),
            encoding=str(meta.get("serialization_format", "cdr")),
        )
        bag.counts[name] = int(entry.get("message_count", 0))
    start = info.get("starting_time", {}).get("nanoseconds_since_epoch")
    bag.start = int(start) if start is not None else None
    bag.duration = int(info.get("duration", {}).get("nanoseconds", 0))
    return bag


def _yaml_text(value: Any) -> str:
    out = io.StringIO()
    yaml = YAML(typ="safe")
    # shared values (a file's duration is the bag's) written out each time, as rosbag2 writes
    # them, not as &anchors and *aliases, which some readers of metadata.yaml do not follow
    yaml.representer.ignore_aliases = lambda _data: True
    yaml.dump(value, out)
    return out.getvalue().strip()


def _mcap_summary(bag: Bag) -> None:
    """A bare MCAP's topics, counts and span, in one pass (a damaged end is not an error
    here: the messages before it count)."""
    try:
        for message in read(bag):
            _seen(bag, message)
    except DecodeError:
        pass


def _sqlite_summary(bag: Bag, path: Path) -> None:
    try:
        with _connect(path) as db:
            topics = _sqlite_topics(db)
            rows = db.execute(
                "SELECT topic_id, count(*), min(timestamp), max(timestamp) FROM messages "
                "GROUP BY topic_id"
            ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{path}: not a readable rosbag2 SQLite file ({exc})") from None
    for topic_id, count, _, _ in rows:
        topic = topics.get(topic_id)
        if topic is not None:
            bag.topics[topic.name] = topic
            bag.counts[topic.name] = int(count)
    times = [t for r in rows for t in r[2:] if isinstance(t, int)]  # (damage: NULL, text)
    if times:
        bag.start = min(times)
        bag.duration = max(times) - bag.start


def _seen(bag: Bag, message: BagMessage) -> None:
    name = message.topic.name
    bag.topics.setdefault(name, message.topic)
    bag.counts[name] = bag.counts.get(name, 0) + 1
    if bag.start is None or message.time < bag.start:
        end = (bag.start or message.time) + bag.duration
        bag.start = message.time
        bag.duration = end - message.time
    bag.duration = max(bag.duration, message.time - bag.start)


# -- reading ---------------------------------------------------------------------------------


def read(bag: Bag) -> Iterator[BagMessage]:
    """Every message of the bag, file by file in the bag's order (each file in its own order,
    which rosbag2 writes in time order); a `DecodeError` after the last whole message when a
    file is cut or damaged."""
    done = 0
    unzip = zstandard.ZstdDecompressor() if bag.compression else None
    for path in bag.files:
        each = _mcap(path, bag) if bag.storage == "mcap" else _sqlite(path, bag)
        try:
            for message in each:
                if unzip is not None:
                    message = BagMessage(message.time, message.topic, _unzip(unzip, message))
                done += 1
                yield message
        except DecodeError as exc:
            reason = f"{path.name}: {exc.reason} ({done} messages of the bag played)"
            raise DecodeError(PROTOCOL, exc.offset, reason) from None


def _unzip(unzip: zstandard.ZstdDecompressor, message: BagMessage) -> bytes:
    try:
        return unzip.decompress(message.data, max_output_size=len(message.data) * 64 + 4096)
    except zstandard.ZstdError as exc:
        raise DecodeError(PROTOCOL, 0, f"{message.topic.name}: not zstd ({exc})") from None


def _mcap(path: Path, bag: Bag) -> Iterator[BagMessage]:
    schemas: dict[int, Schema] = {}
    topics: dict[int, Topic] = {}
    try:
        for channel, message in mcap_messages(str(path), schemas):
            topic = topics.get(channel.id)
            if topic is None:
                topic = topics[channel.id] = _channel_topic(channel, schemas, bag)
            yield BagMessage(message.log_time, topic, message.data)
    except DecodeError as exc:  # (the MCAP reader's words are about robowire's recordings)
        raise DecodeError(PROTOCOL, exc.offset, "cut or damaged here") from None


def _channel_topic(channel: Any, schemas: dict[int, Schema], bag: Bag) -> Topic:
    """A channel's topic: its type and definition from its schema (`ros2msg`), its hash and
    QoS from its metadata (or from metadata.yaml when the channel does not say)."""
    known = bag.topics.get(channel.topic)
    schema = schemas.get(channel.schema_id)
    msgtype = schema.name if schema is not None else (known.type if known else "")
    ros2msg = schema is not None and schema.encoding == "ros2msg"
    definition = schema.data.decode("utf-8", "replace") if ros2msg and schema else ""
    metadata = channel.metadata
    return Topic(
        channel.topic,
        msgtype,
        definition,
        metadata.get("topic_type_hash") or (known.type_hash if known else ""),
        metadata.get("offered_qos_profiles") or (known.qos if known else ""),
        channel.message_encoding,
    )


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _sqlite_topics(db: sqlite3.Connection) -> dict[int, Topic]:
    columns = {row[1] for row in db.execute("PRAGMA table_info(topics)")}
    hashes = "type_description_hash" if "type_description_hash" in columns else "''"
    definitions: dict[str, str] = {}
    if db.execute("SELECT 1 FROM sqlite_master WHERE name='message_definitions'").fetchone():
        for msgtype, encoding, text in db.execute(
            "SELECT topic_type, encoding, encoded_message_definition FROM message_definitions"
        ):
            if encoding == "ros2msg":
                definitions[msgtype] = text
    return {
        topic_id: Topic(name, msgtype, definitions.get(msgtype, ""), type_hash, qos, encoding)
        for topic_id, name, msgtype, encoding, qos, type_hash in db.execute(
            f"SELECT id, name, type, serialization_format, offered_qos_profiles, {hashes} "
            "FROM topics"
        )
    }


def _sqlite(path: Path, bag: Bag) -> Iterator[BagMessage]:
    done = 0
    try:
        db = _connect(path)
        try:
            topics = _sqlite_topics(db)
            rows = db.execute("SELECT topic_id, timestamp, data FROM messages ORDER BY timestamp")
            for topic_id, nanos, data in rows:
                topic = topics.get(topic_id)
                if topic is None:
                    raise DecodeError(PROTOCOL, done, f"a message of unknown topic {topic_id}")
                if not isinstance(nanos, int) or not isinstance(data, bytes):
                    raise DecodeError(PROTOCOL, done, f"message {done + 1} is not a time and bytes")
                done += 1
                yield BagMessage(nanos, topic, data)
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        if not done:
            raise ConfigError(f"{path}: not a readable rosbag2 SQLite file ({exc})") from None
        raise DecodeError(PROTOCOL, done, f"damaged after message {done} ({exc})") from None


# -- writing ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Qos:
    """A topic's offered QoS as rosbag2 stores it (the rest: rmw's defaults)."""

    reliability: str = "reliable"  # or "best_effort"
    durability: str = "volatile"  # or "transient_local"
    depth: int = 10

    def profile(self) -> dict[str, Any]:
        """One entry of `offered_qos_profiles` (metadata version 9: names, not numbers)."""
        zero = {"sec": 0, "nsec": 0}  # the rmw default: no deadline, lifespan or lease
        return {
            "history": "keep_last",
            "depth": self.depth,
            "reliability": self.reliability,
            "durability": self.durability,
            "deadline": zero,
            "lifespan": zero,
            "liveliness": "automatic",
            "liveliness_lease_duration": zero,
            "avoid_ros_namespace_conventions": False,
        }


@dataclass
class _Written:
    topic: Topic
    qos: Qos
    channel: int
    count: int = 0


class BagWriter:
    """A rosbag2 bag being written at `path` (a new directory): `topic` registers a topic,
    `write` adds a message, `flush` closes the open chunk (a killed recording loses at most
    what came since), `close` ends the MCAP (summary) and writes the final metadata."""

    def __init__(self, path: str, distro: str = "robowire") -> None:
        self.path = Path(path)
        self.distro = distro
        if self.path.exists():
            raise ConfigError(f"cannot write {path}: it exists (a rosbag2 bag is a new directory)")
        if not self.path.parent.is_dir():
            raise ConfigError(f"cannot write {path}: no such directory: {self.path.parent}")
        self.file = self.path / f"{self.path.name}_0.mcap"
        try:
            self.path.mkdir()
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {exc.strerror}") from None
        # whole records: a disk that fills ends it with one error, the file cut after the last
        self._stream = FileTarget(str(self.file), "record")
        self._writer = Writer(
            self._stream,  # type: ignore[arg-type]  # (it writes, tells and flushes: all it uses)
            chunk_size=CHUNK_BYTES,
            compression=COMPRESSION,
        )
        PackedChunkIndexes.install(self._writer)
        self._writer.start(profile="ros2", library=f"robowire {__version__}")
        self._schemas: dict[str, int] = {}
        self._topics: dict[str, _Written] = {}
        self._by_channel: dict[int, _Written] = {}
        self.start: int | None = None
        self.end = 0
        self.messages = 0
        self._write_metadata()

    def topic(self, topic: Topic, qos: Qos) -> int:
        """The channel of `topic` (registered the first time), for `write`."""
        known = self._topics.get(topic.name)
        if known is not None:
            return known.channel
        schema = self._schemas.get(topic.type)
        if schema is None:
            schema = self._schemas[topic.type] = self._writer.register_schema(
                topic.type, "ros2msg", topic.definition.encode()
            )
        metadata = {
            "offered_qos_profiles": _yaml_text([qos.profile()]),
            "topic_type_hash": topic.type_hash,
        }
        channel = self._writer.register_channel(topic.name, "cdr", schema, metadata)
        self._topics[topic.name] = self._by_channel[channel] = _Written(topic, qos, channel)
        return channel

    def write(self, channel: int, nanos: int, data: bytes) -> None:
        self._writer.add_message(channel, nanos, data, nanos)
        self._by_channel[channel].count += 1
        self.messages += 1
        if self.start is None:
            self.start = nanos
        self.end = max(self.end, nanos)

    def flush(self) -> None:
        self._writer.flush()  # type: ignore[no-untyped-call]

    def close(self) -> None:
        if self._stream.closed:
            return
        self._writer.add_metadata("rosbag2", {"serialized_metadata": self._metadata_text()})
        self._writer.finish()  # type: ignore[no-untyped-call]
        self._stream.close()
        self._write_metadata()

    def _metadata(self) -> dict[str, Any]:
        start = self.start or 0
        duration = {"nanoseconds": self.end - start if self.start is not None else 0}
        starting = {"nanoseconds_since_epoch": start}
        return {
            "version": METADATA_VERSION,
            "storage_identifier": "mcap",
            "duration": duration,
            "starting_time": starting,
            "message_count": self.messages,
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": w.topic.name,
                        "type": w.topic.type,
                        "serialization_format": "cdr",
                        "offered_qos_profiles": [w.qos.profile()],
                        "type_description_hash": w.topic.type_hash,
                    },
                    "message_count": w.count,
                }
                for w in self._topics.values()
            ],
            "compression_format": "",
            "compression_mode": "",
            "relative_file_paths": [self.file.name],
            "files": [
                {
                    "path": self.file.name,
                    "starting_time": starting,
                    "duration": duration,
                    "message_count": self.messages,
                }
            ],
            "custom_data": {},
            "ros_distro": self.distro,
        }

    def _metadata_text(self) -> str:
        return _yaml_text(self._metadata())

    def _write_metadata(self) -> None:
        text = _yaml_text({"rosbag2_bagfile_information": self._metadata()})
        try:
            (self.path / METADATA).write_text(text + "\n")
        except OSError as exc:
            raise ConfigError(f"cannot write {self.path / METADATA}: {exc.strerror}") from None
