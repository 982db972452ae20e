"""What every protocol package shares: the sans-I/O session contract and its common events.

A session is a state machine. The driver (transport/) gives it bytes or datagrams and the
current monotonic time, then asks what to send and when to call `tick` next:

    events = session.feed(data, now)          # stream sessions (TCP)
    events = session.feed_datagram(d, addr, now)   # datagram sessions (UDP)
    events += session.tick(now)               # at or after next_deadline()
    out = session.data_to_send()              # bytes / datagrams to write, possibly empty

`feed` never raises on bad bytes: it counts the error in `stats`, returns a `PacketDropped`
event and goes on (or, where the stream cannot resync, returns `ConnectionLost` and sets
`close_expected()`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

Address = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class PacketDropped:
    """Bytes that did not decode, or a message that broke the session's rules; counted, dropped."""

    protocol: str
    reason: str
    offset: int = 0
    size: int = 0

    def __str__(self) -> str:
        return f"{self.protocol}: dropped {self.size} bytes: {self.reason} (at byte {self.offset})"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionLost:
    """The session wants its connection closed (peer broke the protocol, or said goodbye)."""

    reason: str


@dataclass(slots=True)
class SessionStats:
    """Counters every session keeps; sources expose them and the CLI shows them."""

    messages_in: int = 0
    messages_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    dropped: int = 0
    last_drop_reason: str = ""
    extra: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str) -> None:
        self.dropped += 1
        self.last_drop_reason = reason


class StreamSession(Protocol):
    """A session over one byte stream (one TCP connection)."""

    stats: SessionStats

    def feed(self, data: bytes, now: float) -> list[object]:
        """Bytes received; returns the events they complete. Never raises on bad bytes."""
        ...

    def feed_eof(self, now: float) -> list[object]:
        """The peer closed its side."""
        ...

    def tick(self, now: float) -> list[object]:
        """Time passed; run timers (keep-alives, watchdogs, periodic sends)."""
        ...

    def data_to_send(self) -> bytes:
        """Bytes to write now (empty if none). The caller writes them in order."""
        ...

    def next_deadline(self) -> float | None:
        """Monotonic time at which `tick` should next be called, or None."""
        ...

    def close_expected(self) -> bool:
        """True once the session wants the connection closed."""
        ...


class DatagramSession(Protocol):
    """A session over datagrams (UDP)."""

    stats: SessionStats

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[object]:
        """One datagram received from `addr`. Never raises on bad bytes."""
        ...

    def tick(self, now: float) -> list[object]: ...

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        """Datagrams to send now, each with its destination (None = the connected peer)."""
        ...

    def next_deadline(self) -> float | None: ...
