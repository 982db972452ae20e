"""The SpyGlass source, file source, sink and simulator: thin asyncio services on the templates.

* `SpyglassSource` (`Source`): a TCP client of a packet stream (`spyglass://host:7870`); the
  template reconnects when the server goes.
* `SpyglassFileSource` (`CaptureSource`): a `.rec`, pcap/pcapng or raw stream read to its end.
* `SpyglassSink` (`Sink`): a TCP server (`robowire serve spyglass://127.0.0.1:7871`) that sends
  every world device as a SpyGlass node to each connected viewer.
* `SpyglassSim` (`Sim`): a TCP server of a simulated mobile sensor network.
* `RecSink` (`Sink`): `robowire record ... -o run.rec` writes the world as a `.rec` recording.

URL options are parsed here, once, before anything runs (`Settings`); the sets below name
exactly the options each role reads, so the gateway rejects any other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from robowire.capture import CaptureReader, Record
from robowire.endpoints import Endpoint, numbers
from robowire.errors import ConfigError
from robowire.protocols.spyglass.adapter import (
    Frame,
    SpyglassAdapter,
    WorldEncoder,
    network_packets,
)
from robowire.protocols.spyglass.codec import (
    DEFAULT_PROFILE,
    HEADER_SIZE,
    MAX_PACKET_SIZE,
    NAME,
    SemanticProfile,
)
from robowire.protocols.spyglass.model import SensorNetworkSim, SimConfig
from robowire.protocols.spyglass.rec import RecordTooLarge, rec_record
from robowire.protocols.spyglass.session import SpyglassSession, State
from robowire.service import (
    RETRY_SECONDS,
    CaptureSource,
    Service,
    Sim,
    SimOptions,
    Sink,
    Source,
)
from robowire.timebase import WallClock, monotonic
from robowire.transport.target import FileTarget
from robowire.transport.tcp import StreamDriver, connect_stream, serve_stream
from robowire.wire import SessionStats
from robowire.world import LogEvent, Update, World

DEFAULT_PORT = 7870  # robowire's own choice: SpyGlass itself has no network listener
ADVANCE_PERIOD = 0.1  # seconds between moves of trajectory objects
SIM_STEP = 0.02  # seconds at least between the simulator's steps: what falls due meanwhile
# goes out together (1,000 nodes send 1,500 packets/s: one write each would cost the viewers)
MAX_BUFFERED = 1 << 20  # bytes a slow viewer may have pending before its packets are dropped

SINK_OPTIONS = frozenset({"profile", "scale", "offset"})
SOURCE_OPTIONS = SINK_OPTIONS | {"max_size", "retry"}
FILE_OPTIONS = SINK_OPTIONS | {"max_size", "speed"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """What a SpyGlass URL's options say: `profile` (see `SemanticProfile.parse`), `scale`
    ("0.1" or "sx,sy,sz" metres per unit), `offset` ("x,y,z" metres), `max_size` (bytes)."""

    profile: SemanticProfile = DEFAULT_PROFILE
    frame: Frame
    max_size: int = MAX_PACKET_SIZE

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Settings:
        """ConfigError (one line, naming spyglass) for a bad value."""
        try:
            scale = numbers(options.get("scale", "1"), "scale", "spyglass", (1, 3))
            offset = numbers(options.get("offset", "0,0,0"), "offset", "spyglass", (3,))
            max_size = int(options.get("max_size", MAX_PACKET_SIZE))
            if not HEADER_SIZE <= max_size <= MAX_PACKET_SIZE:
                raise ValueError(f"max_size must be within {HEADER_SIZE}..{MAX_PACKET_SIZE}")
            text = options.get("profile")
            profile = SemanticProfile.parse(text) if text else DEFAULT_PROFILE
        except ValueError as exc:
            raise ConfigError(f"spyglass: bad option: {exc}") from None
        return cls(profile=profile, frame=Frame.of(scale, offset), max_size=max_size)

    def session(self) -> SpyglassSession:
        return SpyglassSession(profile=self.profile, max_size=self.max_size)

    def adapter(self, world: World, source: str) -> SpyglassAdapter:
        scale, offset = self.frame.scale.tolist(), self.frame.offset.tolist()
        return SpyglassAdapter(world, source, profile=self.profile, scale=scale, offset=offset)


def open_sink(endpoint: Endpoint) -> Sink:
    return SpyglassSink(endpoint)


def open_sim(options: SimOptions) -> Sim:
    return SpyglassSim(options)


# -- sources ---------------------------------------------------------------------------------


def _advance(source: Source, now: float) -> None:
    """Trajectory objects move on between packets (SpyGlass sends an object's path once;
    `SpyglassAdapter.advance` says where it is now): every `ADVANCE_PERIOD` s, the
    `Source` template's `tick`."""
    if isinstance(source.adapter, SpyglassAdapter):
        source.adapter.advance(source.clock.wall(now))


