"""SpyGlass codec: literal bytes of every packet type, limits, and hypothesis properties."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spyglass_strategies import PROFILE, packets

from robowire.errors import DecodeError
from robowire.protocols.spyglass import codec as c

# Header of a packet from node 0x0102 at 1243547390.944 s, position (748, 621, -3).
TAIL = bytes.fromhex("0102 4a1f06fe 03b0 02ec 026d fffd")


def head(length: int, syntax: int, semantic: int) -> bytes:
    return struct.pack(">HBBB", length, 2, syntax, semantic) + TAIL


HEADER_FIELDS = dict(sender=0x0102, seconds=1243547390, milliseconds=944, x=748, y=621, z=-3)


def both_ways(data: bytes, packet: c.SpyglassPacket, profile: c.SemanticProfile = PROFILE) -> None:
    assert c.decode(data, profile=profile) == packet
    assert c.encode(packet) == data


def test_header_layout() -> None:
    packet = c.decode(head(17, 0, 99))
    assert packet == c.StdPacket(semantic_type=99, payload=b"", **HEADER_FIELDS)
    assert packet.time == pytest.approx(1243547390.944)
    assert packet.position == (748, 621, -3)
    assert c.HEADER_SIZE == 19


def test_neighborhood() -> None:
    data = head(17 + 6, 2, 10) + bytes.fromhex("0025 0028 0011")
    both_ways(data, c.NeighborhoodPacket(semantic_type=10, neighbors=(37, 40, 17), **HEADER_FIELDS))


def test_data_uint8_and_every_list_syntax() -> None:
    both_ways(
        head(18, 1, 20) + b"\x17",
        c.DataPacket(
            semantic_type=20, syntax_type=c.SyntaxType.UINT8_LIST, values=(23,), **HEADER_FIELDS
        ),
    )
    cases = {
        c.SyntaxType.UINT16_LIST: (bytes.fromhex("ffff 0001"), (65535, 1)),
        c.SyntaxType.INT16_LIST: (bytes.fromhex("ffff 0001"), (-1, 1)),
        c.SyntaxType.UINT32_LIST: (bytes.fromhex("ffffffff"), (4294967295,)),
        c.SyntaxType.INT64_LIST: (bytes.fromhex("fffffffffffffffe"), (-2,)),
        c.SyntaxType.FLOAT_LIST: (bytes.fromhex("3fc00000 c0200000"), (1.5, -2.5)),
    }
    for syntax, (payload, values) in cases.items():
        packet = c.DataPacket(semantic_type=77, syntax_type=syntax, values=values, **HEADER_FIELDS)
        both_ways(head(17 + len(payload), syntax, 77) + payload, packet)


def test_std_keeps_raw_payload() -> None:
    both_ways(
        head(20, 0, 5) + b"abc", c.StdPacket(semantic_type=5, payload=b"abc", **HEADER_FIELDS)
    )


def test_variable_list() -> None:
    payload = bytes.fromhex(
        "01 07  02 0102  03 fffe  04 00000010  05 0000000000000003  06 3f800000"
    )
    items = (
        (c.SyntaxType.UINT8_LIST, 7),
        (c.SyntaxType.UINT16_LIST, 258),
        (c.SyntaxType.INT16_LIST, -2),
        (c.SyntaxType.UINT32_LIST, 16),
        (c.SyntaxType.INT64_LIST, 3),
        (c.SyntaxType.FLOAT_LIST, 1.0),
    )
    packet = c.VariableListPacket(semantic_type=10, items=items, **HEADER_FIELDS)
    both_ways(head(17 + len(payload), 7, 10) + payload, packet)
    assert packet.values == (7, 258, -2, 16, 3, 1.0)


@pytest.mark.parametrize("tag", [0, 7, 8, 255])
def test_variable_unknown_tag(tag: int) -> None:
    data = head(17 + 3, 7, 1) + bytes([1, 5, tag])
    with pytest.raises(DecodeError, match=f"unknown variable-list type tag {tag}") as info:
        c.decode(data)
    assert info.value.offset == 21


def test_variable_item_cut_off() -> None:
    with pytest.raises(DecodeError, match="cut off"):
        c.decode(head(17 + 2, 7, 1) + bytes([4, 0]))


def test_coordinates_2d_and_3d() -> None:
    payload = bytes.fromhex("0000 0000 03e8 0000 03e8 03e8")
    both_ways(
        head(17 + 12, 3, 30) + payload,
        c.CoordinatesList2Packet(
            semantic_type=30, points=((0, 0), (1000, 0), (1000, 1000)), **HEADER_FIELDS
        ),
    )
    both_ways(
        head(17 + 12, 3, 31) + payload,
        c.CoordinatesList3Packet(
            semantic_type=31, points=((0, 0, 1000), (0, 1000, 1000)), **HEADER_FIELDS
        ),
    )
    with pytest.raises(DecodeError, match="not \\(x, y\\) pairs"):
        c.decode(head(17 + 6, 3, 30) + payload[:6])
    with pytest.raises(DecodeError, match="triples"):
        c.decode(head(17 + 8, 3, 31) + payload[:8], profile=PROFILE)


def test_trajectory_3d_from_the_demo_recording() -> None:
    values = (-10000, 10000, 0, 10, 10000, 10000, 0, 10, 20000, 10000, 0, 10, 10000, 20000, 0)
    payload = struct.pack(">15h", *values)
    packet = c.TrajectoryPacket3(
        semantic_type=40,
        points=((-10000, 10000, 0), (10000, 10000, 0), (20000, 10000, 0), (10000, 20000, 0)),
        durations=(10, 10, 10),
        **HEADER_FIELDS,
    )
    both_ways(head(17 + 30, 3, 40) + payload, packet, c.DEFAULT_PROFILE)


def test_trajectory_2d() -> None:
    payload = struct.pack(">5h", 1, 2, 3, 4, 5)
    both_ways(
        head(27, 3, 41) + payload,
        c.TrajectoryPacket2(
            semantic_type=41, points=((1, 2), (4, 5)), durations=(3,), **HEADER_FIELDS
        ),
    )


@pytest.mark.parametrize(("semantic", "count"), [(40, 3), (40, 6), (40, 12), (41, 4), (41, 7)])
def test_trajectory_count_rules(semantic: int, count: int) -> None:
    data = head(17 + 2 * count, 3, semantic) + bytes(2 * count)
    with pytest.raises(DecodeError, match="trajectory") as info:
        c.decode(data, profile=PROFILE)
    assert info.value.offset == 19


def test_trajectory_negative_duration() -> None:
    data = head(27, 3, 41) + struct.pack(">5h", 1, 2, -3, 4, 5)
    with pytest.raises(DecodeError, match="negative"):
        c.decode(data, profile=PROFILE)


def test_node_link() -> None:
    both_ways(
        head(21, 2, 11) + bytes.fromhex("0007 0063"),
        c.NodeLinkPacket(semantic_type=11, destination=7, values=(99,), **HEADER_FIELDS),
    )
    with pytest.raises(DecodeError, match="destination"):
        c.decode(head(17, 2, 11), profile=PROFILE)


def test_wrong_syntax_for_semantic_type_is_generic_data() -> None:
    packet = c.decode(head(18, 1, 10) + b"\x05")
    assert packet == c.DataPacket(
        semantic_type=10, syntax_type=c.SyntaxType.UINT8_LIST, values=(5,), **HEADER_FIELDS
    )


def test_odd_neighbourhood_bytes() -> None:
    with pytest.raises(DecodeError, match="not a whole UINT16_LIST"):
        c.decode(head(20, 2, 10) + b"\x00\x01\x02")


def test_wrong_version_and_unknown_syntax() -> None:
    data = bytearray(head(17, 0, 1))
    data[2] = 1
    with pytest.raises(DecodeError, match="version 1, expected 2") as info:
        c.decode(bytes(data))
    assert info.value.offset == 2
    data[2], data[3] = 2, 8
    with pytest.raises(DecodeError, match="unknown syntax type 8") as info:
        c.decode(bytes(data))
    assert info.value.offset == 3


def test_length_rule_strict_and_trusting() -> None:
    good = head(18, 1, 20) + b"\x17"
    for wrong in (17, 19, 18 + 2):
        data = struct.pack(">H", wrong) + good[2:]
        with pytest.raises(DecodeError, match="does not match"):
            c.decode(data)
        assert c.decode(data, strict_length=False) == c.decode(good)


@pytest.mark.parametrize("size", [0, 1, 4, 18])
def test_truncated(size: int) -> None:
    with pytest.raises(DecodeError, match="too short"):
        c.decode(head(18, 1, 20)[:size])


def test_oversized() -> None:
    payload = bytes(300)
    data = head(17 + 300, 1, 20) + payload
    assert len(c.decode(data).values) == 300  # type: ignore[union-attr]
    with pytest.raises(DecodeError, match="exceeds the limit of 255"):
        c.decode(data, max_size=255)
    with pytest.raises(ValueError, match="exceeds"):
        c.encode(
            c.DataPacket(
                semantic_type=1, sender=1, syntax_type=c.SyntaxType.UINT8_LIST, values=(0,) * 65519
            )
        )
    biggest = c.DataPacket(
        semantic_type=1, sender=1, syntax_type=c.SyntaxType.UINT8_LIST, values=(0,) * 65518
    )
    assert len(c.encode(biggest)) == c.MAX_PACKET_SIZE


def test_wisebed_prefix() -> None:
    packet = c.decode(head(18, 1, 20) + b"\x17")
    data = c.encode(packet, wisebed=True)
    assert data[0] == 0x6F and data[1:] == c.encode(packet)
    assert c.decode(data, wisebed=True) == packet
    with pytest.raises(DecodeError, match="WISEBED"):
        c.decode(data[1:], wisebed=True)


def test_encode_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match="out of range"):
        c.encode(c.NeighborhoodPacket(semantic_type=10, sender=1, neighbors=(70000,)))
    with pytest.raises(ValueError, match="header"):
        c.encode(c.NeighborhoodPacket(semantic_type=256, sender=1))
    with pytest.raises(ValueError, match="n - 1 durations"):
        c.encode(c.TrajectoryPacket2(semantic_type=41, sender=1, points=((0, 0),), durations=()))


def test_profile_parse_and_ranges() -> None:
    profile = c.SemanticProfile.parse(
        "112-113=trajectory-3d, 20=data:temperature:Cel, 60=node-link"
    )
    assert profile.interpretation(112) is c.Interpretation.TRAJECTORY_3D
    assert profile.interpretation(113) is c.Interpretation.TRAJECTORY_3D
    assert profile.interpretation(114) is c.Interpretation.DATA
    rule = profile.rule(20)
    assert rule is not None and (rule.name, rule.unit) == ("temperature", "Cel")
    with pytest.raises(ValueError, match="bad semantic profile entry"):
        c.SemanticProfile.parse("10=bogus")
    with pytest.raises(ValueError, match="bad semantic profile entry"):
        c.SemanticProfile.parse("300=data")


def test_split_and_next_packet() -> None:
    one = head(18, 1, 20) + b"\x17"
    two = head(17 + 4, 2, 10) + b"\x00\x01\x00\x02"
    stream = one + two + two[:7]
    starts, end, error = c.split(stream)
    assert (starts, end, error) == ([0, 20], 20 + len(two), None)
    assert c.decode_batch(stream, starts, end) == [c.decode(one), c.decode(two)]
    got = c.next_packet(stream, 20)
    assert got == (c.decode(two), len(two))
    assert c.next_packet(stream, end) is None
    assert c.next_packet(stream[:3]) is None


def test_split_stops_at_a_broken_header() -> None:
    one = head(18, 1, 20) + b"\x17"
    starts, end, error = c.split(one + b"\x00\x11\x03\x01")
    assert starts == [0] and end == 20
    assert error is not None and error.offset == 22 and "version 3" in error.reason
    _, _, error = c.split(one + b"\x00\x05\x02\x01")
    assert error is not None and "shorter than the header" in error.reason
    _, _, error = c.split(b"\x01\x00\x02\x01", max_size=255)
    assert error is not None and "limit of 255" in error.reason
    with pytest.raises(DecodeError, match="limit"):
        c.next_packet(b"\x01\x00\x02\x01", max_size=255)


def test_decode_batch_reports_payload_errors_in_place() -> None:
    good = head(18, 1, 20) + b"\x17"
    bad = head(20, 3, 40) + b"\x00\x01\x00"
    stream = good + bad + good
    starts, end, error = c.split(stream)
    assert error is None
    out = c.decode_batch(stream, starts, end)
    assert out[0] == out[2] == c.decode(good)
    assert isinstance(out[1], DecodeError) and out[1].offset == 20 + 19


@given(packets())
def test_round_trip(packet: c.SpyglassPacket) -> None:
    data = c.encode(packet)
    assert c.decode(data, profile=PROFILE) == packet
    starts, end, error = c.split(data + data)
    assert error is None and end == 2 * len(data)
    assert c.decode_batch(data + data, starts, end, profile=PROFILE) == [packet, packet]


@given(st.lists(packets(), max_size=30))
def test_batch_matches_single(batch: list[c.SpyglassPacket]) -> None:
    stream = b"".join(c.encode(p) for p in batch)
    starts, end, error = c.split(stream)
    assert error is None and end == len(stream)
    assert c.decode_batch(stream, starts, end, profile=PROFILE) == batch


@given(st.binary(max_size=80), st.booleans())
def test_random_bytes_raise_only_decode_error(data: bytes, strict: bool) -> None:
    with contextlib.suppress(DecodeError):
        c.decode(data, profile=PROFILE, strict_length=strict)
    starts, end, _ = c.split(data)
    for item in c.decode_batch(data, starts, end, profile=PROFILE):
        assert isinstance(item, c.SpyglassPacket | DecodeError)
    with contextlib.suppress(DecodeError):
        c.next_packet(data, profile=PROFILE)


@given(
    st.binary(min_size=1, max_size=60),
    st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7]),
    st.integers(0, 255),
)
def test_random_payloads_raise_only_decode_error(payload: bytes, syntax: int, sem: int) -> None:
    data = head(17 + len(payload), syntax, sem) + payload
    with contextlib.suppress(DecodeError):
        c.decode(data, profile=PROFILE)
