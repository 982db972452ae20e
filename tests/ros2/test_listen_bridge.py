"""The chain a ROS 2 user wants: a ROS 2 robot (the independent publisher of publisher.py:
rosbags' types and bytes, cyclonedds' DDS) appears through robowire in another protocol's
consumer, here as a VRPN tracker printed by the mainline `vrpn_print_devices` (VRPN 07.38,
../shared/peers/vrpn): `bridge ros2:// --to vrpn://…`, run as the CLI runs it."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.ros2.test_listen import domain, publishing, tf_topic, transform

from mainline import PRINT_DEVICES
from support import free_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

ROBOT = [1.5, -2.25, 0.75]
ROBOT_Q = [0.0, 0.0, 0.6, 0.8]  # x y z w
_NUMBER = r"\s*([-\d.]+)"
_POS = re.compile(
    rf"pos \({_NUMBER},{_NUMBER},{_NUMBER}\); quat \({_NUMBER},{_NUMBER},{_NUMBER},{_NUMBER}\s*\)"
)


async def test_a_ros2_robot_is_a_vrpn_tracker_for_the_mainline_client(tmp_path: Path) -> None:
    assert PRINT_DEVICES.is_file(), f"no mainline vrpn_print_devices at {PRINT_DEVICES}"
    domain_id = domain()
    spec = {
        "domain": domain_id,
        "rate": 20,
        "topics": [tf_topic(transform("world", "robot1", ROBOT, ROBOT_Q))],
    }
    port = free_port()
    env = {
        **os.environ,
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
    }
    with publishing(tmp_path, spec):
        bridge = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "robowire.cli",
                "bridge",
                f"ros2://?domain={domain_id}",
                "--to",
                f"vrpn://127.0.0.1:{port}",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            out = ""
            for _ in range(6):  # until the bridge listens and has the robot (a busy machine)
                await asyncio.sleep(2.0)
                client = subprocess.Popen(
                    ["stdbuf", "-oL", str(PRINT_DEVICES), f"robot1@tcp://127.0.0.1:{port}"],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                await asyncio.sleep(3.0)
                client.send_signal(signal.SIGINT)
                out = client.communicate(timeout=10)[0]
                if _POS.search(out):
                    break
        finally:
            bridge.send_signal(signal.SIGINT)
            errors = bridge.communicate(timeout=20)[1]
    found = _POS.search(out)
    assert found is not None, f"vrpn_print_devices printed no pose:\n{out}\n{errors}"
    values = [float(v) for v in found.groups()]
    assert values[:3] == pytest.approx(ROBOT, abs=0.01)  # it prints two decimals
    assert values[3:] == pytest.approx(ROBOT_Q, abs=0.01)  # VRPN's order: x y z w
    assert "Tracker robot1@" in out
