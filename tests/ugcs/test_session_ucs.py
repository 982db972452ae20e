"""The UCS-side session: the golden capture (the SDK's hello-world VSM and a UCS-side client),
fed whole and byte by byte; the rules of ugcs.md section 6 one by one; random input.

Expected values come from the capture and its decoded text (`capture_hello_basic.decoded.txt`)
and from the fact sheet, not from the code under test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robowire.errors import SessionError
from robowire.protocols.ugcs import codec
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
    CommandTimedOut,
    DeviceRegistered,
    DeviceUnregistered,
    MissionProgress,
    PeerRegistered,
    ResponseReceived,
    StatusMessages,
    TelemetryReceived,
)
from robowire.protocols.ugcs.session_ucs import UcsSession, UcsState
from robowire.wire import ConnectionLost, PacketDropped

CAPTURE = Path(__file__).parents[1] / "data" / "captures" / "ugcs" / "capture_hello_basic.jsonl"
# the capture's UCS-side client (frame 1 of the decoded text)
BEGIN = 1795336002989  # frame 2: begin_of_epoch


def capture_client() -> UcsSession:
    """A session that says what the capture's client said (frame 1), ids from 1001."""
    return UcsSession(0.0, peer_id=305441741, name="py-ucs", build="pytest", first_message_id=1001)


def records() -> list[dict[str, Any]]:
    assert CAPTURE.is_file(), f"golden capture missing: {CAPTURE}"  # fails, never skips
    return [json.loads(line) for line in CAPTURE.read_text().splitlines() if line.strip()]


def frame_bytes(index: int) -> bytes:
    return bytes.fromhex(records()[index]["hex"])


def one(data: bytes) -> pb.Vsm_message:
    messages = codec.decode_frames(data)
    assert len(messages) == 1
    return messages[0]


def vsm_frames() -> list[tuple[int, bytes]]:
    return [(i, bytes.fromhex(r["hex"])) for i, r in enumerate(records()) if r["dir"] == "vsm->ucs"]


def of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


# --- the golden capture ---------------------------------------------------------------------


def test_every_frame_of_the_capture_decodes() -> None:
    recs = records()
    assert len(recs) == 16
    for record in recs:
        message = one(bytes.fromhex(record["hex"]))
        assert message.IsInitialized()


def test_our_register_peer_is_the_capture_clients() -> None:
    session = capture_client()
    sent = session.data_to_send()
    assert sent == frame_bytes(1)
    peer = one(sent).register_peer
    assert (peer.peer_id, peer.peer_type) == (305441741, defs.PEER_TYPE_SERVER)
    assert (peer.version_major, peer.version_minor) == (4, 4)


def replay(session: UcsSession, chunks: int | None = None) -> tuple[list[Any], list[bytes]]:
    """Feed the VSM side of the capture (whole frames, or `chunks`-byte pieces), sending what
    the capture's client sent at the same points (ping, arm); returns events and replies."""
    events: list[Any] = []
    replies: list[bytes] = []
    session.data_to_send()
    for index, data in vsm_frames():
        if index == 6:  # the client pinged before the VSM's frame 6
            session.ping(2.0)
            replies.append(session.data_to_send())
        if index == 8:  # ... and sent arm before frame 8
            session.command(20, "arm", now=3.0)
            replies.append(session.data_to_send())
        pieces = (
            [data]
            if chunks is None
            else [data[i : i + chunks] for i in range(0, len(data), chunks)]
        )
        for piece in pieces:
            events += session.feed(piece, records()[index]["t"])
            out = session.data_to_send()
            if out:
                replies.append(out)
    return events, replies


@pytest.mark.parametrize("chunks", [None, 1, 7])
def test_fed_the_vsm_side_we_reply_as_the_capture_client(chunks: int | None) -> None:
    session = capture_client()
    events, replies = replay(session, chunks)
    # the ACK of Register_device (frame 3), our ping (frame 5), our arm (frame 7): same bytes
    assert replies == [frame_bytes(3), frame_bytes(5), frame_bytes(7)]
    ack = one(replies[0])
    assert (ack.device_id, ack.message_id, ack.device_response.code) == (20, 2, defs.STATUS_OK)
    assert not ack.response_required
    peer = of(events, PeerRegistered)[0]
    assert (peer.peer_id, peer.name, peer.version_major, peer.version_minor) == (
        2990778606, "hello-world-vsm", 4, 4,
    )  # fmt: skip
    answers = of(events, ResponseReceived)
    assert [(r.message_id, r.code, r.device_id) for r in answers] == [
        (1001, defs.STATUS_OK, 0),  # the ping
        (1002, defs.STATUS_OK, 20),  # arm
    ]
    # the mission reply (frame 12) answers a request this session never sent: dropped
    assert any("1003" in e.reason for e in of(events, PacketDropped))
    assert not of(events, ConnectionLost)


