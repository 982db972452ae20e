"""UgCS services on the templates.

VSM side (this block): `VsmServer`, the thin asyncio driver of one `VsmSession` (a listening
server, or in reverse mode a dialler that retries), one shared `StreamDriver` per connection;
`UgcsSim` (`robowire sim ugcs`: the model's fleet as a VSM) and `UgcsSink` (`robowire serve
ugcs://...`: every world device as a UgCS vehicle).

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
  `mission_upload` takes `MISSION_PARAMS` (see docs/control.md), not the registered ones.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import itertools
import logging
import math
import random
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from robowire.capture import CaptureReader, Record
from robowire.control import (
    FAILED,
    IN_PROGRESS,
    OK,
    SENT,
    TIMEOUT,
    CommandSpec,
    CommandStatus,
    ParamSpec,
)
from robowire.endpoints import Endpoint, number, split_host_port
from robowire.errors import ConfigError, TransportError
from robowire.protocols.ugcs import model
from robowire.protocols.ugcs.adapter import (
    DEFAULT_ORIGIN,
    Origin,
    UcsAdapter,
    WorldVehicles,
    semantic_unit,
)
from robowire.protocols.ugcs.client import (
    Mission,
    Replies,
    home_altitude,
    process_peer_id,
    send_command,
    send_mission,
    status_name,
)
from robowire.protocols.ugcs.codec import DEFAULT_PORT, NAME, Value, ValueKind
from robowire.protocols.ugcs.definitions import MissionItem, Params, ParamValue, Result
from robowire.protocols.ugcs.device import CommandInfo, DeviceSpec
from robowire.protocols.ugcs.dissect import TO_UCS, direction_of
from robowire.protocols.ugcs.events import (
    CommandReceived,
    CommandTimedOut,
    ConnectionEnded,
    DeviceAcknowledged,
    DeviceRegistered,
    DeviceUnregistered,
    PeerRegistered,
    ResponseReceived,
    VsmEvent,
)
from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs
from robowire.protocols.ugcs.session_ucs import UcsDevice, UcsSession
from robowire.protocols.ugcs.session_vsm import VsmLink, VsmSession
from robowire.protocols.ugcs.vehicle import Member, vehicle_spec
from robowire.service import CaptureSource, Sim, SimOptions, Sink, Source
from robowire.timebase import WallClock, monotonic
from robowire.transport.reconnect import Backoff, keep_connecting
from robowire.transport.tcp import StreamDriver, connect_stream, serve_stream
from robowire.wire import Address, ConnectionLost, PacketDropped
from robowire.world import LogEvent, Update, World

log = logging.getLogger("robowire.ugcs")

RETRY_SECONDS = 10.0
"""Reverse mode: the SDK's `ucs.retry_timeout` default, the longest wait between redials."""
REDIAL_SECONDS = 1.0
"""Reverse mode: the first wait before redialling (doubling up to `RETRY_SECONDS`)."""
CONNECT_TIMEOUT = 10.0
"""Reverse mode: the SDK's `TCP_CONNECT_TIMEOUT`."""
MAX_BACKLOG = 8 << 20
"""Bytes written to a UCS but not sent: past this the UCS has stalled and its connection is
closed and counted as a drop (the SDK closes a connection whose write has not completed in
60 s). Below the transport's own last-resort bound (`tcp.MAX_WRITE_BUFFER`, 16 MiB), so this
rule is the one that acts."""
MAX_VEHICLES = 10_000
DEFAULT_RATE = 5.0
SIM_SETTINGS = frozenset(model.SETTINGS) | {"keep_alive", "name", "camera", "gimbal"}


def instance_id() -> int:
    """A VSM's random 32-bit instance id, drawn once per VSM (its Register_peer `peer_id`)."""
    return random.SystemRandom().getrandbits(32)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


