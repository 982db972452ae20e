"""The SpyGlass source, sink and simulator: thin asyncio services around the sans-I/O core.

* `SpyglassSource`: a TCP client of a packet stream (`spyglass://host:7870`), reconnecting
  when the server goes, or a file (`.rec`, pcap/pcapng, raw stream) read to its end.
* `SpyglassSink`: a TCP server (`robowire serve spyglass://127.0.0.1:7871`) that sends every
  world device as a SpyGlass node to each connected viewer.
* `SpyglassSim`: a TCP server of a simulated mobile sensor network (`robowire sim spyglass`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from robowire.capture import Record, batches, read_capture
from robowire.endpoints import Endpoint
from robowire.errors import ConfigError, DecodeError, RobowireError, TransportError
from robowire.protocols.base import ConnectionLost, PacketDropped
from robowire.protocols.spyglass.adapter import SpyglassAdapter
from robowire.protocols.spyglass.codec import (
    DataPacket,
    NeighborhoodPacket,
    SemanticProfile,
    SyntaxType,
    encode,
    time_fields,
)
from robowire.protocols.spyglass.decode import looks_like_rec
from robowire.protocols.spyglass.profile import Interpretation
from robowire.protocols.spyglass.rec import rec_records
from robowire.protocols.spyglass.session import SpyglassSession, profile_option
from robowire.protocols.spyglass.sim import NEIGHBORHOOD, SensorNetworkSim, SimConfig
from robowire.service import Sim, SimOptions, Sink, Source
from robowire.timebase import WallClock
from robowire.transport.tcp import StreamDriver, connect_stream, serve_stream
from robowire.world import LogEvent, Update, World
from robowire.world.model import LINKS

log = logging.getLogger("robowire.spyglass")

DEFAULT_PORT = 7870  # robowire's own choice: SpyGlass itself has no network listener
RETRY_SECONDS = 1.0
ADVANCE_PERIOD = 0.1  # seconds between moves of trajectory objects
MAX_BUFFERED = 1 << 20  # bytes a slow viewer may have pending before its packets are dropped
FIRST_FREE_SEMANTIC = 100  # telemetry without a profile entry gets semantic types from here


class SpyglassSource(Source):
    """Packets -> world. URL options: `profile`, `scale`, `offset` (see `SpyglassAdapter`),
    `max_size`, `retry` (seconds between reconnects); files: `speed` (0 or absent: as fast as
    possible; 1: the recorded pacing)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        name = (
            f"spyglass:{endpoint.path}" if endpoint.is_file else f"spyglass@{self.host}:{self.port}"
        )
        super().__init__(name)
        self.frame = SpyglassAdapter.from_options(self.name, endpoint.options)
        SpyglassSession.from_options(endpoint.options)  # options are checked before the run
        self.retry = endpoint.float_option("retry", RETRY_SECONDS)
        self.speed = endpoint.float_option("speed", 0.0)
        self.connections = 0
        self.clock = WallClock()

    def _session(self) -> SpyglassSession:
        return SpyglassSession.from_options(self.endpoint.options)

    def _count(self, events: list[object]) -> None:
        for event in events:
            if isinstance(event, PacketDropped):
                self.stats.drop(event.reason)
                log.debug("%s: %s", self.name, event.reason)
            elif isinstance(event, ConnectionLost):  # _follow reconnects; a file ends
                log.info("%s: %s", self.name, event.reason)

    async def run(self, world: World) -> None:
        advancing = asyncio.create_task(self._advance(world))
        try:
            if self.endpoint.is_file:
                await self._read_file(world)
            else:
                await self._follow(world)
        finally:
            advancing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await advancing

    async def _advance(self, world: World) -> None:
        """Moves trajectory objects along their paths between packets."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(ADVANCE_PERIOD)
            self.frame.advance(world, self.clock.wall(loop.time()))

    async def _follow(self, world: World) -> None:
        def on_events(_driver: StreamDriver, events: list[object]) -> None:
            self._apply(world, events)

        failed = False
        while True:
            session = self._session()
            try:
                await connect_stream(
                    self.host, self.port, session, on_events, on_open=lambda _d: self.ready.set()
                )
            except TransportError as exc:
                if not failed:
                    log.warning("%s; retrying every %g s", exc, self.retry)
                    failed = True
                await asyncio.sleep(self.retry)
                continue
            failed = False
            self.connections += 1
            self.stats.bytes_in += session.stats.bytes_in
            log.info("%s: reconnecting", self.name)
            await asyncio.sleep(self.retry)

    async def _read_file(self, world: World) -> None:
        loop = asyncio.get_running_loop()
        assert self.endpoint.path is not None
        sessions: dict[str, SpyglassSession] = {}
        self.ready.set()
        try:
            async for batch in batches(file_records(self.endpoint.path), self.speed):
                events: list[object] = []
                for record in batch:
                    session = sessions.get(record.flow)
                    if session is None:
                        session = sessions[record.flow] = self._session()
                    events += session.feed(record.data, loop.time())
                self._apply(world, events)
        except DecodeError as exc:  # a file that is not what it claims stops the read
            raise RobowireError(f"{self.endpoint.path}: {exc}") from None
        self._apply(world, [e for s in sessions.values() for e in s.feed_eof(loop.time())])

    def _apply(self, world: World, events: list[object]) -> None:
        now = self.clock.wall(asyncio.get_running_loop().time())
        received = self.frame.apply_events(world, events, now)
        self.stats.messages_in += received
        if received != len(events):
            self._count(events)


def file_records(path: str) -> Iterator[Record]:
    """The packet bytes of a `.rec` (by extension or first bytes), pcap/pcapng or raw stream."""
    if path.lower().endswith(".rec"):
        return rec_records(path)
    if path != "-":
        try:
            with open(path, "rb") as f:
                head = f.read(4)
        except OSError as exc:
            raise ConfigError(f"{path}: {exc.strerror or exc}") from None
        if looks_like_rec(head):
            return rec_records(path)
    return read_capture(path)


# -- the sink ----------------------------------------------------------------------------------


class NodeNumbers:
    """World devices -> SpyGlass node ids (uint16). A device whose id is a free number keeps
    it, so SpyGlass -> world -> SpyGlass keeps node ids; others get the lowest free number."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], int] = {}
        self._used: set[int] = set()
        self._next = 1

    def __call__(self, source: str, device_id: str) -> int | None:
        key = (source, device_id)
        found = self._ids.get(key)
        if found is not None:
            return found
        number = int(device_id) if device_id.isdecimal() else -1
        if not 0 <= number <= 0xFFFF or number in self._used:
            while self._next in self._used:
                self._next += 1
            if self._next > 0xFFFF:
                return None  # every node id is taken
            number = self._next
        self._used.add(number)
        self._ids[key] = number
        return number


