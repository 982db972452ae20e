"""Interop with a real C++ VRPN client: the one bundled in PyPI `motioncapture`.

It runs in a subprocess (a C++ crash cannot take pytest down) against our serve sink and our
simulator, in UDP+TCP mode (`hostname` = "127.0.0.1:PORT") and TCP-only ("tcp://...").
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robowire.addresses import parse_endpoint
from robowire.protocols.vrpn.services import open_sim, open_sink
from robowire.service import SimOptions
from robowire.world import World

from .test_live import started, stop

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(
        importlib.util.find_spec("motioncapture") is None,
        reason="PyPI motioncapture (real C++ VRPN client) is not installed",
    ),
]

CLIENT = Path(__file__).with_name("mc_client.py")


async def run_client(hostname: str, frames: int) -> list[dict[str, Any]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CLIENT),
        hostname,
        str(frames),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 30.0)
    except TimeoutError:
        process.kill()
        raise
    assert process.returncode == 0, err.decode(errors="replace")[-2000:]
    return [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]


def hostname(mode: str, port: int) -> str:
    return f"127.0.0.1:{port}" if mode == "udp" else f"tcp://127.0.0.1:{port}"


async def keep_updating(world: World) -> None:
    k = 0
    while True:
        k += 1
        for i in range(3):
            angle = 0.3 * (i + 1)
            world.update_device(
                "test",
                f"body{i}",
                receive_time=float(k),
                position=(1.0 + i, -2.0 * i, 0.5),
                # w, x, y, z: a rotation of `angle` about z
                orientation=(float(np.cos(angle / 2)), 0.0, 0.0, float(np.sin(angle / 2))),
            )
        await asyncio.sleep(0.01)


async def _connected(server: Any) -> None:
    while not server.connected():
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # descriptions exchanged


@pytest.mark.parametrize("mode", ["udp", "tcp"])
async def test_cpp_client_reads_our_sink(mode: str) -> None:
    world = World()
    sink = open_sink(parse_endpoint("vrpn://127.0.0.1:0"))
    sink_task = await started(sink, world)
    updater = asyncio.create_task(keep_updating(world))
    try:
        port = sink.address[1]  # type: ignore[index]
        client = asyncio.create_task(run_client(hostname(mode, port), 150))
        server = sink.server  # type: ignore[attr-defined]
        await asyncio.wait_for(_connected(server), 10.0)
        sessions = [link.session for link in server.links]
        # UDP+TCP: the C++ client announced its UDP port, so poses go over UDP
        assert [s.peer_udp is not None for s in sessions] == [mode == "udp"]
        frames = await client
    finally:
        await stop(updater, sink_task)
    seen: dict[str, list[float]] = {}
    for frame in frames:
        seen.update(frame["bodies"])
    assert {"body0", "body1", "body2"} <= set(seen)
    for i in range(3):
        x, y, z, qw, qx, qy, qz = seen[f"body{i}"]
        angle = 0.3 * (i + 1)
        assert (x, y, z) == pytest.approx((1.0 + i, -2.0 * i, 0.5), abs=1e-6)
        assert (qw, qx, qy, qz) == pytest.approx(
            (np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)), abs=1e-6
        )


@pytest.mark.parametrize("mode", ["udp", "tcp"])
async def test_cpp_client_reads_our_simulator(mode: str) -> None:
    sim = open_sim(SimOptions(port=0, rate=200, count=1))
    task = await started(sim)
    try:
        frames = await run_client(hostname(mode, sim.address[1]), 100)  # type: ignore[index]
    finally:
        await stop(task)
    poses = [f["bodies"]["Tracker0"] for f in frames if "Tracker0" in f["bodies"]]
    assert len(poses) > 20
    x, y, z, qw, qx, qy, qz = poses[-1]
    assert np.hypot(x, y) == pytest.approx(1.0, abs=1e-5) and z == pytest.approx(1.0)
    assert qw * qw + qz * qz == pytest.approx(1.0, abs=1e-5) and qx == qy == 0.0
    assert len({tuple(p) for p in poses}) > 10  # it moves
