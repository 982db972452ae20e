"""Command UgCS vehicles from Python: the UCS side of one connection to a VSM (`UcsClient`).
The command line (`robowire ugcs ...`, the `command` group that `PROTOCOL.command` names) is
`cli.py`, on this.

    async with UcsClient("127.0.0.1", 5556) as ucs:
        drone = await ucs.wait_for_device("SIM-0001")
        result = await ucs.command("SIM-0001", "arm")
        print(result.code_name, result.text)                      # STATUS_OK
        mission = Mission.from_json(json.load(open("mission.json")))
        result = await ucs.upload_mission("SIM-0001", mission)
        await ucs.command("SIM-0001", "auto")                     # fly it

Parameters are given in the units people use, converted by each parameter's semantic:
latitude, longitude and angles in degrees (radians on the wire), altitudes in metres, speeds
in m/s; enumerations by number or by their registered name ("rth", "land"); every registered
parameter the caller leaves out is sent as NA.

The mission file (JSON; `Mission.from_json`):

    {"attributes": {"name": "survey", "altitude_origin": 0, "safe_altitude": 30},
     "waypoints": [{"latitude": 56.95, "longitude": 24.11, "altitude": 40, "speed": 5},
                   {"latitude": 56.951, "longitude": 24.112, "altitude": 40,
                    "acceptance_radius": 2},
                   {"command": "wait", "time": 5}]}

`attributes` are `mission_upload`'s parameters (`altitude_origin`, the AMSL altitude that
mission altitudes are measured from, defaults to the vehicle's `home_altitude_amsl`, else 0).
Each waypoint is a `move` (`altitude` = `altitude_amsl`); a `speed` different from the one
before adds a `set_speed` item first; an entry with `"command"` is that mission item as is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import secrets
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from robowire.endpoints import split_host_port
from robowire.errors import ConfigError, RobowireError, SessionError, TransportError
from robowire.protocols.ugcs.codec import DEFAULT_PORT, DEGREE_SEMANTICS, Value, defs
from robowire.protocols.ugcs.device import CommandInfo, FieldInfo
from robowire.protocols.ugcs.events import (
    CommandTimedOut,
    PeerRegistered,
    ResponseReceived,
    UcsSessionEvent,
)
from robowire.protocols.ugcs.session_ucs import UcsDevice, UcsSession
from robowire.timebase import monotonic
from robowire.transport.tcp import StreamDriver, connect_stream
from robowire.wire import ConnectionLost

_PEER_ID = secrets.randbits(32) or 1


def process_peer_id() -> int:
    """This process's UCS `peer_id`: one random number for its whole life, so that a VSM sees
    our several connections as one server (ugcs.md 1.4)."""
    return _PEER_ID


def to_wire(info: FieldInfo, value: Value) -> Value:
    """A parameter value in user units (degrees for angles) -> wire units (radians)."""
    if info.semantic in DEGREE_SEMANTICS and isinstance(value, int | float | bool):
        return math.radians(value) if not isinstance(value, bool) else value
    return value


def wire_params(info: CommandInfo, params: Mapping[str, Value]) -> dict[str, Value]:
    by_name = {p.name: p for p in info.parameters}
    return {k: to_wire(by_name[k], v) if k in by_name else v for k, v in params.items()}


def status_name(code: int) -> str:
    try:
        return str(defs.Status_code.Name(defs.Status_code.ValueType(code)))
    except ValueError:
        return str(code)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandResult:
    """A command's final reply: the Status_code, its name and the VSM's text; for a mission
    upload, the mission id and vehicle command id -> item index map."""

    command: str
    code: int
    text: str = ""
    mission_id: int | None = None
    mission_map: Mapping[int, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.code == defs.STATUS_OK

    @property
    def code_name(self) -> str:
        return status_name(self.code)

    def __str__(self) -> str:
        text = f": {self.text}" if self.text else ""
        return f"{self.command}: {self.code_name}{text}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Mission:
    """A mission in user units: `mission_upload` attributes and its items (command name,
    parameters), built from the JSON form by `from_json`. `waypoint_of_item[i]` is the
    waypoint (entry of the JSON list) that item i came from."""

    attributes: Mapping[str, Value]
    items: tuple[tuple[str, Mapping[str, Value]], ...]
    waypoint_of_item: tuple[int, ...] = ()

    @classmethod
    def from_json(cls, data: Any) -> Mission:
        """The JSON form (see the module docstring); ConfigError naming what is wrong."""
        if not isinstance(data, dict):
            raise ConfigError("mission: a JSON object with 'attributes' and 'waypoints'")
        unknown = set(data) - {"attributes", "waypoints"}
        if unknown:
            raise ConfigError(f"mission: unknown key(s) {', '.join(sorted(unknown))}")
        attributes = data.get("attributes", {})
        waypoints = data.get("waypoints")
        if not isinstance(attributes, dict):
            raise ConfigError("mission: 'attributes' must be an object")
        if not isinstance(waypoints, list) or not waypoints:
            raise ConfigError("mission: 'waypoints' must be a non-empty list")
        items: list[tuple[str, Mapping[str, Value]]] = []
        origin: list[int] = []
        speed: float | None = None
        for index, point in enumerate(waypoints):
            if not isinstance(point, dict):
                raise ConfigError(f"mission: waypoint {index} must be an object")
            params = dict(point)
            name = params.pop("command", "move")
            if not isinstance(name, str):
                raise ConfigError(f"mission: waypoint {index}: 'command' must be a string")
            if name == "move":
                for key in ("latitude", "longitude", "altitude"):
                    if not isinstance(params.get(key), int | float):
                        raise ConfigError(f"mission: waypoint {index} needs a number {key!r}")
                params["altitude_amsl"] = params.pop("altitude")
                new_speed = params.pop("speed", None)
                if new_speed is not None:
                    if not isinstance(new_speed, int | float) or new_speed <= 0:
                        raise ConfigError(f"mission: waypoint {index}: bad speed {new_speed!r}")
                    if new_speed != speed:
                        items.append(("set_speed", {"ground_speed": float(new_speed)}))
                        origin.append(index)
                        speed = float(new_speed)
            items.append((name, params))
            origin.append(index)
        return cls(attributes=attributes, items=tuple(items), waypoint_of_item=tuple(origin))

    @classmethod
    def load(cls, path: str) -> Mission:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as exc:
            raise ConfigError(f"{path}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not JSON: {exc}") from None
        try:
            return cls.from_json(data)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None


def split_host(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """`--host HOST[:PORT]` -> (host, port); ConfigError for a bad port."""
    return split_host_port(text, default_port, what="--host")


Reply = ResponseReceived | CommandTimedOut
"""What answers a request: a reply (final or IN_PROGRESS), or no final reply in time."""


class Replies:
    """Requests awaiting their replies, by message id: the one command path that `UcsClient`
    and the listen source (`services.UcsSource`, commanded from the viewer) share.

    `expect(message_id)` before the request is flushed; `on_events` with every session event
    of that connection; `replies(message_id)` yields each reply (IN_PROGRESS ones too) up to
    and including the final one (or `CommandTimedOut`); a lost connection raises
    TransportError in every waiting request."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._queues: dict[int, asyncio.Queue[Reply | TransportError]] = {}

    def expect(self, message_id: int) -> None:
        self._queues[message_id] = asyncio.Queue()

    def forget(self, message_id: int) -> None:
        self._queues.pop(message_id, None)

    def on_events(self, events: Sequence[object]) -> None:
        for event in events:
            match event:
                case ResponseReceived() | CommandTimedOut():
                    queue = self._queues.get(event.message_id)
                    if queue is not None:
                        queue.put_nowait(event)
                case ConnectionLost(reason=reason):
                    self.lost(reason)

    def lost(self, reason: str) -> None:
        """No reply can come any more: every waiting request raises TransportError."""
        for queue in self._queues.values():
            queue.put_nowait(TransportError(f"{self.where}: {reason}"))
        self._queues.clear()

    async def replies(self, message_id: int) -> AsyncIterator[Reply]:
        """Each reply to `message_id` until the final one (inclusive)."""
        queue = self._queues.get(message_id)
        if queue is None:
            raise SessionError(f"{self.where}: message {message_id} awaits no reply")
        try:
            while True:
                reply = await queue.get()
                if isinstance(reply, TransportError):
                    raise reply
                yield reply
                if isinstance(reply, CommandTimedOut) or reply.final:
                    return
        finally:
            self._queues.pop(message_id, None)

    async def final(self, message_id: int) -> Reply:
        """The final reply to `message_id` (or its `CommandTimedOut`)."""
        last: Reply | None = None
        async for reply in self.replies(message_id):
            last = reply
        assert last is not None
        return last


