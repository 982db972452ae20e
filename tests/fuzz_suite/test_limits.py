"""A length or count read from the wire is checked before anything is allocated for it.

Each case hands a decoder or session a few bytes whose length (or count) field claims the
largest value its type holds, and measures the peak of Python's allocations (tracemalloc,
which numpy reports to) while it runs: the claim is refused (DecodeError, or a counted drop)
and the peak stays under a megabyte. The table of these limits is docs/security.md.
"""

from __future__ import annotations

import contextlib
import struct
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from fuzzing import as_file, mcap_seed, pcap_seeds, spyglass_stream, vrpn_s2c_seeds
from robowire.errors import DecodeError, RobowireError

MIB = 1 << 20


def peak(call: Callable[[], Any]) -> tuple[Any, int]:
    """What `call` returned (or the RobowireError it raised) and its allocation peak (on a
    second run: the first imports modules and fills caches, which is not the case's cost)."""
    with contextlib.suppress(RobowireError):
        call()
    tracemalloc.start()
    try:
        try:
            result: Any = call()
        except RobowireError as exc:
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def vrpn_frame() -> Any:
    from robowire.protocols.vrpn.codec import decode_frame

    return decode_frame(struct.pack(">IIIiiI", 0xFFFFFFFF, 0, 0, 0, 0, 0) + bytes(8))


def vrpn_session() -> Any:
    from robowire.protocols.vrpn.session import Role, VrpnSession

    session = VrpnSession(Role.CLIENT, now=0.0)
    cookie = vrpn_s2c_seeds()[0][:24]
    events = session.feed(cookie + struct.pack(">IIIiiI", 0xFFFFFFF0, 0, 0, 0, 0, 0), 1.0)
    events += session.feed(bytes(4096), 1.0)
    assert session.close_expected() or session.stats.dropped, events
    return events


def vrpn_log() -> Any:
    from robowire.protocols.vrpn.logfile import iter_log

    cookie = vrpn_s2c_seeds()[0][:24]
    return list(iter_log(cookie + struct.pack(">iiIIiI", -1, 0, 0, 0, 0x7FFFFFFF, 0)))


def spyglass_session() -> Any:
    from robowire.protocols.spyglass.session import SpyglassSession

    session = SpyglassSession()
    head = bytearray(spyglass_stream()[:30])
    head[0:2] = b"\xff\xff"  # the largest length the u16 holds: 65,537 bytes in all
    session.feed(bytes(head), 1.0)
    assert len(session._buffer) <= 0xFFFF + 2
    return session.feed_eof(2.0)


def ugcs_reader() -> Any:
    from robowire.protocols.ugcs.codec import FrameReader

    reader = FrameReader()
    _, error = reader.feed(b"\xff" * 9 + b"\x7f")  # a varint of 2**63 - 1
    assert isinstance(error, DecodeError) and reader.pending == 0
    return error


def ugcs_session() -> Any:
    from robowire.protocols.ugcs.session_ucs import UcsSession

    session = UcsSession(0.0, peer_id=1)
    events = session.feed(b"\xc1\x84\x3d" + bytes(100), 1.0)  # 1,000,001: one over
    assert session.stats.dropped and session.close_expected(), events
    return events


def xrp_datagram() -> Any:
    from robowire.protocols.xrp.codec import decode_packet

    return decode_packet(b"\x00\x01\x00\x00" + b"\xff\x12" + bytes(10))


def vrsp_def() -> Any:
    from fuzzing import vrsp_def_head
    from robowire.protocols.vrsp.codec import decode_packet

    claim = struct.pack("<II", 0xFFFFFFFF, 0xFFFFFFFF)  # ids and JSON length
    return decode_packet(vrsp_def_head() + claim + b"{}")


def vrsp_data() -> Any:
    from fuzzing import vrsp_def as def_of
    from robowire.protocols.vrsp.codec import DefinitionTable

    table = DefinitionTable.from_def(def_of())
    return table.decode(b"\x01\x00" + bytes(10), 0xFFFF)


def zenoh_state() -> Any:
    from robowire.zenoh import codec

    head = b"RWZ\x01\x01" + struct.pack("<dIH", 0.0, 0xFFFFFFFF, 0xFFFF)
    return codec.decode(head + bytes(64))


def viewer_frame() -> Any:
    from robowire.viewer.frames import BLOCK, HEADER, decode_frame

    return decode_frame(HEADER.pack(1, 0, 0xFFFF, 0, 0.0) + BLOCK.pack(0, 1, 0xFFFFFFFF))


def pcap_record() -> Any:
    from robowire.capture import read_pcap

    data = pcap_seeds()[0][:24] + struct.pack("<IIII", 1, 0, 0x7FFFFFF0, 0x7FFFFFF0) + bytes(64)
    for path in as_file(data, ".pcap"):
        return list(read_pcap(path))
    return None


def mcap_record() -> Any:
    from robowire.recording.reader import messages

    seed = mcap_seed()
    data = seed[:8] + b"\x01" + struct.pack("<Q", 0x7FFFFFFFFFFFFFF0) + bytes(64)
    for path in as_file(data, ".mcap"):
        return list(messages(path))
    return None


CASES: dict[str, Callable[[], Any]] = {
    "vrpn frame length 2**32-1": vrpn_frame,
    "vrpn session: frame length near 2**32": vrpn_session,
    "vrpn log entry length 2**31-1": vrpn_log,
    "spyglass length 0xFFFF (the format's most)": spyglass_session,
    "ugcs varint 2**63-1": ugcs_reader,
    "ugcs session: frame over MAX_FRAME": ugcs_session,
    "xrp block size 255 past the datagram": xrp_datagram,
    "vrsp DEF ids and JSON length 2**32-1": vrsp_def,
    "vrsp DATA record count 65535": vrsp_data,
    "zenoh STATE 2**32-1 rows x 65535 columns": zenoh_state,
    "viewer block of 2**32-1 devices": viewer_frame,
    "pcap record caplen near 2**31": pcap_record,
    "mcap record length near 2**63": mcap_record,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_huge_length_is_refused_before_allocating(case: str) -> None:
    result, most = peak(CASES[case])
    assert most < MIB, f"{case}: peak {most} bytes"
    if not case.startswith(("vrpn session", "spyglass", "ugcs")):
        assert isinstance(result, RobowireError), result
