"""The gateway's own resources: a recording whose file cannot grow (RLIMIT_FSIZE, as a full
disk) ends with one clear error line, no traceback, and a file that replays up to its last
complete chunk (read by the `mcap` library too), for every target `record` has: MCAP, a VRPN
log (played by the mainline `vrpn_print_devices`), a SpyGlass `.rec` and a ROS 2 bag, each
cut at its last whole record; a server short of descriptors
(RLIMIT_NOFILE) keeps its clients and serves again once the crowd has gone; a gateway (two
sources, a sink, a status port) with a limit just above its need says so in one line, keeps its
client and sources, and serves again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from mcap.exceptions import EndOfFile
from mcap.records import Channel, Message, Schema
from mcap.stream_reader import StreamReader
from mcap_ros2.decoder import DecoderFactory as Ros2DecoderFactory

from mainline import PRINT_DEVICES, start_print_devices, stop_print_devices
from robowire.gateway import Gateway, open_sim
from robowire.protocols.spyglass import rec
from robowire.protocols.vrpn.dissect import decode_log
from robowire.service import SimOptions
from robowire.transport.descriptors import DescriptorWatch
from support import SRC, Process, free_udp_port

pytestmark = pytest.mark.timeout(90)
LIMIT = 60 << 10  # bytes the recording may grow to


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


async def _record_until_full(
    protocol: str, options: SimOptions, url: str, output: Path, *more: str
) -> str:
    """`robowire record URL -o OUTPUT` of a `protocol` sim, its file limited to `LIMIT`
    bytes: what it said on stderr, once checked (one error line, exit 1, no traceback, no
    "written to"; long before its duration)."""
    sim = open_sim(protocol, options)
    gateway = Gateway().add(sim)
    run = asyncio.create_task(gateway.run())
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    try:
        await asyncio.wait_for(sim.ready.wait(), 5)
        assert sim.address is not None
        record = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "robowire.cli", "record", url.format(port=sim.address[1]),
            "-o", str(output), "--duration", "60", *more,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            preexec_fn=_limit, env=env,
        )  # fmt: skip
        _, err = await asyncio.wait_for(record.communicate(), 60)  # long before its duration
    finally:
        gateway.stop()
        await asyncio.gather(run, return_exceptions=True)
    said = err.decode()
    errors = [line for line in said.splitlines() if "cannot write" in line]
    assert record.returncode == 1, said
    assert len(errors) == 1 and "File too large" in errors[0], said
    assert "Traceback" not in said and "written to" not in said, said
    return said


async def test_a_recording_that_cannot_grow_ends_with_one_error_and_replays(
    tmp_path: Path,
) -> None:
    output = tmp_path / "run.mcap"
    options = SimOptions(port=0, count=50, rate=5)
    await _record_until_full("spyglass", options, "spyglass://127.0.0.1:{port}", output)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    assert output.stat().st_size <= LIMIT

    read = 0  # a third-party reader: the messages of the complete chunks are all there, and
    with output.open("rb") as stream, contextlib.suppress(EndOfFile):  # nothing after them:
        for record_ in StreamReader(stream, skip_magic=False).records:  # it ends at a record
            read += isinstance(record_, Message)

    replay = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "robowire.cli", "listen", str(output), "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await asyncio.wait_for(replay.communicate(), 60)
    messages = len(out.splitlines())
    assert replay.returncode == 0, err.decode()
    assert messages > 0 and "recording cut" in err.decode()
    assert f"recording cut after {read} messages" in err.decode()  # as many as mcap read


async def test_a_vrpn_log_that_cannot_grow_ends_with_one_error_and_the_mainline_plays_it(
    tmp_path: Path,
) -> None:
    """`record -o run.vrpn` on a full disk: one error line, and the log ends at its last
    whole entry, so the mainline `vrpn_print_devices` plays every pose in it (was: "stopped:
    OSError", then "N messages written to run.vrpn", and the log cut mid-entry)."""
    if not PRINT_DEVICES.is_file():
        pytest.fail(f"no mainline vrpn_print_devices at {PRINT_DEVICES}")
    output = tmp_path / "run.vrpn"
    options = SimOptions(port=0, count=5, rate=50)
    await _record_until_full("vrpn", options, "vrpn://Tracker0@127.0.0.1:{port}", output)
    entries = list(decode_log(str(output)))
    assert not any("error" in e for e in entries), entries[-1]  # whole entries to the end
    poses = [e for e in entries if e.get("type") == "vrpn_Tracker Pos_Quat"]
    assert len(poses) > 100 and output.stat().st_size <= LIMIT
    played = [e["time"] for e in entries if e.get("time") is not None]
    client = start_print_devices(f"Tracker0@file://{output}")  # a log plays at its own pace
    await asyncio.sleep(max(played) - min(played) + 2.0)
    out = stop_print_devices(client)
    printed = sum(line.startswith("     pos (") for line in out.splitlines())
    print(f"\nrun.vrpn cut at {output.stat().st_size} bytes: vrpn_print_devices printed {printed}"
          f" of its {len(poses)} poses")  # fmt: skip
    assert printed == len(poses), out


def _rec_records(data: bytes) -> int:
    """The records of a `.rec` file as the fact sheet gives the format (SpyGlass's
    `ComplexPacketReader`): a byte N, then N bytes of packet, whose own big-endian uint16
    length is N - 2 and version 2. Not robowire's reader: how many, to the file's very end."""
    offset = count = 0
    while offset < len(data):
        size = data[offset]
        packet = data[offset + 1 : offset + 1 + size]
        assert len(packet) == size, f"a record cut at byte {offset} of {len(data)}"
        assert int.from_bytes(packet[:2], "big") == size - 2 and packet[2] == 2, offset
        offset += 1 + size
        count += 1
    return count


async def test_a_rec_recording_that_cannot_grow_ends_with_one_error_at_a_whole_record(
    tmp_path: Path,
) -> None:
    """`record -o run.rec` on a full disk: one error line, and the file ends at its last
    whole record (was: "stopped: OSError", "N messages written", a record cut in two). No
    SpyGlass reader but robowire's runs here (SpyGlass is a Java/SWT program): the format's
    own walk (`_rec_records`) reads it to the end, and robowire's reader reads as many."""
    output = tmp_path / "run.rec"
    options = SimOptions(port=0, count=50, rate=20)
    await _record_until_full("spyglass", options, "spyglass://127.0.0.1:{port}", output)
    data = output.read_bytes()
    assert 0 < len(data) <= LIMIT
    records = _rec_records(data)
    print(f"\nrun.rec cut at {len(data)} bytes: {records} whole records to its end")
    assert records > 100
    assert len(list(rec.read_rec(output))) == records


async def test_a_ros2_bag_that_cannot_grow_ends_with_one_error_at_a_whole_record(
    tmp_path: Path,
) -> None:
    """`record -o bag --format rosbag2` on a full disk: one error line (was: "stopped:
    OSError", "N messages written"), and its MCAP ends at a whole record: the `mcap` library
    reads every message to the cut and mcap-ros2-support decodes each. (rosbags' reader, like
    a killed bag's, wants the footer the full disk had no room for; `replay` plays it.)"""
    bag = tmp_path / "bag"
    options = SimOptions(port=0, count=10, rate=5)
    url = "spyglass://127.0.0.1:{port}"
    await _record_until_full("spyglass", options, url, bag, "--format", "rosbag2")
    storage = bag / "bag_0.mcap"
    assert storage.stat().st_size <= LIMIT
    decoder = Ros2DecoderFactory()
    schemas: dict[int, Schema] = {}
    channels: dict[int, Channel] = {}
    decoded = 0
    with storage.open("rb") as stream:
        try:
            for record_ in StreamReader(stream, skip_magic=False).records:
                if isinstance(record_, Schema):
                    schemas[record_.id] = record_
                elif isinstance(record_, Channel):
                    channels[record_.id] = record_
                elif isinstance(record_, Message):
                    channel = channels[record_.channel_id]
                    decode = decoder.decoder_for(
                        channel.message_encoding, schemas[channel.schema_id]
                    )
                    assert decode is not None
                    decode(record_.data)
                    decoded += 1
        except EndOfFile:
            pass  # at a record's end: no footer
    print(f"\nbag_0.mcap cut at {storage.stat().st_size} bytes: {decoded} messages decoded")
    assert decoded > 50  # (the chunks of 1 s before the file was full)


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


HEADROOM = 4  # descriptors the gateway may open beyond what it has once running
CROWD = 40  # clients that come at once, beyond it


def test_a_gateway_out_of_descriptors_says_so_once_keeps_serving_and_serves_again() -> None:
    """`robowire serve spyglass://` from a SpyGlass and a VRSP simulator, with a status port
    and one client, has its RLIMIT_NOFILE lowered to HEADROOM above the descriptors it holds
    (prlimit); CROWD clients come and stay. It says so in one line (not one per connection,
    nor one a second), its client keeps receiving, its sources stay connected and receiving,
    and once the crowd has gone it says it is serving again and serves new clients."""
    vrsp = free_udp_port()
    spyglass = Process("sim", "spyglass", "--port", "0", "--count", "5")
    port = spyglass.wait_for(r"127\.0\.0\.1:(\d+)").group(1)
    sender = Process("sim", "vrsp", "--drones", "5", "--to", f"127.0.0.1:{vrsp}")
    gateway = Process(
        "serve", "spyglass://127.0.0.1:0", "--from", f"spyglass://127.0.0.1:{port}",
        "--from", f"vrsp://127.0.0.1:{vrsp}", "--status-port", "0",
    )  # fmt: skip
    crowd: list[socket.socket] = []
    try:
        status = gateway.wait_for(r"status on (http://127\.0\.0\.1:\d+)/status").group(1)
        sink = int(gateway.wait_for(r"listening on 127\.0\.0\.1:(\d+)").group(1))
        healthy = socket.create_connection(("127.0.0.1", sink), timeout=5)
        assert healthy.recv(4096)
        end = time.monotonic() + 30.0
        before = _sources(status)
        while not all(s["messages"] > 0 for s in before.values()):
            assert time.monotonic() < end, before  # (both simulators send within seconds)
            time.sleep(0.2)
            before = _sources(status)
        time.sleep(0.5)
        held = len(os.listdir(f"/proc/{gateway.proc.pid}/fd"))
        limit = held + HEADROOM
        resource.prlimit(gateway.proc.pid, resource.RLIMIT_NOFILE, (limit, limit))
        crowd = [socket.create_connection(("127.0.0.1", sink), timeout=5) for _ in range(CROWD)]
        time.sleep(3.0)  # three of the gateway's counts
        received, end = 0, time.monotonic() + 2.0
        while time.monotonic() < end:  # its client still gets the world's packets
            received += len(healthy.recv(65536))
        assert received > 0
        for sock in crowd:
            sock.close()
        gateway.wait_for(r"file descriptors free again", 10.0)
        with socket.create_connection(("127.0.0.1", sink), timeout=5) as new:
            new.settimeout(5)
            assert new.recv(4096)  # served again
        after = _sources(status)
        for name, was in before.items():  # the sources went on all along, on one connection
            now = after[name]
            assert now["state"] == "connected" and now["reconnected"] == 0, now
            assert now["messages"] > was["messages"] + 10, (was, now)
        healthy.close()
        assert gateway.proc.poll() is None  # still running
    finally:
        for sock in crowd:
            sock.close()
        for process in (gateway, sender, spyglass):
            process.stop()
    said = [line for line in gateway.lines if "descriptors" in line]
    print(f"\ngateway at RLIMIT_NOFILE {limit} ({held} held) with {CROWD} more clients: {said}")
    assert len(said) == 2, gateway.lines[-20:]
    assert said[0].startswith("robowire: out of file descriptors") and "ulimit -n" in said[0]
    assert said[1].startswith("robowire: file descriptors free again")
    assert not any("Traceback" in line for line in gateway.lines), gateway.lines[-40:]


def _sources(status: str) -> dict[str, dict[str, object]]:
    """The gateway's sources in its status, by name."""
    with urllib.request.urlopen(f"{status}/status", timeout=5) as reply:
        services = json.load(reply)["services"]
    return {s["name"]: s for s in services if s["role"] == "source"}


def test_running_out_of_descriptors_is_said_at_most_once_a_minute() -> None:
    """Sans I/O: out at the limit (less the spare libuv keeps), free again one below; a gateway
    that runs out again and again says it once a minute, and says "free" only after "out"."""
    watch = DescriptorWatch(limit=100)
    said = [watch.check(count, now) for now, count in enumerate([90, 98, 100, 99, 97, 96])]
    assert [line is not None for line in said] == [False, True, False, False, False, True]
    assert said[1] is not None and said[1].startswith("out of file descriptors (98 open")
    assert said[5] is not None and said[5].startswith("file descriptors free again (96 open")
    again = [watch.check(count, 10.0 + k) for k, count in enumerate([99, 90, 99, 90])]
    assert again == [None] * 4  # within the minute: nothing, out or free
    assert watch.check(99, 70.0) is not None  # a minute after the first: said again
