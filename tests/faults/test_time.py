"""Time faults: a sender's clock that jumps an hour ahead or behind mid-stream (VRPN, whose
reports carry the sender's stamps). With `?time=corrected` the world's times are back on our
clock within a few seconds of the jump (the offset estimate restarts on a step); by default
(`sender`) they are the sender's, as it says them, and the status shows the new offset."""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from rich.console import Console

from robowire.gateway import Gateway, open_source
from robowire.protocols.vrpn.services import VrpnSim
from robowire.service import SimOptions, Source
from robowire.status import status_message
from robowire.status_client import status_table
from robowire.timebase import ClockOffset, SourceClock
from support import until

pytestmark = pytest.mark.timeout(60)
FULL = os.environ.get("ROBOWIRE_FAULT_MATRIX") == "full"  # make reliability: every cell
CYCLES = int(os.environ.get("ROBOWIRE_FAULT_CYCLES", "1"))  # jumps each way (sans I/O)
RECONVERGE = 4.0  # s: ClockOffset's `confirm` (2 s) for a step back, and the loaded machine


@asynccontextmanager
async def vrpn_sim(options: SimOptions) -> AsyncIterator[tuple[Gateway, VrpnSim]]:
    """Our VRPN simulator running in a gateway, listening."""
    sim = VrpnSim(options)
    gateway = Gateway().add(sim)
    run = asyncio.create_task(gateway.run())
    try:
        await sim.ready.wait()
        yield gateway, sim
    finally:
        gateway.stop()
        await asyncio.gather(run, return_exceptions=True)


@asynccontextmanager
async def vrpn_pair(mode: str, **settings: str) -> AsyncIterator[tuple[Gateway, VrpnSim, Source]]:
    """Our VRPN simulator at 50 Hz (`settings`: its `--set`s) and our source of it with
    `?time=mode`, in one gateway."""
    async with vrpn_sim(SimOptions(port=0, rate=50.0, options=settings)) as (gateway, sim):
        assert sim.address is not None
        source = open_source(f"vrpn://Tracker0@127.0.0.1:{sim.address[1]}?time={mode}")
        assert isinstance(source, Source)
        gateway.add(source)
        yield gateway, sim, source


@pytest.mark.parametrize("jump", [3600.0, -3600.0])
@pytest.mark.parametrize("mode", ["corrected", "sender"] if FULL else ["corrected"])
async def test_a_sender_clock_that_jumps_an_hour(jump: float, mode: str) -> None:
    async with vrpn_pair(mode) as (gateway, sim, source):
        await until(lambda: source.stats.messages_in > 50, "reports")
        sim.clock_offset = jump  # the sender's clock steps
        jumped = time.monotonic()

        def lag() -> float:
            device = gateway.world.device(source.name, "Tracker0/0")
            assert device.source_time is not None and device.receive_time is not None
            return device.source_time - device.receive_time

        def offset() -> float | None:
            return next(s.clock_offset for s in gateway.status() if s.name == source.name)

        await until(lambda: abs((offset() or 0.0) - jump) < 0.5, "the status's new offset", 20)
        if mode == "corrected":
            await until(lambda: abs(lag()) < 0.5, "corrected times on our clock again", 20)
            took = time.monotonic() - jumped
            print(f"\ncorrected, sender clock {jump:+.0f} s: our clock again in {took:.1f} s")
            assert took < RECONVERGE
            await asyncio.sleep(0.5)
            assert abs(lag()) < 0.5  # and stays there
        else:
            await until(lambda: abs(lag() - jump) < 0.5, "the sender's own times", 5)


