"""The VSM side of UgCS, sans-I/O: one `VsmSession` per VSM, one `VsmLink` per TCP connection.

A VSM serves every UCS that connects to it (or that it dials, in reverse mode) from one set of
devices, so the session is shared and each connection is a `VsmLink` view of it that fits the
`StreamSession` contract (the shared `StreamDriver` drives each link: `feed`, `tick`,
`data_to_send`, `next_deadline`, `close_expected`). Devices, telemetry and availability live in
the session; `commit(now)` queues what changed on the links that should get it, and the caller
then flushes every driver.

The SDK's rules (ugcs.md 1.3-1.5, 3.x; "the SDK" = the UgCS VSM C++ SDK 4.4):

* On a new connection our Register_peer is queued at once (device_id 0, our random `peer_id`,
  PEER_TYPE_VSM, version 4.4 "dev", our name). The UCS must send its own within
  `PEER_TIMEOUT` (10 s) or the connection is closed; anything else before it is dropped.
* The UCS's Register_peer: peer_type absent or SERVER, else closed. Version (major, minor)
  below (2, 14), or missing, is incompatible: we send nothing more on that link but keep it open.
* Then every device is registered on the link: Register_device with `response_required` and a
  fresh message id. Only the UCS's OK (same message id) registers the device on that link;
  IN_PROGRESS keeps waiting; any other code abandons it on that link. Before the OK nothing of
  that device (telemetry, availability, command replies) goes on that link. On the OK the link
  gets one Device_status with the last known non-NA value of every field and the availability
  of every command.
* Several connections of one UCS (same `peer_id`): each gets the registrations; one is the
  primary, which alone gets telemetry, availability, new registrations and unregistrations.
  A newer connection becomes primary if the old one is not loopback or the new one is;
  when the primary closes another connection of that UCS takes over, loopback first.
* Pings (`device_id` 0 with `response_required`) are answered OK with the same message id.
  With `keep_alive` N, once the peer is known we ping every second and close after N s
  without any message from the UCS.
* Commands: exactly one per message (else INVALID_COMMAND); an unknown command id gives
  INVALID_COMMAND "Unknown command id N"; a registered parameter missing, an unknown parameter
  id, an ENUM value that is not an int of its enumeration, or a mission item that is not
  registered or not `available_in_mission` give INVALID_COMMAND; a command for a device we do
  not have gets no reply at all. Good commands become `CommandReceived` events; the caller
  answers with `respond` (and `progress` for IN_PROGRESS reports) on the same link and message
  id; nothing is sent without `response_required`, nor for a device not ACKed on that link
  (`respond` raises `LocalProtocolError` there; `can_respond` tells).
* Telemetry: only changed values are sent; each non-string field at most once per
  `COMMIT_INTERVAL` (200 ms; a later commit sends the last change); NaN / None = NA
  (`META_VALUE_NA`); `ms_since_epoch` counts from the device's `begin_of_epoch` to when the
  value was set. Status messages are not cached.
* `shutdown()` queues Unregister_device for every device where it was registered.

Telemetry is columnar: devices registered together (`register_group`, e.g. a simulated fleet)
share one field layout and their values are numpy columns (`telemetry.DeviceGroup`); changes
and the 200 ms windows are found with array operations, and one Device_status is built per
device that has something.

Size: one module over 600 lines because it is one thing, the VSM's connection rules: the
links, the primary choice, registrations, replies and commits all read the same per-link
state (the telemetry columns, which do not, are `telemetry.py`).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from robowire.errors import LocalProtocolError
from robowire.protocols.ugcs import codec
from robowire.protocols.ugcs.codec import (
    NAME,
    FrameReader,
    Value,
    ValueKind,
    read_value,
)
from robowire.protocols.ugcs.device import CommandInfo, DeviceInfo, DeviceSpec, FieldInfo, IdCounter
from robowire.protocols.ugcs.device import register as register_spec
from robowire.protocols.ugcs.events import (
    Command,
    CommandReceived,
    ConnectionEnded,
    DeviceAcknowledged,
    PeerRegistered,
    VsmEvent,
)
from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs
from robowire.protocols.ugcs.proto import ucs_vsm_pb2 as pb
from robowire.protocols.ugcs.telemetry import BoolArray, DeviceGroup
from robowire.wire import PacketDropped, SessionStats, transition

__all__ = [
    "COMMIT_INTERVAL",
    "PEER_TIMEOUT",
    "SUPPORTED_UCS_VERSION",
    "LinkState",
    "VsmLink",
    "VsmSession",
]

PEER_TIMEOUT = 10.0
"""Seconds a new connection has to send its Register_peer (`REGISTER_PEER_TIMEOUT`)."""
SUPPORTED_UCS_VERSION = (2, 14)
"""The oldest UCS the SDK talks to (`SUPPORTED_UCS_VERSION_MAJOR/MINOR`)."""
COMMIT_INTERVAL = 0.2
"""A non-string field is sent at most once per this many seconds (`Property::COMMIT_TIMEOUT`)."""
PING_INTERVAL = 1.0
"""Keep-alive pings, once the peer is known (with `keep_alive` set)."""
VERSION = (4, 4, "dev")


class LinkState(enum.Enum):
    AWAITING_PEER = "awaiting peer"  # our Register_peer sent; waiting for the UCS's
    REGISTERED = "registered"  # a compatible UCS: devices registered, commands served
    INCOMPATIBLE = "incompatible"  # too old: silent, kept open
    CLOSED = "closed"


class Trigger(enum.Enum):
    PEER_OK = "peer ok"
    PEER_TOO_OLD = "peer too old"
    CLOSE = "close"


TRANSITIONS: dict[LinkState, dict[Trigger, LinkState]] = {
    LinkState.AWAITING_PEER: {
        Trigger.PEER_OK: LinkState.REGISTERED,
        Trigger.PEER_TOO_OLD: LinkState.INCOMPATIBLE,
        Trigger.CLOSE: LinkState.CLOSED,
    },
    LinkState.REGISTERED: {Trigger.CLOSE: LinkState.CLOSED},
    LinkState.INCOMPATIBLE: {Trigger.CLOSE: LinkState.CLOSED},
    LinkState.CLOSED: {Trigger.CLOSE: LinkState.CLOSED},
}
"""State -> trigger -> next state; a pair not in it is a bug (SessionError)."""


# ---------------------------------------------------------------------------------------------
# the connections


@dataclass(eq=False)
class _Link:
    conn: int
    loopback: bool
    opened: float
    state: LinkState = LinkState.AWAITING_PEER
    reader: FrameReader = field(default_factory=FrameReader)
    out: list[bytes] = field(default_factory=list)
    peer_id: int | None = None
    last_rx: float = 0.0
    next_ping: float = math.inf
    pending: dict[int, int] = field(default_factory=dict)  # message id -> device id (ACKs)
    pings: set[int] = field(default_factory=set)
    acked: dict[int, BoolArray] = field(default_factory=dict)  # group index -> rows ACKed here
    close_reason: str = ""
    stats: SessionStats = field(default_factory=SessionStats)

    def is_open(self) -> bool:
        return self.state is not LinkState.CLOSED


class VsmSession:
    """One VSM: its devices, and every UCS connection (see the module docstring).

    `peer_id` is this VSM's random 32-bit instance id (the caller draws it once per process);
    `keep_alive` (seconds) turns on pings and the silence timeout.
    """

    def __init__(
        self,
        *,
        peer_id: int,
        name: str = "robowire",
        keep_alive: float | None = None,
        ids: IdCounter | None = None,
    ) -> None:
        self.peer_id = peer_id & 0xFFFFFFFF
        self.name = name
        self.keep_alive = keep_alive
        self.ids = ids or IdCounter()
        self._message_ids = IdCounter()
        self._conn_ids = IdCounter()
        self.groups: list[DeviceGroup] = []
        self._where: dict[int, tuple[int, int]] = {}  # device id -> (group index, row)
        self._links: dict[int, _Link] = {}
        self._primary: dict[int, int] = {}  # UCS peer_id -> conn of its primary link
        self.stats = SessionStats()

    # -- devices ----------------------------------------------------------------------------

    def register(self, spec: DeviceSpec, begin_of_epoch: int) -> DeviceInfo:
        """Add one device (ids from the VSM's counter); registered on every primary link."""
        return self.register_group([spec], begin_of_epoch)[0]

    def register_group(self, specs: Sequence[DeviceSpec], begin_of_epoch: int) -> list[DeviceInfo]:
        """Add devices of one layout as one `DeviceGroup` (the index of `self.groups`)."""
        infos = [register_spec(spec, self.ids, begin_of_epoch) for spec in specs]
        group = DeviceGroup(infos)
        index = len(self.groups)
        self.groups.append(group)
        for row, info in enumerate(infos):
            self._where[info.device_id] = (index, row)
        for link in self._links.values():
            link.acked[index] = np.zeros(len(group), dtype=bool)
            if link.state is LinkState.REGISTERED and self._is_primary(link):
                for info in infos:
                    self._send_registration(link, info)
        return infos

    def group_of(self, device_id: int) -> tuple[DeviceGroup, int]:
        index, row = self._where[device_id]
        return self.groups[index], row

    def device(self, device_id: int) -> DeviceInfo | None:
        where = self._where.get(device_id)
        return None if where is None else self.groups[where[0]].infos[where[1]]

    @property
    def device_ids(self) -> list[int]:
        return list(self._where)

    def set_values(self, device_id: int, values: Mapping[str, Value], wall_ms: int) -> None:
        """One device's field values by key (`FieldInfo.key`; None or NaN = NA)."""
        group, row = self.group_of(device_id)
        group.update({k: [v] for k, v in values.items()}, wall_ms, rows=[row])

    def set_enabled(self, device_id: int, enabled: Mapping[str, bool]) -> None:
        group, row = self.group_of(device_id)
        for name, value in enabled.items():
            k = group.command_column.get(name)
            if k is not None and group.enabled[row, k] != value:
                group.enabled[row, k] = value
                group.av_dirty[row, k] = True

    def status_message(self, device_id: int, text: str, severity: int = defs.SEVERITY_INF) -> None:
        """Queue a status message for the next `commit` (not cached for later connections)."""
        group, row = self.group_of(device_id)
        group.messages.setdefault(row, []).append((text, severity))

    def unregister(self, device_id: int) -> None:
        """Drop a device: Unregister_device to the primary links where it was registered."""
        where = self._where.pop(device_id, None)
        if where is None:
            return
        index, row = where
        self.groups[index].alive[row] = False
        msg = codec.encode(
            pb.Vsm_message(device_id=device_id, unregister_device=pb.Unregister_device())
        )
        for link in self._links.values():
            acked = link.acked.get(index)
            if acked is not None and acked[row]:
                acked[row] = False
                if self._is_primary(link):
                    self._queue(link, msg)

    def shutdown(self) -> None:
        """An orderly stop: unregister every device (then flush and close the links)."""
        for device_id in list(self._where):
            self.unregister(device_id)

    # -- telemetry --------------------------------------------------------------------------

    def commit(self, now: float) -> int:
        """Queue what changed (values outside their 200 ms window, availability, status
        messages) for the primary links where each device is ACKed; returns the number of
        Device_status messages built."""
        built = 0
        targets = [
            link
            for link in self._links.values()
            if link.state is LinkState.REGISTERED and self._is_primary(link)
        ]
        for index, group in enumerate(self.groups):
            if not len(group):
                continue
            num_pending = ~(
                (group.cur == group.sent) | (np.isnan(group.cur) & np.isnan(group.sent))
            )
            num_pending &= ~group.stringy
            due = num_pending & (now - group.committed >= COMMIT_INTERVAL - 1e-6)
            sc = group.string_cols
            if len(sc):  # strings are sent on every change
                due[:, sc] = np.asarray(group.scur[:, sc] != group.ssent[:, sc], dtype=bool)
            due &= group.alive[:, None]
            av = group.av_dirty & group.alive[:, None]
            rows_mask = due.any(axis=1) | av.any(axis=1)
            if group.messages:
                msg_rows = np.fromiter(group.messages, dtype=np.int64)
                rows_mask[msg_rows[group.alive[msg_rows]]] = True
            if not rows_mask.any():
                continue
            wanted = np.zeros(len(group), dtype=bool)
            for link in targets:
                acked = link.acked.get(index)
                if acked is not None:
                    wanted |= acked
            send_rows = np.flatnonzero(rows_mask & wanted)
            if len(send_rows):
                receivers = [
                    (link, link.acked[index][send_rows].tolist())
                    for link in targets
                    if index in link.acked
                ]
                for r, data in enumerate(group.statuses(send_rows, due, av)):
                    built += 1
                    for link, acked_rows in receivers:
                        if acked_rows[r]:
                            self._queue(link, data)
            # committed whether or not anyone is connected: the values are cached
            group.sent[due] = group.cur[due]
            group.ssent[due] = group.scur[due]
            group.committed[due] = now
            group.av_dirty[av] = False
            group.messages.clear()
        return built

    # -- replies ----------------------------------------------------------------------------

    def respond(
        self,
        conn: int,
        device_id: int,
        message_id: int,
        code: int,
        status: str = "",
        *,
        mission_id: int | None = None,
        command_map: Iterable[tuple[int, int]] = (),
        progress: float | None = None,
    ) -> None:
        """Answer a request on its link with its message id. LocalProtocolError when the link
        is gone or not registered, or the device is not ACKed there: the SDK sends nothing
        then; check `can_respond` first."""
        if not self.can_respond(conn, device_id):
            state = self.link_state(conn)
            where = "REGISTERED, device not ACKed" if state is LinkState.REGISTERED else state.name
            raise LocalProtocolError(NAME, f"respond for device {device_id}", where)
        link = self._links[conn]
        msg = pb.Vsm_message(device_id=device_id, message_id=message_id)
        response = msg.device_response
        response.code = defs.Status_code.ValueType(code)
        if status:
            response.status = status
        if mission_id is not None:
            response.mission_id = mission_id
        for vehicle_command_id, index in command_map:
            response.mission_command_map.add(
                vehicle_command_id=vehicle_command_id, mission_command_idx=index
            )
        if progress is not None and progress > 0:
            response.progress = progress
        self._queue(link, codec.encode(msg))

    def can_respond(self, conn: int, device_id: int) -> bool:
        """True if `respond` may answer on `conn` for `device_id` (0: the VSM itself): the link
        is registered and the device ACKed there."""
        link = self._links.get(conn)
        if link is None or link.state is not LinkState.REGISTERED:
            return False
        return device_id == 0 or self._acked(link, device_id)

    def progress(
        self, conn: int, device_id: int, message_id: int, fraction: float, status: str = ""
    ) -> None:
        """An IN_PROGRESS report (any number before the final `respond`; raises as it does)."""
        self.respond(
            conn, device_id, message_id, defs.STATUS_IN_PROGRESS, status, progress=fraction
        )

    # -- links ------------------------------------------------------------------------------

    def connect(self, now: float, *, loopback: bool = True) -> VsmLink:
        """A new TCP connection (accepted, or dialled in reverse mode): our Register_peer is
        queued at once."""
        link = _Link(conn=self._conn_ids(), loopback=loopback, opened=now, last_rx=now)
        for index, group in enumerate(self.groups):
            link.acked[index] = np.zeros(len(group), dtype=bool)
        self._links[link.conn] = link
        peer = pb.Vsm_message(device_id=0)
        rp = peer.register_peer
        rp.peer_id = self.peer_id
        rp.peer_type = defs.PEER_TYPE_VSM
        rp.version_major, rp.version_minor, rp.version_build = VERSION
        rp.name = self.name
        self._queue(link, codec.encode(peer))
        return VsmLink(self, link.conn, link.stats)

    @property
    def connections(self) -> list[int]:
        return list(self._links)

    def link_state(self, conn: int) -> LinkState:
        link = self._links.get(conn)
        return LinkState.CLOSED if link is None else link.state

    def primary(self, ucs_peer_id: int) -> int | None:
        """The conn of that UCS's primary link."""
        return self._primary.get(ucs_peer_id)

    def acked_on(self, conn: int, device_id: int) -> bool:
        link = self._links.get(conn)
        return link is not None and self._acked(link, device_id)

    def next_deadline(self, conn: int) -> float | None:
        link = self._links.get(conn)
        if link is None or link.state is LinkState.CLOSED:
            return None
        if link.state is LinkState.AWAITING_PEER:
            return link.opened + PEER_TIMEOUT
        if self.keep_alive is None:
            return None
        return min(link.next_ping, link.last_rx + self.keep_alive)

    def data_to_send(self, conn: int) -> bytes:
        link = self._links.get(conn)
        if link is None or not link.out:
            return b""
        data = b"".join(link.out)
        link.out.clear()
        return data

    def close_expected(self, conn: int) -> bool:
        link = self._links.get(conn)
        return link is None or link.state is LinkState.CLOSED

    def feed(self, conn: int, data: bytes, now: float) -> list[VsmEvent]:
        link = self._links.get(conn)
        if link is None or link.state is LinkState.CLOSED:
            return []
        link.stats.bytes_in += len(data)
        msgs, error = link.reader.feed(data)
        events: list[VsmEvent] = []
        for msg in msgs:
            if not link.is_open():
                break
            link.stats.messages_in += 1
            link.last_rx = now
            events.extend(self._message(link, msg, now))
        if error is not None and link.is_open():
            link.stats.drop(error.reason)
            self.stats.drop(error.reason)
            events.append(PacketDropped(protocol=NAME, reason=error.reason, offset=error.offset))
            events.extend(self._close(link, f"bad frame: {error.reason}"))
        return events

    def feed_eof(self, conn: int, now: float) -> list[VsmEvent]:
        link = self._links.get(conn)
        if link is None or link.state is LinkState.CLOSED:
            self._links.pop(conn, None)
            return []
        events = self._close(link, "the UCS closed the connection")
        return events

    def tick(self, conn: int, now: float) -> list[VsmEvent]:
        """The timers of one link: the Register_peer timeout, keep-alive pings and silence."""
        link = self._links.get(conn)
        if link is None or link.state is LinkState.CLOSED:
            return []
        if link.state is LinkState.AWAITING_PEER:
            if now >= link.opened + PEER_TIMEOUT:
                return self._close(link, f"no Register_peer within {PEER_TIMEOUT:g} s")
            return []
        if link.state is LinkState.REGISTERED and self.keep_alive is not None:
            if now >= link.last_rx + self.keep_alive:
                return self._close(link, f"nothing from the UCS for {self.keep_alive:g} s")
            if now >= link.next_ping:
                message_id = self._message_ids()
                link.pings.add(message_id)
                self._queue(
                    link,
                    codec.encode(
                        pb.Vsm_message(device_id=0, message_id=message_id, response_required=True)
                    ),
                )
                link.next_ping = now + PING_INTERVAL
        return []

    def forget(self, conn: int) -> None:
        """The driver closed the connection: drop what is left of it."""
        link = self._links.get(conn)
        if link is not None and link.state is not LinkState.CLOSED:
            self._close(link, "closed")
        self._links.pop(conn, None)

    # -- internals --------------------------------------------------------------------------

    def _move(self, link: _Link, trigger: Trigger) -> None:
        """The one place a link's state changes (see `TRANSITIONS`)."""
        link.state = transition(TRANSITIONS, link.state, trigger, "ugcs VSM")

    def _queue(self, link: _Link, data: bytes) -> None:
        link.out.append(data)
        link.stats.messages_out += 1
        link.stats.bytes_out += len(data)
        self.stats.messages_out += 1
        self.stats.bytes_out += len(data)

    def _is_primary(self, link: _Link) -> bool:
        return link.peer_id is not None and self._primary.get(link.peer_id) == link.conn

    def _acked(self, link: _Link, device_id: int) -> bool:
        where = self._where.get(device_id)
        if where is None:
            return False
        acked = link.acked.get(where[0])
        return acked is not None and bool(acked[where[1]])

    def _close(self, link: _Link, reason: str) -> list[VsmEvent]:
        was_primary = self._is_primary(link)
        self._move(link, Trigger.CLOSE)
        link.close_reason = reason
        link.out.clear()
        if was_primary and link.peer_id is not None:
            del self._primary[link.peer_id]
            others = [
                other
                for other in self._links.values()
                if other.peer_id == link.peer_id
                and other is not link
                and other.state is LinkState.REGISTERED
            ]
            if others:  # loopback first, then the newest
                best = max(others, key=lambda o: (o.loopback, o.conn))
                self._primary[link.peer_id] = best.conn
        return [ConnectionEnded(conn=link.conn, reason=reason)]

    def _drop(self, link: _Link, reason: str) -> PacketDropped:
        link.stats.drop(reason)
        self.stats.drop(reason)
        return PacketDropped(protocol=NAME, reason=reason)

    def _message(self, link: _Link, msg: pb.Vsm_message, now: float) -> list[VsmEvent]:
        if link.state is LinkState.INCOMPATIBLE:
            return []
        if link.state is LinkState.AWAITING_PEER:
            if msg.device_id == 0 and msg.HasField("register_peer"):
                return self._peer(link, msg.register_peer, now)
            return [self._drop(link, "message from an unregistered peer")]
        if msg.HasField("register_peer"):
            return [self._drop(link, "a second Register_peer")]
        if msg.HasField("device_response"):
            return self._response(link, msg)
        if msg.device_id == 0:
            if msg.response_required:  # a ping
                reply = pb.Vsm_message(device_id=0, message_id=msg.message_id)
                reply.device_response.code = defs.STATUS_OK
                self._queue(link, codec.encode(reply))
            return []
        if len(msg.device_commands):
            return self._commands(link, msg)
        return [self._drop(link, f"unexpected message for device {msg.device_id}")]

    def _peer(self, link: _Link, peer: pb.Register_peer, now: float) -> list[VsmEvent]:
        peer_type = peer.peer_type if peer.HasField("peer_type") else defs.PEER_TYPE_SERVER
        if peer_type != defs.PEER_TYPE_SERVER:
            return self._close(link, f"the peer is not a UCS (peer_type {peer_type})")
        version = (peer.version_major, peer.version_minor)  # missing fields read as 0
        compatible = version >= SUPPORTED_UCS_VERSION
        link.peer_id = peer.peer_id
        primary = False
        if compatible:
            self._move(link, Trigger.PEER_OK)
            old_conn = self._primary.get(peer.peer_id)
            old = self._links.get(old_conn) if old_conn is not None else None
            if old is None or not old.loopback or link.loopback:
                self._primary[peer.peer_id] = link.conn
                primary = True
            if self.keep_alive is not None:
                link.next_ping = now + PING_INTERVAL
            for group in self.groups:
                for row, info in enumerate(group.infos):
                    if group.alive[row]:
                        self._send_registration(link, info)
        else:
            self._move(link, Trigger.PEER_TOO_OLD)
        return [
            PeerRegistered(
                conn=link.conn,
                peer_id=peer.peer_id,
                peer_type=peer_type,
                version_major=peer.version_major,
                version_minor=peer.version_minor,
                version_build=peer.version_build,
                name=peer.name,
                compatible=compatible,
                primary=primary,
            )
        ]

    def _send_registration(self, link: _Link, info: DeviceInfo) -> None:
        msg = info.to_message()
        msg.message_id = self._message_ids()
        msg.response_required = True
        link.pending[msg.message_id] = info.device_id
        self._queue(link, codec.encode(msg))

    def _response(self, link: _Link, msg: pb.Vsm_message) -> list[VsmEvent]:
        message_id = msg.message_id
        if message_id in link.pings:
            link.pings.discard(message_id)
            return []
        device_id = link.pending.get(message_id)
        if device_id is None:
            return [self._drop(link, f"a response to no request (message id {message_id})")]
        code = int(msg.device_response.code)
        if code == defs.STATUS_IN_PROGRESS:
            return []
        del link.pending[message_id]
        where = self._where.get(device_id)
        if where is None:
            return []
        if code == defs.STATUS_OK:
            index, row = where
            link.acked[index][row] = True
            self._queue(link, codec.encode(self.groups[index].snapshot(row)))
        return [DeviceAcknowledged(conn=link.conn, device_id=device_id, code=code)]

    def _commands(self, link: _Link, msg: pb.Vsm_message) -> list[VsmEvent]:
        device_id = msg.device_id
        info = self.device(device_id)
        if info is None:  # the SDK builds INVALID_SESSION_ID and then drops it: no reply
            return [self._drop(link, f"command for unknown device {device_id}")]
        count = len(msg.device_commands)

        def invalid(text: str) -> list[VsmEvent]:
            if msg.response_required and self.can_respond(link.conn, device_id):
                self.respond(
                    link.conn, device_id, msg.message_id, defs.STATUS_INVALID_COMMAND, text
                )
            return []

        if count != 1:
            return invalid(f"Only one command allowed in ucs message, got {count}")
        try:
            command = _command(info, msg.device_commands[0], in_mission=False)
        except _Invalid as exc:
            return invalid(str(exc))
        return [
            CommandReceived(
                conn=link.conn,
                device_id=device_id,
                message_id=msg.message_id,
                response_required=msg.response_required,
                command=command,
            )
        ]


class _Invalid(Exception):
    """A command that does not fit its registration (-> STATUS_INVALID_COMMAND, its text)."""


_NUMERIC = frozenset({ValueKind.DOUBLE, ValueKind.FLOAT, ValueKind.INT})


def _parameter(p: FieldInfo, fv: pb.Field_value) -> Value:
    value = read_value(fv)
    if value is None:
        return None  # NA is accepted for any parameter
    if p.semantic == defs.FIELD_SEMANTIC_ENUM or p.enumeration:
        if not fv.HasField("int_value") or (p.enumeration and value not in p.enumeration):
            raise _Invalid(f"Invalid value {value!r} for enum parameter {p.name}")
        return value
    if p.kind in _NUMERIC:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Invalid(f"Parameter {p.name} must be a number, got {value!r}")
        return value
    if p.kind is ValueKind.BOOL and not isinstance(value, bool):
        raise _Invalid(f"Parameter {p.name} must be a bool, got {value!r}")
    if p.kind is ValueKind.STRING and not isinstance(value, str):
        raise _Invalid(f"Parameter {p.name} must be a string, got {value!r}")
    return value


def _command(info: DeviceInfo, dc: pb.Device_command, *, in_mission: bool) -> Command:
    spec: CommandInfo | None = info.commands_by_id.get(dc.command_id)
    if spec is None:
        raise _Invalid(f"Unknown command id {dc.command_id}")
    if in_mission and not spec.available_in_mission:
        raise _Invalid(f"Command not allowed in mission: {spec.name}")
    by_id = {p.field_id: p for p in spec.parameters}
    params: dict[str, Value] = {}
    for pf in dc.parameters:
        p = by_id.get(pf.field_id)
        if p is None:
            raise _Invalid(f"Unknown parameter id {pf.field_id} for {spec.name}")
        params[p.name] = _parameter(p, pf.value)
    missing = [p.name for p in spec.parameters if p.name not in params]
    if missing:
        raise _Invalid(f"Missing parameter {', '.join(missing)} for {spec.name}")
    subs = tuple(_command(info, sub, in_mission=True) for sub in dc.sub_commands)
    return Command(
        name=spec.name, command_id=spec.command_id, parameters=params, sub_commands=subs, info=spec
    )


class VsmLink:
    """One connection of a `VsmSession`, as a `StreamSession` for the shared `StreamDriver`."""

    def __init__(self, session: VsmSession, conn: int, stats: SessionStats) -> None:
        self.session = session
        self.conn = conn
        self.stats = stats

    @property
    def state(self) -> LinkState:
        return self.session.link_state(self.conn)

    def feed(self, data: bytes, now: float) -> list[VsmEvent]:
        return self.session.feed(self.conn, data, now)

    def feed_eof(self, now: float) -> list[VsmEvent]:
        return self.session.feed_eof(self.conn, now)

    def tick(self, now: float) -> list[VsmEvent]:
        return self.session.tick(self.conn, now)

    def data_to_send(self) -> bytes:
        return self.session.data_to_send(self.conn)

    def next_deadline(self) -> float | None:
        return self.session.next_deadline(self.conn)

    def close_expected(self) -> bool:
        return self.session.close_expected(self.conn)
