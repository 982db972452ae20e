"""VRPN framing: the 24-byte cookie, the 24-byte message header, 8-byte body padding, the UDP
connection-request ("lob") datagram, and a vectorised scanner for long runs of messages.

Wire layout of one message (all big-endian, see the fact sheet §4):

    u32 length   = 24 + unpadded body length
    u32 tv_sec, u32 tv_usec      the sender's timestamp
    i32 sender   sender id in the *sending* side's numbering (system messages: see SystemType)
    i32 type     >= 0 a described user type, < 0 a system message
    u32 seq      per-channel counter; written for sniffers, never read by VRPN
    body, then padding to a multiple of 8 whose bytes are stale buffer contents (never checked)

Bodies are typed in `messages.py`; this module only frames them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from robowire.errors import DecodeError

PROTOCOL = "vrpn"
MAGIC = b"vrpn: ver. 07.38"
MAGIC_PREFIX = b"vrpn: ver. "
COOKIE_SIZE = 24
HEADER_SIZE = 24
ALIGN = 8
MAX_BODY = 64_008  # the C++ peer's TCP in-buffer; a larger body makes it drop the connection
MAX_LENGTH = HEADER_SIZE + MAX_BODY
MAX_NAME = 95  # description payloads over 100 bytes make the C++ peer drop the connection
MAX_REMOTE_ID = 2000  # the C++ translation tables refuse ids at or above this
DEFAULT_PORT = 3883
MAX_LOB = 256

_HEADER = struct.Struct(">IIIiiI")
_LENGTH = struct.Struct(">I")
_NAME_LENGTH = struct.Struct(">I")


class SystemType(IntEnum):
    """Negative message types the connection itself handles (vrpn_Connection.h)."""

    SENDER_DESCRIPTION = -1
    TYPE_DESCRIPTION = -2
    UDP_DESCRIPTION = -3
    LOG_DESCRIPTION = -4
    DISCONNECT_MESSAGE = -5


class LogMode(IntEnum):
    """The cookie's log digit: what the *peer* is asked to log (always send NONE)."""

    NONE = 0
    INCOMING = 1
    OUTGOING = 2
    BOTH = 3


def padded(length: int) -> int:
    """`length` rounded up to the 8-byte alignment VRPN pads bodies to."""
    return (length + ALIGN - 1) & ~(ALIGN - 1)


# -- cookie ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Cookie:
    """The 24 bytes each side writes first: magic version string and a log-mode digit."""

    WIRE_NAME: ClassVar[str] = "cookie"
    version: str = MAGIC.decode("ascii")
    log_mode: LogMode = LogMode.NONE

    @property
    def major(self) -> str:
        """Everything up to and including the last '.', the part that must match."""
        text = self.version
        return text[: text.rfind(".") + 1]

    def compatible_with(self, other: Cookie) -> bool:
        return self.major == other.major


LOCAL_COOKIE = Cookie()


def encode_cookie(cookie: Cookie = LOCAL_COOKIE) -> bytes:
    magic = cookie.version.encode("ascii")[:16].ljust(16, b" ")
    return magic + b"  " + bytes([0x30 + int(cookie.log_mode)]) + bytes(5)


def decode_cookie(data: bytes | bytearray | memoryview) -> Cookie:
    """Parse a 24-byte cookie; DecodeError if it is short, not VRPN, or has a bad log digit."""
    if len(data) < COOKIE_SIZE:
        raise DecodeError(PROTOCOL, len(data), f"cookie is {len(data)} bytes, needs 24")
    raw = bytes(data[:COOKIE_SIZE])
    if not raw.startswith(MAGIC_PREFIX):
        raise DecodeError(PROTOCOL, 0, f"not a VRPN cookie: {raw[:16]!r}")
    digit = raw[18]
    if not 0x30 <= digit <= 0x33:
        raise DecodeError(PROTOCOL, 18, f"invalid log mode {chr(digit)!r} in cookie")
    try:
        version = raw[:16].decode("ascii").rstrip()
    except UnicodeDecodeError:
        raise DecodeError(PROTOCOL, 0, "cookie version is not ASCII") from None
    return Cookie(version=version, log_mode=LogMode(digit - 0x30))


