"""SpyGlass end to end over real loopback TCP: simulator -> gateway -> world -> JSON lines,
the world served back as a SpyGlass stream, and the demo recording read as a file source."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import math
from typing import Any

import numpy as np
import pytest
from spyglass_strategies import DEMO, cut_recording

from robowire.addresses import parse_endpoint
from robowire.errors import ConfigError
from robowire.gateway import Gateway, open_sim, open_sink, open_source
from robowire.protocols.spyglass import DEFAULT_PORT, PROTOCOL, read_rec
from robowire.protocols.spyglass.codec import DataPacket, NeighborhoodPacket, SyntaxType, encode
from robowire.protocols.spyglass.events import PacketsReceived, packets_of
from robowire.protocols.spyglass.services import Settings, SpyglassFileSource
from robowire.protocols.spyglass.session import SpyglassSession
from robowire.service import SimOptions
from robowire.sinks import JsonLinesSink
from robowire.world import World

RADIO_RANGE = 50.0  # the simulator's default
# A node moves at most 2 units/s and reports its neighbourhood once a second; both ends of a
# link are rounded to whole units: a reported neighbour can be this much beyond radio range.
SLACK = 2 * 2.0 + 2.0


async def test_simulated_network_reaches_json_lines_with_positions_and_radio_links():
    gateway = Gateway()
    sim = open_sim("spyglass", SimOptions(port=0, count=12, rate=10, seed=3))
    gateway.add(sim)
    run = asyncio.create_task(gateway.run(duration=10))
    await asyncio.wait_for(sim.ready.wait(), 5)
    assert sim.address is not None
    out = io.StringIO()
    done = asyncio.Event()
    source = open_source(f"spyglass://{sim.address[0]}:{sim.address[1]}")
    gateway.add(source, JsonLinesSink(out, count=200, on_done=done.set))
    await asyncio.wait_for(done.wait(), 8)
    gateway.stop()
    await run
    assert not gateway.failures

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 200
    nodes = [x for x in lines if x["kind"] == "sensor_node"]
    assert {x["device"] for x in nodes} == {str(i) for i in range(1, 13)}
    assert all(x["source"] == f"spyglass@127.0.0.1:{sim.address[1]}" for x in lines)
    # positions stay inside the simulated 200 x 200 area, on the ground
    for x in nodes:
        east, north, up = x["position"]
        assert 0 <= east <= 200 and 0 <= north <= 200 and up == 0
    # every link joins two nodes within radio range of each other, as last reported
    where: dict[str, tuple[float, float]] = {}
    checked = 0
    for x in nodes:
        where[x["device"]] = (x["position"][0], x["position"][1])
        if "links" in x["changed"]:
            assert x["device"] not in x.get("links", [])
            for other in x.get("links", []):
                if other in where:
                    distance = math.dist(where[x["device"]], where[other])
                    assert distance <= RADIO_RANGE + SLACK
                    checked += 1
    assert checked > 0
    # data values (temperature readings, sem 20) arrive as telemetry
    readings = [x["telemetry"]["data.20"]["value"] for x in nodes if "data.20" in x["changed"]]
    assert readings and all(5 <= r <= 40 for r in readings)


async def test_sink_serves_world_devices_as_spyglass_nodes_and_a_snapshot_to_late_viewers():
    world = World()
    # a tracked rigid body (non-numeric id) and two sensor nodes that keep their numbers
    world.update_device("vrpn@x", "Tracker0", receive_time=100.0, position=(1.24, -2.0, 0.5))
    world.update_device("net", "7", receive_time=100.0, position=(10.0, 20.0, 0.0), links=["9"])
    world.update_device("net", "9", receive_time=100.0, position=(12.0, 21.0, 0.0), links=["7"])

    sink = open_sink("spyglass://127.0.0.1:0?scale=0.01")  # 1 unit = 1 cm
    gateway = Gateway(world=world).add(sink)
    run = asyncio.create_task(gateway.run())
    await asyncio.wait_for(sink.ready.wait(), 5)
    assert sink.address is not None
    reader, writer = await asyncio.open_connection(*sink.address)

    session = SpyglassSession()

    async def packets(n: int) -> list[Any]:
        found: list[Any] = []
        while len(found) < n:
            data = await asyncio.wait_for(reader.read(65536), 5)
            events = session.feed(data, 0.0)
            assert all(isinstance(e, PacketsReceived) for e in events)
            found += packets_of(events)
        return found

    snapshot = await packets(3)
    by_sender = {p.sender: p for p in snapshot}
    assert set(by_sender) >= {7, 9}
    (tracker,) = [p for s, p in by_sender.items() if s not in (7, 9)]
    assert isinstance(tracker, NeighborhoodPacket)
    assert (tracker.x, tracker.y, tracker.z) == (124, -200, 50)
    assert {(p.seconds, p.milliseconds) for p in snapshot} == {(100, 0)}  # when it was seen
    assert by_sender[7].neighbors == (9,) and (by_sender[7].x, by_sender[7].y) == (1000, 2000)

    # a live change: a telemetry value becomes a float data packet at the node's position
    world.update_device("net", "9", receive_time=101.5, telemetry={"temperature": (21.5, "Cel")})
    (reading,) = await packets(1)
    assert isinstance(reading, DataPacket)
    assert reading.sender == 9 and reading.values == (21.5,) and reading.semantic_type >= 100
    assert (reading.seconds, reading.milliseconds) == (101, 500)
    writer.close()
    gateway.stop()
    await run
    assert not gateway.failures


async def test_the_demo_recording_as_a_file_source_fills_the_world():
    packets = list(read_rec(DEMO))
    gateway = Gateway()
    source = open_source(str(DEMO))
    gateway.add(source)
    await asyncio.wait_for(gateway.run(), 30)
    assert not gateway.failures
    assert source.stats.messages_in == len(packets) and source.stats.dropped == 0
    senders = {str(p.sender) for p in packets}
    table = gateway.world.tables[source.name]
    nodes = {table.ids[i] for i in range(len(table)) if table.kinds[i] == "sensor_node"}
    assert nodes == senders
    # each node stands where its last packet put it
    last = {str(p.sender): p for p in packets}
    for device_id, packet in last.items():
        device = gateway.world.device(source.name, device_id)
        assert device is not None and device.position is not None
        assert np.allclose(device.position, (packet.x, packet.y, packet.z))


async def test_a_paced_file_source_follows_the_recorded_time(tmp_path):
    from robowire.protocols.spyglass import NeighborhoodPacket, write_rec

    path = tmp_path / "three.rec"
    write_rec(
        path,
        [
            NeighborhoodPacket(semantic_type=10, sender=1, seconds=1000, milliseconds=ms)
            for ms in (0, 150, 300)
        ],
    )
    endpoint = parse_endpoint(str(path))
    source = open_source(dataclasses.replace(endpoint, options={"speed": "1"}))
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.wait_for(Gateway().add(source).run(), 5)
    assert source.stats.messages_in == 3
    assert 0.28 <= loop.time() - start < 1.5


def test_default_port_is_documented_choice():
    assert DEFAULT_PORT == 7870


async def test_a_cut_recording_delivers_every_whole_packet_and_counts_the_cut_once(tmp_path):
    """Regression: 1,262 whole records and a cut one gave 1,024 packets (whole batches only)
    and "0 dropped"."""
    path = cut_recording(tmp_path / "cut.rec", 1262)
    gateway = Gateway()
    source = open_source(str(path))
    assert isinstance(source, SpyglassFileSource)
    gateway.add(source)
    await asyncio.wait_for(gateway.run(), 30)
    assert not gateway.failures
    assert source.stats.messages_in == 1262 and source.stats.dropped == 1
    assert "cut off" in source.stats.last_drop_reason


def test_settings_from_url_options_and_the_options_each_role_reads() -> None:
    settings = Settings.parse({"scale": "0.5", "offset": "1,2,3", "profile": "20=data:temp:Cel"})
    session = Settings.parse({"max_size": "255"}).session()
    assert session.max_size == 255
    data = DataPacket(
        semantic_type=20,
        syntax_type=SyntaxType.UINT8_LIST,
        values=(9,),
        sender=3,
        seconds=1_000_000,
        milliseconds=500,
        x=10,
        y=-20,
        z=3,
    )
    world = World()
    adapter = settings.adapter(world, "spyglass@test")
    assert adapter.apply(settings.session().feed(encode(data), 0.0), 1_000_000) == 1
    node = world.device("spyglass@test", "3")
    assert node is not None
    assert node.telemetry == {"temp": (9.0, "Cel")}
    assert node.position == (6.0, -8.0, 4.5)
    for bad in ({"scale": "x"}, {"offset": "1,2"}, {"profile": "10=nothing"}):
        with pytest.raises(ConfigError, match="spyglass"):
            Settings.parse(bad)
    with pytest.raises(ConfigError):
        Settings.parse({"max_size": "5"})
    # what the gateway lets through is exactly what the services read
    assert PROTOCOL.source_options == {"profile", "scale", "offset", "max_size", "retry"}
    assert PROTOCOL.file_options == {"profile", "scale", "offset", "max_size", "speed"}
    assert PROTOCOL.sink_options == {"profile", "scale", "offset"}
    assert "nodes" not in PROTOCOL.sim_settings and "radio_range" in PROTOCOL.sim_settings
    with pytest.raises(ConfigError, match="'scal'"):
        open_source("spyglass://127.0.0.1:1?scal=0.01")
