"""The `robowire` command with XRP, run as a separate process: each mistake is one line on
stderr and a non-zero exit, and a silent robot is said once."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from support import free_udp_port

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}

pytestmark = pytest.mark.timeout(60)


def robowire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "robowire.cli", *args],
        env=ENV, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_sim_on_a_busy_port_is_one_line_and_fails() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as busy:
        busy.bind(("127.0.0.1", 0))
        port = busy.getsockname()[1]
        run = robowire("sim", "xrp", "--port", str(port), "--duration", "2")
    assert run.returncode != 0
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert str(port) in lines[0] and "in use" in lines[0]
    assert "ExceptionGroup" not in run.stderr


def test_sim_rejects_an_unknown_setting() -> None:
    run = robowire("sim", "xrp", "--set", "lagg=1", "--duration", "1")
    assert run.returncode != 0
    assert len(run.stderr.splitlines()) == 1 and "'lagg'" in run.stderr


def test_url_efforts_outside_minus_one_to_one_are_rejected() -> None:
    run = robowire("listen", "xrp://127.0.0.1:3540?enable=1&left=5", "--duration", "1")
    assert run.returncode != 0
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "left" in lines[0] and "-1..1" in lines[0], run.stderr


def test_a_silent_robot_is_said_once() -> None:
    run = robowire("listen", "xrp://127.0.0.1:1", "--json", "--duration", "4")
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert "still sending to 127.0.0.1:1" in lines[0] and "waiting for the robot" in lines[0]


def test_a_file_that_is_not_xrp_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "random.bin"
    path.write_bytes(random.Random(8).randbytes(100_000))
    run = robowire("listen", f"xrp:{path}", "--json")
    assert run.returncode != 0
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "nothing in it decodes as xrp" in lines[0], run.stderr


def test_wpilib_environment_variables_are_the_xrp_defaults() -> None:
    """As WPILib's halsim_xrp reads them: HALSIMXRP_PORT is where the simulated robot listens
    and where `xrp://` (no host, no port) sends; HALSIMXRP_HOST is the robot's host."""
    port = free_udp_port()
    env = {**ENV, "HALSIMXRP_HOST": "127.0.0.1", "HALSIMXRP_PORT": str(port)}
    sim = subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", "sim", "xrp", "--duration", "30"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        assert sim.stdout is not None
        assert f"127.0.0.1:{port}" in sim.stdout.readline()
        run = subprocess.run(
            [sys.executable, "-m", "robowire.cli", "listen", "xrp://", "--json", "--count", "1"],
            env=env, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        line = json.loads(run.stdout)
        assert line["source"] == f"xrp@127.0.0.1:{port}" and line["kind"] == "xrp"
    finally:
        sim.terminate()
        sim.wait(timeout=10)


def test_a_bad_halsimxrp_port_is_one_line() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "robowire.cli", "listen", "xrp://", "--duration", "1"],
        env={**ENV, "HALSIMXRP_PORT": "35x0"}, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert run.returncode != 0
    assert run.stderr.splitlines() == [
        "robowire: error: HALSIMXRP_PORT=35x0: the port must be 1..65535"
    ]
