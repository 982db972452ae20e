"""Opt-in interop with the mainline C++ tools, when a developer has built them.

Set ROBOWIRE_VRPN_SERVER to a `vrpn_server` binary and/or ROBOWIRE_VRPN_PRINT_DEVICES to a
`vrpn_print_devices` binary (VRPN 07.38 built from source; no registry ships them, so CI
skips these). Checked: our client reads a real server in both modes; the real client prints
what our simulator sends, without warnings.
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from robowire.endpoints import parse_endpoint
from robowire.protocols.vrpn.services import open_sim, open_source
from robowire.service import SimOptions
from robowire.world import World

from .test_live import started, stop, wait_for

SERVER = os.environ.get("ROBOWIRE_VRPN_SERVER", "")
PRINT_DEVICES = os.environ.get("ROBOWIRE_VRPN_PRINT_DEVICES", "")

pytestmark = pytest.mark.interop


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.skipif(not SERVER, reason="set ROBOWIRE_VRPN_SERVER to a built vrpn_server")
@pytest.mark.parametrize("scheme", ["vrpn", "vrpn+tcp"])
async def test_our_client_reads_the_mainline_server(scheme: str, tmp_path: Path) -> None:
    config = tmp_path / "vrpn.cfg"
    config.write_text(
        "vrpn_Tracker_Spin\tTracker0\t2\t100.0  0.0 0.0 1.0  0.5\n"
        "vrpn_Button_Example\tButton0\t2\t2.0\n"
        "vrpn_Dial_Example\tDial0\t2\t2.0\t10.0\n"
    )
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        SERVER,
        "-f",
        str(config),
        "-millisleep",
        "1",
        str(port),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    world = World()
    source = open_source(parse_endpoint(f"{scheme}://Tracker0,Button0,Dial0@127.0.0.1:{port}"))
    await asyncio.sleep(0.5)
    task = await started(source, world)
    try:
        table = world.table(source.name)
        await wait_for(lambda: {"Tracker0/0", "Tracker0/1", "Button0", "Dial0"} <= set(table.ids))
        await wait_for(lambda: source.stats.messages_in > 200)
        orientation = world.device(source.name, "Tracker0/1").orientation
        assert orientation is not None and abs(sum(q * q for q in orientation) - 1) < 1e-9
        assert source.link is not None and source.link.session is not None
        assert (source.link.session.peer_udp is not None) == (scheme == "vrpn")
        assert source.stats.dropped == 0
    finally:
        await stop(task)
        server.terminate()
        await server.wait()


@pytest.mark.skipif(
    not PRINT_DEVICES, reason="set ROBOWIRE_VRPN_PRINT_DEVICES to a built vrpn_print_devices"
)
@pytest.mark.parametrize("udp", [True, False])
async def test_mainline_client_prints_our_simulator(udp: bool) -> None:
    sim = open_sim(SimOptions(port=0, rate=20, count=2))
    task = await started(sim)
    port = sim.address[1]  # type: ignore[index]
    where = f"127.0.0.1:{port}" if udp else f"tcp://127.0.0.1:{port}"
    names = [f"{device}@{where}" for device in ("Tracker0", "Analog0", "Button0", "Dial0")]
    client = await asyncio.create_subprocess_exec(
        "stdbuf",
        "-oL",
        PRINT_DEVICES,
        *names,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        await asyncio.sleep(2.5)
    finally:
        client.terminate()
        out = (await client.communicate())[0].decode(errors="replace")
        await stop(task)
    assert "sensor 1:" in out and "pos (" in out and "vel (" in out
    assert "(4 chans)" in out and "has 2 buttons" in out and "was moved by  0.25" in out
    for bad in ("arning", "rror", "No response", "flatlined"):
        assert bad not in out
