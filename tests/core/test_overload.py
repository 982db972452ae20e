"""The overload policy (`robowire.transport.budget`): its arithmetic with time given by hand,
the templates that use it, and a live gateway whose source cannot keep up: it sheds the
oldest state reports and counts them in the status, while a reading viewer still gets frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import subprocess
import sys
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from robowire.gateway import Gateway, open_source
from robowire.service import Sink, Source
from robowire.timebase import monotonic
from robowire.transport.budget import (
    CALM,
    CALM_TURN,
    LATE_SHARE,
    MAX_WAIT,
    PROBE,
    SINK_TURN,
    SLICE,
    SMOOTHING,
    WINDOW,
    Budget,
    Held,
    Pressure,
    Turns,
    pressure,
    supersede,
)
from robowire.viewer.server import SUBPROTOCOL, ViewerSink
from robowire.wire import Report
from robowire.world import LogEvent, Update, World
from robowire.world.feed import ChangeFeed
from support import SRC, free_udp_port, until

ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}

# -- the arithmetic ---------------------------------------------------------------------------


def test_a_budget_lets_a_source_write_until_its_burst_is_spent_then_says_how_long_to_wait():
    budget = Budget(share=0.25, burst=0.02, interval=0.0)
    assert budget.wait(100.0) == 0.0
    budget.spend(100.0, 0.015)  # 5 ms of credit left
    assert budget.wait(100.015) == 0.0  # and 15 ms x 0.25 more: 8.75 ms
    budget.spend(100.015, 0.025)  # one delivery is never cut: 16.25 ms in debt
    assert budget.wait(100.04) == pytest.approx(0.01 / 0.25)  # 25 ms x 0.25 paid: 10 ms left
    assert budget.wait(100.081) == 0.0  # the debt is paid at a quarter of wall time


def test_a_budget_never_saves_more_than_its_burst():
    budget = Budget(share=0.5, burst=0.01, interval=0.0)
    budget.wait(0.0)
    budget.wait(3600.0)  # an idle hour
    assert budget.credit == 0.01
    budget.spend(3600.0, 0.03)
    assert budget.wait(3600.0) == pytest.approx(0.02 / 0.5)


def test_a_budget_spaces_a_cheap_sources_writes_by_its_interval():
    budget = Budget(share=0.5, burst=0.01, interval=0.1)
    assert budget.wait(5.0) == 0.0
    budget.spend(5.0, 0.0001)  # plenty of credit left
    assert budget.wait(5.02) == pytest.approx(0.08)
    assert budget.wait(5.1) == 0.0


def test_a_budget_ignores_time_going_backwards():
    budget = Budget(share=0.5, burst=0.01, credit=-0.01)
    budget.wait(10.0)
    budget.wait(9.0)
    assert budget.credit == -0.01


def test_the_loop_is_behind_once_its_probe_ran_late_for_most_of_a_while_until_it_is_calm():
    pressure = Pressure()
    t = 0.9
    pressure.probed(t, t - PROBE)  # one stall of most of a second: not enough alone
    assert not pressure.behind(t)
    for _ in range(80):  # then two seconds on time
        t += PROBE
        pressure.probed(t, 0.0)
    assert pressure.late < LATE_SHARE / 2
    began = t
    turn = 0
    while not pressure.behind(t):  # a busy loop: every other probe runs 100 ms late
        turn += 1
        lag = 0.1 if turn % 2 else 0.0
        t += PROBE + lag
        pressure.probed(t, lag)
        assert t - began < 2 * WINDOW, "still not behind"
    assert pressure.entered == 1
    while pressure.late >= LATE_SHARE / 2:  # keeping up again: probes on time
        t += PROBE
        pressure.probed(t, 0.0)
        assert pressure.behind(t), "behind while it is still half as late"
    calm_since = t - PROBE  # the last probe that was still half as late
    assert pressure.behind(calm_since + CALM - 0.01) and not pressure.behind(calm_since + CALM)


async def test_the_running_loop_has_one_pressure_probe_and_an_idle_loop_is_not_behind():
    first = pressure()
    assert pressure() is first
    await asyncio.sleep(0.2)
    assert not first.behind(time.monotonic()) and first.entered == 0


@dataclass(frozen=True, slots=True)
class Frame(Report):
    n: int


@dataclass(frozen=True, slots=True)
class Status(Report):
    n: int
    robot: str = "a"

    def covers(self) -> str:
        return self.robot


def test_supersede_keeps_the_newest_report_of_each_kind_and_everything_else_in_order():
    events = [Frame(1), "connected", Status(1), Frame(2), "registered", Frame(3), Status(2)]
    kept, shed = supersede(events)
    assert kept == ["connected", "registered", Frame(3), Status(2)]
    assert shed == 3
    assert supersede(["a", Frame(1), "b"]) == (["a", Frame(1), "b"], 0)
    assert supersede([]) == ([], 0)


def test_what_waits_is_at_most_one_report_of_each_thing_however_long_it_waits():
    held = Held()
    for n in range(10_000):
        assert held.add([Frame(n), Status(n, "a")]) == ((2, 2) if n else (0, 0))
    held.add(["registered"])
    assert len(held) == 3
    assert held.take() == [Frame(9_999), Status(9_999, "a"), "registered"]
    assert len(held) == 0 and held.take() == []
    assert held.add([Frame(1), Frame(2)], shed=False) == (0, 0) and len(held) == 2


def test_a_report_supersedes_only_one_covering_the_same():
    events = [Status(1, "a"), Status(2, "b"), Status(3, "a")]
    assert supersede(events) == ([Status(2, "b"), Status(3, "a")], 1)


def test_each_protocols_state_reports_supersede_older_ones_of_the_same_things_only():
    import numpy as np

    from robowire.protocols.spyglass.codec import DataPacket, NeighborhoodPacket
    from robowire.protocols.spyglass.events import PacketReceived
    from robowire.protocols.ugcs.events import TelemetryReceived, TelemetryValue
    from robowire.protocols.vrpn.events import TrackerReports

    def poses(sender: str, *sensors: int) -> TrackerReports:
        n = len(sensors)
        return TrackerReports(
            sender=sender, kind="vrpn_Tracker Pos_Quat", sensor=np.array(sensors, np.int32),
            vector=np.zeros((n, 3)), quaternion=np.zeros((n, 4)), dt=None, time=np.zeros(n),
            order=0,
        )  # fmt: skip

    vrpn = [poses("T0", 0, 1, 0), poses("T0", 2), poses("T1", 0, 1), poses("T0", 1, 0)]
    assert supersede(vrpn) == ([vrpn[1], vrpn[2], vrpn[3]], 1)

    def packet(sender: int, semantic: int) -> PacketReceived:
        return PacketReceived(
            packet=DataPacket(sender=sender, semantic_type=semantic, syntax_type=1), time=0.0
        )

    links = PacketReceived(packet=NeighborhoodPacket(sender=1, semantic_type=0), time=0.0)
    spyglass = [packet(1, 5), packet(2, 5), packet(1, 6), links, packet(1, 5)]
    assert supersede(spyglass) == (spyglass[1:], 1)

    def telemetry(device: int, *fields: int) -> TelemetryReceived:
        values = tuple(TelemetryValue(f, None, 0, 1.0) for f in fields)
        return TelemetryReceived(device_id=device, values=values)

    ugcs = [telemetry(1, 1, 2), telemetry(2, 1, 2), telemetry(1, 1), telemetry(1, 1, 2)]
    assert supersede(ugcs) == (ugcs[1:], 1)


def test_a_sink_is_handed_one_item_first_then_slices_that_fit_both_measured_costs():
    turns = Turns()
    assert turns.slice() == (1, None)  # one item: its cost is not known yet
    turns.took(1, 1000, 0.001)  # 1 ms an item, 1 us a byte
    assert turns.slice() == (int(SLICE / 1e-3), int(SLICE / 1e-6))
    turns.took(10, 100, 50.0)  # far costlier: believed at once; at least one item, never none
    assert turns.slice() == (1, 1)
    turns.took(0, 0, 1.0)  # an empty slice says nothing
    assert turns.slice() == (1, 1)
    turns.took(1, 1, 0.0)  # cheap again: believed slowly
    assert turns.per_item == pytest.approx(5.0 * (1 - SMOOTHING))


def test_a_queue_hands_over_its_oldest_items_a_turn_at_a_time_and_keeps_its_byte_count():
    feed: ChangeFeed[bytes] = ChangeFeed(size_of=len)
    queue = feed.subscribe(max_bytes=1 << 20)
    for i in range(10):
        feed.publish(bytes([i]) * (i + 1))
    assert [x[0] for x in queue.pull(3)] == [0, 1, 2]
    assert queue.bytes == sum(range(4, 11))
    assert [x[0] for x in queue.pull(max_bytes=9)] == [3, 4]  # 4 + 5 bytes fit, 6 more not
    assert [x[0] for x in queue.pull(max_bytes=1)] == [5]  # at least one, whatever its size
    assert queue.bytes == sum(range(7, 11))
    assert [x[0] for x in queue.pull(100)] == list(range(6, 10))
    assert queue.bytes == 0 and not queue.pending()


# -- the templates ----------------------------------------------------------------------------


class Recording:
    """An adapter that remembers each delivery it was given."""

    def __init__(self) -> None:
        self.deliveries: list[list[object]] = []

    def apply(self, events: Sequence[object], receive_time: float) -> int:
        self.deliveries.append(list(events))
        return len(events)


class Quiet(Source):
    def new_adapter(self, world: World) -> Recording:
        return Recording()


@pytest.fixture
def behind(monkeypatch: Any) -> Pressure:
    """The loop counts as behind (as a starved gateway's would)."""
    state = Pressure(until=float("inf"))
    monkeypatch.setattr("robowire.service.pressure", lambda: state)
    return state


async def test_a_source_that_keeps_up_writes_everything_at_once_whatever_its_budget():
    source = Quiet("q")
    adapter = source.adapter = Recording()
    assert source.budget is not None
    source.budget.credit = -1.0  # a heavy source: spent long ago
    source.deliver([Frame(1), Frame(2)], 1.0)
    source.deliver([Frame(3)], 1.001)
    await asyncio.sleep(0)  # (a delivery over a slice: the rest when the loop comes round)
    assert written(adapter) == [Frame(1), Frame(2), Frame(3)]  # none shed
    assert source.budget.shed == 0 and source.budget.credit == -1.0  # nor charged


def written(adapter: Recording) -> list[object]:
    return [event for delivery in adapter.deliveries for event in delivery]


async def test_a_source_out_of_credit_holds_its_events_then_writes_them_in_order(
    behind: Pressure,
):
    source = Quiet("q")
    adapter = source.adapter = Recording()
    source.deliver([Frame(1), "connected"], 1.0)
    assert written(adapter) == [Frame(1), "connected"]  # credit: at once
    assert source.budget is not None
    source.budget.credit = -1.0  # spent: what comes now waits
    source.deliver([Frame(2), Status(1)], 2.0)
    source.deliver([Frame(3), "registered", Status(2)], 3.0)
    assert len(written(adapter)) == 2
    source.apply()  # what the timer does once the credit is back
    assert written(adapter)[2:] == [Frame(3), "registered", Status(2)]
    assert source.budget.shed == 2  # Frame(2) and Status(1): stale before they were written
    assert source.stats.messages_in == 2 + 5  # all received, shed or written


class Costly(Recording):
    """Each event costs `cost` seconds of CPU to write."""

    def __init__(self, cost: float) -> None:
        super().__init__()
        self.cost = cost

    def apply(self, events: Sequence[object], receive_time: float) -> int:
        end = time.perf_counter() + self.cost * len(events)
        while time.perf_counter() < end:
            pass
        return super().apply(events, receive_time)


@pytest.mark.parametrize("is_behind", [False, True], ids=["keeping-up", "behind"])
async def test_a_costly_burst_is_written_a_turn_at_a_time_in_order_while_the_loop_goes_round(
    is_behind: bool, request: pytest.FixtureRequest
):
    if is_behind:
        request.getfixturevalue("behind")
    source = Quiet("q")
    adapter = source.adapter = Costly(0.001)  # a 200 ms burst: once written in one go
    source.deliver(["connected"], monotonic())  # what its events cost is measured on it
    burst = [*(Status(i, robot=str(i)) for i in range(199)), "registered"]
    source.deliver(burst, monotonic())  # (the budget's timer runs on the real clock)
    gaps: list[float] = []  # how long the loop took to come back to this task
    async with asyncio.timeout(30):
        while len(written(adapter)) < 1 + len(burst):
            began = time.perf_counter()
            await asyncio.sleep(0)
            gaps.append(time.perf_counter() - began)
    assert written(adapter) == ["connected", *burst]  # nothing lost, reordered or shed
    assert len(adapter.deliveries) >= 10  # 200 ms of writes in turns of 5 ms
    assert max(gaps) < SINK_TURN + 2 * SLICE + 0.03  # (a busy machine's scheduling)


async def test_a_sources_first_delivery_is_a_turn_at_a_time_before_its_cost_is_known():
    """What a source's first read costs is not known until some of it is written (a VRSP
    show's first frames make 10,000 devices: 413 ms in one go in the soak), so it too goes
    in a slice at a time, one event first."""
    source = Quiet("q")
    adapter = source.adapter = Costly(0.001)
    burst = [f"registered {i}" for i in range(100)]  # 100 ms, none a report: nothing shed
    began = time.perf_counter()
    source.deliver(burst, monotonic())
    held_for = time.perf_counter() - began
    assert written(adapter) and len(written(adapter)) < len(burst)
    assert held_for < CALM_TURN + 2 * SLICE + 0.03  # (a busy machine's scheduling)
    async with asyncio.timeout(30):
        while len(written(adapter)) < len(burst):
            await asyncio.sleep(0)
    assert written(adapter) == burst and adapter.deliveries[0] == [burst[0]]


async def test_reports_that_come_while_a_backlog_waits_shed_the_stale_ones_it_holds():
    source = Quiet("q")
    adapter = source.adapter = Costly(0.001)
    source.deliver(["connected"], monotonic())  # (its cost measured)
    source.deliver([Status(i, robot=str(i % 50)) for i in range(100)], monotonic())  # a turn+
    source.deliver([Status(100 + i, robot=str(i)) for i in range(50)], monotonic())  # newer
    async with asyncio.timeout(30):
        while len(source._held):
            await asyncio.sleep(0)
    statuses = [s for s in written(adapter) if isinstance(s, Status)]
    assert [s.n for s in statuses][-50:] == list(range(100, 150))  # the newest, in order
    assert source.budget is not None and source.budget.shed == 150 - len(statuses) > 0
    assert source.stats.messages_in == 151  # received, shed or written ("connected" too)


class Sized(Quiet):
    event_size = staticmethod(len)  # (its events are strings: a byte each)


@pytest.mark.parametrize("bound", ["events", "bytes"])
async def test_what_a_source_holds_stays_bounded_however_far_behind_its_writes_are(
    behind: Pressure, monkeypatch: Any, bound: str
):
    """A gateway whose writes fall ever further behind (a starved one) still holds at most
    `MAX_PENDING` events and `MAX_PENDING_BYTES`: past either, the oldest go in at once, as
    many as it is over by, in order, nothing lost. A backlog that waited used to take
    everything that came after it without a bound (a workers run held gigabytes of DEVICES
    frames); then, past the bound, the whole hold went in at once (a stall)."""
    monkeypatch.setattr("robowire.service.MAX_PENDING", 100 if bound == "events" else 10**9)
    monkeypatch.setattr("robowire.service.MAX_PENDING_BYTES", 1000)
    source = Sized("q")
    adapter = source.adapter = Recording()
    assert source.budget is not None
    source.budget.credit = -1.0  # spent: what comes waits for credit that is long in coming
    sent = [("x" * 5 if bound == "events" else "x" * 50) + str(n) for n in range(1000)]
    held: list[tuple[int, int]] = []
    for n in range(0, len(sent), 10):
        source.deliver(sent[n : n + 10], 1.0 + n)  # (none is a report: none is ever shed)
        held.append((len(source._held), source._held.bytes))
    assert max(held)[0] <= 100 and max(b for _, b in held) <= 1000
    # once full, a delivery of 10 writes about as many of the oldest (in bytes, 10 or 11:
    # the events grow from 51 to 53 bytes), and the hold stays full, never emptied at once
    assert max(len(d) for d in adapter.deliveries) <= (10 if bound == "events" else 11)
    assert min(held[20:])[0] == 100 if bound == "events" else min(held[20:])[1] > 1000 - 60
    source.apply(everything=True)
    assert written(adapter) == sent and source._held.bytes == 0


def test_a_hold_counts_the_bytes_of_what_it_holds_as_events_are_shed_and_taken():
    held = Held(size_of=lambda e: 100 if isinstance(e, Frame) else len(str(e)))
    held.add([Frame(1), "abc", Frame(2)])
    assert held.bytes == 100 + 3  # Frame(1) is stale
    held.add(["de"], shed=False)
    assert held.take(2) == ["abc", Frame(2)] and held.bytes == 2
    assert held.take() == ["de"] and held.bytes == 0
    assert held.peak == 100 + 3 + 2  # the most it held, once it is empty


def test_a_hold_over_its_bounds_gives_up_its_oldest_events_as_many_as_it_is_over_by():
    held = Held(size_of=lambda e: 100 if isinstance(e, Frame) else len(str(e)))
    held.add([Frame(1), "abc", Frame(2), "de", "f"])  # Frame(1) is stale: 106 bytes, 4 events
    assert held.overflow(10, 200) == []
    assert held.overflow(10, 50) == ["abc", Frame(2)]  # 103 of the 56 over
    assert held.overflow(1, 10) == ["de"] and held.take() == ["f"]


def test_a_hold_keeps_no_reference_to_what_it_gave_up():
    class Event:  # (one that a weak reference can follow)
        pass

    held = Held()
    events = [Event() for _ in range(10)]
    alive = [weakref.ref(e) for e in events]
    held.add(events)
    del events
    assert len(held.take(3)) == 3  # (and dropped at once)
    assert [ref() is None for ref in alive] == [True] * 3 + [False] * 7


class ReferenceHold:
    """What a `Held` must do, written plainly: the live events in order; a report added with
    shedding sheds the last report added of its class and cover, if that one still waits."""

    def __init__(self) -> None:
        self.live: list[tuple[int, object]] = []  # (the order it came in, the event)
        self.last: dict[object, int] = {}  # a report's key -> the order of the last one
        self.came = 0

    def add(self, events: list[object], shed: bool) -> int:
        dropped = 0
        for event in events:
            if isinstance(event, Report):
                key = (type(event), event.covers())
                if shed and key in self.last:
                    before = len(self.live)
                    self.live = [(n, e) for n, e in self.live if n != self.last[key]]
                    dropped += before - len(self.live)
                self.last[key] = self.came
            self.live.append((self.came, event))
            self.came += 1
        return dropped

    def take(self, count: int | None) -> list[object]:
        count = len(self.live) if count is None else count
        taken, self.live = self.live[:count], self.live[count:]
        return [e for _, e in taken]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.just("add"),
                st.lists(st.one_of(st.integers(0, 3), st.none()), max_size=8),
                st.booleans(),
            ),
            st.tuples(st.just("take"), st.one_of(st.integers(1, 6), st.none())),
            st.tuples(st.just("overflow"), st.integers(0, 10)),
        ),
        max_size=40,
    )
)
def test_a_hold_keeps_in_order_what_a_plain_list_would_through_adds_and_takes(ops):
    held, reference = Held(), ReferenceHold()
    for n, (op, arg, *shed) in enumerate(ops):
        if op == "add":  # a key: a robot's status (a report); None: an event that is not one
            events = [f"e{n}.{i}" if k is None else Status(n, str(k)) for i, k in enumerate(arg)]
            assert held.add(events, shed=shed[0])[0] == reference.add(events, shed[0])
        elif op == "take":
            assert held.take(arg) == reference.take(arg)
        else:
            over = max(0, len(reference.live) - arg)
            assert held.overflow(arg, 10**9) == (reference.take(over) if over else [])
        assert len(held) == len(reference.live)
    assert held.take() == reference.take(None)