def test_capture_registration_maps_names_to_this_sessions_ids() -> None:
    session = capture_client()
    events, _ = replay(session)
    (registered,) = of(events, DeviceRegistered)
    info = registered.device
    assert registered.message_id == 2
    assert info.device_id == 20
    assert {f.name: f.field_id for f in info.fields} == {
        "control_mode": 1, "main_voltage": 2, "heading": 3, "altitude_raw": 4,
        "uplink_present": 5, "is_armed": 6, "downlink_present": 7,
    }  # fmt: skip
    assert {c.name: c.command_id for c in info.commands} == {
        "move": 11, "disarm": 10, "arm": 9, "mission_upload": 8,
    }  # fmt: skip
    device = session.devices[20]
    assert device.label == "asd123456"  # the hello world's serial_number
    assert session.device("asd123456") is device
    assert session.device("20") is device


def test_capture_telemetry_is_held_with_absolute_times() -> None:
    session = capture_client()
    events, _ = replay(session)
    first = of(events, TelemetryReceived)[0]
    by_name = {v.field.name: v for v in first.values}
    assert by_name["main_voltage"].value == 13.5
    assert by_name["main_voltage"].time_ms == BEGIN + 1001
    assert by_name["downlink_present"].value is True
    assert by_name["is_armed"].value is False
    assert by_name["control_mode"].value == 0
    held = session.devices[20].values
    # frames 9-15: armed; altitude_raw 0.5 .. 2.5, heading 0.1 .. 0.4 (float32 on the wire)
    assert held["is_armed"] is True
    assert held["altitude_raw"] == 2.5
    assert held["heading"] == pytest.approx(0.4)
    assert held["main_voltage"] == 13.5  # sent once, held since
    assert session.devices[20].times["altitude_raw"] == BEGIN + 10999
    availability = session.devices[20].availability
    assert availability["arm"] == (True, False)  # frame 9: arm disabled after arming
    assert availability["disarm"] == (True, True)
    assert availability["move"] == (False, False)
    assert len(of(events, AvailabilityChanged)) == 2


def test_the_capture_mission_as_we_send_it() -> None:
    """Frame 11 sent two `move` items with four parameters each; we send every registered
    parameter (NA when not given), with the same ids and values."""
    session = capture_client()
    replay(session)
    items = [
        ("move", {"latitude": 0.99015, "longitude": 0.42848, "altitude_amsl": 120.0,
                  "acceptance_radius": 3.0}),
        ("move", {"latitude": 0.9902, "longitude": 0.4285, "altitude_amsl": 125.0,
                  "acceptance_radius": 3.0}),
    ]  # fmt: skip
    session.upload_mission(20, {}, items, now=5.0)
    ours = one(session.data_to_send())
    theirs = one(frame_bytes(11))
    assert ours.device_id == theirs.device_id == 20
    assert ours.response_required
    (command,) = ours.device_commands
    assert command.command_id == theirs.device_commands[0].command_id == 8
    assert len(command.sub_commands) == 2
    for mine, capture in zip(
        command.sub_commands, theirs.device_commands[0].sub_commands, strict=True
    ):
        assert mine.command_id == capture.command_id == 11
        sent = {p.field_id: p.value for p in mine.parameters}
        assert set(sent) == set(range(12, 20))  # every parameter of `move`
        for p in capture.parameters:
            assert sent[p.field_id] == p.value
        for field_id in set(sent) - {p.field_id for p in capture.parameters}:
            assert sent[field_id].meta_value == defs.META_VALUE_NA
            assert sent[field_id].HasField("meta_value")


# --- the rules one by one (a small VSM built with the registration model) ----------------------

