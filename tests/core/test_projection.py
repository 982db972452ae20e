"""Per-sink rules: frame transforms checked against numbers worked out by hand, filters,
renames and per-device rates on real worlds (no sockets)."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pymap3d
import pytest

from robowire.gateway import Gateway
from robowire.projection import ProjectedSink, Projector, Rules, Transform, yaw_quaternion
from robowire.service import Sink
from robowire.world import LogEvent, Update, World

S = math.sqrt(0.5)


# -- transforms ------------------------------------------------------------------------------


def test_yaw_90_turns_east_into_north() -> None:
    t = Transform(rotation=yaw_quaternion(90))
    out = t.position(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 2.0]]))
    np.testing.assert_allclose(out, [[0.0, 1.0, 0.0], [-1.0, 0.0, 2.0]], atol=1e-12)


def test_scale_then_offset() -> None:
    # centimetres to metres, then the sink's origin 1 m east, 2 m north, 3 m up of ours
    t = Transform(scale=0.01, offset=(1.0, 2.0, 3.0))
    out = t.position(np.array([[100.0, 200.0, 300.0]]))
    np.testing.assert_allclose(out, [[2.0, 4.0, 6.0]])


def test_velocity_is_rotated_and_scaled_but_not_offset() -> None:
    t = Transform(rotation=yaw_quaternion(90), scale=2.0, offset=(10.0, 10.0, 10.0))
    np.testing.assert_allclose(
        t.velocity(np.array([[1.0, 0.0, 0.5]])), [[0.0, 2.0, 1.0]], atol=1e-12
    )


def test_orientation_is_turned_by_the_rotation() -> None:
    t = Transform(rotation=yaw_quaternion(90))
    # a body facing East (identity) faces North after the turn: yaw 90 = (cos 45, 0, 0, sin 45)
    np.testing.assert_allclose(
        t.orientation(np.array([[1.0, 0.0, 0.0, 0.0]])), [[S, 0.0, 0.0, S]], atol=1e-12
    )
    # two turns of 90 make 180 degrees about Up: (0, 0, 0, 1)
    np.testing.assert_allclose(
        t.orientation(np.array([[S, 0.0, 0.0, S]])), [[0.0, 0.0, 0.0, 1.0]], atol=1e-12
    )


def test_nan_rows_stay_nan() -> None:
    t = Transform(rotation=yaw_quaternion(30), offset=(1.0, 1.0, 1.0))
    assert np.isnan(t.position(np.full((1, 3), np.nan))).all()


ORIGIN = (47.3977, 8.5456, 488.0)


def test_geodetic_origin_gives_what_pymap3d_gives() -> None:
    t = Transform(origin=ORIGIN)
    out = t.geodetic(np.array([[100.0, 200.0, 10.0]]))
    lat, lon, alt = pymap3d.enu2geodetic(100.0, 200.0, 10.0, *ORIGIN)
    np.testing.assert_allclose(out[0], [lat, lon, alt], rtol=0, atol=1e-9)
    # and by hand: 200 m North is 200 / 111,200 m per degree of latitude ~ 0.0018 deg,
    # 100 m East is 100 / (111,320 * cos 47.4 deg) ~ 0.00132 deg of longitude
    assert out[0][0] - ORIGIN[0] == pytest.approx(0.0018, abs=2e-5)
    assert out[0][1] - ORIGIN[1] == pytest.approx(0.00132, abs=2e-5)
    assert out[0][2] == pytest.approx(498.0, abs=0.01)
    np.testing.assert_allclose(t.enu(out), [[100.0, 200.0, 10.0]], atol=1e-6)


# -- projecting a world ----------------------------------------------------------------------


def mocap_world() -> World:
    world = World()
    for i in range(3):
        world.update_device(
            "mocap",
            f"Tracker0/{i}",
            kind="tracker",
            receive_time=1.0,
            position=(float(i), 0.0, 0.0),
            orientation=(1.0, 0.0, 0.0, 0.0),
            telemetry={"battery": (90.0 + i, "%"), "led_r": (1.0, "1"), "temp": (30.0, "C")},
        )
    world.update_device("mocap", "Analog0", kind="analog", receive_time=1.0)
    world.update_device(
        "ugcs", "vehicle-7", kind="vehicle", receive_time=1.0, geodetic=(47.0, 8.0, 500.0)
    )
    return world


class Projected(Projector):
    logs: list[LogEvent]  # what the view got


def project(rules: Rules, world: World, now: float = 0.0) -> Projected:
    """The view `rules` make of `world` after one pull of everything (and one log line)."""
    projector = Projected(rules)
    with world.subscribe() as changes:
        world.log("mocap", "Tracker0/1", "hello", time=1.0)
        for source, table in world.tables.items():
            world.update(
                source,
                np.arange(len(table)),
                receive_time=2.0,
                changed={"position", "geodetic", "orientation", *table.telemetry},
            )
        logs = projector.view.subscribe(every_update=True)
        projector.take(world, changes.pull(), now)
        projector.logs = [e for e in logs.pull() if isinstance(e, LogEvent)]
    return projector


def ids(view: World) -> set[tuple[str, str]]:
    return {(d.source, d.device_id) for d in view.devices()}


def test_no_rules_keep_everything() -> None:
    assert Rules().empty
    view = project(Rules(), mocap_world()).view
    assert ids(view) == {("mocap", f"Tracker0/{i}") for i in range(3)} | {
        ("mocap", "Analog0"),
        ("ugcs", "vehicle-7"),
    }


def test_filters_by_source_device_and_kind() -> None:
    world = mocap_world()
    assert ids(project(Rules(sources=("ug*",)), world).view) == {("ugcs", "vehicle-7")}
    assert ids(project(Rules(devices=("Tracker0/[12]",)), world).view) == {
        ("mocap", "Tracker0/1"),
        ("mocap", "Tracker0/2"),
    }
    assert ids(project(Rules(kinds=("analog", "vehicle")), world).view) == {
        ("mocap", "Analog0"),
        ("ugcs", "vehicle-7"),
    }


def test_fields_keep_the_named_telemetry_and_the_pose() -> None:
    view = project(Rules(devices=("Tracker0/2",), fields=("battery", "led_*")), mocap_world()).view
    device = view.device("mocap", "Tracker0/2")
    assert set(device.telemetry) == {"battery", "led_r"}
    assert device.telemetry["battery"] == (92.0, "%")
    assert device.position == (2.0, 0.0, 0.0)


def test_no_fields_keep_the_pose_alone() -> None:
    view = project(Rules(devices=("Tracker0/2",), fields=()), mocap_world()).view
    device = view.device("mocap", "Tracker0/2")
    assert device.telemetry == {}
    assert device.position == (2.0, 0.0, 0.0)


def test_pose_false_drops_the_pose() -> None:
    view = project(Rules(devices=("Tracker0/2",), pose=False), mocap_world()).view
    device = view.device("mocap", "Tracker0/2")
    assert device.position is None and device.orientation is None
    assert device.telemetry["temp"] == (30.0, "C")


def test_renames_and_transform_reach_the_view() -> None:
    rules = Rules(
        devices=("Tracker0/1",),
        rename={"Tracker0/1": "drone-1"},
        transform=Transform(rotation=yaw_quaternion(90), offset=(0.0, 0.0, 1.5)),
    )
    projector = project(rules, mocap_world())
    device = projector.view.device("mocap", "drone-1")
    assert device.name == "drone-1"
    np.testing.assert_allclose(device.position or (), (0.0, 1.0, 1.5), atol=1e-12)
    np.testing.assert_allclose(device.orientation or (), (S, 0.0, 0.0, S), atol=1e-12)
    assert ids(projector.view) == {("mocap", "drone-1")}
    # the log line of the renamed device is kept, under its new id
    assert [(e.device_id, e.text) for e in projector.logs] == [("drone-1", "hello")]


def test_log_lines_of_filtered_devices_are_dropped() -> None:
    assert project(Rules(devices=("Tracker0/2",)), mocap_world()).logs == []


def test_origin_fills_geodetic_and_enu_only_where_missing() -> None:
    rules = Rules(devices=("Tracker0/1", "vehicle-7"), transform=Transform(origin=ORIGIN))
    view = project(rules, mocap_world()).view
    tracker = view.device("mocap", "Tracker0/1")
    lat, lon, alt = pymap3d.enu2geodetic(1.0, 0.0, 0.0, *ORIGIN)
    np.testing.assert_allclose(tracker.geodetic or (), (lat, lon, alt), atol=1e-9)
    vehicle = view.device("ugcs", "vehicle-7")
    assert vehicle.geodetic == (47.0, 8.0, 500.0)  # its own, untouched
    e, n, u = pymap3d.geodetic2enu(47.0, 8.0, 500.0, *ORIGIN)
    np.testing.assert_allclose(vehicle.position or (), (e, n, u), atol=1e-6)


def test_device_rate_merges_updates_between_allowed_times() -> None:
    world = World()
    projector = Projector(Rules(device_rate=8.0))  # one update per device per 1/8 s
    step = 1 / 64  # a 64 Hz source, 1 s of it (times exact in binary)
    with world.subscribe() as changes, projector.view.subscribe(every_update=True) as out:
        for i in range(64):
            now = i * step
            world.update_device("s", "a", receive_time=now, position=(now, 0.0, 0.0))
            world.update_device("s", "b", receive_time=now, position=(0.0, now, 0.0))
            projector.take(world, changes.pull(), now)
        sent = sum(len(u) for u in out.pull() if isinstance(u, Update))
        # sent at steps 0, 8, ..., 56: 8 per device; 128 updates = 16 sent + 2 still waiting
        # + 110 merged into a later one
        assert sent == 16
        assert projector.merged == 110
        # the waiting change goes out at 56/64 + 1/8 = 1.0 s, with the latest values
        assert projector.next_due() == 1.0
        projector.flush(world, 0.99)
        assert out.pull() == []
        projector.flush(world, 1.0)
        assert sum(len(u) for u in out.pull() if isinstance(u, Update)) == 2
        assert projector.view.device("s", "a").position == (63 / 64, 0.0, 0.0)
        assert projector.next_due() is None


# -- a sink on its view ----------------------------------------------------------------------


class Collect(Sink):
    """A sink that keeps the ids it was written."""

    def __init__(self) -> None:
        super().__init__("collect")
        self.seen: set[str] = set()

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        for item in items:
            if isinstance(item, Update):
                self.seen |= {world.tables[item.source].ids[s] for s in item.slots}
        return True


def test_projected_sink_runs_an_unchanged_sink_on_its_view() -> None:
    async def go() -> set[str]:
        inner = Collect()
        sink = ProjectedSink(inner, Rules(kinds=("tracker",), rename={"t1": "drone-1"}))
        gateway = Gateway().add(sink)
        run = asyncio.create_task(gateway.run(5.0))
        await sink.ready.wait()
        for i in range(3):
            gateway.world.update_device(
                "x",
                f"t{i}",
                kind="tracker" if i else "anchor",
                receive_time=0.0,
                position=(1.0, 2.0, 3.0),
            )
        for _ in range(100):
            await asyncio.sleep(0.01)
            if len(inner.seen) == 2:
                break
        gateway.stop()
        await run
        assert sink.address is None and sink.name == "collect"
        return inner.seen

    assert asyncio.run(go()) == {"drone-1", "t2"}
