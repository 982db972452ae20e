"""The VRSP services on the shared templates: source, capture source, serve sink, simulator.

* `VrspSource` (`robowire listen vrsp://0.0.0.0:9742`): a UDP socket bound to the URL's
  address, on the shared `DatagramDriver`; each wake-up reads every queued datagram and the
  receiver session takes them as one batch (`feed_datagrams`), so a 10,000-drone frame
  (about 140 datagrams) is one vectorised decode and one world update. Options: `framing`
  (auto, profile, implicit), `rgba=1` (the 0x1 colour is 4 bytes), `geodetic=0` (skip the
  latitude/longitude columns).
* `VrspFileSource` (`robowire listen vrsp:capture.pcap`): the same session and adapter over a
  capture's datagrams (one receiver per UDP flow).
* `VrspSink` (`robowire serve vrsp://HOST:PORT --from ...`): sends the world as a swarm to
  HOST:PORT: DEF at 1 Hz (a new instance whenever the device set changes), DATA at `rate`
  (30) frames/s in datagrams of at most `size` (1472) bytes; `broadcast=1` for a broadcast
  address (SO_BROADCAST); `lat`, `lon`, `alt` set the root (see `adapter.SwarmEncoder`).
* `VrspSim` (`robowire sim vrsp --drones N [--to HOST[:PORT]]`): the light show of
  `model.LightShow`, sent the same way to 127.0.0.1 on the default port unless told.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robowire.capture import CaptureReader, Record
from robowire.endpoints import Endpoint, number, split_host_port
from robowire.errors import ConfigError
from robowire.protocols.vrsp.adapter import SwarmEncoder, VrspAdapter
from robowire.protocols.vrsp.codec import DEFAULT_DATAGRAM, DEFAULT_PORT, MAX_DATAGRAM, PROTOCOL
from robowire.protocols.vrsp.definitions import DeviceDefinition, Swarm
from robowire.protocols.vrsp.events import FrameDue, VrspEvent
from robowire.protocols.vrsp.model import LightShow
from robowire.protocols.vrsp.session import FRAMINGS, Framing, ReceiverSession, SenderSession
from robowire.service import CaptureSource, Sim, SimOptions, Sink, Source
from robowire.timebase import monotonic
from robowire.transport.udp import DatagramDriver, open_udp_socket, run_datagram
from robowire.wire import SITE, Address, PacketDropped
from robowire.world import LogEvent, Update, World

log = logging.getLogger("robowire.vrsp")

BATCH = 256  # datagrams read per wake-up at most (1.6 10,000-drone frames; more waits for
# the loop to come round, see transport.budget)
SEND_BUFFER = 4 << 20  # room for a whole frame's datagrams at once
DEFAULT_RATE = 30.0
DEFAULT_DRONES = 500
DEFAULT_ROOT = SITE  # the sim's root when not set: the simulators' one site
MAX_DRONES = 65_536
SOURCE_OPTIONS = frozenset({"framing", "rgba", "geodetic"})
SENDER_OPTIONS = frozenset({"rate", "size", "broadcast", "lat", "lon", "alt"})


def _flag(endpoint: Endpoint, name: str, default: str) -> bool:
    value = endpoint.option(name, default)
    if value not in ("0", "1"):
        raise ConfigError(f"{endpoint.raw}: {name} must be 0 or 1, not {value!r}")
    return value == "1"


def _framing(endpoint: Endpoint) -> Framing:
    value = endpoint.option("framing", "auto")
    for framing in FRAMINGS:
        if value == framing:
            return framing
    raise ConfigError(f"{endpoint.raw}: framing must be one of {', '.join(FRAMINGS)}")


def _number(settings: dict[str, str], name: str, default: float, where: str) -> float:
    return number(settings, name, default, where, sign="any")


def _size(settings: dict[str, str], where: str) -> int:
    size = _number(settings, "size", DEFAULT_DATAGRAM, where)
    if size != int(size) or not 64 <= size <= MAX_DATAGRAM:
        raise ConfigError(f"{where}: size must be a whole number of bytes 64..{MAX_DATAGRAM}")
    return int(size)


def _rate(value: float, where: str) -> float:
    if not 0 < value <= 1000:
        raise ConfigError(f"{where}: rate must be above 0 and at most 1000 frames/s")
    return value


def _root(settings: dict[str, str], where: str) -> tuple[float, float, float] | None:
    if not any(k in settings for k in ("lat", "lon", "alt")):
        return None
    lat = _number(settings, "lat", 0.0, where)
    lon = _number(settings, "lon", 0.0, where)
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ConfigError(f"{where}: lat must be -90..90 and lon -180..180")
    return (lat, lon, _number(settings, "alt", 0.0, where))


def open_sender_socket(destination: Address, broadcast: bool) -> socket.socket:
    """A non-blocking UDP socket for sending to `destination` (bound to loopback when that
    is where it sends, else to every interface on a free port)."""
    local = "127.0.0.1" if destination[0].startswith("127.") else "0.0.0.0"
    sock = open_udp_socket((local, 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    if broadcast:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    return sock


# -- receiving ---------------------------------------------------------------------------------


SILENCE_SECONDS = 2.0


class VrspSource(Source):
    """Receives a VRSP stream on a UDP port (connected as long as datagrams arrive)."""

    silence = SILENCE_SECONDS  # a sender that stopped cannot be seen otherwise

    time_default = "receive"  # no timestamps on the wire: stamp on receipt

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"vrsp@{self.host}:{self.port}")
        self.session = ReceiverSession(
            framing=_framing(endpoint), rgba=_flag(endpoint, "rgba", "0")
        )
        self.geodetic = _flag(endpoint, "geodetic", "1")
        self._driver: DatagramDriver | None = None
        self._bound: socket.socket | None = None

    @property
    def wakeups(self) -> int:
        """How many times its socket woke the loop up (each wake-up is one batch)."""
        return 0 if self._driver is None else self._driver.wakeups

    def new_adapter(self, world: World) -> VrspAdapter:
        return VrspAdapter(world, self.name, geodetic=self.geodetic)

    async def run(self, world: World) -> None:
        if self.port == 0:  # bind first, so the source is named after the port it got
            self._bound = open_udp_socket((self.host, 0))
            self.port = int(self._bound.getsockname()[1])
            if self.name == f"vrsp@{self.host}:0":  # not renamed by its owner (a site file)
                self.name = f"vrsp@{self.host}:{self.port}"
        await super().run(world)

    def _opened(self, driver: DatagramDriver) -> None:
        self._driver = driver

    def _listening(self, address: Address) -> None:
        self.listening(address)
        self.connected()

    async def connect(self, world: World) -> None:
        sock = self._bound or open_udp_socket((self.host, self.port))  # TransportError if not
        self._bound = None
        # the receiver is a batch session: a wake-up's datagrams are one decode, one delivery
        await run_datagram(
            self.session,
            lambda events: self.deliver(events, monotonic()),
            sock=sock,
            on_open=self._opened,
            on_listening=self._listening,
            batch=BATCH,
        )


class VrspFileSource(CaptureSource):
    """A capture's VRSP datagrams through the receiver, one session per UDP flow."""

    time_default = "receive"  # no timestamps on the wire: stamp on receipt

    def __init__(self, endpoint: Endpoint, read: CaptureReader) -> None:
        super().__init__(PROTOCOL, endpoint, read)
        self.framing = _framing(endpoint)
        self.rgba = _flag(endpoint, "rgba", "0")

    def new_adapter(self, world: World) -> VrspAdapter:
        return VrspAdapter(world, self.name)

    def new_session(self, record: Record) -> ReceiverSession:
        return ReceiverSession(framing=self.framing, rgba=self.rgba)


