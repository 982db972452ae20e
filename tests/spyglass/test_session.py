"""SpyGlass stream session: whole and byte by byte, payload errors vs lost framing, sending."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spyglass_strategies import DATA, DEMO, PROFILE, packets

from robowire.errors import LocalProtocolError
from robowire.protocols.spyglass import codec as c
from robowire.protocols.spyglass import rec
from robowire.protocols.spyglass.codec import frame
from robowire.protocols.spyglass.events import PacketsReceived, packets_of
from robowire.protocols.spyglass.session import SpyglassSession, State
from robowire.wire import ConnectionLost, PacketDropped

NEIGHBOURS = c.NeighborhoodPacket(semantic_type=10, sender=7, neighbors=(1, 2, 3))
# Header fine, payload wrong for a 3-D trajectory (sem 40): 3 int16 values.
BAD_TRAJECTORY = bytes.fromhex("0017 02 03 28 0001 00000000 0000 0000 0000 0000 0001 0002 0003")


def test_whole_stream() -> None:
    session = SpyglassSession()
    events = session.feed(frame([DATA, NEIGHBOURS, DATA]), now=5.0)
    assert len(events) == 1 and isinstance(events[0], PacketsReceived)  # one read: one batch
    assert events[0].time == 5.0 and len(events[0]) == 3
    assert packets_of(events) == [DATA, NEIGHBOURS, DATA]
    assert events[0].packets.head["sender"].tolist() == [DATA.sender, 7, DATA.sender]
    assert session.stats.messages_in == 3 and not session.close_expected()


def test_byte_by_byte_gives_the_same_packets() -> None:
    stream = b"".join(r.data for r in rec.rec_records(DEMO))[:5000]
    whole = packets_of(SpyglassSession().feed(stream, 0.0))
    session = SpyglassSession()
    one_by_one: list[c.SpyglassPacket] = []
    for i in range(len(stream)):
        one_by_one += packets_of(session.feed(stream[i : i + 1], float(i)))
    assert one_by_one == whole and len(whole) > 100
    assert session.stats.bytes_in == 5000


def test_payload_error_drops_one_packet_and_goes_on() -> None:
    session = SpyglassSession()
    stream = c.encode(DATA) + BAD_TRAJECTORY + c.encode(DATA)
    events = session.feed(stream, 1.0)
    assert len(events) == 2  # the drop, then the batch of the packets around it
    dropped = events[0]
    assert isinstance(dropped, PacketDropped)
    assert dropped.offset == 20 + 19 and dropped.size == len(BAD_TRAJECTORY)
    assert "3-D trajectory" in dropped.reason
    assert packets_of(events) == [DATA, DATA]
    assert session.stats.dropped == 1 and not session.close_expected()


def test_odd_neighbourhood_is_a_payload_error() -> None:
    odd = bytes.fromhex("0014 02 02 0a 0001 00000000 0000 0000 0000 0000 000102")
    events = SpyglassSession().feed(odd + c.encode(DATA), 0.0)
    assert isinstance(events[0], PacketDropped) and packets_of(events) == [DATA]


def test_broken_header_loses_the_framing() -> None:
    session = SpyglassSession()
    broken = bytearray(c.encode(DATA))
    broken[2] = 3  # version 3
    events = session.feed(c.encode(DATA) + bytes(broken) + c.encode(DATA), 2.0)
    assert packets_of(events) == [DATA]
    assert isinstance(events[1], PacketDropped) and "version 3" in events[1].reason
    assert events[1].offset == 22
    assert isinstance(events[2], ConnectionLost) and "framing lost" in events[2].reason
    assert session.close_expected() and session.state is State.CLOSED
    assert session.feed(c.encode(DATA), 3.0) == []


def test_impossible_length_and_limit() -> None:
    for data in (b"\x00\x03\x02\x01", b"\xff\xff\x02\x01"):
        session = SpyglassSession(max_size=255)
        events = session.feed(data, 0.0)
        assert [type(e) for e in events] == [PacketDropped, ConnectionLost]
        assert session.close_expected()


def test_unknown_syntax_found_at_the_fourth_byte() -> None:
    session = SpyglassSession()
    assert session.feed(b"\x00\x11\x02", 0.0) == []
    events = session.feed(b"\x09", 0.0)
    assert "unknown syntax type 9" in events[0].reason and session.close_expected()


def test_eof() -> None:
    session = SpyglassSession()
    assert session.feed(c.encode(DATA)[:10], 0.0) == []
    events = session.feed_eof(1.0)
    assert [type(e) for e in events] == [PacketDropped, ConnectionLost]
    assert session.close_expected()
    clean = SpyglassSession()
    assert [type(e) for e in clean.feed_eof(0.0)] == [ConnectionLost]


def test_sending_side() -> None:
    sender = SpyglassSession()
    sender.send(DATA)
    sender.send_many([NEIGHBOURS])
    sender.send_encoded(c.encode(DATA))
    out = sender.data_to_send()
    assert out == frame([DATA, NEIGHBOURS, DATA]) and sender.data_to_send() == b""
    assert sender.stats.messages_out == 3
    assert packets_of(SpyglassSession().feed(out, 0.0)) == [DATA, NEIGHBOURS, DATA]
    assert sender.tick(0.0) == [] and sender.next_deadline() is None
    small = SpyglassSession(max_size=30)
    try:
        small.send(
            c.DataPacket(
                semantic_type=1, sender=1, syntax_type=c.SyntaxType.UINT8_LIST, values=(0,) * 20
            )
        )
    except ValueError as exc:
        assert "limit of 30" in str(exc)
    else:
        raise AssertionError("expected ValueError")


def test_a_send_once_closed_raises() -> None:
    session = SpyglassSession()
    session.feed_eof(0.0)
    with pytest.raises(LocalProtocolError, match="CLOSED"):
        session.send(DATA)
    assert session.data_to_send() == b""


@given(st.lists(packets(), max_size=15), st.data())
def test_round_trip_in_random_chunks(batch: list[c.SpyglassPacket], data: st.DataObject) -> None:
    stream = frame(batch)
    session = SpyglassSession(profile=PROFILE)
    got: list[c.SpyglassPacket] = []
    pos = 0
    while pos < len(stream):
        size = data.draw(st.integers(1, 64))
        got += packets_of(session.feed(stream[pos : pos + size], 0.0))
        pos += size
    assert got == batch


@given(st.lists(st.binary(max_size=40), max_size=8))
def test_random_bytes_never_raise(chunks: list[bytes]) -> None:
    session = SpyglassSession(profile=PROFILE)
    for chunk in chunks:
        for event in session.feed(chunk, 0.0):
            assert isinstance(event, PacketsReceived | PacketDropped | ConnectionLost)
    session.feed_eof(0.0)
    assert session.close_expected()
