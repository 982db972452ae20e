"""Replaying robowire MCAP recordings, at either level (see docs/recording.md):

* world (`McapSource`): the `/robowire/<source>` updates back into the world, under the
  recorded source names, with the recorded timing divided by `speed`;
* raw (`raw_sources`): each recorded source's raw messages through its protocol's own file
  source (sessions and adapter, as live), one source per recorded source, under its name;
* re-emission (`RawEmitter`): the raw messages of one protocol sent again to a real peer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from robowire import protocols
from robowire.addresses import parse_endpoint
from robowire.capture import Record, batches
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, DecodeError, RobowireError
from robowire.recording.reader import (
    WorldUpdate,
    contents,
    from_json,
    messages,
    raw_channel,
    raw_records,
    recording_records,
    world_message,
)
from robowire.recording.writer import LOG_TOPIC, RAW_PREFIX, TOPIC_PREFIX
from robowire.service import CaptureSource, Service, Source, time_option
from robowire.transport.tcp import StreamDriver, serve_stream
from robowire.transport.udp import open_udp_socket, send_datagrams
from robowire.wire import Address, PacketDropped, SessionStats
from robowire.world import World
from robowire.world.model import ATTRIBUTES, LINKS

log = logging.getLogger("robowire")


class RecordingAdapter:
    """Recorded world messages back into the world: `(source, message)` events, where the
    message is a `WorldUpdate` (a `/robowire/<source>` update, devices as columns), a log
    line, or a one-device line of the oldest recordings (what `listen --json` prints)."""

    def __init__(
        self,
        world: World,
        on_drop: Callable[[str], None] | None = None,
        native: dict[str, str] | None = None,
    ) -> None:
        self.world = world
        self.on_drop = on_drop  # a message that is not what the recorder writes: said here
        self.native = {} if native is None else native  # source -> protocol of its ids
        self._slots: dict[str, tuple[list[str], np.ndarray]] = {}  # source -> last ids, slots

    def apply(self, events: Sequence[Any], receive_time: float) -> int:
        applied = 0
        for event in events:
            if isinstance(event, PacketDropped):
                continue  # counted by the source
            source, line = event
            try:
                if isinstance(line, dict) and "devices" in line:
                    line = from_json(line)
                if isinstance(line, WorldUpdate):
                    self._update(source, line, receive_time)
                elif not isinstance(line, dict):
                    raise TypeError(f"a {type(line).__name__}, not an object")
                elif "log" in line:
                    self.world.log(
                        line["source"],
                        line["device"],
                        line["log"],
                        time=line["time"],
                        level=line.get("level", "info"),
                    )
                else:
                    self._device(line, receive_time)
                applied += 1
            except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
                if self.on_drop is not None:
                    self.on_drop(f"{source or 'log'}: not a robowire update ({exc!r})")
        return applied

    def _update(self, source: str, update: WorldUpdate, receive_time: float) -> None:
        table = self.world.table(source)
        if table.protocol is None:
            table.protocol = self.native.get(source)
        ids = update.devices
        for new in update.new:
            slot = table.slot(ids[new.row], new.kind, new.name)
            table.attributes[slot].update(new.attributes)
            table.links[slot] = tuple(new.links)
        cached = self._slots.get(source)
        if cached is not None and cached[0] == ids:
            slots = cached[1]
        else:
            slots = table.slots(ids)  # devices described before (or unknown: kind "device")
            self._slots[source] = (ids, slots)
        changed: set[str] = set()
        if update.attributes is not None:
            for slot, attributes in zip(slots.tolist(), update.attributes, strict=True):
                table.attributes[slot].update(attributes)
            changed.add(ATTRIBUTES)
        if update.links is not None:
            for slot, links in zip(slots.tolist(), update.links, strict=True):
                table.links[slot] = tuple(links)
            changed.add(LINKS)
        self.world.update(
            source,
            slots,
            receive_time=receive_time,
            source_time=update.source_time,
            **update.vectors,
            telemetry=update.telemetry,
            changed=changed,
        )

    def _device(self, line: dict[str, Any], receive_time: float) -> None:
        self.world.update_device(
            line["source"],
            line["device"],
            receive_time=receive_time,
            kind=line.get("kind", "device"),
            name=line.get("name"),
            source_time=line.get("source_time"),
            position=line.get("position"),
            orientation=line.get("orientation"),
            velocity=line.get("velocity"),
            geodetic=line.get("geodetic"),
            telemetry={k: (v["value"], v["unit"]) for k, v in line.get("telemetry", {}).items()},
            attributes=line.get("attributes"),
            links=line.get("links"),
        )


class Progress:
    """Where a replay is in its recording (for the progress bar)."""

    start: float | None = None
    duration = 0.0
    position = 0.0

    def seen(self, record: Record) -> None:
        if record.time is not None and self.start is not None:
            self.position = max(self.position, record.time - self.start)


class McapSource(CaptureSource):
    """Replays a recording's world updates, with its recorded timing divided by `?speed=`
    (1 unless given; `replay --speed` sets it)."""

    def __init__(self, endpoint: Endpoint, speed: float = 1.0) -> None:
        if "speed" not in endpoint.options:
            options = {**endpoint.options, "speed": str(speed)}
            endpoint = dataclasses.replace(endpoint, options=options)
        super().__init__("replay", endpoint, recording_records)
        if self.speed <= 0:
            raise ConfigError("replay speed must be positive")
        self.progress = Progress()
        self.native: dict[str, str] = {}  # recorded source -> the protocol of its ids

    native_table = False  # the recorded sources' tables say their own protocols

    def new_adapter(self, world: World) -> RecordingAdapter:
        return RecordingAdapter(world, self.stats.drop, self.native)

    def records(self) -> Iterator[Record]:
        if self.progress.start is None:
            found = contents(self.path)
            self.native.update(found.native)
            self.progress.start, self.progress.duration = found.start, found.duration
        return super().records()

    def feed(self, record: Record, now: float) -> list[Any]:
        self.progress.seen(record)
        source = "" if record.flow == LOG_TOPIC else record.flow.removeprefix(TOPIC_PREFIX)
        try:
            return [(source, world_message(record.data))]
        except DecodeError as exc:  # not a world message (damaged)
            reason = f"{record.flow}: {exc.reason}"
            return [PacketDropped(protocol="mcap", reason=reason, size=len(record.data))]


def raw_sources(endpoint: Endpoint, speed: float) -> list[CaptureSource]:
    """`replay --level raw`: one file source per recorded source, of that source's protocol,
    reading its raw messages (named as the recorded source, so the world is the same)."""
    assert endpoint.path is not None
    path = endpoint.path
    found = contents(path)
    if not found.raw:
        raise ConfigError(f"{path}: no raw messages recorded (record it again with this version)")
    out: list[CaptureSource] = []
    progress = Progress()
    progress.start, progress.duration = found.start, found.duration
    for source, channels in found.raw.items():
        protocol = protocols.get(channels[0].protocol)
        file_endpoint = Endpoint(
            raw=path,
            protocol=protocol.name,
            scheme="file",
            path=path,
            options={"speed": str(speed)},
        )
        opened = protocol.source(file_endpoint)
        assert isinstance(opened, CaptureSource)
        opened.name = source
        port = protocol.default_port

        def records(source: str = source, port: int = port) -> Iterator[Record]:
            yield Record(b"", found.start)  # paced from the recording's start, as the others
            for record in raw_records(path, source, port):
                progress.seen(record)
                yield record

        def feed(record: Record, now: float, own: Any = opened.feed) -> list[Any]:
            return own(record, now) if record.data else []  # (the start mark feeds nothing)

        setattr(opened, "records", records)  # noqa: B010 - this source reads the raw channel
        setattr(opened, "feed", feed)  # noqa: B010
        live = _live_source(channels[0].url)
        if live is not None:  # the adapter the live source had (its device filter, options)
            setattr(opened, "new_adapter", live.new_adapter)  # noqa: B010
        _datagrams_join_their_stream(opened)
        setattr(opened, "progress", progress)  # noqa: B010 - one bar for all of them
        out.append(opened)
    return out


def _live_source(url: str) -> Source | None:
    """The source the recording was made with (not connected), if its URL still opens."""
    if not url:
        return None
    try:
        _, endpoint = time_option(parse_endpoint(url))
        return protocols.get(endpoint.protocol).source(endpoint)
    except RobowireError:
        return None


def _datagrams_join_their_stream(source: CaptureSource) -> None:
    """A datagram no session of the protocol's own takes (VRPN's UDP reports, which a
    capture would match to the client's UDP description, not recorded since it was sent, not
    received) goes to the session of the same source's stream."""
    own = source.session_for

    def session_for(record: Record) -> Any | None:
        found = own(record)
        if found is None and record.transport == "udp":
            streams = [s for flow, s in source.sessions.items() if flow != record.flow]
            return streams[0] if streams else None
        return found

    setattr(source, "session_for", session_for)  # noqa: B010


