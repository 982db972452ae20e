"""A UCS written for the tests from the fact sheet alone (ugcs.md 1.2-3.4): raw asyncio streams,
frames built with the protobuf runtime, no robowire session code."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2 as defs
from robowire.protocols.ugcs.proto import ucs_vsm_pb2 as pb

OK = 0
INVALID_COMMAND = 2
SERVER = 0


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def frame(msg: pb.Vsm_message) -> bytes:
    payload = msg.SerializeToString()
    return varint(len(payload)) + payload


class RawUcs:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.next_id = 1000

    @classmethod
    async def connect(cls, host: str, port: int) -> RawUcs:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def read(self, timeout: float = 10.0) -> pb.Vsm_message:
        """One frame: the length one byte at a time, like the SDK's reader."""
        size = shift = 0
        while True:
            (byte,) = await asyncio.wait_for(self.reader.readexactly(1), timeout)
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        payload = await asyncio.wait_for(self.reader.readexactly(size), timeout)
        return pb.Vsm_message.FromString(payload)

    async def read_until(
        self, want: Callable[[pb.Vsm_message], bool], timeout: float = 10.0
    ) -> pb.Vsm_message:
        """The next message for which `want(msg)` is true (others are skipped)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            msg = await self.read(max(0.01, end - loop.time()))
            if want(msg):
                return msg

    def send(self, msg: pb.Vsm_message) -> None:
        self.writer.write(frame(msg))

    def register_peer(self, major: int = 4, minor: int = 4, peer_id: int = 0x5EED) -> None:
        msg = pb.Vsm_message(device_id=0)
        msg.register_peer.peer_id = peer_id
        msg.register_peer.peer_type = defs.Peer_type.ValueType(SERVER)
        msg.register_peer.version_major = major
        msg.register_peer.version_minor = minor
        msg.register_peer.version_build = "test"
        msg.register_peer.name = "raw ucs"
        self.send(msg)

    def ack(self, device_id: int, message_id: int, code: int = OK) -> None:
        msg = pb.Vsm_message(device_id=device_id, message_id=message_id)
        msg.device_response.code = defs.Status_code.ValueType(code)
        self.send(msg)

    def ping(self) -> int:
        self.next_id += 1
        self.send(pb.Vsm_message(device_id=0, message_id=self.next_id, response_required=True))
        return self.next_id

    def command(
        self, device_id: int, command_id: int, params: dict[int, float | None] | None = None
    ) -> int:
        self.next_id += 1
        msg = pb.Vsm_message(device_id=device_id, message_id=self.next_id, response_required=True)
        dc = msg.device_commands.add(command_id=command_id)
        for field_id, value in (params or {}).items():
            p = dc.parameters.add(field_id=field_id)
            if value is None:
                p.value.meta_value = defs.META_VALUE_NA
            else:
                p.value.double_value = value
        self.send(msg)
        return self.next_id

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()