class SemanticTypes:
    """Telemetry names -> semantic types for data packets: the profile's own entries first,
    then `data.N` names (what the SpyGlass adapter writes) as N, then free numbers from 100."""

    def __init__(self, profile: SemanticProfile) -> None:
        self._types: dict[str, int | None] = {}
        self._used: set[int] = set()
        for code in range(256):
            rule = profile.rule(code)
            if rule is None:
                continue
            self._used.add(code)
            if rule.interpretation is Interpretation.DATA and rule.name:
                self._types.setdefault(rule.name, code)
        self._next = FIRST_FREE_SEMANTIC

    def __call__(self, name: str) -> int | None:
        if name in self._types:
            return self._types[name]
        match = re.fullmatch(r"data\.(\d{1,3})", name)
        code: int | None = int(match.group(1)) if match else None
        if code is None or code > 255:
            while self._next in self._used:
                self._next += 1
            code = self._next if self._next <= 255 else None
        if code is not None:
            self._used.add(code)
        self._types[name] = code
        return code


class SpyglassSink(Sink):
    """Serves the world as a SpyGlass packet stream to every TCP client.

    Each device is a node (its numeric id if it has one). A changed position or links give a
    neighbourhood packet (neighbours = the device's links that are nodes too); each changed
    telemetry value gives a float data packet of its semantic type. A new viewer first gets
    every device's latest state. URL options: `scale`, `offset` (metres per SpyGlass unit and
    the origin, as for the source), `profile` (which semantic types telemetry names map to).
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"spyglass-server@{self.host}:{self.port}")
        frame = SpyglassAdapter.from_options(self.name, endpoint.options)
        self.scale, self.offset = frame.scale, frame.offset
        self.numbers = NodeNumbers()
        self.semantic_types = SemanticTypes(profile_option(endpoint.options))
        self.viewers: set[StreamDriver] = set()
        self.packets_sent = 0

    def to_units(self, enu: Any) -> np.ndarray[Any, np.dtype[np.int64]]:
        """ENU metres (n, 3) -> int16 SpyGlass units, NaN as 0, clipped to the int16 range."""
        units = np.nan_to_num((np.asarray(enu, dtype=np.float64) - self.offset) / self.scale)
        return np.clip(np.rint(units), -0x8000, 0x7FFF).astype(np.int64)

    async def run(self, world: World) -> None:
        subscription = world.feed.subscribe()

        def opened(driver: StreamDriver) -> None:
            self.viewers.add(driver)
            self._send(driver, self._snapshot(world))

        serving = asyncio.create_task(
            serve_stream(
                self.host,
                self.port,
                lambda _peer: SpyglassSession(),
                lambda _driver, _events: None,  # viewers do not talk back
                on_listening=self.listening,
                on_open=opened,
                on_close=self.viewers.discard,
            )
        )
        waiting: asyncio.Future[Update | LogEvent] | None = None
        try:
            while True:
                waiting = asyncio.ensure_future(subscription.get())
                done, _ = await asyncio.wait(
                    [waiting, serving], return_when=asyncio.FIRST_COMPLETED
                )
                if serving in done:
                    serving.result()  # raises the server's TransportError
                    return
                data = b"".join(
                    self._encode(world, item)
                    for item in [waiting.result(), *subscription.drain()]
                    if isinstance(item, Update)
                )
                for driver in list(self.viewers):
                    self._send(driver, data)
        finally:
            if waiting is not None:
                waiting.cancel()
            subscription.close()
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)

    def _send(self, driver: StreamDriver, data: bytes) -> None:
        if not data or driver.session is None:
            return
        if driver.write_buffer_size() > MAX_BUFFERED:
            self.stats.drop("viewer too slow")
            return
        assert isinstance(driver.session, SpyglassSession)
        driver.session.send_encoded(data)
        driver.flush()
        self.stats.bytes_out += len(data)

    def _snapshot(self, world: World) -> bytes:
        """Every device's latest state, as the packets of one update each."""
        parts = []
        for source, table in list(world.tables.items()):
            if len(table):
                everything = frozenset({"position", LINKS, *table.telemetry})
                slots = np.arange(len(table))
                parts.append(self._encode(world, Update(source, slots, everything, 0.0)))
        return b"".join(parts)

    def _encode(self, world: World, update: Update) -> bytes:
        table = world.tables.get(update.source)
        if table is None or not len(update):
            return b""
        slots = update.slots
        values = update.values
        fields = update.fields
        positions = values.get("position", table.position[slots])
        units = self.to_units(positions).tolist()
        times = values.get("source_time")
        if times is None:
            times = table.source_time[slots]
        times = np.where(np.isnan(times), table.receive_time[slots], times)
        telemetry = [
            (name, code)
            for name in sorted(fields & table.telemetry.keys())
            if (code := self.semantic_types(name)) is not None
        ]
        send_neighborhood = "position" in fields or LINKS in fields or not telemetry
        out: list[bytes] = []
        for row, slot in enumerate(slots.tolist()):
            sender = self.numbers(update.source, table.ids[slot])
            if sender is None:
                continue
            seconds, millis = time_fields(float(times[row]))
            x, y, z = units[row]
            header = {"sender": sender, "seconds": seconds, "milliseconds": millis}
            header |= {"x": x, "y": y, "z": z}
            if send_neighborhood:
                neighbors = tuple(
                    n
                    for link in table.links[slot]
                    if (n := self.numbers(update.source, link)) is not None
                )
                out.append(
                    encode(
                        NeighborhoodPacket(
                            semantic_type=NEIGHBORHOOD, neighbors=neighbors, **header
                        )
                    )
                )
            for name, code in telemetry:
                column = values.get(name)
                value = float(column[row] if column is not None else table.telemetry[name][slot])
                if math.isnan(value):
                    continue
                out.append(
                    encode(
                        DataPacket(
                            semantic_type=code,
                            syntax_type=SyntaxType.FLOAT_LIST,
                            values=(value,),
                            **header,
                        )
                    )
                )
        self.packets_sent += len(out)
        self.stats.messages_out += len(out)
        return b"".join(out)


