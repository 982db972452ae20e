"""The SpyGlass sensor-network simulation: deterministic, decodable, physically sensible."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from robowire.errors import ConfigError
from robowire.protocols.spyglass import codec as c
from robowire.protocols.spyglass.adapter import SpyglassAdapter, network_packets
from robowire.protocols.spyglass.events import PacketsReceived, packets_of
from robowire.protocols.spyglass.model import SensorNetworkSim, SimConfig
from robowire.protocols.spyglass.session import SpyglassSession
from robowire.world import World

T0 = 1_700_000_000.0


def step(sim: SensorNetworkSim, now: float) -> list[bytes]:
    """What `sim spyglass` sends at `now`: the model's reports through the adapter's encoder."""
    return network_packets(sim.step(now))


def run(seed: int, steps: int, dt: float = 0.1) -> list[bytes]:
    sim = SensorNetworkSim(np.random.default_rng(seed))
    out: list[bytes] = []
    for i in range(steps):
        out += step(sim, T0 + i * dt)
    return out


def test_deterministic_for_a_seed() -> None:
    assert run(7, 200) == run(7, 200)
    assert run(7, 200) != run(8, 200)


def test_packet_mix_and_rates() -> None:
    packets = [c.decode(p) for p in run(1, 600)]  # 60 s
    kinds = Counter(type(p).__name__ for p in packets)
    assert 29 * 60 <= kinds["NeighborhoodPacket"] <= 30 * 61
    assert 29 * 30 <= kinds["DataPacket"] <= 30 * 31
    assert kinds["CoordinatesList2Packet"] == 6
    assert 2 <= kinds["TrajectoryPacket3"] <= 2 * 60 // 15 + 2
    data = [p for p in packets if isinstance(p, c.DataPacket)]
    assert all(p.syntax_type == c.SyntaxType.UINT8_LIST and 5 <= p.values[0] <= 40 for p in data)
    assert {p.sender for p in packets} <= set(range(1, 31))
    assert all(0 <= p.x <= 200 and 0 <= p.y <= 200 for p in packets)
    assert max(p.time for p in packets) - T0 < 60.0


def test_neighbourhoods_follow_radio_range() -> None:
    config = SimConfig(nodes=40, radio_range=45.0)
    sim = SensorNetworkSim(np.random.default_rng(3), config)
    checked = 0
    for i in range(50):
        raw = step(sim, T0 + i * 0.5)
        positions = dict(zip(sim.ids.tolist(), sim.positions.tolist(), strict=True))
        for packet in map(c.decode, raw):
            if not isinstance(packet, c.NeighborhoodPacket):
                continue
            me = np.array(positions[packet.sender])
            expected = {
                other
                for other, where in positions.items()
                if other != packet.sender and np.hypot(*(np.array(where) - me)) <= 45.0
            }
            assert set(packet.neighbors) == expected
            checked += 1
    assert checked > 40 * 20


def test_nodes_move_and_stay_in_the_area() -> None:
    sim = SensorNetworkSim(np.random.default_rng(5))
    sim.step(T0)
    before = sim.positions.copy()
    for i in range(1, 300):
        sim.step(T0 + i)
    assert np.all(sim.positions >= 0) and np.all(sim.positions <= 200)
    assert np.hypot(*(sim.positions - before).T).mean() > 5.0


def test_trajectories_chain_and_session_accepts_the_stream() -> None:
    stream = b"".join(run(2, 1200, dt=0.25))  # 300 s
    events = SpyglassSession().feed(stream, 0.0)
    packets = packets_of(events)
    assert [type(e) for e in events] == [PacketsReceived] and len(packets) == len(events[0])
    by_object: dict[int, list[c.TrajectoryPacket3]] = {}
    for p in packets:
        if isinstance(p, c.TrajectoryPacket3):
            by_object.setdefault(p.sender, []).append(p)
    assert len(by_object) == 2
    for trajectories in by_object.values():
        for earlier, later in itertools.pairwise(trajectories):
            assert later.points[0] == earlier.points[-1]
            assert later.time >= earlier.time + sum(earlier.durations) - 0.25


def test_config_from_options() -> None:
    config = SimConfig.from_options(50, {"area": "400,300", "radio_range": "80", "objects": "3"})
    assert (config.nodes, config.area, config.radio_range, config.objects) == (
        50,
        (400.0, 300.0),
        80.0,
        3,
    )
    assert SimConfig.from_options() == SimConfig()
    for bad in ({"bogus": "1"}, {"radio_range": "far"}, {"area": "1"}, {"area": "0,5"}):
        with pytest.raises(ConfigError, match="spyglass sim"):
            SimConfig.from_options(None, bad)


def test_next_deadline_says_when_packets_fall_due() -> None:
    sim = SensorNetworkSim(np.random.default_rng(4))
    assert sim.next_deadline() is None
    sim.step(T0)
    for _ in range(50):
        deadline = sim.next_deadline()
        assert deadline is not None and deadline > T0
        assert step(sim, deadline - 1e-3) == [] or deadline - 1e-3 <= T0
        assert step(sim, deadline) != []


def test_reports_are_in_world_units_as_a_listener_reads_them() -> None:
    """The model works in world units: read back through the wire by the source's adapter,
    each node reporting is where the model has it (to the metre: 1 unit = 1 m) and its
    temperature the model's reading (whole degC)."""
    sim = SensorNetworkSim(np.random.default_rng(6))
    session, world = SpyglassSession(), World()
    adapter = SpyglassAdapter(world, "net")
    checked = 0
    for i in range(40):
        reports = sim.step(T0 + i * 0.25)
        adapter.apply(session.feed(b"".join(network_packets(reports)), 0.0), 0.0)
        table = world.tables.get("net")
        rows, readings = reports.readings
        for row, reading in zip(rows.tolist(), readings.tolist(), strict=True):
            assert table is not None
            slot = table.index[str(int(reports.ids[row]))]
            assert table.position[slot].tolist() == np.rint(reports.positions[row]).tolist()
            assert table.telemetry["data.20"][slot] == min(max(round(reading), 0), 255)
            checked += 1
    assert checked > 100
