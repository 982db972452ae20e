"""The commands as separate processes on real loopback sockets, on the event loop the CLI
really uses (uvloop): sim -> listen --json, serve, decode, replay, and the demo."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROBOWIRE = [sys.executable, "-m", "robowire.cli"]
DEMO_REC = Path(__file__).parents[1] / "data" / "spyglass" / "recording-2009-05-28.rec"
CAPTURES = Path(__file__).parents[1] / "data" / "captures"


def robowire(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ROBOWIRE, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "160"},
    )


@contextmanager
def server(*args: str) -> Iterator[str]:
    """Start `robowire sim|serve ... --port 0`-style servers; yields "host:port" it printed."""
    process = subprocess.Popen([*ROBOWIRE, *args], stderr=subprocess.PIPE, text=True)
    rest: list[str] = []
    reader: threading.Thread | None = None
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"on (127\.0\.0\.1:\d+); Ctrl-C ends it", line)
        assert found, line
        # keep reading its log, or a full pipe (64 KiB of warnings) would block the server
        reader = threading.Thread(target=lambda: rest.extend(process.stderr), daemon=True)
        reader.start()
        yield found.group(1)
    finally:
        process.send_signal(signal.SIGINT)
        try:  # Ctrl-C is a clean end: the shell's 130, no traceback
            assert process.wait(10) == 130
            if reader is not None:
                reader.join(5)
            assert "Traceback" not in "".join(rest)
        finally:
            if process.poll() is None:
                process.kill()


@pytest.mark.parametrize(
    "protocol, url",
    [
        ("spyglass", "spyglass://{}"),
        ("vrpn", "vrpn://Tracker0@{}"),
        ("vrpn", "vrpn+tcp://Tracker0@{}"),
    ],
)
def test_sim_then_listen_json(protocol, url):
    with server("sim", protocol, "--port", "0", "--count", "4", "--rate", "20") as address:
        run = robowire("listen", url.format(address), "--json", "--count", "8")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(lines) == 8
    for line in lines:
        assert line["source"] == f"{protocol}@{address}"
        assert len(line["position"]) == 3 and line["receive_time"] > 1.7e9


def test_serve_offers_one_protocol_to_another():
    with (
        server("sim", "spyglass", "--port", "0", "--count", "3", "--rate", "20") as sim,
        server("serve", "vrpn+tcp://127.0.0.1:0", "--from", f"spyglass://{sim}") as vrpn,
    ):
        run = robowire("listen", f"vrpn+tcp://1,2,3@{vrpn}", "--json", "--count", "6")
    assert run.returncode == 0, run.stderr
    # each node is a tracker (pose) and an analog device (its data values) of the same name
    devices = {json.loads(line)["device"] for line in run.stdout.splitlines()}
    assert devices and devices <= {"1/0", "2/0", "3/0", "1", "2", "3"}


@pytest.mark.parametrize("capture", ["vrpn:vrpn/tcp_tracker.pcap", "xrp:xrp/capture_normal.txt"])
def test_listen_to_a_capture_file(capture):
    protocol, _, path = capture.partition(":")
    run = robowire("listen", f"{protocol}:{CAPTURES / path}", "--json", "--count", "3")
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(lines) == 3 and all(x["source"] == f"{protocol}:{CAPTURES / path}" for x in lines)


def test_decode_reads_the_original_spyglass_recording_without_errors():
    run = robowire("decode", "spyglass", str(DEMO_REC))
    assert run.returncode == 0
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(lines) == 3773 and not any("error" in line for line in lines)
    assert "3773 messages, 0 errors" in run.stderr


def test_replay_of_a_rec_file_ends_by_itself():
    run = robowire("replay", str(DEMO_REC), "--json", "--speed", "100000")
    assert run.returncode == 0, run.stderr
    sources = {json.loads(line)["source"] for line in run.stdout.splitlines()}
    assert sources == {f"spyglass:{DEMO_REC}"}


def test_demo_shows_every_landed_simulator():
    run = robowire("demo", "--duration", "4", "--count", "3", "--viewer-port", "0")
    assert run.returncode == 0, run.stderr
    counts = dict(re.findall(r"^(\w+)@127\.0\.0\.1:\d+: (\d+) messages in", run.stdout, re.M))
    assert set(counts) == {"spyglass", "vrpn", "xrp", "ugcs", "vrsp"}, run.stdout
    assert all(int(n) > 0 for n in counts.values())
    ports = re.findall(r"^\w+@127\.0\.0\.1:(\d+): ", run.stdout, re.M)
    assert "0" not in ports  # a source bound to any free port is named after the one it got
    assert "Tracker0/0" in run.stdout and "sensor_node" in run.stdout


def test_replay_loop_starts_the_capture_again_with_the_same_reports():
    capture = f"vrpn:{CAPTURES / 'vrpn' / 'tcp_tracker.pcap'}"
    once = robowire("replay", capture, "--speed", "8", "--json")
    assert once.returncode == 0, once.stderr
    first = [json.loads(line) for line in once.stdout.splitlines()]
    # the capture spans 1.6 s: at speed 8 a pass takes 0.2 s, so 3 s holds several passes
    looped = robowire("replay", capture, "--speed", "8", "--json", "--loop", "--duration", "3")
    assert looped.returncode == 0, looped.stderr
    lines = [json.loads(line) for line in looped.stdout.splitlines()]
    n = len(first)
    assert n > 0 and len(lines) >= 2 * n

    def reports(rows: list[dict[str, object]]) -> dict[object, list[tuple[object, ...]]]:
        """Each device's reports in order. Across devices the order may differ between runs:
        reports that fall due in one wake-up of the paced reader are one world update,
        written grouped by device type, and what falls together depends on timing."""
        by_device: dict[object, list[tuple[object, ...]]] = {}
        for r in rows:
            by_device.setdefault(r["device"], []).append((r.get("position"), r.get("orientation")))
        return by_device

    assert reports(lines[:n]) == reports(first)
    assert reports(lines[n : 2 * n]) == reports(first)


def test_a_long_recording_says_its_count_and_rate_as_it_goes(tmp_path):
    output = tmp_path / "run.mcap"
    with server("sim", "vrpn", "--port", "0", "--count", "2", "--rate", "100") as address:
        run = robowire(
            "record", f"vrpn://Tracker0@{address}", "-o", str(output), "--duration", "5.6"
        )
    assert run.returncode == 0, run.stderr
    progress = re.search(r"^record: (\d+) messages so far \(([\d,]+)/s\)$", run.stderr, re.M)
    assert progress is not None, run.stderr
    count, rate = int(progress[1]), int(progress[2].replace(",", ""))
    assert count > 0 and rate > 0
    assert abs(rate - count / 5) <= 1  # the first line: all of it came in its first 5 s


def test_a_recording_killed_with_sigkill_still_replays_what_it_wrote(tmp_path):
    output = tmp_path / "killed.mcap"
    with server("sim", "vrpn", "--port", "0", "--count", "2", "--rate", "100") as address:
        recorder = subprocess.Popen(
            [*ROBOWIRE, "record", f"vrpn://Tracker0@{address}", "-o", str(output)],
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 20
            while not (output.exists() and output.stat().st_size >= 20_000):
                assert time.monotonic() < deadline, "the recorder wrote nothing"
                time.sleep(0.1)
        finally:
            recorder.send_signal(signal.SIGKILL)
            recorder.wait()
    run = robowire("replay", str(output), "--speed", "100", "--json")
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(lines) > 10
    assert {line["device"] for line in lines} >= {"Tracker0/0", "Tracker0/1"}
    assert run.stderr.count("\n") <= 1  # at most one line: where the cut end is
