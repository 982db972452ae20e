"""The UCS side of one connection to a VSM, sans-I/O: bytes and `now` in, events and bytes out.

What it does (ugcs.md 1.3-3.7, the checklist in section 6):

* On creation it queues our Register_peer (`device_id` 0, `peer_type` SERVER, version 4.4, a
  `peer_id` the caller keeps stable per process), whichever side dialled.
* It waits for the VSM's Register_peer (`PEER_TIMEOUT` s, then it closes); anything else
  before it is dropped, as the SDK does. A peer that says it is a server is refused.
* Every Register_device is ACKed (`Device_response{STATUS_OK}`, same `message_id`) and
  mapped: field, command and parameter ids are this session's only, so everything is kept by
  name (`UcsDevice` over the shared `device.DeviceInfo`); a field of another subsystem than the
  flight controller is keyed `gimbal.heading` (`FieldInfo.key`).
* Telemetry is applied at `begin_of_epoch + ms_since_epoch` and held until the VSM sends
  `META_VALUE_NA` (None); availability and status messages are passed on.
* VSM pings (`device_id` 0, `response_required`, no payload) are answered OK.
* Commands go one per message with `response_required`, with every registered parameter
  (NA when the caller gave none); replies are matched by `message_id`; STATUS_IN_PROGRESS is
  not final (it restarts the timeout); no final reply in time is `CommandTimedOut` (the SDK
  never answers for a device it does not know).
* `mission_upload` carries the mission items as sub-commands; its reply's `mission_id` and
  `mission_command_map` map `current_command` back to an item while `current_mission_id`
  matches (`MissionProgress`); a different `current_mission_id` drops the map.

A frame that does not parse (or a length over 1,000,000) cannot be skipped in a stream: the
session drops it, counts it and asks for the connection to be closed (the SDK does the same).

Size: one module over 600 lines because it is one thing, the UCS side's state machine: the
registrations, the commands and missions and the telemetry paths (one message at a time, or
as columns) all read and change the same devices and pending replies (the held values'
columns, which are a cache, are `held.py`).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from robowire.errors import LocalProtocolError, SessionError
from robowire.protocols.ugcs.codec import (
    NAME,
    FrameReader,
    Kind,
    Scan,
    Value,
    defs,
    encode,
    frames_of,
    parse_frames,
    pb,
    scan_telemetry,
    write_value,
)
from robowire.protocols.ugcs.device import CommandInfo, DeviceInfo, FieldInfo
from robowire.protocols.ugcs.events import (
    AvailabilityChanged,
    CommandTimedOut,
    DeviceRegistered,
    DeviceUnregistered,
    MissionProgress,
    PeerRegistered,
    ResponseReceived,
    StatusMessage,
    StatusMessages,
    TelemetryColumns,
    TelemetryReceived,
    TelemetryValue,
    UcsSessionEvent,
)
from robowire.protocols.ugcs.held import MISSION_KEYS, Held, HeldView, received
from robowire.wire import ConnectionLost, PacketDropped, SessionStats, transition

COLUMNS_FROM = 8
"""A feed of at least this many frames reads the Device_status frames of the SDK's layout as
columns (`codec.scan_telemetry`, one `TelemetryColumns`); fewer: one message at a time."""
PEER_TIMEOUT = 10.0  # s for the VSM's Register_peer (the SDK's REGISTER_PEER_TIMEOUT)
COMMAND_TIMEOUT = 10.0  # s for a command's final reply, unless the caller says otherwise
VERSION = (4, 4)  # what we claim; the SDK's VSM needs >= 2.14

_STRING = int(Kind.STRING)
_PAIRS = ((False, False), (False, True), (True, False), (True, True))
"""(available, enabled) by 2 * available + enabled: one tuple for every command's."""


def _count_runs(values: np.ndarray) -> int:
    """How many runs of equal values `values` holds (distinct frames: they come in order)."""
    return int(np.count_nonzero(values[1:] != values[:-1])) + 1 if len(values) else 0


_ENUM_SEMANTICS = frozenset({defs.FIELD_SEMANTIC_ENUM})
_LABEL_PROPERTIES = ("vehicle_serial", "serial_number", "vehicle_name")


