"""UgCS framing: LEB128 both ways, the incremental reader, bad input, and Field_value values."""

from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robowire.errors import DecodeError
from robowire.protocols.ugcs import codec
from robowire.protocols.ugcs.codec import FrameReader, ValueKind, defs, pb

# --- LEB128 (values worked out by hand from the 7-bit-group rule) ------------------------------


@pytest.mark.parametrize(
    ("n", "wire"),
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (560, "b004"),  # the sheet: hello-world Register_device prefix
        (4086, "f61f"),  # the sheet: full Vehicle Register_device prefix
        (1_000_000, "c0843d"),
        (2**64 - 1, "ffffffffffffffffff01"),
    ],
)
def test_leb128_known_values(n: int, wire: str) -> None:
    assert codec.leb128(n).hex() == wire


def test_leb128_refuses_what_does_not_fit() -> None:
    with pytest.raises(ValueError):
        codec.leb128(-1)
    with pytest.raises(ValueError):
        codec.leb128(2**64)


# --- encode ---------------------------------------------------------------------------------


def test_encode_a_ping_reply_byte_for_byte() -> None:
    msg = pb.Vsm_message(device_id=0, message_id=5)
    msg.device_response.code = defs.STATUS_OK
    # 08 00 (device_id 0 is written), 10 05, 42 02 08 00 (device_response{code 0})
    assert codec.encode(msg).hex() == "08" + "0800" + "1005" + "42020800"


def test_encode_refuses_unset_required_fields() -> None:
    with pytest.raises(ValueError, match="device_id"):
        codec.encode(pb.Vsm_message(message_id=2))
    msg = pb.Vsm_message(device_id=1)
    msg.device_status.telemetry_fields.add(field_id=3)  # no ms_since_epoch, no value
    with pytest.raises(ValueError, match="ms_since_epoch"):
        codec.encode(msg)
    msg = pb.Vsm_message(device_id=1)
    msg.device_response.SetInParent()  # Device_response.code is required
    with pytest.raises(ValueError, match="code"):
        codec.encode(msg)


def test_encode_refuses_an_oversized_frame() -> None:
    msg = pb.Vsm_message(device_id=1)
    msg.device_status.status_messages.append("x" * codec.MAX_FRAME)
    with pytest.raises(ValueError, match="limit"):
        codec.encode(msg)


# --- decode ---------------------------------------------------------------------------------


def _fed(reader: FrameReader, data: bytes) -> tuple[list[pb.Vsm_message], DecodeError | None]:
    msgs, error = reader.feed(data)
    return list(msgs), error


def _ping(message_id: int) -> pb.Vsm_message:
    return pb.Vsm_message(device_id=0, message_id=message_id, response_required=True)


def test_zero_length_frames_are_skipped() -> None:
    wire = b"\x00" + codec.encode(_ping(1)) + b"\x00\x00" + codec.encode(_ping(2)) + b"\x00"
    assert [m.message_id for m in codec.decode_frames(wire)] == [1, 2]
    reader = FrameReader()
    msgs, error = reader.feed(wire)
    assert error is None
    assert [m.message_id for m in msgs] == [1, 2]


def test_missing_required_field_is_a_decode_error() -> None:
    # the sheet's frame: message_id only, no device_id -> the SDK closes the connection
    with pytest.raises(DecodeError) as err:
        codec.decode_frames(bytes.fromhex("021005"))
    assert err.value.protocol == "ugcs"
    assert err.value.offset == 1
    msgs, error = FrameReader().feed(bytes.fromhex("021005"))
    assert list(msgs) == []
    assert isinstance(error, DecodeError)


def test_over_a_million_bytes_is_refused_before_the_payload_arrives() -> None:
    reader = FrameReader()
    msgs, error = reader.feed(codec.leb128(1_000_001))
    assert list(msgs) == []
    assert error is not None
    assert "limit" in error.reason
    assert reader.pending == 0
    # exactly the limit is fine: it waits for the payload
    reader = FrameReader()
    assert _fed(reader, codec.leb128(1_000_000)) == ([], None)


def test_varint_longer_than_ten_bytes() -> None:
    _, error = FrameReader().feed(b"\x80" * 11)
    assert error is not None
    assert "10 bytes" in error.reason


def test_varint_over_64_bits() -> None:
    _, error = FrameReader().feed(b"\xff" * 9 + b"\x02")
    assert error is not None
    assert "2**64" in error.reason


def test_a_truncated_varint_waits_in_a_stream_and_fails_in_a_whole_buffer() -> None:
    assert _fed(FrameReader(), b"\x80") == ([], None)
    with pytest.raises(DecodeError, match="truncated"):
        codec.decode_frames(b"\x80")
    with pytest.raises(DecodeError, match="truncated"):
        codec.decode_frames(b"\x05\x08\x00")


def test_messages_before_a_bad_frame_are_kept_and_the_reader_then_stops() -> None:
    good = codec.encode(_ping(7))
    reader = FrameReader()
    msgs, error = reader.feed(good + bytes.fromhex("021005") + good)
    assert [m.message_id for m in msgs] == [7]
    assert error is not None
    assert error.offset == len(good) + 1  # the stream offset of the bad payload
    assert reader.failed
    assert _fed(reader, good) == ([], None)