SPEC = DeviceSpec(
    type=defs.DEVICE_TYPE_VEHICLE,
    properties={"vehicle_serial": ("SN-7", defs.FIELD_SEMANTIC_STRING)},
    subsystems=(
        SubsystemSpec(
            type=defs.SUBSYSTEM_TYPE_FLIGHT_CONTROLLER,
            telemetry=(
                FieldSpec("latitude", defs.FIELD_SEMANTIC_LATITUDE),
                FieldSpec("altitude_agl", defs.FIELD_SEMANTIC_ALTITUDE_AGL),
                FieldSpec("current_command", defs.FIELD_SEMANTIC_NUMERIC, codec.ValueKind.INT),
                FieldSpec("current_mission_id", defs.FIELD_SEMANTIC_NUMERIC, codec.ValueKind.INT),
            ),
            commands=(
                CommandSpec("arm"),
                CommandSpec(
                    "mission_upload",
                    (
                        FieldSpec("altitude_origin", defs.FIELD_SEMANTIC_ALTITUDE_AMSL),
                        FieldSpec(
                            "low_battery_action",
                            defs.FIELD_SEMANTIC_ENUM,
                            enumeration={0: "rth", 1: "land"},
                        ),
                    ),
                ),
                CommandSpec("move", (FieldSpec("latitude", defs.FIELD_SEMANTIC_LATITUDE),), True),
            ),
        ),
        SubsystemSpec(
            type=defs.SUBSYSTEM_TYPE_GIMBAL,
            telemetry=(FieldSpec("heading", defs.FIELD_SEMANTIC_HEADING),),
        ),
    ),
)


def frame(**kwargs: Any) -> bytes:
    return codec.encode(pb.Vsm_message(**kwargs))


def vsm_peer() -> bytes:
    msg = pb.Vsm_message(device_id=0)
    msg.register_peer.peer_id = 77
    msg.register_peer.peer_type = defs.PEER_TYPE_VSM
    msg.register_peer.version_major = 4
    msg.register_peer.version_minor = 4
    return codec.encode(msg)


def ready_session(first_id: int = 40) -> tuple[UcsSession, int]:
    """A session that has met a VSM with one registered device (ids from `first_id`)."""
    session = UcsSession(0.0, peer_id=1)
    session.feed(vsm_peer(), 0.0)
    info = register(SPEC, IdCounter(first_id), BEGIN)
    msg = info.to_message()
    msg.message_id = 5
    msg.response_required = True
    session.feed(codec.encode(msg), 0.0)
    session.data_to_send()
    return session, info.device_id


def telemetry(device_id: int, session: UcsSession, **values: Any) -> bytes:
    """A Device_status setting fields by name (None = NA), 100 ms after begin_of_epoch."""
    info = session.devices[device_id].info
    msg = pb.Vsm_message(device_id=device_id)
    for name, value in values.items():
        field = info.fields_by_key[name]
        tf = msg.device_status.telemetry_fields.add(field_id=field.field_id, ms_since_epoch=100)
        kind = codec.ValueKind.INT if name.startswith("current_") else field.kind  # as the VSM
        codec.write_value(tf.value, value, kind)
    return codec.encode(msg)


def test_ids_are_per_session_names_are_not() -> None:
    for first in (1, 500):
        session, device_id = ready_session(first)
        device = session.device("SN-7")
        assert device is not None and device.device_id == device_id
        session.feed(telemetry(device_id, session, latitude=0.5, **{"gimbal.heading": 1.0}), 1.0)
        assert device.values == {"latitude": 0.5, "gimbal.heading": 1.0}


def test_every_register_device_is_acked_with_its_message_id() -> None:
    session = UcsSession(0.0, peer_id=1)
    session.feed(vsm_peer(), 0.0)
    session.data_to_send()
    for message_id, first in ((9, 1), (31, 100)):
        msg = register(SPEC, IdCounter(first), BEGIN).to_message()
        msg.message_id = message_id
        msg.response_required = True
        session.feed(codec.encode(msg), 0.0)
        ack = one(session.data_to_send())
        assert (ack.message_id, ack.device_response.code) == (message_id, defs.STATUS_OK)
        assert ack.device_id == msg.device_id
    assert len(session.devices) == 2


def test_values_hold_until_na() -> None:
    session, device_id = ready_session()
    session.feed(telemetry(device_id, session, altitude_agl=12.5, latitude=0.9), 1.0)
    session.feed(telemetry(device_id, session, latitude=0.91), 2.0)
    values = session.devices[device_id].values
    assert values["altitude_agl"] == 12.5  # not sent again: still valid
    session.feed(telemetry(device_id, session, altitude_agl=None), 3.0)
    assert values["altitude_agl"] is None
    assert values["latitude"] == 0.91