# -- the simulator -----------------------------------------------------------------------------


class SpyglassSim(Sim):
    """`robowire sim spyglass`: a TCP server streaming a `SensorNetworkSim` to every client.

    `--count` is the number of nodes, `--rate` neighbourhood reports per node per second (data
    every second report), `--seed` the randomness, `--set KEY=VALUE` any `SimConfig` field.
    """

    def __init__(self, options: SimOptions) -> None:
        self.host = options.host
        self.port = DEFAULT_PORT if options.port is None else options.port
        super().__init__(f"spyglass-sim@{self.host}:{self.port}")
        config = SimConfig.from_options(options.count, options.options)
        if options.rate is not None:
            if not 0 < options.rate <= 100:
                raise ConfigError("spyglass sim: --rate must be in (0, 100] reports per second")
            period = 1.0 / options.rate
            config = SimConfig.from_options(
                options.count,
                {
                    **options.options,
                    "neighborhood_period": str(period),
                    "data_period": str(2 * period),
                },
            )
        self.model = SensorNetworkSim(np.random.default_rng(options.seed), config)
        self.viewers: set[StreamDriver] = set()

    async def run(self, world: World) -> None:
        loop = asyncio.get_running_loop()
        clock = WallClock()
        serving = asyncio.create_task(
            serve_stream(
                self.host,
                self.port,
                lambda _peer: SpyglassSession(),
                lambda _driver, _events: None,
                on_listening=self.listening,
                on_open=self.viewers.add,
                on_close=self.viewers.discard,
            )
        )
        try:
            while not serving.done():
                now = clock.wall(loop.time())
                packets = self.model.step(now)
                self.stats.messages_out += len(packets)
                data = b"".join(packets)
                for driver in list(self.viewers):
                    session = driver.session
                    if (
                        data
                        and isinstance(session, SpyglassSession)
                        and driver.write_buffer_size() <= MAX_BUFFERED
                    ):
                        session.send_encoded(data)
                        driver.flush()
                deadline = self.model.next_deadline()
                delay = 0.1 if deadline is None else deadline - clock.wall(loop.time())
                await asyncio.wait([serving], timeout=min(max(delay, 0.0), 1.0))
            serving.result()
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