# -- message frames ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """One framed message: header fields in wire numbering and the unpadded body."""

    sender: int
    type: int
    sec: int = 0
    usec: int = 0
    seq: int = 0
    body: bytes = b""

    @property
    def time(self) -> float:
        return self.sec + self.usec * 1e-6

    @property
    def size(self) -> int:
        """Bytes the frame takes on the wire, padding included."""
        return HEADER_SIZE + padded(len(self.body))


def split_time(t: float) -> tuple[int, int]:
    """Unix seconds as a timeval (sec, usec), both unsigned 32-bit."""
    if not t > 0.0:
        return 0, 0
    sec = int(t)
    usec = round((t - sec) * 1e6)
    if usec >= 1_000_000:
        sec, usec = sec + 1, usec - 1_000_000
    return sec & 0xFFFFFFFF, usec


def encode_frame(
    sender: int, type: int, body: bytes = b"", *, sec: int = 0, usec: int = 0, seq: int = 0
) -> bytes:
    """Header + body + zero padding. Raises ValueError for a body larger than any peer reads."""
    size = len(body)
    if size > MAX_BODY:
        raise ValueError(f"VRPN body of {size} bytes exceeds {MAX_BODY}")
    header = _HEADER.pack(HEADER_SIZE + size, sec, usec, sender, type, seq & 0xFFFFFFFF)
    return header + body + bytes(padded(size) - size)


def check_length(length: int, offset: int) -> None:
    if length < HEADER_SIZE:
        raise DecodeError(PROTOCOL, offset, f"length field {length} is below the 24-byte header")
    if length > MAX_LENGTH:
        raise DecodeError(PROTOCOL, offset, f"length field {length} exceeds {MAX_LENGTH}")


def decode_frame(buf: bytes | bytearray | memoryview, offset: int = 0) -> tuple[Frame, int] | None:
    """One message from a stream at `offset`: (frame, bytes used incl. padding) or None."""
    if len(buf) - offset < HEADER_SIZE:
        return None
    length, sec, usec, sender, type_, seq = _HEADER.unpack_from(buf, offset)
    check_length(length, offset)
    size = length - HEADER_SIZE
    used = HEADER_SIZE + padded(size)
    if len(buf) - offset < used:
        return None
    start = offset + HEADER_SIZE
    body = bytes(buf[start : start + size])
    return Frame(sender=sender, type=type_, sec=sec, usec=usec, seq=seq, body=body), used


def decode_datagram(data: bytes | bytearray | memoryview) -> list[Frame]:
    """Every message of one UDP datagram; a truncated one is an error (it breaks C++ peers)."""
    frames: list[Frame] = []
    offset = 0
    while offset < len(data):
        got = decode_frame(data, offset)
        if got is None:
            raise DecodeError(PROTOCOL, offset, "truncated message in datagram")
        frames.append(got[0])
        offset += got[1]
    return frames


# -- description bodies (shared by sender and type descriptions) ---------------------------------


def encode_name(name: str) -> bytes:
    raw = name.encode("utf-8")
    if len(raw) > MAX_NAME or b"\0" in raw:
        raise ValueError(f"VRPN name {name!r} is longer than {MAX_NAME} bytes or has a NUL")
    return _NAME_LENGTH.pack(len(raw) + 1) + raw + b"\0"


def decode_name(body: bytes) -> str:
    """Name from a description body: u32 length (NUL included), then the name and its NUL."""
    if len(body) < 5:
        raise DecodeError(PROTOCOL, 0, f"description body of {len(body)} bytes is too short")
    (count,) = _NAME_LENGTH.unpack_from(body)
    if count < 1 or count > 4 + len(body) - 4 or count > MAX_NAME + 5:
        raise DecodeError(PROTOCOL, 0, f"description name length {count} does not fit")
    raw = body[4 : 4 + count]
    raw = raw.split(b"\0", 1)[0]
    return raw.decode("utf-8", "replace")


# -- the UDP connection request ("lob") ----------------------------------------------------------


def encode_lob(host: str, port: int) -> bytes:
    """'<ipv4> <tcp port>' + NUL: asks a server to connect back to our TCP listener."""
    return f"{host} {port}".encode("ascii") + b"\0"


