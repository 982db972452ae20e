"""`robowire decode ugcs FILE`: every Vsm_message of a capture, one dict each.

Captures: pcap/pcapng (the shared reader reassembles each TCP direction; each direction is its
own frame stream), or the jsonl form of `captures/ugcs/`: one object a line with `t` (seconds),
`conn` (a connection name), `dir` (`vsm->ucs` / `ucs->vsm`) and `hex` (bytes of that direction's
stream, whole frames or not). Each (connection, direction) is reassembled and split into frames;
a bad frame ends that stream (as it would close the connection) and is reported once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
from google.protobuf import json_format

from robowire.capture import OnError, Record, is_pcap, read_lines, read_pcap, skip_error
from robowire.errors import DecodeError
from robowire.protocols.ugcs import codec
from robowire.protocols.ugcs.codec import DEFAULT_PORT, MAX_FRAME, NAME
from robowire.protocols.ugcs.proto import ucs_vsm_pb2 as pb

__all__ = ["dissect", "kind_of", "message_to_json", "read_capture"]

MAX_LINE = 4 * MAX_FRAME  # a jsonl line holds at most a frame's hex and a little more
TO_VSM = "ucs->vsm"
TO_UCS = "vsm->ucs"


def kind_of(msg: pb.Vsm_message) -> str:
    """What a message is: its payload's field name, `ping` (device 0, a reply wanted, nothing
    else), `ack`/`response` for a Device_response, or `empty`."""
    if msg.HasField("register_peer"):
        return "register_peer"
    if msg.HasField("register_device"):
        return "register_device"
    if msg.HasField("unregister_device"):
        return "unregister_device"
    if msg.HasField("device_status"):
        return "device_status"
    if len(msg.device_commands):
        return "device_commands"
    if msg.HasField("device_response"):
        return "device_response"
    if msg.device_id == 0 and msg.response_required:
        return "ping"
    return "empty"


def message_to_json(msg: pb.Vsm_message) -> dict[str, Any]:
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def _jsonl_record(line: bytes) -> Record:
    item = orjson.loads(line)
    if not isinstance(item, dict):
        raise TypeError(f"a JSON {type(item).__name__}, not an object")
    flow = f"{item.get('conn', '')}:{item['dir']}"
    return Record(bytes.fromhex(item["hex"]), float(item["t"]), "stream", flow=flow)


def read_capture(path: str, on_error: OnError = skip_error) -> Iterator[Record]:
    """The TCP byte chunks of a pcap/pcapng, or of a jsonl capture, in order."""
    if path != "-" and is_pcap(path):
        return (r for r in read_pcap(path) if r.transport == "tcp")
    form = "a capture line ({t, conn, dir, hex})"
    return read_lines(path, NAME, _jsonl_record, form, on_error, max_line=MAX_LINE)


def direction_of(record: Record, port: int = DEFAULT_PORT) -> str:
    """`ucs->vsm` (to the VSM's port), `vsm->ucs` (from it), or the jsonl line's direction."""
    if record.dst is not None and record.dst[1] == port:
        return TO_VSM
    if record.src is not None and record.src[1] == port:
        return TO_UCS
    return record.flow.rpartition(":")[2] or record.flow


class _Stream:
    """One direction of one connection: bytes in, (offset, payload) of whole frames out."""

    def __init__(self) -> None:
        self.buf = b""
        self.base = 0  # stream offset of buf[0]
        self.failed = False

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        self.buf += data
        end = 0
        for offset, payload in codec.split_frames(self.buf, final=False):
            end = offset + len(payload)
            yield self.base + offset, payload
        self.buf = self.buf[end:]
        self.base += end


def _error(exc: DecodeError, **where: Any) -> dict[str, Any]:
    return {"error": exc.reason, "offset": exc.offset, **where}


def dissect(path: str) -> Iterator[dict[str, Any]]:
    """Every frame of a UgCS capture (see the module docstring), one dict each: `type`
    (`kind_of`), `direction`, `flow`, `time`, `offset` and `length` of the payload in its
    stream, `device_id`, `message_id` and the whole `message` as JSON."""
    errors: list[DecodeError] = []
    streams: dict[str, _Stream] = {}
    index = 0
    for record in read_capture(path, errors.append):
        for error in errors:
            yield _error(error, direction="?")
        errors.clear()
        stream = streams.setdefault(record.flow, _Stream())
        if stream.failed:
            continue
        head = {"direction": direction_of(record), "flow": record.flow, "time": record.time}
        try:
            for offset, payload in stream.feed(record.data):
                where = {**head, "frame": index, "offset": offset, "length": len(payload)}
                index += 1
                try:
                    msg = codec.decode_message(payload, offset)
                except DecodeError as exc:
                    stream.failed = True
                    yield _error(exc, **where)
                    break
                yield {
                    "type": kind_of(msg),
                    **where,
                    "device_id": msg.device_id,
                    "message_id": msg.message_id if msg.HasField("message_id") else None,
                    "message": message_to_json(msg),
                }
        except DecodeError as exc:
            stream.failed = True
            yield _error(exc.shifted(stream.base), **head)
    for error in errors:
        yield _error(error, direction="?")
    for flow, stream in streams.items():
        if stream.buf and not stream.failed:
            reason = f"capture ends inside a frame ({len(stream.buf)} bytes left)"
            yield _error(DecodeError(NAME, stream.base, reason), flow=flow, direction="?")
