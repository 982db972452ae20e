"""What every session shares: the session contract, and the events every session can emit.

This is the lowest layer of robowire's protocol side: codecs, events and sessions import it,
and so do the transport drivers that run sessions on sockets. It imports nothing of robowire
but the standard library, so that a session can never reach up into the gateway.

**The session contract.** A session is a sans-I/O state machine. The driver (transport/) gives
it bytes or datagrams and the current monotonic time, then asks what to send and when to call
`tick` next:

    events = session.feed(data, now)               # stream sessions (TCP)
    events = session.feed_datagram(d, addr, now)   # datagram sessions (UDP)
    events = session.feed_datagrams(batch, now)    # ... that take a wake-up's datagrams at once
    events += session.tick(now)                    # at or after next_deadline()
    out = session.data_to_send()                   # bytes / datagrams to write, possibly empty

Each protocol has its own typed event union (`protocols/<name>/events.py`), which includes the
two shared events below. `feed` never raises on bad bytes: it counts the error in `stats`,
returns a `PacketDropped` event and goes on (or, where the stream cannot resync, returns
`ConnectionLost` and sets `close_expected()`).

**The adapter contract.** An adapter is bound to the world and its source name when it is
built; `apply(events, receive_time)` writes what the events say into the world and returns how
many protocol messages it took in. The world -> wire direction (what sinks send) lives in the
same module.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

Address = tuple[str, int]

SITE = (56.9496, 24.1052, 10.0)
"""Where every simulator puts its devices unless told otherwise (lat deg, lon deg, alt m WGS84:
Riga's old town, our choice): the UgCS vehicles park there, the VRSP show stands on it, and
sinks place ENU devices about it, so that everything `robowire demo` runs is on one map."""

E = TypeVar("E")
E_contra = TypeVar("E_contra", contravariant=True)


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


class Report:
    """Marks an event class whose events each state the latest state of what they cover (a
    whole swarm, one robot, some sensors): a newer event of the same class from the same
    source that covers the same (`covers`) makes an older one stale, so the overload policy
    may shed it (`robowire.transport.budget`)."""

    __slots__ = ()

    def covers(self) -> Hashable:
        """What the report states in full (None: all its class covers, e.g. a whole swarm)."""
        return None

    def message_count(self) -> int:
        """The messages it counts as in a source's `messages_in` (its adapter's count), so
        that one shed is still counted as received."""
        return 1


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


class StreamSession(Protocol[E]):
    """A session over one byte stream (one TCP connection)."""

    stats: SessionStats

    def feed(self, data: bytes, now: float) -> list[E]:
        """Bytes received; returns the events they complete. Never raises on bad bytes."""
        ...

    def feed_eof(self, now: float) -> list[E]:
        """The peer closed its side."""
        ...

    def tick(self, now: float) -> list[E]:
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


class DatagramSession(Protocol[E]):
    """A session over datagrams (UDP)."""

    stats: SessionStats

    def feed_datagram(self, data: bytes, addr: Address, now: float) -> list[E]:
        """One datagram received from `addr`. Never raises on bad bytes."""
        ...

    def tick(self, now: float) -> list[E]: ...

    def datagrams_to_send(self) -> list[tuple[bytes, Address | None]]:
        """Datagrams to send now, each with its destination (None = the connected peer)."""
        ...

    def next_deadline(self) -> float | None: ...


@runtime_checkable
class BatchDatagramSession(DatagramSession[E], Protocol[E]):
    """A datagram session that decodes every datagram of one wake-up as one batch (one
    vectorised decode, one delivery): the UDP driver hands it the list whole."""

    def feed_datagrams(self, datagrams: Sequence[tuple[bytes, Address]], now: float) -> list[E]:
        """The datagrams read in one wake-up, in order, with their senders. Never raises on
        bad bytes."""
        ...


class Adapter(Protocol[E_contra]):
    """Session events -> world updates, for one source (the world is bound at construction)."""

    def apply(self, events: Sequence[E_contra], receive_time: float) -> int:
        """Write what `events` say into the world; returns how many messages were taken in."""
        ...
