"""The VRSP sessions fed bytes and `now` by hand: DEF before DATA, instances, reassembly,
loss and reordering, and the sender's schedule and splitting."""

from __future__ import annotations

import random

import numpy as np
import pytest

from robowire.errors import LocalProtocolError
from robowire.protocols.vrsp.codec import (
    DefinitionTable,
    encode_data,
    encode_def,
    encode_implicit,
)
from robowire.protocols.vrsp.events import DefinitionReceived, FrameDue, SwarmFrame, VrspEvent
from robowire.protocols.vrsp.session import ReceiverSession, ReceiverState, SenderSession
from robowire.sequence import PeerRestarted
from robowire.wire import PacketDropped

from .conftest import LOADED, PLAIN, as_data, as_def, blocks_of, swarm_of

PEER = ("10.0.0.5", 9742)
N = 600
IDS = list(range(100, 100 + N))
BLOCKS = blocks_of(IDS[:500], IDS[500:])
TABLE = DefinitionTable.build(0xCAFE, (47.0, 8.0, 400.0), BLOCKS)
DEFS = encode_def(0xCAFE, (47.0, 8.0, 400.0), BLOCKS)


def frame_datagrams(frame: int, x: float = 0.0, table: DefinitionTable = TABLE) -> list[bytes]:
    swarm = swarm_of(IDS, table.slots)
    swarm.position[:, 0] = x
    swarm.position[:, 2] = np.arange(N)
    return encode_data(table, swarm, frame)


def ready() -> ReceiverSession:
    receiver = ReceiverSession()
    for d in DEFS:
        receiver.feed_datagram(d, PEER, 0.0)
    return receiver


def frames(events: list[VrspEvent]) -> list[SwarmFrame]:
    return [e for e in events if isinstance(e, SwarmFrame)]


def feed(receiver: ReceiverSession, datagrams: list[bytes]) -> list[VrspEvent]:
    return receiver.feed_datagrams([(d, PEER) for d in datagrams], 1.0)


def test_a_large_frame_spans_datagrams_and_is_one_event_when_whole() -> None:
    datagrams = frame_datagrams(1, x=3.0)
    assert len(datagrams) > 5
    receiver = ready()
    assert feed(receiver, datagrams[:-1]) == []
    (frame,) = frames(feed(receiver, datagrams[-1:]))
    assert frame.frame == 1 and frame.datagrams == len(datagrams)
    assert sorted(frame.swarm.ids.tolist()) == IDS
    by_id = dict(zip(frame.swarm.ids.tolist(), frame.swarm.position[:, 2].tolist(), strict=True))
    assert by_id[100] == 0.0 and by_id[699] == 599.0
    assert set(frame.swarm.position[:, 0].tolist()) == {3.0}


def test_data_before_its_def_is_dropped_and_counted_then_decoded() -> None:
    receiver = ReceiverSession()
    assert receiver.state is ReceiverState.WAITING_DEF
    one = frame_datagrams(1)
    events = feed(receiver, one)
    assert all(isinstance(e, PacketDropped) for e in events) and len(events) == len(one)
    assert receiver.stats.extra["no_definition"] == len(one)
    events = feed(receiver, DEFS)
    assert [type(e) for e in events] == [DefinitionReceived] * len(DEFS)
    assert receiver.state is ReceiverState.READY and receiver.table is not None
    assert receiver.table.complete
    assert len(frames(feed(receiver, frame_datagrams(2)))) == 1


def test_parts_arrive_in_any_order() -> None:
    datagrams = frame_datagrams(5)
    random.Random(3).shuffle(datagrams)
    receiver = ready()
    (frame,) = frames(feed(receiver, datagrams))
    assert sorted(frame.swarm.ids.tolist()) == IDS


def test_interleaved_frames_both_complete_in_order() -> None:
    a, b = frame_datagrams(1, x=1.0), frame_datagrams(2, x=2.0)
    mixed = [d for pair in zip(a, b, strict=True) for d in pair]
    got = frames(feed(ready(), mixed))
    assert [f.frame for f in got] == [1, 2]


