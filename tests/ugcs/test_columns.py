"""Device_status read as columns (`codec.scan_telemetry`, `UcsSession`'s `TelemetryColumns`,
the adapter writing them) against protobuf's own reading of the same frames: a stream of
random Device_status messages, encoded by protobuf, fed to one session in one read (columns)
and to another one frame at a time (one protobuf message each) must leave the same held
values and times, report the same telemetry, availability and drops, and write the same
world. The expected side is protobuf's parser and the per-message path, not the scan.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robowire.protocols.ugcs import codec, session_ucs
from robowire.protocols.ugcs.adapter import UcsAdapter
from robowire.protocols.ugcs.codec import defs, pb
from robowire.protocols.ugcs.device import (
    CommandSpec,
    DeviceSpec,
    FieldSpec,
    IdCounter,
    SubsystemSpec,
    register,
)
from robowire.protocols.ugcs.events import (
    AvailabilityChanged,
    TelemetryColumns,
    TelemetryReceived,
)
from robowire.protocols.ugcs.session_ucs import COLUMNS_FROM, UcsSession
from robowire.wire import PacketDropped
from robowire.world import World

S = defs
BEGIN = 1_700_000_000_000
SPEC = DeviceSpec(
    properties={"vehicle_serial": ("SN", S.FIELD_SEMANTIC_STRING)},
    subsystems=(
        SubsystemSpec(
            type=S.SUBSYSTEM_TYPE_FLIGHT_CONTROLLER,
            telemetry=(
                FieldSpec("latitude", S.FIELD_SEMANTIC_LATITUDE),
                FieldSpec("longitude", S.FIELD_SEMANTIC_LONGITUDE),
                FieldSpec("altitude_amsl", S.FIELD_SEMANTIC_ALTITUDE_AMSL),
                FieldSpec("heading", S.FIELD_SEMANTIC_HEADING),
                FieldSpec("remaining_power_level", S.FIELD_SEMANTIC_CAPACITY_LEVEL),
                FieldSpec("is_armed", S.FIELD_SEMANTIC_BOOL),
                FieldSpec("flight_mode", S.FIELD_SEMANTIC_FLIGHT_MODE),
                FieldSpec("satellite_count", S.FIELD_SEMANTIC_SATELLITE_COUNT),
                FieldSpec("native_flight_mode", S.FIELD_SEMANTIC_STRING),
                FieldSpec("blob", S.FIELD_SEMANTIC_BINARY),
                FieldSpec("anything", S.FIELD_SEMANTIC_ANY),
            ),
            commands=(CommandSpec("arm"), CommandSpec("disarm"), CommandSpec("land")),
        ),
    ),
)
VEHICLES = 3


def infos() -> list[Any]:
    """The registrations of the vehicles SN-0, SN-1, ... (the same ids every time)."""
    ids = IdCounter()
    return [
        register(
            DeviceSpec(
                properties={"vehicle_serial": (f"SN-{i}", S.FIELD_SEMANTIC_STRING)},
                subsystems=SPEC.subsystems,
            ),
            ids,
            BEGIN,
        )
        for i in range(VEHICLES)
    ]


INFOS = infos()
FIELDS = [[f.field_id for f in info.fields] for info in INFOS]


class Ucs:
    """A UCS session with VEHICLES registered vehicles (serials SN-0, SN-1, ...), its events
    written into a world."""

    def __init__(self) -> None:
        self.world = World()
        self.adapter = UcsAdapter(self.world, "ugcs@test", (0.5, 0.5, 0.0))
        self.session = UcsSession(0.0, peer_id=1)
        peer = pb.Vsm_message(device_id=0)
        peer.register_peer.peer_id = 9
        peer.register_peer.peer_type = S.PEER_TYPE_VSM
        self.events: list[Any] = []
        self.feed(codec.encode(peer))
        for info in infos():
            self.feed(codec.encode(info.to_message()))
        self.events.clear()

    def feed(self, data: bytes, columns: bool = True) -> None:
        """`data` in one read; without `columns`, read one message at a time however many
        frames it holds."""
        with pytest.MonkeyPatch.context() as patch:
            if not columns:
                patch.setattr(session_ucs, "COLUMNS_FROM", 1 << 30)
            events = self.session.feed(data, 1.0)
        self.events += events
        self.adapter.apply(events, 1000.0)

    def telemetry(self) -> list[Any]:
        """Every TelemetryReceived, a TelemetryColumns as the ones its frames would give."""
        out: list[Any] = []
        for event in self.events:
            if isinstance(event, TelemetryColumns):
                out += self.session.received(event)
            elif isinstance(event, TelemetryReceived):
                out.append(event)
        return out


values = st.one_of(
    st.none(),
    st.floats(width=32),
    st.floats(),
    st.integers(-(2**63), 2**63 - 1),
    st.booleans(),
    st.text(max_size=8),  # ASCII or not
    st.binary(max_size=8),
    st.lists(st.integers(0, 9), max_size=2),  # a list: left to protobuf
)


@st.composite
def statuses(draw: st.DrawFn, sdk: bool = False) -> list[bytes]:
    """Device_status frames of the registered vehicles (and a few others), of every kind of
    value, some with command availability, status messages or a message id (with `sdk`,
    times that only grow, and only what the SDK's layout holds: no list, status message,
    message id or non-ASCII text)."""
    frames = []
    ms = 0
    for _ in range(draw(st.integers(COLUMNS_FROM, 2 * COLUMNS_FROM))):
        vehicle = draw(st.integers(0, VEHICLES))  # the last one not registered
        device_id = INFOS[vehicle].device_id if vehicle < VEHICLES else 999
        msg = pb.Vsm_message(device_id=device_id)
        msg.device_status.SetInParent()
        for _ in range(draw(st.integers(0, 5))):
            fields = FIELDS[vehicle % VEHICLES]
            field_id = draw(st.sampled_from([*fields, 9999]))  # and one no device registered
            ms = ms + draw(st.integers(0, 50)) if sdk else draw(st.integers(-(2**40), 2**40))
            tf = msg.device_status.telemetry_fields.add(field_id=field_id, ms_since_epoch=ms)
            value = draw(values)
            if sdk and (
                isinstance(value, list) or (isinstance(value, str) and not value.isascii())
            ):
                value = None
            if isinstance(value, float) and draw(st.booleans()):
                tf.value.float_value = value  # (a float32 member, exactly representable)
            else:
                codec.write_value(tf.value, value)
            if draw(st.integers(0, 20)) == 0:
                tf.value.Clear()  # no member: not available either
        if draw(st.integers(0, 4)) == 0:
            commands = [c.command_id for c in INFOS[vehicle % VEHICLES].commands]
            for command in draw(st.lists(st.sampled_from([*commands, 9999]), max_size=3)):
                state = msg.device_status.command_availability.add(id=command)
                if draw(st.booleans()):
                    state.is_available = draw(st.booleans())
                if draw(st.booleans()):
                    state.is_enabled = draw(st.booleans())
        if not sdk and draw(st.integers(0, 9)) == 0:
            msg.device_status.status_messages.append("low battery")
        if not sdk and draw(st.integers(0, 9)) == 0:
            msg.message_id = 3
        frames.append(codec.encode(msg))
    return frames


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


def flat(events: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (e.device_id, v.field_id, v.field and v.field.name, v.time_ms, v.value)
        for e in events
        for v in e.values
    ]


def test_a_double_past_its_units_range_is_inf_on_both_paths() -> None:
    """Hypothesis's find (28 November): a double of 3.1e306 in a field whose unit scales it
    overflowed in the columns' multiply, a RuntimeWarning (an error in the tests), where
    one message at a time gives inf quietly."""
    status_message = b"\x13\x08\x0f\x10\x03J\r\n\x0blow battery"
    huge = b"\x15\x08\x0fJ\x11\x12\x0f\x08\x01\x10\x00\x1a\t!9\x9dR\xa2F\xdf\x91\x7f"
    assert_columns_are_messages([status_message] * 7 + [huge])


def test_a_remaining_power_level_past_a_doubles_range_makes_battery_inf_quietly() -> None:
    """Hypothesis's find (28 November, after the one above): a remaining power level of
    ~1e308 made `battery` (in %, x100) overflow in the one-message path's multiply."""
    status_message = b"\x13\x08\x0f\x10\x03J\r\n\x0blow battery"
    field = b"\x12\x06\x08\x01\x10\x00\x1a\x00"
    huge = b"\x12\x0f\x08\x05\x10\x00\x1a\t!{\x14\xaeG\xe1z\x84\x7f"
    body = b"\x0blow battery" + field * 3 + huge
    framed = b"\x08\x0f\x10\x03J" + bytes([len(body) + 1, 0x0A]) + body
    assert_columns_are_messages([status_message] * 8 + [bytes([len(framed)]) + framed])


