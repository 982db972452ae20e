"""The UgCS VSM sessions' typed events: what the VSM side and the UCS side tell their callers.

Every event that belongs to one TCP connection carries `conn`, the connection id the driver gave
it (a VSM serves several UCS connections from one session; a UCS-side session has one, 0).

Both sides:

* `PeerRegistered`: the other side's Register_peer arrived. `compatible` is False when the VSM
  side's version gate refused it (version < 2.14 or missing: the VSM then sends nothing more
  on that connection but keeps it open).
* `ConnectionEnded`: one connection of a multi-connection session is over (its reason); the
  driver closes it. A single-connection session uses the shared `ConnectionLost`.
* `PacketDropped`, `ConnectionLost`: the shared events (a bad frame, a message broken or out of
  order; a connection the session wants closed).

VSM side (`session_vsm`):

* `DeviceAcknowledged`: the UCS answered a Register_device on `conn` (`code` OK: the device is
  now registered there; other codes: abandoned on that connection).
* `CommandReceived`: a command for one of our devices, decoded against its registration
  (`command` with parameters by name). The caller answers with the session's `respond` (or
  `progress`) on the same connection and message id.

UCS side (`session_ucs`):

* `DeviceRegistered` / `DeviceUnregistered`: a VSM device appeared (its `DeviceInfo`: names,
  ids, commands) or went away.
* `TelemetryReceived`: values of one Device_status, by field, with absolute times.
* `TelemetryColumns`: the values of many Device_status frames of one read, as numpy columns
  (what a feed of `session_ucs.COLUMNS_FROM` frames or more gives for the frames of the
  layout the SDK writes; `UcsSession.received` turns it into `TelemetryReceived` events).
* `AvailabilityChanged`: command availability of one device.
* `StatusMessages`: free-text messages of one device with their severity.
* `ResponseReceived`: a Device_response to one of our requests (IN_PROGRESS ones are not final).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeAlias

import numpy as np

from robowire.protocols.ugcs.codec import Value
from robowire.protocols.ugcs.device import CommandInfo, DeviceInfo, FieldInfo
from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs
from robowire.wire import ConnectionLost, PacketDropped, Report

__all__ = [
    "AvailabilityChanged",
    "Command",
    "CommandReceived",
    "CommandState",
    "ConnectionEnded",
    "ConnectionLost",
    "DeviceAcknowledged",
    "DeviceRegistered",
    "DeviceUnregistered",
    "PacketDropped",
    "PeerRegistered",
    "ResponseReceived",
    "StatusMessage",
    "StatusMessages",
    "TelemetryColumns",
    "TelemetryReceived",
    "TelemetryValue",
    "UcsEvent",
    "UgcsEvent",
    "VsmEvent",
]


# ---------------------------------------------------------------------------------------------
# both sides


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerRegistered:
    """The peer's Register_peer: who it is, and whether we accept its version."""

    conn: int = 0
    peer_id: int
    peer_type: int = defs.PEER_TYPE_SERVER
    version_major: int = 0
    version_minor: int = 0
    version_build: str = ""
    name: str = ""
    compatible: bool = True
    primary: bool = True
    """VSM side: this connection is now the primary one of that UCS (`peer_id`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionEnded:
    """One connection of a multi-connection session is to be closed (or was closed)."""

    conn: int
    reason: str


# ---------------------------------------------------------------------------------------------
# VSM side


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceAcknowledged:
    """The UCS's answer to one of our Register_device messages on `conn`."""

    conn: int
    device_id: int
    code: int
    """a Status_code: OK = registered on that connection; IN_PROGRESS is never reported (the
    session keeps waiting); anything else = abandoned on that connection"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """One Device_command decoded against the device's registration."""

    name: str
    command_id: int
    parameters: Mapping[str, Value] = field(default_factory=dict)
    """every parameter the UCS sent, by name (None = META_VALUE_NA)"""
    sub_commands: tuple[Command, ...] = ()
    """mission items of a mission_upload, in order"""
    info: CommandInfo | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandReceived:
    """A well-formed command for one of our devices. Answer it with the session's `respond`
    (same `conn`, `device_id`, `message_id`) unless `response_required` is False."""

    conn: int
    device_id: int
    message_id: int
    response_required: bool
    command: Command


# ---------------------------------------------------------------------------------------------
# UCS side


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceRegistered:
    conn: int = 0
    device: DeviceInfo
    message_id: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceUnregistered:
    conn: int = 0
    device_id: int
    device: DeviceInfo | None = None