def test_a_frame_with_a_lost_part_is_given_up_when_a_newer_one_completes() -> None:
    receiver = ready()
    first = frame_datagrams(1)
    feed(receiver, first[:3] + first[4:])  # part 3 lost
    got = frames(feed(receiver, frame_datagrams(2)))
    assert [f.frame for f in got] == [2]
    assert receiver.stats.extra["incomplete"] == 1
    # the lost part turning up late is stale now
    (dropped,) = feed(receiver, first[3:4])
    assert isinstance(dropped, PacketDropped) and "stale" in dropped.reason
    assert receiver.stats.extra["stale"] == 1


def test_an_older_frame_after_a_newer_one_is_stale() -> None:
    receiver = ready()
    frames(feed(receiver, frame_datagrams(10)))
    events = feed(receiver, frame_datagrams(9))
    assert not frames(events)
    assert receiver.stats.extra["stale"] == len(frame_datagrams(9))


def test_frame_numbers_wrap() -> None:
    receiver = ready()
    assert frames(feed(receiver, frame_datagrams(0xFFFFFFFF)))
    assert [f.frame for f in frames(feed(receiver, frame_datagrams(0)))] == [0]


def test_frames_in_progress_are_bounded() -> None:
    receiver = ready()
    for k in range(1, 40):
        feed(receiver, frame_datagrams(k)[:2])  # never whole
    assert len(receiver._pending) <= receiver.max_pending
    assert receiver.stats.extra["incomplete"] == 39 - receiver.max_pending


def test_a_repeated_part_is_taken_once() -> None:
    datagrams = frame_datagrams(4)
    receiver = ready()
    feed(receiver, datagrams[:2] + datagrams[:2])
    assert receiver.stats.extra["duplicate"] == 2
    assert len(frames(feed(receiver, datagrams[2:]))) == 1


def test_a_new_instance_replaces_the_definitions() -> None:
    receiver = ready()
    other_blocks = blocks_of(IDS[:10], [])
    other = DefinitionTable.build(0xBEEF, (1.0, 2.0, 3.0), other_blocks)
    restarted, event = feed(receiver, encode_def(0xBEEF, (1.0, 2.0, 3.0), other_blocks))
    assert isinstance(restarted, PeerRestarted) and receiver.wire_counts()["restarts"] == 1
    assert isinstance(event, DefinitionReceived) and event.new
    assert receiver.table is not None and receiver.table.instance == 0xBEEF
    old = feed(receiver, frame_datagrams(1))
    assert all(isinstance(e, PacketDropped) and "before its VRSP_DEF" in e.reason for e in old)
    swarm = swarm_of(IDS[:10])
    (frame,) = frames(feed(receiver, encode_data(other, swarm, 1)))
    assert frame.table.root == (1.0, 2.0, 3.0)


def test_the_def_repeated_at_one_hertz_is_taken_in_once() -> None:
    receiver = ready()
    assert feed(receiver, DEFS) == []
    assert receiver.stats.dropped == 0


def test_implicit_data_decodes_in_auto_framing() -> None:
    small = blocks_of([1, 2], [3])
    table = DefinitionTable.build(5, (0.0, 0.0, 0.0), small)
    swarm = swarm_of([1, 2, 3], table.slots)
    swarm.position[:, 1] = [10, 20, 30]
    receiver = ReceiverSession()
    feed(receiver, encode_def(5, (0.0, 0.0, 0.0), small))
    (frame,) = frames(feed(receiver, [encode_implicit(table, swarm)]))
    assert frame.frame is None
    assert frame.swarm.ids.tolist() == [1, 2, 3]
    assert frame.swarm.position[:, 1].tolist() == [10.0, 20.0, 30.0]


# -- sender ------------------------------------------------------------------------------------


