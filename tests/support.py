"""What many tests need: free loopback ports, waiting for a condition, open descriptors, a
robowire CLI process whose output is read as it comes.

Importable as `support` from every test (tests/conftest.py puts this folder on the path)."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

SRC = Path(__file__).resolve().parents[1] / "src"
CAPTURES = Path(__file__).resolve().parent / "data" / "captures"


def sample_capture(name: str) -> Path:
    """The protocol's pcap in `CAPTURES`/NAME/ (tests/data/captures; the roles test, the
    fuzz targets and the Wireshark test read it): a missing one fails, never skips."""
    found = sorted((CAPTURES / name).glob("*.pcap"))
    assert found, f"no pcap capture of {name} in {CAPTURES / name}"
    return found[0]


async def until(
    condition: Callable[[], bool], what: str | Callable[[], str], seconds: float = 60.0
) -> None:
    """Poll `condition` every 20 ms; AssertionError naming `what` (or what it returns then: the
    state that explains a failure) if it does not hold within `seconds` (generous: a loaded
    2-core machine is slow, a working one is quick)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not condition():
        if loop.time() > end:
            said = what if isinstance(what, str) else what()
            raise AssertionError(f"not within {seconds:g} s: {said}")
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


class Process:
    """A robowire CLI process whose stderr is read by a thread (so its pipe never fills)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        path = os.environ.get("PYTHONPATH", "")
        env = {**os.environ, **(env or {}), "PYTHONPATH": f"{SRC}{os.pathsep}{path}"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "robowire.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self.changed:
                self.lines.append(line.rstrip())
                self.changed.notify_all()

    def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        """The first output line matching `pattern` (waits for it)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for line in self.lines:
                    if m := re.search(pattern, line):
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise AssertionError(f"no {pattern!r} in the output: {self.lines}")
                self.changed.wait(min(left, 0.2))

    def __enter__(self) -> Process:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def mcap_schema_class(schema: Any) -> Any:
    """The protobuf class of an MCAP schema, built from the schema's own FileDescriptorSet (as
    Foxglove's tools read a recording: not from robowire's own classes)."""
    files = descriptor_pb2.FileDescriptorSet.FromString(schema.data)
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema.name))
