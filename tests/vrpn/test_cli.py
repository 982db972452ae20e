"""`robowire sim|listen|decode vrpn` as separate processes: typos in settings and URL options
are one error line naming them, and a cut capture decodes to its whole records, then one error;
what a file prints does not depend on how fast its sink writes."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from robowire import service
from robowire.gateway import Gateway, open_source
from robowire.protocols import vrpn
from robowire.sinks import JsonLinesSink
from support import free_port

ROBOWIRE = [sys.executable, "-m", "robowire.cli"]


def robowire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ROBOWIRE, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "args, typo",
    [
        (["sim", "vrpn", "--port", "0", "--set", "trackr=X", "--duration", "5"], "trackr"),
        (["listen", "vrpn://T@127.0.0.1:1?tme=receive", "--duration", "5"], "tme"),
        (
            ["serve", "vrpn://127.0.0.1:0?trackers=All", "--from", "vrpn://T@127.0.0.1:1"],
            "trackers",
        ),
    ],
)
def test_a_typo_is_one_error_line_naming_it(args: list[str], typo: str) -> None:
    run = robowire(*args)
    assert run.returncode != 0
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert repr(typo) in lines[0] and "Traceback" not in run.stderr


def test_the_option_sets_are_what_the_services_read() -> None:
    protocol = vrpn.PROTOCOL
    # `time` is every source's option (the Source template's), so no protocol lists it
    assert protocol.source_options == {"retry", "rate", "udp", "devices"}
    assert protocol.file_options == {"speed"}
    assert protocol.sink_options == {"tracker"}
    settings = {"tracker", "analog", "button", "dial", "reports", "trackers"}
    settings |= {"clock_offset", "clock_rate"}
    assert protocol.sim_settings == settings


def test_decode_of_a_cut_pcap_gives_the_good_lines_then_one_error(
    captures: Path, tmp_path: Path
) -> None:
    whole = (captures / "tcp_tracker.pcap").read_bytes()
    assert whole[:4] == b"\xd4\xc3\xb2\xa1"  # little-endian pcap: 24-byte file header
    starts, offset = [], 24
    while offset < len(whole):  # each record: 16-byte header (caplen at 8..12), then the frame
        starts.append(offset)
        offset += 16 + int.from_bytes(whole[offset + 8 : offset + 12], "little")
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(whole[: starts[-1] + 8])  # cut inside the last record's header
    run = robowire("decode", "vrpn", str(cut))
    assert run.returncode == 1 and "Traceback" not in run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    errors = [line for line in lines if "error" in line]
    assert len(errors) == 1 and lines[-1] is errors[0] and "offset" in errors[0]
    assert len(lines) > 400


@pytest.mark.parametrize("form", ["Tracker0@127.0.0.1:{port}", "Tracker0@tcp://127.0.0.1:{port}"])
def test_listen_takes_vrpn_own_names(form: str) -> None:
    """A name copied from a VRPN config (`Device@host:port`, `Device@tcp://host:port`) is a
    source as it is: the simulator's Tracker0 reports arrive."""
    port = free_port()
    sim = subprocess.Popen(
        [*ROBOWIRE, "sim", "vrpn", "--port", str(port), "--duration", "30"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert sim.stdout is not None and "listening on" in sim.stdout.readline()
        run = robowire("listen", form.format(port=port), "--json", "--count", "3")
        assert run.returncode == 0, run.stderr
        lines = [json.loads(line) for line in run.stdout.splitlines()]
        assert len(lines) == 3
        assert all(line["device"].startswith("Tracker0") for line in lines), lines
    finally:
        sim.terminate()
        sim.wait(timeout=10)


def test_a_vrpn_file_name_reads_the_log(captures: Path) -> None:
    """`Tracker0@file://log.vrpn` (how the mainline client names a log) reads the same log as
    `vrpn:log.vrpn`."""
    log_file = captures / "log_server_out.vrpn"
    native = robowire("listen", f"Tracker0@file://{log_file}", "--json")
    plain = robowire("listen", f"vrpn:{log_file}", "--json")
    assert native.returncode == plain.returncode == 0, native.stderr
    strip = [
        {k: v for k, v in json.loads(x).items() if k != "receive_time"}
        for x in plain.stdout.split("\n")
        if x
    ]
    assert (
        strip
        and [
            {k: v for k, v in json.loads(x).items() if k != "receive_time"}
            for x in native.stdout.split("\n")
            if x
        ]
        == strip
    )


def test_a_file_prints_the_same_lines_however_slowly_its_sink_writes(
    captures: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line prints the fields its update did not write from the table as it is when the
    sink writes it, so the file waits for its every-update sinks after each batch: a sink
    whose turn ends after one slice (a loaded machine) prints what one that writes its whole
    queue at once prints. (It did not: a dial's other value came from the next batch, and
    `test_a_vrpn_file_name_reads_the_log` failed under load.)"""

    def lines() -> list[dict[str, object]]:
        out = io.StringIO()
        url = f"vrpn:{captures / 'log_server_out.vrpn'}"
        asyncio.run(Gateway().add(open_source(url), JsonLinesSink(out)).run())
        rows = [json.loads(line) for line in out.getvalue().splitlines()]
        for row in rows:
            del row["receive_time"]
        return rows

    monkeypatch.setattr(service, "CALM_TURN", 1.0)  # a turn writes all the sink holds
    whole = lines()
    monkeypatch.setattr(service, "CALM_TURN", 0.0)  # one slice a turn
    assert len(whole) == 39 and lines() == whole
