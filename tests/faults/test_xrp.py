"""XRP under faults: a rebooted robot is a new session at once for the gateway (a driver keeps
WPILib's rule), and the robot's statuses lost, duplicated or reordered on the wire are counted
exactly, both sides (real sockets through the fault proxy)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from robowire.addresses import parse_endpoint
from robowire.gateway import Gateway
from robowire.protocols.xrp.codec import encode_status
from robowire.protocols.xrp.events import StatusReceived
from robowire.protocols.xrp.sequence import StatusSequence
from robowire.protocols.xrp.services import XrpSim, XrpSource
from robowire.protocols.xrp.session_wpilib import ClientSession
from robowire.sequence import PeerRestarted
from robowire.service import SimOptions
from robowire.world import World
from support import free_port, open_fds, until

from .cycles import CYCLES, RESTARTS, assert_flat, faults, resident, until_faults
from .plan import DatagramFaults, DatagramPlan
from .proxy import UdpProxy

pytestmark = pytest.mark.timeout(60)
ROBOT = ("127.0.0.1", 3540)
ROBOT_PROGRAM = Path(__file__).resolve().parents[1] / "xrp" / "robot" / "robot.py"


def accepted(sequence: StatusSequence, seqs: list[int], start: float = 0.0) -> list[bool]:
    return [sequence.accept(s, start + 0.05 * i) for i, s in enumerate(seqs)]


def test_a_rebooted_robot_is_a_new_session_at_its_second_status() -> None:
    listener = StatusSequence(reboots=True)
    assert accepted(listener, [5000, 5001, 5002]) == [True, True, True]
    assert accepted(listener, [0, 1, 2, 3], start=3.0) == [False, True, True, True]
    assert listener.restarts == 1 and listener.last == 3
    driver = StatusSequence(reboots=False)  # WPILib's rule: ignored until it passes 5002
    accepted(driver, [5000, 5001, 5002])
    assert accepted(driver, [0, 1, 2, 3], start=3.0) == [False] * 4


def test_stale_duplicate_and_reordered_statuses_are_still_dropped() -> None:
    listener = StatusSequence(reboots=True)
    accepted(listener, list(range(1000, 1100)))
    # reordered within the window, a duplicate, one lone old one, two old ones not in a row
    assert accepted(listener, [1095, 1099, 20, 1100, 30, 50], start=5.0) == [
        False, False, False, True, False, False,
    ]  # fmt: skip
    assert listener.restarts == 0
    counts = listener.counts
    assert (counts.duplicated, counts.reordered, counts.lost) == (2, 0, 0)


def test_a_robot_rebooted_soon_after_booting_is_recognised_after_its_silence() -> None:
    listener = StatusSequence(reboots=True)
    accepted(listener, list(range(1, 30)))  # 1.5 s of a robot, then 2 s of reboot
    assert accepted(listener, [0, 1, 2], start=1.45 + 2.0) == [False, True, True]
    assert listener.restarts == 1


def test_the_session_says_the_robot_rebooted_and_forgets_what_it_said() -> None:
    session = ClientSession(ROBOT)
    values = [0] * 25
    for seq in range(4990, 5000):
        session.feed_datagram(encode_status(seq, values), ROBOT, 0.05 * seq)
    events = [
        e
        for seq in (0, 1)
        for e in session.feed_datagram(encode_status(seq, values), ROBOT, 300.0 + 0.05 * seq)
    ]
    assert [type(e) for e in events][-2:] == [PeerRestarted, StatusReceived]
    assert session.wire_counts()["restarts"] == 1


@pytest.mark.timeout(60 + 2 * RESTARTS)
async def test_the_gateway_sees_a_rebooted_robot_within_2_s(caplog: pytest.LogCaptureFixture):
    # issue 37: the robot killed, back 3 s later with its sequence from 0: 7 s blind.
    # `ROBOWIRE_FAULT_RESTARTS=N` reboots it N times (away 0.1 s, not 0.5), then flat
    port = free_port()
    sim = XrpSim(SimOptions(port=port, count=1))
    sim_task = asyncio.create_task(sim.run(World()))
    await asyncio.wait_for(sim.ready.wait(), 5)
    gateway = Gateway()
    source = XrpSource(parse_endpoint(f"xrp://127.0.0.1:{port}"))
    gateway.add(source)
    run = asyncio.create_task(gateway.run())
    took: list[float] = []
    try:
        await asyncio.wait_for(source.ready.wait(), 5)
        await until(lambda: source.session.last_seq > 0, "the robot's first statuses")
        fds, rss = open_fds(), resident()
        with caplog.at_level(logging.WARNING, logger="robowire"):
            for _ in range(RESTARTS):
                sim.sessions[0].seq = 5000  # a robot up for four minutes
                await until(lambda: source.session.last_seq > 5000, "the robot's statuses")
                sim_task.cancel()
                await asyncio.gather(sim_task, return_exceptions=True)
                await asyncio.sleep(0.5 if RESTARTS == 1 else 0.1)
                sim = XrpSim(SimOptions(port=port, count=1))  # rebooted: its sequence from 0
                sim_task = asyncio.create_task(sim.run(World()))
                await asyncio.wait_for(sim.ready.wait(), 5)
                back = time.monotonic()
                await until(lambda: source.session.last_seq < 100, "the rebooted robot", 10.0)
                took.append(time.monotonic() - back)
        assert max(took) <= 2.0, f"the rebooted robot seen after {max(took):.1f} s"
        status = next(s for s in gateway.status() if s.name == source.name)
        assert status.reconnected == RESTARTS
        assert sum("the robot rebooted" in r.getMessage() for r in caplog.records) == RESTARTS
        if RESTARTS > 1:
            assert_flat(fds, rss, f"xrp reboot x{RESTARTS} (back in max {max(took):.2f} s)")
    finally:
        gateway.stop()
        await asyncio.gather(run, return_exceptions=True)
        sim_task.cancel()
        await asyncio.gather(sim_task, return_exceptions=True)


FULL = os.environ.get("ROBOWIRE_FAULT_MATRIX") == "full"  # make reliability: every cell


FAULTS = {
    "everything": DatagramFaults(loss=0.1, duplicate=0.1, reorder=0.2, reorder_depth=8),
    "loss 10%": DatagramFaults(loss=0.10),
    "duplicate 10%": DatagramFaults(duplicate=0.10),
    "reorder depth 8": DatagramFaults(reorder=0.2, reorder_depth=8),
    "burst of 20": DatagramFaults(burst=20, burst_every=60),
}


@pytest.mark.parametrize("name", FAULTS if FULL else ("everything",))
@pytest.mark.timeout(60 + CYCLES / 5)
async def test_the_counts_both_sides_equal_what_the_proxy_did(name: str) -> None:
    """`ROBOWIRE_FAULT_CYCLES=N`: "everything" until the proxy did N faults, then flat."""
    cycles = CYCLES if name == "everything" else 1
    sim = XrpSim(SimOptions(port=0, count=1))
    sim_task = asyncio.create_task(sim.run(World()))
    await asyncio.wait_for(sim.ready.wait(), 5)
    target = sim.addresses[0]
    assert target is not None
    up = DatagramPlan(FAULTS[name], seed=11, enabled=False)  # commands, 50/s
    down = DatagramPlan(FAULTS[name], seed=12, enabled=False)  # statuses, 20/s
    gateway = Gateway()
    async with UdpProxy(target, up, down) as proxy:
        assert proxy.address is not None
        source = XrpSource(parse_endpoint(f"xrp://127.0.0.1:{proxy.address[1]}"))
        gateway.add(source)
        run = asyncio.create_task(gateway.run())
        try:
            await asyncio.wait_for(source.ready.wait(), 5)
            await asyncio.sleep(0.3)
            fds, rss = open_fds(), resident()
            proxy.set(enabled=True)
            await until(lambda: down.counts["received"] >= 60, "60 statuses through faults")
            if cycles > 1:  # both ways: ~30 faults a second
                await until_faults(cycles, up, down)
            proxy.set(enabled=False)
            await asyncio.sleep(0.5)  # clean again: the last ones counted, the held ones sent
            robot = sim.sessions[0].wire_counts()
            wire = source.session.wire_counts()
            for side, counts, plan in (("gateway", wire, down), ("robot", robot, up)):
                did = {k: plan.counts[k] for k in ("lost", "duplicated", "reordered")}
                assert {k: counts[k] for k in did} == did, side
            assert max(down.counts[k] for k in ("lost", "duplicated", "reordered")) > 0
            status = next(s for s in gateway.status() if s.name == source.name)
            assert (status.lost, status.duplicated, status.reordered) == (
                wire["lost"], wire["duplicated"], wire["reordered"],
            )  # fmt: skip
            assert status.reconnected == 0
            if cycles > 1:
                did = f"{faults(up):,} faults up, {faults(down):,} down"
                assert_flat(fds, rss, f"xrp {name}: {did}")
        finally:
            gateway.stop()
            await asyncio.gather(run, return_exceptions=True)
            sim_task.cancel()
            await asyncio.gather(sim_task, return_exceptions=True)


@pytest.mark.interop
@pytest.mark.skipif(
    importlib.util.find_spec("xrp") is None or importlib.util.find_spec("robotpy") is None,
    reason="robotpy-xrp is not installed",
)
@pytest.mark.timeout(120)
async def test_wpilib_drives_our_robot_through_a_lossy_reordering_wire(tmp_path: Path) -> None:
    """Real WPILib (robotpy-xrp) drives our simulated robot through the fault proxy, faults
    both ways: the robot counts WPILib's commands lost, duplicated and reordered exactly as
    the proxy did them, and the program runs to its end (WPILib's rule drops the statuses
    that came late or twice)."""
    sim = XrpSim(SimOptions(port=0, count=1))
    sim_task = asyncio.create_task(sim.run(World()))
    await asyncio.wait_for(sim.ready.wait(), 5)
    target = sim.addresses[0]
    assert target is not None
    faults = DatagramFaults(loss=0.1, duplicate=0.1, reorder=0.1, reorder_depth=8)
    up = DatagramPlan(faults, seed=31, enabled=False)
    down = DatagramPlan(faults, seed=32, enabled=False)
    async with UdpProxy(target, up, down) as proxy:
        assert proxy.address is not None
        shutil.copy(ROBOT_PROGRAM, tmp_path / "robot.py")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "robotpy", "--main", "robot.py", "run-xrp", "--nogui",
            "--host", "127.0.0.1", "--port", str(proxy.address[1]),
            cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        try:
            await until(lambda: up.counts["received"] >= 25, "WPILib's commands", 60.0)
            proxy.set(enabled=True)
            await until(lambda: up.counts["received"] >= 150, "three seconds of faults", 30.0)
            proxy.set(enabled=False)
            out, _ = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            sim_task.cancel()
            await asyncio.gather(sim_task, return_exceptions=True)
    assert b"FINAL enabled=True" in out, out[-2000:]
    robot = sim.sessions[0].wire_counts()
    did = {k: up.counts[k] for k in ("lost", "duplicated", "reordered")}
    assert {k: robot[k] for k in did} == did
    assert min(did.values()) > 0 and down.counts["lost"] > 0


def test_one_status_numbered_far_ahead_does_not_blind_the_listener() -> None:
    listener = StatusSequence(reboots=True)
    accepted(listener, list(range(100, 110)))
    # a damaged number (a flipped high bit), then the robot goes on
    assert accepted(listener, [110 | 0x8000, 110, 111], start=1.0) == [False, True, True]
    assert listener.last == 111
    assert accepted(listener, [5000, 5001], start=2.0) == [False, True]  # a real leap: taken
    driver = StatusSequence(reboots=False)  # WPILib takes the damaged one, and is blind
    accepted(driver, list(range(100, 110)))
    assert accepted(driver, [110 | 0x8000, 110, 111], start=1.0) == [True, False, False]


async def test_truncated_and_flipped_statuses_never_blind_the_gateway() -> None:
    """Truncated or bit-flipped statuses (XRP has no checksum of its own): dropped as bad or
    taken as what they say, and the statuses after them are taken again at once."""
    sim = XrpSim(SimOptions(port=0, count=1))
    sim_task = asyncio.create_task(sim.run(World()))
    await asyncio.wait_for(sim.ready.wait(), 5)
    target = sim.addresses[0]
    assert target is not None
    down = DatagramPlan(DatagramFaults(truncate=0.1, flip=0.1), seed=41, enabled=False)
    gateway = Gateway()
    async with UdpProxy(target, down=down) as proxy:
        assert proxy.address is not None
        source = XrpSource(parse_endpoint(f"xrp://127.0.0.1:{proxy.address[1]}"))
        gateway.add(source)
        run = asyncio.create_task(gateway.run())
        try:
            await asyncio.wait_for(source.ready.wait(), 5)
            proxy.set(enabled=True)
            await until(lambda: down.counts["received"] >= 60, "60 statuses through faults")
            proxy.set(enabled=False)
            taken = source.stats.messages_in
            await until(lambda: source.stats.messages_in >= taken + 10, "statuses again", 2.0)
            assert down.counts["truncated"] + down.counts["flipped"] > 5
        finally:
            gateway.stop()
            await asyncio.gather(run, return_exceptions=True)
            sim_task.cancel()
            await asyncio.gather(sim_task, return_exceptions=True)
