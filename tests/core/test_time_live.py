"""`?time=` as a user runs it: a VRPN simulator whose clock is two minutes ahead, listened to
as separate processes on loopback; and a capture file."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from robowire.timebase import TIME_MODES

ROBOWIRE = [sys.executable, "-m", "robowire.cli"]
VRPN = Path(__file__).parents[1] / "data" / "captures" / "vrpn"
DELAY = 10.0  # seconds a message may take from the sender's stamp to our read (a loaded
# machine took 0.65 s; the shifts tested are 120 s)
STAMP = 0.001  # a stamp may be that much after its read (SpyGlass stamps to the millisecond)


def delayed(line: dict[str, Any], shift: float = 0.0) -> bool:
    """Whether `line`'s message was stamped before it was read by a delay (never negative,
    at most `DELAY`), once the sender's clock, `shift` seconds ahead of ours, is taken off."""
    return -STAMP <= shift - (line["source_time"] - line["receive_time"]) <= DELAY


def robowire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROBOWIRE, *args], capture_output=True, text=True, timeout=60)


def side_by_side(*commands: tuple[str, ...]) -> list[subprocess.CompletedProcess[str]]:
    """`robowire` commands run at once (one after the other, four CLI starts took more than
    the test's two minutes on a loaded machine)."""
    started = [
        subprocess.Popen(
            [*ROBOWIRE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for args in commands
    ]
    runs = []
    try:
        for process, args in zip(started, commands, strict=True):
            out, err = process.communicate(timeout=60)
            runs.append(subprocess.CompletedProcess(args, process.returncode, out, err))
    finally:
        for process in started:
            process.kill()
            process.wait()
    return runs


@contextmanager
def simulator(*args: str) -> Iterator[str]:
    """`robowire sim ... --port 0`; yields the "host:port" it printed."""
    process = subprocess.Popen([*ROBOWIRE, "sim", *args], stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"on (127\.0\.0\.1:\d+); Ctrl-C ends it", line)
        assert found, line
        stderr = process.stderr  # keep reading its log: a full pipe would block it
        threading.Thread(target=stderr.read, daemon=True).start()
        yield found.group(1)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(10)
        finally:
            if process.poll() is None:
                process.kill()


def lines(run: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


@pytest.fixture(scope="module")
def shifted() -> Iterator[str]:
    """A VRPN simulator stamping every message 120 s ahead of our clock."""
    with simulator("vrpn", "--port", "0", "--rate", "50", "--set", "clock_offset=120") as at:
        yield at


def test_sender_shows_the_shift_receive_and_corrected_line_up(shifted: str) -> None:
    url = f"vrpn://Tracker0@{shifted}"
    runs = side_by_side(
        *[("listen", u, "--json", "--count", "10") for u in (f"{url}?time=sender",
          f"{url}?time=receive", f"{url}?time=corrected", url)]
    )  # fmt: skip
    sender, receive, corrected, default = map(lines, runs)
    for line in sender + default:  # VRPN stamps every message: sender is the default
        assert delayed(line, 120.0), line
    for line in receive:
        assert line["source_time"] == line["receive_time"]
    for line in corrected:  # stamps on our clock: behind their read by the delay alone
        assert delayed(line), line
    assert len(sender) == len(receive) == len(corrected) == 10


def test_a_bad_time_is_one_error_line_naming_the_option(shifted: str) -> None:
    for url in (
        f"vrpn://Tracker0@{shifted}?time=local",
        f"vrpn:{VRPN / 'tcp_tracker.pcap'}?time=utc",
    ):
        run = robowire("listen", url, "--json", "--count", "1")
        assert run.returncode != 0 and run.stdout == ""
        assert run.stderr.count("\n") == 1, run.stderr
        assert "time must be sender, receive or corrected" in run.stderr


def test_a_capture_file_takes_the_option_too() -> None:
    capture = VRPN / "tcp_tracker.pcap"
    decoded = (VRPN / "tcp_tracker.decoded.txt").read_text()
    stamps = {round(float(t), 6) for t in re.findall(r" t=(\d+\.\d+)", decoded)}
    assert stamps  # the capture's header times, from its reference decode
    sender, receive, corrected = map(
        lines,
        side_by_side(*[("listen", f"vrpn:{capture}?time={m}", "--json") for m in TIME_MODES]),
    )
    timed = [line for line in sender if "source_time" in line]
    assert timed and all(round(line["source_time"], 6) in stamps for line in timed)
    assert all(line["source_time"] == line["receive_time"] for line in receive)
    assert len(sender) == len(receive) == len(corrected)
    # read as fast as it decodes, a capture's stamps (a day off our clock) become about the
    # time it was read (a message stamped 0, which VRPN senders do, stays that far off)
    assert any(line["receive_time"] - line["source_time"] > 86400 for line in timed)
    for was, now in zip(sender, corrected, strict=True):
        if was.get("source_time", 0) > 1e9:
            assert abs(now["source_time"] - now["receive_time"]) < 60.0


def test_the_sim_setting_must_be_a_number() -> None:
    run = robowire("sim", "vrpn", "--port", "0", "--set", "clock_offset=soon", "--duration", "1")
    assert run.returncode != 0 and run.stderr.count("\n") == 1
    assert "clock_offset" in run.stderr


def test_a_spyglass_sender_two_minutes_behind_lines_up_when_corrected() -> None:
    settings = ("--port", "0", "--count", "5", "--rate", "20", "--set", "clock_offset=-120")
    with simulator("spyglass", *settings) as at:
        sender, corrected = map(
            lines,
            side_by_side(*[("listen", f"spyglass://{at}{o}", "--json", "--count", "10")
                           for o in ("", "?time=corrected")]),
        )  # fmt: skip
    stamped = [line for line in sender if "source_time" in line]
    assert stamped  # SpyGlass stamps its packets (to the millisecond)
    for line in stamped:
        assert delayed(line, -120.0), line
    for line in corrected:
        if "source_time" in line:
            assert delayed(line), line
