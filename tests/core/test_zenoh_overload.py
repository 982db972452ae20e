"""The Zenoh source under overload, sans I/O: payloads in (as Zenoh hands them over), what is
written into the world, shed and dropped out. A busy gateway writes the newest STATE of each
set of devices and columns and counts the rest as shed, and the newest description of the
same known devices; it never sheds a DEVICES frame that says who a slot is, or a LOG frame;
its inbox stays within its bytes, dropping the oldest STATE frames first."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from robowire.transport.budget import Pressure
from robowire.world import LogEvent, World
from robowire.zenoh import codec, keys
from robowire.zenoh.net import Link
from robowire.zenoh.source import READ_FRAMES, Identities, Inbox, ZenohSource, decode_all

Frame = tuple[str, bytes]  # a key and its payload, as the inbox holds them


def devices(source: str, ids: Sequence[str], link: str = "") -> Frame:
    """A DEVICES frame of `ids` at slots 0.., each linked to `link` if one is given."""
    n = len(ids)
    frame = codec.Devices(
        slots=tuple(range(n)), ids=tuple(ids), kinds=("drone",) * n, names=tuple(ids),
        links=((link,) if link else (),) * n, attributes=({},) * n,
    )  # fmt: skip
    return keys.key(source, keys.DEVICES), codec.encode(frame)


def state(source: str, x: float, slots: Sequence[int] = (0, 1), column: str = "position") -> Frame:
    n = len(slots)
    values = np.full((n, 3), x)
    frame = codec.State(
        receive_time=x,
        slots=np.asarray(slots, np.uint32),
        columns={column: codec.Column(values=values)},
    )
    return keys.key(source, keys.STATE), codec.encode(frame)


def log_entry(source: str, text: str) -> Frame:
    frame = codec.Log(device="a", text=text, level="info", time=1.0)
    return keys.key(source, keys.LOG), codec.encode(frame)


class Bus:
    """A bus source with its adapter on `world`, as `Source.run` sets it up; `heard` hands it
    frames as one inbox batch (`ZenohSource.connect` does the same)."""

    def __init__(self) -> None:
        self.world = World()
        self.source = ZenohSource(Link("127.0.0.1", 7447, "connect", False))
        self.source.adapter = self.source.new_adapter(self.world)
        self.identities = Identities()

    def heard(self, *frames: Frame, now: float = 1.0) -> None:
        self.source.deliver(decode_all(frames, self.identities), now)

    def spent(self) -> None:
        """The source has spent its credit: what comes now waits until `apply`."""
        assert self.source.budget is not None
        self.source.budget.credit = -1.0

    @property
    def shed(self) -> int:
        assert self.source.budget is not None
        return self.source.budget.shed

    def x(self, source: str) -> list[float]:
        return [d.position[0] for d in self.world.devices(source) if d.position is not None]


@pytest.fixture
def behind(monkeypatch: Any) -> Pressure:
    """The gateway's loop counts as behind (as a starved gateway's would)."""
    state = Pressure(until=float("inf"))
    monkeypatch.setattr("robowire.service.pressure", lambda: state)
    return state


@pytest.fixture
def bus() -> Iterator[Bus]:
    yield Bus()


async def test_a_burst_of_states_of_the_same_devices_writes_the_newest_and_counts_the_rest_shed(
    behind: Pressure, bus: Bus
) -> None:
    bus.heard(devices("swarm", ["a", "b"]), state("swarm", 0.0))
    bus.spent()
    bus.heard(*(state("swarm", float(x)) for x in range(1, 5)))
    bus.heard(*(state("swarm", float(x)) for x in range(5, 9)))
    assert bus.x("swarm") == [0.0, 0.0]  # waiting for credit
    bus.source.apply()  # what the timer does once the credit is back
    assert bus.x("swarm") == [8.0, 8.0]
    assert bus.shed == 7  # 1..7: stale before they were written
    assert bus.source.stats.messages_in == 2 + 8  # every frame counted as received


async def test_devices_and_log_frames_are_never_shed(behind: Pressure, bus: Bus) -> None:
    bus.heard(devices("swarm", ["a"]))
    bus.spent()
    with bus.world.feed.subscribe() as feed:
        bus.heard(log_entry("swarm", "one"), state("swarm", 1.0, [0]), log_entry("swarm", "two"))
        bus.heard(devices("swarm", ["a", "b"]), state("swarm", 2.0, [0, 1]))
        bus.heard(log_entry("swarm", "three"), state("swarm", 3.0, [0, 1]))
        bus.source.apply()
        logs = [e.text for e in feed.drain() if isinstance(e, LogEvent)]
    assert logs == ["one", "two", "three"]
    assert [d.device_id for d in bus.world.devices("swarm")] == ["a", "b"]
    assert bus.x("swarm") == [3.0, 3.0]
    assert bus.shed == 1  # the STATE of a and b at 2.0; the one of a alone covers other slots


async def test_descriptions_of_the_same_devices_write_the_newest_and_states_shed_across_them(
    behind: Pressure, bus: Bus
) -> None:
    """A SpyGlass network relinks its nodes many times a second: each pull of a worker sends
    its nodes' DEVICES frame again. A busy gateway writes the newest and sheds the rest, as
    for STATE frames; the states between them still name the same devices, so they are
    stale across them too. (A gateway that took every one held thousands: memory grew
    without bound in a starved workers run.)"""
    bus.heard(devices("net", ["a", "b"]), state("net", 0.0))
    bus.spent()
    for x in range(1, 6):
        bus.heard(devices("net", ["a", "b"], link=f"n{x}"), state("net", float(x)))
    bus.source.apply()
    assert bus.shed == 4 + 4
    assert [d.links for d in bus.world.devices("net")] == [("n5",), ("n5",)]
    assert bus.x("net") == [5.0, 5.0]
    assert bus.source.stats.messages_in == 2 + 10  # every frame counted as received


async def test_a_state_of_other_devices_or_columns_or_a_renumbering_is_not_stale(
    behind: Pressure, bus: Bus
) -> None:
    bus.heard(devices("swarm", ["a", "b"]), devices("other", ["c"]))
    bus.spent()
    bus.heard(
        state("swarm", 1.0, [0], "position"),
        state("swarm", 2.0, [0], "velocity"),  # other columns: a frame has the changed ones
        state("swarm", 3.0, [1], "position"),  # other devices
        state("other", 4.0, [0], "position"),  # another source's slot 0
    )
    bus.source.apply()
    assert bus.shed == 0
    assert bus.x("swarm") == [1.0, 3.0]
    velocity = bus.world.device("swarm", "a").velocity
    assert velocity is not None and velocity[0] == 2.0
    assert bus.x("other") == [4.0]
    # a publisher that restarted says who its slots are now: slot 0 before that was `a`
    bus.spent()
    bus.heard(state("swarm", 5.0, [0]), devices("swarm", ["d", "a"]), state("swarm", 6.0, [0]))
    bus.source.apply()
    assert bus.shed == 0
    positions = {d.device_id: d.position[0] for d in bus.world.devices("swarm")}
    assert positions == {"a": 5.0, "b": 3.0, "d": 6.0}


async def test_a_gateway_that_keeps_up_writes_every_state(bus: Bus) -> None:
    bus.heard(devices("swarm", ["a", "b"]), *(state("swarm", float(x)) for x in range(5)))
    assert bus.x("swarm") == [4.0, 4.0] and bus.shed == 0
    assert bus.source.stats.messages_in == 6


def test_a_bad_state_frame_is_dropped_as_it_comes_and_a_good_one_read_only_when_written() -> None:
    key, good = state("swarm", 1.0)
    events = decode_all([(key, good[:-3]), (key, good)], Identities())
    assert [type(e).__name__ for e in events] == ["PacketDropped", "StateReceived"]
    packed = codec.unpack(good)
    assert isinstance(packed, codec.Packed) and packed.names == ("position",)
    assert packed.slots == np.array([0, 1], "<u4").tobytes()
    assert codec.encode(packed.state()) == good


async def test_the_inbox_holds_at_most_its_bytes_dropping_the_oldest_states_first() -> None:
    inbox = Inbox(asyncio.get_running_loop(), max_bytes=2500)
    big = [state("swarm", float(x), range(32)) for x in range(4)]  # under 1 kB each
    small = [devices("swarm", ["a"]), log_entry("swarm", "hi")]
    assert all(900 < len(p) < 1000 for _, p in big)
    held = []
    for frame in (small[0], big[0], big[1], small[1], big[2], big[3]):
        inbox.put(*frame)
        held.append(inbox.bytes)
    assert inbox.bytes <= 2500 and inbox.dropped == 2
    assert await inbox.wait() == [small[0], small[1], big[2], big[3]]
    assert inbox.bytes == 0 and inbox.dropped == 2
    assert inbox.peak == max(held) <= 2500  # the most it held stays known once it drained


async def test_an_inbox_of_frames_that_are_not_states_drops_the_oldest() -> None:
    inbox = Inbox(asyncio.get_running_loop(), max_frames=2)
    frames = [log_entry("swarm", str(i)) for i in range(4)]
    for frame in frames:
        inbox.put(*frame)
    assert await inbox.wait() == frames[2:] and inbox.dropped == 2


async def test_a_wake_up_takes_at_most_read_frames_and_the_next_takes_the_rest() -> None:
    inbox = Inbox(asyncio.get_running_loop())
    frames = [log_entry("swarm", str(i)) for i in range(READ_FRAMES + 3)]
    for frame in frames:
        inbox.put(*frame)
    assert await inbox.wait() == frames[:READ_FRAMES]
    assert inbox.bytes == sum(len(p) for _, p in frames[READ_FRAMES:])
    order: list[str] = []
    asyncio.get_running_loop().call_soon(order.append, "the loop's other work")
    rest = await inbox.wait()
    order.append("the rest")
    assert order == ["the loop's other work", "the rest"]  # the loop went round first
    assert rest == frames[READ_FRAMES:] and inbox.bytes == 0
    inbox.put(*frames[0])  # and the next frame wakes it again
    assert await asyncio.wait_for(inbox.wait(), 5) == [frames[0]]


async def test_a_source_s_buffered_peak_is_its_inboxes_and_its_hold_s(bus: Bus) -> None:
    source = bus.source
    inbox = source.inbox = Inbox(asyncio.get_running_loop())
    frames = [state("swarm", float(x), range(32)) for x in range(3)]
    for frame in frames:
        inbox.put(*frame)
    await inbox.wait()
    source._held.add([SimpleNamespace(size=5000)])  # an event that holds 5,000 bytes
    source._held.take()
    assert source.buffered_peak() == sum(len(p) for _, p in frames) + 5000


async def test_frames_the_inbox_dropped_count_as_the_source_s_drops(bus: Bus) -> None:
    inbox = bus.source.inbox = Inbox(asyncio.get_running_loop(), max_frames=1)
    for x in range(3):
        inbox.put(*state("swarm", float(x)))
    bus.source._count_losses()
    assert bus.source.stats.dropped == 2
    assert bus.source.stats.last_drop_reason == "fell behind: oldest frames dropped"