async def test_a_capture_file_sheds_nothing():
    from robowire.addresses import parse_endpoint
    from robowire.service import CaptureSource

    source = CaptureSource("vrsp", parse_endpoint("vrsp:x.pcap"), read=None)
    assert source.budget is None
    adapter = source.adapter = Recording()
    source.deliver([Frame(1), Frame(2)], 1.0)
    assert adapter.deliveries == [[Frame(1), Frame(2)]]


class Slow(Sink):
    """Takes every update; each costs it `cost` seconds of CPU."""

    every_update = True

    def __init__(self, cost: float) -> None:
        super().__init__("slow")
        self.cost = cost
        self.written: list[int] = []

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        end = time.perf_counter() + self.cost * len(items)
        while time.perf_counter() < end:
            pass
        self.written += [int(i.text) for i in items if isinstance(i, LogEvent)]
        return True


@contextlib.asynccontextmanager
async def running(sink: Sink) -> AsyncIterator[World]:
    """`sink` running on a world of its own."""
    world = World()
    task = asyncio.create_task(sink.run(world))
    await until(lambda: world.feed.subscriber_count == 1, "subscribed")
    try:
        yield world
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def turns_of(sink: Slow, world: World, numbers: range) -> list[int]:
    """Log `numbers` as updates at once, and say how many of them `sink` wrote in each of
    its turns (what it wrote between two runs of another task of the loop)."""
    for i in numbers:
        world.log("s", "d", str(i), time=0.0)
    turns: list[int] = []
    seen = len(sink.written)
    async with asyncio.timeout(60):
        while seen < numbers.stop:
            await asyncio.sleep(0)
            if len(sink.written) > seen:
                turns.append(len(sink.written) - seen)
                seen = len(sink.written)
    assert sink.written == list(range(numbers.stop))  # in order, none lost
    return turns


