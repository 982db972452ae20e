"""`robowire decode xrp FILE`: every datagram of a capture as one JSON-ready dict.

Inputs: pcap/pcapng (UDP datagrams; direction from the ports: to port 3540 is "W>R", the
WPILib side to the robot, from port 3540 is "R>W"), or the text form of the shared captures,
one datagram a line: `<time> <W>R|R>W> <length> <hex>`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any

from robowire.capture import Record, is_pcap, open_input, read_pcap
from robowire.errors import ConfigError, DecodeError
from robowire.protocols.xrp.codec import DEFAULT_PORT, Packet, block_to_json, decode_packet

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


def decode_datagrams(
    datagrams: Iterable[tuple[bytes, str, float | None]],
) -> Iterator[dict[str, Any]]:
    """(data, direction, time) -> one dict per datagram; errors are dicts too."""
    for index, (data, direction, time) in enumerate(datagrams):
        head: dict[str, Any] = {"direction": direction, "time": time, "datagram": index}
        try:
            packet = decode_packet(data)
        except DecodeError as exc:
            yield {"error": exc.reason, "offset": exc.offset, **head, "length": len(data)}
            continue
        out = packet_to_json(packet)
        yield {"type": out.pop("type"), **head, "offset": 0, "length": len(data), **out}


def direction_of(record: Record, port: int = DEFAULT_PORT) -> str:
    if record.dst is not None and record.dst[1] == port:
        return TO_ROBOT
    if record.src is not None and record.src[1] == port:
        return TO_WPILIB
    return record.flow


def _pcap_datagrams(path: str) -> Iterator[tuple[bytes, str, float | None]]:
    for record in read_pcap(path):
        if record.transport == "udp":
            yield record.data, direction_of(record), record.time


def _text_datagrams(path: str) -> Iterator[tuple[bytes, str, float | None] | dict[str, Any]]:
    f = open_input(path)
    try:
        for number, raw in enumerate(f, 1):
            line = raw[:MAX_LINE].decode("ascii", errors="replace").strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            try:
                time, direction, length, hex_data = parts
                data = bytes.fromhex(hex_data)
                stamp = float(time)
                if int(length) != len(data):
                    raise ValueError(f"length {length} but {len(data)} bytes")
            except ValueError as exc:
                yield {"error": f"line {number}: not `<t> <dir> <len> <hex>`: {exc}",
                       "offset": 0, "direction": "?", "line": number}  # fmt: skip
                continue
            yield data, direction, stamp
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def capture_datagrams(path: str) -> Iterator[tuple[bytes, str, float | None] | dict[str, Any]]:
    """(data, direction, time) per datagram of a pcap/pcapng or text capture; a text line
    that is not a datagram comes out as an error dict."""
    if path != "-" and is_pcap(path):
        return _pcap_datagrams(path)
    return _text_datagrams(path)


def decode_capture(path: str) -> Iterator[dict[str, Any]]:
    """Every datagram of a pcap/pcapng capture or of an XRP text capture."""
    if path != "-" and is_pcap(path):
        yield from decode_datagrams(_pcap_datagrams(path))
        return
    good: list[tuple[bytes, str, float | None]] = []
    index = 0
    for item in _text_datagrams(path):
        if isinstance(item, dict):
            yield item
            continue
        good.append(item)
        for out in decode_datagrams(good):
            out["datagram"] = index
            yield out
        good.clear()
        index += 1
    if index == 0 and path != "-":
        raise ConfigError(f"{path}: no XRP datagrams (want pcap/pcapng or `<t> <dir> <len> <hex>`)")
