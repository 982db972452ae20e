"""`robowire decode xrp FILE`: every datagram of a capture as one JSON-ready dict, and the
capture reader the file source shares.

Inputs: pcap/pcapng (UDP datagrams; direction from the ports: to port 3540 is "W>R", the
WPILib side to the robot, from port 3540 is "R>W"), or the text form of the shared captures,
one datagram a line: `<time> <W>R|R>W> <length> <hex>`. A text line that is not a datagram is
a `DecodeError` handed to `on_error` (a dissector error line, a file source's counted drop),
and reading goes on; a pcap cut part-way is one error after every whole datagram.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

from robowire.capture import Record, is_pcap, open_input, read_pcap
from robowire.errors import DecodeError
from robowire.protocols.xrp.codec import (
    DEFAULT_PORT,
    PROTOCOL,
    Packet,
    block_to_json,
    decode_packet,
)

TO_ROBOT = "W>R"
TO_WPILIB = "R>W"
MAX_LINE = 64 * 1024

OnError = Callable[[DecodeError], None]


def packet_to_json(packet: Packet) -> dict[str, Any]:
    return {
        "type": packet.WIRE_NAME,
        "seq": packet.seq,
        "control": packet.control,
        "blocks": [block_to_json(b) for b in packet.blocks],
    }


def direction_of(record: Record, port: int = DEFAULT_PORT) -> str:
    """TO_ROBOT (to the robot's port), TO_WPILIB (from it), or the record's own flow."""
    if record.dst is not None and record.dst[1] == port:
        return TO_ROBOT
    if record.src is not None and record.src[1] == port:
        return TO_WPILIB
    return record.flow


def _skip(error: DecodeError) -> None:
    pass


def _text_records(path: str, on_error: OnError) -> Iterator[Record]:
    f = open_input(path)
    offset = 0
    try:
        for number, raw in enumerate(f, 1):
            start, offset = offset, offset + len(raw)
            line = raw[:MAX_LINE].decode("ascii", errors="replace").strip()
            if not line or line.startswith("#"):
                continue
            try:
                time, direction, length, hex_data = line.split()
                data = bytes.fromhex(hex_data)
                stamp = float(time)
                if int(length) != len(data):
                    raise ValueError(f"length {length} but {len(data)} bytes")
            except ValueError as exc:
                reason = f"line {number}: not `<t> <dir> <len> <hex>`: {exc}"
                on_error(DecodeError(PROTOCOL, start, reason))
                continue
            yield Record(data, stamp, "udp", flow=direction)
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def read_capture(path: str, on_error: OnError = _skip) -> Iterator[Record]:
    """The datagrams of a pcap/pcapng or text capture, in order (see the module docstring)."""
    if path != "-" and is_pcap(path):
        return (r for r in read_pcap(path) if r.transport == "udp")
    return _text_records(path, on_error)


def _error(exc: DecodeError, **where: Any) -> dict[str, Any]:
    return {"error": exc.reason, "offset": exc.offset, **where}


def dissect(path: str) -> Iterator[dict[str, Any]]:
    """Every datagram of a pcap/pcapng capture or of an XRP text capture, one dict each."""
    errors: list[DecodeError] = []
    records = read_capture(path, errors.append)
    index = 0
    try:
        for record in records:
            for error in errors:
                yield _error(error, direction="?")
            errors.clear()
            head = {"direction": direction_of(record), "time": record.time, "datagram": index}
            index += 1
            try:
                packet = decode_packet(record.data)
            except DecodeError as exc:
                yield _error(exc, **head, length=len(record.data))
                continue
            out = packet_to_json(packet)
            yield {"type": out.pop("type"), **head, "offset": 0, "length": len(record.data), **out}
    except DecodeError as exc:  # the capture is cut or damaged here: the rest is lost
        errors.append(exc)
    for error in errors:
        yield _error(error, direction="?")