async def test_a_sink_that_takes_every_update_is_handed_all_of_them_while_the_gateway_keeps_up():
    sink = Slow(cost=0.0001)
    async with running(sink) as world:
        assert sum(await turns_of(sink, world, range(200))) == 200


async def test_a_sink_that_takes_every_update_is_handed_them_a_turn_at_a_time_when_behind(
    behind: Pressure,
):
    sink = Slow(cost=0.004)  # 4 ms an item: a turn of SINK_TURN (10 ms) holds three
    async with running(sink) as world:
        turns = await turns_of(sink, world, range(200))
    assert max(turns) <= math.ceil(SINK_TURN / sink.cost)  # the clock ends each turn
    assert len(turns) >= 200 / math.ceil(SINK_TURN / sink.cost)


async def test_a_turn_ends_on_time_however_unlike_its_items(behind: Pressure):
    """Cheap items teach the sink a small cost; then costly ones come: the first slice of them
    overruns its turn (no cost is known before it is measured), the turns after it hold what
    fits in their time again."""
    sink = Slow(cost=0.0001)  # 0.1 ms an item: a slice (SLICE, 2 ms) holds 20
    async with running(sink) as world:
        await turns_of(sink, world, range(100))
        sink.cost = 0.004
        turns = await turns_of(sink, world, range(100, 200))
    assert turns[0] <= 2 * SLICE / 0.0001  # one slice of the old cost (and some timing slack)
    assert max(turns[1:]) <= math.ceil(SINK_TURN / 0.004)


