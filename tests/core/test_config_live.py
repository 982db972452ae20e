"""`robowire up -c site.toml` and the serve/bridge rule flags, as processes on loopback, seen
at the far end by robowire's own clients of the sink's protocol."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import cast

import pytest

from support import free_port

ROBOWIRE = [sys.executable, "-m", "robowire.cli"]
EXAMPLE = Path(__file__).parents[2] / "examples" / "site.toml"


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ROBOWIRE, *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )


def wait_for(process: subprocess.Popen[str], pattern: str) -> list[str]:
    """stderr lines up to the one matching `pattern` (fails if the process ends first)."""
    assert process.stderr is not None
    lines: list[str] = []
    for line in process.stderr:
        lines.append(line)
        if re.search(pattern, line):
            return lines
    raise AssertionError(f"ended before {pattern!r}: {''.join(lines)}")


def listen_json(url: str, seconds: float) -> list[dict[str, object]]:
    done = subprocess.run(
        [*ROBOWIRE, "listen", url, "--json", "--duration", str(seconds)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def finish(process: subprocess.Popen[str], interrupt: bool = False) -> str:
    """Wait for the end of a run (or end it with Ctrl-C): a clean exit, no traceback."""
    if interrupt:
        process.send_signal(signal.SIGINT)
    try:
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == (130 if interrupt else 0), err
    assert "Traceback" not in err
    return err


def test_up_runs_the_example_site_and_a_vrpn_client_sees_its_rules() -> None:
    ports = {k: str(free_port()) for k in ("SITE_MOCAP_PORT", "SITE_VR_PORT", "SITE_FOXGLOVE_PORT")}
    up = start("up", "-c", str(EXAMPLE), env=ports)
    try:
        lines = wait_for(up, r"foxglove.* listening on")
        said = "".join(lines)
        assert f"listening on 127.0.0.1:{ports['SITE_MOCAP_PORT']}" in said
        assert f"listening on 127.0.0.1:{ports['SITE_VR_PORT']}" in said
        # a VRPN client of the VR sink asks for the renamed trackers, and one that is filtered
        url = f"vrpn://127.0.0.1:{ports['SITE_VR_PORT']}?devices=drone-1,drone-2,Tracker0/2"
        rows = listen_json(url, 3.0)
    finally:
        finish(up, interrupt=True)
    trackers = [r for r in rows if r["kind"] == "tracker"]
    seen = Counter(str(r["device"]) for r in trackers)
    assert set(seen) == {"drone-1/0", "drone-2/0"}, seen  # Tracker0/2 is not offered
    for row in trackers:
        x, y, z = cast(list[float], row["position"])
        # the simulator flies sensor i on a circle of radius 1 + i/4 at height 1 + i/10; the
        # site turns it by 90 degrees (radius kept) and lifts it by 1.5 m
        i = 0 if row["device"] == "drone-1/0" else 1
        assert math.hypot(x, y) == pytest.approx(1 + i / 4, abs=1e-6)
        assert z == pytest.approx(1 + i / 10 + 1.5, abs=1e-6)
    # device_rate = 10 against a 60 Hz simulator: at most 10 per second (+1 at the start)
    assert max(seen.values()) <= 3 * 10 + 2, seen


def test_a_bad_site_file_is_one_line_and_nothing_starts(tmp_path: Path) -> None:
    port = free_port()
    site = tmp_path / "site.toml"
    site.write_text(
        f"[[sim]]\nprotocol = 'vrpn'\nport = {port}\n"
        f"[[source]]\nurl = 'vrpn://Tracker0@127.0.0.1:{port}'\n"
        "[[sink]]\nurl = 'vrpn://127.0.0.1:0'\n[sink.transform]\nscale = 0\n"
    )
    done = subprocess.run(
        [*ROBOWIRE, "up", "-c", str(site)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert done.stderr.splitlines() == [
        "robowire: error: site.toml: sink[1].transform.scale: must be a positive number"
    ]


def test_serve_devices_and_kinds_flags_filter_what_a_client_sees() -> None:
    sim_port, out_port = free_port(), free_port()
    sim = start("sim", "vrpn", "--port", str(sim_port), "--count", "3")
    try:
        wait_for(sim, "listening on")
        serve = start(
            "serve",
            f"spyglass://127.0.0.1:{out_port}",
            "--from",
            f"vrpn://Tracker0@127.0.0.1:{sim_port}",
            "--devices",
            "Tracker0/[01]",
            "--kinds",
            "tracker",
            "--device-rate",
            "5",
        )
        try:
            wait_for(serve, "listening on")
            rows = listen_json(f"spyglass://127.0.0.1:{out_port}", 3.0)
        finally:
            finish(serve, interrupt=True)
    finally:
        finish(sim, interrupt=True)
    # SpyGlass numbers its nodes itself: two trackers of the three, nothing else
    assert len({r["device"] for r in rows}) == 2, rows[:5]
