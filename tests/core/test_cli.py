"""The command line as a user meets it: help with examples, one-line errors, exit codes."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from robowire.cli import main

COMMANDS = ["demo", "listen", "decode", "sim", "serve", "bridge", "record", "replay"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output and f"robowire {command}" in result.output


@pytest.mark.parametrize(
    "args, words",
    [
        (["listen", "ftp://host"], "unknown scheme 'ftp'"),
        (["listen", "capture.pcap"], "cannot tell the protocol"),
        (["decode", "spyglass", "/no/such/file.rec"], "no such file"),
        (["listen", "vrpn:/no/such/capture.pcap"], "no such file: /no/such/capture.pcap"),
        (["replay", "/no/such/run.mcap"], "no such file: /no/such/run.mcap"),
        (["sim", "spyglass", "--set", "novalue"], "expected KEY=VALUE"),
    ],
)
def test_errors_are_one_line_without_traceback(args, words):
    run = subprocess.run(
        [sys.executable, "-m", "robowire.cli", *args], capture_output=True, text=True, timeout=60
    )
    assert run.returncode != 0
    assert run.stdout == ""  # nothing started: no table, no half output
    assert run.stderr.count("\n") == 1, run.stderr
    assert words in run.stderr and "Traceback" not in run.stderr


def test_a_protocol_that_has_not_landed_says_so():
    from robowire import protocols
    from robowire.errors import ConfigError

    missing = []
    for name in protocols.names():
        try:
            protocols.get(name)
        except ConfigError as exc:
            missing.append((name, str(exc)))
    for name, message in missing:
        assert message == f"{name}: not available in robowire yet"
        run = subprocess.run(
            [sys.executable, "-m", "robowire.cli", "sim", name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 1
        assert run.stderr == f"robowire: error: {name}: not available in robowire yet\n"
