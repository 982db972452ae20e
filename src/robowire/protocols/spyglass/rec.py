"""Capture reading for SpyGlass: `.rec` recordings (the files SpyGlass's Record button and
packet generator write), and telling them from pcap captures and raw streams.

A `.rec` file is records back to back, no file header: one unsigned byte N, then the N bytes
of one packet. The packet still carries its own uint16 length, so N must equal that length + 2;
the one-byte N means no packet over 255 bytes can be recorded (SpyGlass would silently write
the low 8 bits; we refuse with `RecordTooLarge`).

Reading mirrors live input: `rec_records` yields each packet's bytes as a `capture.Record`, the
same self-delimited byte stream a TCP source feeds `SpyglassSession`, stamped with the packet's
own time (a `.rec` has no other time stamps). A file cut inside its last record gives every
whole record first, then one `DecodeError` (offset, reason) for the cut.

`sniff(path)` tells a `.rec` (by its name or its first bytes: stdin too), a pcap/pcapng
capture and a raw packet stream apart; `read_capture(path)` gives any of them as records.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Literal

from robowire.capture import PCAP_MAGICS, Record, open_input, read_pcap, read_stream
from robowire.errors import ConfigError, DecodeError
from robowire.protocols.spyglass.codec import (
    DEFAULT_PROFILE,
    HEADER,
    HEADER_SIZE,
    NAME,
    VERSION,
    Packet,
    SemanticProfile,
    SpyglassPacket,
    decode,
    encode,
)

MAX_REC_PACKET = 255
_TIME = struct.Struct(">IH")


class RecordTooLarge(ValueError):
    """A packet longer than a `.rec` record can hold (255 bytes)."""

    def __init__(self, size: int) -> None:
        super().__init__(
            f"a packet of {size} bytes does not fit a .rec record (at most {MAX_REC_PACKET})"
        )
        self.size = size


@dataclass(frozen=True, slots=True)
class RecEntry:
    """One record: its offset in the file (of the N byte) and the N packet bytes."""

    offset: int
    data: bytes

    def check(self) -> None:
        """Raise DecodeError unless N equals the packet's length field + 2."""
        data = self.data
        if len(data) < HEADER_SIZE:
            raise DecodeError(
                NAME, self.offset, f"record of {len(data)} bytes is shorter than a header"
            )
        length = (data[0] << 8) | data[1]
        if length + 2 != len(data):
            raise DecodeError(
                NAME,
                self.offset,
                f"record size {len(data)} does not match the packet length field {length} + 2",
            )


Source = str | Path | BinaryIO


def _open(source: Source) -> tuple[BinaryIO, bool]:
    if isinstance(source, str | Path):
        return open_input(str(source)), str(source) != "-"
    return source, False


def iter_rec(source: Source, chunk_size: int = 1 << 16, *, head: bytes = b"") -> Iterator[RecEntry]:
    """The records of a `.rec` file (path, "-" for stdin, or a binary file), streaming.

    Each record's N is not checked against its packet (see `RecEntry.check`), so one bad record
    does not lose the others. A record cut off at the end of the file raises DecodeError after
    every whole record. `head`: bytes already read from the start of `source` (by `sniff`).
    """
    f, owned = _open(source)
    try:
        buf = head
        base = 0  # file offset of buf[0]
        while True:
            chunk = f.read(chunk_size)
            buf = buf + chunk if buf else chunk
            pos = 0
            size = len(buf)
            while pos < size:
                n = buf[pos]
                if pos + 1 + n > size:
                    break
                yield RecEntry(base + pos, buf[pos + 1 : pos + 1 + n])
                pos += 1 + n
            buf = buf[pos:]
            base += pos
            if not chunk:
                break
        if buf:
            raise DecodeError(NAME, base, f"record of {buf[0]} bytes cut off after {len(buf) - 1}")
    finally:
        if owned:
            f.close()


def read_rec(source: Source, *, profile: SemanticProfile = DEFAULT_PROFILE) -> Iterator[Packet]:
    """The packets of a `.rec` file; DecodeError (with the file offset) at the first bad one."""
    for entry in iter_rec(source):
        entry.check()
        try:
            yield decode(entry.data, profile=profile)
        except DecodeError as exc:
            raise exc.shifted(entry.offset + 1) from None


