"""Captures as the drivers see them: a sequence of timed, directed chunks of bytes.

Readers here turn files into `Record`s, the same (time, direction, bytes) a live driver feeds a
session, so that decoding a capture and listening live go through the same code:

* `read_pcap`: pcap and pcapng (Ethernet, Linux cooked, raw IP and BSD loopback links; IPv4
  and IPv6). UDP datagrams come out one per record; TCP segments are reassembled per direction
  (in sequence order, retransmissions dropped) and come out in the order they were captured.
* `read_stream`: a raw byte stream of one direction (a file, or "-" for stdin) in chunks.

Records of one TCP direction carry that direction's id in `flow`, so a decoder keeps one
buffer per flow.

Protocols with a file format of their own (VRPN's log, SpyGlass's `.rec`) declare it as a
`CaptureFormat` (suffixes, a sniffer of the first bytes, a reader) in their `WireProtocol`;
`reader_for` picks a file's reader from those, python-can style (suffix, then first bytes),
else the protocol's own `read_capture` (pcap/pcapng, streams, text captures).
"""

from __future__ import annotations

import asyncio
import io
import os
import socket
import struct
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import dpkt

from robowire.errors import ConfigError, DecodeError
from robowire.timebase import monotonic
from robowire.wire import Address

Transport = Literal["tcp", "udp", "stream"]
PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1",
    b"\xa1\xb2\xc3\xd4",
    b"\x4d\x3c\xb2\xa1",
    b"\xa1\xb2\x3c\x4d",
    b"\x0a\x0d\x0d\x0a",  # pcapng section header block
}
MAX_TCP_GAP = 1 << 20  # buffered out-of-order bytes per flow before we give up on a hole


@dataclass(frozen=True, slots=True)
class Record:
    """One chunk of captured traffic."""

    data: bytes
    time: float | None = None  # Unix epoch seconds, when the capture has it
    transport: Transport = "stream"
    src: Address | None = None
    dst: Address | None = None
    flow: str = "stream"  # "src>dst" for network records

    @property
    def direction(self) -> str:
        return self.flow


def is_pcap(path: str) -> bool:
    if path == "-":
        return False
    try:
        with open(path, "rb") as f:
            return f.read(4) in PCAP_MAGICS
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None


class BoundedFile(io.BufferedReader):
    """A file no read of which asks for more than the file still holds. Readers of framed
    files (dpkt for pcap records and pcapng blocks, mcap for records) read a length field,
    then `read(length)`, and a buffered read allocates what it is asked for before reading:
    a damaged length was a multi-gigabyte allocation (found by fuzzing). With this file the
    read is cut to the bytes there are, and the reader sees a truncated record."""

    def __init__(self, path: str) -> None:
        super().__init__(io.FileIO(path, "r"))
        self.size = os.fstat(self.fileno()).st_size
        self.cut = False  # a read asked for more than was left: the file ends inside a record

    def read(self, size: int | None = -1) -> bytes:
        if size is not None and size > 0:
            left = max(self.size - self.tell(), 0)
            if size > left:
                self.cut, size = True, left
            if size == 0:
                return b""
        return super().read(size)


def open_bounded(path: str) -> BinaryIO:
    """`open_input` for framed files: a regular file comes as a `BoundedFile`."""
    if path != "-" and Path(path).is_file():
        try:
            return BoundedFile(path)
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    return open_input(path)


def open_input(path: str) -> BinaryIO:
    """A binary file, or stdin for "-"; a missing file is one ConfigError line."""
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None


def read_stream(path: str, chunk_size: int = 1 << 16) -> Iterator[Record]:
    """A raw one-direction byte stream in chunks (the decoder reassembles messages)."""
    f = open_input(path)
    try:
        while chunk := f.read(chunk_size):
            yield Record(chunk)
    finally:
        if f is not sys.stdin.buffer:
            f.close()


OnError = Callable[[DecodeError], None]
"""What a text-capture reader does with a line it cannot read (the dissector prints it)."""


def skip_error(error: DecodeError) -> None:
    """The default `OnError`: a bad line is left out."""


