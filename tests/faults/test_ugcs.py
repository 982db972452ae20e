"""UgCS peers restarted with fresh state, both sides.

A VSM restarted registers its vehicles under new session ids (a real VSM's ids come from a
process-wide counter, ugcs.md 3.1: they are the session's only; our simulator's `first_id`
setting gives them). The UCS side (`listen ugcs://`) has them back within 2 s under their
serials: the same world device ids, no ghost left from the old ids, each device's
`session_id` the new one, `registered` again. The same when the old connection is half-open
(a reverse-mode VSM killed with its host: nothing closed) and ends only after the new one has
registered the vehicles: they stay registered (it unregistered them: the old ids' ending was
taken for the vehicles'), and a command to one goes on the new connection (it went on the
old, dead one, and timed out). And our VSM side (`sim ugcs`, `serve ugcs://`) re-registers its
vehicles with a UCS that restarts.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from robowire.control import OK
from robowire.gateway import Gateway, open_sim, open_sink, open_source
from robowire.protocols.ugcs.services import UcsSource
from robowire.service import SimOptions, Source
from robowire.world import World
from support import free_port, open_fds, until

from .cycles import RESTARTS, assert_flat, resident
from .proxy import TcpProxy
from .test_streams import (
    BACK,
    DOWN,
    PEERS,
    Peer,
    fresh,
    quiet,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.timeout(120 + 10 * RESTARTS)
NEW_IDS = {"first_id": "1001", "gps_warmup": "0"}  # a restarted VSM's counter: ids from 1001
# (not 1); its vehicles have a fix at once (they can arm)


def session_ids(world: World, source: Source) -> dict[str, int]:
    """Each vehicle's session id as the world shows it (its serial -> its `session_id`)."""
    table = world.table(source.name)
    return {i: world.device(source.name, i).attributes["session_id"] for i in table.ids}


async def command(source: UcsSource, serial: str, name: str) -> str:
    """Command `name` sent to a vehicle as the viewer's controls send it: its final state."""
    specs = source.device_commands(serial)
    assert specs is not None, f"{serial} has no commands"
    (spec,) = [c for c in specs if c.name == name]
    final = "none"
    async with asyncio.timeout(5.0):  # (a command lost on a dead link times out in 10 s)
        async for status in source.run_command(serial, spec, {}):
            final = status.state
    return final


def registered(world: World, source: Source) -> dict[str, bool]:
    table = world.table(source.name)
    return {i: world.device(source.name, i).attributes["registered"] for i in table.ids}


async def test_a_vsm_restarted_under_new_ids_has_its_vehicles_back_under_their_serials() -> None:
    """`ROBOWIRE_FAULT_RESTARTS=N`: N restarts, each under ids none before had (away 0.1 s,
    the source's `retry` 0.05 s, as test_streams.py's cycles), descriptors and memory flat."""
    peer = Peer("ugcs", PEERS["ugcs"])
    await peer.start(seed=1)
    gateway = Gateway()
    source = open_source(f"ugcs://127.0.0.1:{peer.port}")
    if RESTARTS > 1:
        source.retry = 0.05
    run = asyncio.create_task(gateway.add(source).run())
    try:
        world = gateway.world
        await until(lambda: len(world.table(source.name).ids) == peer.count, "the fleet")
        await asyncio.sleep(1.2 if RESTARTS > 1 else 0.0)  # up longer than `retry`
        before = first = session_ids(world, source)
        fds, rss = open_fds(), resident()
        took: list[float] = []
        for restart in range(RESTARTS):
            await peer.stop()
            await asyncio.sleep(DOWN if RESTARTS == 1 else 0.1)
            floor = 1001 + 1000 * restart  # a restarted VSM's counter: ids none had before
            peer.options = {**NEW_IDS, "first_id": str(floor)}
            started = time.monotonic()  # (before: a fast redial registers the parked fleet,
            await peer.start(seed=2 + restart)  # which sends nothing more, as it starts)
            took.append(await fresh(world, source, set(before), started,
                                    f"restart {restart}: back under new ids"))  # fmt: skip
            after = session_ids(world, source)
            assert after.keys() == before.keys()  # the same devices, no ghost of the old ids
            assert all(after[s] >= floor for s in after), after  # under their new session ids
            assert set(registered(world, source).values()) == {True}
            (session,) = source.sessions.values()  # the old ids are forgotten
            assert sorted(session.devices) == sorted(after.values())
            before = after
        print(f"\nugcs VSM restarted under new ids: back in {max(took):.2f} s "
              f"(max of {len(took)}), ids {first} -> {before}")  # fmt: skip
        assert max(took) <= BACK
        status = next(s for s in gateway.status() if s.name == source.name)
        assert status.reconnected == RESTARTS
        await asyncio.sleep(0.3)
        assert_flat(fds, rss, f"ugcs new ids x{RESTARTS}")
    finally:
        gateway.stop()
        await asyncio.gather(run, return_exceptions=True)
        await peer.stop()