def rec_records(source: Source, *, head: bytes = b"") -> Iterator[Record]:
    """Each packet's bytes as the live stream carries them, timed by the packet's header.

    A record whose size is not its packet's (see `RecEntry.check`) or a cut last record ends
    the records with DecodeError, after every whole record before it."""
    for entry in iter_rec(source, head=head):
        entry.check()
        seconds, millis = _TIME.unpack_from(entry.data, 7)
        yield Record(entry.data, seconds + millis / 1000.0, "stream", flow="rec")


Kind = Literal["rec", "pcap", "stream"]


def looks_like_rec(head: bytes) -> bool:
    """A `.rec` starts N, 0, N - 2, 2 (record size, then the packet's length and version)."""
    return (
        len(head) >= 4
        and head[0] >= HEADER_SIZE
        and head[1] == 0
        and head[2] + 2 == head[0]
        and head[3] == VERSION
    )


def sniff(path: str) -> tuple[Kind, bytes]:
    """What a capture holds: a `.rec` by its name, else by its first bytes (so does stdin).

    Returns the kind and, for stdin, the bytes read to tell (they cannot be put back: pass
    them on as `head`); for a file, b"" (it is opened again from its start)."""
    if path.lower().endswith(".rec"):
        return "rec", b""
    if path == "-":
        head = sys.stdin.buffer.read(4)  # up to 4 bytes, waiting for them on a pipe
        if head in PCAP_MAGICS:
            raise ConfigError("a pcap capture cannot be read from stdin: name the file")
        return ("rec" if looks_like_rec(head) else "stream"), head
    f = open_input(path)
    with f:
        first = f.read(4)
    if first in PCAP_MAGICS:
        return "pcap", b""
    return ("rec" if looks_like_rec(first) else "stream"), b""


def read_capture(path: str) -> Iterator[Record]:
    """The packet bytes of a `.rec`, a pcap/pcapng capture or a raw stream ("-": stdin)."""
    kind, head = sniff(path)
    return capture_records(path, kind, head)


def capture_records(path: str, kind: Kind, head: bytes = b"") -> Iterator[Record]:
    """The records of a capture `sniff` has looked at (`head`: the bytes it read)."""
    if kind == "rec":
        return rec_records(path, head=head)
    if kind == "pcap":
        return read_pcap(path)
    return _stream(path, head)


def _stream(path: str, head: bytes) -> Iterator[Record]:
    if head:
        yield Record(head)
    yield from read_stream(path)


def rec_record(packet: SpyglassPacket | bytes) -> bytes:
    """One `.rec` record (N byte + packet bytes); RecordTooLarge over 255 bytes."""
    data = packet if isinstance(packet, bytes) else encode(packet)
    if len(data) > MAX_REC_PACKET:
        raise RecordTooLarge(len(data))
    if len(data) < HEADER_SIZE or HEADER.unpack_from(data)[0] + 2 != len(data):
        raise ValueError("not a whole SpyGlass packet (its length field must be its size - 2)")
    return bytes((len(data),)) + data


class RecWriter:
    """Writes packets (typed or already encoded) to a `.rec` file, one record each.

    Use as a context manager; `append=True` adds to an existing file as SpyGlass can.
    """

    def __init__(self, target: str | Path | BinaryIO, *, append: bool = False) -> None:
        if isinstance(target, str | Path):
            self._file: BinaryIO = open(target, "ab" if append else "wb")  # noqa: SIM115
            self._owned = True
        else:
            self._file = target
            self._owned = False
        self.count = 0

    def write(self, packet: SpyglassPacket | bytes) -> None:
        self._file.write(rec_record(packet))
        self.count += 1

    def write_all(self, packets: Iterable[SpyglassPacket | bytes]) -> int:
        for packet in packets:
            self.write(packet)
        return self.count

    def close(self) -> None:
        if self._owned:
            self._file.close()
        else:
            self._file.flush()

    def __enter__(self) -> RecWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def write_rec(
    target: str | Path | BinaryIO,
    packets: Iterable[SpyglassPacket | bytes],
    *,
    append: bool = False,
) -> int:
    """Write packets to a `.rec` file; returns how many."""
    with RecWriter(target, append=append) as writer:
        return writer.write_all(packets)
