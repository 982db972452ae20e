"""`robowire bridge FROM --to TO` as a process, for representative pairs of the matrix: the
simulator is a process too, and the far end a client of the sink's protocol in this process.
Expected values come from the simulators' documented settings (the show's root, the sensor
network's area), not from robowire's encoders."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from robowire.gateway import Gateway, open_source
from robowire.world import World
from support import free_udp_port

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
ROBOWIRE = [sys.executable, "-m", "robowire.cli"]
WAIT = 30.0

pytestmark = pytest.mark.timeout(120)


@contextmanager
def robowire(*args: str) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [*ROBOWIRE, *args, "--duration", "60"],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        process.kill()
        process.communicate(timeout=30)


def port_of(process: subprocess.Popen[str]) -> int:
    """The port of the first line: `... listening on 127.0.0.1:PORT; Ctrl-C ends it`."""
    assert process.stderr is not None
    line = process.stderr.readline()
    found = re.search(r"(?:listening on|sending to) 127\.0\.0\.1:(\d+)", line)
    assert found, line
    return int(found.group(1))


def far_end(url: str, done: Callable[[World], bool]) -> World:
    """Our source of the sink's protocol, until `done(world)` holds."""

    async def run() -> World:
        gateway = Gateway().add(open_source(url))
        task = asyncio.create_task(gateway.run())
        try:
            async with asyncio.timeout(WAIT):
                while not done(gateway.world):
                    await asyncio.sleep(0.05)
        finally:
            gateway.stop()
            await task
        return gateway.world

    return asyncio.run(run())


def test_bridge_vrsp_show_to_ugcs_vehicles_at_the_shows_root() -> None:
    udp = free_udp_port()
    with robowire("bridge", f"vrsp://127.0.0.1:{udp}", "--to", "ugcs://127.0.0.1:0") as bridge:
        port = port_of(bridge)
        with robowire(
            "sim", "vrsp", "--drones", "4", "--to", f"127.0.0.1:{udp}",
            "--set", "lat=10", "--set", "lon=20", "--set", "alt=5",
        ):  # fmt: skip
            world = far_end(
                f"ugcs://127.0.0.1:{port}",
                lambda w: len(w) == 4 and all("heading" in d.telemetry for d in w.devices()),
            )
    for device in world.devices():
        assert device.geodetic is not None
        lat, lon, alt = device.geodetic
        assert abs(lat - 10) < 0.001 and abs(lon - 20) < 0.001  # metres from the root
        assert 5 < alt < 200  # the show flies above its root
        heading, unit = device.telemetry["heading"]
        assert unit == "deg" and 0 <= heading < 360


def test_bridge_spyglass_network_to_vrpn_trackers() -> None:
    with robowire("sim", "spyglass", "--count", "5", "--port", "0") as sim:
        sim_port = port_of(sim)
        with robowire(
            "bridge", f"spyglass://127.0.0.1:{sim_port}", "--to", "vrpn://127.0.0.1:0"
        ) as bridge:
            port = port_of(bridge)
            world = far_end(
                f"vrpn://127.0.0.1:{port}",
                lambda w: sum(d.position is not None for d in w.devices()) == 5,
            )
    trackers = {d.device_id: d for d in world.devices() if d.position is not None}
    assert set(trackers) == {f"{n}/0" for n in range(1, 6)}  # node N is tracker "N", sensor 0
    for device in trackers.values():
        x, y, z = device.position or (0.0, 0.0, 0.0)
        assert 0 <= x <= 200 and 0 <= y <= 200 and z == 0  # the model's 200 x 200 unit area
