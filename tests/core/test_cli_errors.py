"""What a new user hit from a fresh clone (issue 8, item 7): every mistake is one error line
on stderr and a non-zero exit, at once, never a run that keeps going until Ctrl-C."""

import json
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data"
REC = str(DATA / "spyglass" / "recording-2009-05-28.rec")


def robowire(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """The CLI as a separate process; a run that does not end fails the test (timeout)."""
    return subprocess.run(
        [sys.executable, "-m", "robowire.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_error_line(run: subprocess.CompletedProcess[str]) -> str:
    """The single `robowire: error: ...` line of a failed run (asserting there is no more)."""
    assert run.returncode != 0, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and run.stderr.endswith("\n"), run.stderr
    assert lines[0].startswith("robowire: error: "), run.stderr
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port on 127.0.0.1 that something else already listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.mark.parametrize(
    "command",
    [
        ["sim", "spyglass", "--port", "{port}"],
        ["sim", "vrpn", "--port", "{port}"],
        ["serve", "spyglass://127.0.0.1:{port}", "--from", REC],
        ["bridge", REC, "--to", "vrpn://127.0.0.1:{port}"],
        # a source that cannot connect is never started when the sink cannot bind: no retry line
        ["bridge", "spyglass://127.0.0.1:1", "--to", "spyglass://127.0.0.1:{port}"],
    ],
    ids=["sim-spyglass", "sim-vrpn", "serve", "bridge", "bridge-unreachable-source"],
)
def test_a_port_in_use_ends_the_run_with_one_line(command, taken_port):
    run = robowire(*(arg.format(port=taken_port) for arg in command))
    line = one_error_line(run)
    assert run.returncode == 1
    assert line.startswith(f"robowire: error: cannot listen on 127.0.0.1:{taken_port}: "), line
    assert "address already in use" in line.lower()
    assert run.stdout == ""


@pytest.mark.parametrize(
    "args, words",
    [
        (["sim", "spyglass", "--port", "-1"], "'--port': -1 is not in the range 0<=x<=65535"),
        (["sim", "spyglass", "--port", "70000"], "'--port': 70000 is not in the range"),
        (["sim", "spyglass", "--rate", "0"], "'--rate': 0.0 is not in the range x>0"),
        (["sim", "spyglass", "--count", "0"], "'--count' / '--drones': 0 is not in the range x>=1"),
        (["demo", "--duration", "0"], "'--duration': 0.0 is not in the range x>0"),
        (["demo", "--duration", "-1"], "'--duration': -1.0 is not in the range x>0"),
        (["listen", "spyglass://127.0.0.1:1", "--count", "-1"], "'--count': -1 is not in"),
        (["listen", "spyglass://127.0.0.1:1", "--count", "0"], "'--count': 0 is not in"),
        (["listen", "spyglass://127.0.0.1:1", "--duration", "-1"], "'--duration': -1.0 is not"),
        (["replay", REC, "--speed", "0"], "'--speed': 0.0 is not in the range x>0"),
        (["decode"], "Missing argument"),
        (["nosuchcommand"], "No such command 'nosuchcommand'"),
    ],
)
def test_a_bad_value_is_one_line_before_anything_runs(args, words):
    run = robowire(*args)
    line = one_error_line(run)
    assert words in line
    assert line.endswith(f"(see 'robowire {args[0]} --help')") or "No such command" in line
    assert run.stdout == ""


def test_record_into_a_missing_directory_says_so_before_anything_starts():
    run = robowire("record", "spyglass://127.0.0.1:1", "-o", "/nonexistent_dir/x.mcap")
    line = one_error_line(run)
    assert line == (
        "robowire: error: cannot write /nonexistent_dir/x.mcap: no such directory: /nonexistent_dir"
    )
    assert run.stdout == ""


def test_an_unknown_url_option_is_named():
    run = robowire("listen", "spyglass://127.0.0.1:1?scal=0.01")
    line = one_error_line(run)
    assert run.returncode == 1
    assert "unknown option 'scal'" in line
    assert run.stdout == ""


def test_an_unknown_sim_setting_is_named():
    run = robowire("sim", "spyglass", "--set", "nosuchkey=1")
    line = one_error_line(run)
    assert run.returncode == 1
    assert "unknown setting 'nosuchkey'" in line


@pytest.mark.parametrize("protocol", ["spyglass", "vrpn"])
def test_decoding_noise_gives_error_lines_and_exit_1(protocol, tmp_path):
    noise = tmp_path / "noise.bin"
    noise.write_bytes(random.Random(8).randbytes(4000))
    run = robowire("decode", protocol, str(noise))
    assert run.returncode == 1, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert lines and any("error" in line for line in lines)
    errors = sum("error" in line for line in lines)
    assert run.stderr == f"decode: {len(lines) - errors} messages, {errors} errors\n"


def test_the_help_lists_every_landed_protocol_command():
    run = robowire("--help")
    assert run.returncode == 0
    commands = run.stdout.split("Commands:")[1].split()
    assert "xrp" in commands


def test_robowire_alone_shows_the_help():
    run = robowire()
    assert "Usage: robowire [OPTIONS] COMMAND" in run.stdout + run.stderr
    assert "robowire: error" not in run.stderr


# An unreachable source says ONCE that it retries, and why, then stays quiet. These wait for the
# protocol packages to move onto the Source template (service.py), which says it that way.
@pytest.mark.parametrize("url", ["spyglass://127.0.0.1:1", "vrpn+tcp://T@127.0.0.1:1"])
def test_an_unreachable_source_says_once_that_it_retries(url):
    run = robowire("listen", url, "--duration", "3")
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert "retrying" in lines[0] and "connection refused" in lines[0].lower(), run.stderr


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["ugcs", "mission", "--host", "127.0.0.1:1", "--device", "X", "/nonexistent.json"],
            "robowire: error: /nonexistent.json: No such file or directory",
        ),
        (
            ["sim", "vrsp", "--drones", "70000"],
            "robowire: error: vrsp sim: drones must be 1..65536",
        ),
    ],
)
def test_a_file_or_setting_a_command_reads_first_is_one_line(args, line):
    """Bad input found in a command's own code, before any run starts, is one line too."""
    run = robowire(*args)
    assert one_error_line(run) == line
    assert run.stdout == ""
