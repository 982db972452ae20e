"""Time faults: a sender's clock that jumps an hour ahead or behind mid-stream (VRPN, whose
reports carry the sender's stamps). With `?time=corrected` the world's times are back on our
clock within a few seconds of the jump (the offset estimate restarts on a step); by default
(`sender`) they are the sender's, as it says them, and the status shows the new offset."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from robowire.gateway import Gateway, open_source
from robowire.protocols.vrpn.services import VrpnSim
from robowire.service import SimOptions, Source
from support import until

pytestmark = pytest.mark.timeout(60)
FULL = os.environ.get("ROBOWIRE_FAULT_MATRIX") == "full"  # make reliability: every cell
RECONVERGE = 4.0  # s: ClockOffset's `confirm` (2 s) for a step back, and the loaded machine


@pytest.mark.parametrize("jump", [3600.0, -3600.0])
@pytest.mark.parametrize("mode", ["corrected", "sender"] if FULL else ["corrected"])
async def test_a_sender_clock_that_jumps_an_hour(jump: float, mode: str) -> None:
    sim = VrpnSim(SimOptions(port=0, rate=50.0))
    gateway = Gateway().add(sim)
    run = asyncio.create_task(gateway.run())
    try:
        await sim.ready.wait()
        assert sim.address is not None
        source = open_source(f"vrpn://Tracker0@127.0.0.1:{sim.address[1]}?time={mode}")
        assert isinstance(source, Source)
        gateway.add(source)
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
    finally:
        gateway.stop()
        await asyncio.gather(run, return_exceptions=True)