# -- sending -----------------------------------------------------------------------------------


class _Sender:
    """A `SenderSession` on a socket: the timer says when a frame is due, `frame` makes it."""

    def __init__(self, session: SenderSession, sock: socket.socket, owner: Sim | Sink) -> None:
        self.session = session
        self.owner = owner
        self.driver = DatagramDriver(session, self._on_events, sock)
        self.frames = 0

    def frame(self, now: float) -> Swarm | None:
        raise NotImplementedError

    def _on_events(self, events: list[VrspEvent]) -> None:
        for event in events:
            if isinstance(event, FrameDue):
                swarm = self.frame(event.time)
                if swarm is not None and self.session.table is not None:
                    self.session.send(swarm)
                    self.frames += 1
            elif isinstance(event, PacketDropped):
                self.owner.stats.drop(event.reason)
        self.driver.flush()
        self.owner.stats.messages_out = self.session.stats.messages_out
        self.owner.stats.bytes_out = self.session.stats.bytes_out


def _resolve(address: Address) -> Address:
    try:
        info = socket.getaddrinfo(address[0], address[1], socket.AF_INET, socket.SOCK_DGRAM)
    except OSError as exc:
        raise ConfigError(f"cannot resolve {address[0]}: {exc}") from None
    return (str(info[0][4][0]), int(info[0][4][1]))


class VrspSink(Sink):
    """Sends the world as a VRSP swarm (see the module docstring)."""

    announce = "sending to"

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"vrsp-sender@{self.host}:{self.port}")
        settings = endpoint.options
        self.rate = _rate(_number(settings, "rate", DEFAULT_RATE, endpoint.raw), endpoint.raw)
        self.size = _size(settings, endpoint.raw)
        self.broadcast = _flag(endpoint, "broadcast", "0")
        self.encoder = SwarmEncoder(root=_root(settings, endpoint.raw))
        self.session = SenderSession(rate=self.rate, max_size=self.size,
                                     rng=random.Random())  # fmt: skip
        self._world: World | None = None

    async def serve(self, world: World) -> None:
        self._world = world
        destination = _resolve((self.host, self.port))
        self.session.destination = destination
        sock = open_sender_socket(destination, self.broadcast)
        sender = _SinkSender(self.session, sock, self)
        try:
            sender.driver.flush()
            self.listening(destination)
            await asyncio.Future()
        finally:
            sender.driver.close()

    def frame(self, now: float) -> Swarm | None:
        world = self._world
        if world is None:
            return None
        swarm = self.encoder.swarm(world)
        if swarm is None:
            return None
        root = self.encoder.root or (0.0, 0.0, 0.0)
        self.session.define(root, self.encoder.blocks(), now)
        return swarm

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        return True  # frames are built from the world's state when due


