"""VRSP sessions, both sides, sans-I/O: bytes and `now` in, events and datagrams out.

All state logic lives here: each side's states and transitions are the tables at the top.

Receiver (`ReceiverSession`): DATA is dropped (counted in `stats.extra["no_definition"]`)
until a VRSP_DEF with the same instance id has arrived; a DEF of a new instance replaces the
definition table (and forgets frames in progress); DEF parts of the same instance merge. A
frame that spans several datagrams is held until every part is in (at most `max_pending`
frames and `max_pending_bytes` bytes are held; the oldest is given up first). A datagram of a
frame older than the newest frame delivered is stale: dropped and counted (`stale`); frames
given up incomplete are counted (`incomplete`, and their missing parts `fragments_lost`).
DATA decoding is deferred to the frame's last part, so a whole frame is one vectorised decode.

The wire's faults are counted from the frame numbers (`frames`, `robowire.sequence`): a frame
of which no part came is lost, one whose first part came after a newer frame's is reordered
(and, stale, dropped), a part of a frame already taken in or given up is a duplicate;
`wire_counts()` says them (lost: frames lost or given up incomplete; duplicated: duplicate
datagrams). A DEF of a new instance replacing a table is the sender's restart
(`PeerRestarted`): its frame numbers are counted afresh; so are frame numbers that began
again under the same instance (two in a row far behind the newest, `Restart`: a sender
restarted with the same definition), where they would be stale until they passed the old.

Sender (`SenderSession`): `define` sets the swarm's definition (a fresh random instance id
whenever it changes, from the injected RNG, and a DEF at once); `tick` repeats the DEF every
`def_period` seconds and says when a DATA frame is due (`FrameDue`, every 1/`rate` s); `send`
splits the frame into datagrams of at most `max_size` bytes.
"""

from __future__ import annotations

import enum
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from robowire.errors import DecodeError, LocalProtocolError
from robowire.protocols.vrsp.codec import (
    DATA_NAME,
    DEFAULT_DATAGRAM,
    MAX_DATAGRAM,
    PROTOCOL,
    DefinitionTable,
    IdentifierForm,
    VrspData,
    VrspDef,
    decode_implicit,
    decode_packet,
    encode_data,
    encode_def,
    encode_identifier,
)
from robowire.protocols.vrsp.definitions import DeviceDefinition, Swarm
from robowire.protocols.vrsp.events import DefinitionReceived, FrameDue, SwarmFrame, VrspEvent
from robowire.sequence import PeerRestarted, Restart, Seen, SequenceCounts
from robowire.wire import Address, PacketDropped, SessionStats, transition

Framing = Literal["auto", "profile", "implicit"]
FRAMINGS: tuple[Framing, ...] = ("auto", "profile", "implicit")
MAX_PENDING = 8  # frames in progress at once
MAX_PENDING_BYTES = 16 << 20
MAX_SEEN_DEFS = 4096  # DEF datagrams remembered per instance (repeats are skipped)
HALF = 1 << 31

_DATA_PREFIX = encode_identifier(DATA_NAME)
_FAST = struct.Struct("<BIIHHH")  # version, instance, frame, part, parts, records


class ReceiverState(enum.Enum):
    WAITING_DEF = "waiting for VRSP_DEF"
    READY = "ready"


class SenderState(enum.Enum):
    IDLE = "no definition yet"
    SENDING = "sending"


RECEIVER_TRANSITIONS: dict[ReceiverState, dict[str, ReceiverState]] = {
    ReceiverState.WAITING_DEF: {"def": ReceiverState.READY},
    ReceiverState.READY: {"def": ReceiverState.READY},
}
SENDER_TRANSITIONS: dict[SenderState, dict[str, SenderState]] = {
    SenderState.IDLE: {"define": SenderState.SENDING},
    SenderState.SENDING: {"define": SenderState.SENDING},
}


def newer(a: int, b: int) -> bool:
    """Frame `a` comes after frame `b` (u32 serial numbers that wrap)."""
    return 0 < (a - b) & 0xFFFFFFFF < HALF


