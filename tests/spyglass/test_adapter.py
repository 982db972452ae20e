"""SpyGlass adapter into a real World: nodes, links, telemetry, polylines, moving objects."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from spyglass_strategies import DEMO

from robowire.addresses import parse_endpoint
from robowire.protocols.spyglass import codec as c
from robowire.protocols.spyglass import rec
from robowire.protocols.spyglass.adapter import SpyglassAdapter, WorldEncoder, object_id
from robowire.protocols.spyglass.events import PacketReceived, packets_of
from robowire.protocols.spyglass.services import SpyglassSink
from robowire.protocols.spyglass.session import SpyglassSession
from robowire.world import Update, World

SRC = "spyglass@test"
T0 = 1_000_000


def received(packets: Sequence[c.Packet]) -> list[PacketReceived]:
    """Packets as the session's events that carry them."""
    return [PacketReceived(packet=p, time=0.0) for p in packets]


def head(sender: int, **extra: object) -> dict[str, object]:
    return {
        "sender": sender,
        "seconds": T0,
        "milliseconds": 500,
        "x": 10,
        "y": -20,
        "z": 3,
        **extra,
    }


def test_nodes_links_and_positions() -> None:
    world = World()
    adapter = SpyglassAdapter(world, SRC)
    packets = [
        c.NeighborhoodPacket(semantic_type=10, neighbors=(2, 3, 3, 5), **head(5)),
        c.NeighborhoodPacket(semantic_type=10, neighbors=(5,), **head(2, x=1, y=2, z=0)),
    ]
    adapter.apply(received(packets), receive_time=T0 + 2.0)
    node = world.device(SRC, "5")
    assert node.kind == "sensor_node"
    assert node.links == ("2", "3")
    assert node.position == (10.0, -20.0, 3.0)
    assert node.source_time == pytest.approx(T0 + 0.5)
    assert node.receive_time == T0 + 2.0
    assert world.device(SRC, "2").position == (1.0, 2.0, 0.0)
    assert world.device(SRC, "2").links == ("5",)


def test_scale_and_offset() -> None:
    world = World()
    adapter = SpyglassAdapter(world, SRC, scale=0.5, offset=(100.0, 200.0, 0.0))
    adapter.apply(received([c.StdPacket(semantic_type=1, payload=b"\x01\xff", **head(1))]), T0)
    node = world.device(SRC, "1")
    assert node.position == (105.0, 190.0, 1.5)
    assert node.attributes["raw.1"] == "01ff"


def test_latest_packet_of_a_node_wins() -> None:
    world = World()
    adapter = SpyglassAdapter(world, SRC)
    batch = [
        c.StdPacket(semantic_type=1, **head(1, x=1)),
        c.StdPacket(semantic_type=1, **head(1, x=2)),
    ]
    adapter.apply(received(batch), T0)
    assert world.device(SRC, "1").position == (2.0, -20.0, 3.0)
    assert len(world) == 1


def test_data_telemetry_with_default_and_profile_names() -> None:
    world = World()
    profile = c.SemanticProfile.parse("20=data:temperature:Cel")
    adapter = SpyglassAdapter(world, SRC, profile=profile)
    updates = world.feed.subscribe(100)
    adapter.apply(
        received(
            [
                c.DataPacket(
                    semantic_type=20, syntax_type=c.SyntaxType.UINT8_LIST, values=(23, 5), **head(4)
                ),
                c.DataPacket(
                    semantic_type=77, syntax_type=c.SyntaxType.FLOAT_LIST, values=(1.5,), **head(4)
                ),
                c.VariableListPacket(
                    semantic_type=78,
                    items=((c.SyntaxType.INT16_LIST, -4), (c.SyntaxType.UINT8_LIST, 1)),
                    **head(4),
                ),
            ]
        ),
        T0,
    )
    node = world.device(SRC, "4")
    assert node.telemetry == {
        "temperature": (23.0, "Cel"),
        "data.77": (1.5, "1"),
        "data.78": (-4.0, "1"),
    }
    assert node.attributes["temperature"] == [23, 5]
    assert node.attributes["data.78"] == [-4, 1]
    (update,) = updates.drain()
    assert {"position", "temperature", "data.77", "attributes"} <= update.fields


def test_polyline_and_node_link() -> None:
    world = World()
    profile = c.SemanticProfile.parse("30=coordinates-2d,31=coordinates-3d,60=node-link")
    adapter = SpyglassAdapter(world, SRC, profile=profile, scale=2.0)
    adapter.apply(
        received(
            [
                c.CoordinatesList2Packet(semantic_type=30, points=((0, 0), (10, 5)), **head(150)),
                c.CoordinatesList3Packet(semantic_type=31, points=((1, 2, 3),), **head(150)),
                c.NodeLinkPacket(semantic_type=60, destination=9, values=(42,), **head(150)),
            ]
        ),
        T0,
    )
    attributes = world.device(SRC, "150").attributes
    assert attributes["polyline.30"] == [[0.0, 0.0, 0.0], [20.0, 10.0, 0.0]]
    assert attributes["polyline.31"] == [[2.0, 4.0, 6.0]]
    assert attributes["link.60"] == {"to": "9", "values": [42]}