class _SinkSender(_Sender):
    def __init__(self, session: SenderSession, sock: socket.socket, sink: VrspSink) -> None:
        super().__init__(session, sock, sink)
        self.sink = sink
        session.start(monotonic())  # frames are due (and built once devices are known)

    def frame(self, now: float) -> Swarm | None:
        return self.sink.frame(now)


class VrspSim(Sim):
    """A light-show swarm sent as VRSP (see the module docstring).

    Settings (`--set k=v`): `lat`, `lon`, `alt` (the root; default `DEFAULT_ROOT`), `size`
    (datagram bytes), `broadcast=1`, and the show's own: `spacing`, `altitude` (m), `text`,
    `hold`, `transition` (s), `orientation` (0: leave the 0x4 option out).
    """

    announce = "sending to"

    def __init__(self, options: SimOptions) -> None:
        port = DEFAULT_PORT if options.port is None else options.port
        self.destination = (
            split_host_port(options.target, port, options.host)
            if options.target
            else (options.host, port)
        )
        super().__init__(f"vrsp-sim@{self.destination[0]}:{self.destination[1]}")
        self.count = DEFAULT_DRONES if options.count is None else options.count
        if not 1 <= self.count <= MAX_DRONES:
            raise ConfigError(f"vrsp sim: drones must be 1..{MAX_DRONES}")
        settings = options.options
        self.rate = _rate(options.rate or DEFAULT_RATE, "vrsp sim")
        self.size = _size(settings, "vrsp sim")
        broadcast = settings.get("broadcast", "0")
        if broadcast not in ("0", "1"):
            raise ConfigError(f"vrsp sim: broadcast must be 0 or 1, not {broadcast!r}")
        self.broadcast = broadcast == "1"
        self.root = _root(settings, "vrsp sim") or DEFAULT_ROOT
        self.show = make_show(self.count, options.seed, settings)
        self.blocks = show_blocks(self.show)
        self.session = SenderSession(
            rate=self.rate, max_size=self.size, rng=random.Random(options.seed)
        )
        self.start: float | None = None
        self.frames = 0

    async def serve(self) -> None:
        """The sender on its socket: its session's timer says when each frame is due."""
        destination = _resolve(self.destination)
        self.session.destination = destination
        sock = open_sender_socket(destination, self.broadcast)
        sender = _SimSender(self.session, sock, self)
        try:
            self.start = monotonic()
            self.session.define(self.root, self.blocks, self.start)
            sender.driver.flush()
            self.listening(destination)
            log.info("vrsp sim: %d drones to %s:%d", self.count, *destination)
            await asyncio.Future()
        finally:
            self.frames = sender.frames
            sender.driver.close()

    def frame(self, now: float) -> Swarm:
        assert self.start is not None
        swarm: Swarm = self.show.frame(now - self.start)
        return swarm


class _SimSender(_Sender):
    def __init__(self, session: SenderSession, sock: socket.socket, sim: VrspSim) -> None:
        super().__init__(session, sock, sim)
        self.sim = sim

    def frame(self, now: float) -> Swarm | None:
        return self.sim.frame(now)


Blocks = list[tuple[DeviceDefinition, NDArray[np.uint16]]]
SHOW_FLOATS = ("spacing", "altitude", "hold", "transition")
SHOW_SETTINGS = frozenset({*SHOW_FLOATS, "text", "orientation"})


def make_show(count: int, seed: int, settings: dict[str, str]) -> LightShow:
    """The simulator's show: `model.LightShow` with the `--set` settings."""
    kwargs: dict[str, Any] = {
        name: _number(settings, name, 0.0, "vrsp sim") for name in SHOW_FLOATS if name in settings
    }
    if "text" in settings:
        kwargs["text"] = settings["text"]
    if "orientation" in settings:
        if settings["orientation"] not in ("0", "1"):
            raise ConfigError("vrsp sim: orientation must be 0 or 1")
        kwargs["orientation"] = settings["orientation"] == "1"
    return LightShow(count, seed=seed, **kwargs)


def show_blocks(show: LightShow) -> Blocks:
    """The show's definition blocks: each definition with the ids of the drones that use it."""
    ids = np.asarray(show.ids, dtype=np.uint16)
    definition_of = np.asarray(show.definition_of)
    return [
        (definition, ids[definition_of == k])
        for k, definition in enumerate(show.definitions)
        if (definition_of == k).any()
    ]