def read_lines(
    path: str,
    protocol: str,
    parse: Callable[[bytes], Record],
    form: str,
    on_error: OnError = skip_error,
    max_line: int = 1 << 16,
) -> Iterator[Record]:
    """The records of a line-oriented text capture (a file, or "-" for stdin): blank lines
    and `#` comments are skipped; `parse` turns one stripped line into a Record or raises
    ValueError/KeyError/TypeError, which becomes a DecodeError naming the line, its byte offset
    and the expected `form`, handed to `on_error`, and reading goes on."""
    f = open_input(path)
    offset = 0
    try:
        for number, raw in enumerate(f, 1):
            start, offset = offset, offset + len(raw)
            if len(raw) > max_line:
                on_error(
                    DecodeError(protocol, start, f"line {number}: longer than {max_line} bytes")
                )
                continue
            line = raw.strip()
            if not line or line.startswith(b"#"):
                continue
            try:
                yield parse(line)
            except (ValueError, KeyError, TypeError) as exc:
                on_error(DecodeError(protocol, start, f"line {number}: not {form}: {exc}"))
    finally:
        if f is not sys.stdin.buffer:
            f.close()


@dataclass(slots=True)
class _TcpFlow:
    next_seq: int | None = None
    pending: dict[int, bytes] = field(default_factory=dict)

    def accept(self, seq: int, syn: bool, payload: bytes) -> bytes:
        """In-order bytes that this segment makes available."""
        if syn:
            self.next_seq = (seq + 1) & 0xFFFFFFFF
            if not payload:
                return b""
            seq = self.next_seq
        if self.next_seq is None:  # capture began mid-stream: start here
            self.next_seq = seq
        if payload:
            self.pending[seq] = payload
        out = bytearray()
        while True:
            for start, data in list(self.pending.items()):
                offset = (self.next_seq - start) & 0xFFFFFFFF
                if offset >= 1 << 31:  # segment starts in the future: keep waiting
                    continue
                del self.pending[start]
                if offset < len(data):
                    out += data[offset:]
                    self.next_seq = (self.next_seq + len(data) - offset) & 0xFFFFFFFF
                break
            else:
                break
        if sum(len(d) for d in self.pending.values()) > MAX_TCP_GAP:
            self.pending.clear()  # a hole that never fills: skip it rather than grow forever
            self.next_seq = None
        return bytes(out)


def _link_packet(linktype: int, frame: bytes) -> dpkt.Packet | None:
    """The IP packet inside a captured frame, or None if it is not IP."""
    try:
        if linktype == dpkt.pcap.DLT_EN10MB:
            ip = dpkt.ethernet.Ethernet(frame).data
        elif linktype == dpkt.pcap.DLT_LINUX_SLL:
            ip = dpkt.sll.SLL(frame).data
        elif linktype in (dpkt.pcap.DLT_NULL, dpkt.pcap.DLT_LOOP):
            ip = dpkt.loopback.Loopback(frame).data
        elif linktype in (dpkt.pcap.DLT_RAW, 101, 228, 229):
            ip = dpkt.ip.IP(frame) if frame[:1] and frame[0] >> 4 == 4 else dpkt.ip6.IP6(frame)
        else:
            return None
    except (dpkt.UnpackError, IndexError):
        return None
    return ip if isinstance(ip, dpkt.ip.IP | dpkt.ip6.IP6) else None


def _address(ip: dpkt.Packet, which: str) -> str:
    raw = getattr(ip, which)
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, raw)


def _frames(reader: Any, f: BinaryIO) -> Iterator[tuple[float, bytes]]:
    """The reader's (time, frame) pairs; a file cut inside a record is one DecodeError at the
    end of the last whole record, after every record before it."""
    offset = f.tell() if f.seekable() else 0
    frames = iter(reader)
    while True:
        try:
            timestamp, frame = next(frames)
        except StopIteration:
            return
        except (dpkt.NeedData, dpkt.UnpackError, struct.error, ValueError) as exc:
            reason = f"capture cut or damaged here ({exc or 'truncated'})"
            raise DecodeError("pcap", offset, reason) from None
        if isinstance(f, BoundedFile) and f.cut:
            raise DecodeError("pcap", offset, "capture cut here (a record past the end)")
        offset = f.tell() if f.seekable() else offset
        yield timestamp, frame


