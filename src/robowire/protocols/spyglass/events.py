"""What a SpyGlass session tells its driver: a decoded packet, or one of the shared events.

SpyGlass has one message kind on the wire (the packet; what it means is the packet class), so
the union is short: `PacketReceived` per whole packet, `PacketDropped` per packet (or broken
header) that did not decode, and `ConnectionLost` when the framing is gone or the peer closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from robowire.protocols.base import ConnectionLost, PacketDropped, Report
from robowire.protocols.spyglass.codec import Packet


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


SpyglassEvent: TypeAlias = PacketReceived | PacketDropped | ConnectionLost

__all__ = ["ConnectionLost", "PacketDropped", "PacketReceived", "SpyglassEvent"]
