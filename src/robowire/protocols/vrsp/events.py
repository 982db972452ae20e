"""The VRSP sessions' typed events.

Receiver (`session.ReceiverSession`):

* `DefinitionReceived`: a VRSP_DEF was taken in and the definition table changed: a new
  instance (`new` True: the old table is gone) or another part of the same instance.
* `SwarmFrame`: one whole DATA frame (every datagram of it), decoded into columns.

Sender (`session.SenderSession`):

* `FrameDue`: the time for the next DATA frame has come; the driver answers with
  `SenderSession.send(swarm)`.

Both emit the shared `PacketDropped` (the receiver for bad or stale datagrams). VRSP is UDP
with no connection, so `ConnectionLost` is never emitted; it is in the union because every
protocol's is.
"""

from __future__ import annotations

from dataclasses import dataclass

from robowire.protocols.vrsp.codec import DefinitionTable
from robowire.protocols.vrsp.definitions import Swarm
from robowire.sequence import PeerRestarted
from robowire.wire import ConnectionLost, PacketDropped, Report

__all__ = [
    "ConnectionLost",
    "DefinitionReceived",
    "FrameDue",
    "PacketDropped",
    "SwarmFrame",
    "VrspEvent",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class DefinitionReceived:
    """The definition table of `table.instance` is now `table` (`new`: a new instance)."""

    table: DefinitionTable
    new: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SwarmFrame(Report):
    """A whole DATA frame: `swarm` row i is device `swarm.ids[i]` (layout: `table`).
    `frame` is None for the sheet's implicit DATA (no frame number). A newer frame makes it
    stale (a `Report`: a busy gateway may shed it)."""

    table: DefinitionTable
    frame: int | None
    swarm: Swarm
    datagrams: int

    def message_count(self) -> int:
        return self.datagrams

    def __len__(self) -> int:
        return len(self.swarm.ids)


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameDue:
    """The sender's next DATA frame is due (`frame` is its number, `time` its due time)."""

    frame: int
    time: float


VrspEvent = (
    DefinitionReceived | SwarmFrame | FrameDue | PacketDropped | ConnectionLost | PeerRestarted
)
