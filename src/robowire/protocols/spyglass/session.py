"""The sans-I/O session of one SpyGlass byte stream (a TCP connection, or a replayed file).

SpyGlass has no handshake and no replies: the stream is packets back to back, each delimited by
its own uint16 length field. Both roles use the same `SpyglassSession`:

* receiving (a source): `feed(data, now)` returns one `PacketsReceived` with the whole packets
  the bytes completed, as columns (`codec.decode_columns`). A packet whose
  header is broken (wrong version, unknown syntax type, impossible length) means the framing
  can no longer be trusted: `PacketDropped`, then `ConnectionLost`, and `close_expected()`
  turns True. A packet whose header is fine but whose payload does not fit its syntax or
  semantic type is dropped on its own (`PacketDropped`) and the stream goes on.
* sending (a server / sink / simulator): `send(packet)` or `send_encoded(data)`, then the
  driver writes `data_to_send()`; a send once CLOSED raises `LocalProtocolError`. Peers
  never answer, so whatever they send is decoded and can be ignored.

States (all state logic is here, in `TRANSITIONS`; every change goes through `_move`):

    OPEN --framing lost--> CLOSED
    OPEN --peer EOF------> CLOSED

The session reads no options and no clock: the caller builds it with a profile and a size
limit (services.py parses those from URLs) and passes `now` in.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from robowire.errors import LocalProtocolError
from robowire.protocols.spyglass.codec import (
    DEFAULT_PROFILE,
    HEADER_SIZE,
    MAX_PACKET_SIZE,
    NAME,
    SemanticProfile,
    SpyglassPacket,
    decode_columns,
    encode,
    split,
)
from robowire.protocols.spyglass.events import PacketsReceived, SpyglassEvent
from robowire.wire import ConnectionLost, PacketDropped, SessionStats, transition


class State(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"


class Trigger(enum.Enum):
    FRAMING_LOST = "framing lost"
    EOF = "eof"


TRANSITIONS: dict[State, dict[Trigger, State]] = {
    State.OPEN: {Trigger.FRAMING_LOST: State.CLOSED, Trigger.EOF: State.CLOSED},
    State.CLOSED: {},  # nothing moves a closed session: later bytes and EOFs are ignored
}


class SpyglassSession:
    """One SpyGlass stream, either direction (see the module docstring)."""

    def __init__(
        self, *, profile: SemanticProfile = DEFAULT_PROFILE, max_size: int = MAX_PACKET_SIZE
    ) -> None:
        if not HEADER_SIZE <= max_size <= MAX_PACKET_SIZE:
            raise ValueError(f"max_size must be within {HEADER_SIZE}..{MAX_PACKET_SIZE}")
        self.profile = profile
        self.max_size = max_size
        self.state = State.OPEN
        self.stats = SessionStats()
        self._buffer = bytearray()
        self._buffer_offset = 0  # stream offset of _buffer[0]
        self._need = 4  # bytes the buffer must hold before it is worth splitting again
        self._out: list[bytes] = []
        self.close_reason = ""

    # -- receiving ---------------------------------------------------------------------------

    def feed(self, data: bytes, now: float) -> list[SpyglassEvent]:
        """Bytes received; returns PacketsReceived / PacketDropped / ConnectionLost events."""
        self.stats.bytes_in += len(data)
        if self.state is State.CLOSED or not data:
            return []
        buffer = self._buffer
        buffer += data
        if len(buffer) < self._need:
            return []
        whole = bytes(buffer)
        starts, end, error = split(whole, 0, max_size=self.max_size)
        events: list[SpyglassEvent] = []
        if starts:
            packets, drops = decode_columns(whole, starts, end, profile=self.profile)
            base = self._buffer_offset
            for start, stop, exc in drops:
                self.stats.drop(exc.reason)
                events.append(
                    PacketDropped(
                        protocol=NAME,
                        reason=exc.reason,
                        offset=base + exc.offset,
                        size=stop - start,
                    )
                )
            if len(packets):
                events.append(PacketsReceived(packets=packets, time=now))
                self.stats.messages_in += len(packets)
        del buffer[:end]
        self._buffer_offset += end
        if error is not None:
            self.stats.drop(error.reason)
            self.stats.extra["framing_lost"] = self.stats.extra.get("framing_lost", 0) + 1
            events.append(
                PacketDropped(
                    protocol=NAME,
                    reason=error.reason,
                    offset=self._buffer_offset + error.offset - end,
                    size=len(buffer),
                )
            )
            self._lose(f"SpyGlass stream framing lost: {error.reason}")
            events.append(ConnectionLost(reason=self.close_reason))
            return events
        self._need = (((buffer[0] << 8) | buffer[1]) + 2) if len(buffer) >= 4 else 4
        return events

    def feed_eof(self, now: float) -> list[SpyglassEvent]:
        """The peer closed its side; a packet cut off there is dropped."""
        events: list[SpyglassEvent] = []
        if self.state is State.OPEN and self._buffer:
            reason = f"stream ended inside a packet ({len(self._buffer)} bytes buffered)"
            self.stats.drop(reason)
            events.append(
                PacketDropped(
                    protocol=NAME,
                    reason=reason,
                    offset=self._buffer_offset,
                    size=len(self._buffer),
                )
            )
        if self.state is State.OPEN:
            self._move(Trigger.EOF)
            self.close_reason = "peer closed the stream"
            events.append(ConnectionLost(reason=self.close_reason))
        self._buffer.clear()
        return events

    def _lose(self, reason: str) -> None:
        self._move(Trigger.FRAMING_LOST)
        self.close_reason = reason
        self._buffer.clear()

    def _move(self, trigger: Trigger) -> None:
        self.state = transition(TRANSITIONS, self.state, trigger, "spyglass")

    # -- sending -----------------------------------------------------------------------------

    def send(self, packet: SpyglassPacket) -> None:
        """Queue one packet (ValueError if it cannot be encoded or exceeds max_size)."""
        data = encode(packet)
        if len(data) > self.max_size:
            raise ValueError(f"packet of {len(data)} bytes exceeds the limit of {self.max_size}")
        self._queue(data)

    def send_many(self, packets: Iterable[SpyglassPacket]) -> None:
        for packet in packets:
            self.send(packet)

    def send_encoded(self, data: bytes) -> None:
        """Queue bytes that are already one or more whole encoded packets (from `encode`)."""
        self._queue(data)

    def _queue(self, data: bytes) -> None:
        if self.state is not State.OPEN:  # the driver is closing the socket: a caller's bug
            raise LocalProtocolError(NAME, "send", self.state.name)
        self._out.append(data)
        self.stats.messages_out += 1
        self.stats.bytes_out += len(data)

    def data_to_send(self) -> bytes:
        """Bytes to write now, in order (empty if none)."""
        out = b"".join(self._out)
        self._out.clear()
        return out

    # -- timers and lifetime -----------------------------------------------------------------

    def tick(self, now: float) -> list[SpyglassEvent]:
        """SpyGlass has no timers."""
        return []

    def next_deadline(self) -> float | None:
        return None

    def close_expected(self) -> bool:
        """True once the framing was lost or the peer closed: the driver closes the socket."""
        return self.state is State.CLOSED
