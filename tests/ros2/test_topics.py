"""What the world is on ROS 2 (robowire.ros2.topics), without DDS: topic names (vrpn_mocap's
for VRPN trackers), frames, collisions between sources, the per-device topic budget, the
diagnostics' rotation and units; every message decoded by rosbags."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from rosbags.typesys import Stores, get_typestore

from robowire.ros2.topics import DIAGNOSTICS_REFRESH, MAX_STATUSES, Message, Topics, number
from robowire.world import World

STORE = get_typestore(Stores.LATEST)


def decoded(messages: list[Message]) -> dict[str, list]:
    out: dict[str, list] = {}
    for message in messages:
        out.setdefault(message.topic, []).append(STORE.deserialize_cdr(message.data, message.type))
    return out


def built(topics: Topics, world: World, source: str, **columns) -> dict[str, list]:
    table = world.tables[source]
    update = world.update(source, np.arange(len(table)), receive_time=100.25, **columns)
    return decoded(topics.build(table, update))


def test_vrpn_trackers_get_vrpn_mocaps_names() -> None:
    world = World()
    table = world.table("mocap")
    table.protocol = "vrpn"
    table.slots(["Tracker0/0", "Tracker0/3", "RigidBody 2/0"], kind="tracker")
    got = built(
        Topics(),
        world,
        "mocap",
        position=np.ones((3, 3)),
        orientation=np.tile([1.0, 0, 0, 0], (3, 1)),
        velocity=np.zeros((3, 3)),
    )
    assert {
        "/vrpn_mocap/Tracker0/pose",
        "/vrpn_mocap/Tracker0/pose3",
        "/vrpn_mocap/Tracker0/twist3",
        "/vrpn_mocap/RigidBody_2/pose",
    } <= set(got)
    frames = [t.child_frame_id for t in got["/tf"][0].transforms]
    assert frames == ["Tracker0", "Tracker0_3", "RigidBody_2"]
    pose = got["/vrpn_mocap/Tracker0/pose3"][0]
    assert (pose.header.frame_id, pose.header.stamp.sec, pose.header.stamp.nanosec) == (
        "world",
        100,
        250_000_000,
    )


def test_a_prefix_moves_every_namespace_and_frame_changes_the_parent() -> None:
    world = World()
    world.table("mocap").protocol = "vrpn"
    world.table("mocap").slots(["Tracker0/0"], kind="tracker")
    world.table("show").slots(["7"], kind="drone")
    topics = Topics(prefix="lab/a", frame="map")
    got = built(topics, world, "mocap", position=np.ones((1, 3)))
    got |= built(topics, world, "show", position=np.ones((1, 3)))
    assert {"/lab/a/Tracker0/pose", "/lab/a/drone_7/pose", "/lab/a/markers"} <= set(got)
    assert got["/tf"][0].transforms[0].header.frame_id == "map"


def test_two_sources_never_share_a_name() -> None:
    world = World()
    for source in ("a", "b"):
        world.table(source).slots(["x"], kind="robot")
    topics = Topics()
    first = built(topics, world, "a", position=np.ones((1, 3)))
    second = built(topics, world, "b", position=np.ones((1, 3)))
    assert "/robowire/x/pose" in first and "/robowire/b/x/pose" in second
    assert second["/tf"][0].transforms[0].child_frame_id == "b/x"


def test_only_the_first_devices_of_a_source_get_topics_of_their_own() -> None:
    world = World()
    world.table("show").slots([str(i) for i in range(5)], kind="drone")
    topics = Topics(devices=2)
    got = built(topics, world, "show", position=np.ones((5, 3)))
    assert sorted(t for t in got if t.endswith("/pose")) == [
        "/robowire/drone_0/pose",
        "/robowire/drone_1/pose",
    ]
    assert len(got["/tf"][0].transforms) == 5  # /tf has them all
    assert topics.skipped == 3
    world.table("mocap").slots(["a", "b"], kind="tracker")  # another source: a budget its own
    got = built(topics, world, "mocap", position=np.ones((2, 3)))
    assert {"/robowire/a/pose", "/robowire/b/pose"} <= set(got)


def test_illegal_names_are_renamed_and_said_once() -> None:
    world = World()
    world.table("site").slots(["rigid body.left", "ok_name"], kind="robot")
    topics = Topics()
    built(topics, world, "site", position=np.ones((2, 3)))
    built(topics, world, "site", position=np.ones((2, 3)))
    assert topics.renamed == [("site/rigid body.left", "rigid_body_left")]


def test_devices_without_a_position_are_not_on_tf() -> None:
    world = World()
    world.table("s").slots(["a", "b"], kind="robot")
    position = np.array([[1.0, 2.0, 3.0], [np.nan, np.nan, np.nan]])
    got = built(Topics(), world, "s", position=position)
    assert [t.child_frame_id for t in got["/tf"][0].transforms] == ["a"]
    assert list(got) == ["/tf", "/robowire/a/pose", "/robowire/markers"]


def test_diagnostics_take_every_device_in_turn_with_units_in_the_keys() -> None:
    world = World()
    n = MAX_STATUSES + 10
    world.table("show").slots([str(i) for i in range(n)], kind="drone")
    topics = Topics(devices=0)
    built(topics, world, "show", telemetry={"battery": (np.full(n, 11.5), "V"), "mode": (2.0, "")})
    first = decoded([topics.diagnostics(world.tables, 5.0)])["/diagnostics"][0]
    assert len(first.status) == MAX_STATUSES
    status = first.status[0]
    assert (status.name, status.hardware_id, status.message) == (
        "robowire: drone_0",
        "show/0",
        "drone",
    )
    assert [(v.key, v.value) for v in status.values] == [("battery [V]", "11.5"), ("mode", "2")]
    second = decoded([topics.diagnostics(world.tables, 6.0)])["/diagnostics"][0]
    assert [s.hardware_id for s in second.status] == [f"show/{i}" for i in range(MAX_STATUSES, n)]
    assert topics.diagnostics(world.tables, 7.0) is None  # nothing changed since
    # unchanged, each status is sent again before diagnostic_aggregator calls it stale (5 s)
    again = decoded([topics.diagnostics(world.tables, 5.0 + DIAGNOSTICS_REFRESH)])
    assert [s.hardware_id for s in again["/diagnostics"][0].status][:2] == ["show/0", "show/1"]
    assert DIAGNOSTICS_REFRESH < 5.0


def test_static_devices_go_to_tf_static_all_in_one_sample() -> None:
    world = World()
    for name in ("pole_a", "pole_b"):
        world.update_device("site", name, receive_time=1.0, kind="object", position=(1.0, 0, 0),
                            attributes={"static": True})  # fmt: skip
    world.update_device("site", "walker", receive_time=1.0, kind="robot", position=(0, 0, 0))
    got = built(Topics(), world, "site", position=np.zeros((3, 3)))
    static = got["/tf_static"][0].transforms
    assert [t.child_frame_id for t in static] == ["pole_a", "pole_b"]
    assert [t.child_frame_id for t in got["/tf"][0].transforms] == ["walker"]


def test_log_lines_go_to_rosout() -> None:
    from robowire.world import LogEvent

    message = Topics().log(LogEvent("vrpn@lab", "Tracker0", "calibrated", "warning", 12.5))
    log = decoded([message])["/rosout"][0]
    assert (log.level, log.name, log.msg) == (30, "robowire.vrpn_lab", "Tracker0: calibrated")
    assert (log.stamp.sec, log.stamp.nanosec) == (12, 500_000_000)


def test_a_fix_and_a_battery() -> None:
    world = World()
    world.update_device(
        "ugcs", "UAV-1", receive_time=1.0, kind="ugcs", geodetic=(47.5, 8.25, 400.0),
        telemetry={"main_voltage": (15.0, "V"), "remaining_power_level": (0.5, "1")},
    )  # fmt: skip
    table = world.tables["ugcs"]
    update = world.update("ugcs", np.array([0]), receive_time=2.0, geodetic=table.geodetic[:1],
                          telemetry={"main_voltage": (15.0, "V")})  # fmt: skip
    got = decoded(Topics().build(table, update))
    fix = got["/robowire/UAV_1/fix"][0]
    assert (fix.latitude, fix.longitude, fix.altitude, fix.header.frame_id) == (
        47.5,
        8.25,
        400.0,
        "UAV_1",
    )
    battery = got["/robowire/UAV_1/battery"][0]
    assert (battery.voltage, battery.percentage, battery.present) == (15.0, 0.5, True)
    assert np.isnan(battery.current)  # not reported: NaN, as ROS says unmeasured values are


def test_tf_static_is_sent_again_only_when_a_static_frame_changes() -> None:
    world = World()
    world.update_device("site", "pole", receive_time=1.0, kind="object", position=(1.0, 0, 0),
                        attributes={"static": True})  # fmt: skip
    topics = Topics()
    assert "/tf_static" in built(topics, world, "site", position=np.array([[1.0, 0, 0]]))
    assert "/tf_static" not in built(topics, world, "site", position=np.array([[1.0, 0, 0]]))
    moved = built(topics, world, "site", position=np.array([[2.0, 0, 0]]))
    assert moved["/tf_static"][0].transforms[0].transform.translation.x == 2.0


def test_diagnostics_values_read_back_as_the_same_number() -> None:
    assert number(0.6442176872396388) == "0.6442176872396388"  # (%g: 0.644218)
    assert number(1234567.0) == "1234567"  # (%g: 1.23457e+06)
    assert [number(v) for v in (2.0, -0.5, 1e-7, math.inf)] == ["2", "-0.5", "1e-07", "inf"]
    assert number(np.float32(0.6)) == "0.6000000238418579"  # a float32 column's double


@given(st.floats(allow_nan=False))
def test_every_diagnostics_value_reads_back(value: float) -> None:
    assert float(number(value)) == value
