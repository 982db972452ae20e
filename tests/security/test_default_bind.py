"""Every server robowire runs binds 127.0.0.1 unless the user names another address.

Each case runs the CLI as a process with a URL (or `sim --port 0`) that names no host, waits
until it says it is up, then reads the kernel's table of the process's own sockets
(/proc/PID/fd -> /proc/net/{tcp,udp}[6]): every listening TCP socket and every bound UDP
socket must be on a loopback address. The process's word for its address is not trusted.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support import free_port

ROBOWIRE = [sys.executable, "-m", "robowire.cli"]
REC = Path(__file__).parents[1] / "data" / "spyglass" / "recording-2009-05-28.rec"
LIVE = ["--from", "vrsp://:0"]  # a source that waits (a UDP receiver, itself checked)
TCP_LISTEN = "0A"


def _ip(hex_ip: str) -> str:
    raw = bytes.fromhex(hex_ip)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


Sock = tuple[str, str, int]


def bound_sockets(pid: int) -> list[Sock]:
    """(kind, local ip, port) of the process's listening TCP and bound UDP sockets."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for kind in ("tcp", "tcp6", "udp", "udp6"):
        for line in Path(f"/proc/net/{kind}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if inode not in inodes or (kind.startswith("tcp") and state != TCP_LISTEN):
                continue
            hex_ip, hex_port = local.split(":")
            found.append((kind, _ip(hex_ip), int(hex_port, 16)))
    return found


def sockets_once_up(args: list[str], at_least: int, timeout: float = 60) -> list[Sock]:
    """Run the CLI until the process has `at_least` bound sockets (or ended, or timed out),
    then a moment more for the rest to bind; its bound sockets."""
    process = subprocess.Popen(
        [*ROBOWIRE, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    said: list[str] = []
    assert process.stderr is not None
    stderr = process.stderr
    threading.Thread(target=lambda: said.extend(stderr), daemon=True).start()
    try:
        deadline = time.monotonic() + timeout
        while len(bound_sockets(process.pid)) < at_least and time.monotonic() < deadline:
            assert process.poll() is None, "".join(said)
            time.sleep(0.1)
        time.sleep(0.5)
        assert process.poll() is None, "".join(said)
        return bound_sockets(process.pid)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


ZENOH = free_port()
CASES = {
    "sim spyglass": (["sim", "spyglass", "--port", "0"], 1),
    "sim vrpn": (["sim", "vrpn", "--port", "0"], 2),
    "sim xrp": (["sim", "xrp", "--port", "0"], 1),
    "sim ugcs": (["sim", "ugcs", "--port", "0"], 1),
    "sim vrsp (a sender)": (["sim", "vrsp", "--port", "0"], 1),
    "listen vrsp": (["listen", "vrsp://:0", "--json"], 1),
    "listen ugcs (reverse mode)": (["listen", "ugcs://:0?mode=listen", "--json"], 1),
    "listen zenoh (listen mode)": (["listen", f"zenoh://:{free_port()}?mode=listen"], 1),
    "replay to spyglass": (["replay", str(REC), "--loop", "--quiet", "--to", "spyglass://:0"], 1),
    "serve spyglass": (["serve", "spyglass://:0", *LIVE], 2),
    "serve vrpn": (["serve", "vrpn://:0", *LIVE], 3),
    "serve xrp": (["serve", "xrp://:0?device=x", *LIVE], 2),
    "serve ugcs": (["serve", "ugcs://:0", *LIVE], 2),
    "serve foxglove": (["serve", "foxglove://:0", *LIVE], 2),
    "serve http (viewer)": (["serve", "http://:0", *LIVE], 2),
    "serve zenoh": (["serve", f"zenoh://:{ZENOH}", *LIVE], 2),
    "demo": (["demo", "--viewer-port", "0"], 5),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_servers_bind_loopback_unless_told(case: str) -> None:
    args, at_least = CASES[case]
    sockets = sockets_once_up(args, at_least)
    assert len(sockets) >= at_least, sockets
    for kind, ip, port in sockets:
        assert ipaddress.ip_address(ip).is_loopback, f"{case}: {kind} socket on {ip}:{port}"


def test_the_check_sees_a_socket_on_every_interface() -> None:
    """The kernel table reading above is not vacuous: a socket on 0.0.0.0 shows as such."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        assert ("tcp", "0.0.0.0", port) in bound_sockets(os.getpid())