def result_of(reply: Reply, command: str, label: str) -> CommandResult:
    """A final reply as a `CommandResult`; TransportError for no reply in time."""
    if isinstance(reply, CommandTimedOut):
        raise TransportError(f"{label}: no reply to {command} in {reply.timeout:g} s")
    return CommandResult(
        command=command,
        code=reply.code,
        text=reply.status,
        mission_id=reply.mission_id,
        mission_map=dict(reply.mission_command_map),
    )


def send_command(
    session: UcsSession,
    target: UcsDevice,
    command: str,
    params: Mapping[str, Value] | None = None,
    *,
    timeout: float = 10.0,
) -> int:
    """Queue `command` to `target` with `params` in user units (degrees, metres, m/s);
    returns its message id (SessionError for an unknown command or parameter)."""
    info = target.commands.get(command)
    wire = wire_params(info, params or {}) if info is not None else dict(params or {})
    return session.command(target.device_id, command, wire, now=monotonic(), timeout=timeout)


def send_mission(
    session: UcsSession, target: UcsDevice, mission: Mission, *, timeout: float = 10.0
) -> int:
    """Queue the upload of `mission` to `target`; returns its message id. `altitude_origin`
    defaults to the vehicle's `home_altitude_amsl` (else 0)."""
    upload = target.commands.get("mission_upload")
    if upload is None:
        raise SessionError(f"{target.label}: takes no missions (no mission_upload command)")
    attributes = dict(mission.attributes)
    if "altitude_origin" not in attributes:
        attributes["altitude_origin"] = home_altitude(target)
    items = []
    for name, params in mission.items:
        info = target.commands.get(name)
        items.append((name, wire_params(info, params) if info is not None else params))
    return session.upload_mission(
        target.device_id,
        wire_params(upload, attributes),
        items,
        now=monotonic(),
        timeout=timeout,
    )