def test_trajectory_object_moves_with_time() -> None:
    world = World()
    adapter = SpyglassAdapter(world, SRC)
    trajectory = c.TrajectoryPacket3(
        semantic_type=40,
        points=((0, 0, 0), (100, 0, 0), (100, 50, 10)),
        durations=(10, 5),
        **head(1, milliseconds=0),
    )
    receive = T0 + 0.25  # the sender's clock is 0.25 s behind ours
    adapter.apply(received([trajectory]), receive)
    device_id = object_id(1, 40)
    obj = world.device(SRC, device_id)
    assert obj.kind == "object" and obj.position == (0.0, 0.0, 0.0)
    assert obj.attributes["durations"] == [10, 5]
    assert adapter.advance(receive + 2.5) == 1
    obj = world.device(SRC, device_id)
    assert obj.position == pytest.approx((25.0, 0.0, 0.0))
    assert obj.velocity == pytest.approx((10.0, 0.0, 0.0))
    adapter.advance(receive + 12.5)
    assert world.device(SRC, device_id).position == pytest.approx((100.0, 25.0, 5.0))
    adapter.advance(receive + 100)
    obj = world.device(SRC, device_id)
    assert obj.position == pytest.approx((100.0, 50.0, 10.0)) and obj.velocity == (0.0, 0.0, 0.0)
    # A new trajectory of the same sender and semantic type replaces the old one.
    again = c.TrajectoryPacket2(
        semantic_type=40, points=((5, 5), (6, 6)), durations=(1,), **head(1)
    )
    adapter.apply(received([again]), receive + 200)
    assert adapter.objects == 1
    assert world.device(SRC, device_id).position == (5.0, 5.0, 0.0)


def test_demo_recording_into_the_world() -> None:
    world = World()
    adapter = SpyglassAdapter(world, SRC)
    packets = list(rec.read_rec(DEMO))
    for start in range(0, len(packets), 100):
        adapter.apply(received(packets[start : start + 100]), receive_time=packets[start].time)
    nodes = [d for d in world.devices(SRC) if d.kind == "sensor_node"]
    objects = [d for d in world.devices(SRC) if d.kind == "object"]
    senders = {p.sender for p in packets}
    assert {d.device_id for d in nodes} == {str(s) for s in senders}
    assert [d.device_id for d in objects] == ["1:40"]
    linked = [d for d in nodes if d.links]
    assert len(linked) == 49 and all(len(d.links) <= 5 for d in linked)
    assert sum("data.20" in d.telemetry for d in nodes) == 97
    assert "polyline.30" in world.device(SRC, "150").attributes


def test_world_encoder_gives_the_packets_the_codec_encodes_one_by_one() -> None:
    """The sink's vectorised encoding is byte for byte what `encode` gives for each packet."""
    import numpy as np

    from robowire.protocols.spyglass.adapter import Frame, WorldEncoder
    from robowire.protocols.spyglass.profile import NEIGHBORHOOD

    world = World()
    world.update_device("s", "5", receive_time=100.25, position=(1.4, -2.6, 3.0), links=["7"])
    world.update_device("s", "7", receive_time=100.5, source_time=99.0015, position=(4, 5, 6),
                        telemetry={"data.20": (21.5, "Cel"), "humidity": (0.25, "1")})  # fmt: skip
    world.update_device("s", "x", receive_time=101.0, telemetry={"data.20": (float("nan"), "Cel")})
    encoder = WorldEncoder(frame=Frame.of([0.5], [0, 0, 0]))
    table = world.table("s")
    everything = frozenset({"position", "links", "data.20", "humidity"})
    got = encoder.update(world, Update("s", np.arange(3), everything, 101.0))

    expected = []
    for slot, device in enumerate(table.ids):
        sender = encoder.numbers.of(table, device)
        assert sender is not None
        stamp = table.source_time[slot]
        seconds, millis = c.time_fields(table.receive_time[slot] if np.isnan(stamp) else stamp)
        x, y, z = (int(v) for v in encoder.frame.to_units(table.position[slot : slot + 1])[0])
        header = {"sender": sender, "seconds": seconds, "milliseconds": millis, "x": x, "y": y}
        header["z"] = z
        links = tuple(n for n in (encoder.numbers.of(table, d) for d in table.links[slot]) if n)
        expected.append(c.encode(c.NeighborhoodPacket(semantic_type=NEIGHBORHOOD,
                                                      neighbors=links, **header)))  # fmt: skip
        for name in ("data.20", "humidity"):
            value = table.telemetry[name][slot]
            if not np.isnan(value):
                code = encoder.semantic_types(name)
                assert code is not None
                expected.append(c.encode(c.DataPacket(semantic_type=code, values=(float(value),),
                    syntax_type=c.SyntaxType.FLOAT_LIST, **header)))  # fmt: skip
    assert sorted(got) == sorted(expected) and len(got) == 3 + 2


