"""VRPN log files (`.vrpn`, what `vrpn_server -lo FILE` and remote logging write; §12).

The file is the 24-byte cookie, then one entry per logged message: six big-endian 32-bit
words `type, sender, tv_sec, tv_usec, payload_len, 0` and `payload_len` body bytes, unpadded.
Ids are the logging side's; the descriptions are logged like any message, so a reader learns
the names from the file itself.

Pure functions: `iter_log` walks the bytes; `read_log` turns a file into capture records
(the cookie, then each entry re-framed as the wire message it was) so the file source feeds
them through a client session exactly as a live connection's stream.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from robowire.capture import Record, open_input
from robowire.errors import ConfigError, DecodeError
from robowire.protocols.vrpn.codec import (
    COOKIE_SIZE,
    HEADER_SIZE,
    MAGIC_PREFIX,
    MAX_BODY,
    MAX_REMOTE_ID,
    Frame,
    decode_cookie,
    encode_cookie,
    encode_frame,
    scan,
)

PROTOCOL = "vrpn"
ENTRY = struct.Struct(">iiIIiI")
"""type, sender, tv_sec, tv_usec, payload_len, and the always-0 slot of old files."""
ENTRY_SIZE = ENTRY.size
LOG_SUFFIX = ".vrpn"


def encode_log_cookie() -> bytes:
    """The file's first 24 bytes (the cookie with log digit 0, as the mainline writes it)."""
    return encode_cookie()


def encode_log_entry(frame: Frame) -> bytes:
    """One entry: the six words and the unpadded body."""
    if len(frame.body) > MAX_BODY:
        raise ValueError(f"VRPN body of {len(frame.body)} bytes exceeds {MAX_BODY}")
    head = ENTRY.pack(frame.type, frame.sender, frame.sec, frame.usec, len(frame.body), 0)
    return head + frame.body


def is_log(data: bytes) -> bool:
    """A log starts like a stream (the cookie) but its first word after it is a message type,
    negative for the description every log starts with; a stream's is a length >= 24."""
    if not data.startswith(MAGIC_PREFIX) or len(data) < COOKIE_SIZE + 4:
        return False
    return int.from_bytes(data[COOKIE_SIZE : COOKIE_SIZE + 4], "big", signed=True) < 0


def iter_log(data: bytes) -> Iterator[tuple[int, Frame]]:
    """(file offset, message) for each whole entry; DecodeError at damage (a bad cookie, a
    cut entry, an impossible type or length), after every entry before it."""
    decode_cookie(data[:COOKIE_SIZE])
    offset = COOKIE_SIZE
    size = len(data)
    while offset < size:
        if size - offset < ENTRY_SIZE:
            raise DecodeError(
                PROTOCOL, offset, f"log ends inside an entry header ({size - offset} bytes left)"
            )
        type_, sender, sec, usec, length, _ = ENTRY.unpack_from(data, offset)
        if not -5 <= type_ < MAX_REMOTE_ID:
            raise DecodeError(PROTOCOL, offset, f"bad message type {type_} in log entry")
        if not 0 <= sender < MAX_REMOTE_ID:
            raise DecodeError(PROTOCOL, offset + 4, f"bad sender id {sender} in log entry")
        if not 0 <= length <= MAX_BODY:
            raise DecodeError(PROTOCOL, offset + 16, f"bad payload length {length} in log entry")
        start = offset + ENTRY_SIZE
        if size - start < length:
            raise DecodeError(
                PROTOCOL, offset, f"log ends inside an entry ({size - start} of {length} bytes)"
            )
        body = data[start : start + length]
        yield offset, Frame(sender=sender, type=type_, sec=sec, usec=usec, body=body)
        offset = start + length


def looks_like_log_file(path: str) -> bool:
    """A `.vrpn` name, or a file whose first bytes say log (`is_log`); "-" is a stream."""
    if path.lower().endswith(LOG_SUFFIX):
        return True
    if path == "-":
        return False
    try:
        with open(path, "rb") as f:
            return is_log(f.read(COOKIE_SIZE + 4))
    except OSError:
        return False  # the capture reader says what is wrong with it


def read_file(path: str) -> bytes:
    if path != "-" and not Path(path).exists():
        raise ConfigError(f"no such file: {path}")
    with open_input(path) as f:
        return f.read()


def read_log(path: str) -> Iterator[Record]:
    """The log as stream records: the cookie, then each message framed as on the wire, with
    its recorded time (so `replay` keeps the log's pacing). DecodeError ends it at damage."""
    data = read_file(path)
    if not data.startswith(MAGIC_PREFIX):
        raise DecodeError(PROTOCOL, 0, f"not a VRPN log: starts {data[:16]!r}")
    yield Record(data=data[:COOKIE_SIZE])
    for _, frame in iter_log(data):
        framed = encode_frame(frame.sender, frame.type, frame.body, sec=frame.sec, usec=frame.usec)
        yield Record(data=framed, time=frame.time)


def stream_to_log(buf: bytes | bytearray) -> tuple[bytes, int, int]:
    """A server's outgoing TCP stream (after its cookie) as log entries: (entries, bytes used,
    how many).

    What the mainline logs is what it sends, so the writer lets a server session frame the
    messages and re-lays them here, in one vectorised step: the six words, the body unpadded.
    """
    index = scan(buf)
    n = len(index.offsets)
    if not n:
        return b"", index.end, 0
    body = index.lengths - HEADER_SIZE
    heads = np.zeros((n, 6), dtype=">i4")
    heads[:, 0] = index.type
    heads[:, 1] = index.sender
    heads[:, 2] = index.sec.astype(np.int64).astype(np.int32, casting="unsafe")
    heads[:, 3] = index.usec
    heads[:, 4] = body
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(ENTRY_SIZE + body[:-1], out=starts[1:])
    out = np.empty(int(starts[-1] + ENTRY_SIZE + body[-1]), dtype=np.uint8)
    out[(starts[:, None] + np.arange(ENTRY_SIZE)).ravel()] = heads.view(np.uint8).ravel()
    total = int(body.sum())
    if total:
        within = np.arange(total) - np.repeat(np.cumsum(body) - body, body)
        src = np.frombuffer(bytes(buf[: index.end]), dtype=np.uint8)
        out[np.repeat(starts + ENTRY_SIZE, body) + within] = src[
            np.repeat(index.offsets + HEADER_SIZE, body) + within
        ]
    return out.tobytes(), index.end, n
