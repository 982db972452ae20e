"""The service templates: a Source reconnects with backoff and says so once; a CaptureSource
delivers every whole record of a cut file and counts the cut once; a Sink pulls at its rate;
a Sim steps on its deadlines and skips what it missed when far behind."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Iterator, Sequence

import pytest

from robowire import service
from robowire.addresses import parse_endpoint
from robowire.capture import Record, batches
from robowire.errors import DecodeError, RobowireError, TransportError
from robowire.service import CaptureSource, Sim, Sink, Source, step_time
from robowire.transport.reconnect import Backoff
from robowire.wire import PacketDropped
from robowire.world import LogEvent, Update, World


class Counting:
    """An adapter that writes one device per event and counts what it took in."""

    def __init__(self, world: World, source: str) -> None:
        self.world, self.source = world, source

    def apply(self, events: Sequence[object], receive_time: float) -> int:
        taken = [e for e in events if isinstance(e, int)]
        for value in taken:
            self.world.update_device(
                self.source, str(value), receive_time=receive_time, position=(value, 0, 0)
            )
        return len(taken)


class Flaky(Source):
    """Refuses `refusals` times, then connects and sends two events, then ends."""

    def __init__(self, refusals: int) -> None:
        super().__init__("flaky", retry=0.01)
        self.refusals = refusals
        self.attempts: list[float] = []

    def new_adapter(self, world: World) -> Counting:
        return Counting(world, self.name)

    async def connect(self, world: World) -> None:
        loop = asyncio.get_running_loop()
        self.attempts.append(loop.time())
        if len(self.attempts) <= self.refusals:
            raise TransportError("cannot connect to 127.0.0.1:1: Connection refused")
        self.connected()
        self.deliver([1, 2, PacketDropped(protocol="x", reason="bad")], loop.time())
        await asyncio.sleep(3600)


async def test_a_source_says_once_why_it_retries_then_that_it_connected(caplog):
    source = Flaky(refusals=5)
    world = World()
    with caplog.at_level(logging.INFO, logger="robowire"):
        task = asyncio.create_task(source.run(world))
        await asyncio.wait_for(source.ready.wait(), 5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    retrying = [m for m in caplog.messages if "retrying" in m]
    assert retrying == ["flaky: cannot connect to 127.0.0.1:1: Connection refused; "
                        "retrying until it answers"]  # fmt: skip
    assert caplog.messages[-1] == "flaky: connected"
    gaps = [b - a for a, b in zip(source.attempts, source.attempts[1:], strict=False)]
    assert min(gaps) >= 0.009  # `retry` apart (doubling only after 30 attempts: Backoff)
    assert source.stats.messages_in == 2 and source.stats.dropped == 1
    assert len(world) == 2


def cut_records(n: int) -> Iterator[Record]:
    for i in range(n):
        yield Record(bytes([i % 256]))
    raise DecodeError("test", 1000, "record cut short")


class Bytes(CaptureSource):
    """Each record's byte is one message; records are read by `cut_records`."""

    def __init__(self, n: int) -> None:
        super().__init__("test", parse_endpoint("vrpn:whatever.bin"), lambda _path: cut_records(n))

    def new_adapter(self, world: World) -> Counting:
        return Counting(world, self.name)

    def feed(self, record: Record, now: float) -> list[object]:
        return [record.data[0]] if record.data[0] else [PacketDropped(protocol="t", reason="0")]


async def test_a_cut_capture_delivers_every_whole_record_and_counts_the_cut_once():
    source = Bytes(1262)  # more than one batch of 1024, and a part batch before the cut
    await source.run(World())
    zeros = len(range(0, 1262, 256))  # records whose byte is 0 are drops of their own
    assert source.stats.messages_in == 1262 - zeros
    assert source.stats.dropped == zeros + 1
    assert source.stats.last_drop_reason == "record cut short"


async def test_a_capture_in_which_nothing_decodes_fails_the_source():
    class Garbage(Bytes):
        def feed(self, record: Record, now: float) -> list[object]:
            return [PacketDropped(protocol="t", reason="not this protocol")]

    with pytest.raises(RobowireError, match="nothing in it decodes as test"):
        await Garbage(10).run(World())


async def test_batches_hand_over_the_records_before_damage():
    seen: list[int] = []
    with pytest.raises(DecodeError):
        async for batch in batches(cut_records(1500)):
            seen += [r.data[0] for r in batch]
    assert len(seen) == 1500


class Recorder(Sink):
    def __init__(self, max_rate: float | None) -> None:
        super().__init__("recorder")
        self.max_rate = max_rate
        self.pulls: list[list[Update | LogEvent]] = []
        self.finished = False

    def write(self, world: World, items: list[Update | LogEvent]) -> bool:
        self.pulls.append(items)
        return True

    def finish(self, world: World) -> None:
        self.finished = True


async def test_a_rate_limited_sink_pulls_the_latest_state_at_its_own_rate():
    world = World()
    sink = Recorder(max_rate=10)
    task = asyncio.create_task(sink.run(world))
    await asyncio.wait_for(sink.ready.wait(), 1)
    for i in range(50):  # 50 updates of two devices over ~0.5 s
        world.update_device("s", "a", receive_time=float(i), position=(i, 0, 0))
        world.update_device("s", "b", receive_time=float(i), position=(0, i, 0))
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert sink.finished
    updates = [u for pull in sink.pulls for u in pull if isinstance(u, Update)]
    assert 3 <= len(updates) <= 9  # ~10 pulls a second, one update per source each
    assert all(list(u.slots) == [0, 1] for u in updates)  # both devices changed every time
    last = updates[-1].values["position"]
    assert last.tolist() == [[49.0, 0.0, 0.0], [0.0, 49.0, 0.0]]  # the latest, not the oldest