def test_error_offsets_count_from_the_start_of_the_stream() -> None:
    good = codec.encode(_ping(7))
    reader = FrameReader()
    reader.feed(good)
    _, error = reader.feed(b"\x80" * 11)
    assert error is not None
    assert error.offset == len(good)


@given(st.lists(st.integers(0, 2**32 - 1), max_size=20), st.data())
def test_round_trip_in_any_chunking(ids: list[int], data: st.DataObject) -> None:
    msgs = [_ping(i) for i in ids]
    for m in msgs[::2]:
        m.device_status.status_messages.append("x" * (m.message_id % 300))
    wire = codec.encode_many(msgs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    reader = FrameReader()
    got: list[pb.Vsm_message] = []
    start = 0
    for cut in [*cuts, len(wire)]:
        part, error = reader.feed(wire[start:cut])
        assert error is None
        got.extend(part)
        start = cut
    assert got == msgs
    assert reader.pending == 0
    assert codec.decode_frames(wire) == msgs


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes_only_ever_give_decode_error(data: bytes) -> None:
    reader = FrameReader()
    msgs, error = reader.feed(data)
    assert error is None or isinstance(error, DecodeError)
    for m in msgs:
        assert isinstance(m, pb.Vsm_message)
        assert m.IsInitialized()
    with contextlib.suppress(DecodeError):
        codec.decode_frames(data)


@given(st.binary(max_size=64))
def test_random_payloads_in_a_valid_frame(payload: bytes) -> None:
    try:
        msgs = codec.decode_frames(codec.frame(payload))
    except DecodeError as exc:
        assert exc.offset >= 1
    else:
        assert len(msgs) == (1 if payload else 0)


def test_split_frames_gives_payload_offsets() -> None:
    a, b = codec.encode(_ping(1)), codec.encode(_ping(2))
    assert [off for off, _ in codec.split_frames(a + b"\x00" + b)] == [1, len(a) + 2]
    assert list(codec.split_frames(a + b[:2], final=False)) == [(1, a[1:])]


# --- values ---------------------------------------------------------------------------------


def test_semantics_pick_the_sdk_value_member() -> None:
    assert codec.kind_of_semantic(defs.FIELD_SEMANTIC_LATITUDE) is ValueKind.DOUBLE
    assert codec.kind_of_semantic(defs.FIELD_SEMANTIC_ALTITUDE_AMSL) is ValueKind.FLOAT
    assert codec.kind_of_semantic(defs.FIELD_SEMANTIC_HEADING) is ValueKind.FLOAT
    assert codec.kind_of_semantic(defs.FIELD_SEMANTIC_GPS_FIX_TYPE) is ValueKind.INT
    assert codec.kind_of_semantic(defs.FIELD_SEMANTIC_SATELLITE_COUNT) is ValueKind.INT
    assert codec.kind_of_semantic(defs.FIELD_SEMANTIC_ENUM) is ValueKind.INT
    assert codec.kind_of_semantic(defs.FIELD_SEMANTIC_BOOL) is ValueKind.BOOL
    assert codec.kind_of_semantic(defs.FIELD_SEMANTIC_STRING) is ValueKind.STRING


def test_values_both_ways() -> None:
    fv = pb.Field_value()
    codec.write_value(fv, 0.99014, ValueKind.DOUBLE)
    assert fv.double_value == 0.99014
    assert codec.read_value(fv) == 0.99014
    fv = pb.Field_value()
    codec.write_value(fv, None, ValueKind.FLOAT)
    assert fv.meta_value == defs.META_VALUE_NA
    assert fv.HasField("meta_value")
    assert codec.read_value(fv) is None
    fv = pb.Field_value()
    codec.write_value(fv, 2.5, ValueKind.FLOAT)
    assert fv.SerializeToString() == bytes.fromhex("1d00002040")  # float32 2.5
    fv = pb.Field_value()
    codec.write_value(fv, [1, "a", True, None])
    assert codec.read_value(fv) == [1, "a", True, None]
    assert codec.read_value(pb.Field_value()) is None
    fv = pb.Field_value()
    codec.write_value(fv, -3, ValueKind.INT)
    assert fv.SerializeToString() == bytes.fromhex("1005")  # ZigZag(-3) = 5
    with pytest.raises(ValueError):
        codec.write_value(pb.Field_value(), "x", ValueKind.FLOAT)
    value = codec.read_value(_float(0.1))
    assert isinstance(value, float)
    assert math.isclose(value, 0.1, rel_tol=1e-6)


def _float(x: float) -> pb.Field_value:
    fv = pb.Field_value()
    fv.float_value = x
    return fv


def test_a_truncated_frame_after_good_ones_is_reported_where_it_starts() -> None:
    good = codec.encode(_ping(1))
    with pytest.raises(DecodeError) as err:
        codec.decode_frames(good + b"\x05\x08")
    assert err.value.offset == len(good)
