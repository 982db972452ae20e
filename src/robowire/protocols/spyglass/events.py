"""What a SpyGlass session tells its driver: a decoded packet, or one of the shared events.

SpyGlass has one message kind on the wire (the packet; what it means is the packet class), so
the union is short: `PacketsReceived` per read (the whole packets it completed, as columns: the
hot path, no object per packet), `PacketReceived` for one typed packet (what code that builds
packets hands an adapter), `PacketDropped` per packet (or broken header) that did not decode,
and `ConnectionLost` when the framing is gone or the peer closed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

from robowire.protocols.spyglass.codec import Packet, PacketColumns
from robowire.wire import ConnectionLost, PacketDropped, Report


@dataclass(frozen=True, slots=True, kw_only=True)
class PacketReceived(Report):
    """One decoded packet and the (monotonic) time the driver gave with its last byte (a
    `Report`: a newer packet of the same node, class and semantic type, to the same node for a
    link, makes it stale)."""

    packet: Packet
    time: float

    def covers(self) -> tuple[object, ...]:
        packet = self.packet
        return packet.sender, type(packet), packet.semantic_type, getattr(packet, "destination", 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class PacketsReceived:
    """The whole packets of one read as columns (`PacketColumns`), and the (monotonic) time the
    driver gave with them. Not a `Report`: two reads rarely hold the same nodes' packets, and a
    gateway that is behind writes what waited as one delivery anyway."""

    packets: PacketColumns
    time: float

    def __len__(self) -> int:
        return len(self.packets)


SpyglassEvent: TypeAlias = PacketsReceived | PacketReceived | PacketDropped | ConnectionLost


def packets_of(events: Iterable[object]) -> list[Packet]:
    """Every packet of `events` as a typed object, in order (the slow form, for tools/tests)."""
    out: list[Packet] = []
    for event in events:
        if isinstance(event, PacketsReceived):
            out += event.packets.packets()
        elif isinstance(event, PacketReceived):
            out.append(event.packet)
    return out


__all__ = [
    "ConnectionLost",
    "PacketDropped",
    "PacketReceived",
    "PacketsReceived",
    "SpyglassEvent",
    "packets_of",
]
