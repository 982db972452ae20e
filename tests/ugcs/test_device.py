"""A device's registration both ways: specs -> ids -> Register_device -> DeviceInfo."""

from __future__ import annotations

from robowire.protocols.ugcs import codec
from robowire.protocols.ugcs.codec import ValueKind, defs, pb
from robowire.protocols.ugcs.device import DeviceInfo, IdCounter, register
from robowire.protocols.ugcs.vehicle import vehicle_spec


def test_a_vehicle_registration_reads_back_the_same() -> None:
    info = register(vehicle_spec("SIM-0001"), IdCounter(), 1_700_000_000_000)
    msg = info.to_message()
    wire = codec.encode(msg)
    (back,) = codec.decode_frames(wire)
    again = DeviceInfo.from_message(back)
    assert again.device_id == info.device_id
    assert again.begin_of_epoch == info.begin_of_epoch
    assert again.properties == info.properties
    assert again.subsystem_properties == info.subsystem_properties
    assert [(f.key, f.field_id, f.semantic) for f in again.fields] == [
        (f.key, f.field_id, f.semantic) for f in info.fields
    ]
    assert [(c.name, c.command_id, c.available_in_mission) for c in again.commands] == [
        (c.name, c.command_id, c.available_in_mission) for c in info.commands
    ]
    assert again.autopilot_type() == "emulator"


def test_the_standard_vehicle_names_and_semantics() -> None:
    info = register(vehicle_spec("SIM-0001"), IdCounter(), 0)
    assert info.properties["vehicle_type"] == defs.VEHICLE_TYPE_MULTICOPTER
    assert info.properties["vehicle_serial"] == "SIM-0001"
    assert {"vehicle_name", "frame_type"} <= set(info.properties)
    by_key = info.fields_by_key
    assert by_key["latitude"].semantic == defs.FIELD_SEMANTIC_LATITUDE
    assert by_key["latitude"].kind is ValueKind.DOUBLE
    assert by_key["heading"].semantic == defs.FIELD_SEMANTIC_HEADING
    assert by_key["gimbal.heading"].subsystem == defs.SUBSYSTEM_TYPE_GIMBAL
    assert by_key["camera.video_stream_uri"].semantic == defs.FIELD_SEMANTIC_STRING
    assert by_key["current_mission_id"].kind is ValueKind.INT
    commands = info.commands_by_name
    assert commands["move"].available_in_mission
    assert not commands["arm"].available_in_mission
    assert [p.name for p in commands["takeoff_command"].parameters] == ["relative_altitude"]
    # one counter: every id distinct, the device's the last
    ids = [f.field_id for f in info.fields] + [c.command_id for c in info.commands]
    ids += [p.field_id for c in info.commands for p in c.parameters]
    assert len(set(ids)) == len(ids)
    assert info.device_id == max(ids) + 1


def test_control_mode_registers_its_enumeration() -> None:
    info = register(vehicle_spec("X"), IdCounter(), 0)
    msg = info.to_message()
    fc = msg.register_device.subsystems[0]
    control = next(f for f in fc.telemetry_fields if f.name == "control_mode")
    assert [(e.id, e.description) for e in control.enumeration][:2] == [
        (0, "CONTROL_MODE_MANUAL"),
        (1, "CONTROL_MODE_AUTO"),
    ]
    assert isinstance(msg, pb.Vsm_message)
