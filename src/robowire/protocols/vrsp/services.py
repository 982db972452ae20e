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

import logging
import random
from typing import Any

import numpy as np
from numpy.typing import NDArray

from robowire.capture import CaptureReader, Record
from robowire.endpoints import Endpoint, number
from robowire.errors import ConfigError
from robowire.protocols.datagram import DatagramSim, DatagramSink, DatagramSource
from robowire.protocols.vrsp.adapter import SwarmEncoder, VrspAdapter, show_swarm
from robowire.protocols.vrsp.codec import DEFAULT_DATAGRAM, DEFAULT_PORT, MAX_DATAGRAM, PROTOCOL
from robowire.protocols.vrsp.definitions import DeviceDefinition, Swarm
from robowire.protocols.vrsp.events import FrameDue, VrspEvent
from robowire.protocols.vrsp.model import LightShow
from robowire.protocols.vrsp.session import FRAMINGS, Framing, ReceiverSession, SenderSession
from robowire.service import CaptureSource, SimOptions
from robowire.timebase import monotonic
from robowire.transport.udp import DatagramDriver
from robowire.wire import SITE, PacketDropped, SessionStats
from robowire.world import LogEvent, Update, World

log = logging.getLogger("robowire.vrsp")

BATCH = 256  # datagrams read per wake-up at most (1.6 10,000-drone frames; more waits for
# the loop to come round, see transport.budget)
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


# -- receiving ---------------------------------------------------------------------------------


class VrspSource(DatagramSource):
    """Receives a VRSP stream on a UDP port (connected as long as datagrams arrive; a sender
    that stopped is only silence)."""

    batch = BATCH

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(PROTOCOL, endpoint.host, endpoint.port_or(DEFAULT_PORT))
        # the receiver is a batch session: a wake-up's datagrams are one decode, one delivery
        self.session: ReceiverSession = ReceiverSession(
            framing=_framing(endpoint), rgba=_flag(endpoint, "rgba", "0")
        )
        self.geodetic = _flag(endpoint, "geodetic", "1")

    def new_adapter(self, world: World) -> VrspAdapter:
        return VrspAdapter(world, self.name, geodetic=self.geodetic)


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


class _Frames:
    """A `SenderSession` on the sender's socket: its timer says when a frame is due (the
    DEF/DATA schedule), `frame` makes it."""

    session: SenderSession
    stats: SessionStats
    frames = 0
    _driver: DatagramDriver | None = None

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
                self.stats.drop(event.reason)
        if self._driver is not None:
            self._driver.flush()
        self.stats.messages_out = self.session.stats.messages_out
        self.stats.bytes_out = self.session.stats.bytes_out


class VrspSink(_Frames, DatagramSink):
    """Sends the world as a VRSP swarm (see the module docstring)."""

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(PROTOCOL, endpoint, DEFAULT_PORT)
        settings = endpoint.options
        self.rate = _rate(_number(settings, "rate", DEFAULT_RATE, endpoint.raw), endpoint.raw)
        self.size = _size(settings, endpoint.raw)
        self.broadcast = _flag(endpoint, "broadcast", "0")
        self.encoder = SwarmEncoder(root=_root(settings, endpoint.raw))
        self.session = SenderSession(rate=self.rate, max_size=self.size,
                                     rng=random.Random())  # fmt: skip
        self._world: World | None = None

    async def sending(self, world: World) -> None:
        self._world = world
        self.session.destination = self.destination
        self.session.start(monotonic())  # frames are due (and built once devices are known)
        self._driver = await self.run_session(self.session, self._on_events)
        try:
            await super().sending(world)
        finally:
            self._driver.close()

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


class VrspSim(_Frames, DatagramSim):
    """A light-show swarm sent as VRSP (see the module docstring).

    Settings (`--set k=v`): `lat`, `lon`, `alt` (the root; default `DEFAULT_ROOT`), `size`
    (datagram bytes), `broadcast=1`, and the show's own: `spacing`, `altitude` (m), `text`,
    `hold`, `transition` (s), `orientation` (0: leave the 0x4 option out).
    """

    def __init__(self, options: SimOptions) -> None:
        super().__init__(PROTOCOL, options, DEFAULT_PORT)
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

    async def sending(self) -> None:
        """Its session's timer says when each frame is due, on the sender's socket."""
        assert self.destination is not None
        self.session.destination = self.destination
        self.start = monotonic()
        self.session.define(self.root, self.blocks, self.start)
        self._driver = await self.run_session(self.session, self._on_events)
        log.info("vrsp sim: %d drones to %s:%d", self.count, *self.destination)
        try:
            await super().sending()
        finally:
            self._driver.close()

    def frame(self, now: float) -> Swarm:
        assert self.start is not None
        return show_swarm(self.show.state(now - self.start))


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