@settings(max_examples=150, deadline=None)
@given(frames=statuses())
def test_one_read_as_columns_is_one_message_at_a_time(frames: list[bytes]) -> None:
    assert_columns_are_messages(frames)


def assert_columns_are_messages(frames: list[bytes], names: bool = True) -> None:
    """`frames` in one read (columns) and one at a time (protobuf) give the same (without
    `names`, fields by id only: a connection closed by a bad frame has no devices left to
    name the fields of its columns with, `Ucs.telemetry`)."""
    together, alone = Ucs(), Ucs()
    together.feed(b"".join(frames))
    for data in frames:
        alone.feed(data)
    got, want = flat(together.telemetry()), flat(alone.telemetry())
    if not names:
        got, want = ([v[:2] + v[3:] for v in values] for values in (got, want))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert all(same(x, y) for x, y in zip(g, w, strict=True)), (g, w)
    for device_id, device in alone.session.devices.items():
        held = together.session.devices[device_id]
        assert held.values.keys() == device.values.keys()
        assert all(same(held.values[k], v) for k, v in device.values.items())
        assert dict(held.times) == dict(device.times)
        assert held.availability == device.availability

    def availability(ucs: Ucs) -> list[Any]:
        return [(e.device_id, e.commands) for e in ucs.events if isinstance(e, AvailabilityChanged)]

    assert availability(together) == availability(alone)

    def drops(ucs: Ucs) -> list[str]:
        return sorted(e.reason for e in ucs.events if isinstance(e, PacketDropped))

    assert drops(together) == drops(alone)
    assert together.session.stats.messages_in == alone.session.stats.messages_in


