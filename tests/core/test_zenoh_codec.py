"""The Zenoh payload codec and key layout, with bytes alone (no zenoh session).

Expected bytes are built here with `struct` from the layout written in docs/zenoh.md, not
with the codec; hypothesis checks round trips and that random or cut bytes give only
DecodeError."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from robowire.errors import DecodeError
from robowire.zenoh import codec, keys

NAN = float("nan")


def test_state_frame_layout_is_the_documented_one() -> None:
    frame = codec.State(
        receive_time=12.5,
        slots=np.array([3, 7], dtype=np.uint32),
        columns={
            "position": codec.Column(values=np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])),
            "battery": codec.Column(values=np.array([0.5, NAN]), unit="V", telemetry=True),
        },
    )
    expected = (
        b"RWZ\x01\x01"
        + struct.pack("<dIH", 12.5, 2, 2)
        + struct.pack("<II", 3, 7)
        + bytes([0, 3, 8])
        + b"position"
        + bytes([0])
        + struct.pack("<6d", 1, 2, 3, 4, 5, 6)
        + bytes([1, 1, 7])
        + b"battery"
        + bytes([1])
        + b"V"
        + struct.pack("<2d", 0.5, NAN)
    )
    assert codec.encode(frame) == expected
    back = codec.decode(expected)
    assert isinstance(back, codec.State)
    assert back.slots.tolist() == [3, 7]
    assert back.columns["position"].values.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert back.columns["battery"].unit == "V" and back.columns["battery"].telemetry
    assert back.columns["battery"].values[0] == 0.5 and np.isnan(back.columns["battery"].values[1])


def test_batch_frame_layout_is_the_documented_one() -> None:
    one = b"RWZ\x01\x01" + struct.pack("<dIH", 1.5, 1, 1) + struct.pack("<I", 4)
    one += bytes([0, 3, 8]) + b"position" + bytes([0]) + struct.pack("<3d", 1, 2, 3)
    two = b"RWZ\x01\x01" + struct.pack("<dIH", 2.5, 0, 0)
    expected = (
        b"RWZ\x01\x04"
        + struct.pack("<H", 2)
        + struct.pack("<H", 5)
        + b"mo/\xc3\xa9"
        + struct.pack("<I", len(one))
        + one
        + struct.pack("<H", 1)
        + b"b"
        + struct.pack("<I", len(two))
        + two
    )
    assert codec.encode_batch([("mo/é", one), ("b", two)]) == expected
    back = codec.decode(expected)
    assert isinstance(back, codec.Batch)
    assert [source for source, _ in back.states] == ["mo/é", "b"]
    first, second = (state for _, state in back.states)
    assert first.receive_time == 1.5 and first.slots.tolist() == [4]
    assert first.columns["position"].values.tolist() == [[1, 2, 3]]
    assert second.receive_time == 2.5 and not second.columns and not len(second.slots)
    assert codec.is_state(expected) and codec.is_state(one)


def test_devices_and_log_frames_are_json_after_the_header() -> None:
    devices = codec.Devices(
        slots=(0,),
        ids=("d1",),
        kinds=("drone",),
        names=("Drone 1",),
        links=(("d2",),),
        attributes=({"model": "x"},),
    )
    data = codec.encode(devices)
    assert data[:5] == b"RWZ\x01\x02"
    assert json.loads(data[5:]) == {
        "slots": [0],
        "ids": ["d1"],
        "kinds": ["drone"],
        "names": ["Drone 1"],
        "links": [["d2"]],
        "attributes": [{"model": "x"}],
    }
    assert codec.decode(data) == devices and devices.protocol is None
    native = dataclasses.replace(devices, protocol="ugcs")  # the ids are UgCS serials
    assert json.loads(codec.encode(native)[5:])["protocol"] == "ugcs"
    assert codec.decode(codec.encode(native)) == native
    entry = codec.Log(device="d1", text="armed", level="info", time=3.0)
    data = codec.encode(entry)
    assert data[:5] == b"RWZ\x01\x03"
    assert json.loads(data[5:]) == {"device": "d1", "text": "armed", "level": "info", "time": 3.0}
    assert codec.decode(data) == entry


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"RW", "shorter than the header"),
        (b"XYZ\x01\x01", "no RWZ magic"),
        (b"RWZ\x02\x01", "unknown version"),
        (b"RWZ\x01\x09", "unknown frame type"),
        (b"RWZ\x01\x01" + struct.pack("<dIH", 0, 1 << 30, 0), "over the limit"),
        (b"RWZ\x01\x01" + struct.pack("<dIH", 0, 2, 0) + b"\0\0\0\0", "cut in its 2 slots"),
        (
            b"RWZ\x01\x01" + struct.pack("<dIH", 0, 0, 1) + bytes([0, 2, 1]) + b"x\0",
            "unknown column",
        ),
        (b"RWZ\x01\x02[]", "not an object"),
        (b"RWZ\x01\x02{", "bad JSON"),
        (b'RWZ\x01\x03{"device":"a"}', "LOG needs"),
        (
            b'RWZ\x01\x02{"slots":[0],"ids":[],"kinds":[],"names":[],"links":[],"attributes":[]}',
            "differ in length",
        ),
    ],
)
def test_bad_payloads_say_why(data: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason) as caught:
        codec.decode(data)
    assert caught.value.protocol == "zenoh"


def test_a_batch_holds_only_whole_state_frames() -> None:
    devices = codec.encode(
        codec.Devices(slots=(), ids=(), kinds=(), names=(), links=(), attributes=())
    )
    state = codec.encode(codec.State(receive_time=1.0, slots=np.zeros(0, np.uint32)))
    for data, reason in [
        (codec.encode_batch([("a", devices)]), "not a STATE frame"),
        (codec.encode_batch([("a", codec.encode_batch([("b", state)]))]), "not a STATE frame"),
        (codec.encode_batch([("a", state)]) + b"x", "1 bytes after the last STATE frame"),
        (codec.encode_batch([("a", state)])[:-1], "cut in the STATE frame of 'a'"),
        (b"RWZ\x01\x04\x01\x00\x01\x00\xff" + bytes(4), "not UTF-8"),
        (b"RWZ\x01\x04\x01", "cut before its count"),
    ]:
        with pytest.raises(DecodeError, match=reason):
            codec.decode(data)


names = st.text(max_size=20).filter(lambda s: len(s.encode()) <= 255)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def states(draw: Any) -> codec.State:
    n = draw(st.integers(0, 20))
    floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
    columns: dict[str, codec.Column] = {}
    for name in draw(st.lists(st.sampled_from(sorted(codec.VECTOR_WIDTHS)), unique=True)):
        width = codec.VECTOR_WIDTHS[name]
        shape = (n,) if width == 1 else (n, width)
        columns[name] = codec.Column(values=draw(hnp.arrays(np.float64, shape, elements=floats)))
    for name in draw(st.lists(names, unique=True, max_size=4)):
        if name not in columns:
            values = draw(hnp.arrays(np.float64, (n,), elements=floats))
            columns[name] = codec.Column(values=values, unit=draw(names), telemetry=True)
    return codec.State(
        receive_time=draw(st.floats(allow_nan=False)),
        slots=draw(hnp.arrays(np.uint32, (n,))),
        columns=columns,
    )


@st.composite
def devices(draw: Any) -> codec.Devices:
    n = draw(st.integers(0, 6))
    return codec.Devices(
        slots=tuple(draw(st.lists(st.integers(0, 1 << 20), min_size=n, max_size=n))),
        ids=tuple(draw(st.lists(st.text(), min_size=n, max_size=n))),
        kinds=tuple(draw(st.lists(st.text(max_size=8), min_size=n, max_size=n))),
        names=tuple(draw(st.lists(st.text(), min_size=n, max_size=n))),
        links=tuple(tuple(x) for x in draw(st.lists(st.lists(st.text()), min_size=n, max_size=n))),
        attributes=tuple(
            draw(
                st.lists(st.dictionaries(st.text(max_size=5), json_values), min_size=n, max_size=n)
            )
        ),
    )


logs = st.builds(
    codec.Log,
    device=st.text(),
    text=st.text(),
    level=st.sampled_from(["debug", "info", "warning", "error"]),
    time=st.floats(allow_nan=False, allow_infinity=False),
)


@given(states())
def test_state_round_trip(frame: codec.State) -> None:
    back = codec.decode(codec.encode(frame))
    assert isinstance(back, codec.State)
    assert back.receive_time == frame.receive_time
    assert back.slots.tolist() == frame.slots.tolist()
    assert list(back.columns) == list(frame.columns)
    for name, column in frame.columns.items():
        got = back.columns[name]
        assert (got.unit, got.telemetry, got.values.shape) == (
            column.unit,
            column.telemetry,
            column.values.shape,
        )
        assert np.array_equal(got.values, column.values, equal_nan=True)


batches = st.lists(st.tuples(st.text(max_size=10), states()), max_size=4).map(
    lambda entries: codec.Batch(tuple(entries))
)


@given(batches)
def test_batch_round_trip(frame: codec.Batch) -> None:
    back = codec.decode(codec.encode(frame))
    assert isinstance(back, codec.Batch)
    assert [s for s, _ in back.states] == [s for s, _ in frame.states]
    for (_, got), (_, sent) in zip(back.states, frame.states, strict=True):
        assert got.receive_time == sent.receive_time
        assert got.slots.tolist() == sent.slots.tolist()
        assert list(got.columns) == list(sent.columns)
        for name, column in sent.columns.items():
            assert np.array_equal(got.columns[name].values, column.values, equal_nan=True)


@given(devices() | logs)
def test_devices_and_log_round_trip(frame: codec.Devices | codec.Log) -> None:
    assert codec.decode(codec.encode(frame)) == frame


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_give_only_decode_error(data: bytes) -> None:
    for kind in (b"", b"RWZ\x01\x01", b"RWZ\x01\x02", b"RWZ\x01\x03", b"RWZ\x01\x04"):
        payload = kind + data
        with contextlib.suppress(DecodeError):
            codec.decode(payload)


@given(states() | devices() | logs | batches, st.data())
def test_cut_payloads_give_only_decode_error(frame: codec.Frame, data: Any) -> None:
    payload = codec.encode(frame)
    cut = data.draw(st.integers(0, max(0, len(payload) - 1)))
    try:
        codec.decode(payload[:cut])
    except DecodeError:
        return
    raise AssertionError(f"a payload cut at {cut} of {len(payload)} decoded")


def test_frames_of_one_shape_are_each_read_by_their_own_column_heads() -> None:
    """A frame with the rows, column count and size of one seen before is read by its own
    heads: other names of the same lengths, another unit, a bad width."""

    def frame(name: str, unit: str) -> bytes:
        column = codec.Column(values=np.array([1.0, 2.0]), unit=unit, telemetry=True)
        slots = np.array([0, 1], dtype=np.uint32)
        return codec.encode(codec.State(receive_time=1.0, slots=slots, columns={name: column}))

    first, other, unit = frame("alpha", "m"), frame("gamma", "m"), frame("alpha", "s")
    assert len(first) == len(other) == len(unit)
    for _ in range(2):  # the second time, each is the shape last seen
        for data, name, said in (
            (first, "alpha", "m"),
            (other, "gamma", "m"),
            (unit, "alpha", "s"),
        ):
            state = codec.decode(data)
            assert list(state.columns) == [name] and state.columns[name].unit == said
    bad = bytearray(first)
    bad[codec.SLOTS_AT + 8 + 1] = 2  # the column's width byte: telemetry of width 2
    with pytest.raises(DecodeError, match="telemetry 'alpha' has width 2"):
        codec.decode(bytes(bad))


def test_keys_are_robowire_source_then_kind() -> None:
    assert keys.key("vrsp://0.0.0.0:9742", keys.STATE) == "robowire/vrsp:%2F%2F0.0.0.0:9742/=state"
    assert keys.device_key("show", "drone 7") == "robowire/show/drone%207"
    assert keys.device_key("show", "=state") == "robowire/show/%3Dstate"  # never a reserved chunk
    assert keys.escape("@admin") == "%40admin" and keys.escape("a@b") == "a@b"
    assert keys.escape("a*b$c?d#e") == "a%2Ab%24c%3Fd%23e"
    assert keys.parse("robowire/vrsp:%2F%2F0.0.0.0:9742/=state") == (
        "vrsp://0.0.0.0:9742",
        "=state",
    )
    assert keys.parse("robowire/show/drone7") is None  # a device's JSON key: not a frame
    assert keys.parse("other/show/=state") is None


@given(st.text())
def test_names_come_back_from_their_key_chunk(name: str) -> None:
    chunk = keys.escape(name)
    assert chunk and not set(chunk) & set("/*$?#") and not chunk.startswith("@")
    assert keys.unescape(chunk) == name
    assert keys.parse(keys.key(name, keys.LOG)) == (name, keys.LOG)
