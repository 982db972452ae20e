"""What many tests need: free loopback ports, waiting for a condition, open descriptors.

Importable as `support` from every test (tests/conftest.py puts this folder on the path)."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable


async def until(condition: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    """Poll `condition` every 20 ms; AssertionError naming `what` if it does not hold within
    `seconds` (generous: a loaded 2-core machine is slow, a working one is quick)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not condition():
        if loop.time() > end:
            raise AssertionError(f"not within {seconds:g} s: {what}")
        await asyncio.sleep(0.02)


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port free for both TCP and UDP on 127.0.0.1 (a VRPN server binds both)."""
    other = socket.SOCK_DGRAM if kind == socket.SOCK_STREAM else socket.SOCK_STREAM
    while True:
        with socket.socket(socket.AF_INET, kind) as first:
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
            with socket.socket(socket.AF_INET, other) as second:
                try:
                    second.bind(("127.0.0.1", port))
                except OSError:
                    continue
        return port


def free_udp_port() -> int:
    """A UDP port free on 127.0.0.1 (TCP too)."""
    return free_port(socket.SOCK_DGRAM)


def open_fds() -> int:
    """This process's open file descriptors (leaks show as growth)."""
    return len(os.listdir("/proc/self/fd"))