@settings(max_examples=100, deadline=None)
@given(frames=statuses(sdk=True))
def test_the_world_written_from_columns_is_the_same(frames: list[bytes]) -> None:
    together, alone = Ucs(), Ucs()  # both one read, one world update
    together.feed(b"".join(frames))
    alone.feed(b"".join(frames), columns=False)
    a, b = (u.world.tables["ugcs@test"] for u in (together, alone))
    assert set(a.telemetry) == set(b.telemetry)
    n = len(b)
    for name, column in b.telemetry.items():
        np.testing.assert_array_equal(a.telemetry[name][:n], column[:n], err_msg=name)
    for name in ("geodetic", "position", "orientation", "source_time"):
        np.testing.assert_array_equal(getattr(a, name)[:n], getattr(b, name)[:n], err_msg=name)
    for i in range(n):  # (as text: a NaN attribute equals a NaN)
        assert sorted(map(str, a.attributes[i].items())) == sorted(
            map(str, b.attributes[i].items())
        )


def test_a_fleet_of_the_sdk_layout_is_one_columns_event() -> None:
    """What a VSM sends most (numbers of registered fields) comes as columns, in full."""
    ucs = Ucs()
    frames = []
    for i in range(COLUMNS_FROM):
        info = INFOS[i % VEHICLES]
        msg = pb.Vsm_message(device_id=info.device_id)
        add = msg.device_status.telemetry_fields.add
        field = info.fields_by_key
        add(field_id=field["latitude"].field_id, ms_since_epoch=i).value.double_value = 0.9
        add(
            field_id=field["remaining_power_level"].field_id, ms_since_epoch=i
        ).value.float_value = 0.5
        add(field_id=field["satellite_count"].field_id, ms_since_epoch=i).value.int_value = -i
        add(field_id=field["is_armed"].field_id, ms_since_epoch=i).value.bool_value = True
        add(
            field_id=field["native_flight_mode"].field_id, ms_since_epoch=i
        ).value.string_value = "GO"
        frames.append(codec.encode(msg))
    ucs.feed(b"".join(frames))
    (columns,) = ucs.events
    assert isinstance(columns, TelemetryColumns) and columns.frames == COLUMNS_FROM
    assert len(columns.frame) == 5 * COLUMNS_FROM
    last = ucs.session.devices[INFOS[(COLUMNS_FROM - 1) % VEHICLES].device_id]
    assert last.values == {
        "latitude": 0.9,
        "remaining_power_level": 0.5,
        "satellite_count": -(COLUMNS_FROM - 1),
        "is_armed": True,
        "native_flight_mode": "GO",
    }
    assert last.times["latitude"] == BEGIN + COLUMNS_FROM - 1
    device = ucs.world.device("ugcs@test", last.label)
    assert device.telemetry["battery"] == (50.0, "%")
    assert device.attributes["native_flight_mode"] == "GO"


