"""`robowire decode xrp` on text and pcap captures, and the `robowire xrp drive` command."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import dpkt
import pytest
from click.testing import CliRunner

from robowire.cli import main
from robowire.protocols.xrp.codec import Packet, XRPMotor, encode_packet
from robowire.protocols.xrp.dissect import dissect as decode_capture
from robowire.protocols.xrp.model import Fleet
from robowire.protocols.xrp.session_robot import RobotSession

SRC = Path(__file__).resolve().parents[2] / "src"


def test_decode_text_capture_matches_golden(captures: Path) -> None:
    rows = list(decode_capture(str(captures / "capture_normal.txt")))
    golden = [json.loads(x) for x in (captures / "capture_normal.jsonl").read_text().splitlines()]
    assert len(rows) == len(golden)
    for row, want in zip(rows, golden, strict=True):
        assert row["type"] == "XRP" and row["direction"] == want["dir"]
        assert row["seq"] == want["seq"] and row["control"] == want["ctrl"]
        assert row["time"] == pytest.approx(want["t"])
        assert [b["tag"] for b in row["blocks"]] == [b["tag"] for b in want["blocks"]]
        json.dumps(row)  # JSON-ready


def test_decode_text_bad_lines_go_on(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    good = encode_packet(Packet(seq=1, control=1, blocks=(XRPMotor(id=0, value=0.5),))).hex()
    path.write_text(f"0.1 W>R 2 0001\nnot a line\n0.2 W>R 4 00010106\n0.3 W>R 10 {good}\n")
    rows = list(decode_capture(str(path)))
    assert [("error" in r) for r in rows] == [True, True, True, False]
    assert rows[2]["offset"] == 3 and "past the end" in rows[2]["error"]
    assert rows[3]["blocks"][0] == {"type": "XRPMotor", "tag": "0x12", "id": 0, "value": 0.5}


def _frame(src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> bytes:
    udp = dpkt.udp.UDP(sport=src[1], dport=dst[1], data=payload)
    udp.ulen = len(udp)
    ip = dpkt.ip.IP(src=socket.inet_aton(src[0]), dst=socket.inet_aton(dst[0]), p=17, data=udp)
    ip.len = len(ip)
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def test_decode_pcap_direction_from_ports(tmp_path: Path) -> None:
    robot = RobotSession(Fleet(1))
    status = robot.status_datagram(0.0)
    command = encode_packet(Packet(seq=7, control=1, blocks=(XRPMotor(id=1, value=-1.0),)))
    path = tmp_path / "xrp.pcap"
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f)
        writer.writepkt(_frame(("10.0.0.1", 50000), ("10.0.0.2", 3540), command), ts=1.5)
        writer.writepkt(_frame(("10.0.0.2", 3540), ("10.0.0.1", 50000), status), ts=1.6)
        writer.writepkt(_frame(("10.0.0.2", 3540), ("10.0.0.1", 50000), b"\x00"), ts=1.7)
    rows = list(decode_capture(str(path)))
    assert [r["direction"] for r in rows] == ["W>R", "R>W", "R>W"]
    assert rows[0]["seq"] == 7 and rows[0]["time"] == pytest.approx(1.5)
    assert [b["type"] for b in rows[1]["blocks"]][:5] == ["Encoder"] * 4 + ["DIO"]
    assert "error" in rows[2]


def test_cli_decode(captures: Path) -> None:
    result = CliRunner().invoke(main, ["decode", "xrp", str(captures / "capture_normal.txt")])
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in result.output.splitlines() if x.startswith("{")]
    assert len(lines) == 754


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_sim_and_drive() -> None:
    port = _free_udp_port()
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    sim = subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", "sim", "xrp", "--port", str(port),
         "--duration", "20"],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert sim.stderr is not None
        assert "listening on" in sim.stderr.readline()
        args = ["--host", "127.0.0.1", "--port", str(port), "--left", "0.5", "--right", "0.5"]
        drive = [sys.executable, "-m", "robowire.cli", "xrp", "drive", *args, "--duration", "1"]
        still = subprocess.run(drive, env=env, capture_output=True, text=True, timeout=30)
        assert still.returncode == 0, still.stderr
        assert "pass --enable" in still.stderr
        assert json.loads(still.stdout)["encoder_counts"][:2] == [0, 0]
        start = time.monotonic()
        moved = subprocess.run([*drive, "--enable"], env=env, capture_output=True, text=True,
                               timeout=30)  # fmt: skip
        assert moved.returncode == 0, moved.stderr
        result = json.loads(moved.stdout)
        assert result["enabled"] and result["encoder_counts"][0] > 100
        assert time.monotonic() - start < 15
    finally:
        sim.terminate()
        sim.wait(10)


def test_drive_help_has_example() -> None:
    result = CliRunner().invoke(main, ["xrp", "drive", "--help"])
    assert result.exit_code == 0 and "robowire xrp drive" in result.output


def test_cli_sim_then_listen_json() -> None:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    sim = subprocess.Popen(
        [sys.executable, "-m", "robowire.cli", "sim", "xrp", "--port", "0", "--count", "3",
         "--duration", "20"],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert sim.stderr is not None
        line = sim.stderr.readline()
        found = re.search(r"on (127\.0\.0\.1:\d+); Ctrl-C ends it", line)
        assert found, line
        address = found.group(1)
        url = f"xrp://{address}?enable=1&left=0.5&right=0.5"
        run = subprocess.run(
            [sys.executable, "-m", "robowire.cli", "listen", url, "--json", "--count", "12"],
            env=env, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    finally:
        sim.terminate()
        sim.wait(10)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(x) for x in run.stdout.splitlines()]
    assert len(lines) == 12
    assert all(x["source"] == f"xrp@{address}" and x["device"] == "xrp" for x in lines)
    assert lines[-1]["position"][0] > 0.0  # driving forward along +x
    assert lines[-1]["telemetry"]["enabled"]["value"] == 1.0


def test_decode_cut_pcap_gives_the_whole_datagrams_then_one_error(tmp_path: Path) -> None:
    command = encode_packet(Packet(seq=7, control=1, blocks=(XRPMotor(id=1, value=-1.0),)))
    path = tmp_path / "cut.pcap"
    with path.open("wb") as f:
        writer = dpkt.pcap.Writer(f)
        for k in range(3):
            writer.writepkt(_frame(("10.0.0.1", 50000), ("10.0.0.2", 3540), command), ts=1.0 + k)
    path.write_bytes(path.read_bytes()[:-60])  # into the last record's header
    rows = list(decode_capture(str(path)))
    assert [r.get("type") for r in rows[:2]] == ["XRP", "XRP"]
    assert len(rows) == 3 and "cut" in rows[2]["error"] and rows[2]["offset"] > 0
    run = subprocess.run(
        [sys.executable, "-m", "robowire.cli", "decode", "xrp", str(path)],
        env={**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert len(run.stdout.splitlines()) == 3