def test_a_sender_clock_that_jumps_back_and_forth_is_corrected_after_every_jump() -> None:
    """`ROBOWIRE_FAULT_CYCLES=N`: the sender's clock jumps an hour ahead and back N times,
    each as soon as the corrected times are ours again (held 0.5 s): sans I/O, the stamps of
    a 50 Hz sender fed to `SourceClock("corrected")` (the source's own rule) on a simulated
    clock (end to end, 1,000 jumps back would take an hour: a step back is confirmed for 2 s).
    Each jump is corrected within `RECONVERGE` of receive time, never a rate (`broken`)."""
    clock = SourceClock("corrected")
    rng = random.Random(1)
    now, sender = 1000.0, 0.0  # our clock; the sender's minus ours
    worst = {3600.0: 0.0, -3600.0: 0.0}

    def tick() -> float:
        """One report 1-3 ms on the wire; its corrected time minus ours."""
        nonlocal now
        now += 0.02
        stamp = now - rng.uniform(0.001, 0.003) + sender
        corrected = clock.retime(stamp, now)
        assert isinstance(corrected, float) and not clock.offset.broken
        return corrected - now

    for _ in range(100):
        tick()
    for _ in range(CYCLES):
        for jump in (3600.0, -3600.0):
            sender += jump
            jumped = now
            while abs(tick()) >= 0.5:
                assert now - jumped < RECONVERGE, f"{jump:+.0f} s: not ours after {RECONVERGE} s"
            worst[jump] = max(worst[jump], now - jumped)
            for _ in range(25):  # and stays ours
                assert abs(tick()) < 0.5, f"{jump:+.0f} s: off again"
    print(f"\nsender clock +1 h / -1 h x{CYCLES} (sans I/O, 50 Hz): ours again within "
          f"{worst[3600.0]:.2f} / {worst[-3600.0]:.2f} s of its receive time; "
          f"{clock.offset.resets} restarts of the offset")  # fmt: skip
    assert clock.offset.resets == 2 * CYCLES


@pytest.mark.parametrize("pace", [-1.0, 2.0])  # a clock running backwards; twice as fast
@pytest.mark.parametrize("mode", ["corrected", "sender"] if FULL else ["corrected"])
async def test_a_sender_clock_that_runs_backwards_or_at_a_wrong_rate(
    pace: float, mode: str
) -> None:
    """No offset makes such stamps ours (every estimate is wrong a moment later). Once a few
    seconds of stamps show the rate (the status's `clock_rate`), `?time=corrected` gives the
    receive times: on our clock and never going back (was: a saw-tooth seconds off, going
    back with the stamps between the offset's restarts). The default keeps the sender's."""
    async with vrpn_pair(mode, clock_rate=f"{pace:g}") as (gateway, _, source):
        began = time.monotonic()

        def status() -> Any:
            return next(s for s in gateway.status() if s.name == source.name)

        await until(lambda: status().clock_rate is not None, "the sender clock's rate", 20)
        took = time.monotonic() - began
        said = status()
        assert abs(said.clock_rate - pace) < 0.1, said
        console = Console(width=200, record=True)
        console.print(status_table(status_message([said])))  # `robowire status`
        assert f"its clock runs at {said.clock_rate:+.2f}x" in console.export_text()
        seen: list[tuple[float, float]] = []  # (source time, receive time) of Tracker0/0
        for _ in range(100):  # 2 s
            device = gateway.world.device(source.name, "Tracker0/0")
            assert device.source_time is not None and device.receive_time is not None
            seen.append((device.source_time, device.receive_time))
            await asyncio.sleep(0.02)
        times = [t for t, _ in seen]
        if mode == "corrected":
            print(f"\ncorrected, sender clock at {pace:+g}x: on our clock after {took:.1f} s")
            assert all(abs(t - r) < 0.5 for t, r in seen), seen[:5]
            assert times == sorted(times)  # never going back
        else:
            went = (times[-1] - times[0]) / (seen[-1][1] - seen[0][1])
            assert abs(went - pace) < 0.3, went  # the sender's own times, at its rate


@pytest.mark.parametrize(
    ("pace", "step", "broken"),
    [(1.0, 0.0, False), (1.0, 3600.0, False), (1.0001, 0.0, False), (-1.0, 0.0, True),
     (2.0, 0.0, True), (0.0, 0.0, True)],
)  # fmt: skip
def test_the_clock_rate_is_told_from_the_stamps_and_a_step_is_not_a_rate(
    pace: float, step: float, broken: bool
) -> None:
    offset = ClockOffset()
    for i in range(400):  # 8 s at 50 Hz, a step half way
        received = 1000.0 + i * 0.02
        offset.observe(5000.0 + pace * i * 0.02 + (step if i >= 200 else 0.0), received)
    assert offset.rate is not None and abs(offset.rate - pace) < 1e-6
    assert offset.broken is broken