@st.composite
def fleet(draw: st.DrawFn) -> list[bytes]:
    """What a fleet sends in one large read: many short Device_status frames (more than
    `codec._WALK`, so that the records are followed with arrays) and a vehicle's first, full
    ones: every field and command, in a few layouts of one size (two ints of 1 and 2 bytes
    either way round), so that a layout walked once fits several frames and not others."""
    frames = []
    ms = 1000
    for _ in range(draw(st.integers(0, 30))):  # full frames
        info = INFOS[draw(st.integers(0, VEHICLES - 1))]
        msg = pb.Vsm_message(device_id=info.device_id)
        status = msg.device_status
        small, large = (1, 300) if draw(st.booleans()) else (300, 1)
        values: dict[str, Any] = {"flight_mode": small, "satellite_count": large}
        filler = draw(st.sampled_from([None, 0.25, True, "GO", b"x"]))  # the other fields'
        for f in info.fields:
            tf = status.telemetry_fields.add(field_id=f.field_id, ms_since_epoch=ms)
            codec.write_value(tf.value, values.get(f.key, filler))
        for c in info.commands:
            status.command_availability.add(id=c.command_id, is_available=True, is_enabled=False)
        frames.append(codec.encode(msg))
    for _ in range(draw(st.integers(0, 3))):  # short frames between them
        for vehicle in range(VEHICLES):
            for _ in range(60):
                info = INFOS[vehicle]
                msg = pb.Vsm_message(device_id=info.device_id)
                field = info.fields_by_key["latitude"]
                ms += 1
                tf = msg.device_status.telemetry_fields.add(
                    field_id=field.field_id, ms_since_epoch=ms
                )
                tf.value.double_value = ms / 1e6
                frames.append(codec.encode(msg))
    order = draw(st.permutations(range(len(frames))))
    return [frames[i] for i in order]


@settings(max_examples=25, deadline=None)
@given(frames=fleet())
def test_a_fleet_read_as_columns_is_one_message_at_a_time(frames: list[bytes]) -> None:
    assert_columns_are_messages(frames)


@settings(max_examples=25, deadline=None)
@given(frames=fleet(), data=st.data())
def test_a_broken_byte_in_a_fleet_read_is_read_as_protobuf_reads_it(
    frames: list[bytes], data: st.DataObject
) -> None:
    """A byte changed inside one frame (its length kept): the frame is left to protobuf,
    which reads it, drops it or closes the connection, as it would alone."""
    if not frames:
        return
    at = data.draw(st.integers(0, len(frames) - 1))
    frame = bytearray(frames[at])
    where = data.draw(st.integers(2, len(frame) - 1))  # after the length and device_id key
    frame[where] = data.draw(st.integers(0, 255))
    frames[at] = bytes(frame)
    assert_columns_are_messages(frames, names=False)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=1, max_size=64), at=st.lists(st.integers(0, 63), max_size=8),
       limit=st.sampled_from([1, 3, 5, 8, 9, 10]))  # fmt: skip
def test_varints_read_as_leb128_does(data: bytes, at: list[int], limit: int) -> None:
    """The array varint reader (8-byte words, 7-bit groups packed with shifts) against a
    byte-by-byte reading: the same value and length, or no varint within `limit` bytes."""
    at = [i for i in at if i < len(data)]
    b = np.concatenate((np.frombuffer(data, np.uint8), np.zeros(32, np.uint8)))
    values, lengths = codec._varints(b, np.array(at, np.intp), limit)
    for i, value, length in zip(at, values.tolist(), lengths.tolist(), strict=True):
        want, size = 0, 0
        for k, byte in enumerate(b[i : i + limit].tolist()):
            want |= (byte & 0x7F) << (7 * k)
            if byte < 0x80:
                size = k + 1
                break
        assert length == size
        if size:
            assert value == want & 0xFFFFFFFFFFFFFFFF