async def test_vehicles_stay_registered_when_a_half_open_link_of_their_old_ids_ends_later() -> None:
    """A reverse-mode VSM (it dials the UCS, `listen ugcs://…?mode=listen`) whose host dies:
    its connection stays open, silent (the proxy stalls it). The VSM comes back under new ids
    on a new connection; the old one ends later (a reset). The vehicles stay registered and
    commands to them are answered and their telemetry comes."""
    port = free_port()
    gateway = Gateway()
    source = open_source(f"ugcs://127.0.0.1:{port}?mode=listen")
    assert isinstance(source, UcsSource)
    run = asyncio.create_task(gateway.add(source).run())
    sims: list[Gateway] = []
    tasks: list[asyncio.Task[None]] = []

    async def vsm(to: int, options: dict[str, str]) -> None:
        sim = open_sim("ugcs", SimOptions(count=3, rate=20, target=f"127.0.0.1:{to}",
                                          options=options))  # fmt: skip
        sims.append(Gateway().add(sim))
        tasks.append(asyncio.create_task(sims[-1].run()))

    try:
        await until(lambda: source.address is not None, "the UCS listens")
        async with TcpProxy(("127.0.0.1", port)) as proxy:
            assert proxy.address is not None
            await vsm(proxy.address[1], {})
            world = gateway.world
            await until(lambda: len(world.table(source.name).ids) == 3, "the fleet")
            before = session_ids(world, source)
            proxy.pause("up")  # its host is gone: nothing more comes, nothing is closed
            proxy.pause("down")
            sims[0].stop()
            await asyncio.gather(tasks[0], return_exceptions=True)
            restarted = time.monotonic()
            await vsm(port, NEW_IDS)  # back, on a new connection
            took = await fresh(world, source, set(before), restarted, "back under new ids")
            assert len(source.sessions) == 2  # the old link is still open
            assert await command(source, "SIM-0001", "arm") == OK  # on the new link, not the old
            proxy.cut("rst")  # it ends now, after the new registrations
            await until(lambda: len(source.sessions) == 1, "the old link ends")
            ended = time.time()
            await asyncio.sleep(0.3)
            assert set(registered(world, source).values()) == {True}, registered(world, source)
            assert session_ids(world, source).keys() == before.keys()
            assert all(i >= 1001 for i in session_ids(world, source).values())
            assert await command(source, "SIM-0001", "disarm") == OK
            await until(  # its telemetry still comes (a parked fleet says only what changes)
                lambda: (
                    world.device(source.name, "SIM-0001").telemetry["is_armed"][0] == 0
                    and (world.device(source.name, "SIM-0001").receive_time or 0) > ended
                ),
                lambda: world.device(source.name, "SIM-0001").telemetry,
            )
        print(f"\nugcs VSM back under new ids beside its half-open old link: {took:.2f} s")
        assert took <= BACK
    finally:
        for sim in sims:
            sim.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        gateway.stop()
        await asyncio.gather(run, return_exceptions=True)


@pytest.mark.parametrize("vsm", ["sim", "serve"])
async def test_our_vsm_registers_its_vehicles_again_with_a_restarted_ucs(vsm: str) -> None:
    """`sim ugcs` and `serve ugcs://` (a gateway's vehicles: here a SpyGlass simulator's
    drones): our UCS stops and a new one (a new process's peer, a new world) dials the VSM;
    it has every vehicle, registered, within 2 s."""
    vsms = Gateway()
    if vsm == "sim":
        server = open_sim("ugcs", SimOptions(port=0, count=3, rate=20))
        count = 3
    else:
        spyglass = open_sim("spyglass", SimOptions(port=0, count=4, rate=20))
        vsms.add(spyglass)
        server = open_sink("ugcs://127.0.0.1:0")
        count = 4
    vsms.add(server)
    vsms_run = asyncio.create_task(vsms.run())
    ucs: Gateway | None = None
    ucs_run: asyncio.Task[None] | None = None
    try:
        if vsm == "serve":
            await until(lambda: spyglass.address is not None, "the SpyGlass sim listens")
            assert spyglass.address is not None
            feed = open_source(f"spyglass://127.0.0.1:{spyglass.address[1]}")
            vsms.add(feed)  # (added while running: the gateway starts it)
        await until(lambda: server.address is not None, "the VSM listens")
        assert server.address is not None
        url = f"ugcs://127.0.0.1:{server.address[1]}"
        for restart in range(2):
            ucs = Gateway()
            source = open_source(url)
            ucs_run = asyncio.create_task(ucs.add(source).run())
            started = time.monotonic()
            await until(
                lambda s=source, w=ucs.world: (
                    len(w.table(s.name).ids) == count and set(registered(w, s).values()) == {True}
                ),
                lambda s=source, w=ucs.world, r=restart: f"UCS {r}: {registered(w, s)}",
            )
            took = time.monotonic() - started
            print(f"\nugcs {vsm}: UCS {restart} has every vehicle in {took:.2f} s")
            assert took <= BACK
            ucs.stop()
            await asyncio.wait_for(ucs_run, 30)
            ucs = ucs_run = None
    finally:
        if ucs is not None:
            ucs.stop()
            await asyncio.gather(ucs_run, return_exceptions=True)  # type: ignore[arg-type]
        vsms.stop()
        await asyncio.gather(vsms_run, return_exceptions=True)