def relayed_one_update_at_a_time(
    batches: Sequence[Sequence[c.Packet]],
) -> tuple[list[c.Packet], int]:
    """What a SpyGlass relay sends of `batches` (each one read of the stream) when its sink
    takes the updates one at a time, after the source wrote them all (a sink behind its
    source, as on a loaded machine); and how many packets it found superseded."""
    world = World()
    world.table(SRC).protocol = c.NAME  # a SpyGlass source's own table: its packets go out
    adapter = SpyglassAdapter(world, SRC)
    encoder = WorldEncoder()
    with world.subscribe(every_update=True) as queue:
        for batch in batches:
            events = SpyglassSession().feed(b"".join(map(c.encode, batch)), 0.0)
            adapter.apply(events, T0)
        out = [p for u in queue.drain() if isinstance(u, Update) for p in encoder.update(world, u)]
    return [c.decode(p) for p in out], encoder.superseded


def neighbours(sender: int, ms: int, *others: int) -> c.NeighborhoodPacket:
    return c.NeighborhoodPacket(semantic_type=10, neighbors=others, **head(sender, milliseconds=ms))


def reading(sender: int, ms: int, value: int) -> c.DataPacket:
    return c.DataPacket(
        semantic_type=20,
        syntax_type=c.SyntaxType.UINT8_LIST,
        values=(value,),
        **head(sender, milliseconds=ms),
    )


def test_a_relay_sends_each_packet_with_its_own_time_in_time_order() -> None:
    # node 1's reading comes after its neighbourhood, and node 3 after both: in one read, and
    # over two reads taken by the sink after both (it went out stamped with the neighbourhood's
    # time, and node 3's neighbourhood before node 2's reading)
    # (and node 4 sets off an object: it went out first, written before the batch's nodes)
    path = c.TrajectoryPacket3(
        semantic_type=40, points=((0, 0, 0), (5, 5, 5)), durations=(9,), **head(4, milliseconds=250)
    )
    packets = [neighbours(4, 50), neighbours(1, 100, 2), reading(2, 200, 21), path]
    packets += [reading(1, 300, 22), neighbours(3, 400)]
    assert relayed_one_update_at_a_time([packets]) == (packets, 0)
    assert relayed_one_update_at_a_time([packets[:2], packets[2:]]) == (packets, 0)


def test_a_relay_behind_its_source_sheds_superseded_packets_and_counts_them() -> None:
    packets = [reading(1, 100, 21), neighbours(1, 150, 2), reading(1, 200, 22)]
    packets += [neighbours(1, 250, 3), neighbours(2, 300, 1)]
    for batches in ([packets], [packets[:2], packets[2:]], [[p] for p in packets]):
        # node 1's first reading and neighbourhood were replaced before the sink took them
        assert relayed_one_update_at_a_time(batches) == (packets[2:], 2)


class Viewer:
    """A viewer's end of a SpyGlass sink's stream, in memory (what the sink's driver holds)."""

    def __init__(self) -> None:
        self.session = SpyglassSession()

    def write_buffer_size(self) -> int:
        return 0

    def flush(self) -> None:
        pass

    def packets(self) -> list[c.Packet]:
        return packets_of(SpyglassSession().feed(self.session.data_to_send(), 0.0))


def test_a_viewer_that_comes_while_updates_wait_gets_the_latest_state_then_only_newer() -> None:
    world = World()
    world.table(SRC).protocol = c.NAME
    adapter, sink = SpyglassAdapter(world, SRC), SpyglassSink(parse_endpoint("spyglass://h:1"))
    early, late = Viewer(), Viewer()
    sink.viewers.add(early)  # type: ignore[arg-type]
    before = [neighbours(1, 100, 2), reading(1, 200, 21), neighbours(2, 300, 1)]
    after = [reading(2, 300, 22), neighbours(1, 400, 2)]  # (node 2's reading: of the same time)
    with world.subscribe(every_update=True) as queue:
        adapter.apply(SpyglassSession().feed(b"".join(map(c.encode, before)), 0.0), T0)
        sink.viewers.add(late)  # type: ignore[arg-type]
        sink.welcome(world, late)  # type: ignore[arg-type]
        snapshot = late.packets()
        adapter.apply(SpyglassSession().feed(b"".join(map(c.encode, after)), 0.0), T0)
        for update in queue.drain():  # one at a time
            sink.write(world, [update])
    # (the sink took the updates after both reads: node 1's first neighbourhood was replaced)
    assert early.packets() == before[1:] + after
    assert sink.stats.extra["shed"] == 1
    # the latest state (each node's at its newest time), then nothing it had (nor older):
    # never backwards, and node 2's reading of the same time as its state is not lost
    assert snapshot == [neighbours(1, 200, 2), reading(1, 200, 21), neighbours(2, 300, 1)]
    assert late.packets() == after
