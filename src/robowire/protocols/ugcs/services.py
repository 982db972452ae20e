"""UgCS services on the templates.

VSM side (this block): `UgcsSim` (`robowire sim ugcs`: the model's fleet as a VSM) and
`UgcsSink` (`robowire serve ugcs://...`: every world device as a UgCS vehicle), both on
`vsm_server` (`VsmServer`, the asyncio driver of one `VsmSession`; `VsmSim`, the runner of
`Member`s).

UCS side (the block at the end): the listen source (`robowire listen ugcs://host:5556`), and
`UcsFileSource` (`robowire listen ugcs:capture.jsonl`, pcap/pcapng too: a capture's VSM side
through the UCS session and adapter, as live).

* `UcsSource`: we are the UgCS server. By default it dials the VSM (the VSM listens, 5556 by
  convention) and the `Source` template reconnects with backoff when the connection ends.
  `?mode=listen` listens on host:port instead, for VSMs in reverse mode (they dial the server
  and retry by themselves); every VSM that connects is one more session. `?origin=lat,lon,alt`
  (degrees, metres) fixes the ENU origin; by default it is the first fix.
  Our `peer_id` is one number per process (`client.process_peer_id`), as the VSM expects of one
  server. VSM instances are told apart by their own `peer_id`: when one VSM is connected more
  than once (reverse mode with several endpoints), only its newest connection feeds the world
  (the VSM itself sends telemetry only to the newest of our connections, ugcs.md 1.4); the
  others are kept open and take over, newest first, when it closes.
  It is `control.Controllable` (the viewer's `--allow-control`): every command the VSM
  registered for a device, sent and answered on the path `client.UcsClient` uses (`Replies`,
  `send_command`, `send_mission`), parameters in user units (degrees, metres, m/s, enumerations
  by name). Replies become statuses: IN_PROGRESS -> in_progress, OK -> ok, anything else ->
  failed with the VSM's text, no final reply in `COMMAND_TIMEOUT` s -> timeout. The browser's
  `mission_upload` takes `control.MISSION_PARAMS` (see docs/control.md), not the registered
  ones. `control` holds that vocabulary; `gcfreeze` keeps large registrations out of the
  garbage collector's full collections.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from robowire.capture import CaptureReader, Record
from robowire.control import (
    FAILED,
    IN_PROGRESS,
    OK,
    SENT,
    CommandSpec,
    CommandStatus,
)
from robowire.endpoints import Endpoint, number, place, split_host_port
from robowire.errors import ConfigError
from robowire.protocols.ugcs import model
from robowire.protocols.ugcs.adapter import (
    DEFAULT_ORIGIN,
    Origin,
    UcsAdapter,
    WorldVehicles,
    fleet_columns,
)
from robowire.protocols.ugcs.client import (
    Mission,
    Replies,
    process_peer_id,
    send_command,
    send_mission,
)
from robowire.protocols.ugcs.codec import DEFAULT_PORT, NAME, Value
from robowire.protocols.ugcs.control import command_spec, mission_of, reply_status
from robowire.protocols.ugcs.definitions import MissionItem, Params, Result
from robowire.protocols.ugcs.device import CommandInfo, DeviceSpec
from robowire.protocols.ugcs.dissect import TO_UCS, direction_of
from robowire.protocols.ugcs.events import (
    CommandReceived,
    DeviceRegistered,
    DeviceUnregistered,
    PeerRegistered,
)
from robowire.protocols.ugcs.gcfreeze import FREEZE_AFTER, freeze, thaw
from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs
from robowire.protocols.ugcs.session_ucs import UcsDevice, UcsSession
from robowire.protocols.ugcs.session_vsm import VsmSession
from robowire.protocols.ugcs.vehicle import vehicle_spec
from robowire.protocols.ugcs.vsm_server import DEFAULT_RATE, VsmServer, VsmSim, instance_id
from robowire.service import CaptureSource, SimOptions, Sink, Source
from robowire.timebase import WallClock, monotonic
from robowire.transport.tcp import StreamDriver, connect_stream, serve_stream
from robowire.wire import ConnectionLost, PacketDropped
from robowire.world import LogEvent, Update, World

log = logging.getLogger("robowire.ugcs")

MAX_VEHICLES = 10_000
SIM_SETTINGS = frozenset(model.SETTINGS) | {"keep_alive", "name", "camera", "gimbal", "first_id"}
MAX_FIRST_ID = 1 << 31  # (ids are uint32 on the wire; a fleet's ids must fit after it)


def _options(settings: dict[str, str], where: str) -> tuple[float | None, str]:
    keep_alive = number(settings, "keep_alive", math.nan, where, sign="positive")
    return (None if math.isnan(keep_alive) else keep_alive), settings.get("name", "robowire")


class FleetMember:
    """robowire's simulated multicopters (`model.Fleet`) as a `vehicle.Member`: the VSM
    runner drives them as it drives a `Vehicle` of yours."""

    def __init__(self, fleet: model.Fleet, *, camera: bool = True, gimbal: bool = True) -> None:
        self.fleet = fleet
        self.camera = camera
        self.gimbal = gimbal

    def specs(self) -> list[DeviceSpec]:
        return [
            vehicle_spec(self.fleet.serial(i), camera=self.camera, gimbal=self.gimbal)
            for i in range(self.fleet.count)
        ]

    def step(self, now: float) -> None:
        self.fleet.step(now)

    def telemetry(self) -> Mapping[str, Any]:
        return fleet_columns(self.fleet.telemetry())

    def availability(self) -> Mapping[str, Any]:
        return self.fleet.availability()

    def handle(self, row: int, name: str, params: Params, items: Sequence[MissionItem]) -> Result:
        return self.fleet.command(row, name, params, items)

    def outbox(self) -> list[tuple[int, str, Result | str]]:
        return []


class UgcsSim(VsmSim):
    """`robowire sim ugcs`: `--count` simulated multicopters (model.py) on one VSM, telemetry
    at `--rate` Hz (default 5). Listens on 127.0.0.1:5556 by default; with `--to HOST[:PORT]`
    it dials the UCS instead (reverse mode) and redials after a loss (after 1 s, doubling up to
    10 s as long as it cannot connect).

    Settings (`--set k=v`): the fleet's (`origin=LAT,LON,ALT`, `patrol=SIDE`, `spacing`,
    `cruise_speed`, ...; see `model.SETTINGS`), `keep_alive=N` (ping every second, close after
    N s of silence), `name` (the VSM's name in its Register_peer), `camera=0`, `gimbal=0`,
    `first_id=N` (the VSM's id counter starts at N, not 1: a restarted VSM that registers its
    vehicles under new ids, as the SDK's process-wide counter does when it counts other
    objects first).
    """

    def __init__(self, options: SimOptions) -> None:
        where = "ugcs sim"
        self.count = 1 if options.count is None else options.count
        if not 1 <= self.count <= MAX_VEHICLES:
            raise ConfigError(f"{where}: count must be 1..{MAX_VEHICLES}")
        rate = DEFAULT_RATE if options.rate is None else options.rate
        if not 0 < rate <= 50:
            raise ConfigError(f"{where}: rate must be in (0, 50] Hz")
        settings = options.options
        unknown = set(settings) - SIM_SETTINGS
        if unknown:
            raise ConfigError(f"{where}: unknown setting {sorted(unknown)[0]!r}")
        keep_alive, name = _options(settings, where)
        first_id = number(settings, "first_id", 1, where, sign="positive")
        if first_id != int(first_id) or first_id > MAX_FIRST_ID:
            raise ConfigError(f"{where}: first_id must be a whole number 1..{MAX_FIRST_ID}")
        for key in ("camera", "gimbal"):
            if settings.get(key, "1") not in ("0", "1"):
                raise ConfigError(f"{where}: {key} must be 0 or 1, not {settings[key]!r}")
        self.fleet = model.Fleet.from_settings(self.count, settings, seed=options.seed, where=where)
        member = FleetMember(
            self.fleet,
            camera=settings.get("camera", "1") == "1",
            gimbal=settings.get("gimbal", "1") == "1",
        )
        port = DEFAULT_PORT if options.port is None else options.port
        target = split_host_port(options.target, DEFAULT_PORT) if options.target else None
        super().__init__(
            [member],
            host=options.host,
            port=port,
            target=target,
            rate=rate,
            keep_alive=keep_alive,
            name=name,
            label="ugcs-sim",
            first_id=int(first_id),
        )
        self.group = self.session.groups[0]


class UgcsSink(Sink):
    """`robowire serve ugcs://127.0.0.1:5556 --from ...`: a VSM whose vehicles are the world's
    devices (`adapter.WorldVehicles`). Options: `origin=LAT,LON,ALT` (where ENU devices are),
    `keep_alive=N`, `name`."""

    max_rate = 10.0  # the commits' 200 ms windows need a regular pull

    def __init__(self, endpoint: Endpoint) -> None:
        where = "ugcs serve"
        self.host = endpoint.host or "127.0.0.1"
        self.port = endpoint.port_or(DEFAULT_PORT)
        super().__init__(f"ugcs-serve@{self.host}:{self.port}")
        settings = dict(endpoint.options)
        keep_alive, name = _options(settings, where)
        origin = DEFAULT_ORIGIN_TEXT
        if "origin" in settings:
            origin = settings["origin"]
        self.clock = WallClock()
        self.session = VsmSession(peer_id=instance_id(), name=name, keep_alive=keep_alive)
        self.vehicles = WorldVehicles(
            self.session, origin=place(origin, "origin", where), name=name
        )
        self.server = VsmServer(self.session, self._command, self)

    def _command(self, event: CommandReceived) -> None:
        if event.response_required and self.session.can_respond(event.conn, event.device_id):
            # world devices are not ours to fly
            self.session.respond(
                event.conn,
                event.device_id,
                event.message_id,
                defs.STATUS_FAILED,
                f"{event.command.name}: robowire serves this vehicle read-only",
            )

    async def serve(self, world: World) -> None:
        await self.server.serve(self.host, self.port, self.listening)

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        now = monotonic()
        self.vehicles.write(world, items, int(self.clock.wall(now) * 1000.0))
        # commits on a grid of the pull period: a pull that comes a little early does not
        # hold a value back for a whole extra window
        self.session.commit(math.floor(now * self.max_rate) / self.max_rate)
        self.server.flush_all()
        return True

    def finish(self, world: World) -> None:
        self.server.shutdown()


DEFAULT_ORIGIN_TEXT = ",".join(str(x) for x in DEFAULT_ORIGIN)


# --- UCS side: the listen source ------------------------------------------------------------

UCS_SOURCE_OPTIONS = frozenset({"mode", "origin"})
UCS_FILE_OPTIONS = frozenset({"speed", "origin"})
_PASSED_ON = (PacketDropped, ConnectionLost)  # what a standby connection still reports
_REGISTRATIONS = (PeerRegistered, DeviceRegistered, DeviceUnregistered, ConnectionLost)


def parse_origin(endpoint: Endpoint) -> Origin | None:
    """`?origin=lat,lon[,alt]` in degrees and metres, or None (the first fix)."""
    text = endpoint.options.get("origin")
    return None if text is None else place(text, "origin", endpoint.raw, altitude=0.0)


COMMAND_TIMEOUT = 10.0
"""s without a final reply (IN_PROGRESS restarts it) before a viewer command is `timeout`."""


class UcsSource(Source):
    """The UCS side as a world source: dials a VSM (or, with `?mode=listen`, is dialled)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.host = endpoint.host
        self.port = endpoint.port_or(DEFAULT_PORT)
        self.mode = endpoint.option("mode", "connect")
        if self.mode not in ("connect", "listen"):
            raise ConfigError(f"{endpoint.raw}: mode must be connect or listen, not {self.mode!r}")
        super().__init__(f"ugcs@{self.host}:{self.port}")
        if self.mode == "listen":
            self.announce = "listening on"
        self.origin = parse_origin(endpoint)
        self.peer_id = process_peer_id()
        self.sessions: dict[int, UcsSession] = {}  # conn -> its session
        self._conn_ids = itertools.count(1)
        self._newest: dict[int, list[int]] = {}  # VSM peer_id -> its conns, newest last
        self._drivers: dict[int, StreamDriver] = {}  # conn -> its driver
        self._replies: dict[int, Replies] = {}  # conn -> its commands awaiting replies
        self._catalog: list[CommandSpec] | None = None  # until a registration changes

    def new_adapter(self, world: World) -> UcsAdapter:
        return UcsAdapter(world, self.name, self.origin)

    # -- control (control.Controllable) ----------------------------------------------------------

    def _devices(self) -> Iterator[tuple[UcsSession, UcsDevice]]:
        """Every device of the connections that feed the world."""
        for session in list(self.sessions.values()):
            if session.ready and self.primary(session):
                for device in session.devices.values():
                    yield session, device

    def command_specs(self) -> Sequence[CommandSpec]:
        if self._catalog is None:
            infos: dict[str, CommandInfo] = {}
            for _, device in self._devices():
                for name, info in device.commands.items():
                    infos.setdefault(name, info)
            self._catalog = [command_spec(info) for info in infos.values()]
        return self._catalog

    def _find(self, label: str) -> tuple[UcsSession, UcsDevice] | None:
        """The device `label` names on the newest connection that has it: a VSM restarted
        beside its old, half-open link has the vehicle on both, and only the new one answers."""
        return next(((s, d) for s, d in reversed(list(self._devices())) if d.label == label), None)

    def device_commands(self, device: str) -> Sequence[CommandSpec] | None:
        found = self._find(device)
        if found is None:
            return None
        return [command_spec(info) for info in found[1].commands.values()]

    async def run_command(
        self, device: str, command: CommandSpec, params: Mapping[str, Any]
    ) -> AsyncIterator[CommandStatus]:
        found = self._find(device)
        if found is None:
            yield CommandStatus(FAILED, f"{command.name}: {device} is not connected")
            return
        session, target = found
        steps: list[tuple[str, Mission | Mapping[str, Value]]] = [(command.name, dict(params))]
        if command.name == "mission_upload":
            steps = [(command.name, mission_of(params, target))]
            if params.get("start"):
                steps.append(("auto", {}))
        for step, (name, what) in enumerate(steps, 1):
            async for status in self._request(session, target, name, what):
                if status.state != OK:
                    yield status
                    if status.final:  # failed or timeout: the steps after it are not sent
                        return
                elif step < len(steps):  # only the last step's ok is the command's
                    yield CommandStatus(IN_PROGRESS, status.message)
                else:
                    yield status
                    return

    async def _request(
        self,
        session: UcsSession,
        target: UcsDevice,
        command: str,
        what: Mission | Mapping[str, Value],
    ) -> AsyncIterator[CommandStatus]:
        """Send one command (or a mission) to `target` and pass its replies on as statuses."""
        replies = self._replies.get(session.conn)
        driver = self._drivers.get(session.conn)
        if replies is None or driver is None:
            yield CommandStatus(FAILED, f"{command}: the VSM is not connected")
            return
        if isinstance(what, Mission):
            message_id = send_mission(session, target, what, timeout=COMMAND_TIMEOUT)
        else:
            message_id = send_command(session, target, command, what, timeout=COMMAND_TIMEOUT)
        replies.expect(message_id)
        driver.flush()
        yield CommandStatus(SENT, f"{command} sent")
        async for reply in replies.replies(message_id):
            yield reply_status(command, reply)

    def _new_session(self) -> UcsSession:
        conn = next(self._conn_ids)
        session = UcsSession(monotonic(), peer_id=self.peer_id, name="robowire", conn=conn)
        self.sessions[conn] = session
        return session

    def primary(self, session: UcsSession) -> bool:
        """True if `session` is the connection of its VSM that feeds the world."""
        if session.peer is None:
            return True
        conns = self._newest.get(session.peer.peer_id)
        return not conns or conns[-1] == session.conn

    def _on_events(self, driver: StreamDriver, events: list[Any]) -> None:
        session = driver.session
        if not isinstance(session, UcsSession):
            return
        replies = self._replies.get(session.conn)
        if replies is not None:
            replies.on_events(events)
        if any(isinstance(e, _REGISTRATIONS) for e in events):
            self._catalog = None  # the commands there are may have changed
        for event in events:
            if isinstance(event, PeerRegistered):
                conns = self._newest.setdefault(event.peer_id, [])
                if conns:
                    log.info("%s: VSM %d connected again; the newest connection is used",
                             self.name, event.peer_id)  # fmt: skip
                conns.append(session.conn)
                self._resend(conns)
        if not self.primary(session):
            events = [e for e in events if isinstance(e, _PASSED_ON)]
        self.deliver(events, monotonic())
        if len(session.devices) >= FREEZE_AFTER and any(
            isinstance(e, DeviceRegistered) for e in events
        ):
            self.apply(everything=True)  # written (what they replace let go) before the freeze
            freeze()  # see FREEZE_AFTER

    def _resend(self, conns: Sequence[int]) -> None:
        """The newest connection of a VSM took over: its devices (already registered on it)
        become the world's again."""
        session = self.sessions.get(conns[-1])
        if session is None:
            return
        events = [
            DeviceRegistered(conn=session.conn, device=d.info) for d in session.devices.values()
        ]
        if events:
            self.deliver(events, monotonic())

    def _opened(self, driver: StreamDriver) -> None:
        session = driver.session
        if self.mode == "listen":  # a VSM dialled in: connected (until the last one goes)
            self.connected()
        if isinstance(session, UcsSession):
            self._drivers[session.conn] = driver
            self._replies[session.conn] = Replies(
                f"{self.name} ({driver.peer[0]}:{driver.peer[1]})"
            )

    def _closed(self, driver: StreamDriver) -> None:
        session = driver.session
        if not isinstance(session, UcsSession):
            return
        self._drivers.pop(session.conn, None)
        thaw()  # its registrations, frozen once it had FREEZE_AFTER devices, can go now
        if self.mode == "listen" and not self._drivers:
            self.disconnected()
        self._catalog = None
        replies = self._replies.pop(session.conn, None)
        if replies is not None:
            replies.lost("connection closed")
        self.sessions.pop(session.conn, None)
        if session.peer is not None:
            conns = self._newest.get(session.peer.peer_id, [])
            was_primary = bool(conns) and conns[-1] == session.conn
            if session.conn in conns:
                conns.remove(session.conn)
            if not conns:
                self._newest.pop(session.peer.peer_id, None)
            elif was_primary:
                self._resend(conns)

    async def connect(self, world: World) -> None:
        if self.mode == "listen":
            await serve_stream(
                self.host,
                self.port,
                lambda _peer: self._new_session(),
                self._on_events,
                on_listening=self._listening,
                on_open=self._opened,
                on_close=self._closed,
            )
            return
        session = self._new_session()
        driver: StreamDriver | None = None

        def opened(new: StreamDriver) -> None:
            nonlocal driver
            driver = new
            self._opened(new)
            self.address = (self.host, self.port)
            self.connected()

        try:
            await connect_stream(self.host, self.port, session, self._on_events, on_open=opened)
        finally:
            if driver is not None:
                self._closed(driver)
            self.sessions.pop(session.conn, None)

    def _listening(self, address: tuple[str, int]) -> None:
        self.listening(address)  # ready; connected once a VSM dials in


class UcsFileSource(CaptureSource):
    """`robowire listen ugcs:capture.jsonl` (pcap/pcapng too): the VSM side of each captured
    connection goes through a UCS session and the adapter as a live VSM's would; what the UCS
    side sent is not needed (our session's own replies are discarded). `?origin=` as live."""

    def __init__(self, endpoint: Endpoint, read: CaptureReader) -> None:
        super().__init__(NAME, endpoint, read)
        self.origin = parse_origin(endpoint)
        self._conn_ids = itertools.count(1)

    def new_adapter(self, world: World) -> UcsAdapter:
        return UcsAdapter(world, self.name, self.origin)

    def feed(self, record: Record, now: float) -> list[Any]:
        if direction_of(record) != TO_UCS:
            return []
        session = self.sessions.get(record.flow)
        if session is None:
            session = UcsSession(now, peer_id=process_peer_id(), conn=next(self._conn_ids))
            self.sessions[record.flow] = session
        events: list[Any] = session.feed(record.data, now)
        session.data_to_send()
        return events