class SpyglassSource(Source):
    """A TCP client of a SpyGlass packet stream (options: `SOURCE_OPTIONS`)."""

    tick_every = ADVANCE_PERIOD

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(
            f"{NAME}@{self.host}:{self.port}", retry=endpoint.float_option("retry", RETRY_SECONDS)
        )
        self.settings = Settings.parse(endpoint.options)

    def new_adapter(self, world: World) -> SpyglassAdapter:
        return self.settings.adapter(world, self.name)

    async def connect(self, world: World) -> None:
        session = self.settings.session()
        try:
            await connect_stream(
                self.host,
                self.port,
                session,
                lambda _driver, events: self.deliver(events, monotonic()),
                on_open=lambda _driver: self.connected(),
            )
        finally:
            self.stats.bytes_in += session.stats.bytes_in

    def tick(self, now: float) -> None:
        _advance(self, now)


class SpyglassFileSource(CaptureSource):
    """A `.rec` recording, pcap/pcapng capture or raw packet stream (options: `FILE_OPTIONS`).

    A `.rec` is told by its name or its first bytes (stdin too); each record is one packet of
    the stream a live source would get, timed by its header."""

    tick_every = ADVANCE_PERIOD

    def __init__(self, endpoint: Endpoint, read: CaptureReader) -> None:
        super().__init__(NAME, endpoint, read)
        self.settings = Settings.parse(endpoint.options)

    def new_adapter(self, world: World) -> SpyglassAdapter:
        return self.settings.adapter(world, self.name)

    def new_session(self, record: Record) -> SpyglassSession:
        return self.settings.session()

    def tick(self, now: float) -> None:
        _advance(self, now)


# -- sink and simulator ------------------------------------------------------------------------


async def _serve_viewers(
    service: Service,
    host: str,
    port: int,
    viewers: set[StreamDriver],
    on_open: Callable[[StreamDriver], None] | None = None,
) -> None:
    """A TCP server of SpyGlass streams: one sending session per viewer (viewers never talk)."""

    def opened(driver: StreamDriver) -> None:
        viewers.add(driver)
        if on_open is not None:
            on_open(driver)

    await serve_stream(
        host,
        port,
        lambda _peer: SpyglassSession(),
        lambda _driver, _events: None,
        on_listening=service.listening,
        on_open=opened,
        on_close=viewers.discard,
    )


def _send(viewers: Iterable[StreamDriver], packets: Sequence[bytes], stats: SessionStats) -> None:
    """Encoded packets to every viewer, in pieces of whole packets: a viewer whose unsent data
    passed MAX_BUFFERED misses the rest (a pull that took a long backlog can be megabytes, and
    a stalled viewer must not get it all queued)."""
    pieces = list(_pieces(packets))
    for driver in list(viewers):
        session = driver.session
        if not isinstance(session, SpyglassSession) or session.state is not State.OPEN:
            continue
        for piece in pieces:
            if driver.write_buffer_size() > MAX_BUFFERED:
                stats.drop("viewer too slow")
                break
            session.send_encoded(piece)
            driver.flush()
            stats.bytes_out += len(piece)


def _pieces(packets: Sequence[bytes], size: int = 64 << 10) -> Iterator[bytes]:
    """`packets` joined into pieces of about `size` bytes, each whole packets."""
    start, length = 0, 0
    for end, packet in enumerate(packets, 1):
        length += len(packet)
        if length >= size:
            yield b"".join(packets[start:end])
            start, length = end, 0
    if start < len(packets):
        yield b"".join(packets[start:])


class SpyglassSink(Sink):
    """Serves the world as a SpyGlass packet stream to every TCP client (see `WorldEncoder`;
    options: `SINK_OPTIONS`). It takes every update (a SpyGlass source's packets go out again
    one for one, `WorldEncoder`), and its packets' times never go backwards (`write` sorts
    what it takes; the updates come in time order).

    A new viewer first gets every device's latest state; the updates still queued then are in
    it already (the world had them all): it gets none of them, only what is newer than the
    state it got of that node (or of its time, and not in that state), until they have gone
    (`_joining`). Packets the encoder finds superseded count as `stats.extra["shed"]`."""

    every_update = True

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"spyglass-server@{self.host}:{self.port}")
        settings = Settings.parse(endpoint.options)
        self.encoder = WorldEncoder(profile=settings.profile, frame=settings.frame)
        self.viewers: set[StreamDriver] = set()
        # a new viewer -> its first packets, the newest time they had per node (sender field
        # bytes -> time field bytes, which sort as the time does), and the newest of all
        self._joining: dict[StreamDriver, tuple[set[bytes], dict[bytes, bytes], bytes]] = {}

    async def serve(self, world: World) -> None:
        welcome = functools.partial(self.welcome, world)
        await _serve_viewers(self, self.host, self.port, self.viewers, welcome)

    def welcome(self, world: World, driver: StreamDriver) -> None:
        """A new viewer (in `viewers` already) first gets every device's latest state."""
        packets = self.encoder.snapshot(world)
        self._send([driver], packets)
        newest: dict[bytes, bytes] = {}
        for packet in packets:
            sender, time = packet[5:7], _packet_time(packet)
            newest[sender] = max(newest.get(sender, time), time)
        self._joining[driver] = (set(packets), newest, max(newest.values(), default=b""))

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        packets = [p for u in items if isinstance(u, Update) for p in self.encoder.update(world, u)]
        packets.sort(key=_packet_time)  # times never run backwards within a pull
        self.stats.extra["shed"] = self.encoder.superseded
        for driver, (first, newest, last) in list(self._joining.items()):
            if driver not in self.viewers or (packets and _packet_time(packets[0]) > last):
                del self._joining[driver]  # (what was queued when it came has gone)
                continue
            _send([driver], [p for p in packets if _new(p, first, newest)], self.stats)
        self._send(self.viewers - self._joining.keys(), packets)
        return True

    def _send(self, viewers: Iterable[StreamDriver], packets: list[bytes]) -> None:
        self.stats.messages_out += len(packets)
        _send(viewers, packets, self.stats)


