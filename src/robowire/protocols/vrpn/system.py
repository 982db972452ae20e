"""VRPN system messages: negative types the connection itself handles (fact sheet §5).

The header's sender field carries an id here (the sender or type being described, a UDP
port, a log mode), so `decode` takes it with the body.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar, Self

from robowire.errors import DecodeError
from robowire.protocols.vrpn.codec import PROTOCOL, SystemType, decode_name, encode_name
from robowire.protocols.vrpn.messages import _need

# -- system messages (negative types; the header's sender field carries an id) ----------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _NameDescription:
    """A name given to an id (the header's sender field): what both descriptions carry."""

    WIRE_NAME: ClassVar[str]
    TYPE: ClassVar[int]
    id: int
    name: str

    @property
    def header_sender(self) -> int:
        return self.id

    def encode(self) -> bytes:
        return encode_name(self.name)

    @classmethod
    def decode(cls, sender: int, body: bytes) -> Self:
        return cls(id=sender, name=decode_name(body))


@dataclass(frozen=True, slots=True, kw_only=True)
class SenderDescription(_NameDescription):
    WIRE_NAME: ClassVar[str] = "SENDER_DESCRIPTION"
    TYPE: ClassVar[int] = SystemType.SENDER_DESCRIPTION


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeDescription(_NameDescription):
    WIRE_NAME: ClassVar[str] = "TYPE_DESCRIPTION"
    TYPE: ClassVar[int] = SystemType.TYPE_DESCRIPTION


@dataclass(frozen=True, slots=True, kw_only=True)
class UdpDescription:
    WIRE_NAME: ClassVar[str] = "UDP_DESCRIPTION"
    TYPE: ClassVar[int] = SystemType.UDP_DESCRIPTION
    port: int
    host: str

    @property
    def header_sender(self) -> int:
        return self.port

    def encode(self) -> bytes:
        return self.host.encode("ascii") + b"\0"

    @classmethod
    def decode(cls, sender: int, body: bytes) -> Self:
        if not 0 < sender < 65536:
            raise DecodeError(PROTOCOL, 12, f"UDP description port {sender} is not a port")
        raw = body.split(b"\0", 1)[0]
        if not raw or len(raw) > 64:
            raise DecodeError(PROTOCOL, 0, "UDP description has no usable host")
        return cls(port=sender, host=raw.decode("ascii", "replace"))


_LOG_HEAD = struct.Struct(">ii")


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDescription:
    WIRE_NAME: ClassVar[str] = "LOG_DESCRIPTION"
    TYPE: ClassVar[int] = SystemType.LOG_DESCRIPTION
    mode: int
    incoming_name: str = ""
    outgoing_name: str = ""

    @property
    def header_sender(self) -> int:
        return self.mode

    def encode(self) -> bytes:
        a, b = self.incoming_name.encode(), self.outgoing_name.encode()
        return _LOG_HEAD.pack(len(a), len(b)) + a + b"\0" + b + b"\0"

    @classmethod
    def decode(cls, sender: int, body: bytes) -> Self:
        _need(body, 10, cls.WIRE_NAME)
        a, b = _LOG_HEAD.unpack_from(body)
        if a < 0 or b < 0 or 8 + a + b + 2 > len(body):
            raise DecodeError(PROTOCOL, 0, f"log description names ({a}, {b}) do not fit")
        incoming = body[8 : 8 + a].decode("utf-8", "replace")
        outgoing = body[9 + a : 9 + a + b].decode("utf-8", "replace")
        return cls(mode=sender, incoming_name=incoming, outgoing_name=outgoing)


@dataclass(frozen=True, slots=True, kw_only=True)
class DisconnectMessage:
    WIRE_NAME: ClassVar[str] = "DISCONNECT_MESSAGE"
    TYPE: ClassVar[int] = SystemType.DISCONNECT_MESSAGE

    @property
    def header_sender(self) -> int:
        return 0

    def encode(self) -> bytes:
        return b""

    @classmethod
    def decode(cls, sender: int, body: bytes) -> Self:
        return cls()


SystemMessage = (
    SenderDescription | TypeDescription | UdpDescription | LogDescription | DisconnectMessage
)
SYSTEM_TYPES: dict[int, type[SystemMessage]] = {
    cls.TYPE: cls
    for cls in (
        SenderDescription,
        TypeDescription,
        UdpDescription,
        LogDescription,
        DisconnectMessage,
    )
}


def decode_system(type_: int, sender: int, body: bytes) -> SystemMessage:
    cls = SYSTEM_TYPES.get(type_)
    if cls is None:
        raise DecodeError(PROTOCOL, 16, f"unknown system message type {type_}")
    return cls.decode(sender, body)