# -- live -------------------------------------------------------------------------------------

DRONES = 1000
RATE = 60  # frames a second the simulator sends
COST = 0.15  # seconds each world write of the source takes (a gateway on a starved machine;
# every loop turn with a write runs its timers 100 ms late or more: the loop is behind)
PHASE = 4.0


@pytest.mark.timeout(180)
async def test_an_overloaded_source_sheds_the_oldest_frames_and_counts_them_while_the_viewer_draws(
    monkeypatch: Any,
) -> None:
    """A VRSP source whose every world write takes 150 ms of the loop (60 frames a second would
    need nine loops): the loop falls behind, the source sheds frames, says how many in the
    status, the world keeps moving, and a browser that reads every frame keeps getting them."""
    udp = free_udp_port()
    gateway = Gateway()
    source = open_source(f"vrsp://127.0.0.1:{udp}")
    viewer = ViewerSink("127.0.0.1", 0)
    gateway.add(source, viewer)
    run = asyncio.create_task(gateway.run())
    sim = subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", "sim", "vrsp", "--drones", str(DRONES),
         "--rate", str(RATE), "--to", f"127.0.0.1:{udp}", "--duration", "150"],
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    frames = 0

    async def browser() -> None:
        nonlocal frames
        assert viewer.address is not None
        url = f"ws://127.0.0.1:{viewer.address[1]}/ws"
        async with connect(url, subprotocols=[Subprotocol(SUBPROTOCOL)], max_size=None) as ws:
            while True:
                await ws.send('{"type": "ready"}')
                while not isinstance(await ws.recv(), bytes):
                    pass
                frames += 1

    reading: asyncio.Task[None] | None = None
    try:
        await until(lambda: source.adapter is not None and viewer.address is not None, "up")
        adapter: Any = source.adapter
        fast = adapter.apply

        def slow(events: Sequence[object], receive_time: float) -> int:
            time.sleep(COST)  # the loop is held, as by a write that costs this much CPU
            return int(fast(events, receive_time))

        monkeypatch.setattr(adapter, "apply", slow)
        await until(lambda: len(gateway.world.tables.get(source.name, ())) == DRONES, "drones")
        reading = asyncio.create_task(browser())
        await until(lambda: frames > 0, "the first frame")

        def shed() -> int:
            (status,) = [s for s in gateway.status() if s.name == source.name]
            return status.shed

        def written() -> float:  # the newest receive time in the world's table
            return float(np.nanmax(gateway.world.tables[source.name].receive_time))

        shed0, frames0, written0 = shed(), frames, written()
        await asyncio.sleep(PHASE)
        shed1, frames1, written1 = shed(), frames, written()
        assert shed1 - shed0 > RATE * PHASE / 4, "most frames are shed, and counted"
        assert written1 > written0, "the newest frames are still written"
        assert frames1 - frames0 >= PHASE, "the browser still gets frames"
    finally:
        if reading is not None:
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
        sim.terminate()
        sim.wait(30)
        gateway.stop()
        await asyncio.gather(run, return_exceptions=True)


def test_one_costly_write_holds_a_source_back_at_most_max_wait() -> None:
    budget = Budget(share=0.15, burst=0.02, interval=0.1)
    budget.spend(10.0, 2.0)  # a two-second batch: at 15% that would be 13 s of silence
    assert budget.wait(10.0) == pytest.approx(MAX_WAIT)
