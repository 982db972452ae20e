"""SpyGlass `.rec` recordings: the files SpyGlass's Record button and packet generator write.

A `.rec` file is records back to back, no file header: one unsigned byte N, then the N bytes
of one packet. The packet still carries its own uint16 length, so N must equal that length + 2;
the one-byte N means no packet over 255 bytes can be recorded (SpyGlass would silently write
the low 8 bits; we refuse with `RecordTooLarge`).

Reading mirrors live input: `rec_records` yields each packet's bytes as a `capture.Record`, the
same self-delimited byte stream a TCP source feeds `SpyglassSession`, stamped with the packet's
own time (a `.rec` has no other time stamps).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from robowire.capture import Record, open_input
from robowire.errors import DecodeError
from robowire.protocols.spyglass.codec import (
    DEFAULT_PROFILE,
    HEADER,
    HEADER_SIZE,
    PROTOCOL,
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
                PROTOCOL, self.offset, f"record of {len(data)} bytes is shorter than a header"
            )
        length = (data[0] << 8) | data[1]
        if length + 2 != len(data):
            raise DecodeError(
                PROTOCOL,
                self.offset,
                f"record size {len(data)} does not match the packet length field {length} + 2",
            )


Source = str | Path | BinaryIO


def _open(source: Source) -> tuple[BinaryIO, bool]:
    if isinstance(source, str | Path):
        return open_input(str(source)), str(source) != "-"
    return source, False


def iter_rec(source: Source, chunk_size: int = 1 << 16) -> Iterator[RecEntry]:
    """The records of a `.rec` file (path, "-" for stdin, or a binary file), streaming.

    Each record's N is not checked against its packet (see `RecEntry.check`), so one bad record
    does not lose the others. A record cut off at the end of the file raises DecodeError.
    """
    f, owned = _open(source)
    try:
        buf = b""
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
            raise DecodeError(
                PROTOCOL, base, f"record of {buf[0]} bytes cut off after {len(buf) - 1}"
            )
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


def rec_records(source: Source) -> Iterator[Record]:
    """Each packet's bytes as the live stream carries them, timed by the packet's header."""
    for entry in iter_rec(source):
        entry.check()
        seconds, millis = _TIME.unpack_from(entry.data, 7)
        yield Record(entry.data, seconds + millis / 1000.0, "stream", flow="rec")


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
