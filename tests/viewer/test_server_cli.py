"""The viewer from the command line, run as processes: `serve http://…` prints a URL whose page
loads and whose WebSocket carries the simulator's drones; `demo` prints the viewer's URL; a busy
port is one error line."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

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