class RawEmitter(Service):
    """`replay run.mcap --to PROTOCOL://HOST:PORT` for a recorded protocol: the raw messages
    of the first source recorded in it, again, with their recorded timing divided by `speed`.
    Datagrams are sent to HOST:PORT; the recorded stream (its first connection) is played to
    each client that connects to HOST:PORT (TCP), from its start, at the recorded pace from
    that client's connection."""

    role = "sim"

    def __init__(self, path: str, target: Endpoint, speed: float = 1.0, loop: bool = False):
        super().__init__(f"replay:{path}")
        self.path = path
        self.protocol = target.protocol
        self.host = target.host
        self.port = target.port_or(protocols.get(target.protocol).default_port)
        self.speed = speed
        self.loop = loop
        self.progress = Progress()
        found = contents(path)
        self.progress.start, self.progress.duration = found.start, found.duration
        sources = [cs for cs in found.raw.values() if cs[0].protocol == self.protocol]
        if not sources:
            raise ConfigError(f"{path}: no raw {self.protocol} messages recorded")
        # the first recorded source of the protocol: its datagrams, and its first connection's
        # stream (a reconnection's stream starts over, it does not continue the first)
        channels = sources[0]
        self.source = channels[0].source
        streams = [c for c in channels if c.transport == "tcp"]
        self.channel_ids = {i for c in channels if c.transport == "udp" for i in c.ids}
        self.channel_ids |= streams[0].ids if streams else set()
        self.datagrams = any(c.transport == "udp" for c in channels)
        self.stream = bool(streams)
        self.announce = "sending to" if not self.stream else "listening on"
        self.sent = 0
        self.clients = 0

    def _records(self, transport: str) -> Iterator[Record]:
        for channel, message in messages(self.path):
            if not channel.topic.startswith(RAW_PREFIX):
                continue
            if channel.id in self.channel_ids and raw_channel(channel).transport == transport:
                yield Record(message.data, message.log_time / 1e9, "stream")

    async def _play(self, transport: str, send: Any, track: bool) -> None:
        while True:
            try:
                async for batch in batches(self._records(transport), self.speed):
                    for record in batch:
                        if track:
                            self.progress.seen(record)
                    send([r.data for r in batch])
            except DecodeError as exc:  # a killed recording: what it had, then this
                log.warning("%s: %s", self.name, exc)
            if not self.loop:
                return

    async def run(self, world: World) -> None:
        tasks: list[asyncio.Task[None]] = []
        try:
            if self.stream:
                tasks.append(asyncio.create_task(self._serve()))
            if self.datagrams:
                tasks.append(asyncio.create_task(self._send_datagrams(not self.stream)))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _send_datagrams(self, announce: bool) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        local = ("::1" if family == socket.AF_INET6 else "127.0.0.1", 0)
        if not self.host.startswith("127.") and self.host not in ("::1", "localhost"):
            local = ("::" if family == socket.AF_INET6 else "0.0.0.0", 0)
        sock = open_udp_socket(local)
        target: Address = (self.host, self.port)
        if announce:
            self.listening(target)
        try:

            def send(datagrams: list[bytes]) -> None:
                self.stats.dropped += send_datagrams(sock, [(d, target) for d in datagrams])
                self.sent += len(datagrams)

            await self._play("udp", send, track=True)
            if not self.stream:
                await asyncio.sleep(0.1)  # let the last datagrams leave
        finally:
            sock.close()

    async def _serve(self) -> None:
        plays: set[asyncio.Task[None]] = set()

        def opened(driver: StreamDriver) -> None:
            self.clients += 1
            session = driver.session
            assert isinstance(session, _Player)

            def send(chunks: list[bytes]) -> None:
                if driver.connected:
                    session.pending += b"".join(chunks)
                    driver.flush()
                    self.sent += len(chunks)

            task = asyncio.create_task(self._play("tcp", send, track=self.clients == 1))
            plays.add(task)
            task.add_done_callback(plays.discard)

        try:
            await serve_stream(
                self.host,
                self.port,
                lambda _peer: _Player(),
                lambda _driver, _events: None,
                on_listening=self.listening,
                on_open=opened,
            )
        finally:
            for task in list(plays):
                task.cancel()


class _Player:
    """The session of a replay client: what it sends is ignored; `pending` (the recorded
    stream, as it falls due) is what it is sent."""

    def __init__(self) -> None:
        self.stats = SessionStats()
        self.pending = bytearray()

    def feed(self, data: bytes, now: float) -> list[Any]:
        return []

    def feed_eof(self, now: float) -> list[Any]:
        return []

    def tick(self, now: float) -> list[Any]:
        return []

    def data_to_send(self) -> bytes:
        data, self.pending = bytes(self.pending), bytearray()
        return data

    def next_deadline(self) -> float | None:
        return None

    def close_expected(self) -> bool:
        return False