def _new(packet: bytes, first: set[bytes], newest: dict[bytes, bytes]) -> bool:
    """Whether a viewer whose first packets were `first` (the newest of each node's at
    `newest`) has not had `packet` in them: it is newer, or of that time and not one of them."""
    time, seen = _packet_time(packet), newest.get(packet[5:7])
    return seen is None or time > seen or (time == seen and packet not in first)


def _packet_time(packet: bytes) -> bytes:
    """An encoded packet's time fields (uint32 seconds, uint16 ms, big-endian): as bytes they
    sort as the time does."""
    return packet[7:13]


class RecSink(Sink):
    """`record ... -o run.rec`: every update written as SpyGlass packets (see `WorldEncoder`),
    one `.rec` record each, timed by the device's source time (else its receive time). Each
    write goes to the file at once and whole (`FileTarget`), so a killed recording, or one whose
    disk filled (one error line), reads up to its last whole record. A
    packet over 255 bytes (a neighbourhood of more than 118 nodes) does not fit a record: it
    is dropped and counted."""

    every_update = True  # a recording keeps every update, not the latest state

    def __init__(self, path: str) -> None:
        super().__init__(f"spyglass-rec:{path}")
        self.path = path
        self.encoder = WorldEncoder()
        self.messages = 0
        self._file = FileTarget(path)

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        packets = [p for u in items if isinstance(u, Update) for p in self.encoder.update(world, u)]
        packets.sort(key=_packet_time)  # a pull's updates are grouped by field, not by time
        records = []
        for packet in packets:
            try:
                records.append(rec_record(packet))
            except RecordTooLarge:
                self.stats.drop("packet over 255 bytes: no .rec record holds it")
        if records:
            data = b"".join(records)
            self._file.write(data)
            self.messages += len(records)
            self.stats.messages_out += len(records)
            self.stats.bytes_out += len(data)
        return True

    def finish(self, world: World) -> None:
        self._file.close()


class SpyglassSim(Sim):
    """`robowire sim spyglass`: a TCP server streaming a `SensorNetworkSim` to every client.

    `--count` is the number of nodes, `--rate` neighbourhood reports per node per second (data
    every second report), `--seed` the randomness, `--set KEY=VALUE` any `SIM_SETTINGS` key.
    """

    def __init__(self, options: SimOptions) -> None:
        self.host = options.host
        self.port = DEFAULT_PORT if options.port is None else options.port
        super().__init__(f"spyglass-sim@{self.host}:{self.port}")
        settings = dict(options.options)
        if options.rate is not None:
            if not 0 < options.rate <= 100:
                raise ConfigError("spyglass sim: --rate must be in (0, 100] reports per second")
            period = 1.0 / options.rate
            settings |= {"neighborhood_period": str(period), "data_period": str(2 * period)}
        config = SimConfig.from_options(options.count, settings)
        self.model = SensorNetworkSim(np.random.default_rng(options.seed), config)
        self.viewers: set[StreamDriver] = set()
        self.clock = WallClock()
        self.ahead = config.clock_offset  # `--set clock_offset=S`: a sender's clock off
        self._stepped = 0.0  # the last step's time

    async def serve(self) -> None:
        await _serve_viewers(self, self.host, self.port, self.viewers)

    def step(self, now: float) -> None:
        """Move the model to `now` and send the packets due (its times are wall-clock
        times, `clock_offset` ahead)."""
        self._stepped = now
        packets = network_packets(self.model.step(self.clock.wall(now) + self.ahead))
        self.stats.messages_out += len(packets)
        _send(self.viewers, packets, self.stats)

    def next_deadline(self) -> float | None:
        """When the model's next packet falls due, but `SIM_STEP` after this step at the
        earliest."""
        deadline = self.model.next_deadline()
        if deadline is None:
            return None
        return max(self.clock.monotonic(deadline - self.ahead), self._stepped + SIM_STEP)