class UcsState(enum.Enum):
    AWAIT_PEER = "await_peer"  # our Register_peer is queued; the VSM's has not come yet
    READY = "ready"  # both peers registered: devices, telemetry, commands
    CLOSED = "closed"  # the connection is to be closed (or was); input is ignored


class Input(enum.Enum):
    PEER = "the VSM's Register_peer"
    REFUSED = "a Register_peer we refuse"
    TIMEOUT = "no Register_peer in time"
    BAD_FRAME = "a frame that does not decode"
    EOF = "end of stream"
    CLOSE = "close() called"


TRANSITIONS: dict[UcsState, dict[Input, UcsState]] = {
    UcsState.AWAIT_PEER: {
        Input.PEER: UcsState.READY,
        Input.REFUSED: UcsState.CLOSED,
        Input.TIMEOUT: UcsState.CLOSED,
        Input.BAD_FRAME: UcsState.CLOSED,
        Input.EOF: UcsState.CLOSED,
        Input.CLOSE: UcsState.CLOSED,
    },
    UcsState.READY: {
        Input.BAD_FRAME: UcsState.CLOSED,
        Input.EOF: UcsState.CLOSED,
        Input.CLOSE: UcsState.CLOSED,
    },
    UcsState.CLOSED: {Input.EOF: UcsState.CLOSED, Input.CLOSE: UcsState.CLOSED},
}
"""All the state logic: state -> input -> next state. A pair not listed is a bug (SessionError).
A second Register_peer in READY is not an input: it is dropped like any unexpected message."""


def device_label(info: DeviceInfo) -> str:
    """A device's name that outlives the session: its `vehicle_serial` (or `serial_number`,
    or `vehicle_name`), else `device<id>`."""
    for key in _LABEL_PROPERTIES:
        value = info.properties.get(key)
        if value not in (None, ""):
            return str(value)
    return f"device{info.device_id}"


