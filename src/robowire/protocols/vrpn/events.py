"""Events a VRPN session returns besides the shared PacketDropped / ConnectionLost."""

from __future__ import annotations

from dataclasses import dataclass

from robowire.protocols.vrpn.codec import Cookie, Frame
from robowire.protocols.vrpn.messages import Body

# -- events --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Connected:
    """The peer's cookie was accepted; descriptions went out."""

    cookie: Cookie


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageReceived:
    """One user message from the peer, with names resolved through its descriptions.

    `message` is the typed body, or the raw Frame for a type robowire does not know.
    """

    sender: str
    type: str
    message: Body | Frame
    time: float  # the sender's header timestamp, Unix seconds
    channel: str  # "tcp" or "udp"
    order: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Described:
    """The peer described one of its senders or types (name first seen or renamed)."""

    kind: str  # "sender" or "type"
    id: int
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PongReceived:
    sender: str
    round_trip: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerSilent:
    """No pong for a while: a warning (VRPN clients print one after 3 s)."""

    seconds: float