def test_vsm_pings_are_answered_ok() -> None:
    session, _ = ready_session()
    session.feed(frame(device_id=0, message_id=7, response_required=True), 1.0)
    assert session.data_to_send().hex() == "0808001007" + "42020800"


def test_commands_carry_every_parameter_and_enum_names() -> None:
    session, device_id = ready_session()
    session.upload_mission(
        device_id, {"low_battery_action": "land"}, [("move", {"latitude": 0.1})], now=1.0
    )
    msg = one(session.data_to_send())
    (upload,) = msg.device_commands
    values = {p.field_id: p.value for p in upload.parameters}
    info = session.devices[device_id].commands["mission_upload"]
    origin, action = info.parameters
    assert values[origin.field_id].HasField("meta_value")  # not given: NA
    assert values[action.field_id].int_value == 1  # "land" by its enumeration
    assert upload.sub_commands[0].parameters[0].value.double_value == 0.1
    with pytest.raises(SessionError, match="no parameter 'speed'"):
        session.command(device_id, "arm", {"speed": 1.0}, now=1.0)
    with pytest.raises(SessionError, match="no command 'fly'"):
        session.command(device_id, "fly", now=1.0)
    with pytest.raises(SessionError, match="not a mission item"):
        session.upload_mission(device_id, {}, [("arm", {})], now=1.0)


def test_replies_match_by_message_id_and_in_progress_is_not_final() -> None:
    session, device_id = ready_session()
    first = session.command(device_id, "arm", now=1.0, timeout=5.0)
    second = session.command(device_id, "arm", now=1.0, timeout=5.0)
    session.data_to_send()
    progress = pb.Vsm_message(device_id=device_id, message_id=second)
    progress.device_response.code = defs.STATUS_IN_PROGRESS
    progress.device_response.progress = 0.5
    events = session.feed(codec.encode(progress), 5.5)
    (reply,) = of(events, ResponseReceived)
    assert (reply.message_id, reply.final, reply.progress) == (second, False, 0.5)
    # the first has no reply at 6.0: timed out; the second's timeout restarted at 5.5
    timed = of(session.tick(6.0), CommandTimedOut)
    assert [t.message_id for t in timed] == [first]
    assert session.tick(10.0) == []
    done = pb.Vsm_message(device_id=device_id, message_id=second)
    done.device_response.code = defs.STATUS_FAILED
    done.device_response.status = "refused"
    (final,) = of(session.feed(codec.encode(done), 10.2), ResponseReceived)
    assert (final.final, final.code, final.status) == (True, defs.STATUS_FAILED, "refused")
    assert session.next_deadline() is None


def test_a_command_for_an_unknown_device_times_out() -> None:
    session, _ = ready_session()
    message_id = session.command(999, 3, now=1.0, timeout=2.0)
    sent = one(session.data_to_send())
    assert (sent.device_id, sent.message_id, sent.response_required) == (999, message_id, True)
    assert session.next_deadline() == 3.0
    assert session.tick(2.9) == []
    (timed,) = session.tick(3.0)
    assert isinstance(timed, CommandTimedOut) and timed.device_id == 999


def test_current_command_maps_to_mission_items_while_the_mission_matches() -> None:
    session, device_id = ready_session()
    session.upload_mission(device_id, {}, [("move", {}), ("move", {})], now=1.0)
    request = one(session.data_to_send())
    reply = pb.Vsm_message(device_id=device_id, message_id=request.message_id)
    reply.device_response.code = defs.STATUS_OK
    reply.device_response.mission_id = 632230682
    reply.device_response.mission_command_map.add(vehicle_command_id=100, mission_command_idx=0)
    reply.device_response.mission_command_map.add(vehicle_command_id=101, mission_command_idx=1)
    session.feed(codec.encode(reply), 1.1)
    events = session.feed(
        telemetry(device_id, session, current_mission_id=632230682, current_command=101), 2.0
    )
    assert [(p.mission_id, p.item) for p in of(events, MissionProgress)] == [(632230682, 1)]
    events = session.feed(telemetry(device_id, session, current_command=100), 3.0)
    assert [p.item for p in of(events, MissionProgress)] == [0]
    events = session.feed(telemetry(device_id, session, current_mission_id=5), 4.0)
    assert [p.item for p in of(events, MissionProgress)] == [None]
    assert session.devices[device_id].mission_map == {}


