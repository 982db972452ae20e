"""The viewer from the command line, run as processes: `serve http://…` prints a URL whose page
loads and whose WebSocket carries the simulator's drones; `demo` prints the viewer's URL; a busy
port is one error line."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import connect

from robowire.viewer.frames import decode_frame
from support import free_udp_port

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
ROBOWIRE = [sys.executable, "-m", "robowire.cli"]

pytestmark = pytest.mark.timeout(120)


def start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ROBOWIRE, *args], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


async def drones_in_first_frame(url: str) -> int:
    async with connect(url.replace("http://", "ws://") + "ws") as ws:
        devices = 0
        while not devices:
            await ws.send(json.dumps({"type": "ready"}))
            while True:
                message = await asyncio.wait_for(ws.recv(), 30)
                if isinstance(message, bytes):
                    break
            devices = sum(len(b) for b in decode_frame(message).blocks)
        return devices


def test_serve_http_prints_the_url_and_the_page_and_feed_work() -> None:
    udp = free_udp_port()
    serve = start(
        ["serve", "http://127.0.0.1:0", "--from", f"vrsp://127.0.0.1:{udp}", "--duration", "90"]
    )
    sim = start(["sim", "vrsp", "--drones", "4", "--to", f"127.0.0.1:{udp}", "--duration", "90"])
    try:
        assert serve.stderr is not None
        line = serve.stderr.readline()
        found = re.fullmatch(
            r"viewer listening on (http://127\.0\.0\.1:\d+/); Ctrl-C ends it\n", line
        )
        assert found, line
        url = found.group(1)
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.headers["Content-Type"].startswith("text/html")
            assert b"robowire viewer" in response.read()
        assert asyncio.run(drones_in_first_frame(url)) == 4
    finally:
        sim.kill()
        serve.kill()
        sim.communicate(timeout=30)
        serve.communicate(timeout=30)


def test_demo_prints_the_viewer_url_and_ends() -> None:
    done = subprocess.run(
        [*ROBOWIRE, "demo", "--duration", "3", "--viewer-port", "0", "--count", "3"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"^viewer: http://127\.0\.0\.1:\d+/$", done.stderr, re.MULTILINE), done.stderr


async def demo_world(url: str, enough: Any, seconds: float = 60.0) -> dict[str, Any]:
    """Every device the viewer at `url` shows, by (source, id): the positions and geodetic
    positions of every frame, until `enough(devices)` holds (AssertionError after `seconds`)."""
    devices: dict[tuple[str, str], dict[str, list[Any]]] = {}
    names: dict[int, str] = {}
    ids: dict[tuple[str, int], str] = {}
    async with connect(url.replace("http://", "ws://") + "ws") as ws:
        async with asyncio.timeout(seconds):
            while not enough(devices):
                await ws.send(json.dumps({"type": "ready"}))
                while isinstance(message := await ws.recv(), str):
                    text = json.loads(message)
                    if text["type"] == "catalog":
                        names[text["index"]] = text["source"]
                        for k, device in enumerate(text["devices"]):
                            ids[(text["source"], text["start"] + k)] = device["id"]
                for block in decode_frame(message).blocks:
                    source = names[block.source_index]
                    for i, slot in enumerate(block.slot.tolist()):
                        seen = devices.setdefault((source, ids[(source, slot)]), {})
                        seen.setdefault("position", []).append(block.position[i].tolist())
                        seen.setdefault("geodetic", []).append(block.geodetic[i].tolist())
    return devices


def has_geodetic(device: dict[str, list[Any]]) -> bool:
    return not math.isnan(device["geodetic"][-1][0])


def test_the_demo_s_ugcs_vehicles_fly_and_every_simulator_shares_one_site() -> None:
    demo = start(["demo", "--duration", "90", "--viewer-port", "0", "--count", "2"])
    try:
        assert demo.stderr is not None
        url = ""
        while not url:
            line = demo.stderr.readline()
            assert line, "the demo ended without printing the viewer's URL"
            if found := re.fullmatch(r"viewer: (http://127\.0\.0\.1:\d+/)\n", line):
                url = found.group(1)

        def flown(positions: list[list[float]]) -> float:
            """How far the device got from where it was first placed (m)."""
            placed = [p for p in positions if not math.isnan(p[0])]
            return max((math.dist(placed[0], p) for p in placed), default=0.0)

        def enough(devices: dict[tuple[str, str], dict[str, list[Any]]]) -> bool:
            ugcs = [d for (source, _), d in devices.items() if source.startswith("ugcs@")]
            on_map = {s.split("@")[0] for (s, _), d in devices.items() if has_geodetic(d)}
            return (
                len(ugcs) == 2
                and all(flown(d["position"]) > 5.0 for d in ugcs)
                and on_map >= {"ugcs", "vrsp"}
            )

        devices = asyncio.run(demo_world(url, enough))
    finally:
        demo.kill()
        demo.communicate(timeout=30)
    # every device with a latitude and longitude is within a few km of every other
    here = [d["geodetic"][-1] for d in devices.values() if has_geodetic(d)]
    lat = np.radians([p[0] for p in here])
    lon = np.radians([p[1] for p in here])
    north = (lat[:, None] - lat[None, :]) * 6_371_000.0
    east = (lon[:, None] - lon[None, :]) * 6_371_000.0 * np.cos(lat.mean())
    assert np.hypot(north, east).max() < 2_000.0


def test_demo_on_a_busy_port_is_one_error_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [*ROBOWIRE, "demo", "--duration", "3", "--viewer-port", str(port)],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert done.returncode != 0
    assert done.stderr.splitlines() == [
        f"robowire: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


def test_serve_http_with_an_unknown_option_is_one_error_line() -> None:
    done = subprocess.run(
        [*ROBOWIRE, "serve", "http://127.0.0.1:0?colour=red", "--from", "vrsp://127.0.0.1:0"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert len(done.stderr.splitlines()) == 1
    assert "colour" in done.stderr