def decode_lob(data: bytes) -> tuple[str, int]:
    """Validate a lob as the C++ server does: host of [A-Za-z0-9.], one space, port >= 1024."""
    if len(data) > MAX_LOB:
        raise DecodeError(PROTOCOL, 0, f"connection request of {len(data)} bytes is too long")
    text = data.split(b"\0", 1)[0]
    parts = text.split()
    if len(parts) != 2:
        raise DecodeError(PROTOCOL, 0, f"connection request {text[:40]!r} is not 'host port'")
    host_raw, port_raw = parts
    if not host_raw or any(
        not (chr(c).isascii() and (chr(c).isalnum() or c == 0x2E)) for c in host_raw
    ):
        raise DecodeError(PROTOCOL, 0, f"bad host {host_raw[:40]!r} in connection request")
    if not port_raw.isdigit() or len(port_raw) > 5:
        raise DecodeError(PROTOCOL, len(host_raw) + 1, f"bad port {port_raw[:10]!r}")
    port = int(port_raw)
    if not 1024 <= port <= 65535:
        raise DecodeError(PROTOCOL, len(host_raw) + 1, f"port {port} outside 1024..65535")
    return host_raw.decode("ascii"), port


# -- vectorised scanning -------------------------------------------------------------------------

U32 = np.dtype(">u4")
I32 = np.dtype(">i4")
F64 = np.dtype(">f8")


@dataclass(frozen=True, slots=True)
class FrameIndex:
    """Header columns of many messages found in one buffer (offsets are message starts)."""

    offsets: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int64]
    sec: npt.NDArray[np.uint32]
    usec: npt.NDArray[np.uint32]
    sender: npt.NDArray[np.int32]
    type: npt.NDArray[np.int32]
    seq: npt.NDArray[np.uint32]
    end: int  # first byte after the last whole message
    error: DecodeError | None = None  # a bad length field stopped the scan at `end`

    def __len__(self) -> int:
        return len(self.offsets)


def scan(buf: bytes | bytearray | memoryview, start: int = 0) -> FrameIndex:
    """Find every whole message from `start` on and read their headers as numpy columns.

    Only the length walk is a Python loop (each length says where the next message starts);
    the other header fields are gathered in one vectorised step. `start` must be a multiple
    of 4 relative to the buffer (VRPN messages are 8-aligned after the 24-byte cookie).
    """
    unpack = _LENGTH.unpack_from
    limit = len(buf) - HEADER_SIZE
    offsets: list[int] = []
    append = offsets.append
    offset = start
    error: DecodeError | None = None
    while offset <= limit:
        (length,) = unpack(buf, offset)
        if length < HEADER_SIZE or length > MAX_LENGTH:
            try:
                check_length(length, offset)
            except DecodeError as exc:
                error = exc
            break
        used = HEADER_SIZE + ((length - HEADER_SIZE + 7) & ~7)
        if offset + used > len(buf):
            break
        append(offset)
        offset += used
    off = np.array(offsets, dtype=np.int64)
    if off.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        z32 = np.zeros(0, dtype=np.int32)
        u32 = np.zeros(0, dtype=np.uint32)
        return FrameIndex(empty, empty, u32, u32, z32, z32, u32, offset, error)
    if start & 3:  # not word-aligned: copy the scanned part so the word view lines up
        words_buf: bytes | bytearray | memoryview = bytes(buf[start:offset])
        base = start
    else:
        words_buf, base = buf, 0
    words = np.frombuffer(words_buf, dtype=U32, count=len(words_buf) // 4)
    idx = (off - base) // 4
    header = words[idx[:, None] + np.arange(6)]
    signed = header[:, 3:5].astype(np.uint32).view(np.int32)
    return FrameIndex(
        offsets=off,
        lengths=header[:, 0].astype(np.int64),
        sec=header[:, 1].astype(np.uint32),
        usec=header[:, 2].astype(np.uint32),
        sender=signed[:, 0].copy(),
        type=signed[:, 1].copy(),
        seq=header[:, 5].astype(np.uint32),
        end=offset,
        error=error,
    )
