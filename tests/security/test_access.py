"""A page on another site cannot use the gateway's HTTP endpoints (issue 21).

Real processes (`robowire sim xrp`, `robowire serve http://…`, `--status-port`) on loopback;
requests are written byte for byte on a socket, so the Host and Origin headers are exactly
what a browser on a hostile page (or a DNS-rebinding one) would send. Each refusal is checked
by its status line and body, and each has a twin request that is let through, so a server
that refused everything would fail too.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.sync.client import connect
from websockets.typing import Origin, Subprotocol

from support import SRC, Process

pytestmark = pytest.mark.timeout(120)

ENV = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
ROBOWIRE = [sys.executable, "-m", "robowire.cli"]
EVIL = "http://evil.example"
TOKEN = "a-token-the-operator-chose"
NEEDS_TOKEN = "control needs the token printed at start"
FINAL = {"ok", "failed", "timeout", "refused"}


def request(port: int, target: str, **headers: str) -> tuple[str, str]:
    """One HTTP/1.1 GET of `target` with exactly these headers (`Host` is not added): the
    status line and the body (up to the end of the response head for a WebSocket's 101)."""
    head = f"GET {target} HTTP/1.1\r\n" + "".join(
        f"{name.replace('_', '-')}: {value}\r\n" for name, value in headers.items()
    )
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(f"{head}\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.startswith(b"HTTP/1.1 101"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status, _, rest = answer.decode("latin-1").partition("\r\n")
    return status, rest.partition("\r\n\r\n")[2]


def handshake(port: int, target: str = "/ws", **headers: str) -> tuple[str, str]:
    """A WebSocket opening handshake, as a browser sends it."""
    key = base64.b64encode(os.urandom(16)).decode()
    return request(
        port, target, Upgrade="websocket", Connection="Upgrade", Sec_WebSocket_Key=key,
        Sec_WebSocket_Version="13", Sec_WebSocket_Protocol="robowire.viewer.v1", **headers,
    )  # fmt: skip


def status_of(port: int, service: str, target: str = "/status") -> dict[str, Any]:
    status, body = request(port, target, Host=f"127.0.0.1:{port}")
    assert status == "HTTP/1.1 200 OK", (status, body)
    services = json.loads(body)["services"]
    found: dict[str, Any] = next(s for s in services if s["role"] == service)
    return found


@pytest.fixture(scope="module")
def cli() -> Iterator[Callable[..., Process]]:
    started: list[Process] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Process:
        started.append(Process(*args, env=env))
        return started[-1]

    yield start
    for process in reversed(started):
        process.stop()


@pytest.fixture(scope="module")
def robot(cli: Callable[..., Process]) -> tuple[Process, str]:
    """`robowire sim xrp` and the source name its robot has in a gateway."""
    sim = cli("sim", "xrp", "--port", "0")
    port = sim.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1)
    return sim, port


@pytest.fixture(scope="module")
def controlled(cli: Callable[..., Process], robot: tuple[Process, str]) -> tuple[Process, str]:
    """A viewer with --allow-control over the simulated robot: the process and the URL it
    printed (with its token)."""
    viewer = cli(
        "serve", "http://127.0.0.1:0", "--from", f"xrp://127.0.0.1:{robot[1]}", "--allow-control"
    )
    url = viewer.wait_for(r"listening on (http://127\.0\.0\.1:\d+/\?token=[\w-]+);").group(1)
    return viewer, url


def port_of(url: str) -> int:
    found = re.search(r":(\d+)/", url)
    assert found is not None
    return int(found.group(1))


def command(url: str, source: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A browser's WebSocket at `url` (ws://…/ws[?token=…]) sends one command: the hello it
    got first, and the command's final status."""
    with connect(url, subprotocols=[Subprotocol("robowire.viewer.v1")], open_timeout=20) as ws:
        hello = json.loads(ws.recv(timeout=20))
        message = {"type": "command", "id": 1, "source": source, "device": "xrp",
                   "command": name, "params": {}}  # fmt: skip
        ws.send(json.dumps(message))
        while True:
            raw = ws.recv(timeout=20)
            reply = json.loads(raw) if isinstance(raw, str) else {}
            if reply.get("type") == "command_status" and reply["state"] in FINAL:
                return hello, reply


# -- Origin ---------------------------------------------------------------------------------


def test_a_page_of_another_site_cannot_open_the_websocket(
    controlled: tuple[Process, str],
) -> None:
    viewer, url = controlled
    port = port_of(url)
    host = f"127.0.0.1:{port}"
    for origin in (EVIL, f"http://localhost:{port + 1}", "null", f"http://127.0.0.1:{port}.evil"):
        assert handshake(port, Host=host, Origin=origin) == (
            "HTTP/1.1 403 Forbidden",
            "forbidden: a page from another site (robowire --allow-origin ORIGIN)\n",
        ), origin
    # the viewer's own page, and a client that is no web page (no Origin), are let in
    assert handshake(port, Host=host, Origin=f"http://{host}")[0].startswith("HTTP/1.1 101")
    assert handshake(port, Host=f"localhost:{port}", Origin=f"http://localhost:{port}")[
        0
    ].startswith("HTTP/1.1 101")
    assert handshake(port, Host=host)[0].startswith("HTTP/1.1 101")
    # counted in the status, and said once per origin however often it comes
    handshake(port, Host=host, Origin=EVIL)
    assert status_of(port, "sink")["refused"] >= 5
    viewer.wait_for(r"refused a request \(Origin http://evil\.example: a page of another site\)")
    assert sum("Origin http://evil.example:" in line for line in viewer.lines) == 1


def test_allow_origin_lets_a_named_site_in(
    cli: Callable[..., Process], robot: tuple[Process, str]
) -> None:
    viewer = cli(
        "serve", "http://127.0.0.1:0", "--from", f"xrp://127.0.0.1:{robot[1]}",
        "--allow-origin", "https://ops.example:8443",
    )  # fmt: skip
    port = port_of(viewer.wait_for(r"listening on (http://\S+/)").group(1))
    host = f"127.0.0.1:{port}"
    assert handshake(port, Host=host, Origin="https://ops.example:8443")[0].startswith(
        "HTTP/1.1 101"
    )
    assert handshake(port, Host=host, Origin=EVIL)[0] == "HTTP/1.1 403 Forbidden"


# -- Host -----------------------------------------------------------------------------------


def test_a_rebinding_host_gets_nothing_on_any_path(controlled: tuple[Process, str]) -> None:
    _, url = controlled
    port = port_of(url)
    refused = (
        "HTTP/1.1 403 Forbidden",
        "forbidden: the Host header names another site (robowire --allow-host NAME)\n",
    )
    for target in ("/", "/index.html", "/static/main.js", "/status", "/nowhere"):
        assert request(port, target, Host=f"evil.example:{port}") == refused, target
        assert request(port, target) == refused, f"{target} without a Host"
    assert handshake(port, Host=f"evil.example:{port}", Origin=f"http://evil.example:{port}") == (
        refused
    )
    # the names this machine's pages use
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}", "127.0.0.2"):
        assert request(port, "/static/main.js", Host=host)[0] == "HTTP/1.1 200 OK", host


def test_allow_host_and_the_status_port_share_the_check(
    cli: Callable[..., Process], robot: tuple[Process, str]
) -> None:
    gateway = cli(
        "serve", "vrpn://127.0.0.1:0", "--from", f"xrp://127.0.0.1:{robot[1]}",
        "--status-port", "0", "--allow-host", "lab-pc.local",
    )  # fmt: skip
    status = gateway.wait_for(r"status on (http://127\.0\.0\.1:\d+/status)").group(1)
    port = port_of(status)
    assert request(port, "/status", Host=f"evil.example:{port}") == (
        "HTTP/1.1 403 Forbidden",
        "forbidden: the Host header names another site (robowire --allow-host NAME)\n",
    )
    assert request(port, "/status", Host=f"lab-pc.local:{port}")[0] == "HTTP/1.1 200 OK"
    assert status_of(port, "status")["refused"] == 1


# -- the token ------------------------------------------------------------------------------


def test_control_needs_the_printed_token(
    controlled: tuple[Process, str], robot: tuple[Process, str]
) -> None:
    _, url = controlled
    source = f"xrp@127.0.0.1:{robot[1]}"
    page, token = url.split("?token=")
    ws = page.replace("http://", "ws://") + "ws"
    for attempt in (ws, f"{ws}?token=", f"{ws}?token=not-{token}", f"{ws}?token={token}x"):
        hello, final = command(attempt, source, "enable")
        assert hello["control"] is False and hello["commands"] == {}, attempt
        assert hello["token_needed"] is True
        assert (final["state"], final["message"]) == ("refused", NEEDS_TOKEN), attempt
    hello, final = command(f"{ws}?token={token}", source, "enable")
    assert hello["control"] is True and hello["token_needed"] is False
    assert [c["name"] for c in hello["commands"][source]] == ["drive", "enable", "disable", "stop"]
    assert final["state"] == "ok"


def test_a_token_that_was_set_guards_viewing_too(
    cli: Callable[..., Process], robot: tuple[Process, str]
) -> None:
    viewer = cli(
        "serve", "http://127.0.0.1:0", "--from", f"xrp://127.0.0.1:{robot[1]}",
        "--status-port", "0", env={"ROBOWIRE_TOKEN": TOKEN},
    )  # fmt: skip
    url = viewer.wait_for(r"listening on (http://127\.0\.0\.1:\d+/\?token=\S+);").group(1)
    assert url.endswith(f"?token={TOKEN}")
    port = port_of(url)
    status_port = port_of(viewer.wait_for(r"status on (http://\S+)").group(1))
    host = f"127.0.0.1:{port}"
    refused = (
        "HTTP/1.1 403 Forbidden",
        "forbidden: the token printed at start is needed (?token=...)\n",
    )
    assert request(port, "/status", Host=host) == refused
    assert request(port, "/status?token=wrong", Host=host) == refused
    assert handshake(port, Host=host, Origin=f"http://{host}") == refused
    assert handshake(port, "/ws?token=wrong", Host=host, Origin=f"http://{host}") == refused
    assert request(status_port, "/status", Host=f"127.0.0.1:{status_port}") == refused
    # the page's own files carry no data: open; the data with the token
    assert request(port, "/", Host=host)[0] == "HTTP/1.1 200 OK"
    assert request(port, "/static/main.js", Host=host)[0] == "HTTP/1.1 200 OK"
    assert status_of(port, "sink", f"/status?token={TOKEN}")["refused"] == 4
    assert handshake(port, f"/ws?token={TOKEN}", Host=host, Origin=f"http://{host}")[0].startswith(
        "HTTP/1.1 101"
    )
    # `robowire status` takes the token from the environment, like the gateway
    run = subprocess.run(
        [*ROBOWIRE, "status", f"127.0.0.1:{port}", "--json"],
        env={**ENV, "ROBOWIRE_TOKEN": TOKEN}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0 and json.loads(run.stdout)["type"] == "status", run.stderr
    env = {k: v for k, v in ENV.items() if k != "ROBOWIRE_TOKEN"}
    run = subprocess.run(
        [*ROBOWIRE, "status", f"127.0.0.1:{port}"], env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert run.returncode == 1
    assert run.stderr.strip() == (
        f"robowire: error: http://127.0.0.1:{port}/status: 403 Forbidden "
        "(the token printed at start is needed (?token=...))"
    )


def test_the_options_are_for_http_endpoints_only() -> None:
    run = subprocess.run(
        [*ROBOWIRE, "serve", "foxglove://127.0.0.1:0", "--from", "xrp://127.0.0.1:1",
         "--token", TOKEN],
        env=ENV, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 1
    assert run.stderr.strip() == (
        "robowire: error: --allow-host, --allow-origin, --token: only for the web viewer and "
        "--status-port"
    )


def test_a_foxglove_sink_lets_any_page_read_but_offers_nothing_to_send(
    cli: Callable[..., Process], robot: tuple[Process, str]
) -> None:
    """What docs/security.md says of `serve foxglove://`: the SDK's server checks neither
    Host nor Origin (the Foxglove app is itself a page of another site), so a page can read
    the world; robowire offers it no capability that sends (no publish, services, params)."""
    sink = cli("serve", "foxglove://127.0.0.1:0", "--from", f"xrp://127.0.0.1:{robot[1]}")
    port = int(sink.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1))
    with connect(
        f"ws://127.0.0.1:{port}", origin=Origin(EVIL), subprotocols=[Subprotocol("foxglove.sdk.v1")]
    ) as ws:
        info = json.loads(ws.recv(timeout=20))
    assert info["op"] == "serverInfo" and info["capabilities"] == []
