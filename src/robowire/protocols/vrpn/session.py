"""The sans-I/O VRPN connection endpoint, one per TCP connection, for both roles.

States (all state logic lives here: `TRANSITIONS`, and every change goes through `_move`):

    AWAIT_COOKIE --COOKIE_ACCEPTED (peer cookie, same major)--> CONNECTED
    AWAIT_COOKIE --FAILED (bad cookie, other major, none in 10 s)--> CLOSED
    AWAIT_COOKIE / CONNECTED --PEER_CLOSED (EOF)--> CLOSED
    CONNECTED --FAILED (broken stream, no pong for 10 s)--> CLOSED

VRPN's two ends are symmetric (both send a cookie, then descriptions, then data), so both roles
share this one table; the roles differ only in who pings (the client) and who answers (the
server). Both sides write their cookie at once (the session queues it when built), then, once
the peer's cookie is accepted: [UDP_DESCRIPTION in UDP+TCP mode] -> sender descriptions ->
type descriptions, then data. Ids are per side: the session keeps our names -> ids for what
we send and the peer's ids -> names for what we receive. Descriptions are accepted at any
time; a name we did not have is registered and announced back, as C++ peers do.

A send before CONNECTED (or after CLOSED) raises `LocalProtocolError` (VRPN drops it silently);
check `connected` first, or catch it. Reliable messages go on TCP; the others on UDP once the
peer's UDP description told us where, on TCP until then.
Time: `now` is monotonic seconds; header timestamps are `now + clock_offset` unless given
(the caller passes the offset in: the session reads no clock).

Size: one module over 600 lines because it is one thing, the state machine of a VRPN
connection: sending, receiving and the system messages all read and change the same id
tables and state (the batch decoder, which does not, is `batch.py`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from enum import Enum
from itertools import accumulate

import numpy as np
import numpy.typing as npt

from robowire.errors import DecodeError, LocalProtocolError
from robowire.protocols.vrpn.batch import ReportBatcher, count_undescribed
from robowire.protocols.vrpn.codec import (
    COOKIE_SIZE,
    HEADER_SIZE,
    LOCAL_COOKIE,
    MAX_LENGTH,
    MAX_NAME,
    MAX_REMOTE_ID,
    PROTOCOL,
    Cookie,
    Frame,
    FrameIndex,
    SystemType,
    decode_cookie,
    encode_cookie,
    encode_frame,
    scan,
    split_time,
)
from robowire.protocols.vrpn.events import (
    Connected,
    Described,
    MessageReceived,
    PeerSilent,
    PongReceived,
    VrpnEvent,
)
from robowire.protocols.vrpn.messages import Body, Ping, Pong
from robowire.protocols.vrpn.registry import (
    BASE_TYPES,
    CONNECTION_EVENT_TYPES,
    CONTROL_SENDER,
    POSE_FRAME,
    FrameBatch,
    decode_body,
    encode_pose_frames,
)
from robowire.protocols.vrpn.system import (
    SenderDescription,
    SystemMessage,
    TypeDescription,
    UdpDescription,
    decode_system,
)
from robowire.sequence import DatagramOrder
from robowire.wire import Address, ConnectionLost, PacketDropped, SessionStats, transition

__all__ = [
    "TRANSITIONS",
    "Connected",
    "Described",
    "MessageReceived",
    "PeerSilent",
    "PongReceived",
    "Role",
    "State",
    "Trigger",
    "VrpnSession",
]

_SEQ = struct.Struct(">I")  # a message header's `seq`, at offset 20
UDP_MTU = 1472  # the C++ UDP out-buffer: one datagram carries whole messages up to this
PING_INTERVAL = 1.0
PING_WARN = 3.0
PING_FAIL = 10.0
COOKIE_TIMEOUT = 10.0
VERSION_MISMATCH = "VRPN major version mismatch"
PEER_CLOSED = "peer closed the connection"


class Role(Enum):
    CLIENT = "client"
    SERVER = "server"


class State(Enum):
    AWAIT_COOKIE = "await_cookie"
    CONNECTED = "connected"
    CLOSED = "closed"


class Trigger(Enum):
    COOKIE_ACCEPTED = "cookie accepted"
    FAILED = "failed"  # the peer broke the protocol or went silent
    PEER_CLOSED = "peer closed"


TRANSITIONS: dict[State, dict[Trigger, State]] = {
    State.AWAIT_COOKIE: {
        Trigger.COOKIE_ACCEPTED: State.CONNECTED,
        Trigger.FAILED: State.CLOSED,
        Trigger.PEER_CLOSED: State.CLOSED,
    },
    State.CONNECTED: {
        Trigger.FAILED: State.CLOSED,
        Trigger.PEER_CLOSED: State.CLOSED,
    },
    State.CLOSED: {},  # nothing moves a closed session: later bytes and timers are ignored
}


# -- the session -----------------------------------------------------------------------------


class VrpnSession:
    """One VRPN connection endpoint. See the module docstring for the rules it follows."""

    def __init__(
        self,
        role: Role,
        *,
        senders: Iterable[str] = (),
        types: Iterable[str] = (),
        udp_inbound: Address | None = None,
        clock_offset: float = 0.0,
        ping_senders: Sequence[str] = (),
        keepalive: float = 5.0,
        now: float | None = None,
    ) -> None:
        self.role = role
        self.state = State.AWAIT_COOKIE  # changed only by _move
        self.stats = SessionStats()
        self.clock_offset = clock_offset
        self.udp_inbound = udp_inbound
        self.peer_udp: Address | None = None
        self.peer_cookie: Cookie | None = None
        self.close_reason = ""
        self._local_senders: dict[str, int] = {}
        self._local_types: dict[str, int] = {}
        self._sender_tuples: dict[tuple[str, ...], tuple[int, ...]] = {}  # register_senders
        self._remote_senders: dict[int, str] = {}
        self._remote_types: dict[int, str] = {}
        self._batch = ReportBatcher(self._remote_senders, self._remote_types, self.stats)
        self._in = bytearray()
        self._need = 0  # bytes the buffered partial message needs before it is worth a scan
        self._tcp_out = bytearray()
        self._udp_out = bytearray()  # whole messages, back to back
        self._udp_ends: list[int] = []  # where each of them ends in _udp_out
        self._tcp_seq = 0
        self._udp_seq = 0
        self.udp_order = DatagramOrder()  # the peer's UDP datagrams, by their messages' seq
        self._order = 0
        # a client pings each device it uses; a pong ends the cycle until `keepalive` later
        self._ping_senders = tuple(ping_senders)
        self.devices = set(senders)  # a server answers pings only for its own devices
        self._keepalive = keepalive
        self._ping_started: float | None = None
        self._ping_next: float | None = None
        self._warned = False
        self._answered = False
        self.register_sender(CONTROL_SENDER)
        for name in CONNECTION_EVENT_TYPES:
            self.register_type(name)
        for cls in BASE_TYPES:
            self.register_type(cls.WIRE_NAME)
        for name in types:
            self.register_type(name)
        for name in (*senders, *ping_senders):
            self.register_sender(name)
        self._tcp_out += encode_cookie(LOCAL_COOKIE)
        # the cookie timer starts at `now`, or at the first tick/feed if the builder had no clock
        self._now = 0.0 if now is None else now
        self._cookie_deadline = None if now is None else now + COOKIE_TIMEOUT

    def _move(self, trigger: Trigger) -> None:
        """The one place the state changes: by `TRANSITIONS`, or SessionError (a bug here)."""
        self.state = transition(TRANSITIONS, self.state, trigger, f"VRPN {self.role.value}")

    # -- names and ids ---------------------------------------------------------------------

    def register_sender(self, name: str) -> int:
        """Our id for sender `name`, announcing it to the peer if it is new."""
        found = self._local_senders.get(name)
        if found is not None:
            return found
        sender_id = self._local_senders[name] = len(self._local_senders)
        if self.state is State.CONNECTED:
            self._send_system(SenderDescription(id=sender_id, name=name))
        return sender_id

    def register_senders(self, names: tuple[str, ...]) -> tuple[int, ...]:
        """`register_sender` of each of `names` (remembered: a server's every frame asks for
        the same trackers' ids, a hundred of them for a mocap system's rigid bodies)."""
        found = self._sender_tuples.get(names)
        if found is None:
            found = self._sender_tuples[names] = tuple(map(self.register_sender, names))
        return found

    def register_type(self, name: str) -> int:
        found = self._local_types.get(name)
        if found is not None:
            return found
        type_id = self._local_types[name] = len(self._local_types)
        if self.state is State.CONNECTED:
            self._send_system(TypeDescription(id=type_id, name=name))
        return type_id

    @property
    def remote_senders(self) -> dict[int, str]:
        return dict(self._remote_senders)

    @property
    def remote_types(self) -> dict[int, str]:
        return dict(self._remote_types)

    @property
    def local_senders(self) -> dict[str, int]:
        return dict(self._local_senders)

    # -- sending ----------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True while sends are allowed: the peer's cookie accepted, not closed."""
        return self.state is State.CONNECTED

    def _check_connected(self, action: str) -> None:
        """A send before the peer's cookie is accepted, or after the close, is the caller's
        bug (h11's rule): VRPN would drop it silently; robowire says so at once."""
        if self.state is not State.CONNECTED:
            raise LocalProtocolError(PROTOCOL, action, self.state.name)

    def _header_time(self, time: float | None) -> tuple[int, int]:
        return split_time(self._now + self.clock_offset if time is None else time)

    def _send_system(self, message: SystemMessage) -> None:
        sec, usec = self._header_time(None)
        self._tcp_out += encode_frame(
            message.header_sender,
            message.TYPE,
            message.encode(),
            sec=sec,
            usec=usec,
            seq=self._tcp_seq,
        )
        self._tcp_seq += 1
        self.stats.messages_out += 1

    def send(
        self,
        sender: str,
        message: Body,
        *,
        time: float | None = None,
        reliable: bool = True,
    ) -> None:
        """Queue one message from our sender `sender` (LocalProtocolError unless CONNECTED)."""
        self.send_raw(sender, message.WIRE_NAME, message.encode(), time=time, reliable=reliable)

    def send_raw(
        self,
        sender: str,
        type_name: str,
        body: bytes,
        *,
        time: float | None = None,
        reliable: bool = True,
    ) -> None:
        """Queue one message already encoded (`body`) of type `type_name`; the names are
        registered (and described at connect) even when the send raises."""
        sender_id = self.register_sender(sender)
        type_id = self.register_type(type_name)
        self._check_connected("send")
        sec, usec = self._header_time(time)
        if reliable or self.peer_udp is None:
            self._tcp_out += encode_frame(
                sender_id, type_id, body, sec=sec, usec=usec, seq=self._tcp_seq
            )
            self._tcp_seq += 1
        else:
            self._udp_out += encode_frame(
                sender_id, type_id, body, sec=sec, usec=usec, seq=self._udp_seq
            )
            self._udp_ends.append(len(self._udp_out))
            self._udp_seq += 1
        self.stats.messages_out += 1

    def send_poses(
        self,
        sender: str | Sequence[str],
        sensors: npt.ArrayLike,
        positions: npt.ArrayLike,
        quaternions_xyzw: npt.ArrayLike,
        *,
        time: float | npt.ArrayLike | None = None,
        reliable: bool = False,
    ) -> None:
        """Queue n Pos_Quat reports in one vectorised step (the server's hot path).

        `sender` is one name for all rows, or one name per row; `time` one or one per row.
        """
        if isinstance(sender, str):
            sender_ids: int | list[int] = self.register_sender(sender)
        else:
            sender_ids = [self.register_sender(name) for name in sender]
        type_id = self.register_type("vrpn_Tracker Pos_Quat")
        self._check_connected("send poses")
        udp = not reliable and self.peer_udp is not None
        seq = self._udp_seq if udp else self._tcp_seq
        if time is None or isinstance(time, float | int):
            time = self._now + self.clock_offset if time is None else float(time)
        frames = encode_pose_frames(
            sender_ids, type_id, sensors, positions, quaternions_xyzw, time=time, first_seq=seq
        )
        n = len(frames)
        raw = frames.tobytes()
        if udp:
            self._udp_seq += n
            base, size = len(self._udp_out), POSE_FRAME.itemsize
            self._udp_out += raw
            self._udp_ends.extend(range(base + size, base + len(raw) + 1, size))
        else:
            self._tcp_seq += n
            self._tcp_out += raw
        self.stats.messages_out += n

    def send_batch(self, batch: FrameBatch, *, reliable: bool = False) -> None:
        """Queue messages encoded once for every session with the same ids (the server's hot
        path: one frame of tracker reports, see `ReportEncoder`), writing our seq into them."""
        self._check_connected("send a batch")
        n = len(batch)
        udp = not reliable and self.peer_udp is not None
        seq = self._udp_seq if udp else self._tcp_seq
        batch.number(seq)
        if udp:
            base = len(self._udp_out)
            self._udp_out += batch.data.data
            self._udp_ends.extend((batch.ends + base).tolist())
            self._udp_seq += n
        else:
            self._tcp_out += batch.data.data
            self._tcp_seq += n
        self.stats.messages_out += n

    def data_to_send(self) -> bytes:
        out = bytes(self._tcp_out)
        self._tcp_out.clear()
        self.stats.bytes_out += len(out)
        return out

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        """Queued UDP messages packed whole into datagrams of at most 1472 bytes."""
        if not self._udp_ends:
            return []
        out: list[tuple[bytes, Address | None]] = []
        target, buf = self.peer_udp, self._udp_out
        start = last = 0  # the datagram being filled is buf[start:last]
        for end in self._udp_ends:
            if end - start > UDP_MTU and last > start:
                out.append((bytes(buf[start:last]), target))
                start = last
            last = end
        out.append((bytes(buf[start:last]), target))
        self._udp_out.clear()
        self._udp_ends.clear()
        return out

    def close_expected(self) -> bool:
        return self.state is State.CLOSED

    # -- timers -----------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        if self.state is State.AWAIT_COOKIE:
            return self._cookie_deadline
        return self._ping_next if self.state is State.CONNECTED else None

    def _start_clock(self, now: float) -> None:
        self._now = now
        if self._cookie_deadline is None:
            self._cookie_deadline = now + COOKIE_TIMEOUT

    def tick(self, now: float) -> list[VrpnEvent]:
        self._start_clock(now)
        assert self._cookie_deadline is not None
        if self.state is State.AWAIT_COOKIE and now >= self._cookie_deadline:
            # C++ peers block on a short cookie; we give up on that one connection instead
            return [self._fail(f"no VRPN cookie from the peer within {COOKIE_TIMEOUT:g} s")]
        if self.state is not State.CONNECTED or self._ping_next is None:
            return []
        if now < self._ping_next:
            return []
        events: list[VrpnEvent] = []
        if self._ping_started is None:
            self._ping_started = now
            self._warned = False
        silent = now - self._ping_started
        if silent >= PING_FAIL and self._answered:
            # it answered before on this connection and went quiet: treat it as gone. A server
            # that never answers (no such device) is only warned about, as C++ clients do.
            return [self._fail(f"no pong from the server for {silent:.0f} s")]
        if silent >= PING_WARN and not self._warned:
            self._warned = True
            events.append(PeerSilent(seconds=silent))
        for name in self._ping_senders:
            self.send(name, Ping())
        self._ping_next = now + PING_INTERVAL
        return events

    # -- receiving --------------------------------------------------------------------------

    def feed_eof(self, now: float) -> list[VrpnEvent]:
        self._now = now
        if self.state is State.CLOSED:
            return []
        self._move(Trigger.PEER_CLOSED)
        self.close_reason = PEER_CLOSED
        return [ConnectionLost(reason=self.close_reason)]

    def _fail(self, reason: str) -> ConnectionLost:
        self._move(Trigger.FAILED)
        self.close_reason = reason
        self.stats.drop(reason)
        return ConnectionLost(reason=reason)

    def feed(self, data: bytes, now: float) -> list[VrpnEvent]:
        """TCP bytes from the peer. Never raises; a broken stream ends in ConnectionLost."""
        self._now = now
        state = self.state  # (_start_clock, inline: this is the hot path of a live read)
        if state is not State.CONNECTED:
            if state is State.CLOSED:
                return []
            if self._cookie_deadline is None:
                self._cookie_deadline = now + COOKIE_TIMEOUT
        self.stats.bytes_in += len(data)
        if self._in:
            self._in += data
            if len(self._in) < self._need:  # the next message is not whole yet: wait
                return []
            work = bytes(self._in)
            self._in.clear()
        else:
            work = bytes(data)
        events: list[VrpnEvent] = []
        start = 0
        if state is State.AWAIT_COOKIE:
            if len(work) < COOKIE_SIZE:
                self._in += work
                return events
            start = COOKIE_SIZE
            try:
                cookie = decode_cookie(work[:COOKIE_SIZE])
            except DecodeError as exc:
                return [self._fail(f"bad cookie from peer: {exc.reason}")]
            if not cookie.compatible_with(LOCAL_COOKIE):
                return [
                    self._fail(
                        f"{VERSION_MISMATCH}: peer speaks {cookie.version!r}, "
                        f"robowire speaks {LOCAL_COOKIE.version!r}"
                    )
                ]
            self.peer_cookie = cookie
            self._connect(now)
            events.append(Connected(cookie=cookie))
        if (start & 7) and len(work) > start:
            work, start = work[start:], 0
        start = self._report_run(work, start, events, False)
        if start == len(work):
            return events
        index = scan(work, start)
        if len(index):
            self._dispatch(work, index, "tcp", events)
        if index.error is not None:  # the framing is lost: drop the rest, close
            reason = f"broken stream: {index.error.reason}"
            rest = len(work) - index.end
            events.append(
                PacketDropped(protocol=PROTOCOL, reason=reason, offset=index.end, size=rest)
            )
            events.append(self._fail(reason))
            return events
        if index.end < len(work):
            self._in += work[index.end :]
            self._need = _bytes_needed(self._in)
        return events

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[VrpnEvent]:
        """One UDP datagram on our inbound socket: whole messages, else it is dropped; a copy
        or a late one (by its first message's `seq`: `udp_order`) is dropped too."""
        self._now = now
        if self.state is not State.CONNECTED or not self._in_order(data):
            return []
        return self._datagram(data)

    def _in_order(self, data: bytes) -> bool:
        """Whether `data` is newer on the wire than every datagram taken (a datagram too short
        to say is the decoder's to drop)."""
        return len(data) < HEADER_SIZE or self.udp_order.take(_SEQ.unpack_from(data, 20)[0])

    def _datagram(self, data: bytes) -> list[VrpnEvent]:
        self.stats.bytes_in += len(data)
        work = bytes(data)
        events: list[VrpnEvent] = []
        if self._report_run(work, 0, events, True) == len(work) > 0:
            return events
        index = scan(work, 0)
        if index.error is not None or index.end != len(work):
            # whole messages only: a datagram with a truncated or bad one is dropped whole
            reason = index.error.reason if index.error else "truncated message in datagram"
            self.stats.drop(reason)
            return [
                PacketDropped(protocol=PROTOCOL, reason=reason, offset=index.end, size=len(work))
            ]
        self._dispatch(work, index, "udp", events)
        return events

    def feed_datagrams(
        self, datagrams: Sequence[tuple[bytes, Address]], now: float
    ) -> list[VrpnEvent]:
        """Datagrams read in one wake-up, decoded as one batch: their messages are scanned
        together, so the reports of one sender and kind become one `TrackerReports` however
        many datagrams carried them. Each datagram is still whole messages or dropped whole
        (if one is not, each is fed on its own, as `feed_datagram` would)."""
        if len(datagrams) == 1:
            data, addr = datagrams[0]
            return self.feed_datagram(data, addr, now)
        self._now = now
        if self.state is not State.CONNECTED:
            return []
        unpack = _SEQ.unpack_from
        try:
            firsts = [unpack(data, 20)[0] for data, _ in datagrams]
        except struct.error:  # a datagram too short to say: one by one
            firsts = []
        if not (firsts and self.udp_order.take_run(firsts)):  # a copy, a late one: one by one
            datagrams = [d for d in datagrams if self._in_order(d[0])]
            if not datagrams:
                return []
        sizes = [len(data) for data, _ in datagrams]
        if all(size and not size & 7 for size in sizes):  # whole messages are 8-aligned
            work = b"".join([data for data, _ in datagrams])
            events: list[VrpnEvent] = []
            cuts = list(accumulate(sizes[:-1]))
            if self._report_run(work, 0, events, True, cuts) == len(work):
                self.stats.bytes_in += len(work)
                return events
            index = scan(work, 0)
            if index.error is None and index.end == len(work):
                starts = np.cumsum(sizes) - sizes
                found = np.searchsorted(index.offsets, starts)
                if (index.offsets[np.minimum(found, len(index) - 1)] == starts).all():
                    self.stats.bytes_in += len(work)
                    self._dispatch(work, index, "udp", events)
                    return events
        events = []
        for data, _ in datagrams:  # some datagram is not whole messages: one at a time
            events += self._datagram(data)
        return events

    def _report_run(
        self,
        work: bytes,
        start: int,
        events: list[VrpnEvent],
        whole: bool,
        cuts: Sequence[int] = (),
    ) -> int:
        """The batch decoder's fast path from `start` (see `ReportBatcher.run`): where the
        run of tracker reports ends (`start`: no run)."""
        end, messages = self._batch.run(work, start, events, self._order, whole, cuts)
        self._order += messages
        self.stats.messages_in += messages
        return end

    def _connect(self, now: float) -> None:
        self._move(Trigger.COOKIE_ACCEPTED)
        if self.udp_inbound is not None:
            host, port = self.udp_inbound
            self._send_system(UdpDescription(port=port, host=host))
        for name, sender_id in self._local_senders.items():
            self._send_system(SenderDescription(id=sender_id, name=name))
        for name, type_id in self._local_types.items():
            self._send_system(TypeDescription(id=type_id, name=name))
        if self._ping_senders:
            self._ping_next = now  # the first ping goes out at the first tick

    def _dispatch(
        self, buf: bytes, index: FrameIndex, channel: str, events: list[VrpnEvent]
    ) -> None:
        types = index.type
        n = len(index)
        system_at = np.flatnonzero(types < 0)
        # split at system messages: they change the id maps for the frames after them
        bounds = [*system_at.tolist(), n]
        first = 0
        for stop in bounds:
            if stop > first:
                self._dispatch_user(buf, index, first, stop, channel, events)
            if stop < n:
                self._handle_system(buf, index, stop, events)
            first = stop + 1
        self._order += n
        self.stats.messages_in += n

    def _dispatch_user(
        self,
        buf: bytes,
        index: FrameIndex,
        first: int,
        stop: int,
        channel: str,
        events: list[VrpnEvent],
    ) -> None:
        handled = self._batch.gather(buf, index, first, stop, self._order, events)
        for row in np.flatnonzero(~handled).tolist():
            self._handle_one(buf, index, row + first, channel, events)

    def _handle_one(
        self, buf: bytes, index: FrameIndex, row: int, channel: str, events: list[VrpnEvent]
    ) -> None:
        type_name = self._remote_types.get(int(index.type[row]))
        sender = self._remote_senders.get(int(index.sender[row]))
        if type_name is None or sender is None:
            count_undescribed(self.stats, 1)
            return
        offset = int(index.offsets[row])
        body = buf[offset + HEADER_SIZE : offset + int(index.lengths[row])]
        time = int(index.sec[row]) + int(index.usec[row]) * 1e-6
        try:
            message: Body | Frame | None = decode_body(type_name, body)
        except DecodeError as exc:
            self.stats.drop(exc.reason)
            events.append(
                PacketDropped(
                    protocol=PROTOCOL,
                    reason=exc.reason,
                    offset=offset + HEADER_SIZE + exc.offset,
                    size=len(body),
                )
            )
            return
        if message is None:
            message = Frame(
                sender=int(index.sender[row]),
                type=int(index.type[row]),
                sec=int(index.sec[row]),
                usec=int(index.usec[row]),
                seq=int(index.seq[row]),
                body=body,
            )
        if isinstance(message, Ping) and self.role is Role.SERVER:
            if sender in self.devices:
                self.send(sender, Pong())  # reliable, from the device that was pinged
        elif isinstance(message, Pong) and self._ping_started is not None:
            events.append(PongReceived(sender=sender, round_trip=self._now - self._ping_started))
            self._ping_started = None
            self._answered = True
            self._ping_next = self._now + self._keepalive if self._keepalive > 0 else None
        events.append(
            MessageReceived(
                sender=sender,
                type=type_name,
                message=message,
                time=time,
                channel=channel,
                order=self._order + row,
            )
        )

    def _handle_system(
        self, buf: bytes, index: FrameIndex, row: int, events: list[VrpnEvent]
    ) -> None:
        offset = int(index.offsets[row])
        body = buf[offset + HEADER_SIZE : offset + int(index.lengths[row])]
        type_ = int(index.type[row])
        try:
            message = decode_system(type_, int(index.sender[row]), body)
        except DecodeError as exc:
            self.stats.drop(exc.reason)
            events.append(
                PacketDropped(protocol=PROTOCOL, reason=exc.reason, offset=offset, size=len(body))
            )
            return
        if isinstance(message, SenderDescription | TypeDescription):
            if not 0 <= message.id < MAX_REMOTE_ID:
                reason = f"description id {message.id} outside 0..{MAX_REMOTE_ID - 1}"
                self.stats.drop(reason)
                events.append(PacketDropped(protocol=PROTOCOL, reason=reason, offset=offset))
                return
            # a name we could not describe back (found by fuzzing: up to 100 bytes decode,
            # and bad UTF-8 grows when replaced) made the echo below raise ValueError
            name = message.name.encode("utf-8")
            if len(name) > MAX_NAME or b"\0" in name:
                reason = f"description name of {len(name)} bytes (at most {MAX_NAME}, no NUL)"
                self.stats.drop(reason)
                events.append(PacketDropped(protocol=PROTOCOL, reason=reason, offset=offset))
                return
            if isinstance(message, SenderDescription):
                table, kind = self._remote_senders, "sender"
            else:
                table, kind = self._remote_types, "type"
            if table.get(message.id) != message.name:
                table[message.id] = message.name
                self._batch.forget()
                events.append(Described(kind=kind, id=message.id, name=message.name))
            # like C++ peers: register names we did not have, which announces them back
            if isinstance(message, SenderDescription):
                self.register_sender(message.name)
            else:
                self.register_type(message.name)
        elif isinstance(message, UdpDescription):
            self.peer_udp = (message.host, message.port)
        elif type_ == SystemType.DISCONNECT_MESSAGE:
            self._remote_senders.clear()
            self._remote_types.clear()
            self._batch.forget()
        # LOG_DESCRIPTION: robowire does no remote logging (it asks a peer to log); ignored

    def wire_counts(self) -> dict[str, int]:
        """The UDP datagrams dropped as copies or as late (`robowire.sequence.DatagramOrder`)."""
        order = self.udp_order
        return {"duplicated": order.duplicated, "reordered": order.reordered}


def _bytes_needed(buf: bytearray) -> int:
    """Length of the whole message that starts `buf` (header + padded body), if known."""
    if len(buf) < HEADER_SIZE:
        return HEADER_SIZE
    length = int.from_bytes(buf[:4], "big")
    if not HEADER_SIZE <= length <= MAX_LENGTH:
        return 0  # a bad length: let the next scan report it at once
    return HEADER_SIZE + ((length - HEADER_SIZE + 7) & ~7)
