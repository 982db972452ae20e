"""The VSM side's asyncio runner, used by `services` (`UgcsSim`, `UgcsSink`) and `vsm.serve`.

`VsmServer` is the thin asyncio driver of one `VsmSession` (a listening server, or in reverse
mode a dialler that redials on the `Source` template's backoff), one shared `StreamDriver` per
connection. `VsmSim` runs `Member`s (your `vehicle.Vehicle`s, or the simulator's fleet) on it:
the `Sim` template's ticks, command handling and replies.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from robowire.errors import ConfigError, TransportError
from robowire.protocols.ugcs.codec import DEFAULT_PORT, Value
from robowire.protocols.ugcs.definitions import ParamValue, Result
from robowire.protocols.ugcs.device import IdCounter
from robowire.protocols.ugcs.events import (
    CommandReceived,
    ConnectionEnded,
    DeviceAcknowledged,
    PeerRegistered,
    VsmEvent,
)
from robowire.protocols.ugcs.gcfreeze import freeze, thaw
from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs
from robowire.protocols.ugcs.session_vsm import VsmLink, VsmSession
from robowire.protocols.ugcs.vehicle import Member
from robowire.service import Sim
from robowire.timebase import WallClock, monotonic
from robowire.transport.reconnect import Backoff, keep_connecting
from robowire.transport.tcp import StreamDriver, serve_stream
from robowire.wire import Address, PacketDropped

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
DEFAULT_RATE = 5.0


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
        first_id: int = 1,
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
        self.session = VsmSession(
            peer_id=instance_id(), name=name, keep_alive=keep_alive, ids=IdCounter(first_id)
        )
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


def _plain(params: Mapping[str, Value]) -> dict[str, ParamValue]:
    """Parameters as the model takes them (no list or bytes value is registered for it)."""
    return {k: None if isinstance(v, bytes | list) else v for k, v in params.items()}
