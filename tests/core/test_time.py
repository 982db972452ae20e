"""Source time vs receive time: the clock-offset estimator on synthetic clocks, the `?time=`
policy every source takes, and what it writes into the world."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from robowire.addresses import parse_endpoint
from robowire.errors import ConfigError
from robowire.gateway import Gateway, open_source
from robowire.protocols.vrpn.services import VrpnSim
from robowire.service import SimOptions, Source, TimedWorld, time_option
from robowire.timebase import ClockOffset, SourceClock, WallClock
from robowire.world import World

RATE = 100.0  # batches per second
DEVICES = 50


def sender(
    estimator: ClockOffset,
    offset: float,
    start: float,
    seconds: float,
    rng: np.random.Generator,
    *,
    floor: float = 0.002,
    drift: float = 0.0,
) -> float:
    """Feed `seconds` of batches from a sender whose clock is `offset` s ahead of ours (plus
    `drift` s per s), each stamp `floor` + exponential jitter (mean 5 ms) before its receipt;
    returns the receive time it stopped at."""
    t = start
    for _ in range(int(seconds * RATE)):
        delays = floor + rng.exponential(0.005, DEVICES)
        sent = t - delays  # our clock when each was sent
        estimator.observe(sent + offset + drift * (sent - start), t)
        t += 1.0 / RATE
    return t


def test_a_wall_clock_paused_while_it_anchors_is_not_off_by_the_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # both clocks of a machine whose wall clock reads 990 s ahead of its monotonic one; each
    # reading takes 1 us, and the process is paused 0.4 s right after its first wall reading
    now, pauses = [10.0], [0.4]

    def read(ahead: float) -> float:
        now[0] += 1e-6
        return now[0] - 1e-6 + ahead

    def wall() -> float:
        value = read(990.0)
        now[0] += pauses.pop() if pauses else 0.0
        return value

    monkeypatch.setattr("time.monotonic", lambda: read(0.0))
    monkeypatch.setattr("time.time", wall)
    assert WallClock().wall(20.0) == pytest.approx(1010.0, abs=1e-5)  # not 1009.6


def test_a_known_offset_under_jitter_is_found_delay_floor_included() -> None:
    clock, rng = ClockOffset(), np.random.default_rng(1)
    assert clock.estimate() is None and math.isnan(clock.offset)
    sender(clock, 120.0, 1000.0, 15.0, rng)
    estimate = clock.estimate()
    assert estimate is not None
    # sender minus ours is 120 s; the smallest delay (2 ms) cannot be told from the offset
    assert estimate.offset == pytest.approx(120.0 - 0.002, abs=0.001)
    assert estimate.uncertainty < 0.005  # the floor is the same in every bucket
    assert estimate.samples == 15 * RATE  # batches with stamps


def test_a_clock_behind_gives_a_negative_offset_and_one_stamp_is_enough() -> None:
    clock = ClockOffset()
    clock.observe(1000.0 - 42.5, 1000.0)  # floats: one device, one stamp
    assert clock.offset == pytest.approx(-42.5)
    estimate = clock.estimate()
    assert estimate is not None and estimate.uncertainty == math.inf  # one bucket: not known


def test_a_step_of_the_sender_clock_reconverges_both_ways() -> None:
    clock, rng = ClockOffset(), np.random.default_rng(2)
    t = sender(clock, 120.0, 0.0, 5.0, rng)
    t = sender(clock, 150.0, t, 0.05, rng)  # stepped ahead: taken at once
    assert clock.offset == pytest.approx(150.0, abs=0.01)
    assert clock.resets == 1
    t = sender(clock, 90.0, t, 1.0, rng)  # stepped back: confirmed after 2 s, not before
    assert clock.offset == pytest.approx(150.0, abs=0.01)
    sender(clock, 90.0, t, 3.0, rng)
    assert clock.offset == pytest.approx(90.0, abs=0.01)
    assert clock.resets == 2


def test_a_burst_of_late_packets_after_a_stall_is_ignored() -> None:
    clock, rng = ClockOffset(), np.random.default_rng(3)
    t = sender(clock, 10.0, 0.0, 5.0, rng)
    t = sender(clock, 10.0, t, 0.5, rng, floor=3.0)  # half a second of 3 s late
    t = sender(clock, 10.0, t, 5.0, rng)
    assert clock.offset == pytest.approx(10.0 - 0.002, abs=0.001)
    assert clock.resets == 0


def test_slow_drift_is_followed_and_a_gap_keeps_the_estimate() -> None:
    clock, rng = ClockOffset(), np.random.default_rng(4)
    t = sender(clock, 5.0, 0.0, 60.0, rng, drift=100e-6)  # 100 ppm: 6 ms in a minute
    # the estimate lags a drift by at most drift x window (10 s): 1 ms
    assert clock.offset == pytest.approx(5.0 + 60.0 * 100e-6 - 0.002, abs=0.0015)
    before = clock.offset
    t += 300.0  # five minutes of nothing: the estimate stays
    assert clock.offset == before
    sender(clock, -25.0, t, 0.1, rng)  # the sender came back with its clock set back 30 s
    assert clock.offset == pytest.approx(-25.0 - 0.002, abs=0.001)


def test_stamps_that_are_nan_are_ignored() -> None:
    clock = ClockOffset()
    clock.observe(np.full(8, np.nan), 100.0)
    clock.observe(float("nan"), 100.0)
    assert clock.estimate() is None
    stamps = np.array([np.nan, 70.0, np.nan, 69.0])  # 30 and 31 s old at receipt
    clock.observe(stamps, np.array([100.0, 100.0, 100.0, 100.0]))
    assert clock.offset == pytest.approx(-30.0)
    assert clock.samples == 1
    clock.observe(np.array([np.nan, 75.0]), 100.0)  # one receive time for the batch
    assert clock.offset == pytest.approx(-25.0)


def test_the_policy_per_mode() -> None:
    stamps = np.array([220.0, np.nan, 219.5])
    sender = SourceClock("sender")
    assert sender.retime(stamps, 100.0) is stamps
    assert sender.offset.offset == pytest.approx(120.0)
    receive = SourceClock("receive")
    assert receive.retime(stamps, 100.0) == 100.0
    assert receive.retime(None, 101.0) == 101.0  # an update without stamps still gets one
    corrected = SourceClock("corrected")
    shifted = corrected.retime(stamps, 100.0)
    assert isinstance(shifted, np.ndarray)
    assert shifted[0] == pytest.approx(100.0) and np.isnan(shifted[1])
    assert shifted[2] == pytest.approx(99.5)
    assert corrected.retime(None, 101.0) is None
    with pytest.raises(ValueError, match="corrected"):
        SourceClock("server")


def test_a_timed_world_writes_corrected_times_into_the_shared_tables() -> None:
    world = World()
    timed = TimedWorld(world, SourceClock("corrected"))
    with world.subscribe(every_update=True) as queue:
        timed.update(
            "s",
            [0, 1],
            receive_time=1000.0,
            source_time=np.array([1120.0, 1119.9]),
            position=np.zeros((2, 3)),
        )
        timed.update_device("s", "extra", receive_time=1000.5, source_time=1120.5)
        (first, second) = queue.pull()
    assert world.tables["s"] is timed.tables["s"]
    assert first.values["source_time"].tolist() == pytest.approx([1000.0, 999.9])
    assert world.device("s", "extra").source_time == pytest.approx(1000.5)
    assert len(second) == 1


def test_the_time_option_is_every_sources_and_leaves_the_protocols_options() -> None:
    mode, rest = time_option(parse_endpoint("spyglass://h:7870?time=corrected&retry=2"))
    assert mode == "corrected" and rest.options == {"retry": "2"}
    assert time_option(parse_endpoint("xrp://h"))[0] is None
    with pytest.raises(ConfigError, match=r"time must be sender, receive or corrected"):
        time_option(parse_endpoint("ugcs://h?time=local"))
    # the defaults: sender where the wire has stamps, receive where it has none
    defaults = {
        url: open_source(url).time.mode
        for url in ("vrpn://T@h", "spyglass://h", "ugcs://h", "xrp://h", "vrsp://127.0.0.1:0")
    }
    assert defaults == {
        "vrpn://T@h": "sender",
        "spyglass://h": "sender",
        "ugcs://h": "sender",
        "xrp://h": "receive",
        "vrsp://127.0.0.1:0": "receive",
    }
    assert open_source("xrp://h?time=sender").time.mode == "sender"
    with pytest.raises(ConfigError, match=r"unknown option 'tme' .*known: .*\btime\b"):
        open_source("xrp://h?tme=sender")  # a typo is told, with `time` among the known


def test_file_names_take_options_too() -> None:
    endpoint = parse_endpoint("vrpn:run.pcap?time=receive&speed=2")
    assert endpoint.path == "run.pcap" and endpoint.options == {"time": "receive", "speed": "2"}
    assert parse_endpoint("run.rec?time=corrected").path == "run.rec"
    assert parse_endpoint("Tracker0@file://log.vrpn?time=receive").options == {"time": "receive"}


def test_status_shows_the_offset_of_a_sender_whose_clock_is_two_minutes_ahead() -> None:
    async def scenario() -> tuple[float | None, float | None, float | None]:
        sim = VrpnSim(SimOptions(port=0, rate=50.0, options={"clock_offset": "120"}))
        gateway = Gateway().add(sim)
        running = asyncio.create_task(gateway.run())
        await sim.ready.wait()
        assert sim.address is not None
        source = open_source(f"vrpn://Tracker0@127.0.0.1:{sim.address[1]}?time=corrected")
        assert isinstance(source, Source)
        before = gateway.status()[0].clock_offset
        gateway.add(source)
        for _ in range(3000):  # until a few reports came (no time limit: a slow machine)
            if source.stats.messages_in >= 20:
                break
            await asyncio.sleep(0.01)
        status = {s.name: s for s in gateway.status()}
        device = gateway.world.device(source.name, "Tracker0/0")
        gateway.stop()
        await running
        assert device.source_time is not None and device.receive_time is not None
        return before, status[source.name].clock_offset, device.source_time - device.receive_time

    sim_offset, offset, lag = asyncio.run(scenario())
    assert sim_offset is None  # a simulator has no sender clock
    assert offset is not None and offset == pytest.approx(120.0, abs=0.1)
    assert lag == pytest.approx(0.0, abs=0.1)