class Failing(Recorder):
    async def serve(self, world: World) -> None:
        raise TransportError("cannot listen on 127.0.0.1:1: Address already in use")


async def test_a_sink_whose_server_fails_raises_that_error_and_finishes():
    sink = Failing(max_rate=None)
    with pytest.raises(TransportError, match="Address already in use"):
        await asyncio.wait_for(sink.run(World()), 2)
    assert sink.finished


# -- reconnecting: the backoff rule ----------------------------------------------------------


def test_backoff_doubles_the_wait_after_each_failure_up_to_its_cap():
    backoff = Backoff(1.0, 8.0, steady=0.0)
    assert [backoff.failed(0.0) for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def first_attempt_after(back: float, backoff: Backoff, took: float = 0.0) -> float:
    """When the first attempt after a peer's return at `back` s into an outage starts (every
    attempt before it refused, each taking `took` seconds)."""
    now = 0.0
    while now < back:
        now += took + backoff.failed(took)
    return now


@pytest.mark.parametrize("took", [0.0, 0.01, 0.3])
def test_a_peer_back_within_the_first_half_minute_is_found_within_a_second(took: float):
    # issue 37: at once, 1, 2, 4 s missed a peer back after 3 s by 4 s (UgCS, SpyGlass)
    for tenths in range(5, 300, 5):
        back = tenths / 10
        found = first_attempt_after(back, Backoff(1.0, 8.0))
        assert found - back <= 1.0 + 1e-9, f"peer back at {back} s, found at {found} s"


def test_after_the_first_half_minute_the_wait_doubles_up_to_the_cap():
    backoff = Backoff(1.0, 8.0)
    waits = [backoff.failed(0.0) for _ in range(40)]
    assert waits[:29] == [1.0] * 29
    assert waits[29:34] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert backoff.ended(60.0) == 0.0  # a new outage: a second apart again
    assert backoff.failed(0.0) == 1.0 and backoff.failed(0.0) == 1.0


def test_an_attempt_that_waited_itself_is_not_followed_by_a_whole_wait_more():
    backoff = Backoff(1.0, 8.0)
    assert backoff.failed(0.25) == 0.75  # attempts start `delay` apart
    assert backoff.failed(5.0) == 0.0


def test_a_connection_that_lasted_is_redialled_at_once_and_a_short_one_after_retry():
    backoff = Backoff(1.0, 8.0)
    backoff.failed(0.0)
    backoff.failed(0.0)
    assert backoff.ended(30.0) == 0.0  # a peer that restarted is usually back
    assert backoff.failed(0.0) == 1.0  # failures start from `retry` again
    assert backoff.ended(0.1) == 1.0  # accepted and closed at once: not hammered


def test_a_cap_below_retry_is_retry():
    assert [Backoff(10.0, 8.0).failed(0.0) for _ in range(2)] == [10.0, 10.0]


# -- simulators: the timed loop and its one falling-behind rule ---------------------------------


def test_a_step_is_for_its_deadline_unless_the_loop_is_more_than_max_lag_late():
    assert step_time(100.0, 99.999) == 100.0  # woke a little early
    assert step_time(100.0, 100.0 + service.MAX_LAG) == 100.0  # late: caught up on the grid
    assert step_time(100.0, 100.5) == 100.5  # far behind: the missed steps are skipped


class Ticking(Sim):
    """Steps every `period` s from the time it is given; one step (`slow`) takes `pause` s."""

    def __init__(self, period: float, steps: int, slow: int = -1, pause: float = 0.0) -> None:
        super().__init__("ticking")
        self.period, self.steps, self.slow, self.pause = period, steps, slow, pause
        self.times: list[float] = []  # the `now` each step was given
        self.done = asyncio.Event()

    def step(self, now: float) -> None:
        self.times.append(now)
        if len(self.times) - 1 == self.slow:
            time.sleep(self.pause)  # the loop is held up (a busy machine, a long computation)
        if len(self.times) == self.steps:
            self.done.set()

    def next_deadline(self) -> float | None:
        return None if len(self.times) >= self.steps else self.times[-1] + self.period


async def run_sim(sim: Ticking) -> None:
    task = asyncio.create_task(sim.run(World()))
    try:
        await asyncio.wait_for(sim.done.wait(), 30)
        assert not task.done()  # no timed work left: it serves on until cancelled
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_sim_that_keeps_up_steps_on_its_grid(monkeypatch):
    monkeypatch.setattr(service, "MAX_LAG", 3600.0)  # however slow the machine is today
    sim = Ticking(0.01, 30, slow=5, pause=0.05)
    await run_sim(sim)
    grid = [sim.times[0]]
    for _ in range(29):
        grid.append(grid[-1] + 0.01)
    assert sim.times == grid  # the steps missed while held up ran on the grid, not skipped


async def test_a_sim_far_behind_skips_the_missed_steps_instead_of_bursting(monkeypatch):
    monkeypatch.setattr(service, "MAX_LAG", 0.05)
    sim = Ticking(0.01, 6, slow=2, pause=0.3)
    await run_sim(sim)
    held = sim.times[3] - sim.times[2]
    assert held >= 0.3  # the next step is for the time the loop got back, not the grid's
    gaps = [b - a for a, b in itertools.pairwise(sim.times[3:])]
    assert all(gap >= 0.01 - 1e-9 for gap in gaps)  # then one period apart again: no burst


class Broken(Sim):
    async def serve(self) -> None:
        raise TransportError("cannot listen on 127.0.0.1:1: Address already in use")

    def next_deadline(self) -> float | None:
        return time.monotonic() + 3600.0


async def test_a_sim_whose_server_fails_raises_that_error():
    with pytest.raises(TransportError, match="Address already in use"):
        await asyncio.wait_for(Broken("broken").run(World()), 10)
