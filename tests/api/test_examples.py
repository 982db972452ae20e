"""Each script of examples/ runs against the simulators (and its output is checked by a
reader: ours, UgCS's UCS side, or the mainline VRPN client)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.api.simulators import simulator
from tests.support import free_port, free_udp_port

import robowire
from mainline import needs_client, start_print_devices, stop_print_devices
from robowire.protocols.ugcs import UcsClient

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def run(script: str, *args: object, timeout: float = 60) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def start(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / script), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def test_read_tracker() -> None:
    with simulator("vrpn", count=2) as (host, port):
        lines = run("read_tracker.py", f"vrpn://Tracker0@{host}:{port}").splitlines()
    assert len(lines) >= 5 and all(line.startswith("Tracker0/0 (") for line in lines)


def test_fly_ugcs() -> None:
    with simulator("ugcs", count=1) as (host, port):
        out = run("fly_ugcs.py", f"{host}:{port}", "SIM-0001", timeout=90)
    assert "arm: STATUS_OK" in out and "takeoff_command: STATUS_OK" in out
    assert out.splitlines()[-1].startswith("SIM-0001: ") and out.endswith("m, up\n")


async def test_my_vsm_is_flown_by_a_ucs() -> None:
    port = free_port()
    vsm = start("my_vsm.py", port, 60)
    try:
        assert vsm.stdout is not None
        assert "VSM for ROVER-1" in await asyncio.to_thread(vsm.stdout.readline)
        async with UcsClient("127.0.0.1", port) as ucs:
            rover = await ucs.wait_for_device("ROVER-1", telemetry=["latitude"], timeout=20)
            assert (await ucs.command("ROVER-1", "waypoint", _target())).text == "arm first"
            assert (await ucs.command("ROVER-1", "arm")).ok
            assert (await ucs.command("ROVER-1", "waypoint", _target())).ok
            start_lat = rover.values["latitude"]
            await ucs.wait_for(lambda: rover.values["latitude"] != start_lat, timeout=20)
    finally:
        vsm.terminate()
        vsm.communicate(timeout=10)


def _target() -> dict[str, object]:
    return {"latitude": 56.9500, "longitude": 24.1052, "altitude_amsl": 12.0}


def test_drone_show_reaches_a_receiver() -> None:
    port = free_udp_port()
    with robowire.connect(f"vrsp://127.0.0.1:{port}") as live:
        out = run("drone_show.py", f"127.0.0.1:{port}", 3)
        assert len(live.devices) == 1000
        assert "sent 1000 drones" in out


def test_vrpn_server_is_read_by_our_vrpn_client() -> None:
    port = free_port()
    server = start("vrpn_server.py", port, 60)
    try:
        assert server.stdout is not None and "VRPN server" in server.stdout.readline()
        with robowire.connect(f"vrpn+tcp://Tracker0@127.0.0.1:{port}") as live:
            device = live.wait_for("Tracker0/0", timeout=10)
        assert device.position is not None and device.position[2] == pytest.approx(1.0)
    finally:
        server.terminate()
        server.communicate(timeout=10)


@needs_client
def test_vrpn_server_is_read_by_the_mainline_client() -> None:
    port = free_port()
    server = start("vrpn_server.py", port, 60)
    try:
        assert server.stdout is not None and "VRPN server" in server.stdout.readline()
        client = start_print_devices(f"Tracker0@tcp://127.0.0.1:{port}")
        time.sleep(2)  # it prints until stopped
        out = stop_print_devices(client)
    finally:
        server.terminate()
        server.communicate(timeout=10)
    assert f"Tracker Tracker0@tcp://127.0.0.1:{port}, sensor 0" in out, out


def test_record_and_read(tmp_path: Path) -> None:
    with simulator("vrpn", count=2, rate=100) as (host, port):
        out = run("record_and_read.py", f"vrpn://Tracker0@{host}:{port}", tmp_path / "run.mcap")
    assert "read back: 2 devices" in out


def test_vrpn_buttons_prints_presses_releases_and_turns() -> None:
    with simulator("vrpn", count=1) as (host, port):
        out = run("vrpn_buttons.py", f"vrpn://Button0,Dial0,Analog0@{host}:{port}", 3)
    lines = out.splitlines()
    assert "Button0 button 0 down" in lines and "Button0 button 0 up" in lines, out
    assert "Dial0 dial 1 turned +0.25" in lines
    assert any(line.startswith("Analog0 channels [") for line in lines)


def test_xrp_robot_is_driven_by_our_wpilib_side() -> None:
    port = free_udp_port()
    robot = start("xrp_robot.py", port, 60)
    try:
        assert robot.stdout is not None and "XRP robot on" in robot.stdout.readline()
        url = f"xrp://127.0.0.1:{port}?enable=1&left=0.5&right=0.3"
        with robowire.connect(url) as live:
            live.wait_for("xrp", timeout=10, field="encoder_0_count")
            deadline = time.monotonic() + 30
            while live.devices["xrp"].telemetry["encoder_0_count"].value < 200:
                assert time.monotonic() < deadline
                live.wait(timeout=5)
            xrp = live.devices["xrp"]
    finally:
        robot.terminate()
        robot.communicate(timeout=10)
    left, right = (xrp.telemetry[f"encoder_{i}_count"].value for i in (0, 1))
    assert right == pytest.approx(left * 0.3 / 0.5, abs=10)  # the right wheel at 0.3
    assert xrp.telemetry["gyro_angle_z"].value == pytest.approx((right - left) / 10, abs=1)