def read_pcap(path: str) -> Iterator[Record]:
    """UDP datagrams and reassembled TCP bytes of a pcap/pcapng file, in capture order.

    A file cut or damaged part-way gives every record before the damage, then DecodeError."""
    f = open_bounded(path)
    try:
        try:
            head = f.read(4)
            f.seek(0)
            reader = dpkt.pcapng.Reader(f) if head == b"\x0a\x0d\x0d\x0a" else dpkt.pcap.Reader(f)
        except (ValueError, dpkt.UnpackError) as exc:
            raise ConfigError(f"{path}: not a pcap/pcapng capture ({exc})") from None
        linktype = reader.datalink()
        flows: dict[str, _TcpFlow] = {}
        for timestamp, frame in _frames(reader, f):
            ip = _link_packet(linktype, frame)
            if ip is None:
                continue
            segment = ip.data
            src_ip, dst_ip = _address(ip, "src"), _address(ip, "dst")
            if isinstance(segment, dpkt.udp.UDP):
                src, dst = (src_ip, segment.sport), (dst_ip, segment.dport)
                yield Record(
                    bytes(segment.data),
                    float(timestamp),
                    "udp",
                    src,
                    dst,
                    f"{src_ip}:{segment.sport}>{dst_ip}:{segment.dport}",
                )
            elif isinstance(segment, dpkt.tcp.TCP):
                src, dst = (src_ip, segment.sport), (dst_ip, segment.dport)
                flow = f"{src_ip}:{segment.sport}>{dst_ip}:{segment.dport}"
                state = flows.setdefault(flow, _TcpFlow())
                syn = bool(segment.flags & dpkt.tcp.TH_SYN)
                data = state.accept(segment.seq, syn, bytes(segment.data))
                if data:
                    yield Record(data, float(timestamp), "tcp", src, dst, flow)
    finally:
        if f is not sys.stdin.buffer:
            f.close()


CaptureReader = Callable[[str], Iterator[Record]]
"""A capture reader: a file name ("-": stdin) -> its records."""

SNIFF_BYTES = 64  # what a sniffer is shown of a file's start


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureFormat:
    """A protocol's own file format: the suffixes that name it, a sniffer that tells it from
    a file's first `SNIFF_BYTES` bytes (True: this format), and its reader."""

    name: str
    suffixes: tuple[str, ...]
    sniff: Callable[[bytes], bool]
    read: CaptureReader


def sniff_format(path: str, formats: Iterable[CaptureFormat]) -> CaptureFormat | None:
    """The format a file is in: by its suffix, else by its first bytes; None for neither
    (stdin is never read here: its bytes could not be put back)."""
    formats = tuple(formats)
    suffix = Path(path).suffix.lower()
    named = next((f for f in formats if suffix in f.suffixes), None)
    if named is not None or path == "-" or not formats:
        return named
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return None  # the reader says what is wrong with it
    return next((f for f in formats if f.sniff(head)), None)


def reader_for(
    path: str, formats: Iterable[CaptureFormat], default: CaptureReader
) -> CaptureReader:
    """The reader of `path`: its format's (`sniff_format`), else `default`."""
    found = sniff_format(path, formats)
    return default if found is None else found.read


def read_capture(path: str) -> Iterator[Record]:
    """pcap/pcapng if the file says so, otherwise a raw one-direction stream."""
    if not Path(path).exists() and path != "-":
        raise ConfigError(f"no such file: {path}")
    return read_pcap(path) if is_pcap(path) else read_stream(path)


BATCH = 1024  # records handed over at once when a file is read as fast as possible


async def batches(records: Iterable[Record], speed: float = 0.0) -> AsyncIterator[list[Record]]:
    """A file source's records in batches, so its session and adapter work in bulk.

    `speed` 0: as fast as they decode, `BATCH` records at a time, yielding to the event loop
    between batches. `speed` > 0: the recorded pacing divided by `speed` (a batch is what falls
    due before the next wait); records without a time are not waited for. A reader's
    DecodeError (a cut file) comes after the batch of the records before it.
    """
    first: tuple[float, float] | None = None  # (record time, loop time) of the first record
    batch: list[Record] = []
    try:
        for record in records:
            if speed > 0 and record.time is not None:
                if first is None:
                    first = (record.time, monotonic())
                delay = first[1] + (record.time - first[0]) / speed - monotonic()
                if delay > 0:
                    if batch:
                        yield batch
                        batch = []
                    await asyncio.sleep(delay)
            batch.append(record)
            if len(batch) >= BATCH:
                yield batch
                batch = []
                await asyncio.sleep(0)
    except DecodeError:  # damage ends the records: hand over the whole ones before it first
        if batch:
            yield batch
        raise
    if batch:
        yield batch
