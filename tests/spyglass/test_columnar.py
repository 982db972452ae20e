"""The columnar path (session -> `PacketsReceived` -> adapter, no object per packet) gives the
same world, and the same changes to subscribers, as the typed-packet path, over the original
tool's 2009 recording and over random packets."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from spyglass_strategies import DEMO, PROFILE, packets

from robowire.protocols.spyglass import codec as c
from robowire.protocols.spyglass import rec
from robowire.protocols.spyglass.adapter import SpyglassAdapter
from robowire.protocols.spyglass.events import PacketReceived, PacketsReceived, packets_of
from robowire.protocols.spyglass.session import SpyglassSession
from robowire.world import Update, World

SRC = "spyglass@test"


def state(world: World) -> list[dict[str, Any]]:
    return [device.to_json() for device in world.devices()]


def changes(subscription: Any) -> list[tuple[list[int], list[str], dict[str, list[Any]]]]:
    """Every update a subscriber got: its slots, changed fields and values, in a stable order."""
    out = []
    for update in subscription.pull():
        assert isinstance(update, Update)
        order = update.slots.argsort()
        values = {k: v[order].tolist() for k, v in sorted(update.values.items())}
        out.append((update.slots[order].tolist(), sorted(update.fields), values))
    return sorted(out, key=repr)


def compare(stream: bytes, chunk: int, profile: c.SemanticProfile = c.DEFAULT_PROFILE) -> int:
    """Feed `stream` in `chunk`-byte reads to one session; each read's events go to a columnar
    adapter and, as typed packets, to an object-path adapter. Returns the packets seen."""
    columnar, objects = World(), World()
    a = SpyglassAdapter(columnar, SRC, profile=profile, scale=0.5, offset=(1.0, 2.0, 3.0))
    b = SpyglassAdapter(objects, SRC, profile=profile, scale=0.5, offset=(1.0, 2.0, 3.0))
    sub_a, sub_b = columnar.subscribe(every_update=True), objects.subscribe(every_update=True)
    session = SpyglassSession(profile=profile)
    seen = 0
    for i in range(0, len(stream), chunk):
        events = session.feed(stream[i : i + chunk], float(i))
        assert not any(isinstance(e, PacketReceived) for e in events)
        typed = [PacketReceived(packet=p, time=float(i)) for p in packets_of(events)]
        receive_time = 1_700_000_000.0 + i
        assert a.apply(events, receive_time) == b.apply(typed, receive_time) == len(typed)
        assert state(columnar) == state(objects)
        assert changes(sub_a) == changes(sub_b)
        seen += len(typed)
    assert a.advance(1_800_000_000.0) == b.advance(1_800_000_000.0)
    assert state(columnar) == state(objects)
    return seen


def test_the_2009_recording_gives_the_same_world_both_ways() -> None:
    stream = b"".join(record.data for record in rec.rec_records(DEMO))
    for chunk in (4096, 65536):
        assert compare(stream, chunk) == 3773


def test_the_columns_hold_the_header_fields_of_every_packet() -> None:
    stream = b"".join(record.data for record in rec.rec_records(DEMO))
    events = SpyglassSession().feed(stream, 0.0)
    [batch] = [e for e in events if isinstance(e, PacketsReceived)]
    typed = list(rec.read_rec(DEMO))
    head = batch.packets.head
    assert head["sender"].tolist() == [p.sender for p in typed]
    assert head["semantic"].tolist() == [p.semantic_type for p in typed]
    assert head["x"].tolist() == [p.x for p in typed]
    assert batch.packets.packets() == typed


few_senders = st.integers(0, 3)


@given(
    st.lists(
        st.tuples(packets(), few_senders).map(lambda t: dataclasses.replace(t[0], sender=t[1])),
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 200),
)
def test_random_packets_give_the_same_world_both_ways(batch: list[Any], chunk: int) -> None:
    assert compare(c.frame(batch), chunk, PROFILE) == len(batch)


def test_an_empty_neighbourhood_after_a_full_one_leaves_the_node_without_links() -> None:
    full = c.NeighborhoodPacket(semantic_type=10, sender=0, neighbors=(1,))
    empty = c.NeighborhoodPacket(semantic_type=10, sender=0, neighbors=())
    assert compare(c.frame([full, empty]), 1 << 16) == 2
    world = World()
    events = SpyglassSession().feed(c.frame([full, empty]), 0.0)
    SpyglassAdapter(world, SRC).apply(events, 0.0)
    assert [d.links for d in world.devices()] == [()]
