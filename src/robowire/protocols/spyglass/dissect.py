"""`robowire decode spyglass FILE`: every packet of a capture as one JSON-ready dict.

Inputs: SpyGlass `.rec` recordings (by extension, or recognised by their first bytes), pcap /
pcapng captures (TCP reassembled per direction, then split into self-delimited packets; a UDP
datagram is one packet) and raw self-delimited byte streams ("-" = stdin).

Bad bytes give `{"error": reason, "offset": n}` and decoding goes on: in a `.rec` with the next
record; in a stream, a payload error drops one packet, while a broken header means the framing
is lost, which is said once, and the rest of that flow is skipped. A file cut inside its last
record (`.rec`) or frame (pcap) gives every whole one, then one error line, and ends there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from robowire.capture import Record
from robowire.errors import DecodeError
from robowire.protocols.spyglass.codec import (
    DEFAULT_PROFILE,
    VERSION,
    Packet,
    SemanticProfile,
    SyntaxType,
    decode,
    decode_batch,
    split,
    syntax_type_of,
)
from robowire.protocols.spyglass.rec import capture_records, iter_rec, sniff

_HEADER_FIELDS = ("semantic_type", "sender", "seconds", "milliseconds", "x", "y", "z")


def _json_value(value: Any) -> Any:
    if isinstance(value, SyntaxType):
        return value.name.lower()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple | list):
        return [_json_value(v) for v in value]
    return value


def packet_fields(packet: Packet, size: int | None = None) -> dict[str, Any]:
    """Every header and payload field of a packet, JSON-ready (wire units; bytes as hex)."""
    out: dict[str, Any] = {}
    if size is not None:
        out["length"] = size - 2
    out["version"] = VERSION
    out["syntax_type"] = syntax_type_of(packet).name.lower()
    for name in _HEADER_FIELDS:
        out[name] = getattr(packet, name)
    out["packet_time"] = packet.time
    for spec in dataclasses.fields(packet):
        if spec.name not in _HEADER_FIELDS and spec.name != "syntax_type":
            out[spec.name] = _json_value(getattr(packet, spec.name))
    return out


def _packet_dict(packet: Packet, offset: int, size: int, extra: dict[str, Any]) -> dict[str, Any]:
    return {"type": packet.TYPE, **extra, "offset": offset, **packet_fields(packet, size)}


def _error(reason: str, offset: int, extra: dict[str, Any]) -> dict[str, Any]:
    return {"error": reason, "offset": offset, **extra}


def decode_capture(
    path: str, *, profile: SemanticProfile = DEFAULT_PROFILE
) -> Iterator[dict[str, Any]]:
    """One dict per packet (or per error) of a `.rec`, pcap/pcapng or raw stream file."""
    kind, head = sniff(path)
    if kind == "rec":
        yield from decode_rec(path, profile=profile, head=head)
        return
    records = capture_records(path, kind, head)
    try:
        yield from _decode_records(records, profile)
    except DecodeError as exc:  # the capture is cut or damaged here: say so once and stop
        yield _error(exc.reason, exc.offset, {})


def decode_rec(
    path: str, *, profile: SemanticProfile = DEFAULT_PROFILE, head: bytes = b""
) -> Iterator[dict[str, Any]]:
    """The records of a `.rec` file; `offset` is the record's offset (its size byte).

    `head`: bytes `sniff` already read from the start of stdin."""
    records = iter_rec(path, head=head)
    while True:
        try:
            entry = next(records)
        except StopIteration:
            return
        except DecodeError as exc:  # the file ends inside a record
            yield _error(exc.reason, exc.offset, {})
            return
        try:
            entry.check()
        except DecodeError as exc:
            yield _error(exc.reason, exc.offset, {})
            continue
        try:
            packet = decode(entry.data, profile=profile)
        except DecodeError as exc:
            yield _error(exc.reason, entry.offset + 1 + exc.offset, {})
            continue
        yield _packet_dict(packet, entry.offset, len(entry.data), {})


@dataclass(slots=True)
class _Flow:
    """One direction of a stream: bytes not yet decoded and where they start."""

    buffer: bytearray = field(default_factory=bytearray)
    base: int = 0
    need: int = 4
    lost: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _decode_records(
    records: Iterator[Record], profile: SemanticProfile
) -> Iterator[dict[str, Any]]:
    flows: dict[str, _Flow] = {}
    for record in records:
        extra: dict[str, Any] = {}
        if record.transport != "stream":
            extra["direction"] = record.direction
        if record.time is not None:
            extra["time"] = record.time
        flow = flows.get(record.flow)
        if flow is None:
            flow = flows[record.flow] = _Flow()
        if record.transport == "udp":
            yield from _datagram(record.data, flow, extra, profile)
        else:
            flow.extra = extra
            yield from _stream(record.data, flow, extra, profile)
    for flow in flows.values():
        if flow.buffer and not flow.lost:
            reason = f"capture ended inside a packet ({len(flow.buffer)} bytes)"
            yield _error(reason, flow.base, flow.extra)


def _datagram(
    data: bytes, flow: _Flow, extra: dict[str, Any], profile: SemanticProfile
) -> Iterator[dict[str, Any]]:
    offset = flow.base
    flow.base += len(data)
    try:
        packet = decode(data, profile=profile)
    except DecodeError as exc:
        yield _error(exc.reason, offset + exc.offset, extra)
        return
    yield _packet_dict(packet, offset, len(data), extra)


def _stream(
    data: bytes, flow: _Flow, extra: dict[str, Any], profile: SemanticProfile
) -> Iterator[dict[str, Any]]:
    if flow.lost:
        return
    flow.buffer += data
    if len(flow.buffer) < flow.need:
        return
    whole = bytes(flow.buffer)
    starts, end, error = split(whole)
    items = decode_batch(whole, starts, end, profile=profile)
    for i, item in enumerate(items):
        if isinstance(item, DecodeError):
            yield _error(item.reason, flow.base + item.offset, extra)
        else:
            stop = starts[i + 1] if i + 1 < len(starts) else end
            yield _packet_dict(item, flow.base + starts[i], stop - starts[i], extra)
    del flow.buffer[:end]
    flow.base += end
    if error is not None:
        reason = f"framing lost, rest of this stream skipped: {error.reason}"
        yield _error(reason, flow.base + error.offset - end, extra)
        flow.lost = True
        flow.buffer.clear()
        return
    buffer = flow.buffer
    flow.need = (((buffer[0] << 8) | buffer[1]) + 2) if len(buffer) >= 4 else 4
