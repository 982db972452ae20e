"""VRSP frames -> world, with expected values worked out by hand (frames, quaternions, geodesy),
and the world -> a swarm for the serve sink."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robowire.protocols.vrsp.adapter import SwarmEncoder, VrspAdapter
from robowire.protocols.vrsp.codec import DefinitionTable
from robowire.protocols.vrsp.events import DefinitionReceived, SwarmFrame
from robowire.world import LogEvent, World

from .conftest import blocks_of, swarm_of

S = math.sqrt(0.5)


def applied(
    root: tuple[float, float, float] = (0.0, 0.0, 0.0), loaded: list[int] | None = None
) -> tuple[World, VrspAdapter, DefinitionTable]:
    world = World()
    adapter = VrspAdapter(world, "vrsp")
    table = DefinitionTable.build(1, root, blocks_of([1, 2, 3], loaded or []))
    adapter.apply([DefinitionReceived(table=table, new=True)], 100.0)
    return world, adapter, table


def test_positions_swap_y_and_z_into_enu() -> None:
    world, adapter, table = applied()
    swarm = swarm_of([1])
    swarm.position[0] = (1.0, 2.0, 3.0)  # 1 m east, 2 m up, 3 m north
    adapter.apply([SwarmFrame(table=table, frame=0, swarm=swarm, datagrams=1)], 100.0)
    device = world.device("vrsp", "1")
    assert device.position == (1.0, 3.0, 2.0)
    assert device.kind == "drone" and device.attributes == {
        "definition": 0,
        "model": "X1",
        "LightLumens": 900,
    }


def test_a_yaw_to_the_east_stays_a_turn_to_the_east() -> None:
    """+90 degrees about +Y in the left-handed frame turns the nose from north (+z) to east
    (+x): in ENU that is -90 degrees about Up, (cos 45, 0, 0, -sin 45)."""
    world, adapter, table = applied()
    swarm = swarm_of([1, 2])
    swarm.has_orientation[:] = True
    swarm.orientation[0] = (S, 0.0, S, 0.0)  # yaw +90 about wire +Y
    swarm.orientation[1] = (S, S, 0.0, 0.0)  # +90 about wire +X: nose (+z) to -y, down
    adapter.apply([SwarmFrame(table=table, frame=0, swarm=swarm, datagrams=1)], 100.0)
    yaw = world.device("vrsp", "1").orientation
    pitch = world.device("vrsp", "2").orientation
    assert yaw is not None and pitch is not None
    assert yaw == pytest.approx((S, 0.0, 0.0, -S), abs=1e-6)
    assert pitch == pytest.approx((S, -S, 0.0, 0.0), abs=1e-6)  # -90 about East: nose down


def test_a_heading_without_orientation_gives_the_yaw() -> None:
    world, adapter, table = applied()
    swarm = swarm_of([1, 2])
    swarm.has_heading[0] = True
    swarm.heading[0] = 90.0  # clockwise from north seen from above: east
    adapter.apply([SwarmFrame(table=table, frame=0, swarm=swarm, datagrams=1)], 100.0)
    device = world.device("vrsp", "1")
    assert device.orientation == pytest.approx((S, 0.0, 0.0, -S), abs=1e-6)
    assert device.telemetry["heading"] == (90.0, "deg")
    assert world.device("vrsp", "2").orientation is None  # it said neither


def test_geodetic_from_the_root() -> None:
    """At the equator and prime meridian, 1000 m east on the tangent plane is
    atan(1000 / 6378137) = 0.0089831528 degrees of longitude, and the point is
    sqrt(6378137^2 + 1000^2) - 6378137 = 0.0784 m above the ellipsoid; 10 m up is 10 m up."""
    world, adapter, table = applied()
    swarm = swarm_of([1, 2])
    swarm.position[0] = (1000.0, 0.0, 0.0)
    swarm.position[1] = (0.0, 10.0, 0.0)
    adapter.apply([SwarmFrame(table=table, frame=0, swarm=swarm, datagrams=1)], 100.0)
    east = world.device("vrsp", "1").geodetic
    up = world.device("vrsp", "2").geodetic
    assert east is not None and up is not None
    assert east == pytest.approx((0.0, 0.0089831528, 0.0784), abs=1e-4)
    assert east[1] == pytest.approx(0.0089831528, abs=1e-9)
    assert up == pytest.approx((0.0, 0.0, 10.0), abs=1e-9)


def test_lights_and_payloads_become_telemetry_and_a_fired_cue_a_log_line() -> None:
    world, adapter, table = applied(loaded=[7])
    swarm = swarm_of([1, 7], table.slots)
    swarm.has_color[0] = True
    swarm.color[0] = (255, 128, 0)
    swarm.cue[1, 0], swarm.cue_ms[1, 0] = 1, 250
    swarm.light[1, 1, 0] = 200
    swarm.gimbal[1, 1] = (S, 0.0, S, 0.0)
    swarm.light[1, 2] = (0, 255, 0)
    with world.subscribe(every_update=True) as feed:
        adapter.apply([SwarmFrame(table=table, frame=0, swarm=swarm, datagrams=1)], 100.0)
        items = feed.pull()
        adapter.apply([SwarmFrame(table=table, frame=1, swarm=swarm, datagrams=1)], 100.1)
        again = feed.pull()
    plain = world.device("vrsp", "1").telemetry
    assert plain["led_red"] == (255.0, "1") and plain["led_blue"] == (0.0, "1")
    assert "payload0_cue" not in plain  # a drone without payloads has none
    loaded = world.device("vrsp", "7").telemetry
    assert "led_red" not in loaded  # it sent no colour
    assert loaded["payload0_cue"] == (1.0, "1")
    assert loaded["payload0_since"] == (0.25, "s")
    assert loaded["payload1_level"] == (200.0, "1")
    assert loaded["payload1_gimbal_w"][0] == pytest.approx(S)
    assert loaded["payload1_gimbal_z"][0] == pytest.approx(-S)  # mirrored like the body
    assert loaded["payload2_green"] == (255.0, "1")
    logs = [i for i in items if not hasattr(i, "slots")]
    assert [(i.device_id, i.text) for i in logs] == [
        ("7", "pyro cue 1 fired: Silver Waterfall 10s")
    ]
    assert not any(isinstance(i, LogEvent) for i in again)  # the same cue still firing: no new line


def test_swarm_encoder_round_trips_world_positions_and_root() -> None:
    world, adapter, table = applied(root=(47.0, 8.0, 400.0))
    swarm = swarm_of([1, 2, 3])
    swarm.position[:] = [[1.0, 2.0, 3.0], [-5.0, 10.0, 7.5], [0.0, 0.0, 0.0]]
    swarm.has_orientation[0] = True
    swarm.orientation[0] = (S, 0.0, S, 0.0)
    adapter.apply([SwarmFrame(table=table, frame=0, swarm=swarm, datagrams=1)], 100.0)
    encoder = SwarmEncoder()
    out = encoder.swarm(world)
    assert out is not None
    assert encoder.root == pytest.approx((47.0, 8.0, 400.0), abs=1e-5)
    by_id = {world.tables["vrsp"].ids[i]: i for i in range(3)}
    rows = [by_id[k] for k in ("1", "2", "3")]
    assert np.allclose(out.position[rows], swarm.position)
    assert out.has_orientation[rows].tolist() == [True, False, False]
    assert np.allclose(out.orientation[rows[0]], (S, 0.0, S, 0.0), atol=1e-6)
    ((definition, ids),) = encoder.blocks()
    assert definition.model == "drone" and sorted(ids.tolist()) == [0, 1, 2]


def test_a_vrsp_show_goes_out_again_as_itself() -> None:
    """VRSP -> world -> VRSP sink -> wire -> world: the same drone ids, definitions (models,
    payloads), heading, colours and payload states, within the wire's precision."""
    from robowire.protocols.vrsp.adapter import show_swarm
    from robowire.protocols.vrsp.model import LightShow
    from robowire.protocols.vrsp.services import show_blocks

    show = LightShow(20, seed=3)
    first = World()
    first.table("show").protocol = "vrsp"
    adapter = VrspAdapter(first, "show")
    table = DefinitionTable.build(7, (47.0, 8.0, 400.0), show_blocks(show))
    adapter.apply([DefinitionReceived(table=table, new=True)], 100.0)
    for t in (40.0, 41.0):  # a hold with lasers and pyro, then a second frame
        frame = table.decode(table.records(show_swarm(show.state(t)))[0])
        adapter.apply([SwarmFrame(table=table, frame=0, swarm=frame, datagrams=1)], 100.0 + t)
    encoder = SwarmEncoder()
    swarm = encoder.swarm(first)
    assert swarm is not None and encoder.root is not None
    again = DefinitionTable.build(8, encoder.root, encoder.blocks())
    second = World()
    relayed = VrspAdapter(second, "relay")
    relayed.apply([DefinitionReceived(table=again, new=True)], 200.0)
    wire = again.decode(again.records(swarm)[0])
    relayed.apply([SwarmFrame(table=again, frame=0, swarm=wire, datagrams=1)], 200.0)
    want = {d.device_id: d for d in first.devices()}
    got = {d.device_id: d for d in second.devices()}
    assert sorted(got, key=int) == [str(i) for i in range(1, 21)]  # the show's own ids
    for drone, d in want.items():
        o = got[drone]
        assert o.attributes == d.attributes  # definition id, model, lumens, payloads
        assert set(o.telemetry) == set(d.telemetry)
        assert "heading" in o.telemetry
        for name, (value, unit) in d.telemetry.items():
            assert o.telemetry[name][1] == unit
            assert o.telemetry[name][0] == pytest.approx(value, abs=2e-3), (drone, name)
        assert o.position == pytest.approx(d.position, abs=1e-4)
    kinds = {name.split("_")[1] for d in want.values() for name in d.telemetry if "payload" in name}
    assert {"red", "level", "cue", "gimbal"} <= kinds  # spotlights, lasers, pyro, gimbals