@dataclass(slots=True)
class _Pending:
    parts: list[VrspData | None]
    received: int = 0
    size: int = 0


@dataclass(slots=True)
class ReceiverSession:
    """The receiving side of VRSP (see the module docstring)."""

    framing: Framing = "auto"
    rgba: bool = False  # the 0x1 colour is 4 bytes (R, G, B, A) instead of 3
    max_pending: int = MAX_PENDING
    max_pending_bytes: int = MAX_PENDING_BYTES
    stats: SessionStats = field(default_factory=SessionStats)
    state: ReceiverState = ReceiverState.WAITING_DEF
    table: DefinitionTable | None = None
    latest: int | None = None  # the newest frame delivered
    _pending: dict[int, _Pending] = field(default_factory=dict)
    _pending_bytes: int = 0
    _seen: set[bytes] = field(default_factory=set)
    _sizes: tuple[int, int] = (0, 0)  # the smallest and largest record of the table
    frames: SequenceCounts = field(default_factory=lambda: SequenceCounts(modulus=1 << 32))
    restarts: int = 0  # DEFs of a new instance after the first: the sender restarted
    _restart: Restart = field(default_factory=Restart)  # or its frame numbers began again

    def __post_init__(self) -> None:
        names = ("no_definition", "stale", "incomplete", "duplicate", "frames", "fragments_lost")
        for name in names:
            self.stats.extra.setdefault(name, 0)

    def wire_counts(self) -> dict[str, int]:
        """What the wire did, from the frame numbers (see the module docstring)."""
        frames, extra = self.frames, self.stats.extra
        return {
            "lost": frames.lost + extra["incomplete"],
            "settled": frames.settled() + extra["incomplete"],
            "duplicated": frames.duplicated + extra["duplicate"],
            "reordered": frames.reordered,
            "restarts": self.restarts,
            "fragments_lost": extra["fragments_lost"],
        }

    def _move(self, event: str) -> None:
        self.state = transition(RECEIVER_TRANSITIONS, self.state, event, "vrsp receiver")

    def _drop(self, reason: str, size: int, offset: int = 0, counter: str = "") -> PacketDropped:
        self.stats.drop(reason)
        if counter:
            self.stats.extra[counter] += 1
        return PacketDropped(protocol=PROTOCOL, reason=reason, offset=offset, size=size)

    # -- the session API -----------------------------------------------------------------------

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[VrspEvent]:
        """One datagram; never raises on bad bytes (a counted `PacketDropped` instead)."""
        out: list[VrspEvent] = []
        self._take(data, out)
        return out

    def feed_datagrams(
        self, datagrams: Sequence[tuple[bytes, Address]], now: float
    ) -> list[VrspEvent]:
        """What one wake-up read, as one batch."""
        out: list[VrspEvent] = []
        take = self._take
        for data, _ in datagrams:
            take(data, out)
        return out

    def tick(self, now: float) -> list[VrspEvent]:
        return []

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        return []

    def next_deadline(self) -> float | None:
        return None

    # -- receiving -----------------------------------------------------------------------------

    def _take(self, data: bytes, out: list[VrspEvent]) -> None:
        stats = self.stats
        stats.bytes_in += len(data)
        if self.framing != "implicit" and data.startswith(_DATA_PREFIX) and len(data) >= 25:
            version, instance, frame, part, parts, count = _FAST.unpack_from(data, 10)
            if version == 1:  # the profile's own DATA: no objects until the frame is whole
                packet = VrspData(
                    instance=instance, frame=frame, part=part, parts=parts, count=count,
                    body=data[25:], body_offset=25,
                )  # fmt: skip
                self._data(packet, data, out)
                return
        try:
            packet_ = decode_implicit(data) if self.framing == "implicit" else decode_packet(data)
        except DecodeError as exc:
            if self.framing == "auto" and exc.reason.startswith("VRSP_DATA frame header"):
                try:  # too short for the profile's framing: the sheet's implicit form
                    packet_ = decode_implicit(data)
                except DecodeError as exc2:
                    out.append(self._drop(exc2.reason, len(data), exc2.offset))
                    return
            else:
                out.append(self._drop(exc.reason, len(data), exc.offset))
                return
        if isinstance(packet_, VrspDef):
            self._def(packet_, data, out)
        else:
            self._data(packet_, data, out)

    def _def(self, packet: VrspDef, data: bytes, out: list[VrspEvent]) -> None:
        self.stats.messages_in += 1
        table = self.table
        if table is not None and table.instance == packet.instance:
            if data in self._seen:
                return  # the 1 Hz repeat of a DEF already taken in
            if packet.device_count != table.device_count or packet.root != table.root:
                reason = "VRSP_DEF parts of one instance disagree on device count or root"
                out.append(self._drop(reason, len(data)))
                return
            table.add(packet)
            new = False
        else:
            if table is not None:  # a new instance: the sender restarted (or was redefined)
                self.restarts += 1
                out.append(PeerRestarted(reason=f"a new VRSP instance {packet.instance:#010x}"))
            table = self.table = DefinitionTable.from_def(packet, rgba=self.rgba)
            self._seen.clear()
            self._pending.clear()
            self._pending_bytes = 0
            self.latest = None
            self.frames.restart()
            new = True
        if len(self._seen) < MAX_SEEN_DEFS:
            self._seen.add(data)
        if table.definitions:
            sizes = table.sizes()
            self._sizes = (int(sizes.min()), int(sizes.max()))
        self._move("def")
        out.append(DefinitionReceived(table=table, new=new))

    def _data(self, packet: VrspData, data: bytes, out: list[VrspEvent]) -> None:
        table = self.table
        if table is None or table.instance != packet.instance:
            reason = f"VRSP_DATA of instance {packet.instance:#010x} before its VRSP_DEF"
            out.append(self._drop(reason, len(data), counter="no_definition"))
            return
        frame = packet.frame
        if frame is not None and self.framing == "auto" and not self._plausible(packet):
            # not the profile's framing? the sheet's implicit form (one whole frame), if it
            # decodes; if not, the profile's own error says what is wrong
            implicit = decode_implicit(data)
            try:
                swarm = table.decode_implicit(implicit.body, implicit.body_offset)
            except DecodeError:
                pass
            else:
                self._delivered(table, None, swarm, 1, out)
                return
        if frame is None:  # implicit: a whole frame in one datagram
            self._decode([packet], None, 1, out)
            return
        latest = self.latest
        if frame not in self._pending and self.frames.see(frame) is Seen.DUPLICATE:
            if latest is None or not self._restart.behind(frame, latest):
                self.stats.extra["stale"] += 1  # a part of a frame taken in or given up
                out.append(self._drop(f"stale frame {frame} (a part of it again)", len(data)))
                return
            self._restarted(frame, latest, out)  # and this frame is the new sequence's
        elif latest is not None and not newer(frame, latest):
            if not self._restart.behind(frame, latest):
                out.append(self._drop(f"stale frame {frame}", len(data), counter="stale"))
                return
            self._restarted(frame, latest, out)
        parts = packet.parts
        if parts == 1 and packet.part == 0:
            self._decode([packet], frame, 1, out)
            return
        if packet.part >= parts:
            reason = f"part {packet.part} of a {parts}-part frame"
            out.append(self._drop(reason, len(data), packet.body_offset - 4))
            return
        pending = self._pending.get(frame)
        if pending is None:
            while len(self._pending) >= self.max_pending or (
                self._pending and self._pending_bytes + len(data) > self.max_pending_bytes
            ):
                self._give_up(self._oldest())
            pending = self._pending[frame] = _Pending([None] * parts)
        elif len(pending.parts) != parts:
            reason = f"frame {frame}: {parts} parts here, {len(pending.parts)} before"
            out.append(self._drop(reason, len(data)))
            return
        if pending.parts[packet.part] is not None:
            self.stats.extra["duplicate"] += 1
            return
        pending.parts[packet.part] = packet
        pending.received += 1
        pending.size += len(data)
        self._pending_bytes += len(data)
        if pending.received == parts:
            del self._pending[frame]
            self._pending_bytes -= pending.size
            for older in [f for f in self._pending if newer(frame, f)]:
                self._give_up(older)
            self._decode([p for p in pending.parts if p is not None], frame, parts, out)

    def _restarted(self, frame: int, latest: int, out: list[VrspEvent]) -> None:
        """The sender began its frame numbers again under the same instance (restarted with
        the same definition): a new session, not stale frames."""
        self.restarts += 1
        self.latest = None
        self._pending.clear()
        self._pending_bytes = 0
        self.frames.restart()
        self.frames.see(frame - 1 & 0xFFFFFFFF)  # the first of the two that told it
        self.frames.see(frame)
        reason = f"the sender's frame numbers began again ({frame} after {latest})"
        out.append(PeerRestarted(reason=reason))

    def _plausible(self, packet: VrspData) -> bool:
        """Whether a DATA datagram reads sensibly as the profile's framing: a part of its
        frame, whose first record names a defined device with known flags, and whose size
        fits its record count."""
        table = self.table
        assert table is not None
        body, count = packet.body, packet.count
        if packet.part >= packet.parts or not table.definitions:
            return False
        if count == 0:
            return not body
        if len(body) < 15 or body[14] & ~7 or table.index_of[body[0] | body[1] << 8] < 0:
            return False
        low, high = self._sizes
        return count * low <= len(body) <= count * high

    def _oldest(self) -> int:
        frames = list(self._pending)
        oldest = frames[0]
        for f in frames[1:]:
            if newer(oldest, f):
                oldest = f
        return oldest

    def _give_up(self, frame: int) -> None:
        pending = self._pending.pop(frame)
        self._pending_bytes -= pending.size
        self.stats.extra["incomplete"] += 1
        self.stats.extra["fragments_lost"] += len(pending.parts) - pending.received
        self.stats.drop(f"frame {frame} incomplete ({pending.received}/{len(pending.parts)})")

    def _decode(
        self, packets: list[VrspData], frame: int | None, datagrams: int, out: list[VrspEvent]
    ) -> None:
        table = self.table
        assert table is not None
        size = sum(len(p.body) for p in packets)
        try:
            if frame is None:
                swarm = table.decode_implicit(packets[0].body, packets[0].body_offset)
            elif len(packets) == 1:
                p = packets[0]
                swarm = self._decode_one(table, p)
            else:
                body = b"".join(p.body for p in packets)
                swarm = table.decode(body, sum(p.count for p in packets), 0)
        except DecodeError as exc:
            out.append(self._drop(exc.reason, size, exc.offset))
            return
        self._delivered(table, frame, swarm, datagrams, out)

    def _delivered(
        self,
        table: DefinitionTable,
        frame: int | None,
        swarm: Swarm,
        datagrams: int,
        out: list[VrspEvent],
    ) -> None:
        if frame is not None:
            self.latest = frame
        self.stats.messages_in += datagrams
        self.stats.extra["frames"] += 1
        out.append(SwarmFrame(table=table, frame=frame, swarm=swarm, datagrams=datagrams))

    def _decode_one(self, table: DefinitionTable, p: VrspData) -> Swarm:
        try:
            return table.decode(p.body, p.count, p.body_offset)
        except DecodeError as exc:
            if self.framing != "auto":
                raise
            error = exc
        # not the profile's framing after all? the sheet's implicit form, if it decodes
        start = p.body_offset - _FRAME.size  # where the records start without framing
        try:
            return table.decode_implicit(_frame_header(p) + p.body, start)
        except DecodeError:
            raise error from None