class VsmServer:
    """Drives one `VsmSession` over asyncio: `serve` (listen) or `dial` (reverse mode)."""

    def __init__(
        self,
        session: VsmSession,
        on_command: Callable[[CommandReceived], None],
        stats_owner: Any,
    ) -> None:
        self.session = session
        self.on_command = on_command
        self.owner = stats_owner
        self.drivers: dict[int, StreamDriver] = {}
        self.backoff = Backoff(REDIAL_SECONDS, RETRY_SECONDS)  # reverse mode's redials

    def _link(self, peer: Address) -> VsmLink:
        return self.session.connect(monotonic(), loopback=_loopback(peer[0]))

    def _opened(self, driver: StreamDriver) -> None:
        if isinstance(driver.session, VsmLink):
            self.drivers[driver.session.conn] = driver

    def _closed(self, driver: StreamDriver) -> None:
        if isinstance(driver.session, VsmLink):
            conn = driver.session.conn
            self.drivers.pop(conn, None)
            self.session.forget(conn)

    def _events(self, driver: StreamDriver, events: list[VsmEvent]) -> None:
        for event in events:
            match event:
                case CommandReceived():
                    self.owner.stats.messages_in += 1
                    self.on_command(event)
                case PeerRegistered(compatible=False):
                    log.warning(
                        "ugcs: UCS %d:%d at %s:%d is too old (< 2.14): keeping quiet",
                        event.version_major,
                        event.version_minor,
                        *driver.peer,
                    )
                case PeerRegistered():
                    log.info("ugcs: UCS peer %08x at %s:%d", event.peer_id, *driver.peer)
                case DeviceAcknowledged(code=code) if code != defs.STATUS_OK:
                    log.info("ugcs: the UCS refused device %d (code %d)", event.device_id, code)
                case PacketDropped():
                    self.owner.stats.drop(event.reason)
                case ConnectionEnded():
                    log.info("ugcs: closing %s:%d: %s", *driver.peer, event.reason)
        driver.flush()

    def flush_all(self) -> None:
        for driver in list(self.drivers.values()):
            driver.flush()
            if driver.write_buffer_size() > MAX_BACKLOG:
                log.warning("ugcs: the UCS at %s:%d stopped reading: closing", *driver.peer)
                self.owner.stats.drop("a UCS stopped reading")
                driver.close()

    async def serve(self, host: str, port: int, on_listening: Callable[[Address], None]) -> None:
        """Listen until cancelled; then unregister every device on every connection before
        the server closes them (an orderly VSM stop)."""
        task = asyncio.create_task(
            serve_stream(
                host,
                port,
                self._link,
                self._events,
                on_listening=on_listening,
                on_open=self._opened,
                on_close=self._closed,
            )
        )
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            self.shutdown()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise

    async def dial(
        self, host: str, port: int, on_connected: Callable[[], None] | None = None
    ) -> None:
        """Reverse mode: connect to the UCS, and again after each failure or loss, on the
        `Source` template's backoff (`transport.reconnect.keep_connecting`, `self.backoff`)."""
        await keep_connecting(
            lambda: self._dial_once(host, port, on_connected),
            self.backoff,
            failed=lambda exc: log.info("ugcs: %s; retrying", exc),
            ended=lambda: log.info("ugcs: the UCS at %s:%d closed; redialling", host, port),
        )

    async def _dial_once(
        self, host: str, port: int, on_connected: Callable[[], None] | None
    ) -> None:
        """One connection to the UCS, until it ends; TransportError if it cannot be made."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                _, driver = await loop.create_connection(
                    lambda: StreamDriver(
                        self._link, self._events, on_open=self._opened, on_close=self._closed
                    ),
                    host,
                    port,
                )
        except (OSError, TimeoutError) as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
            raise TransportError(f"cannot reach the UCS at {host}:{port} ({reason})") from None
        if on_connected is not None:
            on_connected()
        try:
            await asyncio.shield(driver.closed)
        finally:
            driver.close()

    def shutdown(self) -> None:
        """Unregister every device where it was registered, send that, close everything."""
        self.session.shutdown()
        for driver in list(self.drivers.values()):
            driver.flush()
            driver.close()


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
        return self.fleet.telemetry()

    def availability(self) -> Mapping[str, Any]:
        return self.fleet.availability()

    def handle(self, row: int, name: str, params: Params, items: Sequence[MissionItem]) -> Result:
        return self.fleet.command(row, name, params, items)

    def outbox(self) -> list[tuple[int, str, Result | str]]:
        return []


class VsmSim(Sim):
    """A VSM running `Member`s (your `vehicle.Vehicle`s, or the simulator's fleet): each
    member's devices registered as one group; every 1/`rate` s each member steps, its
    telemetry and command availability are committed (the SDK's 200 ms windows); a command
    goes to its member's `handle` and the result is the reply (IN_PROGRESS replies are
    followed by what the member's `outbox` reports). Listens on host:port, or with `target`
    dials the UCS (reverse mode) and redials after a loss or failure (`VsmServer.dial`: the
    `Source` template's backoff, from 1 s up to the SDK's 10 s). The `Sim` template runs the
    ticks: one every 1/`rate` s, on that grid."""

    def __init__(
        self,
        members: Sequence[Member],
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        target: tuple[str, int] | None = None,
        rate: float = DEFAULT_RATE,
        keep_alive: float | None = None,
        name: str = "robowire",
        label: str = "ugcs-vsm",
    ) -> None:
        self.target = target
        if target is not None:
            self.announce = "connecting to"
            host, port = target
        self.host, self.port = host, port
        if not 0 < rate <= 50:
            raise ConfigError(f"{label}: rate must be in (0, 50] Hz")
        self.rate = rate
        super().__init__(f"{label}@{host}:{port}")
        self.clock = WallClock()
        self.session = VsmSession(peer_id=instance_id(), name=name, keep_alive=keep_alive)
        self.members = list(members)
        self._groups = []
        self._row: dict[int, tuple[Member, int]] = {}
        self._pending: dict[tuple[int, int, str], tuple[int, int, int]] = {}
        self._due: float | None = None  # the next tick's time (on the rate's grid)
        for member in self.members:
            infos = self.session.register_group(member.specs(), self._wall_ms(monotonic()))
            self._groups.append(self.session.groups[-1])
            for row, info in enumerate(infos):
                self._row[info.device_id] = (member, row)
        self.server = VsmServer(self.session, self._command, self)

    def _wall_ms(self, now: float) -> int:
        return int(self.clock.wall(now) * 1000.0)

    def _command(self, event: CommandReceived) -> None:
        found = self._row.get(event.device_id)
        if found is None:
            return
        member, row = found
        command = event.command
        items = [(sub.name, _plain(sub.parameters)) for sub in command.sub_commands]
        try:
            result = member.handle(row, command.name, _plain(command.parameters), items)
        except Exception as exc:  # the integrator's handler broke: the operator is told
            log.exception("ugcs: %s handler of device %d raised", command.name, event.device_id)
            result = Result(code="STATUS_FAILED", text=f"{type(exc).__name__}: {exc}")
        log.info("ugcs: device %d %s: %s %s", row, command.name, result.code, result.text)
        request = (event.conn, event.device_id, event.message_id)
        if result.code == "STATUS_IN_PROGRESS":
            self._pending[(id(member), row, command.name)] = request
        self._reply(request, command.name, result, event.response_required)

    def _reply(
        self, request: tuple[int, int, int], name: str, result: Result, required: bool
    ) -> None:
        conn, device_id, message_id = request
        required = required and self.session.can_respond(conn, device_id)  # (the link may be gone)
        if result.code == "STATUS_IN_PROGRESS":
            if required:
                self.session.progress(conn, device_id, message_id, result.progress or 0.0,
                                      result.text)  # fmt: skip
            return
        # what the UgCS operator sees in the vehicle's log (not cached: only live connections)
        refused = result.code != "STATUS_OK"
        text = f"{name}: {result.text or ('refused' if refused else 'done')}"
        self.session.status_message(
            device_id, text, defs.SEVERITY_WARN if refused else defs.SEVERITY_INF
        )
        if required:
            self.session.respond(
                conn,
                device_id,
                message_id,
                int(defs.Status_code.Value(result.code)),
                result.text,
                mission_id=result.mission_id,
                command_map=result.command_map,
            )

    def _outbox(self, member: Member, group: Any) -> None:
        for row, name, what in member.outbox():
            device_id = int(group.device_ids[row])
            if isinstance(what, str):
                self.session.status_message(device_id, what)
                continue
            key = (id(member), row, name)
            request = self._pending.get(key)
            if request is None:
                log.warning("ugcs: %s reported for %s, which is not in progress", name, row)
                continue
            if what.code != "STATUS_IN_PROGRESS":
                del self._pending[key]
            self._reply(request, name, what, True)

    def tick(self, now: float, scheduled: float | None = None) -> None:
        """One step: every member steps, telemetry and availability go into its group, then
        one commit. `scheduled` is the tick's time on the rate's grid: commits on the grid are
        exactly one period apart, so a tick that wakes a little early does not fall inside
        the 200 ms window."""
        wall = self._wall_ms(now)
        for member, group in zip(self.members, self._groups, strict=True):
            member.step(now)
            group.update(member.telemetry(), wall)
            group.set_enabled(member.availability())
            self._outbox(member, group)
        self.session.commit(now if scheduled is None else scheduled)
        self.server.flush_all()
        self._due = (now if scheduled is None else scheduled) + 1.0 / self.rate

    def step(self, now: float) -> None:
        self.tick(now)

    def next_deadline(self) -> float | None:
        return self._due

    async def serve(self) -> None:
        """Listen (or in reverse mode dial) until cancelled; then unregister every device."""
        freeze()  # the registrations: out of every full collection (FREEZE_AFTER)
        try:
            if self.target is not None:
                self.listening(self.target)
                await self.server.dial(*self.target)
            else:
                await self.server.serve(self.host, self.port, self.listening)
        finally:
            self.server.shutdown()
            thaw()  # the registrations, frozen above, can go once this VSM does


class UgcsSim(VsmSim):
    """`robowire sim ugcs`: `--count` simulated multicopters (model.py) on one VSM, telemetry
    at `--rate` Hz (default 5). Listens on 127.0.0.1:5556 by default; with `--to HOST[:PORT]`
    it dials the UCS instead (reverse mode) and redials after a loss (after 1 s, doubling up to
    10 s as long as it cannot connect).

    Settings (`--set k=v`): the fleet's (`origin=LAT,LON,ALT`, `patrol=SIDE`, `spacing`,
    `cruise_speed`, ...; see `model.SETTINGS`), `keep_alive=N` (ping every second, close after
    N s of silence), `name` (the VSM's name in its Register_peer), `camera=0`, `gimbal=0`.
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
        self.vehicles = WorldVehicles(self.session, origin=_origin(origin, where), name=name)
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


def _plain(params: Mapping[str, Value]) -> dict[str, ParamValue]:
    """Parameters as the model takes them (no list or bytes value is registered for it)."""
    return {k: None if isinstance(v, bytes | list) else v for k, v in params.items()}


DEFAULT_ORIGIN_TEXT = ",".join(str(x) for x in DEFAULT_ORIGIN)


def _origin(text: str, where: str) -> tuple[float, float, float]:
    try:
        lat, lon, alt = (float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"{where}: origin must be LAT,LON,ALT, not {text!r}") from None
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ConfigError(f"{where}: origin {text!r} is not a place on Earth")
    return lat, lon, alt


# --- UCS side: the listen source ------------------------------------------------------------

UCS_SOURCE_OPTIONS = frozenset({"mode", "origin"})
UCS_FILE_OPTIONS = frozenset({"speed", "origin"})
FREEZE_AFTER = 100
"""Registrations are big and live long (a 1,000-vehicle fleet's are about half a million
Python objects), and every full garbage collection scans them all: a 60-80 ms pause, the
whole tail of the telemetry lag (bench_ugcs). Once a connection has this many devices, a
read that registered more ends with `gc.freeze()`: what exists then is left out of later
collections (freed when no longer referenced, except what is in a reference cycle: `thaw`
undoes the freeze when the connection ends)."""


class _Freezer:
    thawed = False  # a `thaw` happened since the last `freeze`


def freeze() -> None:
    """`gc.freeze()` what exists now (see FREEZE_AFTER). After a `thaw`, one full collection
    first: what the ended connection or simulator left in reference cycles is freed, not
    frozen again (one pause a reconnection, not one a registration)."""
    if _Freezer.thawed:
        _Freezer.thawed = False
        gc.collect()
    gc.freeze()


def thaw() -> None:
    """Undo `freeze` when what was frozen for a connection or a simulator ends: the cycle
    collector never looks at frozen objects, so a frozen registration that is part of a
    reference cycle (a session and its devices, a simulator and its server) would otherwise
    stay in memory for good once unused, one fleet per reconnection. Back in the oldest
    generation they are freed by the next full collection once unreachable; the next large
    registration freezes what is still alive again."""
    if gc.get_freeze_count():
        gc.unfreeze()
        _Freezer.thawed = True


_PASSED_ON = (PacketDropped, ConnectionLost)  # what a standby connection still reports
_REGISTRATIONS = (PeerRegistered, DeviceRegistered, DeviceUnregistered, ConnectionLost)


def parse_origin(endpoint: Endpoint) -> Origin | None:
    """`?origin=lat,lon[,alt]` in degrees and metres, or None (the first fix)."""
    text = endpoint.options.get("origin")
    if text is None:
        return None
    try:
        parts = [float(p) for p in text.split(",")]
    except ValueError:
        parts = []
    if len(parts) not in (2, 3) or not (-90 <= parts[0] <= 90 and -180 <= parts[1] <= 180):
        raise ConfigError(f"{endpoint.raw}: origin must be LAT,LON[,ALT] in degrees and metres")
    return (parts[0], parts[1], parts[2] if len(parts) == 3 else 0.0)


COMMAND_TIMEOUT = 10.0
"""s without a final reply (IN_PROGRESS restarts it) before a viewer command is `timeout`."""
_NUMBERS = frozenset({ValueKind.DOUBLE, ValueKind.FLOAT, ValueKind.INT})
_DEGREE_UNIT = semantic_unit(defs.FIELD_SEMANTIC_LATITUDE)
_LABELS = {
    "arm": "Arm",
    "disarm": "Disarm",
    "auto": "Auto mode",
    "manual": "Manual mode",
    "guided": "Guided mode",
    "emergency_land": "Emergency land",
    "land_command": "Land",
    "takeoff_command": "Take off",
    "return_to_home": "Return home",
    "mission_upload": "Upload mission",
    "mission_pause": "Pause mission",
    "mission_resume": "Resume mission",
    "mission_clear": "Clear mission",
    "waypoint": "Go to",
}
MISSION_PARAMS = (
    ParamSpec(name="waypoints", type="waypoints", unit="deg,deg,m", required=True),
    ParamSpec(name="speed", type="number", unit="m/s", default=5.0, minimum=0.1, maximum=100.0),
    ParamSpec(name="name", type="string", default="robowire"),
    ParamSpec(name="start", type="bool", default=False),
)
"""The browser's mission_upload: waypoints [lat deg, lon deg, height above home m], one ground
speed for all, the mission's name, and `start` (send `auto` once the upload is OK)."""


def command_spec(info: CommandInfo) -> CommandSpec:
    """A registered command as the viewer shows it: its parameters in user units (degrees
    for angles, metres, m/s), enumerations as strings naming a choice. Parameters of kinds a
    browser cannot give (bytes, lists) are left out: they go as NA."""
    label = _LABELS.get(info.name, info.name.replace("_", " ").capitalize())
    if info.name == "mission_upload":
        return CommandSpec(name=info.name, label=label, params=MISSION_PARAMS)
    params = []
    for p in info.parameters:
        unit = semantic_unit(p.semantic)
        low, high = p.min, p.max
        if unit == _DEGREE_UNIT:
            low = math.degrees(low) if isinstance(low, int | float) else None
            high = math.degrees(high) if isinstance(high, int | float) else None
        minimum = float(low) if isinstance(low, int | float) else None
        maximum = float(high) if isinstance(high, int | float) else None
        if p.enumeration:
            choices = tuple(p.enumeration[k] for k in sorted(p.enumeration))
            params.append(ParamSpec(name=p.name, type="string", choices=choices))
        elif p.kind in _NUMBERS:
            params.append(
                ParamSpec(name=p.name, type="number", unit=unit, minimum=minimum, maximum=maximum)
            )
        elif p.kind is ValueKind.BOOL:
            params.append(ParamSpec(name=p.name, type="bool"))
        elif p.kind is ValueKind.STRING:
            params.append(ParamSpec(name=p.name, type="string"))
    return CommandSpec(name=info.name, label=label, params=tuple(params))


def mission_of(params: Mapping[str, Any], target: UcsDevice) -> Mission:
    """The browser's mission form as a `Mission`: heights above home become AMSL altitudes
    over the vehicle's home (`altitude_origin` = home), one speed for all waypoints."""
    home = home_altitude(target)
    speed = float(params.get("speed", 5.0))
    return Mission.from_json(
        {
            "attributes": {"altitude_origin": home, "name": str(params.get("name", "robowire"))},
            "waypoints": [
                {"latitude": lat, "longitude": lon, "altitude": home + alt, "speed": speed}
                for lat, lon, alt in params["waypoints"]
            ],
        }
    )


def reply_status(command: str, reply: ResponseReceived | CommandTimedOut) -> CommandStatus:
    """A VSM's reply as a command status."""
    if isinstance(reply, CommandTimedOut):
        return CommandStatus(TIMEOUT, f"{command}: no reply from the VSM in {reply.timeout:g} s")
    text = reply.status
    if reply.code == defs.STATUS_IN_PROGRESS:
        if reply.progress is not None:
            text = f"{text} {reply.progress:.0%}".strip()
        return CommandStatus(IN_PROGRESS, f"{command}: {text or 'in progress'}")
    if reply.code == defs.STATUS_OK:
        return CommandStatus(OK, f"{command}: {text or 'done'}")
    return CommandStatus(FAILED, f"{command}: {text or status_name(reply.code)}")


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
        return next(((s, d) for s, d in self._devices() if d.label == label), None)

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