class TelemetryValue(NamedTuple):
    """One telemetry field's value: `time_ms` = begin_of_epoch + ms_since_epoch (Unix ms).

    A named tuple, not a dataclass: a fleet sends tens of thousands a second, and building
    one costs a quarter of a frozen dataclass's (measured: 0.25 against 1.1 us)."""

    field_id: int
    field: FieldInfo | None
    """None when the id is not one the device registered"""
    time_ms: int
    value: Value
    """None = META_VALUE_NA: the value is no longer valid"""


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetryReceived(Report):
    """A vehicle's telemetry values (a `Report`: a newer one of the same vehicle with the same
    fields makes it stale)."""

    conn: int = 0
    device_id: int
    values: tuple[TelemetryValue, ...]

    def covers(self) -> tuple[int, int, tuple[int, ...]]:
        return self.conn, self.device_id, tuple(v.field_id for v in self.values)


class CommandState(NamedTuple):
    """One command's availability (a named tuple, like `TelemetryValue`: a vehicle's first
    Device_status holds every command's, a thousand vehicles tens of thousands)."""

    command_id: int
    name: str
    """'' when the id is not one the device registered"""
    available: bool
    enabled: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class AvailabilityChanged:
    """The command availability one Device_status carried, as columns (a vehicle's first
    holds every command's: a fleet's first statuses are tens of thousands of them, read
    without an object per command); `commands` gives them as `CommandState`s."""

    conn: int = 0
    device_id: int
    command_ids: Sequence[int]
    names: Sequence[str]
    """each command's name ('' when the id is not one the device registered)"""
    available: Sequence[bool]
    enabled: Sequence[bool]

    @property
    def commands(self) -> tuple[CommandState, ...]:
        rows = zip(self.command_ids, self.names, self.available, self.enabled, strict=True)
        # CommandStates made in C (what a named tuple's __new__ does)
        return tuple(map(tuple.__new__, itertools.repeat(CommandState), rows))


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusMessage:
    text: str
    severity: int = defs.SEVERITY_INF


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusMessages:
    conn: int = 0
    device_id: int
    messages: tuple[StatusMessage, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseReceived:
    conn: int = 0
    device_id: int
    message_id: int
    code: int
    status: str = ""
    arguments: tuple[str, ...] = ()
    progress: float | None = None
    mission_id: int | None = None
    mission_command_map: Mapping[int, int] = field(default_factory=dict)
    """vehicle command id -> index of the mission item"""

    @property
    def final(self) -> bool:
        return self.code != defs.STATUS_IN_PROGRESS


VsmEvent: TypeAlias = (
    PeerRegistered
    | ConnectionEnded
    | DeviceAcknowledged
    | CommandReceived
    | PacketDropped
    | ConnectionLost
)
UcsEvent: TypeAlias = (
    PeerRegistered
    | DeviceRegistered
    | DeviceUnregistered
    | TelemetryReceived
    | AvailabilityChanged
    | StatusMessages
    | ResponseReceived
    | ConnectionEnded
    | PacketDropped
    | ConnectionLost
)
UgcsEvent: TypeAlias = VsmEvent | UcsEvent

# The ugcs-ucs engineer may add classes below this line.


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandTimedOut:
    """UCS side: no final reply to our request `message_id` within `timeout` s (the SDK never
    answers a command for a device it does not know)."""

    conn: int = 0
    device_id: int
    message_id: int
    timeout: float


@dataclass(frozen=True, slots=True, kw_only=True)
class MissionProgress:
    """UCS side: the vehicle's `current_command` mapped back to the mission we uploaded: it is
    on item `item` (0-based index of the mission_upload sub-command), or on none (None), of
    mission `mission_id` (the id the VSM replied to the upload with)."""

    conn: int = 0
    device_id: int
    mission_id: int
    item: int | None


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class TelemetryColumns:
    """UCS side: the telemetry values of several Device_status frames of registered devices,
    one row per value in the order received: its frame (0, 1, ... in this batch), device id,
    field id (`row`: the session's row of that device's field, -1 for an id the device did
    not register), time (begin_of_epoch + ms_since_epoch, Unix ms) and value (`kind` a
    `codec.Kind`; `number` the value as a double, NaN when not a number; `integer` the exact
    value of an int or bool; `objects` the strings and bytes). The session's held values
    already hold them when this is emitted."""

    conn: int = 0
    frames: int
    frame: np.ndarray
    device_id: np.ndarray
    field_id: np.ndarray
    row: np.ndarray
    time_ms: np.ndarray
    kind: np.ndarray
    number: np.ndarray
    integer: np.ndarray
    objects: Mapping[int, Value]
    """the string and bytes values, by row"""


UcsSessionEvent: TypeAlias = UcsEvent | CommandTimedOut | MissionProgress | TelemetryColumns
"""Everything `session_ucs.UcsSession` emits."""