def home_altitude(target: UcsDevice) -> float:
    """The vehicle's `home_altitude_amsl` (m), 0 when it has sent none."""
    home = target.values.get("home_altitude_amsl")
    if isinstance(home, int | float) and math.isfinite(home):
        return float(home)
    return 0.0


class UcsClient:
    """The UCS side of one connection to a VSM, as a Python object; use `async with`."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        peer_id: int | None = None,
        name: str = "robowire",
        connect_timeout: float = 5.0,
    ) -> None:
        self.host = host
        self.port = port
        self.peer_id = process_peer_id() if peer_id is None else peer_id
        self.name = name
        self.connect_timeout = connect_timeout
        self.session: UcsSession | None = None
        self.peer: PeerRegistered | None = None
        self._driver: StreamDriver | None = None
        self._task: asyncio.Task[None] | None = None
        self.replies = Replies(self.where)
        self._changed = asyncio.Event()
        self.listeners: list[Callable[[list[UcsSessionEvent]], None]] = []
        """Called with the session's events of every read (telemetry of a read of many frames
        comes as one `TelemetryColumns`: `session.received(event)` gives it per Device_status)."""

    # -- connection -----------------------------------------------------------------------------

    async def __aenter__(self) -> UcsClient:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def connect(self) -> None:
        """Connect and wait for the VSM's Register_peer (TransportError if it does not come)."""
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[StreamDriver] = loop.create_future()
        self.session = UcsSession(monotonic(), peer_id=self.peer_id, name=self.name)

        def on_open(driver: StreamDriver) -> None:
            if not opened.done():
                opened.set_result(driver)

        self._task = asyncio.create_task(
            connect_stream(
                self.host,
                self.port,
                self.session,
                self._on_events,
                on_open=on_open,
                timeout=self.connect_timeout,
            )
        )
        waiting: set[asyncio.Future[Any]] = {self._task, opened}
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            opened.cancel()
            self._task.result()  # the TransportError
            raise TransportError(f"{self.where}: the VSM closed the connection at once")
        self._driver = opened.result()
        await self._wait_until(
            lambda: self.peer is not None, self.connect_timeout, "no Register_peer from the VSM"
        )

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    async def close(self) -> None:
        if self._task is None:
            return
        if self._driver is not None:
            self._driver.close()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, RobowireError):
            await self._task
        self._task = None

    @property
    def connected(self) -> bool:
        return (
            self._task is not None
            and not self._task.done()
            and self.session is not None
            and not self.session.close_expected()
        )

    def _on_events(self, driver: StreamDriver, events: list[Any]) -> None:
        for event in events:
            match event:
                case PeerRegistered():
                    self.peer = event
        self.replies.on_events(events)
        for listener in self.listeners:
            listener(events)
        self._changed.set()

    async def _wait_until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not done():
            if self._task is None or self._task.done():
                if self._task is not None and not self._task.cancelled():
                    self._task.result()  # raises what ended the connection
                raise TransportError(f"{self.where}: connection closed ({what})")
            self._changed.clear()
            left = deadline - loop.time()
            if left <= 0:
                raise TransportError(f"{self.where}: {what} in {timeout:g} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 0.5))

    # -- devices --------------------------------------------------------------------------------

    @property
    def devices(self) -> list[UcsDevice]:
        return [] if self.session is None else list(self.session.devices.values())

    def device(self, name: str) -> UcsDevice:
        """The registered device `name` names, or SessionError listing the ones there are."""
        found = None if self.session is None else self.session.device(name)
        if found is None:
            there = ", ".join(d.label for d in self.devices) or "none"
            raise SessionError(f"{self.where}: no device {name!r} (registered: {there})")
        return found

    async def wait_for_device(
        self, name: str, timeout: float = 10.0, *, telemetry: Sequence[str] = ()
    ) -> UcsDevice:
        """Wait until a device `name` names is registered and, if `telemetry` names fields,
        until each of them has a value (TransportError after `timeout`). A device registers
        before its first telemetry comes, and a simulated one reports no position before its
        GPS has a fix: wait for what you read."""

        def ready() -> bool:
            device = None if self.session is None else self.session.device(name)
            if device is None:
                return False
            return all(device.values.get(f) is not None for f in telemetry)

        what = f"no device {name!r} registered"
        if telemetry:
            what = f"no device {name!r} with {', '.join(telemetry)}"
        await self._wait_until(ready, timeout, what)
        return self.device(name)

    async def wait_for(
        self, done: Callable[[], bool], timeout: float = 10.0, what: str = "condition not met"
    ) -> None:
        """Wait until `done()` (checked after every read) or TransportError after `timeout`."""
        await self._wait_until(done, timeout, what)

    # -- commands -------------------------------------------------------------------------------

    async def _reply(self, message_id: int, command: str, label: str) -> CommandResult:
        if self._driver is not None:
            self._driver.flush()
        return result_of(await self.replies.final(message_id), command, label)

    async def command(
        self,
        device: str,
        command: str,
        params: Mapping[str, Value] | None = None,
        *,
        timeout: float = 10.0,
    ) -> CommandResult:
        """Send `command` to `device` (parameters in user units) and wait for its final
        reply: the status code and text (TransportError if none comes in `timeout`)."""
        session = self._session()
        target = self.device(device)
        message_id = send_command(session, target, command, params, timeout=timeout)
        self.replies.expect(message_id)
        return await self._reply(message_id, command, target.label)

    async def command_id(
        self, device_id: int, command_id: int, *, timeout: float = 10.0
    ) -> CommandResult:
        """A raw command id to a raw session device id (for probing: an unknown device gets
        no reply, so this raises TransportError after `timeout`)."""
        session = self._session()
        message_id = session.command(device_id, command_id, now=monotonic(), timeout=timeout)
        self.replies.expect(message_id)
        return await self._reply(message_id, f"#{command_id}", f"device {device_id}")

    async def upload_mission(
        self, device: str, mission: Mission, *, timeout: float = 10.0
    ) -> CommandResult:
        """Upload `mission` to `device` and wait for the reply (mission id and item map)."""
        session = self._session()
        target = self.device(device)
        message_id = send_mission(session, target, mission, timeout=timeout)
        self.replies.expect(message_id)
        return await self._reply(message_id, "mission_upload", target.label)

    def _session(self) -> UcsSession:
        if self.session is None or not self.connected:
            raise TransportError(f"{self.where}: not connected")
        return self.session
