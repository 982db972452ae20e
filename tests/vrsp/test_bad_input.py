"""Every bad-input case of the issue: the codec raises DecodeError (with where and why), and
the receiver counts and drops the datagram and goes on."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from robowire.errors import DecodeError
from robowire.protocols.vrsp.codec import DefinitionTable, decode_packet, encode_data, encode_def
from robowire.protocols.vrsp.events import SwarmFrame
from robowire.protocols.vrsp.session import ReceiverSession
from robowire.wire import PacketDropped

from .conftest import PLAIN, as_data, blocks_of, swarm_of

ROOT = struct.pack("<ddd", 47.0, 8.0, 400.0)


def def_datagram(blocks: list[tuple[int, bytes, list[int]]], count: int | None = None) -> bytes:
    """A DEF written out by hand: (device count, JSON, ids) per block."""
    total = sum(len(ids) for _, _, ids in blocks) if count is None else count
    out = b"\x08VRSP_DEF\x01" + struct.pack("<I", 9) + struct.pack("<I", total) + ROOT
    for n, text, ids in blocks:
        out += struct.pack("<II", n, len(text)) + text + struct.pack(f"<{len(ids)}H", *ids)
    return out


GOOD_JSON = b'{"DefinitionID":0,"DeviceModel":"X1"}'
GOOD_DEF = def_datagram([(2, GOOD_JSON, [1, 2])])
TABLE = DefinitionTable.build(9, (47.0, 8.0, 400.0), [(PLAIN, np.array([1, 2], np.uint16))])
GOOD_DATA = encode_data(TABLE, swarm_of([1, 2]), 1)[0]

CASES = {
    "unknown identifier (length-prefixed)": (b"\x08VRSP_FOO" + GOOD_DEF[9:], "unknown packet"),
    "unknown identifier (NUL-terminated)": (b"VRSP_XYZ\x00\x01" + bytes(4), "unknown packet"),
    "not VRSP at all": (b"HELLO WORLD", "not a VRSP packet"),
    "version 2": (GOOD_DEF[:9] + b"\x02" + GOOD_DEF[10:], "version 2"),
    "version 0 in DATA": (GOOD_DATA[:10] + b"\x00" + GOOD_DATA[11:], "version 0"),
    "JSON length past the end": (
        GOOD_DEF[:42] + struct.pack("<I", 5000) + GOOD_DEF[46:],
        "past the datagram",
    ),
    "invalid UTF-8": (def_datagram([(2, b'{"DefinitionID":0,"M":"\xff"}', [1, 2])]), "UTF-8"),
    "invalid JSON": (def_datagram([(2, b'{"DefinitionID":0,', [1, 2])]), "not JSON"),
    "unknown DefType": (
        def_datagram([(1, b'{"DefinitionID":0,"PayloadDefinitions":[{"DefType":"Smoke"}]}', [1])]),
        "unknown DefType 'Smoke'",
    ),
    "ids past the end": (def_datagram([(5, GOOD_JSON, [1, 2])]), "device ids past"),
    "blocks hold more devices than the device count": (
        def_datagram([(2, GOOD_JSON, [1, 2])], count=1),
        "hold 2 devices, device count is 1",
    ),
    "a device in two blocks": (
        def_datagram([(1, GOOD_JSON, [1]), (1, GOOD_JSON.replace(b"0", b"1"), [1])]),
        "appears twice",
    ),
    "DEF cut short": (GOOD_DEF[:20], "cut short"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_packets_raise_decode_error(case: str) -> None:
    data, reason = CASES[case]
    with pytest.raises(DecodeError) as error:
        decode_packet(data)
    assert reason in error.value.reason
    assert error.value.protocol == "vrsp"
    assert 0 <= error.value.offset <= len(data)


@pytest.mark.parametrize("case", list(CASES))
def test_bad_packets_are_counted_and_dropped_and_the_receiver_goes_on(case: str) -> None:
    data, reason = CASES[case]
    receiver = ReceiverSession()
    receiver.feed_datagram(GOOD_DEF, ("a", 1), 0.0)
    events = receiver.feed_datagram(data, ("b", 2), 0.0)
    (dropped,) = events
    assert isinstance(dropped, PacketDropped) and reason in dropped.reason
    assert receiver.stats.dropped == 1
    (frame,) = receiver.feed_datagram(GOOD_DATA, ("a", 1), 0.0)  # the good peer is unharmed
    assert isinstance(frame, SwarmFrame) and frame.swarm.ids.tolist() == [1, 2]


def test_a_device_id_absent_from_the_def_drops_the_datagram() -> None:
    other = DefinitionTable.build(9, (47.0, 8.0, 400.0), blocks_of([1, 2, 3], []))
    data = encode_data(other, swarm_of([3]), 1)[0]
    with pytest.raises(DecodeError, match="device id 3 is not in VRSP_DEF"):
        TABLE.decode(as_data(data).body, 1)
    receiver = ReceiverSession()
    receiver.feed_datagram(GOOD_DEF, ("a", 1), 0.0)
    (dropped,) = receiver.feed_datagram(data, ("a", 1), 0.0)
    assert isinstance(dropped, PacketDropped) and "not in VRSP_DEF" in dropped.reason


@pytest.mark.parametrize("cut", [1, 5, 14])
def test_records_cut_short_are_a_decode_error(cut: int) -> None:
    data = GOOD_DATA[:-cut]
    with pytest.raises(DecodeError):
        TABLE.decode(as_data(data).body, 2)
    receiver = ReceiverSession()
    receiver.feed_datagram(GOOD_DEF, ("a", 1), 0.0)
    (dropped,) = receiver.feed_datagram(data, ("a", 1), 0.0)
    assert isinstance(dropped, PacketDropped)
    assert receiver.stats.dropped == 1


def test_a_record_count_that_disagrees_with_the_bytes_is_a_decode_error() -> None:
    packet = as_data(GOOD_DATA)
    with pytest.raises(DecodeError, match="after the 1 records"):
        TABLE.decode(packet.body, 1)
    with pytest.raises(DecodeError, match="2 records, the header says 3"):
        TABLE.decode(packet.body, 3)


def test_unknown_option_flags_are_a_decode_error() -> None:
    body = bytearray(as_data(GOOD_DATA).body)
    body[14] = 0x10
    with pytest.raises(DecodeError, match="unknown option flags 0x10"):
        TABLE.decode(bytes(body), 2)


def test_a_def_with_fewer_devices_than_its_count_waits_for_more_parts() -> None:
    """Blocks holding fewer devices than the count: a part of a larger DEF (the profile);
    the devices it names decode, the others are absent until the rest arrives."""
    first = def_datagram([(1, GOOD_JSON, [1])], count=2)
    second = def_datagram([(1, GOOD_JSON, [2])], count=2)
    receiver = ReceiverSession()
    receiver.feed_datagram(first, ("a", 1), 0.0)
    assert receiver.table is not None and not receiver.table.complete
    (dropped,) = receiver.feed_datagram(GOOD_DATA, ("a", 1), 0.0)
    assert isinstance(dropped, PacketDropped) and "device id 2" in dropped.reason
    receiver.feed_datagram(second, ("a", 1), 0.0)
    assert receiver.table.complete
    (frame,) = receiver.feed_datagram(encode_data(TABLE, swarm_of([1, 2]), 2)[0], ("a", 1), 0.0)
    assert isinstance(frame, SwarmFrame)


def test_encoder_refuses_ids_it_did_not_define() -> None:
    with pytest.raises(ValueError, match="not in the definition"):
        encode_data(TABLE, swarm_of([1, 7]), 1)
    assert encode_def(1, (0, 0, 0), [(PLAIN, np.array([1], np.uint16))])
