"""VRPN events -> world: device ids, quaternion order, telemetry, logs, time choice."""

from __future__ import annotations

import numpy as np
import pytest

from robowire.protocols.vrpn import (
    AnalogChannel,
    ButtonChange,
    ButtonStates,
    DialUpdate,
    MessageReceived,
    TextMessage,
    TrackerReports,
)
from robowire.protocols.vrpn.adapter import VrpnAdapter
from robowire.world import LogEvent, World


def reports(
    kind: str, sensors: list[int], *, t: float = 100.0, sender: str = "T"
) -> TrackerReports:
    n = len(sensors)
    return TrackerReports(
        sender=sender,
        kind=kind,
        sensor=np.array(sensors, dtype=np.int32),
        vector=np.arange(3 * n, dtype=np.float64).reshape(n, 3),
        quaternion=np.tile([0.1, 0.2, 0.3, 0.9], (n, 1)),  # x y z w
        dt=None if kind.endswith("Pos_Quat") else np.ones(n),
        time=np.full(n, t),
        order=np.arange(n, dtype=np.int64),
    )


def message(body: object, sender: str = "Dev", t: float = 50.0) -> MessageReceived:
    return MessageReceived(
        sender=sender,
        type="x",
        message=body,
        time=t,
        channel="tcp",
        order=0,  # type: ignore[arg-type]
    )


def test_tracker_sensors_become_devices_with_pose_velocity_acceleration() -> None:
    world = World()
    adapter = VrpnAdapter(world, "src")
    adapter.apply([reports("vrpn_Tracker Pos_Quat", [0, 3])], receive_time=200.0)
    adapter.apply([reports("vrpn_Tracker Velocity", [3])], receive_time=201.0)
    adapter.apply([reports("vrpn_Tracker Acceleration", [3])], receive_time=202.0)
    assert set(world.table("src").ids) == {"T/0", "T/3"}
    device = world.device("src", "T/3")
    assert device.kind == "tracker"
    assert device.position == (3.0, 4.0, 5.0)
    assert device.orientation == (0.9, 0.1, 0.2, 0.3)  # world order w, x, y, z
    assert device.velocity == (0.0, 1.0, 2.0)
    assert device.telemetry["acceleration_y"] == (1.0, "m/s2")
    assert device.source_time == 100.0 and device.receive_time == 202.0


def test_receive_time_choice_and_device_filter() -> None:
    world = World()
    adapter = VrpnAdapter(world, "src", devices=["T"], time="receive")
    adapter.apply(
        [reports("vrpn_Tracker Pos_Quat", [1]), reports("vrpn_Tracker Pos_Quat", [1], sender="U")],
        receive_time=300.0,
    )
    assert world.table("src").ids == ["T/1"]
    assert world.device("src", "T/1").source_time == 300.0
    with pytest.raises(ValueError):
        VrpnAdapter(world, "src", time="server")


def test_out_of_range_sensors_are_ignored() -> None:
    world = World()
    VrpnAdapter(world, "src").apply([reports("vrpn_Tracker Pos_Quat", [-1, 5000, 2])], 1.0)
    assert world.table("src").ids == ["T/2"]


def test_analog_buttons_dials_and_text() -> None:
    world = World()
    feed = world.feed.subscribe()
    adapter = VrpnAdapter(world, "src")
    adapter.apply(
        [
            message(AnalogChannel(channels=(0.5, -1.0))),
            message(ButtonStates(states=(0, 1))),
            message(ButtonChange(button=0, state=1)),
            message(DialUpdate(delta=0.25, dial=1)),
            message(DialUpdate(delta=0.5, dial=1)),
            message(TextMessage(text="hot", severity=1)),
        ],
        receive_time=10.0,
    )
    telemetry = world.device("src", "Dev").telemetry
    assert telemetry["channel_1"] == (-1.0, "1")
    assert telemetry["button_0"] == (1.0, "bool") and telemetry["button_1"] == (1.0, "bool")
    assert telemetry["dial_1"] == (0.75, "1")
    (log,) = [e for e in feed.drain() if isinstance(e, LogEvent)]
    assert (log.device_id, log.text, log.level, log.time) == ("Dev", "hot", "warning", 50.0)


def test_the_simulated_trackers_are_in_world_units_as_a_listener_reads_them() -> None:
    """The simulator's model works in world units (w, x, y, z quaternions): its frame, made
    reports by the adapter's encoder and read back by the source's adapter, is the model's."""
    from robowire.protocols.vrpn.adapter import tracker_values
    from robowire.protocols.vrpn.model import DeviceModel

    frame = DeviceModel(4, 60.0).frame(2.5)
    poses = tracker_values(frame)[0]
    n = len(frame.sensors)
    wire = TrackerReports(
        sender="Tracker0",
        kind="vrpn_Tracker Pos_Quat",
        sensor=frame.sensors,
        vector=poses[:, 0:3],
        quaternion=poses[:, 3:7],
        dt=None,
        time=np.full(n, 100.0),
        order=np.arange(n, dtype=np.int64),
    )
    world = World()
    VrpnAdapter(world, "sim").apply([wire], receive_time=100.0)
    for k, sensor in enumerate(frame.sensors.tolist()):
        device = world.device("sim", f"Tracker0/{sensor}")
        assert device.position == tuple(frame.positions[k].tolist())
        assert device.orientation == tuple(frame.orientations[k].tolist())
    assert not frame.orientations[:, 1:3].any()  # yaws: w first, then x = y = 0