@dataclass(slots=True, eq=False)
class UcsDevice:
    """One registered device as the UCS side knows it: its registration (`info`), its stable
    `label`, and what it said since (held telemetry by field key, in wire units with None for
    NA, `values`; times in ms since the Unix epoch, `times`; availability; the mission we
    uploaded). The held telemetry lives in the session's `Held` columns (`rows`: field id ->
    row there)."""

    info: DeviceInfo
    label: str
    held: Held = field(default_factory=Held, repr=False)
    rows: dict[int, int] = field(default_factory=dict, repr=False)
    mission_id: int | None = None
    mission_map: dict[int, int] = field(default_factory=dict)
    mission_item: int | None = None
    mission_matched: bool = False  # current_mission_id has been our mission's id
    fields: dict[int, tuple[FieldInfo, str, int]] = field(init=False, repr=False)
    """field id -> (its registration, its key, its row in `held`)"""
    command_names: dict[int, str] = field(init=False, repr=False)
    """command id -> its name"""
    command_ids: list[int] = field(init=False, repr=False)
    command_labels: list[str] = field(init=False, repr=False)
    """the ids and names of its commands, in the order registered"""
    command_pairs: list[int] = field(init=False, repr=False)
    """each command's availability (as registered): `_PAIRS`' index, -1 until said"""
    command_position: dict[int, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.rows:
            self.rows = self.held.add(self.info)
        self.fields = {f.field_id: (f, f.key, self.rows[f.field_id]) for f in self.info.fields}
        self.command_names = {c.command_id: c.name for c in self.info.commands}
        self.command_ids = [c.command_id for c in self.info.commands]
        self.command_labels = list(map(self.command_names.__getitem__, self.command_ids))
        self.command_pairs = [-1] * len(self.command_ids)
        self.command_position = {c: k for k, c in enumerate(self.command_ids)}

    @property
    def availability(self) -> dict[str, tuple[bool, bool]]:
        """(available, enabled) of every command the device said, by name."""
        pairs = zip(self.command_labels, self.command_pairs, strict=True)
        return {name: _PAIRS[pair] for name, pair in pairs if pair >= 0}

    def set_availability(self, command_ids: Sequence[int], pairs: Sequence[int]) -> None:
        """Commands' availability (`_PAIRS`' indices); ids it did not register are ignored."""
        if command_ids == self.command_ids:  # every command, in order: a first Device_status
            self.command_pairs = list(pairs)
            return
        position = self.command_position
        for command_id, pair in zip(command_ids, pairs, strict=True):
            k = position.get(command_id)
            if k is not None:
                self.command_pairs[k] = pair

    @property
    def values(self) -> Mapping[str, Value]:
        """The latest value of every field that said one, by key (None: not available); a
        live view."""
        return HeldView(self.held, self.fields, times=False)

    @property
    def times(self) -> Mapping[str, int]:
        """When each of `values` was set (ms since the Unix epoch); a live view."""
        return HeldView(self.held, self.fields, times=True)  # type: ignore[return-value]

    @property
    def device_id(self) -> int:
        return self.info.device_id

    @property
    def commands(self) -> Mapping[str, CommandInfo]:
        return self.info.commands_by_name

    def matches(self, name: str) -> bool:
        """True if `name` is this device's label, serial, model name or session id."""
        if name in (self.label, str(self.device_id)):
            return True
        return any(self.info.properties.get(key) == name for key in _LABEL_PROPERTIES)


def _value(fv: pb.Field_value) -> Value:
    """A Field_value as Python in one runtime call (the hot path): None for NA or empty."""
    members = fv.ListFields()
    if not members:
        return None
    descriptor, value = members[0]
    number = descriptor.number
    if number == 1:  # meta_value: the only one is NA
        return None
    if number == 7:
        return [_value(v) for v in value.values]
    result: Value = value
    return result


@dataclass(slots=True)
class _Pending:
    device_id: int
    command: str
    timeout: float
    deadline: float


class UcsSession:
    """The UCS side of one connection (see the module docstring for the rules).

    `conn` is the connection id its events carry (a source with several connections tells
    them apart by it); `first_message_id` is where our message ids start."""

    def __init__(
        self,
        now: float,
        *,
        peer_id: int,
        name: str = "robowire",
        build: str = "robowire",
        conn: int = 0,
        first_message_id: int = 1,
        peer_timeout: float = PEER_TIMEOUT,
    ) -> None:
        self.state = UcsState.AWAIT_PEER
        self.stats = SessionStats()
        self.conn = conn
        self.peer_id = peer_id
        self.peer: PeerRegistered | None = None
        self.devices: dict[int, UcsDevice] = {}
        self.close_reason = ""
        self._reader = FrameReader()
        self.held = Held()
        self._out: list[bytes] = []
        self._pending: dict[int, _Pending] = {}
        self._next_id = first_message_id
        self._peer_timeout = peer_timeout
        self._peer_deadline: float | None = now + peer_timeout
        hello = pb.Vsm_message(device_id=0)
        peer = hello.register_peer
        peer.peer_id = peer_id
        peer.peer_type = defs.PEER_TYPE_SERVER
        peer.version_minor = VERSION[1]
        peer.version_major = VERSION[0]
        peer.version_build = build
        peer.name = name
        self._send(hello)

    # -- the state machine --------------------------------------------------------------------

    def _move(self, event: Input) -> UcsState:
        self.state = transition(TRANSITIONS, self.state, event, "ugcs ucs")
        if self.state is not UcsState.AWAIT_PEER:
            self._peer_deadline = None
        return self.state

    def _lost(self, event: Input, reason: str) -> list[UcsSessionEvent]:
        """Close on `event`; the devices of this connection go with it."""
        if self.state is UcsState.CLOSED:
            return []
        self._move(event)
        self.close_reason = reason
        conn = self.conn
        gone: list[UcsSessionEvent] = [
            DeviceUnregistered(conn=conn, device_id=d.device_id, device=d.info)
            for d in self.devices.values()
        ]
        self.devices.clear()
        self.held = Held()
        self._pending.clear()
        return [*gone, ConnectionLost(reason=reason)]

    # -- the driver's API ---------------------------------------------------------------------

    def feed(self, data: bytes, now: float) -> list[UcsSessionEvent]:
        """Bytes from the VSM; returns what they complete. Never raises on bad bytes."""
        if self.state is UcsState.CLOSED or not data:
            return []
        self.stats.bytes_in += len(data)
        reader = self._reader
        buf, spans, error = reader.split(data)
        count = len(spans) // 2
        events: list[UcsSessionEvent] = []
        runs = [(0, count, False)] if count else []
        scan = None
        if count >= COLUMNS_FROM and self.state is UcsState.READY:
            scan = scan_telemetry(buf, spans)
            edges = np.flatnonzero(np.diff(scan.plain)) + 1
            bounds = [0, *edges.tolist(), count]
            runs = [(a, b, bool(scan.plain[a])) for a, b in itertools.pairwise(bounds)]
        done = 0
        for first, stop, plain in runs:
            if plain:
                assert scan is not None
                self._on_columns(buf, scan, first, stop, events)
                self.stats.messages_in += stop - first
                done += stop - first
                continue
            start = spans[2 * first]
            messages, bad = parse_frames(frames_of(buf, spans[2 * first : 2 * stop]), buf[start:])
            for msg in messages:
                done += 1
                self.stats.messages_in += 1
                self._on_message(msg, now, events)
                if self.closed:
                    reader.failing(None, done)
                    return events
            if bad is not None:
                error = bad.shifted(start)
                break
        error = reader.failing(error, done)
        if error is not None:
            self.stats.drop(error.reason)
            events.append(PacketDropped(protocol=NAME, reason=error.reason, offset=error.offset))
            events += self._lost(Input.BAD_FRAME, f"closing: {error.reason}")
        return events

    def feed_eof(self, now: float) -> list[UcsSessionEvent]:
        return self._lost(Input.EOF, "the VSM closed the connection")

    def tick(self, now: float) -> list[UcsSessionEvent]:
        if self._peer_deadline is not None and now >= self._peer_deadline:
            return self._lost(
                Input.TIMEOUT, f"no Register_peer from the VSM in {self._peer_timeout:g} s"
            )
        events: list[UcsSessionEvent] = []
        for message_id, pending in list(self._pending.items()):
            if now >= pending.deadline:
                del self._pending[message_id]
                events.append(
                    CommandTimedOut(
                        conn=self.conn,
                        device_id=pending.device_id,
                        message_id=message_id,
                        timeout=pending.timeout,
                    )
                )
        return events

    def data_to_send(self) -> bytes:
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        self.stats.bytes_out += len(data)
        return data

    def next_deadline(self) -> float | None:
        deadlines = [p.deadline for p in self._pending.values()]
        if self._peer_deadline is not None:
            deadlines.append(self._peer_deadline)
        return min(deadlines, default=None)

    def close_expected(self) -> bool:
        return self.state is UcsState.CLOSED

    def close(self) -> list[UcsSessionEvent]:
        """We want to end this connection (the driver closes it)."""
        return self._lost(Input.CLOSE, "closed by us")

    @property
    def closed(self) -> bool:
        return self.state is UcsState.CLOSED

    @property
    def ready(self) -> bool:
        return self.state is UcsState.READY

    # -- requests -----------------------------------------------------------------------------

    def _send(self, msg: pb.Vsm_message) -> None:
        self._out.append(encode(msg))
        self.stats.messages_out += 1

    def _request(self, msg: pb.Vsm_message, command: str, now: float, timeout: float) -> int:
        if self.state is UcsState.CLOSED:
            raise LocalProtocolError("ugcs ucs", f"send {command}", self.state.value)
        message_id = self._next_id
        self._next_id = (self._next_id + 1) & 0xFFFFFFFF or 1
        msg.message_id = message_id
        msg.response_required = True
        self._send(msg)
        self._pending[message_id] = _Pending(msg.device_id, command, timeout, now + timeout)
        return message_id

    def ping(self, now: float, timeout: float = COMMAND_TIMEOUT) -> int:
        """Ping the VSM (`device_id` 0, `response_required`); returns the message id."""
        return self._request(pb.Vsm_message(device_id=0), "ping", now, timeout)

    def device(self, name: str) -> UcsDevice | None:
        """The registered device `name` names (label, serial, model or session id)."""
        return next((d for d in self.devices.values() if d.matches(name)), None)

    def _fill(
        self, cmd: pb.Device_command, info: CommandInfo, params: Mapping[str, Value], where: str
    ) -> None:
        known = {p.name for p in info.parameters}
        unknown = sorted(set(params) - known)
        if unknown:
            raise SessionError(
                f"{where}: {info.name} has no parameter {', '.join(map(repr, unknown))} "
                f"(it has: {', '.join(sorted(known)) or 'none'})"
            )
        cmd.command_id = info.command_id
        for p in info.parameters:
            param = cmd.parameters.add()
            param.field_id = p.field_id
            value = params.get(p.name)
            if isinstance(value, str) and p.enumeration and p.semantic in _ENUM_SEMANTICS:
                value = self._enum_id(p, value, where)
            try:
                write_value(param.value, value, p.kind)
            except (ValueError, TypeError) as exc:
                raise SessionError(f"{where}: {info.name} {p.name}: {exc}") from None

    @staticmethod
    def _enum_id(p: FieldInfo, text: str, where: str) -> int:
        for number, description in p.enumeration.items():
            if description.lower() == text.lower():
                return number
        choices = ", ".join(f"{d} ({n})" for n, d in sorted(p.enumeration.items()))
        raise SessionError(f"{where}: {p.name} {text!r} is none of {choices}")

    @staticmethod
    def _command_info(device: UcsDevice, name: str) -> CommandInfo:
        info = device.commands.get(name)
        if info is None:
            there = ", ".join(sorted(device.commands))
            raise SessionError(f"{device.label}: no command {name!r} (it has: {there})")
        return info

    def command(
        self,
        device_id: int,
        command: str | int,
        params: Mapping[str, Value] | None = None,
        *,
        now: float,
        timeout: float = COMMAND_TIMEOUT,
    ) -> int:
        """Send one command (by name, or by raw id to any device id, known or not) with every
        registered parameter (`params` in wire units; a missing one goes as NA); returns its
        message id. SessionError for an unknown command or parameter name."""
        msg = pb.Vsm_message(device_id=device_id)
        cmd = msg.device_commands.add()
        if isinstance(command, int):
            if params:
                raise SessionError("ugcs ucs: a command sent by id takes no parameters")
            cmd.command_id = command
            return self._request(msg, f"#{command}", now, timeout)
        device = self.devices.get(device_id)
        if device is None:
            raise SessionError(f"ugcs ucs: no device {device_id} on this connection")
        info = self._command_info(device, command)
        self._fill(cmd, info, params or {}, device.label)
        return self._request(msg, info.name, now, timeout)

    def upload_mission(
        self,
        device_id: int,
        attributes: Mapping[str, Value],
        items: Sequence[tuple[str, Mapping[str, Value]]],
        *,
        now: float,
        timeout: float = COMMAND_TIMEOUT,
    ) -> int:
        """Send `mission_upload` with `attributes` as its parameters and `items` (command name,
        parameters in wire units) as its sub-commands; returns the message id."""
        device = self.devices.get(device_id)
        if device is None:
            raise SessionError(f"ugcs ucs: no device {device_id} on this connection")
        msg = pb.Vsm_message(device_id=device_id)
        cmd = msg.device_commands.add()
        self._fill(cmd, self._command_info(device, "mission_upload"), attributes, device.label)
        for index, (name, params) in enumerate(items):
            info = self._command_info(device, name)
            if not info.available_in_mission:
                raise SessionError(f"{device.label}: {name} is not a mission item")
            self._fill(cmd.sub_commands.add(), info, params, f"{device.label} item {index}")
        return self._request(msg, "mission_upload", now, timeout)

    # -- what the VSM sends -------------------------------------------------------------------

    def _drop(self, reason: str, events: list[UcsSessionEvent]) -> None:
        self.stats.drop(reason)
        events.append(PacketDropped(protocol=NAME, reason=reason))

    def _on_message(self, msg: pb.Vsm_message, now: float, events: list[UcsSessionEvent]) -> None:
        if self.state is UcsState.AWAIT_PEER:
            if not msg.HasField("register_peer"):
                self._drop("message before the VSM's Register_peer", events)
            else:
                self._on_peer(msg.register_peer, events)
            return
        device_id = msg.device_id
        if msg.HasField("device_status"):
            device = self.devices.get(device_id)
            if device is None:
                self._drop(f"Device_status for unknown device {device_id}", events)
            else:
                self._on_status(device, msg.device_status, events)
        elif msg.HasField("device_response"):
            self._on_response(msg, now, events)
        elif msg.HasField("register_device"):
            self._on_register(msg, events)
        elif msg.HasField("unregister_device"):
            gone = self.devices.pop(device_id, None)
            if gone is not None:
                self.held.remove(device_id)
            if gone is None:
                self._drop(f"Unregister_device for unknown device {device_id}", events)
            else:
                events.append(
                    DeviceUnregistered(conn=self.conn, device_id=device_id, device=gone.info)
                )
        elif msg.HasField("register_peer"):
            self._drop("a second Register_peer on one connection", events)
        elif device_id == 0 and msg.response_required and not msg.device_commands:
            reply = pb.Vsm_message(device_id=0, message_id=msg.message_id)
            reply.device_response.code = defs.STATUS_OK
            self._send(reply)
        else:
            self._drop(f"unexpected message for device {device_id}", events)

    def _on_columns(
        self, buf: bytes, scan: Scan, first: int, stop: int, events: list[UcsSessionEvent]
    ) -> None:
        """Frames `first` to `stop` of `scan` (in `buf`): Device_status frames read as
        columns. What `_on_status` does one message at a time, for all of them at once: held
        values, a drop for each frame of an unknown device and each with values of fields
        its device did not register, the values as one `TelemetryColumns`, mission progress,
        availability."""
        held = self.held
        devices = scan.device[first:stop].astype(np.int64)
        index = held.find_devices(devices)
        for unknown in np.flatnonzero(index < 0).tolist():
            self._drop(f"Device_status for unknown device {devices[unknown]}", events)
        a, b = np.searchsorted(scan.frame, (first, stop))
        frame = scan.frame[a:b] - first
        known = index[frame] >= 0
        a_rows: np.ndarray | slice = slice(a, b)  # (a slice: views of the scan's columns)
        if not known.all():
            frame = frame[known]
            a_rows = np.flatnonzero(known) + a
        if len(frame):
            self._on_values(buf, scan, devices, index, frame, a_rows, events)
        self._on_availability(scan, first, stop, events)

    def _on_values(
        self,
        buf: bytes,
        scan: Scan,
        devices: np.ndarray,
        index: np.ndarray,
        frame: np.ndarray,
        a_rows: np.ndarray | slice,
        events: list[UcsSessionEvent],
    ) -> None:
        """The telemetry values of `_on_columns` (rows `a_rows` of `scan`, of known devices)."""
        held = self.held
        device_id = devices[frame]
        field_id = scan.field[a_rows]
        rows = held.find(device_id, field_id)
        time_ms = held.begins[index[frame]] + scan.ms[a_rows]
        kind, number, integer = scan.kind[a_rows], scan.number[a_rows], scan.integer[a_rows]
        objects: dict[int, Value] = {}
        texts = np.flatnonzero(kind >= _STRING)
        if len(texts):
            at = a_rows[texts] if isinstance(a_rows, np.ndarray) else texts + a_rows.start
            for i, start, size, text in zip(
                texts.tolist(), scan.start[at].tolist(), scan.size[at].tolist(),
                (kind[texts] == _STRING).tolist(), strict=True,
            ):  # fmt: skip
                data = buf[start : start + size]
                objects[i] = data.decode() if text else data
        found = rows >= 0
        if not found.all():
            for at in np.unique(frame[~found]).tolist():
                device = self.devices[int(devices[at])]
                unknown = int(np.count_nonzero((frame == at) & ~found))
                self._drop(f"{device.label}: {unknown} value(s) of unregistered fields", events)
        if found.all():
            held.set_many(rows, kind, number, integer, time_ms, objects)
        else:
            index_of = np.cumsum(found) - 1
            held.set_many(
                rows[found], kind[found], number[found], integer[found], time_ms[found],
                {int(index_of[i]): v for i, v in objects.items() if found[i]},
            )  # fmt: skip
        events.append(
            TelemetryColumns(
                conn=self.conn, frames=_count_runs(frame), frame=frame, device_id=device_id,
                field_id=field_id, row=rows, time_ms=time_ms, kind=kind, number=number,
                integer=integer, objects=objects,
            )
        )  # fmt: skip
        mission = found & held.mission[rows]
        if mission.any():
            for moved in np.unique(device_id[mission]).tolist():
                device = self.devices[moved]
                if device.mission_id is not None:
                    self._mission_progress(device, events)

    def _on_availability(
        self, scan: Scan, first: int, stop: int, events: list[UcsSessionEvent]
    ) -> None:
        """The command availability of frames `first` to `stop`, one `AvailabilityChanged`
        per frame (a vehicle's first Device_status has every command's; later ones seldom)."""
        a, b = np.searchsorted(scan.command_frame, (first, stop))
        if a == b:
            return
        frames = scan.command_frame[a:b]
        edges = np.flatnonzero(np.diff(frames, prepend=-1)).tolist()
        commands = scan.command[a:b].tolist()
        available = scan.available[a:b].tolist()
        enabled = scan.enabled[a:b].tolist()
        pairs = (2 * scan.available[a:b] + scan.enabled[a:b]).tolist()  # _PAIRS' index
        devices = scan.device[frames[edges]].tolist()
        conn, known = self.conn, self.devices
        for start, end, device_id in zip(edges, [*edges[1:], len(commands)], devices, strict=True):
            device = known.get(device_id)
            if device is None:
                continue
            ids = commands[start:end]
            if ids == device.command_ids:  # every command, in order: a first Device_status
                labels = device.command_labels
            else:
                labels = list(map(device.command_names.get, ids, itertools.repeat("")))
            device.set_availability(ids, pairs[start:end])
            events.append(
                AvailabilityChanged(
                    conn=conn, device_id=device_id, command_ids=ids, names=labels,
                    available=available[start:end], enabled=enabled[start:end],
                )
            )  # fmt: skip

    def received(self, columns: TelemetryColumns) -> list[TelemetryReceived]:
        """`columns` as the `TelemetryReceived` events its frames would have given one
        message at a time (for a caller that wants one event per Device_status)."""
        return received(columns, self.devices)

    def _on_peer(self, peer: pb.Register_peer, events: list[UcsSessionEvent]) -> None:
        if peer.HasField("peer_type") and peer.peer_type == defs.PEER_TYPE_SERVER:
            events += self._lost(Input.REFUSED, "the peer is a UgCS server, not a VSM")
            return
        self._move(Input.PEER)
        self.peer = PeerRegistered(
            conn=self.conn,
            peer_id=peer.peer_id,
            peer_type=peer.peer_type if peer.HasField("peer_type") else defs.PEER_TYPE_VSM,
            version_major=peer.version_major,
            version_minor=peer.version_minor,
            version_build=peer.version_build,
            name=peer.name,
        )
        events.append(self.peer)

    def _on_register(self, msg: pb.Vsm_message, events: list[UcsSessionEvent]) -> None:
        info = DeviceInfo.from_message(msg)
        ack = pb.Vsm_message(device_id=msg.device_id)
        if msg.HasField("message_id"):
            ack.message_id = msg.message_id
        ack.device_response.code = defs.STATUS_OK
        self._send(ack)
        old = self.devices.pop(msg.device_id, None)
        if old is not None:
            events.append(
                DeviceUnregistered(conn=self.conn, device_id=msg.device_id, device=old.info)
            )
        self.devices[msg.device_id] = UcsDevice(info, device_label(info), self.held)
        events.append(DeviceRegistered(conn=self.conn, device=info, message_id=msg.message_id))

    def _on_status(
        self, device: UcsDevice, status: pb.Device_status, events: list[UcsSessionEvent]
    ) -> None:
        conn = self.conn
        device_id = device.device_id
        telemetry = status.telemetry_fields
        if telemetry:
            fields = device.fields
            begin = device.info.begin_of_epoch
            held = self.held
            received = []
            unknown = 0
            mission = False
            for tf in telemetry:
                field_id = tf.field_id
                found = fields.get(field_id)
                value = _value(tf.value)
                time_ms = begin + tf.ms_since_epoch
                if found is None:
                    unknown += 1
                    info = None
                else:
                    info, key, row = found
                    held.set(row, value, time_ms)
                    if key in MISSION_KEYS:
                        mission = True
                received.append(TelemetryValue(field_id, info, time_ms, value))
            if unknown:
                self._drop(f"{device.label}: {unknown} value(s) of unregistered fields", events)
            events.append(TelemetryReceived(conn=conn, device_id=device_id, values=tuple(received)))
            if mission and device.mission_id is not None:
                self._mission_progress(device, events)
        if status.command_availability:
            names = device.info.commands_by_id
            ids, labels, on, usable = [], [], [], []
            for a in status.command_availability:
                command = names.get(a.id)
                ids.append(a.id)
                labels.append("" if command is None else command.name)
                on.append(a.is_available)
                usable.append(a.is_enabled)
            device.set_availability(ids, [2 * a + e for a, e in zip(on, usable, strict=True)])
            events.append(
                AvailabilityChanged(
                    conn=conn, device_id=device_id, command_ids=ids, names=labels,
                    available=on, enabled=usable,
                )
            )  # fmt: skip
        if status.status_messages:
            severities = list(status.messages_severity)
            if len(severities) != len(status.status_messages):  # the UCS's rule: all info
                severities = [defs.SEVERITY_INF] * len(status.status_messages)
            messages = tuple(
                StatusMessage(text=text, severity=severity)
                for text, severity in zip(status.status_messages, severities, strict=True)
            )
            events.append(StatusMessages(conn=conn, device_id=device_id, messages=messages))

    def _mission_progress(self, device: UcsDevice, events: list[UcsSessionEvent]) -> None:
        """Map `current_command` back to an item of our mission while `current_mission_id`
        is its id; another id means another mission: the map is dropped."""
        if device.mission_id is None:
            return
        mission = device.values.get("current_mission_id")
        if mission == device.mission_id:
            device.mission_matched = True
        elif device.mission_matched:  # it was ours, now it is another mission: drop the map
            ours, device.mission_id = device.mission_id, None
            device.mission_map = {}
            if device.mission_item is not None:
                device.mission_item = None
                events.append(
                    MissionProgress(
                        conn=self.conn, device_id=device.device_id, mission_id=ours, item=None
                    )
                )
            return
        item: int | None = None
        current = device.values.get("current_command")
        if isinstance(current, float) and current.is_integer():
            current = int(current)  # a VSM may send it as a float: the same number
        if mission == device.mission_id and isinstance(current, int):
            item = device.mission_map.get(current)
        if item != device.mission_item:
            device.mission_item = item
            events.append(
                MissionProgress(
                    conn=self.conn,
                    device_id=device.device_id,
                    mission_id=device.mission_id,
                    item=item,
                )
            )

    def _on_response(self, msg: pb.Vsm_message, now: float, events: list[UcsSessionEvent]) -> None:
        pending = self._pending.get(msg.message_id) if msg.HasField("message_id") else None
        if pending is None:
            self._drop(f"reply to message {msg.message_id}, which we did not send", events)
            return
        response = msg.device_response
        if response.code == defs.STATUS_IN_PROGRESS:
            pending.deadline = now + pending.timeout  # progress: the VSM is still at it
        else:
            del self._pending[msg.message_id]
        mission_map = {
            m.vehicle_command_id: m.mission_command_idx for m in response.mission_command_map
        }
        mission_id = response.mission_id if response.HasField("mission_id") else None
        reply = ResponseReceived(
            conn=self.conn,
            device_id=pending.device_id,
            message_id=msg.message_id,
            code=response.code,
            status=response.status,
            arguments=tuple(response.arguments),
            progress=response.progress if response.HasField("progress") else None,
            mission_id=mission_id,
            mission_command_map=mission_map,
        )
        events.append(reply)
        device = self.devices.get(pending.device_id)
        if (
            device is not None
            and pending.command == "mission_upload"
            and response.code == defs.STATUS_OK
            and mission_id is not None
        ):
            device.mission_id = mission_id
            device.mission_map = mission_map
            device.mission_item = None
            device.mission_matched = False
            self._mission_progress(device, events)