def sender(rate: float = 30.0, max_size: int = 1472) -> SenderSession:
    return SenderSession(destination=PEER, rng=random.Random(1), rate=rate, max_size=max_size)


def test_sender_sends_def_at_once_and_then_every_second() -> None:
    s = sender()
    assert s.tick(0.0) == [] and s.datagrams_to_send() == []
    assert s.define((47.0, 8.0, 400.0), BLOCKS, 10.0)
    first = s.datagrams_to_send()
    assert s.table is not None
    assert [as_def(d).instance for d, _ in first] == [s.table.instance] * len(first)
    assert all(addr == PEER for _, addr in first)
    s.tick(10.5)
    assert not any(d.startswith(b"\x08VRSP_DEF") for d, _ in s.datagrams_to_send())
    s.tick(11.0)
    assert [d for d, _ in s.datagrams_to_send() if d.startswith(b"\x08VRSP_DEF")] == [
        d for d, _ in first
    ]


def test_sending_data_before_the_definition_raises() -> None:
    s = sender()
    with pytest.raises(LocalProtocolError, match="IDLE"):
        s.send(swarm_of(IDS))
    assert s.datagrams_to_send() == []


def test_sender_makes_a_fresh_instance_only_when_the_definition_changes() -> None:
    s = sender()
    s.define((47.0, 8.0, 400.0), BLOCKS, 0.0)
    assert s.table is not None
    first = s.table.instance
    assert not s.define((47.0, 8.0, 400.0), blocks_of(IDS[:500], IDS[500:]), 0.1)
    assert s.table.instance == first
    assert s.define((47.0, 8.0, 401.0), BLOCKS, 0.2)
    assert s.table.instance != first
    other = sender()
    other.define((47.0, 8.0, 400.0), BLOCKS, 0.0)
    assert other.table is not None and other.table.instance == first  # from the seeded RNG


def test_sender_says_when_frames_are_due_at_its_rate() -> None:
    s = sender(rate=30.0)
    s.define((0.0, 0.0, 0.0), BLOCKS, 0.0)
    due = []
    for step in range(61):
        due += [e for e in s.tick(step / 60) if isinstance(e, FrameDue)]
    assert len(due) == 31  # 0 s .. 1 s at 30 Hz, both ends
    assert s.next_deadline() is not None


@pytest.mark.parametrize("size", [1472, 9000, 65507])
def test_sender_keeps_datagrams_within_the_size(size: int) -> None:
    s = sender(max_size=size)
    s.define((0.0, 0.0, 0.0), BLOCKS, 0.0)
    s.datagrams_to_send()
    count = s.send(swarm_of(IDS, 3))
    out = s.datagrams_to_send()
    assert len(out) == count and all(len(d) <= size for d, _ in out)
    assert {as_data(d).parts for d, _ in out} == {count}
    if size == 65507:
        assert count == 1


def test_sender_refuses_sizes_past_a_udp_datagram() -> None:
    with pytest.raises(ValueError, match="65507"):
        sender(max_size=70_000)


def test_sender_and_receiver_in_memory() -> None:
    s = sender()
    receiver = ReceiverSession()
    s.define((47.0, 8.0, 400.0), [(PLAIN, np.array(IDS[:500], np.uint16)),
                                  (LOADED, np.array(IDS[500:], np.uint16))], 0.0)  # fmt: skip
    got: list[SwarmFrame] = []
    for step in range(10):
        now = step / 30
        for event in s.tick(now):
            if isinstance(event, FrameDue):
                swarm = swarm_of(IDS, 3)
                swarm.position[:, 0] = event.frame
                s.send(swarm)
        got += frames(receiver.feed_datagrams([(d, PEER) for d, _ in s.datagrams_to_send()], now))
    assert [f.frame for f in got] == list(range(10))
    assert [float(f.swarm.position[0, 0]) for f in got] == [float(k) for k in range(10)]
