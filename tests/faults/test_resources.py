"""The gateway's own resources: a recording whose file cannot grow (RLIMIT_FSIZE, as a full
disk) ends with one clear error line, no traceback, and a file that replays up to its last
complete chunk (read by the `mcap` library too); a server short of descriptors
(RLIMIT_NOFILE) keeps its clients and serves again once the crowd has gone."""

from __future__ import annotations

import asyncio
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcap.exceptions import McapError
from mcap.records import Message
from mcap.stream_reader import StreamReader

from robowire.gateway import Gateway, open_sim
from robowire.service import SimOptions
from support import SRC

pytestmark = pytest.mark.timeout(90)
LIMIT = 60 << 10  # bytes the recording may grow to


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


async def test_a_recording_that_cannot_grow_ends_with_one_error_and_replays(
    tmp_path: Path,
) -> None:
    sim = open_sim("spyglass", SimOptions(port=0, count=50, rate=5))
    gateway = Gateway().add(sim)
    run = asyncio.create_task(gateway.run())
    output = tmp_path / "run.mcap"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    try:
        await asyncio.wait_for(sim.ready.wait(), 5)
        assert sim.address is not None
        record = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "robowire.cli", "record",
            f"spyglass://127.0.0.1:{sim.address[1]}", "-o", str(output), "--duration", "60",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            preexec_fn=_limit, env=env,
        )  # fmt: skip
        _, err = await asyncio.wait_for(record.communicate(), 60)  # long before its duration
    finally:
        gateway.stop()
        await asyncio.gather(run, return_exceptions=True)
    said = err.decode()
    errors = [line for line in said.splitlines() if "cannot write" in line]
    assert record.returncode != 0
    assert len(errors) == 1 and "File too large" in errors[0], said
    assert "Traceback" not in said and "written to" not in said, said
    assert output.stat().st_size <= LIMIT

    read = 0  # a third-party reader: the messages of the complete chunks are all there
    with output.open("rb") as stream:
        try:
            for record_ in StreamReader(stream, skip_magic=False).records:
                read += isinstance(record_, Message)
        except (McapError, EOFError, ValueError, struct.error):
            pass  # the cut at the end

    replay = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "robowire.cli", "listen", str(output), "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await asyncio.wait_for(replay.communicate(), 60)
    messages = len(out.splitlines())
    assert replay.returncode == 0, err.decode()
    assert messages > 0 and "recording cut" in err.decode()
    assert f"recording cut after {read} messages" in err.decode()  # as many as mcap read


def _few_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


NOFILE = 64  # descriptors: the server's own need and a few clients


def test_a_server_out_of_descriptors_keeps_its_clients_and_serves_again() -> None:
    """RLIMIT_NOFILE near the server's need: more clients than it can take come; the client
    it had keeps receiving, the server does not fall over, and once they go it serves new
    ones."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    server = subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", "sim", "spyglass", "--port", "0", "--count", "5"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=_few_descriptors, env=env,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        port = int(re.search(r"127\.0\.0\.1:(\d+)", server.stderr.readline()).group(1))  # type: ignore[union-attr]
        healthy = socket.create_connection(("127.0.0.1", port), timeout=5)
        assert healthy.recv(4096)
        crowd = [socket.create_connection(("127.0.0.1", port)) for _ in range(2 * NOFILE)]
        time.sleep(1.0)
        healthy.settimeout(5)
        received = sum(len(healthy.recv(65536)) for _ in range(3))  # it still gets packets
        assert received > 0
        for sock in crowd:
            sock.close()
        time.sleep(1.0)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as new:
            new.settimeout(5)
            assert new.recv(4096)  # served again
        healthy.close()
        assert server.poll() is None  # still running
    finally:
        server.terminate()
        _, err = server.communicate(timeout=10)
    assert "Traceback" not in err, err[-2000:]
