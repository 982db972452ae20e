"""`robowire decode xrp FILE`: every datagram of a capture as one JSON-ready dict, and the
capture reader the file source shares.

Inputs: pcap/pcapng (UDP datagrams; direction from the ports: to port 3540 is "W>R", the
WPILib side to the robot, from port 3540 is "R>W"), or the text form of the shared captures,
one datagram a line: `<time> <W>R|R>W> <length> <hex>`. A text line that is not a datagram is
a `DecodeError` handed to `on_error` (a dissector error line, a file source's counted drop),
and reading goes on; a pcap cut part-way is one error after every whole datagram.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from robowire.capture import OnError, Record, is_pcap, read_lines, skip_error
from robowire.errors import DecodeError
from robowire.protocols.datagram import udp_records
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


def _text_record(line: bytes) -> Record:
    time, direction, length, hex_data = line.decode("ascii").split()
    data = bytes.fromhex(hex_data)
    if int(length) != len(data):
        raise ValueError(f"length {length} but {len(data)} bytes")
    return Record(data, float(time), "udp", flow=direction)


def read_capture(path: str, on_error: OnError = skip_error) -> Iterator[Record]:
    """The datagrams of a pcap/pcapng or text capture, in order (see the module docstring)."""
    if path != "-" and is_pcap(path):
        return udp_records(path)
    return read_lines(path, PROTOCOL, _text_record, "`<t> <dir> <len> <hex>`", on_error, MAX_LINE)


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
