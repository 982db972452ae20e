"""Every network source comes back by itself after its peer restarts on the same port.

Each test runs a gateway with one source and that protocol's simulator as a separate service
on a fixed loopback port, waits until devices flow, stops the simulator (the status must say
`waiting`), starts a new one on the same port (the status must say `connected` again, and new
messages must arrive), and checks that nothing leaked: the same number of asyncio tasks and
of open file descriptors as before the restart. Waits are generous deadlines, not timings.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

import pytest

from robowire.gateway import Gateway, open_sim, open_source
from robowire.service import Sim, SimOptions, Source
from support import free_port, open_fds, until

pytestmark = pytest.mark.timeout(120)

DEADLINE = 40.0  # seconds; a loaded 2-core machine is slow, a working one takes about 1 s


@dataclass
class Case:
    source_url: str  # {port}: the simulator's port
    protocol: str
    sim_port: bool = True  # the simulator listens on the port (False: it sends/dials to it)


class Harness:
    """A gateway with one source, and a simulator that can be stopped and started again."""

    def __init__(self, case: Case, port: int) -> None:
        self.case, self.port = case, port
        self.gateway = Gateway()
        self.source: Source = open_source(case.source_url.format(port=port))
        self.gateway.add(self.source)
        self.sim_gateway: Gateway | None = None
        self.sim_task: asyncio.Task[None] | None = None
        self.starts = 0

    def state(self) -> str:
        (status,) = [s for s in self.gateway.status() if s.name == self.source.name]
        return status.state

    def messages(self) -> int:
        return self.source.stats.messages_in

    def devices(self) -> int:
        table = self.gateway.world.tables.get(self.source.name)
        return 0 if table is None else len(table)

    def new_sim(self) -> Sim:
        self.starts += 1
        seed = self.starts  # a VRSP sender that restarts picks a new instance id
        if self.case.sim_port:
            options = SimOptions(port=self.port, count=3, seed=seed)
        else:
            options = SimOptions(count=3, seed=seed, target=f"127.0.0.1:{self.port}")
        return open_sim(self.case.protocol, options)

    async def start_sim(self) -> None:
        sim = self.new_sim()
        self.sim_gateway = Gateway().add(sim)
        task = self.sim_task = asyncio.create_task(self.sim_gateway.run())
        await until(lambda: sim.ready.is_set() or task.done(), "the simulator started")
        assert not task.done(), self.sim_gateway.failures

    async def stop_sim(self) -> None:
        assert self.sim_gateway is not None and self.sim_task is not None
        self.sim_gateway.stop()
        await asyncio.wait_for(self.sim_task, DEADLINE)
        self.sim_gateway = self.sim_task = None

    async def flowing(self, after: int) -> None:
        """Messages beyond `after` arrive, devices are in the world, the status says so."""
        await until(lambda: self.messages() > after + 10, "new messages arrive")
        await until(lambda: self.devices() > 0, "devices are in the world")
        await until(lambda: self.state() == "connected", "the status says connected")


CASES = {
    "vrpn-udp+tcp": Case("vrpn://Tracker0@127.0.0.1:{port}", "vrpn"),
    "vrpn-tcp": Case("vrpn+tcp://Tracker0@127.0.0.1:{port}", "vrpn"),
    "spyglass-tcp": Case("spyglass://127.0.0.1:{port}", "spyglass"),
    "ugcs-connect": Case("ugcs://127.0.0.1:{port}", "ugcs"),
    "ugcs-listen": Case("ugcs://127.0.0.1:{port}?mode=listen", "ugcs", sim_port=False),
    "xrp-udp": Case("xrp://127.0.0.1:{port}", "xrp"),
    "vrsp-udp": Case("vrsp://127.0.0.1:{port}", "vrsp", sim_port=False),
}


@pytest.mark.parametrize("name", sorted(CASES))
async def test_a_source_comes_back_after_its_peer_restarts(name: str) -> None:
    case = CASES[name]
    udp_only = case.protocol in ("xrp", "vrsp")
    harness = Harness(case, free_port(socket.SOCK_DGRAM if udp_only else socket.SOCK_STREAM))
    run = asyncio.create_task(harness.gateway.run())
    try:
        if not case.sim_port:  # the source listens first, the simulator comes to it
            await until(harness.source.ready.is_set, "the source listens")
        await harness.start_sim()
        await harness.flowing(0)
        await asyncio.sleep(0.3)  # let the first connection's start-up settle
        tasks, fds = len(asyncio.all_tasks()), open_fds()

        await harness.stop_sim()
        await until(lambda: harness.state() == "waiting", "the status says waiting")
        stopped_at = harness.messages()

        await harness.start_sim()
        await harness.flowing(stopped_at)
        connections = harness.source.connections

        # the second restart leaks nothing either: tasks and descriptors as before
        await until(lambda: len(asyncio.all_tasks()) == tasks, f"tasks back to {tasks}")
        await until(lambda: open_fds() == fds, f"file descriptors back to {fds}")
        assert not harness.gateway.failures
        assert harness.source.connections == connections  # no flapping once it is back
    finally:
        if harness.sim_gateway is not None:
            harness.sim_gateway.stop()
        harness.gateway.stop()
        await asyncio.wait_for(run, DEADLINE)
        if harness.sim_task is not None:
            await asyncio.wait_for(harness.sim_task, DEADLINE)
