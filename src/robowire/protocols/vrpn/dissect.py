"""A VRPN dissector: captures (pcap/pcapng, raw one-direction streams) to JSON-ready dicts.

Each TCP direction gets its own decoder, which learns that side's sender and type names from
its descriptions, so later messages are shown by name. UDP datagrams are resolved with the
names of the side that sent them: the UDP_DESCRIPTION a side sends on TCP names the port it
receives on, so datagrams to that port come from the other side of that TCP connection.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Iterator
from typing import Any

from robowire.capture import Record, read_capture
from robowire.errors import DecodeError
from robowire.protocols.vrpn.codec import (
    COOKIE_SIZE,
    HEADER_SIZE,
    MAGIC_PREFIX,
    MAX_LENGTH,
    MAX_LOB,
    MAX_REMOTE_ID,
    Frame,
    SystemType,
    decode_cookie,
    decode_frame,
    decode_lob,
)
from robowire.protocols.vrpn.logfile import iter_log, looks_like_log_file, read_file
from robowire.protocols.vrpn.registry import decode_body
from robowire.protocols.vrpn.system import (
    SenderDescription,
    TypeDescription,
    UdpDescription,
    decode_system,
)

RESYNC_STEP = 8
_MAX_BUFFER = 4 * MAX_LENGTH


def jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def _plausible(buf: bytes | bytearray, offset: int) -> bool:
    if len(buf) - offset < HEADER_SIZE:
        return True  # cannot tell yet: wait for more bytes
    length = int.from_bytes(buf[offset : offset + 4], "big")
    type_ = int.from_bytes(buf[offset + 16 : offset + 20], "big", signed=True)
    return HEADER_SIZE <= length <= MAX_LENGTH and -5 <= type_ < MAX_REMOTE_ID


class Names:
    """One side's id -> name tables, learnt from the descriptions it sent."""

    def __init__(self) -> None:
        self.senders: dict[int, str] = {}
        self.types: dict[int, str] = {}


class StreamDecoder:
    """Decodes one direction of a VRPN TCP stream (or a raw stream file) incrementally."""

    def __init__(self, direction: str, names: Names | None = None) -> None:
        self.direction = direction
        self.names = names if names is not None else Names()
        self.udp_ports: list[int] = []  # inbound UDP ports this side announced
        self._buf = bytearray()
        self._offset = 0  # stream offset of _buf[0]
        self._cookie_done = False
        self.errors = 0

    def feed(self, data: bytes, time: float | None = None) -> list[dict[str, Any]]:
        self._buf += data
        out: list[dict[str, Any]] = []
        buf = self._buf
        pos = 0
        if not self._cookie_done:
            if len(buf) < COOKIE_SIZE and MAGIC_PREFIX.startswith(bytes(buf[: len(MAGIC_PREFIX)])):
                return out
            self._cookie_done = True
            if bytes(buf[: len(MAGIC_PREFIX)]) == MAGIC_PREFIX:
                try:
                    cookie = decode_cookie(bytes(buf[:COOKIE_SIZE]))
                    out.append(self._record("cookie", time, 0, jsonable(cookie)))
                except DecodeError as exc:
                    out.append(self._error(exc.reason, exc.offset, time))
                pos = COOKIE_SIZE
        while True:
            try:
                got = decode_frame(buf, pos)
            except DecodeError as exc:
                out.append(self._error(exc.reason, self._offset + exc.offset, time))
                pos = self._resync(buf, pos + RESYNC_STEP)
                continue
            if got is None:
                break
            frame, used = got
            out.append(self.describe(frame, self._offset + pos, time))
            pos += used
        del buf[:pos]
        self._offset += pos
        if len(buf) > _MAX_BUFFER:  # cannot happen with valid lengths; keep memory bounded
            self._offset += len(buf)
            buf.clear()
        return out

    def finish(self) -> list[dict[str, Any]]:
        """At the end of the capture: bytes left over are a truncated message."""
        if not self._buf:
            return []
        left, self._buf = len(self._buf), bytearray()
        return [
            self._error(f"capture ends inside a message ({left} bytes left)", self._offset, None)
        ]

    def _resync(self, buf: bytearray, pos: int) -> int:
        while pos < len(buf) and not _plausible(buf, pos):
            pos += RESYNC_STEP
        return min(pos, len(buf))

    def _record(self, type_: str, time: float | None, offset: int, fields: Any) -> dict[str, Any]:
        record: dict[str, Any] = {
            "type": type_,
            "direction": self.direction,
            "time": time,
            "offset": offset,
        }
        if isinstance(fields, dict):
            record.update(fields)
        return record

    def _error(self, reason: str, offset: int, time: float | None) -> dict[str, Any]:
        self.errors += 1
        return {"error": reason, "offset": offset, "direction": self.direction, "time": time}

    def describe(self, frame: Frame, offset: int, time: float | None) -> dict[str, Any]:
        """One decoded message as a dict; updates the name tables from descriptions."""
        head: dict[str, Any] = {
            "sender_id": frame.sender,
            "type_id": frame.type,
            "msg_time": frame.time,
            "seq": frame.seq,
            "length": HEADER_SIZE + len(frame.body),
        }
        try:
            if frame.type < 0:
                message = decode_system(frame.type, frame.sender, frame.body)
                if isinstance(message, SenderDescription):
                    self.names.senders[message.id] = message.name
                elif isinstance(message, TypeDescription):
                    self.names.types[message.id] = message.name
                elif isinstance(message, UdpDescription):
                    self.udp_ports.append(message.port)
                fields = jsonable(message)
                return self._record(SystemType(frame.type).name, time, offset, {**head, **fields})
            sender = self.names.senders.get(frame.sender)
            type_name = self.names.types.get(frame.type)
            head["sender"] = sender
            if type_name is None:
                return self._record("undescribed", time, offset, {**head, "body": frame.body.hex()})
            body = decode_body(type_name, frame.body)
            fields = {"body": frame.body.hex()} if body is None else jsonable(body)
            return self._record(type_name, time, offset, {**head, **fields})
        except DecodeError as exc:
            return self._error(exc.reason, offset + HEADER_SIZE + exc.offset, time)


