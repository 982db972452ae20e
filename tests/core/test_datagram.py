"""The datagram templates' sans-I/O parts: `StatelessSession` (a protocol with no state) and
`datagram_records` (a datagram protocol's capture reader). The sockets are exercised by VRSP's
and XRP's tests and by tests/core/test_add_a_protocol.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from robowire.errors import ConfigError, DecodeError
from robowire.protocols.datagram import StatelessSession, datagram_records
from robowire.wire import PacketDropped


def decode(data: bytes) -> list[int]:
    """Datagrams of b"N" and digits: each digit one message."""
    if not data.startswith(b"N") or not data[1:].isdigit():
        raise DecodeError("test", 0, "not N and digits")
    return [int(c) for c in data[1:].decode()]


def test_a_stateless_session_decodes_each_datagram_and_counts_what_does_not() -> None:
    session = StatelessSession("test", decode)
    assert session.feed_datagram(b"N123", ("127.0.0.1", 9), 1.0) == [1, 2, 3]
    (dropped,) = session.feed_datagram(b"xx", ("127.0.0.1", 9), 1.1)
    assert dropped == PacketDropped(protocol="test", reason="not N and digits", size=2)
    stats = session.stats
    assert (stats.messages_in, stats.bytes_in, stats.dropped) == (3, 6, 1)
    assert session.tick(5.0) == [] and session.datagrams_to_send() == []
    assert session.next_deadline() is None


def test_a_raw_file_is_one_datagram_and_a_longer_one_is_refused(tmp_path: Path) -> None:
    raw = tmp_path / "one.bin"
    raw.write_bytes(b"N42")
    (record,) = datagram_records(str(raw), max_datagram=3)
    assert (record.data, record.transport, record.flow) == (b"N42", "udp", "raw")
    with pytest.raises(ConfigError, match="more than 2 bytes: not one datagram"):
        list(datagram_records(str(raw), max_datagram=2))
    with pytest.raises(ConfigError, match="no such file"):
        datagram_records(str(tmp_path / "missing.pcap"))


def test_a_pcap_gives_its_udp_datagrams_only() -> None:
    capture = Path(__file__).parents[1] / "data" / "captures" / "vrsp" / "lightshow.pcap"
    records = list(datagram_records(str(capture)))
    assert len(records) == 22 and {r.transport for r in records} == {"udp"}
    assert all(r.src is not None and r.dst is not None for r in records)