def test_the_show_in_world_units_is_what_a_receiver_reads_of_its_frames() -> None:
    """The simulator's model works in world units: read back through the wire by the source's
    adapter, every drone is where `LightShow.state` says, turned as it says (ENU)."""
    from robowire.protocols.vrsp.adapter import show_swarm
    from robowire.protocols.vrsp.model import LightShow
    from robowire.protocols.vrsp.services import show_blocks

    show = LightShow(30, seed=2)
    world = World()
    adapter = VrspAdapter(world, "show")
    table = DefinitionTable.build(1, (47.0, 8.0, 400.0), show_blocks(show))
    adapter.apply([DefinitionReceived(table=table, new=True)], 0.0)
    for t in (3.0, 16.0, 45.0):  # a hold, a morph, the text with pyro
        state = show.state(t)
        assert state.orientation is not None
        frame = table.decode(table.records(show_swarm(state))[0])
        adapter.apply([SwarmFrame(table=table, frame=0, swarm=frame, datagrams=1)], t)
        got = world.tables["show"]
        slots = [got.index[str(i)] for i in state.ids.tolist()]
        assert np.allclose(got.position[slots], state.position, atol=1e-5)
        turn = np.abs(np.einsum("ij,ij->i", got.orientation[slots], state.orientation))
        assert np.allclose(turn, 1.0, atol=1e-5)  # the same rotation (q or -q)
        heading = got.telemetry["heading"][slots]  # (a half float on the wire)
        assert np.allclose(heading, state.heading, rtol=1e-3, atol=0.01)
        assert (
            got.telemetry["led_red"][slots].tolist() == np.floor(state.color[:, 0] + 0.5).tolist()
        )