def _reverse(flow: str) -> str:
    src, _, dst = flow.partition(">")
    return f"{dst}>{src}"


def decode_records(records: Iterable[Record]) -> Iterator[dict[str, Any]]:
    """Every message of a capture's records, in capture order."""
    streams: dict[str, StreamDecoder] = {}
    for record in records:
        if record.transport == "udp":
            yield from _decode_udp(record, streams)
            continue
        decoder = streams.get(record.flow)
        if decoder is None:
            decoder = streams[record.flow] = StreamDecoder(record.flow)
        yield from decoder.feed(record.data, record.time)
    for decoder in streams.values():
        yield from decoder.finish()


def _names_for_udp(record: Record, streams: dict[str, StreamDecoder]) -> Names:
    port = record.dst[1] if record.dst else None
    for flow, decoder in streams.items():
        if port in decoder.udp_ports:  # that side receives on this port: the other side sent
            other = streams.get(_reverse(flow))
            if other is not None:
                return other.names
    src_host = record.src[0] if record.src else ""
    for flow, decoder in streams.items():
        if flow.startswith(src_host + ":") and decoder.names.types:
            return decoder.names
    return Names()


def looks_like_lob(data: bytes) -> bool:
    """A connection request is short printable 'host port' text ending in one NUL."""
    text = data[:-1]
    return (
        data.endswith(b"\0")
        and 3 <= len(data) <= MAX_LOB
        and b" " in text
        and all(0x20 < c < 0x7F or c == 0x20 for c in text)
    )


def _decode_udp(record: Record, streams: dict[str, StreamDecoder]) -> Iterator[dict[str, Any]]:
    data = record.data
    base = {"direction": record.flow, "time": record.time}
    if looks_like_lob(data):
        try:
            host, port = decode_lob(data)
        except DecodeError as exc:
            yield {"error": exc.reason, "offset": exc.offset, **base}
            return
        yield {"type": "connection_request", **base, "offset": 0, "host": host, "port": port}
        return
    decoder = StreamDecoder(record.flow, _names_for_udp(record, streams))
    decoder._cookie_done = True
    offset = 0
    while offset < len(data):
        try:
            got = decode_frame(data, offset)
        except DecodeError as exc:
            yield {"error": exc.reason, "offset": exc.offset, **base}
            return
        if got is None:
            yield {"error": "truncated message in datagram", "offset": offset, **base}
            return
        frame, used = got
        yield decoder.describe(frame, offset, record.time)
        offset += used


def decode_log(path: str) -> Iterator[dict[str, Any]]:
    """Every message of a VRPN log file (`logfile`): the cookie, then each entry at its file
    offset, named with the descriptions logged before it. Damage gives one error line (offset
    and reason) after the whole entries, and ends there."""
    data = read_file(path)
    decoder = StreamDecoder("log")
    try:
        cookie = decode_cookie(data[:COOKIE_SIZE])
        yield decoder._record("cookie", None, 0, jsonable(cookie))
        for offset, frame in iter_log(data):
            yield decoder.describe(frame, offset, frame.time)
    except DecodeError as exc:
        yield {"error": exc.reason, "offset": exc.offset}


def decode_capture(path: str) -> Iterator[dict[str, Any]]:
    """`robowire decode vrpn FILE`: every message of a pcap/pcapng capture, of a raw
    one-direction stream, or of a VRPN log file (`.vrpn`). A capture cut short gives every
    whole record's messages, then one error line (offset and reason), and ends there."""
    if looks_like_log_file(path):
        yield from decode_log(path)
        return
    cut: list[DecodeError] = []

    def whole_records() -> Iterator[Record]:
        try:
            yield from read_capture(path)
        except DecodeError as exc:
            cut.append(exc)

    yield from decode_records(whole_records())
    for exc in cut:
        yield {"error": exc.reason, "offset": exc.offset}
