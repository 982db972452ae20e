"""`robowire listen|decode spyglass` as separate processes: stdin, cut and foreign files, typos."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from spyglass_strategies import DEMO, cut_recording

ROBOWIRE = [sys.executable, "-m", "robowire.cli"]


def robowire(*args: str, stdin: Path | None = None) -> subprocess.CompletedProcess[str]:
    with open(stdin or "/dev/null", "rb") as f:
        return subprocess.run(
            [*ROBOWIRE, *args], stdin=f, capture_output=True, text=True, timeout=60
        )


def test_listen_reads_a_recording_from_stdin() -> None:
    run = robowire("listen", "spyglass:-", "--json", "--count", "3", stdin=DEMO)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(lines) == 3 and all(x["source"] == "spyglass:-" for x in lines)
    assert {x["kind"] for x in lines} <= {"sensor_node", "object"}


def test_decode_reads_a_recording_from_stdin() -> None:
    run = robowire("decode", "spyglass", "-", stdin=DEMO)
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.splitlines()) == 3773


def test_decode_of_a_cut_recording_gives_the_good_lines_then_one_error(tmp_path: Path) -> None:
    path = cut_recording(tmp_path / "cut.rec", 1262)
    run = robowire("decode", "spyglass", str(path))
    assert run.returncode == 1
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(lines) == 1263
    assert not any("error" in line for line in lines[:-1])
    assert "cut off" in lines[-1]["error"] and lines[-1]["offset"] > 0
    assert "1262 messages, 1 errors" in run.stderr and "Traceback" not in run.stderr


def test_listen_to_random_bytes_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "random.bin"
    path.write_bytes(b"\xff" + random.Random(1).randbytes(4095))  # not a .rec, not a pcap
    run = robowire("listen", f"spyglass:{path}")
    assert run.returncode != 0
    assert run.stderr.count("\n") == 1, run.stderr
    assert "nothing in it decodes as spyglass" in run.stderr and "Traceback" not in run.stderr


def test_an_unknown_url_option_is_one_error_line() -> None:
    run = robowire("listen", "spyglass://127.0.0.1:1?scal=0.01")
    assert run.returncode != 0 and run.stdout == ""
    assert run.stderr.count("\n") == 1, run.stderr
    assert "'scal'" in run.stderr and "Traceback" not in run.stderr