_FRAME = struct.Struct("<IHHH")


def _frame_header(p: VrspData) -> bytes:
    """The frame header bytes `p` was read from (to reread them as implicit records)."""
    return _FRAME.pack(p.frame or 0, p.part, p.parts, p.count)


@dataclass(slots=True)
class SenderSession:
    """The sending side of VRSP (see the module docstring)."""

    destination: Address | None = None  # None: the connected peer
    rate: float = 30.0  # DATA frames per second
    def_period: float = 1.0  # seconds between DEF repeats
    max_size: int = DEFAULT_DATAGRAM
    identifier: IdentifierForm = "prefixed"
    rgba: bool = False
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    stats: SessionStats = field(default_factory=SessionStats)
    state: SenderState = SenderState.IDLE
    table: DefinitionTable | None = None
    frame: int = 0  # the next frame's number
    _def_datagrams: list[bytes] = field(default_factory=list)
    _key: tuple[object, ...] | None = None
    _out: list[tuple[bytes, Address | None]] = field(default_factory=list)
    _next_def: float | None = None
    _next_frame: float | None = None

    def __post_init__(self) -> None:
        if not 20 <= self.max_size <= MAX_DATAGRAM:
            raise ValueError(f"datagram size must be 20..{MAX_DATAGRAM}, not {self.max_size}")
        if not 0 < self.rate <= 1000:
            raise ValueError(f"rate must be 0..1000 frames/s, not {self.rate}")

    def _move(self, event: str) -> None:
        self.state = transition(SENDER_TRANSITIONS, self.state, event, "vrsp sender")

    def define(
        self,
        root: tuple[float, float, float],
        blocks: Sequence[tuple[DeviceDefinition, NDArray[np.uint16]]],
        now: float,
    ) -> bool:
        """Set the swarm's definition; True (and a new instance id, and a DEF now) if it
        differs from the current one."""
        key = (root, tuple((d, np.asarray(ids, np.uint16).tobytes()) for d, ids in blocks))
        if key == self._key:
            return False
        self._key = key
        instance = self.rng.getrandbits(32)
        if self.table is not None:
            while instance == self.table.instance:
                instance = self.rng.getrandbits(32)
        self.table = DefinitionTable.build(instance, root, blocks, rgba=self.rgba)
        self._def_datagrams = encode_def(
            instance, root, blocks, max_size=self.max_size, identifier=self.identifier
        )
        self._move("define")
        self._queue(self._def_datagrams)
        self._next_def = now + self.def_period
        if self._next_frame is None:
            self._next_frame = now
        return True

    def start(self, now: float) -> None:
        """Say frames are due from `now` on, before any definition (a sink asks for frames
        until the world has devices to define)."""
        if self._next_frame is None:
            self._next_frame = now

    def tick(self, now: float) -> list[VrspEvent]:
        if self._next_def is not None and now >= self._next_def:
            self._queue(self._def_datagrams)
            self._next_def += self.def_period
            if self._next_def <= now:  # fell behind (a paused process): no burst of DEFs
                self._next_def = now + self.def_period
        events: list[VrspEvent] = []
        if self._next_frame is not None and now >= self._next_frame:
            events.append(FrameDue(frame=self.frame, time=self._next_frame))
            self._next_frame += 1.0 / self.rate
            if self._next_frame <= now:
                self._next_frame = now + 1.0 / self.rate
        return events

    def send(self, swarm: Swarm) -> int:
        """Queue one DATA frame (the next frame number); returns how many datagrams.
        LocalProtocolError before the swarm is defined (`define`)."""
        if self.table is None:
            raise LocalProtocolError(PROTOCOL, "send DATA", self.state.name)
        datagrams = encode_data(
            self.table, swarm, self.frame, max_size=self.max_size, identifier=self.identifier
        )
        self.frame = (self.frame + 1) & 0xFFFFFFFF
        self._queue(datagrams)
        return len(datagrams)

    def _queue(self, datagrams: list[bytes]) -> None:
        destination = self.destination
        self._out.extend((d, destination) for d in datagrams)
        self.stats.messages_out += len(datagrams)
        self.stats.bytes_out += sum(len(d) for d in datagrams)

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[VrspEvent]:
        """VRSP has no replies: anything arriving at the sender is counted and dropped."""
        self.stats.drop("datagram sent to the VRSP sender")
        return [PacketDropped(protocol=PROTOCOL, reason="datagram to the sender", size=len(data))]

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        out, self._out = self._out, []
        return out

    def next_deadline(self) -> float | None:
        times = [t for t in (self._next_def, self._next_frame) if t is not None]
        return min(times) if times else None