def test_unregister_and_status_messages() -> None:
    session, device_id = ready_session()
    status = pb.Vsm_message(device_id=device_id)
    status.device_status.status_messages.extend(["a", "b"])
    status.device_status.messages_severity.extend([defs.SEVERITY_INF, defs.SEVERITY_ERR])
    (messages,) = of(session.feed(codec.encode(status), 1.0), StatusMessages)
    assert [(m.text, m.severity) for m in messages.messages] == [("a", 0), ("b", 2)]
    gone = pb.Vsm_message(device_id=device_id)
    gone.unregister_device.SetInParent()
    (event,) = session.feed(codec.encode(gone), 2.0)
    assert isinstance(event, DeviceUnregistered) and event.device_id == device_id
    assert session.devices == {}


# --- the handshake and bad peers -----------------------------------------------------------------


def test_nothing_counts_before_the_vsms_register_peer() -> None:
    session = UcsSession(0.0, peer_id=1)
    events = session.feed(frame(device_id=0, message_id=3, response_required=True), 1.0)
    assert of(events, PacketDropped) and session.data_to_send() != b""  # only our own peer
    assert session.state is UcsState.AWAIT_PEER


def test_no_register_peer_in_ten_seconds_closes() -> None:
    session = UcsSession(100.0, peer_id=1)
    assert session.next_deadline() == 110.0
    assert session.tick(109.9) == []
    events = session.tick(110.0)
    assert of(events, ConnectionLost) and session.close_expected()


def test_a_server_peer_is_refused() -> None:
    session = UcsSession(0.0, peer_id=1)
    msg = pb.Vsm_message(device_id=0)
    msg.register_peer.peer_id = 5
    msg.register_peer.peer_type = defs.PEER_TYPE_SERVER
    events = session.feed(codec.encode(msg), 0.0)
    assert of(events, ConnectionLost) and session.close_expected()


@pytest.mark.parametrize(
    "bad",
    [
        bytes.fromhex("021005"),  # the sheet: message_id only, no device_id: unparsable
        bytes.fromhex("c1843d"),  # length 1,000,001: over the limit
        bytes.fromhex("ffffffffffffffffffff01"),  # an 11-byte varint
    ],
)
def test_a_bad_frame_drops_and_closes(bad: bytes) -> None:
    session, _ = ready_session()
    events = session.feed(bad, 1.0)
    assert of(events, PacketDropped)
    assert of(events, ConnectionLost)
    assert of(events, DeviceUnregistered)  # the connection's devices go with it
    assert session.close_expected()
    assert session.feed(telemetry_frame_for_any(), 2.0) == []  # closed: input ignored


def telemetry_frame_for_any() -> bytes:
    return frame(device_id=1)


def test_eof_unregisters_the_connections_devices() -> None:
    session, device_id = ready_session()
    events = session.feed_eof(1.0)
    assert [e.device_id for e in of(events, DeviceUnregistered)] == [device_id]
    assert of(events, ConnectionLost)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(data: bytes) -> None:
    session, _ = ready_session()
    events = session.feed(data, 1.0)
    for event in events:
        assert type(event).__module__.startswith(("robowire.protocols.ugcs", "robowire.wire"))
    session.tick(100.0)
    session.data_to_send()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 60),  # device ids around the registered one
            st.integers(0, 70),  # field id
            st.integers(-(2**40), 2**40),
            st.one_of(
                st.none(),
                st.floats(allow_nan=True),
                st.integers(-(2**62), 2**62),
                st.booleans(),
                st.text(max_size=5),
            ),
        ),
        max_size=8,
    )
)
def test_random_well_formed_status_never_raises(items: list[tuple[int, int, int, Any]]) -> None:
    session, _ = ready_session()
    for device_id, field_id, ms, value in items:
        msg = pb.Vsm_message(device_id=device_id)
        tf = msg.device_status.telemetry_fields.add(field_id=field_id, ms_since_epoch=ms)
        codec.write_value(tf.value, value)
        session.feed(codec.encode(msg), 1.0)
    for device in session.devices.values():
        for value in device.values.values():
            assert value is None or isinstance(value, float | int | bool | str)
            if isinstance(value, float) and not math.isnan(value):
                assert math.isfinite(value) or math.isinf(value)
