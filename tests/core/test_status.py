"""`robowire status` and the status endpoints, run as processes: a gateway started with
`--status-port` (or a viewer) answers `GET /status`; `robowire status` prints its services as a
table or JSON; an unreachable gateway, or a bad URL, is one error line and a non-zero exit."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from robowire.gateway import Gateway
from robowire.status import MAX_REQUEST, StatusServer

SRC = Path(__file__).resolve().parents[2] / "src"
ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
ROBOWIRE = [sys.executable, "-m", "robowire.cli"]
DEADLINE = 60.0
SPYGLASS_DRONES = 7

pytestmark = pytest.mark.timeout(180)


def robowire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ROBOWIRE, *args], env=ENV, capture_output=True, text=True, timeout=DEADLINE
    )


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ROBOWIRE, *args], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def said(process: subprocess.Popen[str], pattern: str) -> re.Match[str]:
    """The first stderr line of `process` that matches `pattern`."""
    assert process.stderr is not None
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        line = process.stderr.readline()
        if not line:
            break
        found = re.search(pattern, line)
        if found:
            return found
    raise AssertionError(f"never said {pattern!r}")


def stop(*processes: subprocess.Popen[str]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait(30)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def services_until(url: str, ok: Any) -> list[dict[str, Any]]:
    """`robowire status URL --json` again until `ok(services)` (a gateway still starting)."""
    end = time.monotonic() + DEADLINE
    while True:
        run = robowire("status", url, "--json")
        assert run.returncode == 0, run.stderr
        message = json.loads(run.stdout)
        assert message["type"] == "status"
        if ok(message["services"]) or time.monotonic() > end:
            return list(message["services"])
        time.sleep(0.3)


def test_a_gateway_with_a_status_port_lists_its_source_and_sink() -> None:
    sim = start("sim", "spyglass", "--port", "0", "--count", str(SPYGLASS_DRONES))
    gateway: subprocess.Popen[str] | None = None
    try:
        port = said(sim, r"listening on 127\.0\.0\.1:(\d+)").group(1)
        source = f"spyglass@127.0.0.1:{port}"
        gateway = start(
            "serve", "vrpn://127.0.0.1:0", "--from", f"spyglass://127.0.0.1:{port}",
            "--status-port", "0",
        )  # fmt: skip
        url = said(gateway, r"status on (http://127\.0\.0\.1:\d+/status)").group(1)

        def flowing(services: list[dict[str, Any]]) -> bool:
            mine = [s for s in services if s["name"] == source]
            return bool(mine) and mine[0]["devices"] == SPYGLASS_DRONES and mine[0]["rate"] > 0

        services = services_until(url, flowing)
        by_role = {s["role"]: s for s in services}
        assert set(by_role) == {"source", "sink", "status"}
        assert by_role["source"]["name"] == source
        assert by_role["source"]["state"] == "connected"
        assert by_role["source"]["devices"] == SPYGLASS_DRONES
        assert by_role["source"]["messages"] > 0 and by_role["source"]["rate"] > 0
        assert by_role["source"]["errors"] == 0
        assert by_role["sink"]["state"] == "listening"
        assert re.fullmatch(r"127\.0\.0\.1:\d+", by_role["sink"]["address"])

        table = robowire("status", url.removesuffix("/status"))  # the /status is optional
        assert table.returncode == 0, table.stderr
        row = next(line for line in table.stdout.splitlines() if source in line)
        assert "source" in row and "connected" in row and f" {SPYGLASS_DRONES} " in row

        # the simulator goes away: the source is waiting again, and says so
        stop(sim)
        services = services_until(
            url, lambda ss: any(s["name"] == source and s["state"] == "waiting" for s in ss)
        )
        assert [s["state"] for s in services if s["name"] == source] == ["waiting"]
    finally:
        stop(sim, *([gateway] if gateway else []))


def test_the_viewer_answers_status_too() -> None:
    viewer = start("serve", "http://127.0.0.1:0", "--from", "vrsp://127.0.0.1:0")
    try:
        base = said(viewer, r"(http://127\.0\.0\.1:\d+)/").group(1)
        with urllib.request.urlopen(f"{base}/status", timeout=DEADLINE) as response:
            assert response.headers["Content-Type"] == "application/json"
            message = json.loads(response.read())
        roles = sorted(s["role"] for s in message["services"])
        assert roles == ["sink", "source"]
        run = robowire("status", base, "--json")
        assert run.returncode == 0 and json.loads(run.stdout)["type"] == "status"
    finally:
        stop(viewer)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([f"127.0.0.1:{closed_port()}"], "cannot reach a gateway at http://127.0.0.1:"),
        (["ftp://127.0.0.1:1"], "expected http://HOST:PORT"),
        (["127.0.0.1:99999"], "bad port"),
    ],
)
def test_an_unreachable_gateway_or_a_bad_url_is_one_line(args: list[str], message: str) -> None:
    run = robowire("status", *args)
    assert run.returncode == 1
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("robowire: error: ")
    assert message in lines[0]


def test_a_busy_status_port_is_one_line_and_nothing_starts() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = robowire(
            "listen", "vrsp://127.0.0.1:0", "--status-port", str(port), "--duration", "5"
        )
    assert run.returncode == 1
    assert run.stderr.splitlines() == [
        f"robowire: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


def test_help_has_an_example() -> None:
    run = robowire("status", "--help")
    assert run.returncode == 0 and "Example" in run.stdout and "--status-port" in run.stdout
    for command in ("listen", "serve", "bridge", "record", "replay"):
        assert "--status-port" in robowire(command, "--help").stdout


async def ask(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), DEADLINE)
    writer.close()
    return answer


async def test_the_status_server_answers_only_get_status() -> None:
    server = StatusServer("127.0.0.1", 0)
    gateway = Gateway().add(server)
    run = asyncio.create_task(gateway.run())
    try:
        await asyncio.wait_for(server.ready.wait(), DEADLINE)
        assert server.address is not None
        port = server.address[1]
        ok = await ask(port, b"GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n")
        head, _, body = ok.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK")
        assert [s["role"] for s in json.loads(body)["services"]] == ["status"]
        host = f"Host: 127.0.0.1:{port}\r\n".encode()
        assert (await ask(port, b"GET /other HTTP/1.1\r\n" + host + b"\r\n")).startswith(
            b"HTTP/1.1 404"
        )
        assert (await ask(port, b"POST /status HTTP/1.1\r\n" + host + b"\r\n")).startswith(
            b"HTTP/1.1 405"
        )
        assert await ask(port, b"GET /status HTTP/1.1\r\nX: " + b"a" * MAX_REQUEST) == b""
        assert (await ask(port, b"\r\n\r\n")).startswith(b"HTTP/1.1 405")
        # another site's name (DNS rebinding), or none: refused (tests/security/test_access.py)
        assert (await ask(port, b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n")).startswith(
            b"HTTP/1.1 403"
        )
        assert (await ask(port, b"GET /status HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 403")
        # the server still answers after all that
        assert (await ask(port, b"GET /status HTTP/1.0\r\n" + host + b"\r\n")).startswith(
            b"HTTP/1.1 200"
        )
    finally:
        gateway.stop()
        await asyncio.wait_for(run, DEADLINE)
