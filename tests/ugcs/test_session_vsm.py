"""The VSM session against the SDK's rules (ugcs.md 1.3-1.5, 3.x), bytes in and bytes out."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robowire.errors import LocalProtocolError
from robowire.protocols.ugcs import codec
from robowire.protocols.ugcs.codec import Value, defs, pb
from robowire.protocols.ugcs.device import CommandSpec, DeviceSpec, FieldSpec, SubsystemSpec
from robowire.protocols.ugcs.events import (
    CommandReceived,
    ConnectionEnded,
    DeviceAcknowledged,
    PacketDropped,
    PeerRegistered,
)
from robowire.protocols.ugcs.session_vsm import LinkState, VsmLink, VsmSession

UCS_PEER = 0x1234
S = defs

SPEC = DeviceSpec(
    type=S.DEVICE_TYPE_VEHICLE,
    properties={
        "vehicle_type": (S.VEHICLE_TYPE_MULTICOPTER, S.FIELD_SEMANTIC_ENUM),
        "vehicle_serial": ("T-1", S.FIELD_SEMANTIC_STRING),
    },
    subsystems=(
        SubsystemSpec(
            type=S.SUBSYSTEM_TYPE_FLIGHT_CONTROLLER,
            properties={"autopilot_type": ("emulator", S.FIELD_SEMANTIC_STRING)},
            telemetry=(
                FieldSpec("latitude", S.FIELD_SEMANTIC_LATITUDE),
                FieldSpec("altitude_amsl", S.FIELD_SEMANTIC_ALTITUDE_AMSL),
                FieldSpec("is_armed", S.FIELD_SEMANTIC_BOOL),
                FieldSpec("native_flight_mode", S.FIELD_SEMANTIC_STRING),
            ),
            commands=(
                CommandSpec("arm"),
                CommandSpec(
                    "takeoff_command",
                    (FieldSpec("relative_altitude", S.FIELD_SEMANTIC_ALTITUDE_RAW),),
                ),
                CommandSpec(
                    "mission_upload",
                    (FieldSpec("altitude_origin", S.FIELD_SEMANTIC_ALTITUDE_AMSL),),
                ),
                CommandSpec(
                    "move",
                    (
                        FieldSpec("latitude", S.FIELD_SEMANTIC_LATITUDE),
                        FieldSpec(
                            "turn_type",
                            S.FIELD_SEMANTIC_ENUM,
                            enumeration={0: "stop", 1: "straight"},
                        ),
                    ),
                    available_in_mission=True,
                ),
            ),
        ),
    ),
)
# ids from one counter: fields 1-4, commands 5-8, parameters 9-12, device 13
LAT, ALT, ARMED, MODE = 1, 2, 3, 4
ARM, TAKEOFF, UPLOAD, MOVE = 5, 6, 7, 8
REL_ALT, ALT_ORIGIN, MOVE_LAT, MOVE_TURN = 9, 10, 11, 12
DEVICE = 13
EPOCH = 1_700_000_000_000


def frames(data: bytes) -> list[pb.Vsm_message]:
    return codec.decode_frames(data)


def peer(
    major: int | None = 4,
    minor: int | None = 4,
    peer_type: int | None = None,
    peer_id: int = UCS_PEER,
) -> bytes:
    msg = pb.Vsm_message(device_id=0)
    msg.register_peer.peer_id = peer_id
    if major is not None:
        msg.register_peer.version_major = major
    if minor is not None:
        msg.register_peer.version_minor = minor
    if peer_type is not None:
        msg.register_peer.peer_type = defs.Peer_type.ValueType(peer_type)
    return codec.encode(msg)


def response(device_id: int, message_id: int, code: int = S.STATUS_OK) -> bytes:
    msg = pb.Vsm_message(device_id=device_id, message_id=message_id)
    msg.device_response.code = defs.Status_code.ValueType(code)
    return codec.encode(msg)


def command(
    device_id: int,
    message_id: int,
    command_id: int,
    params: dict[int, float] | None = None,
    subs: list[pb.Device_command] | None = None,
    required: bool = True,
) -> bytes:
    msg = pb.Vsm_message(device_id=device_id, message_id=message_id, response_required=required)
    dc = msg.device_commands.add(command_id=command_id)
    for fid, value in (params or {}).items():
        p = dc.parameters.add(field_id=fid)
        p.value.double_value = value
    for sub in subs or []:
        dc.sub_commands.add().CopyFrom(sub)
    return codec.encode(msg)


def new_session(keep_alive: float | None = None) -> VsmSession:
    session = VsmSession(peer_id=0xCAFE, name="test vsm", keep_alive=keep_alive)
    session.register(SPEC, EPOCH)
    return session


def handshake(
    session: VsmSession,
    now: float = 0.0,
    *,
    loopback: bool = True,
    peer_id: int = UCS_PEER,
    ack: bool = True,
) -> VsmLink:
    link = session.connect(now, loopback=loopback)
    link.data_to_send()
    link.feed(peer(peer_id=peer_id), now)
    regs = frames(link.data_to_send())
    assert [m.device_id for m in regs] == [DEVICE]
    if ack:
        link.feed(response(DEVICE, regs[0].message_id), now)
    return link


# --- Register_peer -------------------------------------------------------------------------


def test_register_peer_is_sent_at_once_on_connect() -> None:
    session = new_session()
    link = session.connect(0.0)
    (msg,) = frames(link.data_to_send())
    assert msg.device_id == 0
    rp = msg.register_peer
    assert rp.peer_id == 0xCAFE
    assert rp.peer_type == S.PEER_TYPE_VSM == 1
    assert (rp.version_major, rp.version_minor, rp.version_build) == (4, 4, "dev")
    assert rp.name == "test vsm"


def test_no_register_peer_within_10_s_closes() -> None:
    session = new_session()
    link = session.connect(100.0)
    link.data_to_send()
    assert link.next_deadline() == 110.0
    assert link.tick(109.9) == []
    assert not link.close_expected()
    events = link.tick(110.0)
    assert link.close_expected()
    (ended,) = events
    assert isinstance(ended, ConnectionEnded)
    assert "10 s" in ended.reason


def test_messages_before_register_peer_are_dropped() -> None:
    session = new_session()
    link = session.connect(0.0)
    link.data_to_send()
    events = link.feed(
        codec.encode(pb.Vsm_message(device_id=0, message_id=1, response_required=True)), 0.0
    )
    assert [type(e) for e in events] == [PacketDropped]
    assert link.data_to_send() == b""  # not even the ping is answered
    assert not link.close_expected()


@pytest.mark.parametrize(("major", "minor"), [(2, 13), (1, 99), (None, None), (2, None)])
def test_version_gate_silence_but_open(major: int | None, minor: int | None) -> None:
    session = new_session()
    link = session.connect(0.0)
    link.data_to_send()
    events = link.feed(peer(major, minor), 0.0)
    assert isinstance(events[0], PeerRegistered)
    assert not events[0].compatible
    assert link.data_to_send() == b""  # no Register_device
    link.feed(codec.encode(pb.Vsm_message(device_id=0, message_id=9, response_required=True)), 1.0)
    assert link.data_to_send() == b""  # not even a ping reply
    assert link.tick(60.0) == []
    assert not link.close_expected()
    assert link.state is LinkState.INCOMPATIBLE


def test_version_2_14_is_enough() -> None:
    session = new_session()
    link = session.connect(0.0)
    link.data_to_send()
    link.feed(peer(2, 14), 0.0)
    assert [m.device_id for m in frames(link.data_to_send())] == [DEVICE]


def test_a_peer_that_is_not_a_server_is_closed() -> None:
    session = new_session()
    link = session.connect(0.0)
    link.data_to_send()
    events = link.feed(peer(peer_type=S.PEER_TYPE_VSM), 0.0)
    assert link.close_expected()
    assert isinstance(events[-1], ConnectionEnded)


def test_peer_type_server_given_explicitly_is_accepted() -> None:
    session = new_session()
    link = session.connect(0.0)
    link.data_to_send()
    link.feed(peer(peer_type=S.PEER_TYPE_SERVER), 0.0)
    assert len(frames(link.data_to_send())) == 1


# --- registration and ACK gating -----------------------------------------------------------


def test_register_device_has_ids_from_one_counter_and_wants_a_response() -> None:
    session = new_session()
    link = session.connect(0.0)
    link.data_to_send()
    link.feed(peer(), 0.0)
    (msg,) = frames(link.data_to_send())
    assert msg.device_id == DEVICE
    assert msg.response_required
    assert msg.message_id > 0
    reg = msg.register_device
    assert reg.begin_of_epoch == EPOCH
    assert reg.type == S.DEVICE_TYPE_VEHICLE
    props = {p.name: p for p in reg.properties}
    assert props["vehicle_type"].value.int_value == 2
    assert props["vehicle_type"].semantic == S.FIELD_SEMANTIC_ENUM
    assert props["vehicle_serial"].value.string_value == "T-1"
    (fc,) = reg.subsystems
    assert fc.type == S.SUBSYSTEM_TYPE_FLIGHT_CONTROLLER
    assert fc.properties[0].name == "autopilot_type"
    assert fc.properties[0].value.string_value == "emulator"
    assert [(f.name, f.field_id) for f in fc.telemetry_fields] == [
        ("latitude", LAT),
        ("altitude_amsl", ALT),
        ("is_armed", ARMED),
        ("native_flight_mode", MODE),
    ]
    assert [(c.name, c.id) for c in fc.commands] == [
        ("arm", ARM),
        ("takeoff_command", TAKEOFF),
        ("mission_upload", UPLOAD),
        ("move", MOVE),
    ]
    assert [p.field_id for c in fc.commands for p in c.parameters] == [
        REL_ALT,
        ALT_ORIGIN,
        MOVE_LAT,
        MOVE_TURN,
    ]
    move = fc.commands[3]
    assert move.available_in_mission
    assert [(e.id, e.description) for e in move.parameters[1].enumeration] == [
        (0, "stop"),
        (1, "straight"),
    ]


def test_no_telemetry_before_the_ack_then_a_flush_of_known_values() -> None:
    session = new_session()
    link = handshake(session, ack=False)
    session.set_values(
        DEVICE,
        {"latitude": 0.99014, "altitude_amsl": None, "native_flight_mode": "HOLD"},
        EPOCH + 1500,
    )
    session.commit(0.0)
    assert link.data_to_send() == b""  # not ACKed: nothing for that device
    # the ACK, matched by message id
    session2 = new_session()
    link2 = session2.connect(0.0)
    link2.data_to_send()
    link2.feed(peer(), 0.0)
    (reg,) = frames(link2.data_to_send())
    session2.set_values(
        DEVICE,
        {"latitude": 0.99014, "altitude_amsl": None, "native_flight_mode": "HOLD"},
        EPOCH + 1500,
    )
    session2.commit(0.0)
    assert link2.data_to_send() == b""
    events = link2.feed(response(DEVICE, reg.message_id), 0.5)
    assert events == [DeviceAcknowledged(conn=link2.conn, device_id=DEVICE, code=S.STATUS_OK)]
    (flush,) = frames(link2.data_to_send())
    status = flush.device_status
    values = {t.field_id: t for t in status.telemetry_fields}
    assert set(values) == {LAT, MODE}  # the NA altitude and never-set fields are not flushed
    assert values[LAT].value.double_value == 0.99014
    assert values[LAT].ms_since_epoch == 1500  # from when the value was set
    assert values[MODE].value.string_value == "HOLD"
    assert {a.id for a in status.command_availability} == {ARM, TAKEOFF, UPLOAD, MOVE}


def test_in_progress_keeps_waiting_other_codes_abandon() -> None:
    session = new_session()
    link = session.connect(0.0)
    link.data_to_send()
    link.feed(peer(), 0.0)
    (reg,) = frames(link.data_to_send())
    assert link.feed(response(DEVICE, reg.message_id, S.STATUS_IN_PROGRESS), 0.0) == []
    events = link.feed(response(DEVICE, reg.message_id, S.STATUS_OK), 0.0)
    assert events == [DeviceAcknowledged(conn=link.conn, device_id=DEVICE, code=S.STATUS_OK)]

    session = new_session()
    link = session.connect(0.0)
    link.data_to_send()
    link.feed(peer(), 0.0)
    (reg,) = frames(link.data_to_send())
    link.feed(response(DEVICE, reg.message_id, S.STATUS_LICENSE_CONSTRAINT), 0.0)
    assert not session.acked_on(link.conn, DEVICE)
    link.feed(response(DEVICE, reg.message_id, S.STATUS_OK), 0.0)  # too late: abandoned
    assert not session.acked_on(link.conn, DEVICE)
    session.set_values(DEVICE, {"latitude": 1.0}, EPOCH)
    session.commit(1.0)
    assert link.data_to_send() == b""


# --- pings and keep-alive -------------------------------------------------------------------


def test_ping_answered_ok_with_the_same_message_id() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    link.feed(codec.encode(pb.Vsm_message(device_id=0, message_id=77, response_required=True)), 1.0)
    # device_id 0, message_id 77, device_response{code: OK}: 08 00 10 4d 42 02 08 00
    assert link.data_to_send() == bytes.fromhex("08" + "0800" + "104d" + "42020800")


def test_keep_alive_pings_every_second_and_closes_on_silence() -> None:
    session = new_session(keep_alive=3.0)
    link = handshake(session, now=0.0)
    link.data_to_send()
    assert link.next_deadline() == 1.0
    link.tick(1.0)
    (ping,) = frames(link.data_to_send())
    assert (ping.device_id, ping.response_required) == (0, True)
    link.feed(response(0, ping.message_id), 1.1)  # our reply keeps it alive
    link.tick(2.0)
    link.tick(3.0)
    assert len(frames(link.data_to_send())) == 2
    assert not link.close_expected()
    events = link.tick(4.1)  # nothing since 1.1
    assert link.close_expected()
    assert isinstance(events[0], ConnectionEnded)


# --- commands --------------------------------------------------------------------------------


def test_a_good_command_becomes_an_event_and_the_reply_echoes_its_message_id() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    (event,) = link.feed(command(DEVICE, 42, TAKEOFF, {REL_ALT: 10.0}), 1.0)
    assert isinstance(event, CommandReceived)
    assert event.command.name == "takeoff_command"
    assert event.command.parameters == {"relative_altitude": 10.0}
    assert (event.device_id, event.message_id, event.response_required) == (DEVICE, 42, True)
    session.respond(event.conn, DEVICE, 42, S.STATUS_OK)
    (reply,) = frames(link.data_to_send())
    assert (reply.device_id, reply.message_id, reply.device_response.code) == (
        DEVICE,
        42,
        S.STATUS_OK,
    )


def test_unknown_command_id_is_invalid_command() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    assert link.feed(command(DEVICE, 5, 99999), 1.0) == []
    (reply,) = frames(link.data_to_send())
    assert reply.message_id == 5
    assert reply.device_response.code == S.STATUS_INVALID_COMMAND
    assert reply.device_response.status == "Unknown command id 99999"


def test_unknown_device_gets_no_reply_at_all() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    events = link.feed(command(DEVICE + 100, 5, ARM), 1.0)
    assert [type(e) for e in events] == [PacketDropped]
    assert link.data_to_send() == b""
    assert not link.close_expected()


def test_missing_parameter_is_invalid_command() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    assert link.feed(command(DEVICE, 6, TAKEOFF), 1.0) == []
    (reply,) = frames(link.data_to_send())
    assert reply.device_response.code == S.STATUS_INVALID_COMMAND
    assert "relative_altitude" in reply.device_response.status


def test_na_parameter_is_accepted() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    msg = pb.Vsm_message(device_id=DEVICE, message_id=8, response_required=True)
    p = msg.device_commands.add(command_id=TAKEOFF).parameters.add(field_id=REL_ALT)
    p.value.meta_value = S.META_VALUE_NA
    (event,) = link.feed(codec.encode(msg), 1.0)
    assert isinstance(event, CommandReceived)
    assert event.command.parameters == {"relative_altitude": None}


def test_two_commands_in_one_message_are_invalid() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    msg = pb.Vsm_message(device_id=DEVICE, message_id=9, response_required=True)
    msg.device_commands.add(command_id=ARM)
    msg.device_commands.add(command_id=ARM)
    assert link.feed(codec.encode(msg), 1.0) == []
    (reply,) = frames(link.data_to_send())
    assert reply.device_response.code == S.STATUS_INVALID_COMMAND
    assert reply.device_response.status == "Only one command allowed in ucs message, got 2"


def test_mission_items_must_be_registered_and_allowed_in_missions() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    move = pb.Device_command(command_id=MOVE)
    move.parameters.add(field_id=MOVE_LAT).value.double_value = 0.5
    move.parameters.add(field_id=MOVE_TURN).value.int_value = 1
    (event,) = link.feed(command(DEVICE, 10, UPLOAD, {ALT_ORIGIN: 10.0}, [move]), 1.0)
    assert isinstance(event, CommandReceived)
    (item,) = event.command.sub_commands
    assert (item.name, item.parameters) == ("move", {"latitude": 0.5, "turn_type": 1})
    arm = pb.Device_command(command_id=ARM)
    assert link.feed(command(DEVICE, 11, UPLOAD, {ALT_ORIGIN: 10.0}, [move, arm]), 1.0) == []
    (reply,) = frames(link.data_to_send())
    assert reply.device_response.code == S.STATUS_INVALID_COMMAND
    assert "not allowed in mission" in reply.device_response.status


def test_enum_parameter_must_be_an_int_of_its_enumeration() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    move = pb.Device_command(command_id=MOVE)
    move.parameters.add(field_id=MOVE_LAT).value.double_value = 0.5
    move.parameters.add(field_id=MOVE_TURN).value.int_value = 7
    assert link.feed(command(DEVICE, 12, UPLOAD, {ALT_ORIGIN: 10.0}, [move]), 1.0) == []
    (reply,) = frames(link.data_to_send())
    assert reply.device_response.code == S.STATUS_INVALID_COMMAND


def test_no_reply_without_response_required_or_before_the_ack() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    (event,) = link.feed(command(DEVICE, 13, ARM, required=False), 1.0)
    assert isinstance(event, CommandReceived)
    assert not event.response_required
    unacked = handshake(session, ack=False)
    unacked.data_to_send()
    (event,) = unacked.feed(command(DEVICE, 14, ARM), 1.0)
    assert isinstance(event, CommandReceived)  # the SDK executes it...
    assert not session.can_respond(unacked.conn, DEVICE)  # ...but cannot reply
    with pytest.raises(LocalProtocolError, match="not ACKed"):
        session.respond(unacked.conn, DEVICE, 14, S.STATUS_OK)
    assert unacked.data_to_send() == b""


def test_a_reply_after_the_link_closed_raises() -> None:
    session = new_session()
    link = handshake(session)
    link.feed(command(DEVICE, 16, ARM), 1.0)
    link.feed_eof(2.0)
    assert not session.can_respond(link.conn, DEVICE)
    with pytest.raises(LocalProtocolError, match="CLOSED"):
        session.respond(link.conn, DEVICE, 16, S.STATUS_OK)


def test_progress_reports_then_the_final_reply() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    link.feed(command(DEVICE, 15, ARM), 1.0)
    session.progress(link.conn, DEVICE, 15, 0.5, "half")
    session.respond(link.conn, DEVICE, 15, S.STATUS_OK)
    first, final = frames(link.data_to_send())
    assert (first.message_id, first.device_response.code) == (15, S.STATUS_IN_PROGRESS)
    assert first.device_response.progress == 0.5
    assert first.device_response.status == "half"
    assert (final.message_id, final.device_response.code) == (15, S.STATUS_OK)


# --- telemetry --------------------------------------------------------------------------------


def _telemetry(link: VsmLink) -> list[dict[int, Value]]:
    out = []
    for msg in frames(link.data_to_send()):
        out.append(
            {t.field_id: codec.read_value(t.value) for t in msg.device_status.telemetry_fields}
        )
    return out


def test_only_changes_and_at_most_once_per_200_ms_per_field() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    session.set_values(DEVICE, {"altitude_amsl": 10.0}, EPOCH)
    session.commit(10.0)
    assert _telemetry(link) == [{ALT: 10.0}]
    session.set_values(DEVICE, {"altitude_amsl": 10.0}, EPOCH)
    session.commit(10.3)
    assert _telemetry(link) == []  # unchanged: nothing
    session.set_values(DEVICE, {"altitude_amsl": 11.0}, EPOCH)
    session.commit(10.4)  # 100 ms after the last commit of that field... no: 10.3 had none
    assert _telemetry(link) == [{ALT: 11.0}]
    session.set_values(DEVICE, {"altitude_amsl": 12.0}, EPOCH)
    session.commit(10.5)  # 100 ms after 10.4: held back
    session.set_values(DEVICE, {"altitude_amsl": 13.0}, EPOCH)
    session.commit(10.55)
    assert _telemetry(link) == []
    session.commit(10.6)  # the window is over: the last change goes
    assert _telemetry(link) == [{ALT: 13.0}]


def test_strings_are_sent_on_every_change() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    for t, mode in [(1.0, "A"), (1.05, "B"), (1.1, "C")]:
        session.set_values(DEVICE, {"native_flight_mode": mode}, EPOCH)
        session.commit(t)
        assert _telemetry(link) == [{MODE: mode}]


def test_na_goes_as_meta_value() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    session.set_values(DEVICE, {"latitude": 0.5}, EPOCH)
    session.commit(1.0)
    link.data_to_send()
    session.set_values(DEVICE, {"latitude": math.nan}, EPOCH)
    session.commit(2.0)
    (msg,) = frames(link.data_to_send())
    (t,) = msg.device_status.telemetry_fields
    assert t.field_id == LAT
    assert t.value.HasField("meta_value")
    assert t.value.meta_value == S.META_VALUE_NA


def test_value_members_follow_the_semantics() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    session.set_values(
        DEVICE, {"latitude": 0.25, "altitude_amsl": 2.5, "is_armed": True}, EPOCH - 20
    )
    session.commit(1.0)
    (msg,) = frames(link.data_to_send())
    by_id = {t.field_id: t for t in msg.device_status.telemetry_fields}
    assert by_id[LAT].value.HasField("double_value")
    assert by_id[ALT].value.HasField("float_value")
    assert by_id[ARMED].value.bool_value is True
    assert by_id[LAT].ms_since_epoch == -20  # before begin_of_epoch: negative (sint64)


def test_availability_sent_once_then_only_changes_and_status_messages() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    session.commit(1.0)  # the SDK's dirty flags start set: every command once
    (first,) = frames(link.data_to_send())
    assert {a.id for a in first.device_status.command_availability} == {ARM, TAKEOFF, UPLOAD, MOVE}
    session.commit(1.5)
    assert frames(link.data_to_send()) == []  # then only changes
    session.set_enabled(DEVICE, {"arm": True})
    session.status_message(DEVICE, "hello", S.SEVERITY_WARN)
    session.commit(2.0)
    (msg,) = frames(link.data_to_send())
    (av,) = msg.device_status.command_availability
    assert (av.id, av.is_available, av.is_enabled) == (ARM, True, True)
    assert list(msg.device_status.status_messages) == ["hello"]
    assert list(msg.device_status.messages_severity) == [S.SEVERITY_WARN]


def test_group_update_is_columnar() -> None:
    session = VsmSession(peer_id=1)
    infos = session.register_group([SPEC] * 3, EPOCH)
    link = session.connect(0.0)
    link.data_to_send()
    link.feed(peer(), 0.0)
    for reg in frames(link.data_to_send()):
        link.feed(response(reg.device_id, reg.message_id), 0.0)
    link.data_to_send()
    group = session.groups[0]
    group.update({"altitude_amsl": np.array([1.0, 2.0, 3.0])}, EPOCH + 5)
    session.commit(1.0)
    got = {
        m.device_id: {
            t.field_id: codec.read_value(t.value) for t in m.device_status.telemetry_fields
        }
        for m in frames(link.data_to_send())
    }
    ids = [i.device_id for i in infos]
    alt_ids = [i.fields_by_key["altitude_amsl"].field_id for i in infos]
    assert got == {ids[k]: {alt_ids[k]: float(k + 1)} for k in range(3)}
    group.update({"altitude_amsl": np.array([1.0, 2.5, 3.0])}, EPOCH + 6)
    session.commit(2.0)
    (only,) = frames(link.data_to_send())  # one Device_status, for the one that changed
    assert only.device_id == ids[1]


# --- several connections --------------------------------------------------------------------


def test_the_newer_loopback_connection_of_a_ucs_becomes_primary() -> None:
    session = new_session()
    old = handshake(session)
    new = handshake(session)
    old.data_to_send()
    new.data_to_send()
    assert session.primary(UCS_PEER) == new.conn
    session.set_values(DEVICE, {"altitude_amsl": 5.0}, EPOCH)
    session.commit(1.0)
    assert old.data_to_send() == b""
    assert _telemetry(new) == [{ALT: 5.0}]
    new.feed_eof(2.0)  # the primary closes: the other one takes over
    assert session.primary(UCS_PEER) == old.conn
    session.set_values(DEVICE, {"altitude_amsl": 6.0}, EPOCH)
    session.commit(3.0)
    assert _telemetry(old) == [{ALT: 6.0}]


def test_a_loopback_primary_is_kept_against_a_remote_duplicate() -> None:
    session = new_session()
    local = handshake(session, loopback=True)
    remote = handshake(session, loopback=False)
    assert session.primary(UCS_PEER) == local.conn
    remote2 = handshake(session, peer_id=UCS_PEER + 1, loopback=False)
    assert session.primary(UCS_PEER + 1) == remote2.conn  # another UCS: its own primary
    local.data_to_send()
    remote.data_to_send()
    remote2.data_to_send()
    late = handshake(session, loopback=False, peer_id=UCS_PEER + 1)
    assert session.primary(UCS_PEER + 1) == late.conn  # a remote primary gives way to anyone


def test_a_bad_frame_closes_that_connection_only() -> None:
    session = new_session()
    good = handshake(session)
    bad = handshake(session, peer_id=UCS_PEER + 1)
    good.data_to_send()
    events = bad.feed(bytes.fromhex("021005"), 1.0)  # no device_id: the SDK closes
    assert [type(e) for e in events] == [PacketDropped, ConnectionEnded]
    assert bad.close_expected()
    assert not good.close_expected()
    good.feed(codec.encode(pb.Vsm_message(device_id=0, message_id=3, response_required=True)), 1.0)
    assert frames(good.data_to_send())[0].message_id == 3


def test_oversized_frame_closes() -> None:
    session = new_session()
    link = handshake(session)
    events = link.feed(codec.leb128(1_000_001), 1.0)
    assert isinstance(events[-1], ConnectionEnded)
    assert link.close_expected()


def test_shutdown_unregisters_where_registered() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    session.shutdown()
    # length 4; device_id 13; field 6 (unregister_device), empty
    assert link.data_to_send() == bytes.fromhex("04" + "080d" + "3200")
    link.feed(command(DEVICE, 20, ARM), 1.0)
    assert link.data_to_send() == b""  # forgotten: no reply


def test_devices_added_later_are_registered_on_primary_links() -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    info = session.register(SPEC, EPOCH)
    (msg,) = frames(link.data_to_send())
    assert msg.device_id == info.device_id
    assert msg.HasField("register_device")
    assert msg.response_required


# --- bad input: only typed events, never an exception; other connections carry on --------------


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_after_the_handshake(data: bytes) -> None:
    session = new_session()
    victim = handshake(session)
    other = handshake(session, peer_id=UCS_PEER + 1)
    victim.data_to_send()
    other.data_to_send()
    events = victim.feed(data, 1.0)
    for event in events:
        assert isinstance(event, PacketDropped | ConnectionEnded | CommandReceived)
    other.feed(codec.encode(pb.Vsm_message(device_id=0, message_id=4, response_required=True)), 1.0)
    assert frames(other.data_to_send())[-1].message_id == 4


_values = st.one_of(
    st.none(),
    st.floats(allow_nan=True),
    st.integers(-(2**63), 2**63 - 1),
    st.booleans(),
    st.text(max_size=5),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0, DEVICE, DEVICE + 1]),
            st.integers(0, 2**32 - 1),
            st.booleans(),
            st.sampled_from([ARM, TAKEOFF, UPLOAD, MOVE, 99]),
            st.lists(
                st.tuples(st.sampled_from([REL_ALT, ALT_ORIGIN, MOVE_LAT, MOVE_TURN, 1]), _values),
                max_size=3,
            ),
        ),
        max_size=6,
    )
)
def test_random_well_formed_messages(
    items: list[tuple[int, int, bool, int, list[tuple[int, Value]]]],
) -> None:
    session = new_session()
    link = handshake(session)
    link.data_to_send()
    wire = b""
    for device_id, message_id, required, command_id, params in items:
        msg = pb.Vsm_message(device_id=device_id, message_id=message_id, response_required=required)
        dc = msg.device_commands.add(command_id=command_id)
        for field_id, value in params:
            codec.write_value(dc.parameters.add(field_id=field_id).value, value)
        wire += codec.encode(msg)
    for event in link.feed(wire, 1.0):
        assert isinstance(event, PacketDropped | CommandReceived)
        if isinstance(event, CommandReceived):
            session.respond(event.conn, event.device_id, event.message_id, S.STATUS_OK)
    for reply in frames(link.data_to_send()):
        assert reply.HasField("device_response")
    assert not link.close_expected()


def test_the_sim_answers_commands_and_logs_them_as_status_messages() -> None:
    from robowire.protocols.ugcs.services import UgcsSim
    from robowire.service import SimOptions

    sim = UgcsSim(SimOptions(count=1))
    link = sim.session.connect(0.0)
    link.data_to_send()
    link.feed(peer(), 0.0)
    (reg,) = frames(link.data_to_send())
    link.feed(response(reg.device_id, reg.message_id), 0.0)
    link.data_to_send()
    info = sim.session.device(reg.device_id)
    assert info is not None
    takeoff = info.commands_by_name["takeoff_command"]
    param = takeoff.parameters[0].field_id
    # takeoff while disarmed: the vehicle refuses (STATUS_FAILED), with its reason
    (event,) = link.feed(command(reg.device_id, 70, takeoff.command_id, {param: 10.0}), 1.0)
    assert isinstance(event, CommandReceived)
    sim._command(event)
    (reply,) = frames(link.data_to_send())
    assert (reply.message_id, reply.device_response.code) == (70, S.STATUS_FAILED)
    assert reply.device_response.status
    sim.session.commit(2.0)
    (status,) = [m for m in frames(link.data_to_send()) if m.device_status.status_messages]
    assert status.device_status.status_messages[0].startswith("takeoff_command: ")
    assert list(status.device_status.messages_severity) == [S.SEVERITY_WARN]


def test_sim_ticks_that_wake_early_still_send_every_period() -> None:
    """At 5 Hz a tick that wakes 1 ms early must not fall inside the 200 ms window: the sim
    commits on its schedule's grid."""
    from robowire.protocols.ugcs.services import UgcsSim
    from robowire.service import SimOptions

    sim = UgcsSim(SimOptions(count=1, options={"gps_warmup": "0"}))
    link = sim.session.connect(0.0)
    link.data_to_send()
    link.feed(peer(), 0.0)
    (reg,) = frames(link.data_to_send())
    link.feed(response(reg.device_id, reg.message_id), 0.0)
    sim.tick(100.0, 100.0)
    sim.tick(100.2, 100.2)
    assert sim.fleet.command(0, "arm").ok
    assert sim.fleet.command(0, "takeoff_command", {"relative_altitude": 30.0}).ok
    link.data_to_send()
    info = sim.session.device(reg.device_id)
    assert info is not None
    altitude = info.fields_by_key["altitude_amsl"].field_id
    sent = []
    for k in range(1, 11):
        scheduled = 100.2 + 0.2 * k
        jitter = -0.001 if k % 2 else 0.001  # early, late, early, ...
        sim.tick(scheduled + jitter, scheduled)
        got = [
            t.value.float_value
            for m in frames(link.data_to_send())
            for t in m.device_status.telemetry_fields
            if t.field_id == altitude
        ]
        sent.append(len(got))
    assert sent == [1] * 10  # climbing: a new altitude every tick, none held back
